//! Taking back a store that an open made for nothing, so that the directory
//! is as the open found it: after the open itself failed
//! ([`undo_failed_open`]), or when the table a command made the store for
//! was refused ([`FilterStore::discard_if_new`](super::FilterStore::discard_if_new),
//! in `discard.rs`).

use super::marker::MARKER_FILE;
use crate::store::disk::catalog_file::{CATALOG_FILE, NEW_FILE};
use crate::store::disk::catalog_log::{LOG_FILE, NEW_LOG_FILE};
use crate::store::disk::io::sync_dir;
use crate::store::disk::lock::{lock, LOCK_FILE};
use crate::store::disk::TABLES_DIR;
use crate::store::error::StoreError;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

pub(super) fn io(op: &'static str) -> impl Fn(std::io::Error) -> StoreError {
    move |source| StoreError::Io { op, source }
}

/// What a writing open made, so that a store made for a table that was then
/// refused can be taken back
/// ([`FilterStore::discard_if_new`](super::FilterStore::discard_if_new)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Made {
    /// Nothing: the store existed.
    Nothing,
    /// A store in a directory that existed, empty.
    Store,
    /// A store in a directory that did not exist: the open created it and
    /// every missing parent up to this one, the topmost.
    Dirs(PathBuf),
}

/// The names a store holds until a table is made in it or the guard's
/// storage is used.
const NEW_STORE_NAMES: [&str; 7] = [
    MARKER_FILE,
    LOCK_FILE,
    CATALOG_FILE,
    NEW_FILE,
    LOG_FILE,
    NEW_LOG_FILE,
    TABLES_DIR,
];

/// Whether `dir` holds nothing but what a new store holds, its table
/// directory empty.
pub(super) fn holds_only_a_new_store(dir: &Path) -> Result<bool, StoreError> {
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
pub(super) fn remove_store_files(dir: &Path) -> std::io::Result<()> {
    remove(&dir.join(TABLES_DIR), true)?;
    remove(&dir.join(NEW_FILE), false)?;
    remove(&dir.join(NEW_LOG_FILE), false)?;
    remove(&dir.join(LOG_FILE), false)?;
    remove(&dir.join(CATALOG_FILE), false)?;
    sync_dir(dir)?;
    remove(&dir.join(MARKER_FILE), false)?;
    sync_dir(dir)
}

/// The second half, the lock released: the lock file, and the directories
/// the open made.
pub(super) fn remove_lock_and_dirs(dir: &Path, made: &Made) -> std::io::Result<()> {
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
