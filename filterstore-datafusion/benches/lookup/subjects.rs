//! The subjects and workloads of the lookup bench, one measurement, the
//! answers' check and the RESULT lines.

use crate::counting::Requests;
use crate::data::{Lake, TABLE_URL};
use datafusion::arrow::array::{AsArray, RecordBatch};
use datafusion::arrow::datatypes::Int64Type;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::prelude::SessionContext;
use filterstore_datafusion::IndexedParquetTable;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Subject {
    /// DataFusion's ListingTable, Parquet Bloom filters off, caches warm.
    DataFusionPlain,
    /// With Parquet's Bloom filters and pruning, a fresh session.
    DataFusionBloomCold,
    /// The same, its caches (listing, footers) filled.
    DataFusionBloomWarm,
    /// The indexed table, its store opened from disk in a fresh session.
    IndexCold,
    /// The indexed table, open.
    IndexWarm,
}

impl Subject {
    pub const ALL: [Subject; 5] = [
        Subject::DataFusionBloomCold,
        Subject::IndexCold,
        Subject::DataFusionBloomWarm,
        Subject::IndexWarm,
        Subject::DataFusionPlain,
    ];

    pub fn is_cold(self) -> bool {
        matches!(self, Subject::DataFusionBloomCold | Subject::IndexCold)
    }

    fn name(self) -> &'static str {
        match self {
            Subject::DataFusionPlain => "datafusion.no_bloom.warm",
            Subject::DataFusionBloomCold => "datafusion.bloom.cold",
            Subject::DataFusionBloomWarm => "datafusion.bloom.warm",
            Subject::IndexCold => "index.cold",
            Subject::IndexWarm => "index.warm",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Workload {
    Present,
    Absent,
    In100,
}

impl Workload {
    pub const ALL: [Workload; 3] = [Workload::Present, Workload::Absent, Workload::In100];

    fn name(self) -> &'static str {
        match self {
            Workload::Present => "present",
            Workload::Absent => "absent",
            Workload::In100 => "in100",
        }
    }

    /// The query, and the keys it must find.
    fn query(self, lake: &Lake, run: usize) -> (String, Vec<i64>) {
        let pick = |j: usize| {
            let f = (j * 7_919 + run * 104_729) % lake.files;
            lake.key(f, (j * 31 + run) % lake.rows)
        };
        match self {
            Workload::Present => {
                let k = pick(1);
                (format!("SELECT id, s FROM t WHERE id = {k}"), vec![k])
            }
            Workload::Absent => {
                let k = lake.absent(run);
                (format!("SELECT id, s FROM t WHERE id = {k}"), vec![])
            }
            Workload::In100 => {
                let mut keys: Vec<i64> = (0..100).map(pick).collect();
                let list: Vec<String> = keys.iter().map(i64::to_string).collect();
                keys.sort_unstable();
                keys.dedup();
                (
                    format!("SELECT id, s FROM t WHERE id IN ({})", list.join(", ")),
                    keys,
                )
            }
        }
    }
}

/// One measured lookup.
#[derive(Clone, Debug)]
pub struct Figure {
    pub subject: Subject,
    pub workload: Workload,
    pub wall: Duration,
    pub requests: Requests,
    /// The keys found, sorted; and the keys that must be.
    pub found: Vec<i64>,
    pub want: Vec<i64>,
}

impl Figure {
    pub fn line(&self, files: usize, load: String) -> String {
        format!(
            "{files} files {:<24} {:<8} {:>9.1} ms  GET/HEAD {:>6}  LIST {:>2}  rows {:>3}  (load {load})",
            self.subject.name(),
            self.workload.name(),
            self.wall.as_secs_f64() * 1e3,
            self.requests.reads(),
            self.requests.list,
            self.found.len()
        )
    }
}

/// The warm subjects' sessions, made (and primed) once per lake.
static WARM: OnceLock<Mutex<HashMap<(usize, Subject), SessionContext>>> = OnceLock::new();
/// A run's place: the lake's file count, the subject, the workload.
type RunKey = (usize, Subject, Workload);
/// Runs per workload so far, to vary the keys.
static RUNS: OnceLock<Mutex<HashMap<RunKey, usize>>> = OnceLock::new();

async fn listing(lake: &Lake, ctx: &SessionContext) {
    let url = ListingTableUrl::parse(TABLE_URL).unwrap();
    let options =
        ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
    let config = ListingTableConfig::new(url)
        .with_listing_options(options)
        .with_schema(lake.schema.clone());
    ctx.register_table("t", Arc::new(ListingTable::try_new(config).unwrap()))
        .unwrap();
}

async fn indexed(lake: &Lake, ctx: &SessionContext) {
    let t = IndexedParquetTable::try_new(&ctx.state(), TABLE_URL, lake.index_options())
        .await
        .unwrap();
    assert!(t.limitation().is_none(), "{:?}", t.limitation());
    ctx.register_table("t", Arc::new(t)).unwrap();
}

async fn make(lake: &Lake, s: Subject) -> SessionContext {
    let bloom = !matches!(s, Subject::DataFusionPlain);
    let ctx = lake.session(bloom);
    match s {
        Subject::IndexCold | Subject::IndexWarm => indexed(lake, &ctx).await,
        _ => listing(lake, &ctx).await,
    }
    ctx
}

async fn run_query(ctx: &SessionContext, sql: &str) -> Vec<i64> {
    let batches: Vec<RecordBatch> = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    let mut ids: Vec<i64> = batches
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    ids.sort_unstable();
    ids
}

/// Whether the page cache could be dropped (as root).
fn drop_page_cache() -> bool {
    std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

/// One lookup of `w` by `s`.
pub async fn measure(lake: &Lake, s: Subject, w: Workload) -> Figure {
    let run = {
        let mut runs = RUNS.get_or_init(Default::default).lock().unwrap();
        let r = runs.entry((lake.files, s, w)).or_default();
        *r += 1;
        *r
    };
    let (sql, want) = w.query(lake, run);
    let (found, wall, requests) = if s.is_cold() {
        if run == 1 && !drop_page_cache() {
            println!("(cold runs keep the page cache: dropping it needs root)");
        }
        drop_page_cache();
        let before = lake.counting.requests();
        let started = Instant::now();
        let ctx = make(lake, s).await;
        let found = run_query(&ctx, &sql).await;
        (
            found,
            started.elapsed(),
            lake.counting.requests().since(before),
        )
    } else {
        let key = (lake.files, s);
        let existing = WARM
            .get_or_init(Default::default)
            .lock()
            .unwrap()
            .get(&key)
            .cloned();
        let ctx = match existing {
            Some(ctx) => ctx,
            None => {
                let ctx = make(lake, s).await;
                let (prime, _) = w.query(lake, 0);
                run_query(&ctx, &prime).await;
                WARM.get_or_init(Default::default)
                    .lock()
                    .unwrap()
                    .insert(key, ctx.clone());
                ctx
            }
        };
        let before = lake.counting.requests();
        let started = Instant::now();
        let found = run_query(&ctx, &sql).await;
        (
            found,
            started.elapsed(),
            lake.counting.requests().since(before),
        )
    };
    Figure {
        subject: s,
        workload: w,
        wall,
        requests,
        found,
        want,
    }
}

/// Every lookup found exactly its keys.
pub fn check_answers(figures: &[Figure]) {
    for f in figures {
        assert_eq!(
            f.found, f.want,
            "{:?} {:?}: wrong answer",
            f.subject, f.workload
        );
    }
    println!("lookup: {} answers, all right", figures.len());
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn of(figures: &[Figure], s: Subject, w: Workload) -> Vec<&Figure> {
    figures
        .iter()
        .filter(|f| f.subject == s && f.workload == w)
        .collect()
}

fn wall(figures: &[Figure], s: Subject, w: Workload) -> f64 {
    median(
        of(figures, s, w)
            .iter()
            .map(|f| f.wall.as_secs_f64())
            .collect(),
    )
}

fn mean(figures: &[Figure], s: Subject, w: Workload, count: impl Fn(&Requests) -> u64) -> f64 {
    let v = of(figures, s, w);
    v.iter().map(|f| count(&f.requests) as f64).sum::<f64>() / v.len() as f64
}

/// The RESULT lines (present keys for the ratios).
pub fn results(figures: &[Figure]) -> Vec<String> {
    use Subject::*;
    let p = Workload::Present;
    let total = |r: &Requests| r.total();
    let reads = |r: &Requests| r.reads();
    let mut out = vec![
        format!(
            "RESULT lookup.requests_ratio.cold {:.5} ratio",
            mean(figures, IndexCold, p, total) / mean(figures, DataFusionBloomCold, p, total)
        ),
        format!(
            "RESULT lookup.wall_ratio.cold {:.4} ratio",
            wall(figures, IndexCold, p) / wall(figures, DataFusionBloomCold, p)
        ),
        format!(
            "RESULT lookup.wall_ratio.warm {:.4} ratio",
            wall(figures, IndexWarm, p) / wall(figures, DataFusionBloomWarm, p)
        ),
        format!(
            "RESULT lookup.requests.present {:.2} requests",
            mean(figures, IndexWarm, p, reads)
        ),
        format!(
            "RESULT lookup.requests.absent {:.2} requests",
            mean(figures, IndexWarm, Workload::Absent, reads)
        ),
    ];
    for w in Workload::ALL {
        for s in Subject::ALL {
            out.push(format!(
                "RESULT lookup.wall_ms.{}.{} {:.1} ms",
                s.name(),
                w.name(),
                wall(figures, s, w) * 1e3
            ));
        }
    }
    out
}
