//! Runtime filters on datafusion-distributed's in-memory cluster (3 workers,
//! no ports): a 1M-row fact table and a 50k-row dimension with ~10% of its
//! keys selected, as 8 + 6 Parquet files, the join forced partitioned; the
//! plain SQL query gets its filter from the planner, built by the join's own
//! build side while the query runs.

use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::Int64Type;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::physical_plan::{collect, ExecutionPlan};
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use datafusion_distributed::{
    display_plan_ascii, rewrite_distributed_plan_with_metrics, DistributedMetricsFormat,
    NetworkBoundaryExt,
};

use crate::common::cluster::{
    broadcast_join_config, in_memory_cluster, partitioned_join_config, single_task_config,
    WorkerFunctions,
};
use crate::common::metrics::{executed_plan, is_bloom_filter, is_shuffle_of, sum_metric};
use crate::common::star::{write_star, StarData, StarSpec};
use filterstore_datafusion::{
    last_report, FilterOutcome, RuntimeFilterConfig, SkipReason, Verdict,
};
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const SELECTED: i32 = 10;
const QUERY: &str = "SELECT count(*), sum(f.f_val), sum(f.f_id) FROM fact f JOIN dim d ON f.f_dkey = d.d_key WHERE d.d_cat < 10";

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Fails the test instead of hanging it.
async fn within<T>(secs: u64, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), f)
        .await
        .expect("test timed out")
}

async fn register(ctx: &SessionContext, dir: &Path) -> datafusion::error::Result<()> {
    for t in ["fact", "dim"] {
        let path = dir.join(t);
        ctx.register_parquet(
            t,
            path.to_str().unwrap_or_default(),
            ParquetReadOptions::default(),
        )
        .await?;
    }
    Ok(())
}

fn data() -> (tempfile::TempDir, StarData) {
    let dir = tempfile::tempdir().unwrap();
    let star = write_star(dir.path(), StarSpec::default()).unwrap();
    (dir, star)
}

/// (count, sum of values, sum of ids) of the query's single row.
async fn run(
    plan: Arc<dyn ExecutionPlan>,
    ctx: &SessionContext,
) -> datafusion::error::Result<(i64, String, String)> {
    let b = collect(plan, ctx.task_ctx()).await?;
    let row = &b[0];
    let n = row.column(0).as_primitive::<Int64Type>().value(0);
    let s = |c: usize| {
        datafusion::arrow::util::display::array_value_to_string(row.column(c), 0)
            .unwrap_or_default()
    };
    Ok((n, s(1), s(2)))
}

/// The undistributed exact join.
async fn exact(dir: &Path) -> (i64, String, String) {
    let ctx = SessionContext::new();
    register(&ctx, dir).await.unwrap();
    let plan = ctx
        .sql(QUERY)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    run(plan, &ctx).await.unwrap()
}

/// The shuffle whose stage reads the fact table, and its bloom filters.
fn fact_shuffle(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ExecutionPlan>> {
    let mut found = None;
    let _ = plan.apply(|n| {
        if is_shuffle_of(n.as_ref(), "f_dkey") && reads_fact(n) {
            found = Some(Arc::clone(n));
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    found
}

fn reads_fact(n: &Arc<dyn ExecutionPlan>) -> bool {
    n.exists(|c| Ok(c.children().is_empty() && c.schema().index_of("f_dkey").is_ok()))
        .unwrap_or(false)
}

fn is_bloom(n: &dyn ExecutionPlan) -> bool {
    is_bloom_filter(n)
}

fn rule() -> Option<RuntimeFilterConfig> {
    Some(RuntimeFilterConfig::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_join_is_prefiltered() -> TestResult {
    within(180, async {
        let (dir, star) = data();
        let expected = exact(dir.path()).await;
        assert_eq!(expected.0 as u64, star.selected_fact_rows(SELECTED));

        // Baseline: the same cluster without the rule, DataFusion's plan.
        let plain = in_memory_cluster(3, WorkerFunctions::Registered, partitioned_join_config(3)?, None)?;
        register(&plain, dir.path()).await?;
        let base = plain.sql(QUERY).await?.create_physical_plan().await?;
        assert!(fact_shuffle(&base).is_some(), "forced partitioned join must shuffle the fact side:\n{}", display_plan_ascii(base.as_ref(), false));
        assert_eq!(run(Arc::clone(&base), &plain).await?, expected);
        let base = rewrite_distributed_plan_with_metrics(base, DistributedMetricsFormat::Aggregated).await?;

        let ctx = in_memory_cluster(3, WorkerFunctions::Registered, partitioned_join_config(3)?, rule())?;
        register(&ctx, dir.path()).await?;
        let planned = ctx.sql(QUERY).await?.create_physical_plan().await?;
        let report = last_report(&ctx).expect("a report");
        let placed: Vec<_> = report
            .decisions
            .iter()
            .filter_map(|d| match &d.verdict {
                Verdict::Placed { m, k, filter, .. } => Some((*m, *k, filter.clone())),
                Verdict::Skipped(_) => None,
            })
            .collect();
        let [(m, k, ref filter)] = placed[..] else {
            panic!("one filter expected:\n{report}");
        };
        assert!(filter.outcome().is_none(), "planning ran the build side:\n{report}");
        let shuffle = fact_shuffle(&planned).expect("fact shuffle");
        let shown = display_plan_ascii(planned.as_ref(), false);
        // The filter sits below the fact side's network shuffle, and nowhere
        // else (not on the build side).
        let below: usize = count(&shuffle, is_bloom);
        assert!(below >= 1, "{shown}");
        assert_eq!(count(&planned, is_bloom), below, "a bloom filter outside the fact stage:\n{shown}");
        let fact_tasks = shuffle.as_network_boundary().map(|b| b.input_stage().task_count()).unwrap_or(0);

        assert_eq!(run(Arc::clone(&planned), &ctx).await?, expected, "result equals the exact join");
        let Some(FilterOutcome::Built { message_bytes, keys, fp, partials, build_rows, .. }) = filter.outcome() else {
            panic!("no filter built:\n{report}");
        };
        assert_eq!(partials, 3, "one partial per task of the join's stage");
        assert_eq!(build_rows as usize, star.selected_keys(SELECTED), "the taps saw every build row once");
        let plan = executed_plan(&planned).await?;

        // Rows entering the fact shuffle: the filters' output.
        let passed = sum_metric(&plan, "output_rows", is_bloom)? as u64;
        let rows_in = sum_metric(&plan, "rows_in", is_bloom)? as u64;
        assert_eq!(rows_in, 1_000_000, "every fact row meets the filter once");
        let selected = star.selected_fact_rows(SELECTED);
        let unselected = 1_000_000 - selected;
        // False-positive rows: each unselected key passes with probability p
        // (the filter's FP rate estimated from its fill) and brings its c_k
        // rows: mean p * sum(c_k), variance p(1-p) * sum(c_k^2). Bound: mean
        // + 5 sigma, with p doubled for the error of the fill estimate on a
        // blocked filter (its per-block fill varies around the mean).
        let p = 2.0 * fp;
        let bound = selected as f64 + p * unselected as f64 + 5.0 * (p * star.unselected_sum_sq(SELECTED)).sqrt();
        assert!(passed >= selected, "false negatives: {passed} < {selected}");
        assert!((passed as f64) <= bound, "{passed} rows passed, bound {bound:.0} (fp {fp:.4})");
        // Distinct keys from the fill: within 3% of the truth.
        let truth = star.selected_keys(SELECTED) as f64;
        assert!((keys - truth).abs() < 0.03 * truth, "{keys:.0} keys estimated, {truth} selected");
        // Message: within 5% of the entropy of the filter's bits (a fill f
        // gives m·H(f) bits; f = fp^(1/k) from the fill estimate), plus the
        // header: the filter is sized for headroom and entropy-coded.
        let f = fp.powf(1.0 / f64::from(k));
        let h = -(f * f.log2() + (1.0 - f) * (1.0 - f).log2());
        let bound = m as f64 * h / 8.0 * 1.05 + 256.0;
        assert!((message_bytes as f64) <= bound, "{message_bytes} bytes, bound {bound:.0} (m {m}, fill {f:.3})");

        let shuffled = |p: &Arc<dyn ExecutionPlan>| -> datafusion::error::Result<usize> {
            let s = fact_shuffle(p).expect("fact shuffle");
            sum_metric(&s, "bytes_transferred", |n| is_shuffle_of(n, "f_dkey"))
        };
        let plan_bytes = |p: &Arc<dyn ExecutionPlan>| sum_metric(p, "plan_bytes_sent", |_| true);
        let (b0, b1) = (plan_bytes(&base)?, plan_bytes(&plan)?);
        println!(
            "fact shuffle rows 1000000 -> {passed} (selected {selected}, fp {fp:.4}); bytes {} -> {}; message {message_bytes} B for ~{keys:.0} keys; plan bytes sent {b0} -> {b1} ({fact_tasks} fact tasks)\n{report}",
            shuffled(&base)?,
            shuffled(&plan)?
        );
        // The message never travels in a plan: the nodes add their keys and
        // settings only (at most 2 KiB per task of the two stages).
        assert!(b1 <= b0 + 2048 * 2 * fact_tasks.max(3), "plan bytes {b0} -> {b1}");
        assert!(shuffled(&plan)? * 4 < shuffled(&base)?, "shuffle bytes must fall with the rows");
        Ok(())
    })
    .await
}

fn count(plan: &Arc<dyn ExecutionPlan>, pred: fn(&dyn ExecutionPlan) -> bool) -> usize {
    let mut n = 0;
    let _ = plan.apply(|c| {
        n += usize::from(pred(c.as_ref()));
        Ok(TreeNodeRecursion::Continue)
    });
    n
}

fn skip_reasons(ctx: &SessionContext) -> Vec<SkipReason> {
    last_report(ctx)
        .expect("a report")
        .decisions
        .into_iter()
        .filter_map(|d| match d.verdict {
            Verdict::Skipped(r) => Some(r),
            Verdict::Placed { .. } => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcast_and_single_node_plans_are_left_alone() -> TestResult {
    within(120, async {
        let (dir, _) = data();
        let plain = in_memory_cluster(
            3,
            WorkerFunctions::Registered,
            broadcast_join_config(3)?,
            None,
        )?;
        register(&plain, dir.path()).await?;
        let own = plain.sql(QUERY).await?.create_physical_plan().await?;
        let ctx = in_memory_cluster(
            3,
            WorkerFunctions::Registered,
            broadcast_join_config(3)?,
            rule(),
        )?;
        register(&ctx, dir.path()).await?;
        let planned = ctx.sql(QUERY).await?.create_physical_plan().await?;
        assert_eq!(
            skip_reasons(&ctx),
            vec![SkipReason::Broadcast, SkipReason::Broadcast]
        );
        assert_eq!(
            display_plan_ascii(planned.as_ref(), false),
            display_plan_ascii(own.as_ref(), false)
        );
        assert_eq!(count(&planned, is_bloom), 0);

        // A session whose scans stay in one task: datafusion-distributed
        // leaves the plan single-node, and so does the rule.
        let single = in_memory_cluster(
            3,
            WorkerFunctions::Registered,
            single_task_config(3)?,
            rule(),
        )?;
        register(&single, dir.path()).await?;
        let planned = single.sql(QUERY).await?.create_physical_plan().await?;
        assert_eq!(count(&planned, is_bloom), 0);
        let reasons = skip_reasons(&single);
        assert!(
            !reasons.is_empty() && reasons.iter().all(|r| *r == SkipReason::SingleNode),
            "{reasons:?}"
        );
        assert_eq!(run(planned, &single).await?, exact(dir.path()).await);
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_without_the_codec_fails_the_query_loudly() -> TestResult {
    within(120, async {
        let (dir, _) = data();
        let ctx = in_memory_cluster(
            3,
            WorkerFunctions::Missing,
            partitioned_join_config(3)?,
            rule(),
        )?;
        register(&ctx, dir.path()).await?;
        // Planning runs nothing, so it cannot know; a worker that cannot
        // decode the filter's nodes fails the query with the reason, as a
        // worker without a UDF the query uses does. Never a wrong answer.
        let plan = ctx.sql(QUERY).await?.create_physical_plan().await?;
        assert_eq!(count(&plan, is_bloom), 1);
        let err = run(plan, &ctx)
            .await
            .expect_err("a worker without the codec");
        let text = err.to_string();
        assert!(
            text.contains("Bloom") || text.contains("codec") || text.contains("extension"),
            "{text}"
        );
        Ok(())
    })
    .await
}
