//! The writer: this test binary re-run in child mode, on the FUSE mount.
//! Each operation is a step ([`Child::step`]) reported on stdout as the
//! model of [`super::model`] reads it; before starting one it waits for the
//! parent's word on stdin, so that the parent can arm the cut at an exact
//! moment inside it.
//!
//! Outside the EIO workload every error is a panic (the parent then fails
//! the cut: a writer must not fail before the power goes). In the EIO
//! workload an error is reported and the writer goes on, reopening the
//! store at random after one, as a host would.

use super::model::{
    batch, decode, encode, guard_base, guard_key, guard_write, layout_name, sealed_name, BatchId,
    BATCH, GUARD_KEYS, GUARD_STORAGE, GUARD_TABLE,
};
use filterstore::{
    BitFilter, CountingFilter, Durability, ExportKind, FilterParams, FilterStore, Guard, HashSpec,
    Layout, NewSealed, RegenOptions, SealedBatch, SledDiffStorage, StoreConfig, Table, TableSpec,
    WriteBatch,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::PathBuf;

/// Keys a table of the workloads is sized for (the main table and the
/// others).
const MAIN_KEYS: u64 = 100_000;
const OTHER_KEYS: u64 = 10_000;
/// Batches a bulk load adds.
const BULK_BATCHES: u64 = 10;

/// The child's store configuration: a fold threshold of 1,000 operations,
/// so that with batches of [`BATCH`] keys a fold starts in the background
/// every third batch or so and commits while the next ones are written
/// (`store::table::background`): every workload is cut inside those folds
/// too, and the explicit folds of the `folds` workload wait for them.
fn config() -> StoreConfig {
    StoreConfig::default().fold_threshold(1_000)
}

/// What a step of a workload does (to its table, `Child::run`).
#[derive(Clone, Copy, Debug)]
pub enum Op {
    Insert,
    Write,
    Flush,
    Remove,
    Fold,
    Regenerate,
    Relayout,
    Bulk,
    /// The table's export imported as a new table.
    ImportCopy,
    /// A counting filter of a new batch imported as a new table.
    ImportBatch,
    CreateOther,
    DropOther,
    /// A batch written through the guard; every other one buffered
    /// (`Durability::Buffered`) and then flushed.
    GuardWrite,
    /// Three batches written through the guard by three threads at once,
    /// the first buffered, then a flush: the differential file groups them
    /// into shared records.
    GuardWrites,
    GuardMerge,
    /// The guard and its storage dropped and opened again: the storage's
    /// recovery merges its logs in the background, while the next
    /// operations (and cuts) go on.
    GuardReopen,
    /// A batch of one to three new sealed filters, each holding a batch.
    Seal,
    /// A batch removing one or two sealed filters.
    Unseal,
}

pub struct Child {
    dir: PathBuf,
    pub cut: u32,
    /// The next batch number.
    n: u64,
    pub rng: StdRng,
    /// Errors are reported, not panics (the EIO workload).
    pub tolerant: bool,
    /// Steps that failed (the EIO workload).
    pub errors: u64,
    pub store: Option<FilterStore>,
    tables: BTreeMap<String, Table>,
    /// The tables known to exist, with the batches reported durable in
    /// each (those a remove may take).
    pub live: BTreeMap<String, Vec<BatchId>>,
    /// Batches written without a sync since the table's last flush.
    written: BTreeMap<String, Vec<BatchId>>,
    guard: Option<Guard<SledDiffStorage>>,
    based: bool,
    /// The sealed filters known to exist, by batch.
    sealed: Vec<BatchId>,
}

/// The error of a step, on one line.
type StepResult<T> = Result<T, String>;

fn msg(e: impl std::fmt::Display) -> String {
    e.to_string().replace('\n', " ")
}

/// The spec of a new table of `layout`: chains alternate layouts, so every
/// workload runs on both file layouts of the counters.
pub fn spec(layout: Layout, keys: u64) -> TableSpec {
    match layout {
        Layout::SplitBlock => TableSpec::new(keys, 0.01).layout(layout),
        _ => TableSpec::new(keys, 0.01).layout(layout).seed(3),
    }
}

impl Child {
    /// The writer of cut `cut` on the store in `dir`, knowing what the
    /// model says exists (`Model::encode_for_child`).
    pub fn new(dir: PathBuf, cut: u32, inherited: &str, tolerant: bool) -> Child {
        let mut live = BTreeMap::new();
        let mut based = false;
        let mut sealed = Vec::new();
        for part in inherited.split(';').filter(|p| !p.is_empty()) {
            if part == "+based" {
                based = true;
            } else if let Some(ids) = part.strip_prefix("+sealed=") {
                sealed = decode(ids);
            } else {
                let (name, batches) = part.split_once('=').unwrap();
                live.insert(name.to_string(), decode(batches));
            }
        }
        Child {
            dir,
            cut,
            n: 0,
            rng: StdRng::seed_from_u64(u64::from(cut)),
            tolerant,
            errors: 0,
            store: None,
            tables: BTreeMap::new(),
            live,
            written: BTreeMap::new(),
            guard: None,
            based,
            sealed,
        }
    }

    /// Runs `op` on `table` (the table kept by `DropOther`).
    pub fn run(&mut self, op: Op, table: &str) {
        match op {
            Op::Insert => self.insert(table),
            Op::Write => self.write(table),
            Op::Flush => self.flush(table),
            Op::Remove => self.remove(table),
            Op::Fold => self.fold(table),
            Op::Regenerate => self.regenerate(table),
            Op::Relayout => self.relayout(table),
            Op::Bulk => self.bulk(table),
            Op::ImportCopy => self.import(table, true),
            Op::ImportBatch => self.import(table, false),
            Op::CreateOther => self.create_other(),
            Op::DropOther => self.drop_other(&[table]),
            Op::GuardWrite => self.guard_write(),
            Op::GuardWrites => self.guard_writes(),
            Op::GuardMerge => self.guard_merge(),
            Op::GuardReopen => self.guard_reopen(),
            Op::Seal => self.seal(),
            Op::Unseal => self.unseal(),
        }
    }

    fn next_batch(&mut self) -> BatchId {
        self.n += 1;
        (self.cut, self.n)
    }

    /// Runs `f` as one reported operation (module docs).
    pub fn step<T>(
        &mut self,
        stage: &str,
        table: &str,
        arg: &str,
        f: impl FnOnce(&mut Self) -> StepResult<T>,
    ) -> Option<T> {
        println!("start {stage} {table} {arg}");
        let mut ack = String::new();
        if std::io::stdin().lock().read_line(&mut ack).unwrap_or(0) == 0 {
            // The parent is gone.
            std::process::exit(0);
        }
        match f(self) {
            Ok(v) => {
                println!("done {stage} {table} {arg}");
                Some(v)
            }
            Err(e) if self.tolerant => {
                println!("error {stage} {table} {arg} {e}");
                self.errors += 1;
                None
            }
            Err(e) => panic!("{stage} {table} {arg}: {e}"),
        }
    }

    /// Opens (or creates) the store.
    pub fn open(&mut self) -> bool {
        let dir = self.dir.clone();
        self.store = self.step("open", "-", "-", |_| {
            FilterStore::open_with(&dir, config()).map_err(msg)
        });
        self.store.is_some()
    }

    /// Drops every handle and opens the store again (after an error).
    pub fn reopen(&mut self) -> bool {
        self.guard = None;
        self.tables.clear();
        self.written.clear();
        self.store = None;
        let dir = self.dir.clone();
        self.store = self.step("reopen", "-", "-", |_| {
            FilterStore::open_with(&dir, config()).map_err(msg)
        });
        self.store.is_some()
    }

    /// The open table `name`, opened or created (as `layout`, sized for
    /// `keys`) on first use.
    pub fn table(&mut self, name: &str, layout: Layout, keys: u64) -> Option<Table> {
        if let Some(t) = self.tables.get(name) {
            return Some(t.clone());
        }
        let store = self.store.clone()?;
        // A create whose outcome is unknown (the EIO workloads) may have
        // made the table.
        let made = || {
            self.tolerant
                && store
                    .list_tables()
                    .is_ok_and(|l| l.iter().any(|t| t == name))
        };
        let table = if self.live.contains_key(name) || made() {
            self.step("open-table", name, "-", |_| {
                store.open_table(name).map_err(msg)
            })?
        } else {
            let t = self.step("create", name, layout_name(layout), |_| {
                store.create_table(name, spec(layout, keys)).map_err(msg)
            })?;
            self.live.insert(name.to_string(), Vec::new());
            t
        };
        self.live.entry(name.to_string()).or_default();
        self.tables.insert(name.to_string(), table.clone());
        Some(table)
    }

    /// The open table `name`, which exists.
    fn open_table(&mut self, name: &str) -> Option<Table> {
        assert!(self.live.contains_key(name), "no table {name}");
        self.table(name, Layout::Blocked, OTHER_KEYS)
    }

    fn batch_of(b: BatchId, remove: bool) -> WriteBatch {
        let mut w = WriteBatch::new();
        for k in batch(b) {
            if remove {
                w.remove(&k);
            } else {
                w.insert(&k);
            }
        }
        w
    }

    /// A durable insert of a new batch.
    pub fn insert(&mut self, name: &str) {
        let Some(t) = self.open_table(name) else {
            return;
        };
        let b = self.next_batch();
        let w = Self::batch_of(b, false);
        let done = self.step("insert", name, &encode(&[b]), |_| {
            t.apply(&w, Durability::Durable).map_err(msg)
        });
        if done.is_some() {
            self.live.get_mut(name).unwrap().push(b);
        }
    }

    /// An insert of a new batch without a sync (process-crash-safe or
    /// buffered): may be lost in part or whole, must not take a durable
    /// one with it.
    pub fn write(&mut self, name: &str) {
        let Some(t) = self.open_table(name) else {
            return;
        };
        let b = self.next_batch();
        let w = Self::batch_of(b, false);
        let level = if self.rng.gen_bool(0.5) {
            Durability::ProcessCrashSafe
        } else {
            Durability::Buffered
        };
        if self
            .step("write", name, &encode(&[b]), |_| {
                t.apply(&w, level).map_err(msg)
            })
            .is_some()
        {
            self.written.entry(name.into()).or_default().push(b);
        }
    }

    /// `Table::flush`: every batch written so far is durable when it returns.
    pub fn flush(&mut self, name: &str) {
        let Some(t) = self.open_table(name) else {
            return;
        };
        if self
            .step("flush", name, "-", |_| t.flush().map_err(msg))
            .is_some()
        {
            let written = self.written.remove(name).unwrap_or_default();
            self.live.get_mut(name).unwrap().extend(written);
        }
    }

    /// A durable remove of a random durable batch (of more than two).
    pub fn remove(&mut self, name: &str) {
        let Some(t) = self.open_table(name) else {
            return;
        };
        let live = self.live.get_mut(name).unwrap();
        if live.len() <= 2 {
            return self.insert(name);
        }
        let gone = live.swap_remove(self.rng.gen_range(0..live.len()));
        let w = Self::batch_of(gone, true);
        self.step("remove", name, &encode(&[gone]), |_| {
            t.apply(&w, Durability::Durable).map_err(msg)
        });
    }

    pub fn fold(&mut self, name: &str) {
        if let Some(t) = self.open_table(name) {
            self.step("fold", name, "-", |_| t.fold().map_err(msg));
        }
    }

    /// Every batch the table should hold: the source of a regeneration.
    fn source(&self, name: &str) -> Vec<BatchId> {
        let mut all = self.live[name].clone();
        all.extend(self.written.get(name).into_iter().flatten());
        all
    }

    pub fn regenerate(&mut self, name: &str) {
        let Some(t) = self.open_table(name) else {
            return;
        };
        let all = self.source(name);
        let source = || {
            all.iter()
                .flat_map(|&b| batch(b))
                .map(Ok::<_, std::io::Error>)
        };
        self.step("regenerate", name, "-", |_| {
            t.regenerate(source, &RegenOptions::default()).map_err(msg)
        });
    }

    /// `Table::change_layout` to the next layout of three.
    pub fn relayout(&mut self, name: &str) {
        let Some(t) = self.open_table(name) else {
            return;
        };
        let to = match t.params().layout() {
            Layout::Blocked => Layout::SplitBlock,
            Layout::SplitBlock => Layout::Standard,
            _ => Layout::Blocked,
        };
        let all = self.source(name);
        let source = || {
            all.iter()
                .flat_map(|&b| batch(b))
                .map(Ok::<_, std::io::Error>)
        };
        self.step("relayout", name, layout_name(to), |_| {
            t.change_layout(to, source, &RegenOptions::default())
                .map_err(msg)
        });
    }

    /// `Table::bulk_load` of ten new batches.
    pub fn bulk(&mut self, name: &str) {
        let Some(t) = self.open_table(name) else {
            return;
        };
        let bs: Vec<BatchId> = (0..BULK_BATCHES).map(|_| self.next_batch()).collect();
        let keys = || bs.iter().flat_map(|&b| batch(b));
        let loaded = self.step("bulk", name, &encode(&bs), |_| {
            t.bulk_load(keys()).map_err(msg)
        });
        if let Some(n) = loaded {
            assert_eq!(n, BULK_BATCHES * u64::from(BATCH));
            self.live.get_mut(name).unwrap().extend(bs);
        }
    }

    /// Imports table `from`'s counting filter (its export) as a new table,
    /// or (`copy` false) a counting filter of one new batch made in memory.
    pub fn import(&mut self, from: &str, copy: bool) {
        let (Some(t), Some(store)) = (self.open_table(from), self.store.clone()) else {
            return;
        };
        let name = format!("i{}-{}", self.cut, self.n + 1);
        let imported = if copy {
            self.n += 1;
            let bytes = t.export(ExportKind::Counting).unwrap();
            let holds = self.live[from].clone();
            let done = self.step("import", &name, &encode(&holds), |_| {
                store.import(&name, &bytes).map_err(msg)
            });
            done.map(|t| (t, holds))
        } else {
            let b = self.next_batch();
            let mut c = CountingFilter::new(t.params()).unwrap();
            batch(b).for_each(|k| {
                c.insert(&k);
            });
            let done = self.step("import", &name, &encode(&[b]), |_| {
                store
                    .import_counting(&name, &c, u64::from(BATCH))
                    .map_err(msg)
            });
            done.map(|t| (t, vec![b]))
        };
        if let Some((t, holds)) = imported {
            self.tables.insert(name.clone(), t);
            self.live.insert(name, holds);
        }
    }

    /// Creates a table of its own (a random layout) and writes a durable
    /// batch into it.
    pub fn create_other(&mut self) {
        let name = format!("o{}-{}", self.cut, self.n + 1);
        self.n += 1;
        let layout =
            [Layout::Blocked, Layout::SplitBlock, Layout::Standard][self.rng.gen_range(0..3)];
        if self.table(&name, layout, OTHER_KEYS).is_some() {
            self.insert(&name);
        }
    }

    /// Drops a random table other than `keep`, if there is one.
    pub fn drop_other(&mut self, keep: &[&str]) {
        let Some(store) = self.store.clone() else {
            return;
        };
        let others: Vec<String> = self
            .live
            .keys()
            .filter(|n| !keep.contains(&n.as_str()))
            .cloned()
            .collect();
        if others.is_empty() {
            return self.create_other();
        }
        let name = others[self.rng.gen_range(0..others.len())].clone();
        self.tables.remove(&name);
        if self
            .step("drop", &name, "-", |_| store.drop_table(&name).map_err(msg))
            .is_some()
        {
            self.live.remove(&name);
            self.written.remove(&name);
        }
    }

    /// Commits one to three new sealed filters in one batch, each holding a
    /// new batch of keys.
    fn seal(&mut self) {
        let Some(store) = self.store.clone() else {
            return;
        };
        let n = self.rng.gen_range(1..=3);
        let ids: Vec<BatchId> = (0..n).map(|_| self.next_batch()).collect();
        let params =
            FilterParams::for_capacity(u64::from(BATCH), 1e-4, Layout::Blocked, HashSpec::xxh3(5))
                .unwrap();
        let done = self.step("seal", "-", &encode(&ids), |_| {
            let mut b = SealedBatch::new();
            for &id in &ids {
                let f = BitFilter::new(params).map_err(msg)?;
                batch(id).for_each(|k| {
                    f.insert(&k);
                });
                b.put(NewSealed::new(sealed_name(id), f, u64::from(BATCH)));
            }
            store.commit_sealed(b).map(drop).map_err(msg)
        });
        if done.is_some() {
            self.sealed.extend(ids);
        }
    }

    /// Removes one or two sealed filters in one batch.
    fn unseal(&mut self) {
        let Some(store) = self.store.clone() else {
            return;
        };
        if self.sealed.is_empty() {
            return self.seal();
        }
        let n = self.rng.gen_range(1..=2).min(self.sealed.len());
        let ids: Vec<BatchId> = (0..n)
            .map(|_| {
                self.sealed
                    .swap_remove(self.rng.gen_range(0..self.sealed.len()))
            })
            .collect();
        self.step("unseal", "-", &encode(&ids), |_| {
            let mut b = SealedBatch::new();
            for &id in &ids {
                b.remove(sealed_name(id));
            }
            store.commit_sealed(b).map(drop).map_err(msg)
        });
    }

    /// Opens the guard (creating its table and loading its base first, if
    /// not done yet).
    pub fn guard_open(&mut self) -> bool {
        if self.guard.is_some() {
            return true;
        }
        let table = self.table(GUARD_TABLE, Layout::Blocked, OTHER_KEYS);
        let (Some(table), Some(store)) = (table, self.store.clone()) else {
            return false;
        };
        let storage = SledDiffStorage::open(&store, GUARD_STORAGE).unwrap();
        if !self.based {
            let records = (0..GUARD_KEYS).map(|i| (guard_key(i), guard_base(i)));
            self.based = self
                .step("base", GUARD_STORAGE, "-", |_| {
                    storage.load_base(records).map_err(msg)
                })
                .is_some();
        }
        self.guard = Some(Guard::open(storage, table).unwrap());
        true
    }

    /// A guard write of 24 keys ([`guard_write`]).
    pub fn guard_write(&mut self) {
        if !self.guard_open() {
            return;
        }
        let b = self.next_batch();
        let changes: Vec<_> = guard_write(b)
            .into_iter()
            .map(|(i, c)| (guard_key(i), c))
            .collect();
        let guard = self.guard.take().unwrap();
        // Every other batch buffered, then flushed: durable when the step
        // is done, as a plain write is.
        let buffered = b.1 % 2 == 1;
        self.step("gwrite", GUARD_STORAGE, &encode(&[b]), |_| {
            if buffered {
                guard
                    .write_with(&changes, Durability::Buffered)
                    .and_then(|()| guard.flush())
                    .map_err(msg)
            } else {
                guard.write(&changes).map_err(msg)
            }
        });
        self.guard = Some(guard);
    }

    /// [`Op::GuardWrites`]: done when all three returned and a flush
    /// after them (the first thread's write is buffered) did (each keeps
    /// its own keys; a key two of them change may end with either's change).
    pub fn guard_writes(&mut self) {
        if !self.guard_open() {
            return;
        }
        let batches = [self.next_batch(), self.next_batch(), self.next_batch()];
        let writes: Vec<Vec<_>> = batches
            .iter()
            .map(|&b| {
                guard_write(b)
                    .into_iter()
                    .map(|(i, c)| (guard_key(i), c))
                    .collect()
            })
            .collect();
        let guard = self.guard.take().unwrap();
        self.step("gwrites", GUARD_STORAGE, &encode(&batches), |_| {
            let guard = &guard;
            std::thread::scope(|s| {
                // The first thread's write buffered: the others' records
                // take it along, or the flush after them writes it.
                let threads: Vec<_> = writes
                    .iter()
                    .enumerate()
                    .map(|(t, changes)| {
                        let level = match t {
                            0 => Durability::Buffered,
                            _ => Durability::Durable,
                        };
                        s.spawn(move || guard.write_with(changes, level).map_err(msg))
                    })
                    .collect();
                let outcomes: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
                outcomes
                    .into_iter()
                    .collect::<Result<Vec<()>, _>>()
                    .and_then(|_| guard.flush().map_err(msg))
            })
        });
        self.guard = Some(guard);
    }

    pub fn guard_merge(&mut self) {
        if !self.guard_open() {
            return;
        }
        let guard = self.guard.take().unwrap();
        self.step("merge", GUARD_STORAGE, "-", |_| guard.merge().map_err(msg));
        self.guard = Some(guard);
    }

    /// Drops the guard and its storage (which waits for a merge running in
    /// the background) and opens them again ([`Op::GuardReopen`]).
    pub fn guard_reopen(&mut self) {
        if !self.guard_open() {
            return;
        }
        self.step("greopen", GUARD_STORAGE, "-", |c| {
            c.guard = None;
            if c.guard_open() {
                Ok(())
            } else {
                Err("the guard does not open again".to_string())
            }
        });
    }
}
