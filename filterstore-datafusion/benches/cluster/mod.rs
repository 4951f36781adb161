//! The distributed benchmarks' harness (TPC-H, TPC-DS): each query on a
//! 3-worker cluster with joins forced partitioned, without runtime filters,
//! with them (default settings) and forced, interleaved, on the in-memory
//! cluster and on a cluster of 3 worker processes on localhost; every
//! answer checked against single-node DataFusion; `EXPLAIN` timed with and
//! without the rule. Prints a row per query with the machine's load, and
//! `RESULT <workload>.<name>` lines (`<workload>.proc.<name>` for the
//! process cluster).
//!
//! Environment: `<W>_RUNS` runs per query and mode (default 3), `<W>_QUERIES`
//! a comma-separated subset, `<W>_CLUSTERS` any of `memory`, `process` and
//! `net` (default `memory,process`), where `<W>` is the workload's name in
//! capitals. `net` is the process cluster on a rate-limited network
//! ([`net_outside`], as root; `<W>_NET` the rate, default `1gbit`), its
//! figures `<workload>.net.<name>`. `FILTERSTORE_BENCH_REPORT=1` prints each
//! query's runtime-filter report (with the rule), `FILTERSTORE_BENCH_PLAN=1`
//! each run's executed plan with its metrics and wall time: single-node
//! DataFusion's (the expected answer) first, then the modes in the order
//! they ran (run `r` in the order [`ORDERS`]`[r % 6]`; 0 without the rule,
//! 1 with it, 2 forced). After the in-memory cluster, each other
//! cluster of the same run is compared with it query by query: what each
//! filter of the forced runs shipped ([`compare_shipped`]). The rule's
//! settings can be changed for a run, each by a variable
//! ([`rule_config`]): `FILTERSTORE_PROBE_BUFFER`,
//! `FILTERSTORE_MAX_FILTER_BYTES`, `FILTERSTORE_READ_AHEAD` (bytes),
//! `FILTERSTORE_SCAN_WAIT_MS`, and `FILTERSTORE_SCAN_FILTERS=0`,
//! `FILTERSTORE_FIT_FILTERS=0`, `FILTERSTORE_FIT_PARTIALS=0`,
//! `FILTERSTORE_REVERSE=0` to turn one off.

#![allow(dead_code)]

#[path = "../../tests/common/procs.rs"]
pub mod procs;

#[path = "../../tests/common/cluster.rs"]
pub mod in_memory;

#[path = "../../tests/common/metrics.rs"]
pub mod metrics;

#[path = "../../tests/common/netns.rs"]
pub mod netns;

#[path = "../../tests/common/scans.rs"]
pub mod scans;

mod totals;
pub use totals::Totals;

/// Generated data kept between runs (shared with the tests).
#[path = "../../tests/common/cache.rs"]
pub mod cache;

use datafusion::physical_plan::display::DisplayableExecutionPlan;
use datafusion::physical_plan::{collect, ExecutionPlan};
use datafusion::prelude::SessionContext;
use filterstore_datafusion::remote_cluster;
use filterstore_datafusion::{last_report, FilterOutcome, RuntimeFilterConfig};
use in_memory::{in_memory_cluster, partitioned_join_config, WorkerFunctions};
use metrics::{executed_plan, one_line, sum_metric};
use scans::{is_scan, probe_rows, scans, Scan};
use std::sync::Arc;
use std::time::Instant;

pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

pub fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

pub fn load1() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().next().unwrap_or("?").to_string())
        .unwrap_or_else(|_| "?".into())
}

pub fn cpu() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "?".into())
}

/// Rows and bytes entering the plan's network shuffles.
#[derive(Default, Clone)]
pub struct Figures {
    pub shuffle_rows: usize,
    pub shuffle_bytes: usize,
    /// Rows leaving the plan's Parquet scans (every scan: build sides read
    /// the same in every mode).
    pub scan_rows: usize,
    /// The plan's scans, each with its rows and whether it is a probe side.
    pub scans: Vec<Scan>,
    /// Rows entering the shuffles toward a join's build side
    /// ([`build_shuffle_rows`]).
    pub build_shuffle_rows: usize,
    /// Summed over the plan's `BloomFilterExec`s: rows in, rows read
    /// before their filter came, rows passed unfiltered before it, and the
    /// partitions whose buffer filled or whose deadline passed.
    pub probe: [usize; 5],
}

/// The probe metrics of [`Figures::probe`], in its order.
const PROBE_METRICS: [&str; 5] = [
    "rows_in",
    "rows_buffered",
    "rows_unfiltered",
    "buffer_full",
    "deadline_missed",
];

fn is_probe(n: &dyn ExecutionPlan) -> bool {
    n.name() == "BloomFilterExec"
}

fn is_shuffle(n: &dyn ExecutionPlan) -> bool {
    one_line(n).contains("NetworkShuffleExec")
}

/// Rows entering the plan's shuffles that feed a join's build side (its
/// first input, read whole before the probe side), the nearest join above a
/// shuffle deciding. A runtime filter goes from a build side to a probe
/// side: these rows are never filtered.
fn build_shuffle_rows(plan: &Arc<dyn ExecutionPlan>) -> usize {
    fn walk(node: &dyn ExecutionPlan, build: bool) -> usize {
        let mut rows = 0;
        if build && is_shuffle(node) {
            rows += node
                .metrics()
                .and_then(|m| m.output_rows())
                .unwrap_or_default();
        }
        let join = matches!(node.name(), "HashJoinExec" | "NestedLoopJoinExec");
        for (i, child) in node.children().into_iter().enumerate() {
            rows += walk(child.as_ref(), if join { i == 0 } else { build });
        }
        rows
    }
    walk(plan.as_ref(), false)
}

/// A query's statements split around the one that returns its rows (a
/// `SELECT` or `WITH`): setup (TPC-H q15's `CREATE VIEW`), the query,
/// teardown (its `DROP VIEW`).
pub fn split(stmts: &[String]) -> Res<(&[String], &String, &[String])> {
    let i = stmts
        .iter()
        .position(|s| is_query(s))
        .ok_or("no SELECT among the statements")?;
    Ok((&stmts[..i], &stmts[i], &stmts[i + 1..]))
}

/// Whether a statement is a `SELECT` or `WITH` (after any comment lines:
/// TPC-DS q47 opens with two).
fn is_query(stmt: &str) -> bool {
    let first = stmt
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("--"))
        .unwrap_or("")
        .to_lowercase();
    first.starts_with("select") || first.starts_with("with")
}

async fn run_each(ctx: &SessionContext, stmts: &[String]) -> Res<()> {
    for s in stmts {
        ctx.sql(s).await?.collect().await?;
    }
    Ok(())
}

/// Runs a query's statements once: (wall ms of them all, the rows of the
/// query, shuffle figures of the query).
pub async fn once(
    ctx: &SessionContext,
    stmts: &[String],
) -> Res<(f64, Vec<datafusion::arrow::array::RecordBatch>, Figures)> {
    let (setup, query, teardown) = split(stmts)?;
    let started = Instant::now();
    run_each(ctx, setup).await?;
    let plan = ctx.sql(query).await?.create_physical_plan().await?;
    let batches = collect(Arc::clone(&plan), ctx.task_ctx()).await?;
    run_each(ctx, teardown).await?;
    let wall = started.elapsed().as_secs_f64() * 1e3;
    let plan = executed_plan(&plan).await?;
    if std::env::var_os("FILTERSTORE_BENCH_PLAN").is_some() {
        let text = DisplayableExecutionPlan::with_metrics(plan.as_ref()).indent(true);
        println!("executed plan, {wall:.1} ms:\n{text}");
    }
    let figures = Figures {
        shuffle_rows: sum_metric(&plan, "output_rows", is_shuffle)?,
        shuffle_bytes: sum_metric(&plan, "output_bytes", is_shuffle)?,
        scan_rows: sum_metric(&plan, "output_rows", is_scan)?,
        scans: scans(&plan),
        build_shuffle_rows: build_shuffle_rows(&plan),
        probe: {
            let mut probe = [0; 5];
            for (v, name) in probe.iter_mut().zip(PROBE_METRICS) {
                *v = sum_metric(&plan, name, is_probe)?;
            }
            probe
        },
    };
    Ok((wall, batches, figures))
}

/// `EXPLAIN` of the query (between its setup and teardown): wall ms.
pub async fn explain(ctx: &SessionContext, stmts: &[String]) -> Res<f64> {
    let (setup, query, teardown) = split(stmts)?;
    run_each(ctx, setup).await?;
    let started = Instant::now();
    ctx.sql(&format!("EXPLAIN {query}"))
        .await?
        .collect()
        .await?;
    let ms = started.elapsed().as_secs_f64() * 1e3;
    run_each(ctx, teardown).await?;
    Ok(ms)
}

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The three sessions of one cluster kind.
pub struct Sessions {
    pub without: SessionContext,
    pub with: SessionContext,
    pub forced: SessionContext,
    /// Worker processes and the rendezvous servers: kept alive.
    _keep: Vec<Box<dyn std::any::Any>>,
}

/// The rule's settings: the defaults, with `FILTERSTORE_PROBE_BUFFER`
/// (bytes) as `probe_buffer_bytes` and `FILTERSTORE_MAX_FILTER_BYTES` as
/// `max_filter_bytes` when set, without the scan predicate when
/// `FILTERSTORE_SCAN_FILTERS=0`, and with filters shipped at their planned
/// size when `FILTERSTORE_FIT_FILTERS=0` (their partials at their planned
/// size when `FILTERSTORE_FIT_PARTIALS=0`), and with scans waiting
/// `FILTERSTORE_SCAN_WAIT_MS` for their filters (0: they open at once),
/// without reverse filters when `FILTERSTORE_REVERSE=0`, and with
/// `FILTERSTORE_READ_AHEAD` (bytes) as `read_ahead_bytes`.
pub fn rule_config() -> RuntimeFilterConfig {
    let mut rule = RuntimeFilterConfig::default();
    if let Some(b) = std::env::var("FILTERSTORE_PROBE_BUFFER")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        rule.probe_buffer_bytes = b;
    }
    if let Some(b) = std::env::var("FILTERSTORE_MAX_FILTER_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        rule.max_filter_bytes = b;
    }
    if std::env::var("FILTERSTORE_SCAN_FILTERS").is_ok_and(|v| v == "0") {
        rule.scan_filters = false;
    }
    if std::env::var("FILTERSTORE_FIT_FILTERS").is_ok_and(|v| v == "0") {
        rule.fit_filters = false;
    }
    if std::env::var("FILTERSTORE_FIT_PARTIALS").is_ok_and(|v| v == "0") {
        rule.fit_partials = false;
    }
    if std::env::var("FILTERSTORE_REVERSE").is_ok_and(|v| v == "0") {
        rule.reverse_filters = false;
    }
    if let Some(b) = std::env::var("FILTERSTORE_READ_AHEAD")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        rule.read_ahead_bytes = b;
    }
    if let Some(ms) = std::env::var("FILTERSTORE_SCAN_WAIT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        rule.scan_wait = std::time::Duration::from_millis(ms);
    }
    rule
}

/// The in-memory cluster's sessions.
pub fn memory(rule: &RuntimeFilterConfig) -> Res<Sessions> {
    let cfg = || partitioned_join_config(3);
    let forced = RuntimeFilterConfig {
        force: true,
        ..rule.clone()
    };
    Ok(Sessions {
        without: in_memory_cluster(3, WorkerFunctions::Registered, cfg()?, None)?,
        with: in_memory_cluster(3, WorkerFunctions::Registered, cfg()?, Some(rule.clone()))?,
        forced: in_memory_cluster(3, WorkerFunctions::Registered, cfg()?, Some(forced))?,
        _keep: Vec::new(),
    })
}

/// Sessions over 3 `filterstore-worker` processes (started here, stopped
/// when the sessions are dropped).
/// Cluster kind `net`: the process cluster inside a network namespace whose
/// loopback is limited to `<W>_NET` (default `1gbit`; `tests/common/
/// netns.rs`). Outside the namespace, runs this bench again inside one,
/// with `<W>_CLUSTERS=net`, and returns `true` (done; or skipped, said,
/// where the namespace cannot be made); inside, returns `false`: the
/// caller runs the process cluster, its figures prefixed `<w>.net`.
pub fn net_outside(workload: &str) -> bool {
    if std::env::var(netns::INSIDE).is_ok() {
        return false;
    }
    let upper = workload.to_uppercase();
    let rate = std::env::var(format!("{upper}_NET")).unwrap_or_else(|_| "1gbit".into());
    match netns::Netns::create(workload, &rate) {
        Err(why) => println!("== net cluster skipped, no {workload}.net figures: {why}"),
        Ok(ns) => {
            println!("== net cluster: 3 worker processes and the coordinator, loopback limited to {rate}");
            let args: Vec<String> = std::env::args().skip(1).collect();
            let clusters = format!("{upper}_CLUSTERS");
            if let Err(e) = ns.run_self(&args, &[(clusters.as_str(), "net")]) {
                println!("== net cluster failed: {e}");
            }
            println!(
                "loopback queue after the run: {}",
                ns.qdisc().replace('\n', " ")
            );
        }
    }
    true
}

pub async fn processes(rule: &RuntimeFilterConfig) -> Res<Sessions> {
    let workers = procs::Workers::start(3)?;
    let local = "127.0.0.1:0".parse()?;
    let urls = workers.urls.clone();
    let cfg = || partitioned_join_config(3);
    let forced = RuntimeFilterConfig {
        force: true,
        ..rule.clone()
    };
    let without = remote_cluster(urls.clone(), cfg()?, None, local).await?;
    let with = remote_cluster(urls.clone(), cfg()?, Some(rule.clone()), local).await?;
    let forced = remote_cluster(urls, cfg()?, Some(forced), local).await?;
    Ok(Sessions {
        without: without.ctx,
        with: with.ctx,
        forced: forced.ctx,
        _keep: vec![
            Box::new(workers),
            Box::new(without.rendezvous),
            Box::new(with.rendezvous),
            Box::new(forced.rendezvous),
        ],
    })
}

/// What each filter of the session's last query shipped, in plan order:
/// the build rows it was made of, its message's bytes and partials, and
/// how many probe tasks read it; or why it shipped nothing. Timings left
/// out, so two clusters that filter alike give equal lists.
fn shipped(ctx: &SessionContext) -> Vec<String> {
    let Some(report) = last_report(ctx) else {
        return Vec::new();
    };
    report
        .filters()
        .map(|f| match f.outcome() {
            Some(FilterOutcome::Built {
                delivered,
                message_bytes,
                partials,
                build_rows,
                ..
            }) => format!(
                "built from {build_rows} rows in {partials} partials, {message_bytes} B, read by {delivered} probe tasks"
            ),
            Some(FilterOutcome::Undelivered {
                unreadable,
                message_bytes,
                partials,
                ..
            }) => format!(
                "undelivered: {message_bytes} B from {partials} partials, {unreadable} unreadable"
            ),
            Some(FilterOutcome::PassAll { reason, .. }) => format!("pass-all: {reason}"),
            None => "no outcome".into(),
        })
        .collect()
}

/// Compares, query by query, what the filters of `other`'s forced runs
/// shipped with the in-memory cluster's (`memory`): a filter lost or
/// changed on the way between processes shows here. Prints each query
/// that differs and `RESULT <prefix>.queries_shipping_unlike_memory`.
pub fn compare_shipped(memory: &Totals, other: &Totals, prefix: &str) {
    let mut differ = 0;
    for (label, theirs) in &other.shipped {
        let Some((_, ours)) = memory.shipped.iter().find(|(l, _)| l == label) else {
            continue;
        };
        if ours != theirs {
            differ += 1;
            println!("{label}: filters shipped unlike the in-memory cluster's");
            println!("    in memory: {ours:?}");
            println!("    {prefix}: {theirs:?}");
        }
    }
    println!("RESULT {prefix}.queries_shipping_unlike_memory {differ}");
}

/// Compares results as the tests do; `true` when equal.
pub type Same =
    fn(&[datafusion::arrow::array::RecordBatch], &[datafusion::arrow::array::RecordBatch]) -> bool;

/// One query's figures on one cluster kind: median wall ms and the last
/// run's shuffle figures per mode (without, with, forced), filters built.
struct QueryRow {
    ms: [f64; 3],
    figs: [Figures; 3],
    filters: usize,
    wrong: usize,
    shipped: Vec<String>,
}

/// The order of the three modes (0 without the rule, 1 with it, 2 forced)
/// in run `r`: `ORDERS[r % 6]`, every order once (a Williams design for
/// three treatments). In six runs each mode takes each place, and follows
/// each other mode, equally often, so neither the first run's cold start
/// nor whatever a run leaves behind for the next (the forced mode's larger
/// allocations, its filters' threads) favours one mode. The rotation it
/// replaced (`(k + r) % 3`) was balanced only in multiples of three runs:
/// in five, the mode without the rule ran first in the very first run (the
/// cold one) and right after the forced mode three times, the mode with it
/// twice.
const ORDERS: [[usize; 3]; 6] = [
    [0, 1, 2],
    [1, 2, 0],
    [2, 0, 1],
    [0, 2, 1],
    [1, 0, 2],
    [2, 1, 0],
];

/// Runs one query `runs` times in each mode, interleaved ([`ORDERS`]),
/// checking each answer against `expected`.
async fn run_query(
    label: &str,
    kind: &str,
    sessions: &Sessions,
    stmts: &[String],
    expected: &[datafusion::arrow::array::RecordBatch],
    runs: usize,
    same: Same,
) -> Res<QueryRow> {
    let mut times = [Vec::new(), Vec::new(), Vec::new()];
    let mut row = QueryRow {
        ms: [0.0; 3],
        figs: Default::default(),
        filters: 0,
        wrong: 0,
        shipped: Vec::new(),
    };
    for r in 0..runs.max(1) {
        for m in ORDERS[r % ORDERS.len()] {
            let ctx = [&sessions.without, &sessions.with, &sessions.forced][m];
            let (ms, rows, f) = once(ctx, stmts)
                .await
                .map_err(|e| format!("mode {m}: {e}"))?;
            if !same(expected, &rows) {
                row.wrong += 1;
                println!("{label} ({kind}): WRONG RESULT in mode {m}");
            }
            times[m].push(ms);
            row.figs[m] = f;
            if m == 1 {
                row.filters = last_report(&sessions.with).map_or(0, |r| r.built());
                if std::env::var_os("FILTERSTORE_BENCH_REPORT").is_some()
                    && let Some(report) = last_report(&sessions.with)
                {
                    println!("{label} ({kind}), with the rule: {report}");
                }
            }
            if m == 2 {
                row.shipped = shipped(&sessions.forced);
            }
        }
    }
    row.ms = times.map(|mut v| median(&mut v));
    Ok(row)
}

/// Runs every query on one cluster kind, interleaving the three modes. A
/// query single-node DataFusion cannot run is skipped; one that fails on
/// the cluster counts as a wrong result; both are printed with the error.
pub async fn run_all(
    kind: &str,
    sessions: &Sessions,
    single: &SessionContext,
    queries: &[(String, Vec<String>)],
    runs: usize,
    same: Same,
) -> Res<Totals> {
    let mut t = Totals::default();
    println!(
        "{:>6} {:>3} {:>12} {:>12} {:>8} {:>6} {:>6} {:>9} {:>9} {:>9} {:>6} {:>6} {:>5}",
        "q",
        "bf",
        "rows w/o",
        "rows with",
        "MB ratio",
        "scan",
        "probe",
        "ms w/o",
        "ms with",
        "ms forced",
        "ratio",
        "forced",
        "load"
    );
    for (label, stmts) in queries {
        let expected = match once(single, stmts).await {
            Ok((_, rows, _)) => rows,
            Err(e) => {
                println!("{label}: skipped, single-node DataFusion fails: {e}");
                t.skipped += 1;
                continue;
            }
        };
        let row = match run_query(label, kind, sessions, stmts, &expected, runs, same).await {
            Ok(row) => row,
            Err(e) => {
                println!("{label} ({kind}): FAILED in {e}");
                t.wrong += 1;
                continue;
            }
        };
        t.add(label, &row);
        let ([m0, m1, m2], figs) = (row.ms, &row.figs);
        let probe = match probe_rows(&figs[0].scans, &figs[1].scans) {
            (0, _) => "-".to_string(),
            (without, with) => format!("{:.3}", with as f64 / without as f64),
        };
        println!(
            "{:>6} {:>3} {:>12} {:>12} {:>8.3} {:>6.3} {:>6} {:>9.1} {:>9.1} {:>9.1} {:>6.3} {:>6.3} {:>5}",
            label,
            row.filters,
            figs[0].shuffle_rows,
            figs[1].shuffle_rows,
            figs[1].shuffle_bytes as f64 / figs[0].shuffle_bytes.max(1) as f64,
            figs[1].scan_rows as f64 / figs[0].scan_rows.max(1) as f64,
            probe,
            m0,
            m1,
            m2,
            m1 / m0,
            m2 / m0,
            load1()
        );
    }
    Ok(t)
}

/// `EXPLAIN` of every query, with and without the rule, interleaved:
/// (sum with, sum without) in ms.
pub async fn explain_all(
    sessions: &Sessions,
    queries: &[(String, Vec<String>)],
    runs: usize,
) -> Res<(f64, f64)> {
    let (mut with, mut without) = (0.0, 0.0);
    for (_, stmts) in queries {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for r in 0..runs.max(1) {
            for m in if r % 2 == 0 { [0, 1] } else { [1, 0] } {
                if m == 0 {
                    b.push(explain(&sessions.without, stmts).await?);
                } else {
                    a.push(explain(&sessions.with, stmts).await?);
                }
            }
        }
        with += median(&mut a);
        without += median(&mut b);
    }
    Ok((with, without))
}
