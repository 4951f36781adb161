//! The runtime-filter rule, row by row of its decision table, the shapes
//! that once gave wrong answers, and what `EXPLAIN` shows, each query
//! against single-node DataFusion.
//!
//! Data: `fact` (200,000 rows in 6 Parquet files; 1% null keys) and `dim`
//! (20,000 rows in 4 files; one null key), with the key in several types.
//! Every query runs on the 3-worker in-memory cluster with joins forced
//! partitioned, and its result must equal single-node DataFusion's.

use crate::common::cluster::{
    broadcast_join_config, in_memory_cluster, partitioned_join_config, WorkerFunctions,
};
use crate::common::data::{table, Rng};
use crate::common::metrics::{executed_plan, is_bloom_filter, one_line, sum_metric};
use crate::common::tpch::{diff, rows};
use datafusion::arrow::array::{
    ArrayRef, Date32Array, Int32Array, Int64Array, ListArray, StringArray,
};
use datafusion::arrow::datatypes::Int64Type;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::JoinSide;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use filterstore_datafusion::{
    last_report, FilterOutcome, RuntimeFilterConfig, RuntimeFilterReport, SkipReason, Verdict,
};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const FACT: usize = 200_000;
const DIM: usize = 20_000;

fn small() -> RuntimeFilterConfig {
    RuntimeFilterConfig {
        min_filtered_rows: 10_000,
        ..RuntimeFilterConfig::default()
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    single: SessionContext,
    rule: SessionContext,
}

async fn fixture(config: RuntimeFilterConfig, broadcast: bool) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let single = SessionContext::new();
    let cfg = if broadcast {
        broadcast_join_config(3).unwrap()
    } else {
        partitioned_join_config(3).unwrap()
    };
    let rule = in_memory_cluster(3, WorkerFunctions::Registered, cfg, Some(config)).unwrap();
    write(dir.path(), &[&single, &rule]).await;
    Fixture {
        _dir: dir,
        single,
        rule,
    }
}

async fn write(dir: &Path, ctxs: &[&SessionContext]) {
    let mut rng = Rng(21);
    let dkey: Vec<Option<i64>> = (0..DIM as i64)
        .map(|k| if k == 7 { None } else { Some(k) })
        .collect();
    let cat: Vec<i32> = (0..DIM).map(|_| rng.below(100) as i32).collect();
    let dim: Vec<(&str, ArrayRef)> = vec![
        ("d_key", Arc::new(Int64Array::from(dkey.clone()))),
        ("d_cat", Arc::new(Int32Array::from(cat))),
        (
            "d_key32",
            Arc::new(Int32Array::from(
                dkey.iter().map(|k| k.map(|v| v as i32)).collect::<Vec<_>>(),
            )),
        ),
        (
            "d_skey",
            Arc::new(StringArray::from(
                dkey.iter()
                    .map(|k| k.map(|v| format!("k{v}")))
                    .collect::<Vec<_>>(),
            )),
        ),
        (
            "d_date",
            Arc::new(Date32Array::from(
                dkey.iter().map(|k| k.map(|v| v as i32)).collect::<Vec<_>>(),
            )),
        ),
        ("d_list", list(&dkey)),
    ];
    table(dir, "dim", dim, 4, ctxs).await.unwrap();
    let fkey: Vec<Option<i64>> = (0..FACT)
        .map(|_| (!rng.chance(0.01)).then(|| rng.below(DIM as u64) as i64))
        .collect();
    let fact: Vec<(&str, ArrayRef)> = vec![
        (
            "f_id",
            Arc::new(Int64Array::from_iter_values(0..FACT as i64)),
        ),
        ("f_dkey", Arc::new(Int64Array::from(fkey.clone()))),
        (
            "f_val",
            Arc::new(Int64Array::from_iter_values(
                (0..FACT).map(|_| rng.below(1000) as i64),
            )),
        ),
        (
            "f_dkey32",
            Arc::new(Int32Array::from(
                fkey.iter().map(|k| k.map(|v| v as i32)).collect::<Vec<_>>(),
            )),
        ),
        (
            "f_skey",
            Arc::new(StringArray::from(
                fkey.iter()
                    .map(|k| k.map(|v| format!("k{v}")))
                    .collect::<Vec<_>>(),
            )),
        ),
        (
            "f_date",
            Arc::new(Date32Array::from(
                fkey.iter().map(|k| k.map(|v| v as i32)).collect::<Vec<_>>(),
            )),
        ),
        ("f_list", list(&fkey)),
    ];
    table(dir, "fact", fact, 6, ctxs).await.unwrap();
}

/// A one-element list per key: a key type without an encoding.
fn list(keys: &[Option<i64>]) -> ArrayRef {
    Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(
        keys.iter().map(|k| k.map(|v| vec![Some(v)])),
    ))
}

/// Runs `sql` on both contexts, requires equal results, and returns the
/// rule's report and the executed plan (with the workers' metrics).
async fn check(f: &Fixture, sql: &str) -> (RuntimeFilterReport, Arc<dyn ExecutionPlan>) {
    let expected = f.single.sql(sql).await.unwrap().collect().await.unwrap();
    let df = f.rule.sql(sql).await.unwrap();
    let plan = df.create_physical_plan().await.unwrap();
    let report = last_report(&f.rule).expect("a report");
    let got = datafusion::physical_plan::collect(Arc::clone(&plan), f.rule.task_ctx())
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}\n{report}"));
    if let Some(d) = diff(&rows(&expected), &rows(&got)) {
        panic!("{sql}\ndiffers from single-node DataFusion: {d}\n{report}");
    }
    (report, executed_plan(&plan).await.unwrap())
}

fn verdicts(r: &RuntimeFilterReport, side: JoinSide) -> Vec<Verdict> {
    r.decisions
        .iter()
        .filter(|d| d.side == side)
        .map(|d| d.verdict.clone())
        .collect()
}

/// Whether `side` has decisions, all of them matching `pred` (an empty list
/// would make `all` true with nothing checked).
fn all_on(r: &RuntimeFilterReport, side: JoinSide, pred: impl Fn(&Verdict) -> bool) -> bool {
    let v = verdicts(r, side);
    !v.is_empty() && v.iter().all(pred)
}

fn placed(v: &Verdict) -> bool {
    matches!(v, Verdict::Placed { .. })
}

fn outcomes(r: &RuntimeFilterReport) -> Vec<FilterOutcome> {
    r.filters().filter_map(|f| f.outcome()).collect()
}

fn count_filters(plan: &Arc<dyn ExecutionPlan>) -> usize {
    let mut n = 0;
    let _ = plan.apply(|c| {
        n += usize::from(is_bloom_filter(c.as_ref()));
        Ok(TreeNodeRecursion::Continue)
    });
    n
}

/// (rows in, rows out) of every runtime filter of an executed plan.
fn filtered(plan: &Arc<dyn ExecutionPlan>) -> (usize, usize) {
    let rows_in = sum_metric(plan, "rows_in", is_bloom_filter).unwrap();
    let rows_out = sum_metric(plan, "output_rows", is_bloom_filter).unwrap();
    (rows_in, rows_out)
}

async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(300), f)
        .await
        .expect("test timed out")
}

const SELECTIVE: &str =
    "SELECT count(*), sum(f.f_val) FROM fact f JOIN dim d ON f.f_dkey = d.d_key WHERE d.d_cat < 10";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_null_safe_join_keeps_null_matches() {
    within(async {
        let f = fixture(small(), false).await;
        // IS NOT DISTINCT FROM matches the dimension's null key with the
        // fact's 1% of null keys: they must pass the filter.
        let sql = "SELECT count(*), sum(f.f_val) FROM fact f JOIN dim d ON f.f_dkey IS NOT DISTINCT FROM d.d_key WHERE d.d_cat < 10 OR d.d_key IS NULL";
        let (report, plan) = check(&f, sql).await;
        assert!(verdicts(&report, JoinSide::Right).iter().any(placed), "{report}");
        assert!(report.built() >= 1, "{report}");
        let (rows_in, rows_out) = filtered(&plan);
        assert!(rows_out < rows_in, "the filter dropped nothing: {rows_in} -> {rows_out}\n{report}");
        let nulls = f
            .single
            .sql("SELECT count(*) FROM fact WHERE f_dkey IS NULL")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert!(rows(&nulls)[0][0] != crate::common::tpch::Cell::S("0".into()));
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_self_join_filters_only_the_keys_own_scan() {
    within(async {
        let f = fixture(small(), false).await;
        let sql = "SELECT count(*), sum(a.f_val), sum(b.f_id) FROM fact a JOIN fact b ON a.f_id = b.f_val JOIN dim d ON a.f_dkey = d.d_key WHERE d.d_cat < 10";
        let (report, _) = check(&f, sql).await;
        // The dimension join's filter reaches `a`'s scan only: one place.
        let dim_join = report
            .decisions
            .iter()
            .find(|d| d.join.contains("d_key") && placed(&d.verdict))
            .unwrap_or_else(|| panic!("no filter on the dimension join:\n{report}"));
        let Verdict::Placed { points, .. } = dim_join.verdict else { unreachable!() };
        assert_eq!(points, 1, "{report}");
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_window_result_renamed_to_the_key() {
    within(async {
        let f = fixture(small(), false).await;
        let sql = "SELECT count(*), sum(f.f_val) FROM (SELECT f_val, lag(f_dkey) OVER (ORDER BY f_id) AS f_dkey FROM fact) f JOIN dim d ON f.f_dkey = d.d_key WHERE d.d_cat < 10";
        let (report, plan) = check(&f, sql).await;
        // Nothing may filter below the window.
        let mut below_window = 0;
        let _ = plan.apply(|n| {
            if n.name().contains("Window") || one_line(n.as_ref()).contains("Window") {
                below_window += count_filters(n);
            }
            Ok(TreeNodeRecursion::Continue)
        });
        assert_eq!(below_window, 0, "{report}");
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_fallible_key_is_not_moved_below_the_join_that_guards_it() {
    within(async {
        let f = fixture(small(), false).await;
        // The inner join drops every fact row with f_val = 500 (no dimension
        // key 500 passes d_cat < 10... and d_key <> 500); the division above
        // it would fail on them if it were moved below.
        let sql = "SELECT count(*) FROM (SELECT 1000000 / (f.f_val - 500) AS q FROM fact f JOIN dim d ON f.f_val = d.d_key WHERE d.d_key <> 500) x JOIN dim d2 ON x.q = d2.d_key WHERE d2.d_cat < 10";
        let (report, _) = check(&f, sql).await;
        let outer = report
            .decisions
            .iter()
            .filter(|d| d.join.contains("q@") && d.side == JoinSide::Right)
            .map(|d| d.verdict.clone())
            .collect::<Vec<_>>();
        assert!(
            outer.iter().all(|v| matches!(v, Verdict::Skipped(SkipReason::FallibleKey(_)) | Verdict::Skipped(SkipReason::NoShuffle(_))))
                && !outer.is_empty(),
            "{report}"
        );
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placed_built_and_dropping_for_every_key_type() {
    within(async {
        let f = fixture(small(), false).await;
        for sql in [
            SELECTIVE,
            // An Int32 probe key against an Int64 build key: the join's cast.
            "SELECT count(*) FROM fact f JOIN dim d ON f.f_dkey32 = d.d_key WHERE d.d_cat < 10",
            "SELECT count(*) FROM fact f JOIN dim d ON f.f_skey = d.d_skey WHERE d.d_cat < 10",
            "SELECT count(*) FROM fact f JOIN dim d ON f.f_date = d.d_date WHERE d.d_cat < 10",
            // Composite keys, hashed as one key on both sides.
            "SELECT count(*) FROM fact f JOIN dim d ON f.f_dkey = d.d_key AND f.f_skey = d.d_skey WHERE d.d_cat < 10",
            "SELECT count(*) FROM fact f JOIN dim d ON CAST(f.f_dkey AS DECIMAL(20, 2)) = CAST(d.d_key AS DECIMAL(20, 2)) WHERE d.d_cat < 10",
            // Semi joins: the IN form and EXISTS.
            "SELECT count(*) FROM fact WHERE f_dkey IN (SELECT d_key FROM dim WHERE d_cat < 10)",
            "SELECT count(*) FROM fact f WHERE EXISTS (SELECT 1 FROM dim d WHERE d.d_key = f.f_dkey AND d.d_cat < 10)",
        ] {
            let (report, plan) = check(&f, sql).await;
            assert_eq!((report.placed(), report.built()), (1, 1), "{sql}\n{report}");
            assert!(count_filters(&plan) >= 1, "{sql}");
            let (rows_in, rows_out) = filtered(&plan);
            assert!(rows_in > 0 && rows_out * 2 < rows_in, "{sql}: {rows_in} -> {rows_out}\n{report}");
        }
    })
    .await
}

/// The join type in a decision's label (`join #n Inner on [...]`).
fn join_type(label: &str) -> &str {
    label.split_whitespace().nth(2).unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_decision_table_row_by_row() {
    within(async {
        let forced = RuntimeFilterConfig {
            force: true,
            ..RuntimeFilterConfig::default()
        };
        let f = fixture(forced, false).await;
        let queries = [
            SELECTIVE,
            "SELECT count(*), sum(d.d_cat) FROM fact f LEFT JOIN dim d ON f.f_dkey = d.d_key AND d.d_cat < 10",
            "SELECT count(*), sum(d.d_cat) FROM dim d RIGHT JOIN fact f ON f.f_dkey = d.d_key AND d.d_cat < 10",
            "SELECT count(*), sum(d.d_cat), sum(f.f_val) FROM fact f FULL JOIN dim d ON f.f_dkey = d.d_key",
            "SELECT count(*) FROM fact f WHERE NOT EXISTS (SELECT 1 FROM dim d WHERE d.d_key = f.f_dkey AND d.d_cat < 10)",
            "SELECT count(*) FROM dim d WHERE NOT EXISTS (SELECT 1 FROM fact f WHERE d.d_key = f.f_dkey AND f.f_val < 3)",
            "SELECT count(*) FROM fact f WHERE f.f_dkey NOT IN (SELECT d_key FROM dim WHERE d_cat < 10)",
            // A mark join (IN under OR).
            "SELECT count(*) FROM fact f WHERE f.f_dkey IN (SELECT d_key FROM dim WHERE d_cat < 10) OR f.f_val < 5",
            "SELECT count(*) FROM fact WHERE f_dkey IN (SELECT d_key FROM dim WHERE d_cat < 10)",
        ];
        let mut seen = std::collections::BTreeSet::new();
        for sql in queries {
            let (r, _) = check(&f, sql).await;
            assert!(!r.decisions.is_empty(), "{sql}: no join decided\n{r}");
            for d in &r.decisions {
                let t = join_type(&d.join);
                seen.insert(t.to_string());
                let allowed = matches!(t, "Inner" | "Left" | "LeftSemi" | "RightSemi" | "LeftAnti" | "LeftMark");
                // A reverse filter (the probe side's keys on the build side).
                let reverse = matches!(t, "Inner" | "LeftSemi" | "RightSemi" | "Right" | "RightAnti" | "RightMark");
                let null_aware = sql.contains("NOT IN");
                let broadcast = r.decisions.iter().any(|e| e.join == d.join && e.verdict == Verdict::Skipped(SkipReason::Broadcast));
                let forward = r.decisions.iter().any(|e| e.join == d.join && e.side == JoinSide::Right && placed(&e.verdict));
                match d.side {
                    // A null-aware anti join is always collected (broadcast).
                    _ if broadcast => assert!(matches!(d.verdict, Verdict::Skipped(SkipReason::Broadcast)), "{sql}\n{r}"),
                    JoinSide::Left if forward => assert!(matches!(d.verdict, Verdict::Skipped(SkipReason::BuildSide)), "{sql}\n{r}"),
                    JoinSide::Left if reverse => assert!(placed(&d.verdict), "{sql}: {t}\n{r}"),
                    JoinSide::Left => assert!(matches!(d.verdict, Verdict::Skipped(SkipReason::JoinType(_))), "{sql}: {t}\n{r}"),
                    _ if allowed && !null_aware => assert!(placed(&d.verdict), "{sql}: {t}\n{r}"),
                    _ => assert!(matches!(d.verdict, Verdict::Skipped(SkipReason::JoinType(_))), "{sql}: {t}\n{r}"),
                }
            }
        }
        // The table's rows this test reached (DataFusion chooses the sides).
        for t in ["Inner", "Full"] {
            assert!(seen.contains(t), "{seen:?}");
        }
        assert!(seen.len() >= 5, "{seen:?}");
    })
    .await
}

/// A fact predicate DataFusion cannot estimate keeps 0.1% of the fact rows
/// (200 keys); the whole dimension builds the join, as the smaller side by
/// estimate. No filter of the dimension's keys pays (a foreign key), so the
/// rule places one of the fact side's keys on the dimension, whose tap reads
/// the fact side ahead of the join: 20,000 dimension rows in, about 200
/// out. With a read-ahead of one byte the filter is abandoned and every
/// dimension row passes. On a composite key, whose foreign key statistics
/// cannot see, the whole dimension building the join is enough to prefer
/// the reverse filter. All answer as single-node DataFusion does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reverse_filter_shrinks_the_build_side_unless_its_read_ahead_overflows() {
    within(async {
        let one = "SELECT count(*), sum(d.d_cat) FROM dim d JOIN fact f ON d.d_key = f.f_dkey WHERE f.f_val % 1000 = 1";
        // A composite key: statistics cannot tell that it is a foreign key,
        // but the build side holds every key of its table.
        let two = "SELECT count(*), sum(d.d_cat) FROM dim d JOIN fact f ON d.d_key = f.f_dkey AND d.d_skey = f.f_skey WHERE f.f_val % 1000 = 1";
        for (ahead, sql) in [(32 << 20, one), (1, one), (32 << 20, two)] {
            let f = fixture(RuntimeFilterConfig { read_ahead_bytes: ahead, ..small() }, false).await;
            let (r, plan) = check(&f, sql).await;
            assert!(all_on(&r, JoinSide::Left, placed), "{r}");
            let why = if sql == one { SkipReason::NotSelective { pass: 1.0 } } else { SkipReason::WholeBuildSide };
            let right = verdicts(&r, JoinSide::Right);
            assert!(right.iter().all(|v| matches!(v, Verdict::Skipped(s) if std::mem::discriminant(s) == std::mem::discriminant(&why))), "{r}");
            let outcome = outcomes(&r).pop().expect("an outcome");
            let (rows_in, rows_out) = filtered(&plan);
            assert!(rows_in <= DIM, "{r}");
            if ahead > 1 {
                assert!(outcome.is_built(), "{r}");
                assert!((100..2_000).contains(&rows_out), "{rows_in} -> {rows_out}\n{r}");
            } else {
                let failed = matches!(&outcome, FilterOutcome::PassAll { reason, .. } if reason.contains("read-ahead"));
                assert!(failed, "{r}");
                assert_eq!((rows_in, rows_out), (DIM, DIM), "{r}");
            }
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skips_by_statistics_each_with_its_reason() {
    within(async {
        let f = fixture(small(), false).await;
        let probe = |r: &RuntimeFilterReport| verdicts(r, JoinSide::Right);
        // Not selective by statistics: the whole dimension (a scan without a
        // predicate), and the fact's key range lies within the dimension's
        // (a foreign key).
        let (r, _) = check(&f, "SELECT count(*), sum(d.d_cat) FROM fact f JOIN dim d ON f.f_dkey = d.d_key").await;
        assert!(probe(&r).iter().any(|v| matches!(v, Verdict::Skipped(SkipReason::NotSelective { .. }))), "{r}");
        // Not selective once built: 90% of the dimension. A filtered build
        // side's row estimate is not trusted, so the filter is placed; the
        // built filter holds 90% of the fact key's distinct values, and every
        // probe row passes without being checked.
        for sql in [
            "SELECT count(*) FROM fact f JOIN dim d ON f.f_dkey = d.d_key WHERE d.d_cat < 90",
            "SELECT count(*) FROM fact f JOIN dim d ON f.f_dkey = d.d_key WHERE d.d_key % 10 <> 3",
        ] {
            let (r, plan) = check(&f, sql).await;
            assert!(probe(&r).iter().any(placed), "{r}");
            assert!(
                outcomes(&r).iter().any(|o| matches!(o, FilterOutcome::PassAll { reason, .. } if reason.contains("not selective"))),
                "{r}"
            );
            assert_eq!(sum_metric(&plan, "rows_unchecked", is_bloom_filter).unwrap(), sum_metric(&plan, "rows_in", is_bloom_filter).unwrap(), "{r}");
        }
        // Key type without an encoding.
        let (r, _) = check(&f, "SELECT count(*) FROM fact f JOIN dim d ON f.f_list = d.d_list WHERE d.d_cat < 10").await;
        assert!(all_on(&r, JoinSide::Right, |v| matches!(v, Verdict::Skipped(SkipReason::KeyType(_)))), "{r}");
        // No shuffle between the join and where the key's lineage stops: a
        // window partitioned by the key, whose partitioning the join reuses.
        let (r, _) = check(&f, "SELECT count(*), sum(f.lv) FROM (SELECT f_dkey, lag(f_val) OVER (PARTITION BY f_dkey ORDER BY f_id) AS lv FROM fact) f JOIN dim d ON f.f_dkey = d.d_key WHERE d.d_cat < 10").await;
        assert!(r.decisions.iter().any(|d| matches!(d.verdict, Verdict::Skipped(SkipReason::NoShuffle(_)))), "{r}");

        let tiny = fixture(RuntimeFilterConfig { min_filtered_rows: 1 << 40, ..small() }, false).await;
        let (r, _) = check(&tiny, SELECTIVE).await;
        assert!(all_on(&r, JoinSide::Right, |v| matches!(v, Verdict::Skipped(SkipReason::SmallSide { .. }))), "{r}");
        let broadcast = fixture(small(), true).await;
        let (r, _) = check(&broadcast, SELECTIVE).await;
        assert!(!r.decisions.is_empty() && r.decisions.iter().all(|d| d.verdict == Verdict::Skipped(SkipReason::Broadcast)), "{r}");
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_that_drops_nothing_stops_being_checked() {
    within(async {
        let f = fixture(small(), false).await;
        // Every fact key is in the dimension (no statistics rule it out: the
        // build side is behind a filter statistics cannot estimate).
        let sql =
            "SELECT count(*) FROM fact f JOIN dim d ON f.f_dkey = d.d_key WHERE d.d_key % 7 <> 100";
        let (r, plan) = check(&f, sql).await;
        assert!(probe_placed(&r), "{r}");
        let checked = sum_metric(&plan, "rows_in", is_bloom_filter).unwrap();
        let unchecked = sum_metric(&plan, "rows_unchecked", is_bloom_filter).unwrap();
        let stopped = sum_metric(&plan, "stopped_checking", is_bloom_filter).unwrap()
            + sum_metric(&plan, "pass_all", is_bloom_filter).unwrap();
        assert!(
            stopped > 0 && unchecked > 0 && unchecked <= checked,
            "{checked} {unchecked} {stopped}\n{r}"
        );
    })
    .await
}

fn probe_placed(r: &RuntimeFilterReport) -> bool {
    verdicts(r, JoinSide::Right).iter().any(placed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_row_counts_are_decided_at_run_time() {
    within(async {
        let f = fixture(small(), false).await;
        // A CSV table has no row count before it is read.
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("dimcsv.csv");
        let mut text = String::from("c_key,c_cat\n");
        for k in 0..DIM {
            text.push_str(&format!("{k},{}\n", k % 100));
        }
        std::fs::write(&csv, text).unwrap();
        for ctx in [&f.single, &f.rule] {
            ctx.register_csv("dimcsv", csv.to_str().unwrap(), Default::default())
                .await
                .unwrap();
        }
        let (r, plan) = check(
            &f,
            "SELECT count(*) FROM fact f JOIN dimcsv c ON f.f_dkey = c.c_key WHERE c.c_cat < 10",
        )
        .await;
        // Without a row count DataFusion may build on either side; the
        // filter is placed, built and checked all the same: on the probe
        // side, or, where the whole fact table builds the join, on the fact
        // side by the dimension's keys (a reverse filter).
        assert!(r.placed() == 1 && r.built() == 1, "{r}");
        let (rows_in, rows_out) = filtered(&plan);
        assert!(
            rows_in > 0 && rows_out <= rows_in,
            "{rows_in} -> {rows_out}\n{r}"
        );
    })
    .await
}

async fn text(ctx: &SessionContext, sql: &str) -> String {
    let out = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    datafusion::arrow::util::pretty::pretty_format_batches(&out)
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_runs_nothing_and_explain_analyze_shows_the_run() {
    within(async {
        let f = fixture(small(), false).await;
        let plain = text(&f.rule, &format!("EXPLAIN {SELECTIVE}")).await;
        assert!(
            plain.contains("BloomFilterExec") && plain.contains("BloomTapExec"),
            "{plain}"
        );
        assert!(plain.contains("BloomRuntimeFilters: 1 placed"), "{plain}");
        assert!(plain.contains("left side: skipped: build side"), "{plain}");
        // Planning ran nothing: no tap posted, no filter was decided.
        let r = last_report(&f.rule).unwrap();
        assert_eq!(r.placed(), 1);
        assert!(outcomes(&r).is_empty(), "{r}");
        let analyzed = text(&f.rule, &format!("EXPLAIN ANALYZE {SELECTIVE}")).await;
        for needle in [
            "BloomFilterExec",
            "BloomTapExec",
            "rows_in",
            "wait_time",
            "build_rows",
            "Runtime filters",
            "BloomRuntimeFilters: 1 placed",
            "left side: skipped",
            "run: built from 3 task(s)",
        ] {
            assert!(analyzed.contains(needle), "{needle}:\n{analyzed}");
        }
    })
    .await
}
