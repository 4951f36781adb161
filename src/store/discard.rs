//! Taking back a store that an open made for nothing: a command that
//! creates a store to make a table in it, and whose table is then refused
//! (invalid parameters, a filter file cut short), leaves the directory as it
//! found it ([`FilterStore::discard_if_new`]).

use super::disk::catalog_file::{CATALOG_FILE, NEW_FILE};
use super::disk::io::sync_dir;
use super::disk::lock::{lock, LOCK_FILE};
use super::disk::TABLES_DIR;
use super::error::StoreError;
use super::marker::MARKER_FILE;
use super::open::{FilterStore, Made};
use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

fn io(op: &'static str) -> impl Fn(std::io::Error) -> StoreError {
    move |source| StoreError::Io { op, source }
}

/// The names a store holds until a table is made in it or the guard's
/// storage is used.
const NEW_STORE_NAMES: [&str; 5] = [MARKER_FILE, LOCK_FILE, CATALOG_FILE, NEW_FILE, TABLES_DIR];

/// Whether `dir` holds nothing but what a new store holds, its table
/// directory empty.
fn holds_only_a_new_store(dir: &Path) -> Result<bool, StoreError> {
    let read = io("reading the database directory");
    for e in std::fs::read_dir(dir).map_err(&read)? {
        let name = e.map_err(&read)?.file_name();
        if !NEW_STORE_NAMES.iter().any(|n| name == *n) {
            return Ok(false);
        }
    }
    match std::fs::read_dir(dir.join(TABLES_DIR)) {
        Ok(mut entries) => Ok(entries.next().is_none()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(true),
        Err(e) => Err(read(e)),
    }
}

/// Removes `path`, a missing one being no error.
fn remove(path: &Path, dir: bool) -> std::io::Result<()> {
    let r = if dir {
        std::fs::remove_dir(path)
    } else {
        std::fs::remove_file(path)
    };
    match r {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

impl FilterStore {
    /// Closes this handle; if its open made the store (the directory was
    /// missing or empty) and the store holds nothing yet — no table, no
    /// guard storage, nothing but the files a new store has — removes
    /// them, and the directories the open created, and returns `true`: the
    /// directory is as it was before the open. Otherwise removes nothing
    /// and returns `false` (so also while another clone of this handle is
    /// alive). For a command that creates a store to make one table in it:
    /// when the table is refused, no empty store is left behind.
    ///
    /// The store is taken down in an order that a crash at any point leaves
    /// either a store that opens (empty) or no store: the table directory
    /// and the catalog first, synced, then the marker, synced, then the
    /// lock and the directories. An error (`StoreError::Io`) says it
    /// stopped part way: the directory holds a store that opens empty, or,
    /// once the marker went, nothing but the empty lock file `LOCK`, which
    /// an open takes for an empty directory (a store may be made there).
    pub fn discard_if_new(self) -> Result<bool, StoreError> {
        let Ok(inner) = Arc::try_unwrap(self.inner) else {
            return Ok(false);
        };
        let dir = inner.shared.dir.clone();
        if inner.made == Made::Nothing
            || !inner.shared.catalog.lock().readable().0.is_empty()
            || !holds_only_a_new_store(&dir)?
        {
            return Ok(false);
        }
        let op = io("removing a store made for a refused table");
        remove_store_files(&dir).map_err(&op)?;
        let made = inner.made.clone();
        drop(inner); // releases the lock
        remove_lock_and_dirs(&dir, &made).map_err(&op)?;
        Ok(true)
    }
}

/// Takes back what a writing open that failed had made (`made`), best
/// effort, under the directory's lock (a store another process opened
/// meanwhile is left alone): a failed open leaves the directory as it
/// found it, not a marked directory that a later open takes for a store.
pub(crate) fn undo_failed_open(dir: &Path, made: &Made) {
    if *made == Made::Nothing || !matches!(holds_only_a_new_store(dir), Ok(true)) {
        return;
    }
    let Ok(Some(lock)) = lock(dir, true, std::time::Duration::ZERO) else {
        return;
    };
    if remove_store_files(dir).is_ok() {
        drop(lock);
        let _ = remove_lock_and_dirs(dir, made);
    }
}

/// The first half of a take-back, under the lock: the table directory and
/// the catalog, synced, then the marker, synced. A crash or an error in it
/// leaves a store that opens (empty), or a directory holding nothing but
/// the lock file, which an open takes for an empty one.
fn remove_store_files(dir: &Path) -> std::io::Result<()> {
    remove(&dir.join(TABLES_DIR), true)?;
    remove(&dir.join(NEW_FILE), false)?;
    remove(&dir.join(CATALOG_FILE), false)?;
    sync_dir(dir)?;
    remove(&dir.join(MARKER_FILE), false)?;
    sync_dir(dir)
}

/// The second half, the lock released: the lock file, and the directories
/// the open made.
fn remove_lock_and_dirs(dir: &Path, made: &Made) -> std::io::Result<()> {
    remove(&dir.join(LOCK_FILE), false)?;
    if let Made::Dirs(top) = made {
        remove_dirs(dir, top)?;
    }
    Ok(())
}

/// Removes `dir`, then its parents up to `top` while they are empty (a
/// parent that something else was put in since is left, with what is above
/// it); then syncs the directory that holds the last one removed.
fn remove_dirs(dir: &Path, top: &Path) -> std::io::Result<()> {
    remove(dir, true)?;
    let mut last = dir;
    while last != top {
        match last.parent() {
            Some(p) if std::fs::remove_dir(p).is_ok() => last = p,
            _ => break,
        }
    }
    let parent = last
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    sync_dir(parent)
}
