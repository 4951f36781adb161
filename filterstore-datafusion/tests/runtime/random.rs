//! A differential test of the runtime-filter rule on random join shapes:
//! every query runs on single-node DataFusion and on the 3-worker cluster
//! without the rule, with it, and with it forced (it then places a filter
//! everywhere it may), and the four answers must be equal. The cluster's
//! tasks run in this process, on three `filterstore-worker` processes, and
//! on three such processes behind a loopback limited to 100 Mbit/s.
//!
//! Shapes: inner, left, right, full, semi (IN, EXISTS), anti (NOT EXISTS,
//! NOT IN) and mark joins; plain and null-safe equality; self-joins on
//! either side; keys renamed in subqueries, derived (`k + 1`), cast between
//! widths, grouped (the key of an aggregate), computed by a window; single
//! and composite keys of every type below; selective, empty and all-null
//! sides; skewed keys (a tenth of all rows share one key).
//!
//! Seeded: a failure prints its seed and SQL. `RUNTIME_RANDOM_CASES` sets
//! the number of queries (by default 200 in memory, 100 on processes, 60 on
//! the limited network); the `--ignored` long run does 3,000 in memory.

use crate::common::cluster::{in_memory_cluster, partitioned_join_config, WorkerFunctions};
use crate::common::data::{table, Rng};
use crate::common::netns;
use crate::common::procs::Workers;
use crate::common::tpch::{diff, rows};
use datafusion::arrow::array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int32Array,
    Int64Array, StringArray, UInt16Array,
};
use datafusion::prelude::SessionContext;
use filterstore_datafusion::{
    last_report, remote_cluster, FilterOutcome, RemoteCluster, RuntimeFilterConfig,
};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Rows and key domain of each table: sizes differ so that both sides of a
/// join are sometimes the larger; `t3` is empty.
const TABLES: [(&str, usize, u64); 4] = [
    ("t0", 30_000, 2_000),
    ("t1", 3_000, 500),
    ("t2", 12_000, 4_000),
    ("t3", 0, 10),
];

/// Key columns, each with its SQL type family (joins pair a family with itself,
/// or `i32` with `i64` for a cast).
const KEYS: [(&str, &str); 9] = [
    ("k64", "int"),
    ("k32", "int"),
    ("ku16", "int"),
    ("ks", "str"),
    ("kd", "date"),
    ("kf", "float"),
    ("kdec", "dec"),
    ("kb", "bool"),
    ("kbin", "bin"),
];

fn column(rng: &mut Rng, rows: usize, domain: u64, null_rate: f64) -> Vec<Option<i64>> {
    (0..rows)
        .map(|_| {
            if rng.chance(null_rate) {
                None
            } else if rng.chance(0.1) {
                Some(0) // the hot key
            } else {
                Some(rng.below(domain) as i64)
            }
        })
        .collect()
}

fn float_of(k: i64) -> f64 {
    // -0.0 and 0.0 are different keys to DataFusion's join (bitwise
    // equality); NaN equals NaN.
    match k % 97 {
        1 => -0.0,
        2 => f64::NAN,
        _ => k as f64 / 4.0,
    }
}

async fn write(dir: &Path, ctxs: &[&SessionContext]) {
    let mut rng = Rng(2026);
    for (t, (name, rows, domain)) in TABLES.iter().enumerate() {
        let null_rate = [0.02, 0.0, 0.3, 0.0][t];
        let k = column(&mut rng, *rows, *domain, null_rate);
        let map = |f: &dyn Fn(i64) -> i64| k.iter().map(|v| v.map(f)).collect::<Vec<_>>();
        let cols: Vec<(&str, ArrayRef)> = vec![
            (
                "id",
                Arc::new(Int64Array::from_iter_values(0..*rows as i64)),
            ),
            (
                "v",
                Arc::new(Int64Array::from_iter_values(
                    (0..*rows).map(|_| rng.below(100) as i64),
                )),
            ),
            ("k64", Arc::new(Int64Array::from(k.clone()))),
            (
                "k32",
                Arc::new(Int32Array::from(
                    map(&|v| v)
                        .iter()
                        .map(|v| v.map(|x| x as i32))
                        .collect::<Vec<_>>(),
                )),
            ),
            (
                "ku16",
                Arc::new(UInt16Array::from(
                    k.iter().map(|v| v.map(|x| x as u16)).collect::<Vec<_>>(),
                )),
            ),
            (
                "ks",
                Arc::new(StringArray::from(
                    k.iter()
                        .map(|v| v.map(|x| format!("s{x}")))
                        .collect::<Vec<_>>(),
                )),
            ),
            (
                "kd",
                Arc::new(Date32Array::from(
                    k.iter().map(|v| v.map(|x| x as i32)).collect::<Vec<_>>(),
                )),
            ),
            (
                "kf",
                Arc::new(Float64Array::from(
                    k.iter().map(|v| v.map(float_of)).collect::<Vec<_>>(),
                )),
            ),
            (
                "kdec",
                Arc::new(
                    Decimal128Array::from(
                        k.iter()
                            .map(|v| v.map(|x| x as i128 * 25))
                            .collect::<Vec<_>>(),
                    )
                    .with_precision_and_scale(12, 2)
                    .unwrap(),
                ),
            ),
            (
                "kb",
                Arc::new(BooleanArray::from(
                    k.iter().map(|v| v.map(|x| x % 2 == 0)).collect::<Vec<_>>(),
                )),
            ),
            (
                "kbin",
                Arc::new(BinaryArray::from(
                    k.iter()
                        .map(|v| v.map(|x| (x as u32).to_le_bytes().to_vec()))
                        .collect::<Vec<_>>()
                        .iter()
                        .map(|v| v.as_deref())
                        .collect::<Vec<_>>(),
                )),
            ),
        ];
        table(dir, name, cols, 3, ctxs).await.unwrap();
    }
}

/// One random query.
fn query(rng: &mut Rng) -> String {
    let tbl = |rng: &mut Rng| TABLES[rng.below(TABLES.len() as u64) as usize].0;
    let a = tbl(rng);
    let b = if rng.chance(0.2) { a } else { tbl(rng) };
    let (k1, fam) = KEYS[rng.below(KEYS.len() as u64) as usize];
    // The other side's key: the same column, or a cast partner.
    let k2 = if fam == "int" {
        KEYS[rng.below(3) as usize].0
    } else {
        k1
    };
    let eq = if rng.chance(0.25) {
        "IS NOT DISTINCT FROM"
    } else {
        "="
    };
    let mut on = format!("a.{k1} {eq} b.{k2}");
    if rng.chance(0.25) {
        // A composite key; null-safe on every column when the first is (DataFusion only
        // makes IS NOT DISTINCT FROM a join key when the whole condition uses it).
        let (c, _) = KEYS[rng.below(KEYS.len() as u64) as usize];
        on.push_str(&format!(" AND a.{c} {eq} b.{c}"));
    }
    let sel = rng.below(100);
    let filter = match rng.below(5) {
        0 => String::new(),
        1 => " AND b.v < 0".into(), // an empty side after the filter
        _ => format!(" AND b.v < {sel}"),
    };
    let side_a = side(rng, a, k1);
    let side_b = side(rng, b, k2);
    match rng.below(9) {
        0..=2 => format!("SELECT count(*), sum(a.v), sum(b.v) FROM {side_a} a JOIN {side_b} b ON {on}{filter}"),
        3 => format!("SELECT count(*), sum(a.v), sum(b.v) FROM {side_a} a LEFT JOIN {side_b} b ON {on}{filter}"),
        4 => format!("SELECT count(*), sum(a.v), sum(b.v) FROM {side_a} a RIGHT JOIN {side_b} b ON {on}{filter}"),
        5 => format!("SELECT count(*), sum(a.v), sum(b.v) FROM {side_a} a FULL JOIN {side_b} b ON {on}"),
        6 => format!("SELECT count(*), sum(a.v) FROM {side_a} a WHERE EXISTS (SELECT 1 FROM {side_b} b WHERE {on}{filter})"),
        7 => format!("SELECT count(*), sum(a.v) FROM {side_a} a WHERE NOT EXISTS (SELECT 1 FROM {side_b} b WHERE {on}{filter})"),
        _ => {
            let inner = if rng.chance(0.5) { "IN" } else { "NOT IN" };
            let or = if rng.chance(0.3) { " OR a.v < 3" } else { "" };
            format!("SELECT count(*), sum(a.v) FROM {side_a} a WHERE a.{k1} {inner} (SELECT b.{k2} FROM {side_b} b WHERE b.v < {sel}){or}")
        }
    }
}

/// A join input: the table, or a subquery that renames, derives, groups,
/// joins on the same key, or computes the key with a window.
fn side(rng: &mut Rng, t: &str, key: &str) -> String {
    let all = "id, v, k64, k32, ku16, ks, kd, kf, kdec, kb, kbin";
    let others: String = KEYS
        .iter()
        .filter(|(k, _)| *k != key)
        .map(|(k, _)| format!(", {k}"))
        .collect();
    match rng.below(8) {
        0 => format!("(SELECT id, v{others}, {key} AS {key} FROM {t} WHERE v >= 0)"),
        1 => format!("(SELECT id, v{others}, {key} FROM {t} x ORDER BY id)"),
        2 if key == "k64" || key == "k32" => {
            format!("(SELECT id, v{others}, {key} + 1 AS {key} FROM {t})")
        }
        3 => {
            let mins: String = KEYS
                .iter()
                .filter(|(k, _)| *k != key)
                .map(|(k, _)| format!(", min({k}) AS {k}"))
                .collect();
            format!("(SELECT min(id) AS id, sum(v) AS v{mins}, {key} FROM {t} GROUP BY {key})")
        }
        4 => format!("(SELECT id, v{others}, lag({key}) OVER (ORDER BY id) AS {key} FROM {t})"),
        5 => format!("(SELECT x.id, x.v{}, x.{key} FROM {t} x JOIN {t} y ON x.{key} = y.{key} AND x.id = y.id)", others.replace(", ", ", x.")),
        _ => format!("(SELECT {all} FROM {t})"),
    }
}

/// Where the clusters' tasks run: in this process, or in worker processes
/// (every cluster of a run shares them).
#[derive(Clone, Copy)]
enum On<'a> {
    Memory,
    Processes(&'a Workers),
}

/// The sessions a random query runs on: single-node DataFusion, and the
/// 3-worker cluster in each of [`MODES`]. Holds the process clusters'
/// coordinators (their rendezvous servers) while the sessions live.
struct Contexts {
    single: SessionContext,
    clusters: Vec<(&'static str, SessionContext)>,
    /// On processes, the in-memory cluster with the rule forced: what the
    /// processes' forced filters must equal, message for message.
    memory_forced: Option<SessionContext>,
    _coordinators: Vec<RemoteCluster>,
}

/// The cluster's modes: without the rule; with it, deciding as by default
/// but for sides of 1,000 rows or more (by default 100,000, more than any
/// table here holds, so it would place nothing); and forced (a filter
/// everywhere it may go). The last is the one whose filters are counted.
const MODES: [&str; 3] = ["cluster", "cluster+rule", "cluster+forced"];

fn mode_config(mode: &str) -> Option<RuntimeFilterConfig> {
    match mode {
        "cluster+rule" => Some(RuntimeFilterConfig {
            min_filtered_rows: 1_000,
            ..RuntimeFilterConfig::default()
        }),
        "cluster+forced" => Some(RuntimeFilterConfig {
            force: true,
            ..RuntimeFilterConfig::default()
        }),
        _ => None,
    }
}

async fn contexts(dir: &Path, on: On<'_>) -> Contexts {
    let mut c = Contexts {
        single: SessionContext::new(),
        clusters: Vec::new(),
        memory_forced: None,
        _coordinators: Vec::new(),
    };
    for mode in MODES {
        let (config, rule) = (partitioned_join_config(3).unwrap(), mode_config(mode));
        let ctx = match on {
            On::Memory => in_memory_cluster(3, WorkerFunctions::Registered, config, rule).unwrap(),
            On::Processes(workers) => {
                let bind = "127.0.0.1:0".parse().unwrap();
                let coordinator = remote_cluster(workers.urls.clone(), config, rule, bind)
                    .await
                    .unwrap();
                let ctx = coordinator.ctx.clone();
                c._coordinators.push(coordinator);
                ctx
            }
        };
        c.clusters.push((mode, ctx));
    }
    if let On::Processes(_) = on {
        let (config, rule) = (partitioned_join_config(3).unwrap(), mode_config(MODES[2]));
        let memory = in_memory_cluster(3, WorkerFunctions::Registered, config, rule).unwrap();
        c.memory_forced = Some(memory);
    }
    let mut all = vec![&c.single];
    all.extend(c.clusters.iter().map(|(_, ctx)| ctx));
    all.extend(c.memory_forced.iter());
    write(dir, &all).await;
    c
}

/// What the rendezvous did with one filter of a query.
#[derive(Debug, PartialEq)]
enum Shipped {
    /// Shipped: its message's bytes and the partials merged, whether or
    /// not a probe task read it (a join behind an empty build side may
    /// never poll its probe side).
    Message(usize, usize),
    /// Passed every row, and why.
    PassAll(String),
    /// No outcome.
    Nothing,
}

/// What each filter of the session's last query shipped.
fn shipped(ctx: &SessionContext) -> Vec<Shipped> {
    let Some(report) = last_report(ctx) else {
        return Vec::new();
    };
    report
        .filters()
        .map(|f| match f.outcome() {
            Some(
                FilterOutcome::Built {
                    message_bytes,
                    partials,
                    ..
                }
                | FilterOutcome::Undelivered {
                    message_bytes,
                    partials,
                    ..
                },
            ) => Shipped::Message(message_bytes, partials),
            Some(FilterOutcome::PassAll { reason, .. }) => Shipped::PassAll(reason),
            None => Shipped::Nothing,
        })
        .collect()
}

/// Whether the forced filters of processes and memory are the same
/// filters, and shipped by both or by neither: none lost on the way. A
/// query may end before its filter is ready where posts travel between
/// processes (an empty build side ends a join before it polls its probe
/// side), and then nothing was lost.
fn same_filters(processes: &SessionContext, memory: &SessionContext) -> bool {
    let ended = |s: &Shipped| matches!(s, Shipped::PassAll(r) if r.contains("query ended before"));
    let (p, m) = (shipped(processes), shipped(memory));
    p.len() == m.len()
        && p.iter()
            .zip(&m)
            .all(|(a, b)| ended(a) || ended(b) || a == b)
}

async fn answer(
    ctx: &SessionContext,
    sql: &str,
) -> Result<Vec<Vec<crate::common::tpch::Cell>>, String> {
    let df = ctx.sql(sql).await.map_err(|e| e.to_string())?;
    let b = df.collect().await.map_err(|e| e.to_string())?;
    Ok(rows(&b))
}

async fn run(cases: usize, seed: u64, on: On<'_>) {
    let dir = tempfile::tempdir().unwrap();
    let c = contexts(dir.path(), on).await;
    let mut rng = Rng(seed);
    let (mut filtered, mut planned) = (0, 0);
    for case in 0..cases {
        let sql = query(&mut rng);
        let expected = match answer(&c.single, &sql).await {
            Ok(r) => r,
            // A shape DataFusion itself refuses (e.g. a type it cannot
            // compare): nothing to compare.
            Err(_) => continue,
        };
        planned += 1;
        for (name, ctx) in &c.clusters {
            let got = answer(ctx, &sql)
                .await
                .unwrap_or_else(|e| panic!("case {case} (seed {seed}) {name}: {e}\n{sql}"));
            if let Some(d) = diff(&expected, &got) {
                let report = last_report(ctx).map(|r| r.to_string()).unwrap_or_default();
                panic!("case {case} (seed {seed}) {name} differs from single-node DataFusion: {d}\n{sql}\n{report}");
            }
        }
        let (_, forced) = c.clusters.last().unwrap();
        filtered += last_report(forced).map_or(0, |r| r.built());
        if let Some(memory) = &c.memory_forced {
            // The processes' filters are the in-memory cluster's, bit for bit.
            let got = answer(memory, &sql).await.unwrap();
            assert!(diff(&expected, &got).is_none(), "case {case}: {sql}");
            assert!(
                same_filters(forced, memory),
                "case {case} (seed {seed}): processes shipped {:?}, memory {:?}\n{sql}\n{}\n{}",
                shipped(forced),
                shipped(memory),
                last_report(forced)
                    .map(|r| r.to_string())
                    .unwrap_or_default(),
                last_report(memory)
                    .map(|r| r.to_string())
                    .unwrap_or_default()
            );
        }
    }
    println!("{planned} of {cases} random queries planned, {filtered} filters placed, every answer equal");
    assert!(planned * 2 > cases, "most random queries must be valid SQL");
    assert!(
        filtered > planned / 4,
        "too few filters placed ({filtered}) to test the rule"
    );
}

/// `RUNTIME_RANDOM_CASES`, else `default`.
fn cases(default: usize) -> usize {
    std::env::var("RUNTIME_RANDOM_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// [`run`] on three worker processes started for it.
async fn run_on_processes(cases: usize, seed: u64) {
    let workers = Workers::start(3).unwrap();
    run(cases, seed, On::Processes(&workers)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_joins_answer_as_single_node() {
    tokio::time::timeout(Duration::from_secs(1200), run(cases(200), 7, On::Memory))
        .await
        .expect("random join test timed out");
}

/// The random shapes on three `filterstore-worker` processes: the taps post
/// their partials to the coordinator's rendezvous over gRPC, the probe
/// tasks fetch the filters from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_joins_on_worker_processes_answer_as_single_node() {
    tokio::time::timeout(Duration::from_secs(1200), run_on_processes(cases(100), 11))
        .await
        .expect("random join test on worker processes timed out");
}

/// The random shapes on three worker processes in a network namespace
/// whose loopback is limited to 100 Mbit/s (`tests/common/netns.rs`, as
/// `processes::worker_processes_on_a_rate_limited_network_filter_as_on_loopback`):
/// a filter or a shuffle that arrives late must not change an answer.
/// Needs root: else skipped, and said (`FILTERSTORE_REQUIRE_NETNS=1` makes
/// that a failure).
#[test]
fn random_joins_on_a_rate_limited_network_answer_as_single_node() {
    const NAME: &str = "random::random_joins_on_a_rate_limited_network_answer_as_single_node";
    let limit = Duration::from_secs(1200);
    let body = || run_on_processes(cases(60), 13);
    let Some(ns) = netns::test_inside(("random", "100mbit"), NAME, limit, body) else {
        return;
    };
    let sent = ns.sent_bytes().unwrap();
    eprintln!("the limited loopback's queue after the run: {}", ns.qdisc());
    assert!(
        sent > 1 << 20,
        "{sent} bytes through the limited loopback: the run did not cross it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long run: cargo test --release -p filterstore-datafusion --test runtime -- --ignored random::random_joins_long_run"]
async fn random_joins_long_run() {
    tokio::time::timeout(Duration::from_secs(7200), run(3_000, 1234, On::Memory))
        .await
        .expect("random join long run timed out");
}

/// Reproduces one query (a failure's SQL) with the report and both answers:
/// `RUNTIME_RANDOM_SQL='...' cargo test --release -p filterstore-datafusion
/// --test runtime -- --ignored random::one_query --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "reproduces the query in RUNTIME_RANDOM_SQL"]
async fn one_query() {
    let Ok(sql) = std::env::var("RUNTIME_RANDOM_SQL") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let c = contexts(dir.path(), On::Memory).await;
    let (single, (_, rule)) = (&c.single, c.clusters.last().unwrap());
    let expected = answer(single, &sql).await.unwrap();
    let got = answer(rule, &sql).await.unwrap();
    println!("single: {expected:?}\nrule:   {got:?}");
    println!(
        "{}",
        last_report(rule).map(|r| r.to_string()).unwrap_or_default()
    );
    let plan = rule
        .sql(&sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    println!(
        "{}",
        datafusion_distributed::display_plan_ascii(plan.as_ref(), false)
    );
}
