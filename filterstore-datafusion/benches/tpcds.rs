//! TPC-DS on a 3-worker cluster with joins forced partitioned, without
//! runtime Bloom filters, with them, and with them forced; on the in-memory
//! cluster and on 3 `filterstore-worker` processes on localhost. Per query:
//! filters built, rows entering the network shuffles, the shuffle bytes'
//! ratio, the ratio of rows leaving the Parquet scans ("scan", the last run
//! with the rule against the last without) and of those leaving the probe
//! sides' scans ("probe": a runtime filter above them, `-` where none; see
//! `tests/common/scans.rs`), the median wall time of each
//! mode (interleaved), and the load;
//! every answer checked against single-node DataFusion (a query it cannot
//! run is skipped); then `EXPLAIN` of every query timed with and without the
//! rule.
//!
//! `cargo bench --workspace --all-features --bench tpcds`. `TPCDS_SF` sets
//! the scale factor (default 1; the data is generated once by `tpcdsgen`
//! into `$CARGO_TARGET_DIR/tpcds/sf<SF>/`), `TPCDS_RUNS` the runs per query
//! and mode (default 3), `TPCDS_QUERIES` a subset (e.g. `64,72,85`),
//! `TPCDS_CLUSTERS` any of `memory`, `process` and `net` (default `memory,process`;
//! `net`, as root: the process cluster on a loopback limited to `TPCDS_NET`,
//! default `1gbit`: `RESULT tpcds.net.…`).

#[path = "../tests/common/tpch.rs"]
mod tpch;

#[path = "../tests/common/tpcds.rs"]
mod tpcds;

mod cluster;

use cluster::{
    cache, cpu, env, explain_all, loadavg, memory, net_outside, processes, run_all, Res,
};
use datafusion::arrow::array::RecordBatch;
use datafusion::prelude::SessionContext;

fn same(a: &[RecordBatch], b: &[RecordBatch]) -> bool {
    tpch::diff(&tpch::rows(a), &tpch::rows(b)).is_none()
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Res<()> {
    let sf: f64 = env("TPCDS_SF", 1.0);
    let runs: usize = env("TPCDS_RUNS", 3);
    let only: Vec<usize> = std::env::var("TPCDS_QUERIES")
        .map(|s| s.split(',').filter_map(|q| q.trim().parse().ok()).collect())
        .unwrap_or_else(|_| (1..=99).collect());
    let clusters = std::env::var("TPCDS_CLUSTERS").unwrap_or_else(|_| "memory,process".into());
    let dir = tpcds::cached(sf).await?;
    let queries: Vec<(String, Vec<String>)> = only
        .iter()
        .map(|&q| (format!("q{q}"), tpcds::statements(q)))
        .collect();
    let single = SessionContext::new();
    tpcds::register(&single, &dir).await?;
    let rule = cluster::rule_config();
    println!(
        "TPC-DS SF {sf}, 3 workers, partitioned joins, {runs} runs per query and mode, CPU {}, load before {}",
        cpu(),
        loadavg()
    );
    // The in-memory cluster's figures, to compare the others' with.
    let mut in_memory = None;
    for kind in clusters.split(',') {
        let (sessions, prefix) = match kind.trim() {
            "memory" => (memory(&rule)?, "tpcds"),
            "process" => (processes(&rule).await?, "tpcds.proc"),
            "net" if net_outside("tpcds") => continue,
            "net" => (processes(&rule).await?, "tpcds.net"),
            other => return Err(format!("unknown cluster kind {other}").into()),
        };
        for ctx in [&sessions.without, &sessions.with, &sessions.forced] {
            tpcds::register(ctx, &dir).await?;
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
