//! The store handle ([`FilterStore`]), what its tables share
//! ([`StoreInner`]), and opening a store directory: a new one, one of
//! this format, one of an older format (migrated), or a read-only one.

mod discard;
mod marker;
mod migrate;
pub(crate) mod sled_dir;
mod take_back;

pub use marker::MARKER_FILE;

use crate::sled_engine as engine;
use crate::store::budget;
use crate::store::catalog::{Catalog, STORE_FORMAT_VERSION};
use crate::store::config::StoreConfig;
use crate::store::disk::lock::{self, DirLock};
use crate::store::disk::{
    catalog_file, catalog_log, parse_pack_file, parse_table_file, TABLES_DIR,
};
use crate::store::error::{at_open, StoreError};
use crate::store::guard_db::GuardDb;
use crate::store::shared::Shared;
use crate::store::table::TableInner;
use marker::DirKind;
use migrate::upgrade_legacy;
use parking_lot::Mutex;
use sled_dir::{has_sled, Scratch};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use take_back::Made;

/// How long an open waits for the directory's lock: a store dropped a
/// moment ago in this process, or a process being reaped, lets go of it
/// promptly, but not instantly.
pub(crate) const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

pub(crate) struct StoreInner {
    /// What the tables share: directory, configuration, catalog, policy,
    /// health callback, failure state.
    pub(crate) shared: Arc<Shared>,
    /// The directory, canonical, as registered in [`OPEN_DIRS`].
    canonical: PathBuf,
    /// Open tables: one in-memory state per table, shared by all handles.
    pub(crate) tables: Mutex<HashMap<String, Weak<TableInner>>>,
    /// sled, for the guard's storage: opened on first use.
    guard_db: GuardDb,
    /// Open guard storages, one state per name shared by every handle
    /// ([`FilterStore::guard_storage`]).
    guard_storages: Mutex<HashMap<String, Weak<dyn std::any::Any + Send + Sync>>>,
    /// The directory's lock.
    _lock: Option<DirLock>,
    /// The private copy a read-only open of an older format works on,
    /// removed last.
    _scratch: Option<Scratch>,
    /// What this handle's open made in the file system
    /// ([`FilterStore::discard_if_new`]).
    pub(crate) made: Made,
}

impl StoreInner {
    pub(crate) fn config(&self) -> &StoreConfig {
        &self.shared.config
    }
}

/// A store of per-table filters in one directory.
///
/// `Send + Sync` and cheap to clone. One process at a time may open a
/// directory for writing (it holds the directory's lock).
///
/// # Where its methods live
/// * `store/open/mod.rs`: opening ([`open`](FilterStore::open),
///   [`open_with`](FilterStore::open_with),
///   [`open_snapshot`](FilterStore::open_snapshot),
///   [`open_snapshot_with`](FilterStore::open_snapshot_with)),
///   [`config`](FilterStore::config),
///   [`is_read_only`](FilterStore::is_read_only),
///   [`size_on_disk`](FilterStore::size_on_disk);
/// * `store/open/discard.rs`: [`discard_if_new`](FilterStore::discard_if_new);
/// * `store/tables.rs`: [`create_table`](FilterStore::create_table),
///   [`open_table`](FilterStore::open_table),
///   [`open_or_create_table`](FilterStore::open_or_create_table),
///   [`list_tables`](FilterStore::list_tables),
///   [`drop_table`](FilterStore::drop_table), [`flush`](FilterStore::flush);
/// * `store/import/mod.rs`: [`import`](FilterStore::import),
///   [`import_from`](FilterStore::import_from),
///   [`import_counting`](FilterStore::import_counting);
/// * `store/regen/health.rs`:
///   [`on_needs_regeneration`](FilterStore::on_needs_regeneration),
///   [`set_drift_policy`](FilterStore::set_drift_policy),
///   [`check_health`](FilterStore::check_health).
#[derive(Clone)]
pub struct FilterStore {
    pub(crate) inner: Arc<StoreInner>,
}

impl Drop for StoreInner {
    fn drop(&mut self) {
        let mut open = open_dirs();
        if let Some(i) = open.iter().position(|d| *d == self.canonical) {
            open.swap_remove(i);
        }
    }
}

impl std::fmt::Debug for FilterStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilterStore")
            .field("config", &self.inner.shared.config)
            .field("read_only", &self.inner.shared.read_only)
            .finish()
    }
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
pub(crate) fn open_here(path: &Path) -> bool {
    match path.canonicalize() {
        Ok(p) => open_dirs().contains(&p),
        Err(_) => false,
    }
}

fn io(op: &'static str) -> impl Fn(std::io::Error) -> StoreError {
    move |source| StoreError::Io { op, source }
}

/// How a store directory is opened.
enum Access {
    /// For reading and writing, under the exclusive lock; what the open
    /// made before it.
    Write(Made),
    /// For reading, under the shared lock, writing nothing in the directory.
    Read,
    /// A private copy of an older format's store, migrated and then read.
    Scratch(Scratch),
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
    /// lazily, by [`open_table`](FilterStore::open_table). A store of an
    /// older format is migrated first (`migrations/`). A new store is
    /// durable when this returns: its directory (and every parent this
    /// creates) has a durable name, and its marker and catalog are synced.
    /// An open that was making a new store and fails (a full disk, a failed
    /// sync) takes back what it made, so the directory is as it found it:
    /// a missing one missing, an empty one empty.
    pub fn open_with(
        dir: impl AsRef<Path>,
        config: StoreConfig,
    ) -> Result<FilterStore, StoreError> {
        let path = dir.as_ref().to_path_buf();
        if open_here(&path) {
            return Err(StoreError::AlreadyOpen { path });
        }
        let kind = marker::classify(&path)?;
        let made = match kind {
            DirKind::Foreign => return Err(StoreError::NotAFilterStore { path }),
            DirKind::Missing => Made::Dirs(topmost_missing(&path)),
            DirKind::Empty => Made::Store,
            DirKind::Marked | DirKind::Legacy => Made::Nothing,
        };
        let legacy = kind == DirKind::Legacy;
        let opened = if made == Made::Nothing {
            Self::open_in(path.clone(), config, Access::Write(made.clone()), legacy)
        } else {
            // The directory's name, durable in its parent before the store
            // in it says it exists.
            super::disk::io::create_dir_durably(&path)
                .map_err(io("creating the database directory"))
                .and_then(|()| marker::write_marker(&path))
                .and_then(|()| {
                    Self::open_in(path.clone(), config, Access::Write(made.clone()), legacy)
                })
        };
        if opened.is_err() {
            // Nothing of a store that failed to open is left behind.
            take_back::undo_failed_open(&path, &made);
        }
        opened
    }

    /// Opens the store at `dir` **read-only**, writing nothing in `dir`:
    /// its tables answer lookups, statistics and exports from their files
    /// as they are (an unfolded log is applied in memory), and every write
    /// is refused with [`StoreError::ReadOnly`]. It holds the directory's
    /// lock shared, so a store open for writing elsewhere is
    /// [`StoreError::Locked`] (in this process, [`StoreError::AlreadyOpen`]).
    /// A directory that is not a filterstore database (no marker, see
    /// [`MARKER_FILE`]) is
    /// [`StoreError::NotAFilterStore`] and left byte-for-byte unchanged.
    ///
    /// A store of format 1 or 2 cannot be read without migrating it, which
    /// writes: it is copied to a private directory (mode 0700, in the
    /// system's temporary directory, refused if the copy would not fit),
    /// migrated there and read; the copy is removed when the store is
    /// dropped, and a copy left by a killed process is removed by the next
    /// read-only open of any store. The command line's `list`, `stats`,
    /// `query` and `export` use this.
    ///
    /// # Examples
    /// ```
    /// use filterstore::{FilterStore, StoreError, TableSpec};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = tempfile::tempdir()?;
    /// let store = FilterStore::open(dir.path())?;
    /// store.create_table("t", TableSpec::new(1_000, 0.01))?.insert(b"k")?;
    /// store.flush()?;
    /// drop(store);
    /// let snapshot = FilterStore::open_snapshot(dir.path())?;
    /// let t = snapshot.open_table("t")?;
    /// assert!(t.contains(b"k"));
    /// assert!(matches!(t.insert(b"x"), Err(StoreError::ReadOnly { .. })));
    /// # Ok(()) }
    /// ```
    pub fn open_snapshot(dir: impl AsRef<Path>) -> Result<FilterStore, StoreError> {
        FilterStore::open_snapshot_with(dir, StoreConfig::default())
    }

    /// [`open_snapshot`](FilterStore::open_snapshot) with a configuration
    /// (its [`memory_budget`](StoreConfig::memory_budget), say).
    pub fn open_snapshot_with(
        dir: impl AsRef<Path>,
        config: StoreConfig,
    ) -> Result<FilterStore, StoreError> {
        let dir = dir.as_ref();
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
        sled_dir::remove_stale_scratch();
        if catalog_file::read(dir)
            .map_err(io("reading the catalog"))?
            .is_some()
        {
            return Self::open_in(dir.to_path_buf(), config, Access::Read, false);
        }
        let scratch = sled_dir::copy_store(dir, LOCK_WAIT)?;
        let path = scratch.path().to_path_buf();
        Self::open_in(path, config, Access::Scratch(scratch), false)
    }

    fn open_in(
        path: PathBuf,
        config: StoreConfig,
        access: Access,
        legacy_marker: bool,
    ) -> Result<FilterStore, StoreError> {
        let write = !matches!(access, Access::Read);
        let made = match &access {
            Access::Write(made) => made.clone(),
            _ => Made::Nothing,
        };
        let dir_lock = lock::lock(&path, write, LOCK_WAIT)?;
        if let Some(b) = config.memory_budget {
            budget::set(Some(b));
        }
        let mut catalog = match Catalog::load(&path)? {
            Some(c) if write => {
                sync_names(&path)?;
                c
            }
            Some(c) => c,
            None if !write => {
                return Err(StoreError::NotAFilterStore { path });
            }
            None if has_sled(&path) => upgrade_legacy(&path, &config)?,
            None => create_new(&path)?,
        };
        if write {
            migrate::from_format_3(&path, &config, &mut catalog)?;
            catalog.open_log().map_err(at_open)?;
        }
        check_format(catalog.header().format_version, write)?;
        if write {
            tidy(&path, &catalog, legacy_marker)?;
        }
        let (read_only, scratch) = match access {
            Access::Write(_) => (false, None),
            Access::Read => (true, None),
            Access::Scratch(s) => (true, Some(s)),
        };
        let canonical = path.canonicalize().unwrap_or_else(|_| path.clone());
        open_dirs().push(canonical.clone());
        Ok(FilterStore {
            inner: Arc::new(StoreInner {
                shared: Arc::new(Shared::new(path, config, read_only, catalog)),
                canonical,
                tables: Mutex::new(HashMap::new()),
                guard_db: GuardDb::default(),
                guard_storages: Mutex::new(HashMap::new()),
                _lock: dir_lock,
                _scratch: scratch,
                made,
            }),
        })
    }

    /// The configuration the store was opened with.
    pub fn config(&self) -> &StoreConfig {
        &self.inner.shared.config
    }

    /// Whether the store was opened read-only
    /// ([`open_snapshot`](FilterStore::open_snapshot)).
    pub fn is_read_only(&self) -> bool {
        self.inner.shared.read_only
    }

    /// The base and differential-file trees of guard storage `name`
    /// ([`SledDiffStorage`](crate::SledDiffStorage)), in the guard's
    /// database ([`GuardDb`]).
    pub(crate) fn guard_trees(
        &self,
        name: &str,
    ) -> Result<(engine::Tree, engine::Tree), StoreError> {
        self.inner.guard_db.trees(&self.inner.shared, name)
    }

    /// The state of guard storage `name` shared by every handle of it in
    /// this process: the one open now, or `make`'s (given the store's
    /// directory), which is kept while a handle holds it. Two states of one
    /// storage would each hold an index of its differential file, and each
    /// miss the other's changes.
    pub(crate) fn guard_storage<T: std::any::Any + Send + Sync>(
        &self,
        name: &str,
        make: impl FnOnce(&Path) -> Result<Arc<T>, StoreError>,
    ) -> Result<Arc<T>, StoreError> {
        let mut open = self.inner.guard_storages.lock();
        if let Some(found) = open.get(name).and_then(Weak::upgrade) {
            if let Ok(state) = found.downcast::<T>() {
                return Ok(state);
            }
        }
        open.retain(|_, w| w.strong_count() > 0);
        let state = make(&self.inner.shared.dir)?;
        let erased: Arc<dyn std::any::Any + Send + Sync> = state.clone();
        open.insert(name.to_string(), Arc::downgrade(&erased));
        Ok(state)
    }

    /// Makes guard storage's writes durable; nothing to do if the guard's
    /// database was never opened.
    pub(crate) fn flush_storage(&self) -> Result<(), StoreError> {
        self.inner.guard_db.flush()
    }

    /// Bytes the store occupies on disk: its marker, lock and catalog, its
    /// table files and the guard's sled database (`guard/`).
    pub fn size_on_disk(&self) -> Result<u64, StoreError> {
        fn walk(dir: &Path) -> std::io::Result<u64> {
            let mut total = 0;
            for e in std::fs::read_dir(dir)? {
                let e = e?;
                let kind = e.file_type()?;
                if kind.is_dir() {
                    total += walk(&e.path())?;
                } else if kind.is_file() {
                    total += e.metadata()?.len();
                }
            }
            Ok(total)
        }
        walk(&self.inner.shared.dir).map_err(io("measuring the database"))
    }
}

/// Makes the names a writing open of an existing store read durable, before
/// it changes anything: the store directory's (the catalog, the marker,
/// `tables`, `guard`) and the table directory's (the table files). In the
/// same boot, the last commit may have failed at its directory sync
/// (`StoreError::OutcomeUnknown`): the running system shows the new catalog,
/// which a power cut may still take back. Without this sync the garbage
/// collection below would delete files that the old catalog names, and
/// writes would go to tables and generations that a cut may take away with
/// the new catalog. The catalog's bytes need no sync: a commit syncs the new
/// file before its rename (`disk::catalog_file::write`), and writes no
/// other way. A failure refuses the open.
fn sync_names(path: &Path) -> Result<(), StoreError> {
    use crate::store::disk::io::sync_dir;
    let op = "syncing the store's directories at open";
    sync_dir(path).map_err(io(op))?;
    let tables = path.join(TABLES_DIR);
    if tables.is_dir() {
        sync_dir(&tables).map_err(io(op))?;
    }
    Ok(())
}

/// Writes the catalog of a new store (after its table directory).
fn create_new(path: &Path) -> Result<Catalog, StoreError> {
    std::fs::create_dir_all(path.join(TABLES_DIR)).map_err(io("creating the table directory"))?;
    super::disk::io::sync_dir(path).map_err(io("syncing the database directory"))?;
    Catalog::create(path).map_err(at_open)
}

/// Deletes table files that no catalog record names: left by a crash between
/// a table's catalog removal (or a failed create, or a regeneration's
/// commit) and the deletion of its files. While a record is damaged the
/// files it names cannot be known, so nothing is collected (collection waits
/// for the next open after the damaged table is dropped).
fn collect_garbage(path: &Path, catalog: &Catalog) -> Result<(), StoreError> {
    let (records, damaged) = catalog.readable();
    if damaged {
        return Ok(());
    }
    let live: HashSet<(u64, u64)> = records.iter().map(|m| (m.id, m.generation)).collect();
    let packs = catalog.packs();
    let dir = path.join(TABLES_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io("reading the table directory")(e)),
    };
    for e in entries {
        let e = e.map_err(io("reading the table directory"))?;
        let name = e.file_name();
        let garbage = match (
            name.to_str().and_then(parse_table_file),
            name.to_str().and_then(parse_pack_file),
        ) {
            (Some(owner), _) => !live.contains(&owner),
            (None, Some(pack)) => !packs.contains_key(&pack),
            (None, None) => false,
        };
        if garbage {
            std::fs::remove_file(e.path()).map_err(io("removing files of a dropped table"))?;
        }
    }
    Ok(())
}

/// The topmost of `path` and its parents that does not exist (`path` itself
/// when its parent exists).
fn topmost_missing(path: &Path) -> PathBuf {
    let mut top = path;
    while let Some(p) = top.parent().filter(|p| !p.as_os_str().is_empty()) {
        if p.exists() {
            break;
        }
        top = p;
    }
    top.to_path_buf()
}

/// What a store opened for writing leaves behind it: the marker of a store
/// migrated from sled (`legacy_marker`), an unfinished catalog, the
/// database of the format before (a crash after the migration's switch
/// leaves it), and the files no table of `catalog` names.
fn tidy(path: &Path, catalog: &Catalog, legacy_marker: bool) -> Result<(), StoreError> {
    if legacy_marker {
        marker::write_marker(path)?;
    }
    catalog_file::remove_leftover(path).map_err(io("removing an unfinished catalog"))?;
    catalog_log::remove_leftover(path).map_err(io("removing an unfinished catalog log"))?;
    if has_sled(path) {
        sled_dir::remove_legacy_sled(path)
            .map_err(io("removing the database of the old format"))?;
    }
    collect_garbage(path, catalog)
}

/// Whether this build opens a store of format `found` (after the
/// migrations of a writing open): the current one, or, read-only, 3 to 7
/// as they are (format 3's logs with the format-3 reader; nothing is
/// written). Else a newer format is refused, an older one has no migration.
fn check_format(found: u32, write: bool) -> Result<(), StoreError> {
    if found == STORE_FORMAT_VERSION || (!write && (3..=7).contains(&found)) {
        return Ok(());
    }
    Err(if found > STORE_FORMAT_VERSION {
        StoreError::UnsupportedFormat {
            found,
            supported: STORE_FORMAT_VERSION,
        }
    } else {
        StoreError::NoMigration {
            from: found,
            to: STORE_FORMAT_VERSION,
        }
    })
}
