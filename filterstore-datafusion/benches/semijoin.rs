//! Runtime filters on a star join on the in-memory cluster (3 workers):
//! partitioned and broadcast plans, a selective (10%) and a non-selective
//! (90%) dimension; without the rule, with it (its own decision), and with
//! it forced (what a filter costs where the rule declines). Prints rows and
//! bytes that crossed the fact side's shuffle, plan bytes sent to workers,
//! wall time (median of 5 runs, interleaved; planning and the creation side
//! included), the decision, and `RESULT` lines.
//!
//! Run: `cargo bench --workspace --bench semijoin` (in release, as every
//! cargo command of this workspace).

#[path = "../tests/common/cluster.rs"]
mod cluster;
#[path = "../tests/common/metrics.rs"]
mod metrics;
#[path = "../tests/common/star.rs"]
mod star;

use cluster::{broadcast_join_config, in_memory_cluster, partitioned_join_config, WorkerFunctions};
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::physical_plan::{collect, ExecutionPlan};
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use filterstore_datafusion::{last_report, RuntimeFilterConfig};
use metrics::{is_shuffle_of, sum_metric};
use star::{write_star, StarSpec};
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

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Plain,
    Rule,
    Forced,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Plain => "plain",
            Mode::Rule => "rule",
            Mode::Forced => "forced",
        }
    }

    fn config(self) -> Option<RuntimeFilterConfig> {
        match self {
            Mode::Plain => None,
            Mode::Rule => Some(RuntimeFilterConfig::default()),
            Mode::Forced => Some(RuntimeFilterConfig {
                force: true,
                ..RuntimeFilterConfig::default()
            }),
        }
    }
}

/// One run: wall ms, the executed plan, the decisions.
async fn once(
    ctx: &SessionContext,
    query: &str,
) -> Result<(f64, Arc<dyn ExecutionPlan>, String), Box<dyn Error>> {
    let start = Instant::now();
    let plan = ctx.sql(query).await?.create_physical_plan().await?;
    collect(Arc::clone(&plan), ctx.task_ctx()).await?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    let decision = last_report(ctx).map_or_else(|| "none".into(), |r| summary(&r));
    Ok((ms, plan, decision))
}

fn summary(r: &filterstore_datafusion::RuntimeFilterReport) -> String {
    let probe = r
        .decisions
        .iter()
        .find(|d| d.side == datafusion::common::JoinSide::Right)
        .map(|d| d.to_string())
        .unwrap_or_default();
    probe.split(": ").skip(1).collect::<Vec<_>>().join(": ")
}

async fn measure(
    ctxs: &[(Mode, SessionContext)],
    percent: i32,
) -> Result<Vec<Figures>, Box<dyn Error>> {
    let query = format!("SELECT count(*), sum(f.f_val) FROM fact f JOIN dim d ON f.f_dkey = d.d_key WHERE d.d_cat < {percent}");
    let mut times = vec![Vec::new(); ctxs.len()];
    let mut last = vec![None; ctxs.len()];
    for run in 0..RUNS {
        for i in 0..ctxs.len() {
            // Interleaved, the order rotating by run.
            let i = (i + run) % ctxs.len();
            let (ms, plan, decision) = once(&ctxs[i].1, &query).await?;
            times[i].push(ms);
            last[i] = Some((plan, decision));
        }
    }
    let mut out = Vec::new();
    for (t, l) in times.iter_mut().zip(last) {
        t.sort_by(f64::total_cmp);
        let (plan, decision) = l.ok_or("no run")?;
        let plan = metrics::executed_plan(&plan).await?;
        out.push(Figures {
            rows: fact_shuffle_metric(&plan, "output_rows")?,
            bytes: fact_shuffle_metric(&plan, "bytes_transferred")?,
            plan_bytes: sum_metric(&plan, "plan_bytes_sent", |_| true)?,
            ms: t[RUNS / 2],
            decision,
        });
    }
    Ok(out)
}

async fn cluster(
    config: SessionConfig,
    mode: Mode,
    dir: &std::path::Path,
) -> Result<SessionContext, Box<dyn Error>> {
    let ctx = in_memory_cluster(3, WorkerFunctions::Registered, config, mode.config())?;
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
        "{:<12} {:>4} {:<7} {:>9} {:>11} {:>10} {:>8}  decision (probe side)",
        "plan", "sel%", "filter", "rows", "bytes", "plan B", "ms"
    );
    for (plan_name, partitioned) in [("partitioned", true), ("broadcast", false)] {
        let mut ctxs = Vec::new();
        for mode in [Mode::Plain, Mode::Rule, Mode::Forced] {
            let config = if partitioned {
                partitioned_join_config(3)?
            } else {
                broadcast_join_config(3)?
            };
            ctxs.push((mode, cluster(config, mode, dir.path()).await?));
        }
        for percent in [10, 90] {
            let figures = measure(&ctxs, percent).await?;
            for ((mode, _), f) in ctxs.iter().zip(figures) {
                let tag = format!("{plan_name}_{percent}pct_{}", mode.name());
                println!(
                    "{plan_name:<12} {percent:>4} {:<7} {:>9} {:>11} {:>10} {:>8.1}  {}",
                    mode.name(),
                    f.rows,
                    f.bytes,
                    f.plan_bytes,
                    f.ms,
                    f.decision
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
