//! TPC-H on the 3-worker in-memory cluster with joins forced partitioned,
//! with and without runtime Bloom filters: per query, the joins filtered,
//! rows and bytes entering the network shuffles, plan bytes sent and the
//! median wall time of 5 runs (with and without interleaved), every answer
//! checked against single-node DataFusion.
//!
//! `cargo bench --workspace --all-features --bench tpch`; `TPCH_SF` sets the
//! scale factor (default 1; the data is generated once into
//! `target/tpch/sf<SF>/`), `TPCH_RUNS` the runs per query (default 5),
//! `TPCH_QUERIES` a comma-separated subset (e.g. `3,17,18`).

#[path = "../tests/common/tpch.rs"]
mod tpch;

use datafusion::physical_plan::{collect, ExecutionPlan};
use datafusion::prelude::SessionContext;
use filterstore_datafusion::cluster::{
    in_memory_cluster, partitioned_join_config, WorkerFunctions,
};
use filterstore_datafusion::metrics::{executed_plan, is_bloom_filter, one_line, sum_metric};
use filterstore_datafusion::{last_report, FilterOutcome, RuntimeFilterConfig, Verdict};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[derive(Default, Clone, Copy)]
struct Figures {
    shuffle_rows: usize,
    shuffle_bytes: usize,
    plan_bytes: usize,
}

fn is_shuffle(n: &dyn ExecutionPlan) -> bool {
    one_line(n).contains("NetworkShuffleExec")
}

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn cpu() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "?".into())
}

/// Runs a query once: (wall ms, rows, figures from the executed plan).
async fn once(ctx: &SessionContext, stmts: &[String]) -> Res<(f64, Vec<Vec<tpch::Cell>>, Figures)> {
    let started = Instant::now();
    let (select, setup) = stmts.split_last().ok_or("no statement")?;
    let mut last = None;
    for s in setup.iter().chain(std::iter::once(select)) {
        let df = ctx.sql(s).await?;
        let plan = df.create_physical_plan().await?;
        let batches = collect(Arc::clone(&plan), ctx.task_ctx()).await?;
        if batches.iter().any(|b| b.num_rows() > 0)
            || s.trim_start().to_lowercase().starts_with("select")
        {
            last = Some((plan, batches));
        }
    }
    let wall = started.elapsed().as_secs_f64() * 1e3;
    let (plan, batches) = last.ok_or("no result")?;
    let plan = executed_plan(&plan).await?;
    let figures = Figures {
        shuffle_rows: sum_metric(&plan, "output_rows", is_shuffle)?,
        shuffle_bytes: sum_metric(&plan, "output_bytes", is_shuffle)?,
        plan_bytes: sum_metric(&plan, "plan_bytes_sent", |_| true)?,
    };
    Ok((wall, tpch::rows(&batches), figures))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Res<()> {
    let sf: f64 = env("TPCH_SF", 1.0);
    let runs: usize = env("TPCH_RUNS", 5);
    let only: Vec<usize> = std::env::var("TPCH_QUERIES")
        .map(|s| s.split(',').filter_map(|q| q.trim().parse().ok()).collect())
        .unwrap_or_else(|_| (1..=22).collect());
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../target/tpch")
        .join(format!("sf{sf}"));
    if !dir.join("region").exists() {
        let started = Instant::now();
        tpch::generate(&dir, sf)?;
        println!(
            "generated TPC-H SF {sf} in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    let single = SessionContext::new();
    tpch::register(&single, &dir).await?;
    let cfg = || partitioned_join_config(3);
    let without = in_memory_cluster(3, WorkerFunctions::Registered, cfg()?, None)?;
    tpch::register(&without, &dir).await?;
    let with = in_memory_cluster(
        3,
        WorkerFunctions::Registered,
        cfg()?,
        Some(RuntimeFilterConfig::default()),
    )?;
    tpch::register(&with, &dir).await?;

    println!("TPC-H SF {sf}, 3 in-memory workers, partitioned joins, {runs} runs per query, CPU {}, load before {}", cpu(), loadavg());
    println!(
        "{:>4} {:>3} {:>12} {:>12} {:>13} {:>13} {:>10} {:>10} {:>9} {:>9} {:>6} {:>9}",
        "q",
        "bf",
        "rows w/o",
        "rows with",
        "bytes w/o",
        "bytes with",
        "plan w/o",
        "plan with",
        "ms w/o",
        "ms with",
        "ratio",
        "ready ms"
    );
    let (mut wrong, mut applied) = (0usize, 0usize);
    let (mut bytes_without, mut bytes_with) = (0usize, 0usize);
    let (mut sum_without, mut sum_with, mut worst) = (0.0, 0.0, 0.0f64);
    for q in only {
        let stmts = tpch::statements(q);
        let (_, expected, _) = once(&single, &stmts).await?;
        let (mut t0, mut t1) = (Vec::new(), Vec::new());
        let (mut f0, mut f1) = (Figures::default(), Figures::default());
        let mut build_ms = 0.0;
        let mut filters = 0;
        for r in 0..runs {
            // Interleaved, the order alternating by run.
            for with_rule in if r % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            } {
                let ctx = if with_rule { &with } else { &without };
                let (ms, rows, figs) = once(ctx, &stmts).await?;
                if let Some(d) = tpch::diff(&expected, &rows) {
                    wrong += 1;
                    println!(
                        "q{q}: WRONG RESULT ({}): {d}",
                        if with_rule { "with" } else { "without" }
                    );
                }
                if with_rule {
                    t1.push(ms);
                    f1 = figs;
                    let report = last_report(&with).unwrap_or_default();
                    filters = report.built();
                    build_ms = report
                        .filters()
                        .filter_map(|f| match f.outcome() {
                            Some(FilterOutcome::Built { ready_after, .. }) => {
                                Some(ready_after.as_secs_f64() * 1e3)
                            }
                            _ => None,
                        })
                        .fold(0.0, f64::max);
                } else {
                    t0.push(ms);
                    f0 = figs;
                }
            }
        }
        let (m0, m1) = (median(&mut t0), median(&mut t1));
        applied += filters;
        bytes_without += f0.shuffle_bytes;
        bytes_with += f1.shuffle_bytes;
        sum_without += m0;
        sum_with += m1;
        worst = worst.max(m1 / m0);
        println!(
            "{:>4} {:>3} {:>12} {:>12} {:>13} {:>13} {:>10} {:>10} {:>9.1} {:>9.1} {:>6.3} {:>9.1}",
            format!("q{q}"),
            filters,
            f0.shuffle_rows,
            f1.shuffle_rows,
            f0.shuffle_bytes,
            f1.shuffle_bytes,
            f0.plan_bytes,
            f1.plan_bytes,
            m0,
            m1,
            m1 / m0,
            build_ms
        );
        if let Some(r) = last_report(&with) {
            for d in r
                .decisions
                .iter()
                .filter(|d| matches!(d.verdict, Verdict::Placed { .. }))
            {
                println!("       {d}");
            }
        }
    }
    let _ = is_bloom_filter;
    println!("load after {}", loadavg());
    println!("RESULT tpch.queries {}", tpch_queries());
    println!("RESULT tpch.wrong_results {wrong}");
    println!("RESULT tpch.filters_applied {applied}");
    println!(
        "RESULT tpch.shuffle_bytes_ratio {:.3}",
        bytes_with as f64 / bytes_without.max(1) as f64
    );
    println!("RESULT tpch.wall_ratio_sum {:.3}", sum_with / sum_without);
    println!("RESULT tpch.wall_ratio_max {worst:.3}");
    Ok(())
}

fn tpch_queries() -> usize {
    std::env::var("TPCH_QUERIES")
        .map(|s| s.split(',').count())
        .unwrap_or(22)
}
