//! The 99 TPC-DS queries on the 3-worker in-memory cluster with joins
//! forced partitioned, without runtime Bloom filters, with them (default
//! settings) and with them forced, against single-node DataFusion: every
//! result must be the same (a multiset, floats within 1e-9 relative), and no
//! query may run over 60 s in any mode. A query single-node DataFusion cannot
//! run is skipped, with its error printed and counted. Data: `tpcdsgen` at
//! scale factor 0.1 (`TPCDS_TEST_SF` overrides), generated once into
//! `$CARGO_TARGET_DIR/tpcds/sf<SF>/`.
//!
//! Every failure is collected before the test fails, so one run names every
//! query that differs, errs or hangs.

use crate::common::cluster::{in_memory_cluster, partitioned_join_config, WorkerFunctions};
use crate::common::{tpcds, tpch};
use datafusion::arrow::array::{Int64Array, RecordBatch};
use datafusion::prelude::SessionContext;
use filterstore_datafusion::{last_report, RuntimeFilterConfig};
use std::time::{Duration, Instant};

/// The longest any query may run in any mode.
const LIMIT: Duration = Duration::from_secs(60);

fn sf() -> f64 {
    std::env::var("TPCDS_TEST_SF")
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
    tpcds::register(&ctx, dir).await.unwrap();
    ctx
}

/// A query's run: its rows and wall time, or why it has none.
enum Run {
    Rows(Vec<RecordBatch>, Duration),
    Failed(String),
    TimedOut,
}

async fn run(ctx: &SessionContext, stmts: &[String]) -> Run {
    let started = Instant::now();
    let body = async {
        let mut out = Vec::new();
        for s in stmts {
            out = ctx.sql(s).await?.collect().await?;
        }
        Ok::<_, datafusion::error::DataFusionError>(out)
    };
    match tokio::time::timeout(LIMIT, body).await {
        Ok(Ok(rows)) => Run::Rows(rows, started.elapsed()),
        Ok(Err(e)) => Run::Failed(e.to_string()),
        Err(_) => Run::TimedOut,
    }
}

/// Filters built by the session's last query.
fn built(ctx: &SessionContext) -> usize {
    last_report(ctx).map_or(0, |r| r.built())
}

/// The cached data is complete: every table (but the returns, whose rows
/// depend on the sales) holds the rows, every sales table the orders, that
/// tpcdsgen generates at this scale factor.
async fn check_data(ctx: &SessionContext) {
    for (sql, expected) in tpcds::expected_counts(sf()).unwrap() {
        let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
        let got = batches[0]
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .map(|a| a.value(0));
        assert_eq!(got, Some(expected as i64), "{sql}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpcds_results_are_unchanged_by_runtime_filters() {
    // 99 queries in four modes, each under LIMIT: the whole test has a
    // bound too, in case a query's timeout itself fails to end it.
    tokio::time::timeout(Duration::from_secs(1800), body())
        .await
        .expect("TPC-DS test timed out");
}

async fn body() {
    let started = Instant::now();
    let dir = tpcds::cached(sf()).await.unwrap();
    let single = SessionContext::new();
    tpcds::register(&single, &dir).await.unwrap();
    check_data(&single).await;
    let without = cluster(None, &dir).await;
    let with = cluster(Some(RuntimeFilterConfig::default()), &dir).await;
    let forced = RuntimeFilterConfig {
        force: true,
        ..RuntimeFilterConfig::default()
    };
    let forced = cluster(Some(forced), &dir).await;
    let modes = [("without", &without), ("with", &with), ("forced", &forced)];
    let (mut failures, mut skipped, mut empty) = (Vec::new(), Vec::new(), Vec::new());
    let (mut ran, mut applied, mut forced_applied) = (0, 0, 0);
    for q in 1..=99 {
        let stmts = tpcds::statements(q);
        let (expected, single_time) = match run(&single, &stmts).await {
            Run::Rows(rows, t) => (tpch::rows(&rows), t),
            Run::Failed(e) => {
                println!("q{q}: skipped, single-node DataFusion fails: {e}");
                skipped.push(q);
                continue;
            }
            Run::TimedOut => {
                failures.push(format!("q{q} single-node: over {LIMIT:?}"));
                continue;
            }
        };
        ran += 1;
        if expected.is_empty() {
            // Compared all the same, but a filter that dropped every row
            // would go unseen: counted, for the report.
            empty.push(q);
        }
        let mut times = vec![single_time];
        for (mode, ctx) in modes {
            match run(ctx, &stmts).await {
                Run::Rows(rows, t) => {
                    times.push(t);
                    if let Some(d) = tpch::diff(&expected, &tpch::rows(&rows)) {
                        failures.push(format!("q{q} {mode}: differs from single-node: {d}"));
                    }
                }
                Run::Failed(e) => failures.push(format!("q{q} {mode}: fails: {e}")),
                Run::TimedOut => failures.push(format!("q{q} {mode}: over {LIMIT:?}")),
            }
        }
        applied += built(&with);
        forced_applied += built(&forced);
        let ms: Vec<String> = times
            .iter()
            .map(|t| format!("{:.0}", t.as_secs_f64() * 1e3))
            .collect();
        println!(
            "q{q}: {} rows, filters {} (default) / {} (forced), ms single/without/with/forced {}",
            expected.len(),
            built(&with),
            built(&forced),
            ms.join("/")
        );
    }
    println!(
        "TPC-DS SF {}: {ran} queries run ({} with an empty result {empty:?}), {} skipped \
         {skipped:?}, filters built {applied} (default) / {forced_applied} (forced), {:.1} s",
        sf(),
        empty.len(),
        skipped.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The rule must have had something to do, or this test checks nothing.
    assert!(applied > 0, "no runtime filter built with the default rule");
    assert!(forced_applied > applied, "forcing built no more filters");
}

/// The data cache uses a directory only when a generation of its layout
/// completed: a failed generation leaves nothing, a directory without the
/// marker or of another layout is regenerated, a complete one is kept.
#[tokio::test]
async fn cached_data_is_used_only_when_complete() {
    use crate::common::cache::generate_once;
    use datafusion::error::DataFusionError;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("sf1");
    let write = |text: &'static str| {
        move |tmp: std::path::PathBuf| async move {
            std::fs::write(tmp.join("part"), text)?;
            Ok(())
        }
    };
    let part = || std::fs::read_to_string(dir.join("part")).unwrap();

    let failed = generate_once(&dir, "v1", |tmp| async move {
        std::fs::write(tmp.join("part"), "half")?;
        Err(DataFusionError::Execution("cut short".into()))
    })
    .await;
    assert!(failed.is_err());
    let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().collect();
    assert!(left.is_empty(), "a failed generation left {left:?}");

    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("part"), "no marker").unwrap();
    assert!(generate_once(&dir, "v1", write("one")).await.unwrap());
    assert_eq!(part(), "one");

    let kept = generate_once(&dir, "v1", |_| async {
        panic!("complete data regenerated")
    });
    assert!(!kept.await.unwrap());
    assert_eq!(part(), "one");

    assert!(generate_once(&dir, "v2", write("two")).await.unwrap());
    assert_eq!(part(), "two");
    let names: Vec<_> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["sf1"], "only the data directory remains");
}
