//! Runtime filters in the Parquet scan: once a probe task's filter has
//! come, its scans skip the files whose statistics lie outside the build
//! keys' bounds, and with `pushdown_filters` they drop rows the Bloom
//! filter rules out; every answer as single-node DataFusion's.
//!
//! The fact table's keys ascend across its files, as a fact table clustered
//! by date does. Its probe tasks wait for their filter before reading
//! (`Faults::probe_waits_first`, a test seam of the `test-hooks` feature),
//! so every file opens after the filter has come, whatever the scans'
//! own wait (`RuntimeFilterConfig::scan_wait`, tested on its own below):
//! files opened while the build side runs are read whole.

use crate::common::cluster::{in_memory_cluster, partitioned_join_config, WorkerFunctions};
use crate::common::data::{table, Rng};
use crate::common::metrics::{executed_plan, one_line, sum_metric};
use crate::common::scans::{probe_rows, scans};
use crate::common::tpch::{diff, rows};
use crate::waits::planned;
use datafusion::arrow::array::{ArrayRef, Int64Array};
use datafusion::physical_plan::{collect, ExecutionPlan};
use datafusion::prelude::{SessionConfig, SessionContext};
use filterstore_datafusion::__private::hooks::{Faults, TapFault};
use filterstore_datafusion::{last_report, RuntimeFilterConfig};
use std::sync::Arc;
use std::time::Duration;

const FACT: usize = 240_000;
const DIM: usize = 24_000;
const FILES: usize = 12;

struct Fixture {
    dir: tempfile::TempDir,
    single: SessionContext,
    rule: SessionContext,
}

async fn fixture(scan_filters: bool, pushdown: bool) -> Fixture {
    fixture_with(scan_filters, pushdown, None).await
}

/// With `slow`: a probe buffer of one byte (each probe partition holds one
/// batch before its filter, then passes rows), and scans that open their
/// files at once rather than wait for the filter.
async fn fixture_with(scan_filters: bool, pushdown: bool, slow: Option<()>) -> Fixture {
    let mut config = RuntimeFilterConfig {
        scan_filters,
        ..config()
    };
    if slow.is_some() {
        config.probe_buffer_bytes = 1;
        config.scan_wait = Duration::ZERO;
    }
    fixture_config(pushdown, config).await
}

/// The fixture's filter configuration: probes wait up to 30 s, and a
/// filter pays from 1,000 rows dropped.
fn config() -> RuntimeFilterConfig {
    RuntimeFilterConfig {
        wait: Duration::from_secs(30),
        min_filtered_rows: 1_000,
        ..RuntimeFilterConfig::default()
    }
}

async fn fixture_config(pushdown: bool, config: RuntimeFilterConfig) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let single = SessionContext::new();
    let mut session: SessionConfig = partitioned_join_config(3).unwrap();
    session.options_mut().execution.parquet.pushdown_filters = pushdown;
    let rule = in_memory_cluster(3, WorkerFunctions::Registered, session, Some(config)).unwrap();
    let mut rng = Rng(11);
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
        // A band of a thousand keys: a predicate on it bounds the keys, and
        // DataFusion cannot carry it over to the fact table as it does a
        // predicate on the key itself.
        (
            "d_band",
            Arc::new(Int64Array::from_iter_values(
                (0..DIM as i64).map(|k| k / 1000),
            )),
        ),
    ];
    table(dir.path(), "dim", dim, 2, &[&single, &rule])
        .await
        .unwrap();
    // Keys ascend across the files: file i holds keys of [i, i + 1) * DIM / FILES.
    let per = (FACT / DIM) as i64;
    let fact: Vec<(&str, ArrayRef)> = vec![
        (
            "f_dkey",
            Arc::new(Int64Array::from_iter_values(
                (0..FACT as i64).map(|i| i / per),
            )),
        ),
        (
            "f_val",
            Arc::new(Int64Array::from_iter_values(
                (0..FACT).map(|_| rng.below(1000) as i64),
            )),
        ),
    ];
    table(dir.path(), "fact", fact, FILES, &[&single, &rule])
        .await
        .unwrap();
    Fixture { dir, single, rule }
}

/// Runs `sql` with its probe tasks waiting for their filter first, checks
/// the answer, and returns the executed plan.
async fn run(f: &Fixture, sql: &str) -> Arc<dyn ExecutionPlan> {
    let faults = Faults {
        probe_waits_first: true,
        ..Faults::default()
    };
    run_with(f, sql, faults).await
}

/// [`run`] with `faults` in the query's filters.
async fn run_with(f: &Fixture, sql: &str, faults: Faults) -> Arc<dyn ExecutionPlan> {
    let expected = f.single.sql(sql).await.unwrap().collect().await.unwrap();
    let (plan, _injected) = planned(&f.rule, sql, faults).await;
    let limit = Duration::from_secs(120);
    let got = tokio::time::timeout(limit, collect(Arc::clone(&plan), f.rule.task_ctx()))
        .await
        .unwrap_or_else(|_| panic!("{sql}: no answer within {limit:?}"))
        .unwrap();
    if let Some(d) = diff(&rows(&expected), &rows(&got)) {
        panic!("{sql}: differs from single-node DataFusion: {d}");
    }
    executed_plan(&plan).await.unwrap()
}

/// Rows leaving the fact table's scans.
fn fact_scan_rows(plan: &Arc<dyn ExecutionPlan>) -> usize {
    let is_fact_scan = |n: &dyn ExecutionPlan| {
        // With the filters, the scan that runs is a copy made by
        // `BloomScanExec`, sharing the metrics of the scan below it (the
        // node's own metrics are its wait's).
        let line = one_line(n);
        let scan = [
            "BloomScanExec",
            "DataSourceExec",
            "DistributedLeafExec: DataSourceExec",
        ]
        .iter()
        .any(|p| line.starts_with(p));
        scan && n.schema().index_of("f_dkey").is_ok()
    };
    sum_metric(plan, "output_rows", is_fact_scan).unwrap()
}

const NARROW: &str = "SELECT count(*), sum(f.f_val) FROM fact f JOIN dim d ON f.f_dkey = d.d_key \
     WHERE d.d_band < 2 AND d.d_cat < 50";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_skips_the_files_outside_the_build_keys_bounds() {
    let with = fixture(true, false).await;
    let plan = run(&with, NARROW).await;
    let text = datafusion::physical_plan::displayable(plan.as_ref())
        .indent(true)
        .to_string();
    assert!(
        text.contains("BloomScanExec: BloomScanFilter(f_dkey"),
        "{text}"
    );
    assert!(
        !text.contains("f_dkey@0 <"),
        "DataFusion bounded the fact side itself: {text}"
    );
    let report = last_report(&with.rule).unwrap().to_string();
    assert!(report.contains("1 scan(s)"), "{report}");
    // Keys 0..2000 are the first file of twelve (2,000 keys each): the
    // other eleven files' statistics rule them out.
    let read = fact_scan_rows(&plan);
    assert!(
        read <= FACT / FILES,
        "{read} fact rows read, over one file's {}",
        FACT / FILES
    );
    let without = fixture(false, false).await;
    let unpruned = run(&without, NARROW).await;
    assert_eq!(
        fact_scan_rows(&unpruned),
        FACT,
        "without scan filters every row is read"
    );
    // The benches' count of the probe sides' rows finds the fact scan alone
    // under a filter, and the same scan in the other run by what it reads.
    // (Each fixture writes its files in a directory of its own.)
    let relative = |f: &Fixture, plan| {
        let dir = f.dir.path().to_str().unwrap().trim_start_matches('/');
        let mut scans = scans(plan);
        for s in &mut scans {
            s.reads = s.reads.replace(dir, "");
        }
        scans
    };
    let (pruned, unpruned) = (relative(&with, &plan), relative(&without, &unpruned));
    assert!(pruned.iter().any(|s| s.probe), "{pruned:?}");
    assert!(
        pruned.iter().all(|s| s.probe == s.reads.contains("f_dkey")),
        "{pruned:?}"
    );
    assert_eq!(probe_rows(&unpruned, &pruned), (FACT, read));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_pushdown_the_scan_drops_the_rows_the_filter_rules_out() {
    let f = fixture(true, true).await;
    // Keys spread over every file: bounds prune nothing, the Bloom filter
    // in the reader drops most rows.
    let plan = run(&f, SPREAD).await;
    let read = fact_scan_rows(&plan);
    // About 5% of the keys join, plus the filter's false positives (1%):
    // far below a third of the rows.
    assert!(read < FACT / 3, "{read} of {FACT} fact rows left the scans");
    assert!(read > 0);
}

/// Keys spread over every file, about 5% of them in the build side: bounds
/// prune nothing, and the Bloom filter rules out most rows.
const SPREAD: &str = "SELECT count(*), sum(f.f_val) FROM fact f JOIN dim d ON f.f_dkey = d.d_key \
     WHERE d.d_cat < 5";

/// About 0.5% of the keys, spread over every file: a sparse filter.
const SPARSE: &str = "SELECT count(*), sum(f.f_val) FROM fact f JOIN dim d ON f.f_dkey = d.d_key \
     WHERE d.d_cat = 0 AND d.d_band % 2 = 0";

/// Partitions whose scan the reader filtered, and the rows leaving the fact
/// table's scans.
fn reader_filtered(plan: &Arc<dyn ExecutionPlan>) -> (usize, usize) {
    let is_scan_node = |n: &dyn ExecutionPlan| one_line(n).starts_with("BloomScanExec");
    let filtered = sum_metric(plan, "reader_filtered", is_scan_node).unwrap();
    (filtered, fact_scan_rows(plan))
}

/// Without `pushdown_filters` in the session, a scan that reads a column
/// besides the filter's keys and has no predicate of its own drops the rows
/// a sparse filter rules out in the reader, before it decodes that column.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reader_drops_rows_of_a_sparse_filter() {
    let f = fixture(true, false).await;
    let (filtered, read) = reader_filtered(&run(&f, SPARSE).await);
    assert!(filtered > 0, "no partition's reader dropped rows");
    assert!(
        read < FACT / 20,
        "{read} of {FACT} fact rows left the scans"
    );
}

/// The reader leaves the rows to the filter node above where the filter is
/// not sparse (5% of the keys), where the scan reads only the filter's keys
/// (they are decoded either way), and where the scan has a predicate of its
/// own (the reader's switch covers a scan's whole predicate): every row
/// leaves the scan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reader_leaves_rows_to_the_filter_node_elsewhere() {
    let f = fixture(true, false).await;
    let keys_only = "SELECT count(*) FROM fact f JOIN dim d ON f.f_dkey = d.d_key \
                     WHERE d.d_cat = 0 AND d.d_band % 2 = 0";
    let own = "SELECT count(*), sum(f.f_val) FROM fact f JOIN dim d ON f.f_dkey = d.d_key \
               WHERE d.d_cat = 0 AND d.d_band % 2 = 0 AND f.f_val < 900";
    for sql in [SPREAD, keys_only, own] {
        let plan = run(&f, sql).await;
        let report = last_report(&f.rule).unwrap().to_string();
        assert!(report.contains("1 scan(s)"), "{sql}: {report}");
        assert_eq!(reader_filtered(&plan), (0, FACT), "{sql}");
    }
}

/// Files open before the filter came stop once it has come and their
/// statistics lie outside its bounds (DataFusion re-reads a dynamic filter
/// after each batch): the probe side reads from its first poll, then one
/// batch of 8,192 rows per 200 ms per partition (a file of 20,000 rows
/// takes at least 400 ms), while the tiny build side takes some 20 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_open_before_the_filter_came_stop_when_it_comes() {
    let faults = Faults {
        probe_batch_delay: Duration::from_millis(200),
        ..Faults::default()
    };
    let with = fixture_with(true, false, Some(())).await;
    let read = fact_scan_rows(&run_with(&with, NARROW, faults).await);
    // A batch or two of each of nine partitions before the filter came, and
    // the file that joins: some 100,000 rows, far below every row.
    assert!(read < FACT * 3 / 4, "{read} of {FACT} fact rows read");
    let without = fixture_with(false, false, Some(())).await;
    let all = fact_scan_rows(&run_with(&without, NARROW, faults).await);
    assert_eq!(all, FACT, "without scan filters every row is read");
}

/// A scan waits for its filter before it opens a file
/// (`RuntimeFilterConfig::scan_wait`), so it skips the files outside the
/// build keys' bounds although its task reads from its first poll: the
/// taps post 500 ms late, and a scan that does not wait has read over
/// half the rows by then (the control run, which shows the test can fail).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_waits_for_its_filter_before_it_opens_a_file() {
    let late = Faults {
        post_delay: Duration::from_millis(500),
        ..Faults::default()
    };
    let waits = RuntimeFilterConfig {
        scan_wait: Duration::from_secs(30),
        ..config()
    };
    let f = fixture_config(false, waits).await;
    let plan = run_with(&f, NARROW, late).await;
    let read = fact_scan_rows(&plan);
    assert!(
        read <= FACT / FILES,
        "{read} fact rows read, over one file's {}",
        FACT / FILES
    );
    let is_scan_node = |n: &dyn ExecutionPlan| one_line(n).starts_with("BloomScanExec");
    assert_eq!(sum_metric(&plan, "wait_expired", is_scan_node).unwrap(), 0);
    let at_once = RuntimeFilterConfig {
        scan_wait: Duration::ZERO,
        ..config()
    };
    let f = fixture_config(false, at_once).await;
    let read = fact_scan_rows(&run_with(&f, NARROW, late).await);
    assert!(
        read > FACT / 2,
        "without the wait, {read} of {FACT} fact rows were read before the filter came"
    );
}

/// A scan whose filter never comes opens its files when its wait runs out,
/// counts it (`wait_expired`), and the answer is single-node DataFusion's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_whose_filter_never_comes_opens_after_its_wait() {
    let never = Faults {
        tap: TapFault::Never,
        ..Faults::default()
    };
    let short = RuntimeFilterConfig {
        wait: Duration::from_millis(500),
        scan_wait: Duration::from_millis(100),
        ..config()
    };
    let f = fixture_config(false, short).await;
    let plan = run_with(&f, NARROW, never).await;
    let is_scan_node = |n: &dyn ExecutionPlan| one_line(n).starts_with("BloomScanExec");
    let expired = sum_metric(&plan, "wait_expired", is_scan_node).unwrap();
    assert!(expired > 0, "no scan partition counted its wait expiring");
    assert_eq!(fact_scan_rows(&plan), FACT, "every row is read unfiltered");
}

/// The rows of a null-aware anti join are the probe rows whose key the
/// build side lacks: no filter may reach its scan. (An empty build side is
/// not tested here: a hash join never polls the probe side of an empty
/// build side, so its scans read nothing with or without the filter.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_null_aware_anti_join_keeps_its_answer() {
    let f = fixture(true, false).await;
    let anti = "SELECT count(*), sum(f.f_val) FROM fact f WHERE f.f_dkey NOT IN \
                (SELECT d_key FROM dim WHERE d_band < 2)";
    let expected = f.single.sql(anti).await.unwrap().collect().await.unwrap();
    let limit = Duration::from_secs(120);
    let got = tokio::time::timeout(limit, f.rule.sql(anti).await.unwrap().collect())
        .await
        .unwrap_or_else(|_| panic!("{anti}: no answer within {limit:?}"))
        .unwrap();
    if let Some(d) = diff(&rows(&expected), &rows(&got)) {
        panic!("{anti}: differs from single-node DataFusion: {d}");
    }
}
