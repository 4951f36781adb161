//! The semi-join prefilter on the in-memory cluster (3 workers): partitioned
//! and broadcast plans, a selective (10%) and a non-selective (90%)
//! dimension, with and without the Bloom filter. Prints rows and bytes that
//! crossed the fact side's shuffle, plan bytes sent to workers, wall time
//! (median of 5 runs, query 1 included for the Bloom), and `RESULT` lines.
//!
//! Run: `cargo bench --workspace --bench semijoin` (in release, as every
//! cargo command of this workspace).

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::physical_plan::{collect, ExecutionPlan};
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use datafusion_distributed::{rewrite_distributed_plan_with_metrics, DistributedMetricsFormat};
use filterstore_datafusion::cluster::{
    broadcast_join_config, in_memory_cluster, partitioned_join_config, WorkerFunctions,
};
use filterstore_datafusion::metrics::{is_shuffle_of, sum_metric};
use filterstore_datafusion::star::{write_star, StarSpec};
use filterstore_datafusion::{semi_join_prefilter, Prefilter};
use std::error::Error;
use std::sync::Arc;
use std::time::Instant;

const RUNS: usize = 5;

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

struct Figures {
    rows: usize,
    bytes: usize,
    plan_bytes: usize,
    ms: f64,
    decision: String,
}

fn fact_shuffle_metric(
    plan: &Arc<dyn ExecutionPlan>,
    name: &str,
) -> datafusion::error::Result<usize> {
    let mut total = 0;
    plan.apply(|n| {
        if is_shuffle_of(n.as_ref(), "f_dkey") {
            total += sum_metric(n, name, |m| is_shuffle_of(m, "f_dkey"))?;
            return Ok(TreeNodeRecursion::Jump);
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(total)
}

async fn measure(
    ctx: &SessionContext,
    percent: i32,
    bloom: bool,
) -> Result<Figures, Box<dyn Error>> {
    let query = format!("SELECT count(*), sum(f.f_val) FROM fact f JOIN dim d ON f.f_dkey = d.d_key WHERE d.d_cat < {percent}");
    let mut prefilter = Prefilter::new(
        format!("SELECT bloom_agg(d_key) FROM dim WHERE d_cat < {percent}"),
        "f_dkey",
    );
    prefilter.force = true;
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..RUNS {
        let start = Instant::now();
        let (plan, decision) = if bloom {
            let r = semi_join_prefilter(ctx, &query, &prefilter).await?;
            (r.plan, format!("{:?}", r.decision))
        } else {
            (
                ctx.sql(&query).await?.create_physical_plan().await?,
                "none".into(),
            )
        };
        collect(Arc::clone(&plan), ctx.task_ctx()).await?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
        last = Some((plan, decision));
    }
    times.sort_by(f64::total_cmp);
    let (plan, decision) = last.ok_or("no run")?;
    let plan =
        rewrite_distributed_plan_with_metrics(plan, DistributedMetricsFormat::Aggregated).await?;
    Ok(Figures {
        rows: fact_shuffle_metric(&plan, "output_rows")?,
        bytes: fact_shuffle_metric(&plan, "bytes_transferred")?,
        plan_bytes: sum_metric(&plan, "plan_bytes_sent", |_| true)?,
        ms: times[RUNS / 2],
        decision,
    })
}

async fn cluster(
    config: SessionConfig,
    dir: &std::path::Path,
) -> Result<SessionContext, Box<dyn Error>> {
    let ctx = in_memory_cluster(3, WorkerFunctions::Registered, config)?;
    for t in ["fact", "dim"] {
        ctx.register_parquet(
            t,
            dir.join(t).to_str().ok_or("path")?,
            ParquetReadOptions::default(),
        )
        .await?;
    }
    Ok(ctx)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    write_star(dir.path(), StarSpec::default())?;
    println!(
        "1M-row fact (8 files), 50k-row dimension (6 files), 3 in-memory workers; load {}",
        load()
    );
    println!(
        "{:<12} {:>4} {:<6} {:>9} {:>11} {:>10} {:>8}  decision",
        "plan", "sel%", "bloom", "rows", "bytes", "plan B", "ms"
    );
    for (plan_name, config) in [
        ("partitioned", partitioned_join_config(3)?),
        ("broadcast", broadcast_join_config(3)?),
    ] {
        let ctx = cluster(config, dir.path()).await?;
        for percent in [10, 90] {
            for bloom in [false, true] {
                let f = measure(&ctx, percent, bloom).await?;
                let tag = format!(
                    "{plan_name}_{percent}pct_{}",
                    if bloom { "bloom" } else { "plain" }
                );
                println!(
                    "{plan_name:<12} {percent:>4} {:<6} {:>9} {:>11} {:>10} {:>8.1}  {}",
                    bloom,
                    f.rows,
                    f.bytes,
                    f.plan_bytes,
                    f.ms,
                    short(&f.decision)
                );
                println!("RESULT {tag}_shuffled_rows {} rows", f.rows);
                println!("RESULT {tag}_shuffled_bytes {} bytes", f.bytes);
                println!("RESULT {tag}_plan_bytes {} bytes", f.plan_bytes);
                println!("RESULT {tag}_wall {:.1} ms (load {})", f.ms, load());
            }
        }
    }
    Ok(())
}

fn short(d: &str) -> String {
    if d.starts_with("Applied") || matches!(d, "none") {
        return d.split(',').next().unwrap_or(d).to_string();
    }
    d.to_string()
}
