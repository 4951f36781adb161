//! What must survive a cut, from what the writer reported, and the check of
//! the image a cut left against it.
//!
//! The writer ([`super::child`]) reports each operation on its stdout, one
//! line before it starts and one when it returned:
//!
//! ```text
//! start <stage> <table> <arg>
//! done <stage> <table> <arg>
//! error <stage> <table> <arg> <message>   (the EIO workloads only)
//! ```
//!
//! `<arg>` is `-`, a list of batches (`cut.n,cut.n`) or a layout. A batch is
//! [`BATCH`] keys of its own; [`Model::apply`] turns the lines into what a
//! cut must leave: the tables that must exist and must not, the batches each
//! must hold (reported durable and not being removed), the layouts it may
//! have, and the guard's allowed value of each key. An operation that
//! started but did not return may or may not have happened: its table may
//! or may not exist, its batch may or may not be there, its guard key may
//! hold the old or the new value.

use filterstore::{
    Change, DiffStorage, DriftReason, FilterStore, Guard, Layout, SledDiffStorage, StoreError,
    Table,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A batch: the cut that wrote it and its number there.
pub type BatchId = (u32, u64);

/// Keys of a batch.
pub const BATCH: u32 = 400;

/// The guard's storage and the table of its changed keys.
pub const GUARD_STORAGE: &str = "g";
pub const GUARD_TABLE: &str = "g-changed";
/// Keys of the guard's storage: `gk-0000` … `gk-0511`.
pub const GUARD_KEYS: u32 = 512;
/// Keys changed by one guard write (three atomic groups of eight).
const GUARD_WRITE: usize = 24;

pub fn key(b: BatchId, i: u32) -> Vec<u8> {
    format!("c{}-b{}-{i}", b.0, b.1).into_bytes()
}

pub fn batch(b: BatchId) -> impl Iterator<Item = Vec<u8>> {
    (0..BATCH).map(move |i| key(b, i))
}

pub fn encode(ids: &[BatchId]) -> String {
    if ids.is_empty() {
        return "-".into();
    }
    let v: Vec<String> = ids.iter().map(|(c, b)| format!("{c}.{b}")).collect();
    v.join(",")
}

pub fn decode(s: &str) -> Vec<BatchId> {
    s.split(',')
        .filter(|x| !x.is_empty() && *x != "-")
        .map(|x| {
            let (c, b) = x.split_once('.').unwrap();
            (c.parse().unwrap(), b.parse().unwrap())
        })
        .collect()
}

pub fn layout_name(l: Layout) -> &'static str {
    match l {
        Layout::Blocked => "blocked",
        Layout::SplitBlock => "split-block",
        _ => "standard",
    }
}

pub fn parse_layout(s: &str) -> Layout {
    match s {
        "blocked" => Layout::Blocked,
        "split-block" => Layout::SplitBlock,
        "standard" => Layout::Standard,
        other => panic!("unknown layout {other:?}"),
    }
}

pub fn guard_key(i: u32) -> Vec<u8> {
    format!("gk-{i:04}").into_bytes()
}

/// The base record of guard key `i`.
pub fn guard_base(i: u32) -> Vec<u8> {
    format!("base {i}").into_bytes()
}

/// The changes guard write `b` makes: 24 distinct keys, one in six
/// deleted, the others set to a value naming the write.
pub fn guard_write(b: BatchId) -> Vec<(u32, Change)> {
    let mut rng = StdRng::seed_from_u64(u64::from(b.0) << 32 ^ b.1);
    let mut keys = BTreeSet::new();
    while keys.len() < GUARD_WRITE {
        keys.insert(rng.gen_range(0..GUARD_KEYS));
    }
    keys.into_iter()
        .map(|k| {
            let change = if rng.gen_range(0..6) == 0 {
                Change::Delete
            } else {
                Change::Put(format!("c{}-b{} {k}", b.0, b.1).into_bytes())
            };
            (k, change)
        })
        .collect()
}

/// Whether a table must exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presence {
    Present,
    /// Its create or drop was cut: either; if it exists, whole.
    Maybe,
    Absent,
}

#[derive(Clone, Debug)]
pub struct TableModel {
    pub presence: Presence,
    /// Batches reported durable (if the table exists, they are in it).
    pub must: BTreeSet<BatchId>,
    /// Batches written without a sync since the last flush.
    pub unflushed: BTreeSet<BatchId>,
    /// The layouts it may have (empty: any).
    pub layouts: Vec<Layout>,
}

impl TableModel {
    fn new(presence: Presence, must: BTreeSet<BatchId>, layouts: Vec<Layout>) -> Self {
        TableModel {
            presence,
            must,
            unflushed: BTreeSet::new(),
            layouts,
        }
    }
}

/// What a cut must leave (module docs).
#[derive(Clone, Debug, Default)]
pub struct Model {
    pub tables: BTreeMap<String, TableModel>,
    /// The guard's storage: the values each key may read as (`None`:
    /// absent); `None` if the workload has no guard.
    pub guard: Option<BTreeMap<u32, Vec<Option<Vec<u8>>>>>,
    /// Whether a load of the guard's base returned.
    pub guard_based: bool,
    /// The sealed filters, by the batch each holds (named [`sealed_name`]).
    pub sealed: BTreeMap<BatchId, Presence>,
}

/// The name of the sealed filter holding batch `b`.
pub fn sealed_name(b: BatchId) -> String {
    format!("s{}-{}", b.0, b.1)
}

impl Model {
    /// The tables that must exist, with their batches, for the writer.
    pub fn encode_for_child(&self) -> String {
        let mut parts: Vec<String> = self
            .tables
            .iter()
            .filter(|(_, t)| t.presence == Presence::Present)
            .map(|(name, t)| {
                let must: Vec<BatchId> = t.must.iter().copied().collect();
                format!("{name}={}", encode(&must))
            })
            .collect();
        if self.guard_based {
            parts.push("+based".into());
        }
        let sealed: Vec<BatchId> = self
            .sealed
            .iter()
            .filter(|(_, p)| **p == Presence::Present)
            .map(|(b, _)| *b)
            .collect();
        if !sealed.is_empty() {
            parts.push(format!("+sealed={}", encode(&sealed)));
        }
        parts.join(";")
    }

    /// Applies one line of the writer's (module docs).
    pub fn apply(&mut self, line: &str) {
        let mut f = line.splitn(5, ' ');
        let (verb, stage, table, arg) = match (f.next(), f.next(), f.next(), f.next()) {
            (Some(v), Some(s), Some(t), Some(a)) => (v, s, t, a),
            _ => return,
        };
        match (verb, stage) {
            ("start" | "done", "base" | "gwrite" | "gwrites") => {
                self.apply_guard(verb == "done", stage, arg)
            }
            ("start" | "done", "seal" | "unseal") => self.apply_sealed(verb == "done", stage, arg),
            ("start" | "done", _) => self.apply_table(verb == "done", stage, table, arg),
            // An error: the operation may or may not have happened, which
            // its start line allowed for.
            _ => {}
        }
    }

    fn apply_table(&mut self, done: bool, stage: &str, table: &str, arg: &str) {
        match (done, stage) {
            (false, "create") => {
                let layouts = vec![parse_layout(arg)];
                let t = TableModel::new(Presence::Maybe, BTreeSet::new(), layouts);
                self.tables.insert(table.into(), t);
            }
            (false, "import") => {
                let must = decode(arg).into_iter().collect();
                let t = TableModel::new(Presence::Maybe, must, Vec::new());
                self.tables.insert(table.into(), t);
            }
            (true, "create" | "import") => self.table(table).presence = Presence::Present,
            // A write through a handle proves the table exists (its create
            // may have failed with the outcome unknown).
            (true, "insert" | "bulk" | "write") => {
                let t = self.table(table);
                t.presence = Presence::Present;
                let to = if stage == "write" {
                    &mut t.unflushed
                } else {
                    &mut t.must
                };
                to.extend(decode(arg));
            }
            (true, "flush") => {
                let t = self.table(table);
                let written = std::mem::take(&mut t.unflushed);
                t.must.extend(written);
            }
            (false, "remove") => {
                let t = self.table(table);
                for b in decode(arg) {
                    t.must.remove(&b);
                    t.unflushed.remove(&b);
                }
            }
            // A flush after a reopen covers what the new handles wrote:
            // what the old ones wrote without a sync is not reported.
            (false, "reopen") => self.tables.values_mut().for_each(|t| t.unflushed.clear()),
            (false, "relayout") => self.table(table).layouts.push(parse_layout(arg)),
            (true, "relayout") => self.table(table).layouts = vec![parse_layout(arg)],
            (false, "drop") => {
                let t = self.table(table);
                if t.presence == Presence::Present {
                    t.presence = Presence::Maybe;
                }
            }
            (true, "drop") => self.table(table).presence = Presence::Absent,
            _ => {}
        }
    }

    /// A guard base load or write: while it runs each key it touches may
    /// read as before or after, once it returned only as after.
    fn apply_guard(&mut self, done: bool, stage: &str, arg: &str) {
        let changes: Vec<(u32, Option<Vec<u8>>)> = if stage == "base" {
            self.guard_based |= done;
            (0..GUARD_KEYS).map(|i| (i, Some(guard_base(i)))).collect()
        } else {
            decode(arg)
                .into_iter()
                .flat_map(guard_write)
                .map(|(i, change)| match change {
                    Change::Put(v) => (i, Some(v)),
                    Change::Delete => (i, None),
                })
                .collect()
        };
        let g = self.guard.get_or_insert_with(BTreeMap::new);
        // Once done, a key's change is one of this step's for it: the last
        // of one write's, or, of writes made side by side ("gwrites"),
        // any of theirs.
        let mut cleared = BTreeSet::new();
        for (i, value) in changes {
            let allowed = g.entry(i).or_insert_with(|| vec![None]);
            if done && cleared.insert(i) {
                allowed.clear();
            }
            if done && stage != "gwrites" {
                allowed.clear();
            }
            allowed.push(value);
        }
    }

    /// A batch of sealed filters (`seal`: new ones, `unseal`: removals):
    /// while it runs each may be there or not, once it returned it is, or
    /// is not.
    fn apply_sealed(&mut self, done: bool, stage: &str, arg: &str) {
        for b in decode(arg) {
            let p = match (done, stage) {
                (false, _) => Presence::Maybe,
                (true, "seal") => Presence::Present,
                (true, _) => Presence::Absent,
            };
            self.sealed.insert(b, p);
        }
    }

    fn table(&mut self, name: &str) -> &mut TableModel {
        self.tables
            .get_mut(name)
            .unwrap_or_else(|| panic!("the writer reported on table {name} before creating it"))
    }
}

/// What the check of an image found.
#[derive(Debug, Default)]
pub struct Checked {
    /// Durable keys checked, and those missing.
    pub keys: u64,
    pub lost_keys: u64,
    /// Batches reported durable with a key missing.
    pub lost_batches: u64,
    /// The store or a table that must open did not.
    pub failed_open: bool,
    /// Everything wrong, one line each.
    pub failures: Vec<String>,
    /// The model made exact by what the image holds: the state the next
    /// cut of the chain starts from.
    pub resolved: Model,
}

impl Checked {
    fn fail(&mut self, why: String) {
        self.failures.push(why);
    }
}

/// Opens the store in `dir` (the copy of an image) and checks it against
/// `model`; `extra` checks what the workload adds (the migration's fixture).
pub fn check(dir: &Path, model: &Model, extra: &dyn Fn(&FilterStore, &mut Checked)) -> Checked {
    let mut out = Checked {
        resolved: model.clone(),
        ..Checked::default()
    };
    // A store whose directory a cut took is created again here, empty:
    // then a table that must exist is missing.
    let store = match std::panic::catch_unwind(|| FilterStore::open(dir)) {
        Ok(Ok(store)) => store,
        Ok(Err(e)) => {
            out.failed_open = true;
            out.fail(format!("the store does not open: {e}"));
            return out;
        }
        Err(_) => {
            out.failed_open = true;
            out.fail("opening the store panicked".into());
            return out;
        }
    };
    for (name, t) in &model.tables {
        check_table(&store, name, t, &mut out);
    }
    if let Some(g) = &model.guard {
        check_guard(&store, g, &mut out);
    }
    if !model.sealed.is_empty() {
        check_sealed(&store, &model.sealed, &mut out);
    }
    extra(&store, &mut out);
    out
}

fn check_table(store: &FilterStore, name: &str, t: &TableModel, out: &mut Checked) {
    let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| store.open_table(name)));
    let resolved = out.resolved.tables.get_mut(name).unwrap();
    resolved.unflushed.clear();
    let table = match (opened, t.presence) {
        (Ok(Ok(table)), Presence::Absent) => {
            let _ = table;
            out.fail(format!("table {name} was reported dropped, and is back"));
            return;
        }
        (Ok(Ok(table)), _) => table,
        (Ok(Err(StoreError::NoSuchTable(_))), Presence::Present) => {
            let lost = t.must.len() as u64 * u64::from(BATCH);
            out.keys += lost;
            out.lost_keys += lost;
            out.lost_batches += t.must.len() as u64;
            out.fail(format!(
                "table {name} is gone, with its {lost} durable keys"
            ));
            return;
        }
        (Ok(Err(StoreError::NoSuchTable(_))), _) => {
            resolved.presence = Presence::Absent;
            return;
        }
        (Ok(Err(e)), _) => {
            out.failed_open = true;
            out.fail(format!("table {name} does not open: {e}"));
            return;
        }
        (Err(_), _) => {
            out.failed_open = true;
            out.fail(format!("opening table {name} panicked"));
            return;
        }
    };
    resolved.presence = Presence::Present;
    let layout = table.params().layout();
    resolved.layouts = vec![layout];
    if !t.layouts.is_empty() && !t.layouts.contains(&layout) {
        out.fail(format!(
            "table {name} is of the {} layout, written as one of {:?}",
            layout_name(layout),
            t.layouts
        ));
    }
    count_batches(name, &table, &t.must, out);
    // Nothing rots in this model: a table that opens damaged (every lookup
    // "maybe", writes refused until a regeneration) lost a record that its
    // log said was durable. No key reads absent, but the store broke its
    // word all the same.
    match table.health() {
        Ok(h) => {
            if let Some(DriftReason::Damaged { reason }) = h.reason() {
                out.fail(format!("table {name} opens damaged: {reason}"));
            }
        }
        Err(e) => out.fail(format!("the health of table {name}: {e}")),
    }
}

fn count_batches(name: &str, table: &Table, must: &BTreeSet<BatchId>, out: &mut Checked) {
    let mut lost = 0;
    for &b in must {
        let missing = batch(b).filter(|k| !table.contains(k)).count() as u64;
        if missing > 0 {
            eprintln!("table {name}, batch {b:?}: {missing} of {BATCH} durable keys lost");
            lost += missing;
            out.lost_batches += 1;
        }
    }
    out.keys += must.len() as u64 * u64::from(BATCH);
    out.lost_keys += lost;
    if lost > 0 {
        out.fail(format!("table {name}: {lost} durable keys lost"));
    }
}

/// Every sealed filter that must exist does, loads and holds its batch's
/// keys; one that must not, does not; one cut in its commit is wholly there
/// or not at all.
fn check_sealed(store: &FilterStore, model: &BTreeMap<BatchId, Presence>, out: &mut Checked) {
    let infos = match store.list_sealed("s") {
        Ok(i) => i,
        Err(e) => {
            out.failed_open = true;
            return out.fail(format!("the sealed filters do not list: {e}"));
        }
    };
    let loaded = store.load_sealed(&infos);
    let found: BTreeMap<&str, _> = infos.iter().map(|i| i.name()).zip(loaded).collect();
    for (&b, &presence) in model {
        let name = sealed_name(b);
        let resolved = out.resolved.sealed.get_mut(&b).unwrap();
        match (found.get(name.as_str()), presence) {
            (Some(_), Presence::Absent) => {
                out.fail(format!("sealed filter {name} was removed, and is back"))
            }
            (None, Presence::Present) => {
                out.keys += u64::from(BATCH);
                out.lost_keys += u64::from(BATCH);
                out.lost_batches += 1;
                out.fail(format!(
                    "sealed filter {name} is gone, with its durable keys"
                ));
            }
            (None, _) => *resolved = Presence::Absent,
            (Some(Err(e)), _) => {
                out.failed_open = true;
                out.fail(format!("sealed filter {name} does not load: {e}"));
            }
            (Some(Ok(f)), _) => {
                *resolved = Presence::Present;
                let missing = batch(b).filter(|k| !f.contains(k)).count() as u64;
                out.keys += u64::from(BATCH);
                out.lost_keys += missing;
                if missing > 0 {
                    out.lost_batches += 1;
                    out.fail(format!("sealed filter {name}: {missing} keys missing"));
                }
            }
        }
    }
}

/// A read of a guard key: its value, or why it failed.
type GuardRead = dyn Fn(&[u8]) -> Result<Option<Vec<u8>>, String>;

/// Reads every guard key (through the guard when its table exists, else
/// from the storage: the diff, then the base) against its allowed values.
fn check_guard(
    store: &FilterStore,
    allowed: &BTreeMap<u32, Vec<Option<Vec<u8>>>>,
    out: &mut Checked,
) {
    let storage = match SledDiffStorage::open(store, GUARD_STORAGE) {
        Ok(s) => s,
        Err(e) => {
            out.failed_open = true;
            return out.fail(format!("the guard's storage does not open: {e}"));
        }
    };
    let read: Box<GuardRead> = match store.open_table(GUARD_TABLE) {
        Ok(table) => match Guard::open(storage, table) {
            Ok(guard) => Box::new(move |k| {
                guard
                    .read(k)
                    .map(|v| v.map(Vec::from))
                    .map_err(|e| e.to_string())
            }),
            Err(e) => {
                out.failed_open = true;
                return out.fail(format!("the guard does not open: {e}"));
            }
        },
        Err(StoreError::NoSuchTable(_)) => {
            Box::new(
                move |k| match storage.read_diff(k).map_err(|e| e.to_string())? {
                    Some(Change::Put(v)) => Ok(Some(v)),
                    Some(Change::Delete) => Ok(None),
                    None => storage
                        .read_base(k)
                        .map(|v| v.map(Vec::from))
                        .map_err(|e| e.to_string()),
                },
            )
        }
        Err(e) => {
            out.failed_open = true;
            return out.fail(format!("the guard's table does not open: {e}"));
        }
    };
    let mut wrong = 0;
    let resolved = out.resolved.guard.as_mut().unwrap();
    for (&i, values) in allowed {
        let got = match read(&guard_key(i)) {
            Ok(v) => v,
            Err(e) => {
                out.failures.push(format!("guard read of key {i}: {e}"));
                return;
            }
        };
        if !values.contains(&got) {
            if wrong < 5 {
                eprintln!("guard key {i}: read {got:?}, allowed {values:?}");
            }
            wrong += 1;
        }
        resolved.insert(i, vec![got]);
    }
    out.keys += allowed.len() as u64;
    out.lost_keys += wrong;
    if wrong > 0 {
        out.fail(format!("the guard read {wrong} keys wrong (stale or lost)"));
    }
}
