//! Waiting for a filter is bounded and safe: a build side that fails, one
//! slower than the probe side's deadline, a query cancelled while probe
//! tasks wait, a probe side that starts before the build side ends (it
//! reads its rows meanwhile, into a buffer that may fill), a build side
//! whose filter never comes, and unions and repeated subplans: every answer
//! as single-node DataFusion's, no query hangs.
//!
//! The faults are injected by filter (`runtime::hooks`, built with the
//! `test-hooks` feature, as this module is): each test
//! plans its query, injects faults into that query's filters only, and runs
//! it on the in-memory cluster, whose taps and probe tasks run in this
//! process. Other tests running at the same time are untouched.

use crate::common::cluster::{in_memory_cluster, partitioned_join_config, WorkerFunctions};
use crate::common::data::{table, Rng};
use crate::common::metrics::{executed_plan, is_bloom_filter, sum_metric};
use crate::common::tpch::{diff, rows};
use datafusion::arrow::array::{ArrayRef, Int64Array};
use datafusion::physical_plan::{collect, ExecutionPlan};
use datafusion::prelude::SessionContext;
use filterstore_datafusion::__private::hooks::{self, Faults, TapFault};
use filterstore_datafusion::__private::waiting_probes;
use filterstore_datafusion::{last_report, FilterOutcome, RuntimeFilterConfig};
use futures::StreamExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

const FACT: usize = 300_000;
const DIM: usize = 30_000;
const QUERY: &str =
    "SELECT count(*), sum(f.f_val) FROM fact f JOIN dim d ON f.f_dkey = d.d_key WHERE d.d_cat < 10";

/// Faults injected into one query's filters, removed when dropped (also
/// when the test fails).
pub(crate) struct Injected(Vec<u128>);

impl Drop for Injected {
    fn drop(&mut self) {
        for id in &self.0 {
            hooks::clear(*id);
        }
    }
}

/// Plans `sql` on `rule` (a session with runtime filters) and injects
/// `faults` into its filters.
pub(crate) async fn planned(
    rule: &SessionContext,
    sql: &str,
    faults: Faults,
) -> (Arc<dyn ExecutionPlan>, Injected) {
    let plan = rule
        .sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let ids: Vec<u128> = last_report(rule)
        .map(|r| r.filters().map(|h| h.id()).collect())
        .unwrap_or_default();
    assert!(!ids.is_empty(), "{sql}: no filter placed");
    for id in &ids {
        hooks::inject(*id, faults);
    }
    (plan, Injected(ids))
}

struct Fixture {
    _dir: tempfile::TempDir,
    single: SessionContext,
    rule: SessionContext,
}

async fn fixture(wait: Duration) -> Fixture {
    fixture_with(wait, RuntimeFilterConfig::default().probe_buffer_bytes).await
}

async fn fixture_with(wait: Duration, probe_buffer_bytes: u64) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let single = SessionContext::new();
    let config = RuntimeFilterConfig {
        wait,
        probe_buffer_bytes,
        min_filtered_rows: 1_000,
        ..RuntimeFilterConfig::default()
    };
    let rule = in_memory_cluster(
        3,
        WorkerFunctions::Registered,
        partitioned_join_config(3).unwrap(),
        Some(config),
    )
    .unwrap();
    let mut rng = Rng(5);
    let dim: Vec<(&str, ArrayRef)> = vec![
        (
            "d_key",
            Arc::new(Int64Array::from_iter_values(0..DIM as i64)),
        ),
        (
            "d_cat",
            Arc::new(Int64Array::from_iter_values(
                (0..DIM).map(|_| rng.below(100) as i64),
            )),
        ),
    ];
    table(dir.path(), "dim", dim, 3, &[&single, &rule])
        .await
        .unwrap();
    let fact: Vec<(&str, ArrayRef)> = vec![
        (
            "f_dkey",
            Arc::new(Int64Array::from_iter_values(
                (0..FACT).map(|_| rng.below(DIM as u64) as i64),
            )),
        ),
        (
            "f_val",
            Arc::new(Int64Array::from_iter_values(
                (0..FACT).map(|_| rng.below(1000) as i64),
            )),
        ),
    ];
    table(dir.path(), "fact", fact, 6, &[&single, &rule])
        .await
        .unwrap();
    Fixture {
        _dir: dir,
        single,
        rule,
    }
}

/// Runs `sql` on the rule's cluster with `faults` in its filters, within
/// `limit`, checks the answer against single-node DataFusion, and returns
/// the executed plan and the wall time.
async fn check_with(
    f: &Fixture,
    sql: &str,
    faults: Faults,
    limit: Duration,
) -> (Arc<dyn ExecutionPlan>, Duration) {
    let expected = f.single.sql(sql).await.unwrap().collect().await.unwrap();
    let (plan, _injected) = planned(&f.rule, sql, faults).await;
    let started = Instant::now();
    let got = tokio::time::timeout(limit, collect(Arc::clone(&plan), f.rule.task_ctx()))
        .await
        .unwrap_or_else(|_| panic!("{sql}: no answer within {limit:?}"))
        .unwrap();
    let took = started.elapsed();
    if let Some(d) = diff(&rows(&expected), &rows(&got)) {
        panic!("{sql}: differs from single-node DataFusion: {d}");
    }
    (executed_plan(&plan).await.unwrap(), took)
}

async fn check(f: &Fixture, sql: &str, limit: Duration) -> (Arc<dyn ExecutionPlan>, Duration) {
    check_with(f, sql, Faults::default(), limit).await
}

fn faults(tap: TapFault, post_delay_ms: u64, probe_batch_delay_ms: u64) -> Faults {
    Faults {
        tap,
        post_delay: Duration::from_millis(post_delay_ms),
        probe_batch_delay: Duration::from_millis(probe_batch_delay_ms),
        probe_waits_first: false,
    }
}

fn metric(plan: &Arc<dyn ExecutionPlan>, name: &str) -> usize {
    sum_metric(plan, name, is_bloom_filter).unwrap()
}

fn outcome(f: &Fixture) -> Option<FilterOutcome> {
    let r = last_report(&f.rule)?;
    let filter = r.filters().next()?.clone();
    filter.outcome()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_side_that_fails_its_filter_passes_every_row_at_once() {
    // A deadline far longer than the test may take: only the failure can
    // end the probe side's wait in time.
    let f = fixture(Duration::from_secs(600)).await;
    let fail = faults(TapFault::Fail, 0, 0);
    let (plan, _) = check_with(&f, QUERY, fail, Duration::from_secs(120)).await;
    assert!(
        matches!(outcome(&f), Some(FilterOutcome::PassAll { ref reason, .. }) if reason.contains("injected")),
        "{:?}",
        outcome(&f)
    );
    assert_eq!(metric(&plan, "deadline_missed"), 0);
    assert!(metric(&plan, "pass_all") > 0);
    assert_eq!(metric(&plan, "output_rows"), metric(&plan, "rows_in"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_side_that_errors_fails_the_query_without_a_hang() {
    let f = fixture(Duration::from_secs(600)).await;
    // The build side's key fails on a row (a division by zero in the join
    // key): the join reports the error; no probe task may wait for the
    // filter that never comes (the tap posts the failure).
    let sql = "SELECT count(*) FROM fact f JOIN (SELECT 100 / (d_key - 7) AS k FROM dim WHERE d_cat < 10 OR d_key = 7) d ON f.f_dkey = d.k";
    let plan = f
        .rule
        .sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let res = tokio::time::timeout(Duration::from_secs(120), collect(plan, f.rule.task_ctx()))
        .await
        .expect("the failing query hung");
    let single = f.single.sql(sql).await.unwrap().collect().await;
    assert!(
        single.is_err(),
        "the build side must fail on single-node DataFusion too"
    );
    let err = res.expect_err("the build side's error must fail the query");
    assert!(
        err.to_string().to_lowercase().contains("divide by zero"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_side_slower_than_the_deadline_lets_rows_pass_then_filters() {
    // Every tap posts 400 ms late; the probe side waits 20 ms, passes rows
    // unfiltered, and takes the filter when it comes: each probe batch takes
    // 100 ms more, so the probe side outlasts the build side's delay.
    let f = fixture(Duration::from_millis(20)).await;
    let slow = faults(TapFault::None, 400, 100);
    let (plan, _) = check_with(&f, QUERY, slow, Duration::from_secs(120)).await;
    assert!(
        metric(&plan, "deadline_missed") > 0,
        "the probe side never waited past its deadline"
    );
    assert_passed_then_filtered(&f, &plan);
}

/// Rows passed unfiltered, the filter was built, and it applied to the
/// rows after it.
fn assert_passed_then_filtered(f: &Fixture, plan: &Arc<dyn ExecutionPlan>) {
    assert!(metric(plan, "rows_unfiltered") > 0);
    assert!(
        matches!(outcome(f), Some(FilterOutcome::Built { .. })),
        "{:?}",
        outcome(f)
    );
    let (rows_in, rows_out) = (metric(plan, "rows_in"), metric(plan, "output_rows"));
    assert!(
        rows_out < rows_in,
        "the late filter dropped nothing: {rows_in} -> {rows_out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_side_that_starts_first_reads_its_rows_while_it_waits() {
    // The filter is ready 800 ms after the builds end; the deadline is 60 s:
    // the probe tasks read their rows into their buffers meanwhile (the
    // fact table's 4.8 MB fit in them), then check every row.
    let f = fixture(Duration::from_secs(60)).await;
    let late = faults(TapFault::None, 800, 0);
    let (plan, took) = check_with(&f, QUERY, late, Duration::from_secs(120)).await;
    assert_eq!(metric(&plan, "deadline_missed"), 0);
    assert_eq!(metric(&plan, "buffer_full"), 0);
    assert_eq!(metric(&plan, "rows_unfiltered"), 0);
    let (rows_in, rows_out) = (metric(&plan, "rows_in"), metric(&plan, "output_rows"));
    assert!(rows_out * 5 < rows_in, "{rows_in} -> {rows_out}");
    // Rows were read before the filter came: a task that waited before
    // polling its input would have buffered none.
    let buffered = metric(&plan, "rows_buffered");
    assert!(buffered > 0, "no row was read before the filter came");
    // With every row read, they waited idle for the rest (the metric sums
    // every partition's idle wait).
    let waited = sum_metric(&plan, "wait_time", is_bloom_filter).unwrap();
    assert!(waited >= 300_000_000, "waited {waited} ns");
    assert!(took >= Duration::from_millis(700), "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_buffer_lets_its_rows_pass_then_the_filter_applies() {
    // A buffer of 64 KiB holds no batch of the fact table (8,192 rows of
    // two 8-byte columns); the filter comes 800 ms after the builds end and
    // each probe batch takes 150 ms more, so the probe side outlasts the
    // filter's delay with its buffer full from the first batch.
    let f = fixture_with(Duration::from_secs(60), 64 << 10).await;
    let late = faults(TapFault::None, 800, 150);
    let (plan, _) = check_with(&f, QUERY, late, Duration::from_secs(120)).await;
    assert!(metric(&plan, "buffer_full") > 0, "no buffer filled");
    assert_eq!(metric(&plan, "deadline_missed"), 0);
    assert_passed_then_filtered(&f, &plan);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_that_never_comes_costs_the_deadline_once() {
    let f = fixture(Duration::from_millis(300)).await;
    let never = faults(TapFault::Never, 0, 0);
    let (plan, took) = check_with(&f, QUERY, never, Duration::from_secs(120)).await;
    assert!(metric(&plan, "deadline_missed") > 0);
    assert_eq!(metric(&plan, "output_rows"), metric(&plan, "rows_in"));
    // Every probe task of the stage shares one deadline from its first poll.
    assert!(took < Duration::from_secs(60), "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_the_query_ends_every_wait() {
    // The filter never comes and the deadline is 10 minutes: the probe
    // tasks wait until the query is dropped.
    let f = fixture(Duration::from_secs(600)).await;
    let (plan, injected) = planned(&f.rule, QUERY, faults(TapFault::Never, 0, 0)).await;
    let id = injected.0[0];
    let mut stream = datafusion::physical_plan::execute_stream(plan, f.rule.task_ctx()).unwrap();
    let waiting = async {
        // Polls the query until its probe tasks wait.
        let poll = async { while stream.next().await.is_some() {} };
        let seen = async {
            while waiting_probes(id) == 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::select! {
            _ = poll => panic!("the query ended without its filter's wait"),
            _ = seen => {}
        }
    };
    tokio::time::timeout(Duration::from_secs(60), waiting)
        .await
        .expect("no probe task waited");
    drop(stream);
    let released = async {
        while waiting_probes(id) > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), released)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{} probe partitions still wait after the query was dropped",
                waiting_probes(id)
            )
        });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unions_and_repeated_subplans_never_wait_on_themselves() {
    let f = fixture(Duration::from_secs(600)).await;
    for sql in [
        // The probe side is a union of two scans of the fact table.
        "SELECT count(*), sum(u.v) FROM (SELECT f_dkey AS k, f_val AS v FROM fact UNION ALL SELECT f_dkey, f_val + 1 FROM fact) u JOIN dim d ON u.k = d.d_key WHERE d.d_cat < 10",
        // The build side is a union.
        "SELECT count(*) FROM fact f JOIN (SELECT d_key FROM dim WHERE d_cat < 5 UNION ALL SELECT d_key FROM dim WHERE d_cat > 95) d ON f.f_dkey = d.d_key",
        // One subquery on both sides of a join (planned twice).
        "WITH s AS (SELECT f_dkey, count(*) AS c FROM fact WHERE f_val < 500 GROUP BY f_dkey) SELECT count(*), sum(a.c) FROM s a JOIN s b ON a.f_dkey = b.f_dkey JOIN dim d ON a.f_dkey = d.d_key WHERE d.d_cat < 10",
        // A self-join of the fact table on the key, filtered by a dimension.
        "SELECT count(*) FROM fact a JOIN fact b ON a.f_dkey = b.f_dkey JOIN dim d ON b.f_dkey = d.d_key WHERE d.d_cat < 2",
        // The same join twice in one query.
        "SELECT (SELECT count(*) FROM fact f JOIN dim d ON f.f_dkey = d.d_key WHERE d.d_cat < 10) AS a, (SELECT count(*) FROM fact f JOIN dim d ON f.f_dkey = d.d_key WHERE d.d_cat < 20) AS b",
    ] {
        // A 600 s deadline: a probe side that needed its own filter would
        // hang past this limit.
        check(&f, sql, Duration::from_secs(120)).await;
        let r = last_report(&f.rule).unwrap();
        assert!(r.placed() >= 1, "{sql}\n{r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_run_twice_builds_each_run_from_its_own_rows() {
    let f = fixture(Duration::from_secs(600)).await;
    let plan = f
        .rule
        .sql(QUERY)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let expected = f.single.sql(QUERY).await.unwrap().collect().await.unwrap();
    for _ in 0..3 {
        let got = tokio::time::timeout(
            Duration::from_secs(120),
            collect(Arc::clone(&plan), f.rule.task_ctx()),
        )
        .await
        .expect("hung")
        .unwrap();
        assert!(diff(&rows(&expected), &rows(&got)).is_none());
    }
}
