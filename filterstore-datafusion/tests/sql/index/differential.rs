//! Seeded rounds of lookups on an indexed table under random appends,
//! deletes, rewrites in place (through a rename or into the same inode) and
//! refreshes, each answer compared with DataFusion's `ListingTable` over
//! the same files.

use super::{register_listing, run, session, write_file};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::physical_plan::{collect, ExecutionPlan};
use datafusion::prelude::SessionContext;
use filterstore_datafusion::{IndexOptions, IndexedParquetTable, IndexedScanExec};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The ids a file may hold (and lookups draw from, with absent ones).
const UNIVERSE: i64 = 4_000;

struct World {
    data: PathBuf,
    files: BTreeMap<u32, Vec<i64>>,
    next: u32,
    rng: StdRng,
}

impl World {
    fn path(&self, f: u32) -> PathBuf {
        self.data.join(format!("part-{f:04}.parquet"))
    }

    fn new_ids(&mut self) -> Vec<i64> {
        let n = self.rng.gen_range(1..150);
        (0..n).map(|_| self.rng.gen_range(0..UNIVERSE)).collect()
    }

    fn append(&mut self) {
        let ids = self.new_ids();
        let f = self.next;
        self.next += 1;
        write_file(&self.path(f), &ids, self.rng.gen_bool(0.5));
        self.files.insert(f, ids);
    }

    fn delete(&mut self) {
        if let Some(&f) = self.pick() {
            std::fs::remove_file(self.path(f)).unwrap();
            self.files.remove(&f);
        }
    }

    fn rewrite(&mut self) {
        if let Some(&f) = self.pick() {
            // A rewrite lands in a later tick of the file system's clock
            // than the version before (`IndexOptions::settle` covers the
            // same tick); DataFusion's own caches assume as much.
            std::thread::sleep(Duration::from_millis(6));
            let ids = self.new_ids();
            write_file(&self.path(f), &ids, self.rng.gen_bool(0.5));
            self.files.insert(f, ids);
        }
    }

    fn pick(&mut self) -> Option<&u32> {
        let n = self.files.len();
        if n == 0 {
            return None;
        }
        let i = self.rng.gen_range(0..n);
        self.files.keys().nth(i)
    }

    /// An id held by some file (or, one time in three, any id).
    fn some_id(&mut self) -> i64 {
        let held: Option<i64> = match self.pick().copied() {
            Some(f) if self.rng.gen_range(0..3) > 0 => {
                let ids = &self.files[&f];
                Some(ids[self.rng.gen_range(0..ids.len())])
            }
            _ => None,
        };
        held.unwrap_or_else(|| self.rng.gen_range(0..UNIVERSE + 500))
    }

    /// A lookup of one of the shapes an index answers, or does not.
    fn lookup(&mut self, table: &str) -> String {
        let (x, y) = (self.some_id(), self.some_id());
        let list: Vec<String> = (0..self.rng.gen_range(1..20))
            .map(|_| self.some_id().to_string())
            .collect();
        let list = list.join(", ");
        let filter = match self.rng.gen_range(0..12) {
            0 => format!("id = {x}"),
            1 => format!("id IN ({list})"),
            2 => format!("k32 = {x}"),
            3 => format!("name = 'n{x}'"),
            4 => format!("grp = 'g{}' AND id = {x}", x % 5),
            5 => format!("id = {x} OR id = {y}"),
            6 => format!("id = {x} AND v > 0.3"),
            7 => format!("CAST(k32 AS BIGINT) = {}", x + (y % 2) * 5_000_000_000),
            8 => format!("id IN (NULL, {x})"),
            9 => format!("name IN ('n{x}', 'n{y}') AND k32 = {x}"),
            10 => format!("id = {x} OR grp = 'g1'"),
            _ => format!("id = NULL OR id = {y}"),
        };
        match self.rng.gen_range(0..3) {
            0 => format!("SELECT count(*) AS n FROM {table} WHERE {filter}"),
            _ => format!("SELECT id, k32, name, grp FROM {table} WHERE {filter}"),
        }
    }
}

/// The indexed scan nodes of `plan`.
fn summaries(plan: &Arc<dyn ExecutionPlan>, out: &mut Vec<filterstore_datafusion::ScanSummary>) {
    if let Some(s) = plan.downcast_ref::<IndexedScanExec>() {
        out.push(s.summary().clone());
    }
    for c in plan.children() {
        summaries(c, out);
    }
}

/// The sorted rows of `sql` on the indexed table, with what the index
/// decided.
async fn indexed_rows(ctx: &SessionContext, sql: &str) -> (Vec<String>, usize, usize) {
    let df = ctx.sql(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    let plan = df.create_physical_plan().await.unwrap();
    let mut s = Vec::new();
    summaries(&plan, &mut s);
    let batches = collect(plan, ctx.task_ctx()).await.unwrap();
    let text = pretty_format_batches(&batches).unwrap().to_string();
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with('|'))
        .skip(1)
        .map(String::from)
        .collect();
    lines.sort();
    let skipped = s.iter().map(|s| s.skipped).sum();
    let listed = s.iter().map(|s| s.listed).sum();
    (lines, skipped, listed)
}

async fn one_seed(seed: u64, steps: usize) -> (usize, usize, usize) {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let mut w = World {
        data: data.clone(),
        files: BTreeMap::new(),
        next: 0,
        rng: StdRng::seed_from_u64(seed),
    };
    for _ in 0..6 {
        w.append();
    }
    let ctx = session();
    let options = IndexOptions::new(tmp.path().join("store"))
        .column("id")
        .column("k32")
        .column("name")
        .settle(Duration::from_millis(40))
        .refresh_on_scan(seed.is_multiple_of(2))
        .commit_files(1 + (seed as usize % 4));
    let url = format!("{}/", data.display());
    let table = IndexedParquetTable::register(&ctx, "t", &url, options)
        .await
        .unwrap();
    register_listing(&ctx, "l", &data).await;
    let (mut lookups, mut skipped, mut listed) = (0, 0, 0);
    for step in 0..steps {
        match w.rng.gen_range(0..30) {
            0..=3 => w.append(),
            4 => w.delete(),
            5..=6 => w.rewrite(),
            7..=8 => {
                table.refresh().await.unwrap();
            }
            9 => tokio::time::sleep(Duration::from_millis(45)).await,
            _ => {
                let q = w.lookup("t");
                let (got, s, l) = indexed_rows(&ctx, &q).await;
                let want = super::rows(&ctx, &q.replace(" FROM t ", " FROM l ")).await;
                assert_eq!(got, want, "seed {seed}, step {step}: {q}");
                lookups += 1;
                skipped += s;
                listed += l;
            }
        }
    }
    (lookups, skipped, listed)
}

/// At least 1,000 lookups over 4 seeds, 0 wrong answers; the index skipped
/// files (the comparison is not of two full scans).
#[test]
fn lookups_under_file_churn_answer_as_the_listing_table() {
    run(async {
        let (mut lookups, mut skipped, mut listed) = (0, 0, 0);
        for seed in 0..4 {
            let (n, s, l) = one_seed(seed, 400).await;
            lookups += n;
            skipped += s;
            listed += l;
        }
        println!("{lookups} lookups, {skipped} of {listed} files skipped by the index");
        assert!(lookups >= 1_000, "{lookups}");
        assert!(skipped * 4 > listed, "{skipped} of {listed} skipped");
    });
}
