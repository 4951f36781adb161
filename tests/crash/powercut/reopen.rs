//! Reopening after each failed sync of an operation, then a power cut: the
//! deterministic companion of the `eio_reopen` workload, run in this
//! process on a [`MemFs`] of its own per scenario (no child, no timing).
//!
//! A scenario prepares a store on the mount (a table with durable batches,
//! a fold, a batch written without a sync, and for a drop a second table),
//! makes the `n`th sync of one operation fail with `EIO` (its dropped pages
//! stay readable, [`MemFs::fail_sync`]), reopens the store in the same
//! "boot" (the same mount: what the page cache shows), writes a durable
//! batch into every table the reopened store lists, then cuts the power and
//! checks the image against what was reported ([`model::check`]): every
//! batch reported durable, before the failure or after the reopen, is
//! there, and every table that took one exists. `n` runs over every sync
//! the operation makes; the operations are the syncing ones: a durable
//! insert, a flush, a fold, a regeneration, a create and a drop of a table,
//! and the reopen itself (a failed sync there must refuse the open, and the
//! next open must succeed). Each under the three directory models, with the
//! pages the failed sync wrote drawn from two seeds.

use super::child::spec;
use super::model::{self, batch, encode, BatchId, Model};
use super::{DirModel, MemFs};
use filterstore::{Durability, FilterStore, Layout, RegenOptions, Table, WriteBatch};
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::path::{Path, PathBuf};

const MAIN: &str = "cut";
const OTHER: &str = "other";

/// The operation whose syncs fail in turn.
#[derive(Clone, Copy, Debug)]
pub enum Failing {
    Insert,
    Flush,
    Fold,
    Regenerate,
    Create,
    Drop,
    Reopen,
}

impl Failing {
    pub const ALL: [Failing; 7] = [
        Failing::Insert,
        Failing::Flush,
        Failing::Fold,
        Failing::Regenerate,
        Failing::Create,
        Failing::Drop,
        Failing::Reopen,
    ];
}

/// The writer of one scenario: its store, and the lines a child would
/// report ([`model`]).
struct Writer {
    dir: PathBuf,
    store: Option<FilterStore>,
    lines: Vec<String>,
    /// The batches written (the source of a regeneration).
    written: Vec<BatchId>,
    n: u64,
}

impl Writer {
    fn step<T>(
        &mut self,
        stage: &str,
        table: &str,
        arg: &str,
        f: impl FnOnce(&mut Self) -> Result<T, filterstore::StoreError>,
    ) -> Option<T> {
        self.lines.push(format!("start {stage} {table} {arg}"));
        match f(self) {
            Ok(v) => {
                self.lines.push(format!("done {stage} {table} {arg}"));
                Some(v)
            }
            Err(e) => {
                let e = e.to_string().replace('\n', " ");
                self.lines.push(format!("error {stage} {table} {arg} {e}"));
                None
            }
        }
    }

    fn store(&self) -> &FilterStore {
        self.store.as_ref().expect("the store is open")
    }

    fn table(&mut self, name: &str) -> Option<Table> {
        let store = self.store().clone();
        self.step("open-table", name, "-", |_| store.open_table(name))
    }

    fn create(&mut self, name: &str) -> Option<Table> {
        let store = self.store().clone();
        self.step("create", name, "blocked", |_| {
            store.create_table(name, spec(Layout::Blocked, 20_000))
        })
    }

    /// Writes a new batch into `t` at `level` (a durable one is an
    /// `insert`, another a `write`).
    fn write(&mut self, t: &Table, level: Durability) -> bool {
        self.n += 1;
        let b = (0, self.n);
        let mut w = WriteBatch::new();
        for k in batch(b) {
            w.insert(&k);
        }
        let stage = match level {
            Durability::Durable => "insert",
            _ => "write",
        };
        self.written.push(b);
        let name = t.name().to_string();
        self.step(stage, &name, &encode(&[b]), |_| t.apply(&w, level))
            .is_some()
    }

    /// Drops every handle and opens the store again, as a host does after
    /// an error; `None` if the open failed.
    fn reopen(&mut self) -> Option<()> {
        self.store = None;
        let dir = self.dir.clone();
        self.store = self.step("reopen", "-", "-", |_| FilterStore::open(&dir));
        self.store.as_ref().map(|_| ())
    }
}

/// Runs every scenario; returns how many ran and the failures, one line
/// each.
pub fn run(work: &Path) -> (u32, Vec<String>) {
    let mut failures = Vec::new();
    let mut ran = 0;
    for failing in Failing::ALL {
        for dir_model in [DirModel::Immediate, DirModel::OnSync, DirModel::Journal] {
            for seed in 0..2u64 {
                for n in 1.. {
                    let what = format!("{failing:?}, sync {n} failing, {dir_model:?}, seed {seed}");
                    match scenario(work, failing, dir_model, n, seed) {
                        Ok(true) => ran += 1,
                        // Fewer than `n` syncs: every one of them was failed.
                        Ok(false) => break,
                        Err(why) => {
                            ran += 1;
                            failures.push(format!("{what}: {why}"));
                        }
                    }
                }
            }
        }
    }
    (ran, failures)
}

/// One scenario (module docs): `Ok(false)` if the operation made fewer than
/// `n` syncs, else whether the image held what was reported.
fn scenario(
    work: &Path,
    failing: Failing,
    dir_model: DirModel,
    n: u64,
    seed: u64,
) -> Result<bool, String> {
    let fs = MemFs::new(dir_model);
    let mnt = tempfile::tempdir_in(work).unwrap();
    let session = fs.mount(mnt.path()).unwrap();
    let mut w = Writer {
        dir: mnt.path().join("s"),
        store: None,
        lines: Vec::new(),
        written: Vec::new(),
        n: 0,
    };
    let fired = fail_then_reopen(&mut w, &fs, failing, n, seed)?;
    if fired {
        after_reopen(&mut w);
    }
    fs.cut();
    w.store = None;
    let image = tempfile::tempdir_in(work).unwrap();
    let mut rng = StdRng::seed_from_u64(seed ^ n << 8);
    fs.image_cut(image.path(), &mut rng, seed == 1).unwrap();
    drop(session);
    if !fired {
        return Ok(false);
    }
    let mut model = Model::default();
    w.lines.iter().for_each(|l| model.apply(l));
    let checked = model::check(&image.path().join("s"), &model, &|_, _| {});
    if checked.failures.is_empty() {
        return Ok(true);
    }
    Err(format!(
        "{:?}; the writer's lines: {:?}",
        checked.failures, w.lines
    ))
}

/// Prepares the store, makes the `n`th sync of `failing` fail, reopens
/// (until an open succeeds: a failed sync of the reopen refuses it).
/// Returns whether the failure fired.
fn fail_then_reopen(
    w: &mut Writer,
    fs: &MemFs,
    failing: Failing,
    n: u64,
    seed: u64,
) -> Result<bool, String> {
    let dir = w.dir.clone();
    w.store = w.step("open", "-", "-", |_| FilterStore::open(&dir));
    let t = w
        .create(MAIN)
        .ok_or("the create failed without a failure")?;
    w.write(&t, Durability::Durable);
    w.step("fold", MAIN, "-", |_| t.fold());
    w.write(&t, Durability::Durable);
    w.write(&t, Durability::ProcessCrashSafe);
    if matches!(failing, Failing::Drop) {
        let o = w
            .create(OTHER)
            .ok_or("the create failed without a failure")?;
        w.write(&o, Durability::Durable);
    }
    if matches!(failing, Failing::Reopen) {
        w.store = None;
        drop(t);
        fs.fail_sync(n, seed);
        if w.reopen().is_some() {
            // The open syncs what a table open reads when it opens one.
            w.table(MAIN);
        }
    } else {
        fs.fail_sync(n, seed);
        run_failing(w, &t, failing);
        drop(t);
    }
    let fired = fs.failed_syncs() > 0;
    // Disarm a failure that did not come (fewer than `n` syncs).
    fs.fail_sync(1 << 40, 0);
    for _ in 0..3 {
        if w.reopen().is_some() {
            return Ok(fired);
        }
    }
    Err(format!("the store does not reopen: {:?}", w.lines.last()))
}

fn run_failing(w: &mut Writer, t: &Table, failing: Failing) {
    match failing {
        Failing::Insert => {
            w.write(t, Durability::Durable);
        }
        Failing::Flush => {
            w.step("flush", MAIN, "-", |_| t.flush());
        }
        Failing::Fold => {
            w.step("fold", MAIN, "-", |_| t.fold());
        }
        Failing::Regenerate => {
            let all = w.written.clone();
            let source = || {
                all.iter()
                    .flat_map(|&b| batch(b))
                    .map(Ok::<_, std::io::Error>)
            };
            w.step("regenerate", MAIN, "-", |_| {
                t.regenerate(source, &RegenOptions::default())
            });
        }
        Failing::Create => {
            w.create(OTHER);
        }
        Failing::Drop => {
            let store = w.store().clone();
            w.step("drop", OTHER, "-", |_| store.drop_table(OTHER));
        }
        Failing::Reopen => unreachable!("the reopen fails in fail_then_reopen"),
    }
}

/// A durable batch into every table the reopened store lists (a table open
/// whose sync fails is tried again: it must open then).
fn after_reopen(w: &mut Writer) {
    let names = w.store().list_tables().unwrap_or_default();
    for name in names {
        let table = (0..3).find_map(|_| w.table(&name));
        if let Some(t) = table {
            w.write(&t, Durability::Durable);
        }
    }
}
