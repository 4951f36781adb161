//! The persistent store: one sled database holding a catalog of tables, each
//! with a counting filter on disk and its bit filter in memory.
//!
//! ```no_run
//! use filterstore::{Durability, FilterStore, TableSpec, WriteBatch};
//! # fn main() -> Result<(), filterstore::StoreError> {
//! let store = FilterStore::open("./filterstore.db")?;
//! let orders = store.create_table("orders", TableSpec::new(1_000_000, 0.01))?;
//! let mut batch = WriteBatch::new();
//! batch.insert(b"order:1").insert(b"order:2");
//! orders.apply(&batch, Durability::Durable)?; // durable when it returns
//! // ... only now commit the two order records in the host database.
//! assert!(orders.contains(b"order:1"));
//! # Ok(()) }
//! ```
//!
//! # Durability contract
//! * Every write is **visible** to lookups when the call returns, and
//!   **durable** after [`Table::flush`] / [`FilterStore::flush`] returns, or
//!   when [`Table::apply`] with [`Durability::Durable`] returns. A batch is
//!   atomic: after a crash it is wholly present or wholly absent.
//! * The host database keeps two ordering rules; then a crash can only leave
//!   extra keys in a filter (false positives), never missing ones:
//!   1. make a key's **filter insert durable before committing the record**
//!      it protects;
//!   2. **commit a record's deletion before removing its key** from the
//!      filter.
//! * A write that returns an error was applied wholly or not at all, but may
//!   or may not be durable: treat it as not durable (rule 1: do not commit).
//! * A crash at any moment (kill -9) leaves a store that opens without error
//!   and answers "maybe" for every key whose insert was durable (tested by
//!   `tests/store_crash.rs`, which kills a writer process 200 times; a fold
//!   cut after any of its writes reopens exact, `table::fold_tests`).
//! * A full or failing disk is a prompt error, never a hang: each sled call
//!   is given up after [`StoreConfig::io_timeout`]; after an I/O error or a
//!   timeout the store refuses further disk work (lookups keep answering)
//!   until it is reopened, and nothing durable is lost
//!   (`tests/store_disk_full.rs`, on a real 20 MB tmpfs). See [`engine`].
//!
//! # Layout in sled
//! `docs/FORMAT.md` specifies every byte: the catalog tree (§8, §9), and in
//! each table generation's own tree the counter pages and log records (§10)
//! and the generation state (§11).
//!
//! # Write path: a log of key hashes, folded into counter pages
//! Updating a key's counters in place would cost one sled read and write per
//! key (sled: ≈ 110k single inserts/s). Instead a batch is appended to an
//! in-memory buffer (17 bytes per key: the 128-bit hash and an op code), the
//! buffer is written as **one** sled value per batch group, and the log is
//! *folded* into the counter pages when it reaches
//! [`StoreConfig::fold_threshold`] operations: sorted by block, each touched
//! 16 KiB chunk read, updated and written once, and the folded records removed;
//! each chunk is written together with a mark of the fold's progress in the
//! generation's state record, so that a crash in the middle of a fold leaves
//! every chunk saying exactly which log records it holds (`docs/FORMAT.md`
//! §11). A durable batch of 1,000 keys is then one sled insert plus one
//! flush. Removes need the current counters of the key's block
//! (to refuse a key that was never inserted, and to clear bits whose counter
//! reaches zero); those blocks are read and kept in memory until the next fold
//! (see [`table`] for the invariant that keeps the bits exact).
//!
//! # The storage engine stays inside
//! sled is an implementation detail: no sled type appears in the public API
//! of any feature, and a sled error reaches a host only as the
//! [`source`](std::error::Error::source) of a [`StoreError`]. A host cannot
//! hand the store its own `engine::Db`; a host that wants one page cache and
//! one flusher for its guarded data and its filters keeps that data *in the
//! store's database* instead, through
//! [`SledDiffStorage::open`](crate::SledDiffStorage::open). The reason: the
//! reliability work on sled 0.34.7 (its writer deadlock, full disks, power
//! loss) may move the high-volume traffic off sled, and that must not break
//! a host that was never given a sled type.
//!
//! # One sled call at a time
//! sled 0.34.7 can deadlock a writer against its own thread pool (its issue
//! #804). Of the routes — bounding what the store hands sled, or moving the
//! counter pages and the log onto files of our own — the store takes the
//! first: every sled call goes through [`engine`], which lets one call of the
//! process run at a time, flushes each call that may have written before the
//! next, keeps every steady-state call to at most two items of one page, and
//! turns sled's background flusher off. `engine`'s module docs prove from
//! sled's code that the deadlock's cycle cannot then close. Chosen because it
//! keeps sled's atomic batches and crash recovery, which the store's crash
//! tests rely on, and needs no new file format for pages or log; the cost is
//! that folds and regenerations write one page per flushed call.
//! `scripts/hang-loop.sh` loops the test that used to hang.
//!
//! # Memory
//! The bit filters of the open tables, plus sled's page cache
//! ([`StoreConfig::cache_capacity`], 64 MiB by default; sled's bound is
//! approximate, see there), plus bounded buffers described in
//! [`StoreConfig`]. The counting filter is not held in memory. Measured by
//! `cargo bench --bench store`: after reopening a 10M-key table (11.8 MiB bit
//! filter) with a full default log, the RSS is about 83 MiB, 1.1× the bit
//! filter plus the configured cache.
//!
//! # Generations, health and regeneration
//! A table's data lives in the tree of its generation in force (named by its
//! catalog record). [`Table::regenerate`] builds generation + 1 from a key
//! source beside it, online, and makes it the one in force with one catalog
//! write; [`Table::clear`] does so from an empty source. In memory, a table
//! handle reaches its generation through an atomic pointer, so lookups never
//! wait for the swap. [`Table::health`] reports drift (estimated and
//! observed false-positive rate, saturated counters, load); see [`regen`]
//! for the consistency the key source must have and the crash argument.
//!
//! # Lock order
//! Every site that holds two of the store's locks takes them in this order
//! (a lock may be skipped, never taken out of order):
//!
//! 1. a [`Guard`](crate::Guard)'s writer lock (guarded writes and merges);
//! 2. a table's regeneration lock (`TableInner::regen_lock`: one
//!    regeneration at a time per table);
//! 3. the catalog lock (`StoreInner::catalog_lock`: create, import, drop,
//!    `set_params`, a regeneration's commit);
//! 4. the open-tables map (`StoreInner::tables`);
//! 5. a generation's writer lock (`Generation::writer`: every write, fold
//!    and flush of the table's buffer).
//!
//! Leaves, never held while another lock is taken: a table's catalog record
//! in memory (`TableInner::meta`), the drift policy and the health callback
//! (`StoreInner::policy`, `StoreInner::regen_hook`; the callback is cloned
//! and called with no lock held). Lookups take no lock at all. The sites:
//! `create_table` and `import` (3 → 4), `drop_table` (3 → 4 → 5),
//! `open_table` (4), `flush` (4, released, then 5 per table),
//! `regenerate` (2 → 5, released; later 2 → 3 → 5 for the swap).
//!
//! # Open
//! Opening a table scans its counter chunks once (`m/2` bytes) merged with the
//! unfolded log (at most one fold threshold plus one batch), deriving each bit
//! word from 64 counters: the cost grows with `m`, not with the number of
//! operations the table has seen. No snapshot of the bits is persisted: the
//! counters are the single source of truth, so there is nothing to verify or
//! to get out of step.

pub mod batch;
mod blobkeep;
pub mod catalog;
pub mod config;
pub(crate) mod engine;
pub mod error;
mod import;
mod keys;
mod marker;
mod migrate;
mod pages;
pub mod regen;
pub mod table;
mod wal;

pub use batch::{Durability, WriteBatch};
pub(crate) use catalog::TableMeta;
pub use catalog::{validate_name, MAX_NAME_LEN, STORE_FORMAT_VERSION};
pub use config::{
    StoreConfig, DEFAULT_BUFFER_OPS, DEFAULT_CACHE_CAPACITY, DEFAULT_FILTER_MEMORY_SHARE,
    DEFAULT_FOLD_MEMORY, DEFAULT_IO_TIMEOUT, DEFAULT_MATERIALIZED_BLOCKS,
};
pub use error::{NameError, StoreError};
pub use import::ExportKind;
use marker::DirKind;
pub use marker::MARKER_FILE;
pub use regen::{HealthReport, RegenOptions, RegenReport, DEFAULT_HEADROOM};
pub use table::{Table, TableBloom, TableReader, TableStats};
pub use wal::MAX_RECORD_OPS;

use crate::filter::hash::HashSpec;
use crate::filter::params::{FilterParams, Layout};
use catalog::{StoreHeader, CATALOG_TREE, HEADER_KEY, TABLE_PREFIX, TABLE_TREE_PREFIX};

/// Prefix of the trees of guard storage ([`crate::SledDiffStorage`]): never
/// a table tree, so garbage collection leaves them alone.
const GUARD_TREE_PREFIX: &str = "filterstore/guard/";
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use table::TableInner;

/// How to size a new table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TableSpec {
    expected_keys: u64,
    target_fp: f64,
    layout: Layout,
    seed: Option<u64>,
}

impl TableSpec {
    /// A table for `expected_keys` keys at false-positive rate `target_fp`,
    /// blocked layout, random seed.
    pub fn new(expected_keys: u64, target_fp: f64) -> Self {
        TableSpec {
            expected_keys,
            target_fp,
            layout: Layout::Blocked,
            seed: None,
        }
    }

    /// Chooses the layout ([`Layout::Blocked`] by default). A table of the
    /// split-block layout ([`Layout::SplitBlock`], Parquet's SBBF) hashes
    /// with XXH64 seed 0 and takes no seed: its bits can be exported as an
    /// SBBF and read by any Parquet reader, at the price of positions anyone
    /// can compute ([`HashSpec::xxh64`] says what that means for keys an
    /// adversary chooses). A table changes layout only by a rebuild from its
    /// keys ([`Table::change_layout`]).
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// Fixes the hash seed (a random one by default, so that nobody who does
    /// not know it can craft colliding keys). The split-block layout has no
    /// seed: creating such a table with one is refused.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }
}

pub(crate) struct StoreInner {
    db: engine::Db,
    /// The directory, canonical, as registered in [`OPEN_DIRS`].
    dir: PathBuf,
    catalog: engine::Tree,
    config: StoreConfig,
    /// Serialises catalog changes (create, drop, set, a regeneration's swap).
    catalog_lock: Mutex<()>,
    /// Called when an automatic health check finds a table that needs
    /// regeneration ([`FilterStore::on_needs_regeneration`]).
    regen_hook: Mutex<Option<regen::RegenHook>>,
    /// Whether `regen_hook` is set (read on every write without the lock).
    has_regen_hook: std::sync::atomic::AtomicBool,
    /// The policy of [`Table::health`].
    policy: Mutex<crate::filter::drift::DriftPolicy>,
    /// Open tables: one in-memory state per table, shared by all handles.
    tables: Mutex<HashMap<String, Weak<TableInner>>>,
    /// The private copy a read-only open works on, removed last.
    _scratch: Option<marker::Scratch>,
}

/// A store of per-table filters in one sled database directory.
///
/// `Send + Sync` and cheap to clone. One process at a time may open a
/// directory (sled holds a file lock).
#[derive(Clone)]
pub struct FilterStore {
    inner: Arc<StoreInner>,
}

impl Drop for StoreInner {
    fn drop(&mut self) {
        let mut open = open_dirs();
        if let Some(i) = open.iter().position(|d| *d == self.dir) {
            open.swap_remove(i);
        }
    }
}

impl std::fmt::Debug for FilterStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilterStore")
            .field("config", &self.inner.config)
            .finish()
    }
}

fn sled_err(op: &'static str) -> impl Fn(sled::Error) -> StoreError {
    move |e| StoreError::sled(op, e)
}

/// How long [`FilterStore::open`] waits for a lock held by a store that was
/// just dropped in this process.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Opens the sled database. sled releases its directory lock only when the
/// last of its background threads and epoch-deferred destructors lets go of
/// the file, a few milliseconds after the `Db` is dropped; a reopen in the
/// same process therefore retries for up to [`LOCK_WAIT`] before reporting
/// [`StoreError::Locked`] (another process holding the lock is reported after
/// the same wait).
fn open_db(path: &Path, config: &StoreConfig) -> Result<engine::Db, StoreError> {
    if open_here(path) {
        return Err(StoreError::AlreadyOpen {
            path: path.to_path_buf(),
        });
    }
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        let attempt = engine::Db::open(
            path,
            sled::Config::new()
                .cache_capacity(config.cache_capacity)
                .mode(sled::Mode::HighThroughput),
            config.io_timeout,
        );
        match attempt {
            Ok(db) => return Ok(db),
            Err(sled::Error::Io(io)) if io.to_string().contains("could not acquire lock") => {
                if start.elapsed() >= LOCK_WAIT {
                    let path = path.to_path_buf();
                    return Err(if open_here(&path) {
                        StoreError::AlreadyOpen { path }
                    } else {
                        StoreError::Locked { path }
                    });
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(50));
            }
            Err(sled::Error::Corruption { .. }) if remove_torn_snapshots(path) => {}
            Err(other) => return Err(StoreError::sled("opening the database", other)),
        }
    }
}

/// Classifies `path` and refuses what is not ours; marks a new store
/// before sled creates anything in it (a crash before the catalog header
/// then leaves a marked, empty database, which the next open completes).
fn prepare_dir(path: &Path) -> Result<DirKind, StoreError> {
    let kind = marker::classify(path)?;
    match kind {
        DirKind::Foreign => {
            return Err(StoreError::NotAFilterStore {
                path: path.to_path_buf(),
            })
        }
        DirKind::Missing | DirKind::Empty => {
            std::fs::create_dir_all(path).map_err(|source| StoreError::Io {
                op: "creating the database directory",
                source,
            })?;
            marker::write_marker(path)?;
        }
        DirKind::Marked | DirKind::Legacy => {}
    }
    Ok(kind)
}

/// Opens the catalog, refusing a database with other trees or data and no
/// catalog, and writes the header of a new store or migrates an older one.
fn open_catalog(db: &engine::Db, path: &Path) -> Result<engine::Tree, StoreError> {
    let names = db.tree_names().map_err(sled_err("reading the database"))?;
    if !names.iter().any(|n| n == CATALOG_TREE.as_bytes()) {
        let foreign_trees = names.iter().any(|n| n != b"__sled__default".as_slice());
        let empty = db.is_empty().map_err(sled_err("reading the database"))?;
        if foreign_trees || !empty {
            return Err(StoreError::NotAFilterStore {
                path: path.to_path_buf(),
            });
        }
    }
    let catalog = db
        .open_tree(CATALOG_TREE)
        .map_err(sled_err("opening the catalog"))?;
    match catalog
        .get(HEADER_KEY)
        .map_err(sled_err("reading the catalog"))?
    {
        Some(v) => {
            migrate::upgrade(db, &catalog, StoreHeader::decode_any(&v)?)?;
        }
        None => {
            let header = StoreHeader {
                format_version: STORE_FORMAT_VERSION,
                next_table_id: 1,
            };
            catalog
                .insert(HEADER_KEY, header.encode()?)
                .map_err(sled_err("writing the catalog"))?;
            db.flush().map_err(sled_err("flushing the catalog"))?;
        }
    }
    Ok(catalog)
}

/// The directories of the stores open in this process (canonical paths), so
/// that a second open of one is told apart from another process's lock.
static OPEN_DIRS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn open_dirs() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    OPEN_DIRS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether a store of this process has directory `path` open.
fn open_here(path: &Path) -> bool {
    match path.canonicalize() {
        Ok(p) => open_dirs().contains(&p),
        Err(_) => false,
    }
}

/// Works around a recovery bug of sled 0.34.7 (its issue #1527): sled writes
/// a snapshot to `snap.<lsn>.generating`, fsyncs it and renames it to
/// `snap.<lsn>`, deleting older snapshots only after the rename; but at open
/// it considers the `.generating` file too, and a process killed while
/// writing one leaves a torn file that fails its CRC, so the database no
/// longer opens. Such a file is by construction an unfinished snapshot, and
/// the complete one it was to replace is still there: removing it lets sled
/// recover from that one and the log (`tests/store_regen_crash.rs` hits this
/// within a few hundred kills, and checks every durable key afterwards).
/// Called only after an open failed with a corruption error, i.e. after this
/// process acquired sled's lock, so no other process is writing the file.
/// Returns whether a file was removed (then the open is retried).
fn remove_torn_snapshots(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let mut removed = false;
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("snap.") && name.ends_with(".generating") {
            removed |= std::fs::remove_file(e.path()).is_ok();
        }
    }
    removed
}

fn now_unix_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl FilterStore {
    /// Opens (or creates) the store in directory `dir` with the default
    /// [`StoreConfig`].
    ///
    /// # Examples
    /// ```
    /// use filterstore::{FilterStore, StoreError};
    /// # fn main() -> Result<(), StoreError> {
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = FilterStore::open(dir.path())?;
    /// assert!(store.list_tables()?.is_empty()); // a new store has no table
    /// // One process, one open store per directory: share (clone) the handle.
    /// assert!(matches!(
    ///     FilterStore::open(dir.path()),
    ///     Err(StoreError::AlreadyOpen { .. })
    /// ));
    /// drop(store);
    /// assert_eq!(FilterStore::open(dir.path())?.list_tables()?.len(), 0);
    /// # Ok(()) }
    /// ```
    pub fn open(dir: impl AsRef<Path>) -> Result<FilterStore, StoreError> {
        FilterStore::open_with(dir, StoreConfig::default())
    }

    /// Opens (or creates) the store in directory `dir`. Tables are opened
    /// lazily, by [`open_table`](FilterStore::open_table).
    pub fn open_with(
        dir: impl AsRef<Path>,
        config: StoreConfig,
    ) -> Result<FilterStore, StoreError> {
        Self::open_in(dir.as_ref().to_path_buf(), config, None)
    }

    /// Opens a point-in-time **snapshot** of the store at `dir` for
    /// reading, without writing anything in `dir`: sled 0.34.7 writes on
    /// every open (a new snapshot file and log tail, even when nothing
    /// changes), so this copies the store's files to a private temporary
    /// directory under the store's lock (a store open in this process is
    /// [`StoreError::AlreadyOpen`], in another one [`StoreError::Locked`]),
    /// opens the copy, and removes it when the
    /// returned store is dropped. Costs one copy of the store's files.
    /// Writes to the returned store change only the copy and are lost.
    /// A directory that is not a filterstore database (no marker, see
    /// [`MARKER_FILE`]) is [`StoreError::NotAFilterStore`] and left
    /// byte-for-byte unchanged. The command line's `list`, `stats`, `query`
    /// and `export` use this.
    ///
    /// # Examples
    /// ```
    /// use filterstore::{FilterStore, TableSpec};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = tempfile::tempdir()?;
    /// let store = FilterStore::open(dir.path())?;
    /// store.create_table("t", TableSpec::new(1_000, 0.01))?.insert(b"k")?;
    /// store.flush()?;
    /// drop(store);
    /// let snapshot = FilterStore::open_snapshot(dir.path())?;
    /// assert!(snapshot.open_table("t")?.contains(b"k"));
    /// # Ok(()) }
    /// ```
    pub fn open_snapshot(dir: impl AsRef<Path>) -> Result<FilterStore, StoreError> {
        Self::open_snapshot_with(dir.as_ref(), StoreConfig::default())
    }

    fn open_snapshot_with(dir: &Path, config: StoreConfig) -> Result<FilterStore, StoreError> {
        match marker::classify(dir)? {
            DirKind::Marked | DirKind::Legacy => {}
            DirKind::Missing | DirKind::Empty | DirKind::Foreign => {
                return Err(StoreError::NotAFilterStore {
                    path: dir.to_path_buf(),
                })
            }
        }
        if open_here(dir) {
            return Err(StoreError::AlreadyOpen {
                path: dir.to_path_buf(),
            });
        }
        let scratch = marker::copy_store(dir, LOCK_WAIT)?;
        Self::open_in(scratch.path().to_path_buf(), config, Some(scratch))
    }

    fn open_in(
        path: PathBuf,
        config: StoreConfig,
        scratch: Option<marker::Scratch>,
    ) -> Result<FilterStore, StoreError> {
        let kind = prepare_dir(&path)?;
        let db = open_db(&path, &config)?;
        let catalog = open_catalog(&db, &path)?;
        if kind == DirKind::Legacy {
            marker::write_marker(&path)?;
        }
        let dir = path.canonicalize().unwrap_or(path);
        open_dirs().push(dir.clone());
        let store = FilterStore {
            inner: Arc::new(StoreInner {
                db,
                dir,
                catalog,
                config,
                catalog_lock: Mutex::new(()),
                regen_hook: Mutex::new(None),
                has_regen_hook: std::sync::atomic::AtomicBool::new(false),
                policy: Mutex::new(crate::filter::drift::DriftPolicy::default()),
                tables: Mutex::new(HashMap::new()),
                _scratch: scratch,
            }),
        };
        store.collect_garbage()?;
        Ok(store)
    }

    /// Drops data trees that no catalog record names: left by a crash between
    /// a table's catalog removal and the deletion of its data.
    ///
    /// A catalog record that does not decode names trees nobody can know, so
    /// then nothing is collected (collection waits for the next open after
    /// the damaged table is dropped): the store still opens, the other tables
    /// work, and the damaged one reports [`StoreError::Corrupt`] when opened.
    fn collect_garbage(&self) -> Result<(), StoreError> {
        let live: HashSet<String> = match self.table_records() {
            Ok(tables) => tables.iter().map(|m| m.tree_name(m.generation)).collect(),
            Err(StoreError::Corrupt { .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        let names = self
            .inner
            .db
            .tree_names()
            .map_err(sled_err("reading the database"))?;
        for name in names {
            let Ok(name) = std::str::from_utf8(&name) else {
                continue;
            };
            if name.starts_with(TABLE_TREE_PREFIX) && !live.contains(name) {
                self.inner
                    .db
                    .drop_tree(name)
                    .map_err(sled_err("removing data of a dropped table"))?;
            }
        }
        Ok(())
    }

    /// The configuration the store was opened with.
    pub fn config(&self) -> &StoreConfig {
        &self.inner.config
    }

    /// The store header, read under the catalog lock by the caller; `op` names
    /// the operation in the error if the header is missing.
    pub(crate) fn read_header(&self, op: &'static str) -> Result<StoreHeader, StoreError> {
        let bytes = self
            .inner
            .catalog
            .get(HEADER_KEY)
            .map_err(sled_err("reading the catalog"))?
            .ok_or_else(|| StoreError::storage(op, "the catalog header is missing".into()))?;
        StoreHeader::decode(&bytes)
    }

    fn read_meta(&self, name: &str) -> Result<Option<TableMeta>, StoreError> {
        let key = catalog::table_key(name);
        match self
            .inner
            .catalog
            .get(&key)
            .map_err(sled_err("reading the catalog"))?
        {
            Some(v) => Ok(Some(TableMeta::decode(&key, &v)?)),
            None => Ok(None),
        }
    }

    /// Creates a table sized by `spec`. Its catalog record is durable when
    /// this returns.
    ///
    /// # Examples
    /// ```
    /// use filterstore::{FilterStore, TableSpec};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = tempfile::tempdir()?;
    /// let store = FilterStore::open(dir.path())?;
    /// let t = store.create_table("orders", TableSpec::new(1_000_000, 0.01).seed(7))?;
    /// let p = t.params();
    /// // 9.6 bits per key at 1% (standard layout), a little more for the
    /// // blocked one (the default), in 512-bit blocks.
    /// let bits_per_key = p.m() as f64 / 1e6;
    /// assert!(bits_per_key > 9.5 && bits_per_key < 12.5, "{bits_per_key}");
    /// assert_eq!(p.m() % 512, 0);
    /// assert_eq!(p.hash().seed, 7);
    /// assert_eq!((t.generation(), t.expected_keys(), t.live_keys()), (1, 1_000_000, 0));
    /// assert!(store.create_table("orders", TableSpec::new(10, 0.01)).is_err()); // exists
    /// # Ok(()) }
    /// ```
    pub fn create_table(&self, name: &str, spec: TableSpec) -> Result<Table, StoreError> {
        validate_name(name)?;
        let _guard = self.inner.catalog_lock.lock();
        self.create_locked(name, spec)
    }

    /// [`create_table`](FilterStore::create_table) under the catalog lock,
    /// the name validated.
    fn create_locked(&self, name: &str, spec: TableSpec) -> Result<Table, StoreError> {
        let hash = match (spec.layout, spec.seed) {
            // XXH64 with the seed given, refused by `for_capacity` unless 0.
            (Layout::SplitBlock, seed) => HashSpec {
                seed: seed.unwrap_or(0),
                ..HashSpec::xxh64()
            },
            (_, Some(seed)) => HashSpec::xxh3(seed),
            (layout, None) => HashSpec::default_for(layout),
        };
        let params =
            FilterParams::for_capacity(spec.expected_keys, spec.target_fp, spec.layout, hash)?;
        if self.read_meta(name)?.is_some() {
            return Err(StoreError::TableExists(name.to_string()));
        }
        self.check_filter_memory(name, &params)?;
        let mut header = self.read_header("creating a table")?;
        let meta = TableMeta::new_table(
            header.next_table_id,
            name,
            &params,
            spec.expected_keys,
            spec.target_fp,
        );
        header.next_table_id += 1;
        let mut batch = engine::Batch::default();
        batch.insert(catalog::table_key(name), meta.encode()?);
        batch.insert(HEADER_KEY, header.encode()?);
        self.commit_new_table(batch, meta)
    }

    /// Refuses a new table whose bit filter exceeds the configured limit,
    /// before anything is allocated or written.
    pub(crate) fn check_filter_memory(
        &self,
        name: &str,
        params: &FilterParams,
    ) -> Result<(), StoreError> {
        match self.inner.config.filter_bytes_limit() {
            Some(limit) if params.bit_bytes() > limit => Err(StoreError::TooLarge {
                table: name.to_string(),
                bytes: params.bit_bytes(),
                limit,
            }),
            _ => Ok(()),
        }
    }

    /// Commits a new table's catalog record (with `batch`) and loads the
    /// table. If loading fails (its bit filter cannot be allocated), the
    /// record is removed again, durably: a failed create leaves no table.
    pub(crate) fn commit_new_table(
        &self,
        batch: engine::Batch,
        meta: TableMeta,
    ) -> Result<Table, StoreError> {
        let name = meta.name.clone();
        self.commit_catalog(batch)?;
        let loaded = self.load_table(&mut self.inner.tables.lock(), meta);
        if loaded.is_err() {
            let mut undo = engine::Batch::default();
            undo.remove(catalog::table_key(&name));
            // The error that matters is the load's; a failed undo leaves an
            // empty, valid table that the host can drop.
            let _ = self.commit_catalog(undo);
        }
        loaded
    }

    /// Applies `batch` to the catalog and makes it durable.
    fn commit_catalog(&self, batch: engine::Batch) -> Result<(), StoreError> {
        self.inner
            .catalog
            .apply_batch(batch)
            .map_err(sled_err("writing the catalog"))?;
        self.inner
            .db
            .flush()
            .map_err(sled_err("flushing the catalog"))?;
        Ok(())
    }

    /// Loads a table's in-memory state and registers it as open.
    fn load_table(
        &self,
        tables: &mut HashMap<String, Weak<TableInner>>,
        meta: TableMeta,
    ) -> Result<Table, StoreError> {
        let name = meta.name.clone();
        let inner = Arc::new(TableInner::load(&self.inner, meta)?);
        tables.insert(name, Arc::downgrade(&inner));
        Ok(Table::new(inner))
    }

    /// Opens an existing table. All handles of one table share one in-memory
    /// state; the first open derives its bit filter from disk.
    pub fn open_table(&self, name: &str) -> Result<Table, StoreError> {
        validate_name(name)?;
        let mut tables = self.inner.tables.lock();
        if let Some(inner) = tables.get(name).and_then(Weak::upgrade) {
            return Ok(Table::new(inner));
        }
        let meta = self
            .read_meta(name)?
            .ok_or_else(|| StoreError::NoSuchTable(name.to_string()))?;
        self.load_table(&mut tables, meta)
    }

    /// The names of all tables, sorted.
    pub fn list_tables(&self) -> Result<Vec<String>, StoreError> {
        Ok(self.table_records()?.into_iter().map(|m| m.name).collect())
    }

    /// Opens table `name`, creating it sized by `spec` if it does not exist
    /// (one step, under the catalog lock: two threads calling this at once
    /// get the same table). An existing table keeps its own parameters;
    /// `spec` is then ignored.
    ///
    /// # Examples
    /// ```
    /// use filterstore::{FilterStore, TableSpec};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = tempfile::tempdir()?;
    /// let store = FilterStore::open(dir.path())?;
    /// let a = store.open_or_create_table("users", TableSpec::new(1_000, 0.01))?;
    /// a.insert(b"alice")?;
    /// // The second call opens the same table: the spec is ignored.
    /// let b = store.open_or_create_table("users", TableSpec::new(5, 0.5))?;
    /// assert_eq!(b.expected_keys(), 1_000);
    /// assert!(b.contains(b"alice"));
    /// assert_eq!(store.list_tables()?, ["users"]);
    /// # Ok(()) }
    /// ```
    pub fn open_or_create_table(&self, name: &str, spec: TableSpec) -> Result<Table, StoreError> {
        validate_name(name)?;
        let _guard = self.inner.catalog_lock.lock();
        match self.open_table(name) {
            Err(StoreError::NoSuchTable(_)) => self.create_locked(name, spec),
            other => other,
        }
    }

    /// The catalog records of all tables, sorted by name.
    fn table_records(&self) -> Result<Vec<TableMeta>, StoreError> {
        self.inner
            .catalog
            .scan_prefix([TABLE_PREFIX])
            .map(|item| {
                let (k, v) = item.map_err(sled_err("reading the catalog"))?;
                TableMeta::decode(&k, &v)
            })
            .collect()
    }

    /// Drops a table and all of its data. Handles still open afterwards answer
    /// lookups from their last state and refuse writes with
    /// [`StoreError::TableDropped`]. Durable when this returns.
    pub fn drop_table(&self, name: &str) -> Result<(), StoreError> {
        validate_name(name)?;
        let _guard = self.inner.catalog_lock.lock();
        // A table whose catalog record is corrupt can still be dropped: its
        // data tree, which the record no longer tells, is collected at the
        // next open.
        let meta = match self.read_meta(name) {
            Ok(Some(meta)) => Some(meta),
            Ok(None) => return Err(StoreError::NoSuchTable(name.to_string())),
            Err(StoreError::Corrupt { .. }) => None,
            Err(e) => return Err(e),
        };
        // The catalog removal is the commit point: once it is durable the
        // table is gone, and its trees are garbage even if a crash stops the
        // deletion below (they are collected at the next open).
        let mut batch = engine::Batch::default();
        batch.remove(catalog::table_key(name));
        self.commit_catalog(batch)?;
        {
            let mut tables = self.inner.tables.lock();
            if let Some(inner) = tables.remove(name).and_then(|w| w.upgrade()) {
                inner.mark_dropped();
            }
        }
        if let Some(meta) = meta {
            self.inner
                .db
                .drop_tree(meta.tree_name(meta.generation))
                .map_err(sled_err("removing table data"))?;
        }
        self.inner.db.flush().map_err(sled_err("flushing"))?;
        Ok(())
    }

    /// Makes every write applied so far, to every table, durable.
    pub fn flush(&self) -> Result<(), StoreError> {
        let open: Vec<Arc<TableInner>> = self
            .inner
            .tables
            .lock()
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        for t in open {
            t.write_pending()?;
        }
        self.inner.db.flush().map_err(sled_err("flushing"))?;
        Ok(())
    }

    /// The base and differential-file trees of guard storage `name`
    /// ([`SledDiffStorage`](crate::SledDiffStorage)), in this database.
    pub(crate) fn guard_trees(
        &self,
        name: &str,
    ) -> Result<(engine::Tree, engine::Tree), StoreError> {
        validate_name(name)?;
        let open = |part: &str| {
            self.inner
                .db
                .open_tree(format!("{GUARD_TREE_PREFIX}{name}/{part}"))
                .map_err(sled_err("opening guard storage"))
        };
        Ok((open("base")?, open("diff")?))
    }

    /// Flushes the database (sled's flush: an fsync), without writing the
    /// tables' buffers: what guard storage needs after its own writes.
    pub(crate) fn flush_storage(&self) -> Result<(), StoreError> {
        self.inner.db.flush().map_err(sled_err("flushing"))?;
        Ok(())
    }

    /// Bytes the database occupies on disk (sled's estimate).
    pub fn size_on_disk(&self) -> Result<u64, StoreError> {
        self.inner
            .db
            .size_on_disk()
            .map_err(sled_err("measuring the database"))
    }
}
