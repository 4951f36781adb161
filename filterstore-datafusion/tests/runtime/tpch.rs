//! The 22 TPC-H queries on the 3-worker in-memory cluster with joins forced
//! partitioned, with and without runtime Bloom filters, against single-node
//! DataFusion: every result must be the same. Data: `tpchgen-arrow` at
//! scale factor 0.1 (`TPCH_TEST_SF` overrides), as Parquet files.
//!
//! The rule runs twice: with its default thresholds (where it pays) and
//! forced (wherever it may), so the test exercises every placement the rule
//! allows on TPC-H's shapes, not only those that pay at this scale.

use crate::common::cluster::{in_memory_cluster, partitioned_join_config, WorkerFunctions};
use crate::common::tpch;
use datafusion::prelude::SessionContext;
use filterstore_datafusion::{last_report, RuntimeFilterConfig};
use std::time::Duration;

fn sf() -> f64 {
    std::env::var("TPCH_TEST_SF")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.1)
}

async fn cluster(rule: Option<RuntimeFilterConfig>, dir: &std::path::Path) -> SessionContext {
    let ctx = in_memory_cluster(
        3,
        WorkerFunctions::Registered,
        partitioned_join_config(3).unwrap(),
        rule,
    )
    .unwrap();
    tpch::register(&ctx, dir).await.unwrap();
    ctx
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_results_are_unchanged_by_runtime_filters() {
    tokio::time::timeout(Duration::from_secs(900), body())
        .await
        .expect("TPC-H test timed out");
}

async fn body() {
    let dir = tempfile::tempdir().unwrap();
    tpch::generate(dir.path(), sf()).unwrap();
    let single = SessionContext::new();
    tpch::register(&single, dir.path()).await.unwrap();
    let without = cluster(None, dir.path()).await;
    let small = RuntimeFilterConfig {
        // At SF 0.1 lineitem has 600k rows: scale the size thresholds with it.
        min_filtered_rows: 10_000,
        ..RuntimeFilterConfig::default()
    };
    let with = cluster(Some(small), dir.path()).await;
    let forced = cluster(
        Some(RuntimeFilterConfig {
            force: true,
            ..RuntimeFilterConfig::default()
        }),
        dir.path(),
    )
    .await;
    let (mut applied, mut forced_applied, mut reverse) = (0, 0, 0);
    for q in 1..=22 {
        let stmts = tpch::statements(q);
        let expected = tpch::rows(&tpch::run(&single, &stmts).await.unwrap());
        for (name, ctx) in [("without", &without), ("with", &with), ("forced", &forced)] {
            let got = tpch::run(ctx, &stmts)
                .await
                .unwrap_or_else(|e| panic!("q{q} {name}: {e}"));
            let got = tpch::rows(&got);
            if let Some(d) = tpch::diff(&expected, &got) {
                panic!("q{q} {name} differs from single-node DataFusion: {d}");
            }
        }
        let report = |ctx: &SessionContext| last_report(ctx).map_or(0, |r| r.built());
        applied += report(&with);
        forced_applied += report(&forced);
        reverse += [&with, &forced]
            .iter()
            .map(|c| reverse_built(c))
            .sum::<usize>();
        println!(
            "q{q}: {} rows, filters {} (default) / {} (forced)",
            expected.len(),
            report(&with),
            report(&forced)
        );
    }
    println!("filters built: {applied} (default thresholds), {forced_applied} (forced)");
    // The rule must have had something to do, or this test checks nothing.
    assert!(applied > 0, "no runtime filter built with the default rule");
    assert!(forced_applied > applied, "forcing placed no more filters");
    // Nor the build-side direction (TPC-H q21's NOT EXISTS, q9, q5).
    println!("reverse filters built: {reverse}");
    assert!(reverse > 0, "no reverse filter built");
}

/// Filters built on a join's build (left) side by the last query: reverse
/// filters.
fn reverse_built(ctx: &SessionContext) -> usize {
    let Some(r) = last_report(ctx) else {
        return 0;
    };
    r.decisions
        .iter()
        .filter(|d| d.side == datafusion::common::JoinSide::Left)
        .filter(|d| match &d.verdict {
            filterstore_datafusion::Verdict::Placed { filter, .. } => {
                filter.outcome().is_some_and(|o| o.is_built())
            }
            _ => false,
        })
        .count()
}
