//! TPC-H on a 3-worker cluster with joins forced partitioned, without
//! runtime Bloom filters, with them, and with them forced; on the in-memory
//! cluster and on 3 `filterstore-worker` processes on localhost. Per query:
//! filters built, rows entering the network shuffles, the shuffle bytes'
//! ratio, the ratio of rows leaving the Parquet scans ("scan", the last run
//! with the rule against the last without) and of those leaving the probe
//! sides' scans ("probe": a runtime filter above them, `-` where none; see
//! `tests/common/scans.rs`), the median wall time of each
//! mode (interleaved), and the load;
//! every answer checked against single-node DataFusion; then `EXPLAIN` of
//! every query timed with and without the rule.
//!
//! `cargo bench --workspace --all-features --bench tpch`. `TPCH_SF` sets the
//! scale factor (default 1; the data is generated once into
//! `$CARGO_TARGET_DIR/tpch/sf<SF>/`), `TPCH_RUNS` the runs per query and mode
//! (default 3), `TPCH_QUERIES` a subset (e.g. `3,17,18`), `TPCH_CLUSTERS`
//! any of `memory`, `process` and `net` (default `memory,process`). `net`
//! (as root) is the process cluster inside a network namespace whose
//! loopback `tc` limits to `TPCH_NET` (default `1gbit`), shared by all of
//! its traffic: `RESULT tpch.net.…` (`cluster/mod.rs`, `net_outside`).

#[path = "../tests/common/tpch.rs"]
mod tpch;

mod cluster;

use cluster::cache::data_dir;
use cluster::{cpu, env, explain_all, loadavg, memory, net_outside, processes, run_all, Res};
use datafusion::arrow::array::RecordBatch;
use datafusion::prelude::SessionContext;
use std::time::Instant;

fn same(a: &[RecordBatch], b: &[RecordBatch]) -> bool {
    tpch::diff(&tpch::rows(a), &tpch::rows(b)).is_none()
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Res<()> {
    let sf: f64 = env("TPCH_SF", 1.0);
    let runs: usize = env("TPCH_RUNS", 3);
    let only: Vec<usize> = std::env::var("TPCH_QUERIES")
        .map(|s| s.split(',').filter_map(|q| q.trim().parse().ok()).collect())
        .unwrap_or_else(|_| (1..=22).collect());
    let clusters = std::env::var("TPCH_CLUSTERS").unwrap_or_else(|_| "memory,process".into());
    let dir = data_dir("tpch", sf);
    if !dir.join("region").exists() {
        let started = Instant::now();
        tpch::generate(&dir, sf)?;
        println!(
            "generated TPC-H SF {sf} in {:.1} s into {}",
            started.elapsed().as_secs_f64(),
            dir.display()
        );
    }
    let queries: Vec<(String, Vec<String>)> = only
        .iter()
        .map(|&q| (format!("q{q}"), tpch::statements(q)))
        .collect();
    let single = SessionContext::new();
    tpch::register(&single, &dir).await?;
    let rule = cluster::rule_config();
    println!(
        "TPC-H SF {sf}, 3 workers, partitioned joins, {runs} runs per query and mode, CPU {}, load before {}",
        cpu(),
        loadavg()
    );
    // The in-memory cluster's figures, to compare the others' with.
    let mut in_memory = None;
    for kind in clusters.split(',') {
        let (sessions, prefix) = match kind.trim() {
            "memory" => (memory(&rule)?, "tpch"),
            "process" => (processes(&rule).await?, "tpch.proc"),
            "net" if net_outside("tpch") => continue,
            "net" => (processes(&rule).await?, "tpch.net"),
            other => return Err(format!("unknown cluster kind {other}").into()),
        };
        for ctx in [&sessions.without, &sessions.with, &sessions.forced] {
            tpch::register(ctx, &dir).await?;
        }
        println!("== {kind} cluster (load {})", loadavg());
        let totals = run_all(kind, &sessions, &single, &queries, runs, same).await?;
        totals.print(prefix);
        match &in_memory {
            Some(m) => cluster::compare_shipped(m, &totals, prefix),
            None if kind.trim() == "memory" => in_memory = Some(totals),
            None => {}
        }
        if kind.trim() == "memory" {
            let (with, without) = explain_all(&sessions, &queries, runs).await?;
            println!(
                "EXPLAIN of {} queries: {without:.1} ms without the rule, {with:.1} ms with it",
                queries.len()
            );
            println!(
                "RESULT {prefix}.explain_ms_ratio {:.3}",
                with / without.max(1e-9)
            );
        }
        println!("load after {}", loadavg());
    }
    Ok(())
}
