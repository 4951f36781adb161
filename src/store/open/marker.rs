//! What makes a directory a filterstore database, and opening one without
//! writing to it.
//!
//! **The marker.** A store directory holds a file [`MARKER_FILE`] that
//! filterstore writes (and fsyncs, with the directory) when it creates the
//! store, after the catalog header is durable (`docs/FORMAT.md` §8). sled's
//! files alone do not make a store: another program's sled database is not
//! ours to open, since sled's open always writes. A store made before the
//! marker existed (the v1 fixture, say) is recognised without opening sled,
//! by the name of the catalog tree in sled's log (`db`:
//! [`sled_dir::is_unmarked_store`]), and gains the marker at its next
//! writing open. So does a directory that holds our catalog file and no
//! marker: what a migration from sled leaves when it is cut after sled's
//! files were removed and before the marker was written.
//!
//! A read-only open of a store of format 1 or 2 reads a private copy of it
//! ([`sled_dir::copy_store`]); one of format 3 or later reads the store's
//! own files and writes nothing.

use super::sled_dir;
use crate::store::disk::catalog_file::{CATALOG_FILE, MAGIC};
use crate::store::disk::lock::LOCK_FILE;
use crate::store::error::StoreError;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::Path;

/// The marker file's name in a store directory.
pub const MARKER_FILE: &str = "FILTERSTORE";

/// The marker file's contents.
const MARKER: &[u8] = b"filterstore database\nmarker 1\n";

/// What a directory is, decided without writing anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DirKind {
    /// Nothing there.
    Missing,
    /// An empty directory: a new store may be made in it.
    Empty,
    /// A store with its marker.
    Marked,
    /// A store without its marker: one made before the marker existed
    /// (sled's files with our catalog), or one whose migration from sled
    /// was cut after its catalog file became the switch and before the
    /// marker was written (our catalog file, sled's files perhaps gone). It
    /// gains the marker at its next writing open.
    Legacy,
    /// Anything else: not ours, never written.
    Foreign,
}

fn io(op: &'static str) -> impl Fn(std::io::Error) -> StoreError {
    move |source| StoreError::Io { op, source }
}

/// Classifies `path` (see [`DirKind`]).
pub(crate) fn classify(path: &Path) -> Result<DirKind, StoreError> {
    if !path.exists() {
        return Ok(DirKind::Missing);
    }
    if !path.is_dir() {
        return Err(StoreError::NotADirectory {
            path: path.to_path_buf(),
        });
    }
    if path.join(MARKER_FILE).is_file() {
        return Ok(DirKind::Marked);
    }
    if holds_at_most_a_lock(path)? {
        return Ok(DirKind::Empty);
    }
    if holds_our_catalog(path)? || sled_dir::is_unmarked_store(path)? {
        return Ok(DirKind::Legacy);
    }
    Ok(DirKind::Foreign)
}

/// Whether `path` is empty, or holds nothing but an empty lock file: what
/// a take-back of a new store ([`FilterStore::discard_if_new`]) stopped by
/// an error after the marker went leaves; a store may be made there.
///
/// [`FilterStore::discard_if_new`]: super::FilterStore::discard_if_new
fn holds_at_most_a_lock(path: &Path) -> Result<bool, StoreError> {
    let read = io("reading the database directory");
    let mut entries = fs::read_dir(path).map_err(&read)?;
    let Some(first) = entries.next() else {
        return Ok(true);
    };
    let first = first.map_err(&read)?;
    if first.file_name() != LOCK_FILE || entries.next().is_some() {
        return Ok(false);
    }
    let meta = fs::symlink_metadata(first.path()).map_err(&read)?;
    Ok(meta.is_file() && meta.len() == 0)
}

/// Whether `path` holds a catalog file that begins with its magic, `FSCF`
/// (`docs/FORMAT.md` § 8). Only a store writes one, and it writes it
/// only once the store's data is in its own files; a migration from sled
/// removes sled's files after that and writes the marker last, so a cut
/// between the two leaves this and no marker. Whether the catalog is whole
/// is the open's to find out; a damaged one is reported as such, not as
/// a foreign directory.
fn holds_our_catalog(path: &Path) -> Result<bool, StoreError> {
    let mut magic = [0u8; 4];
    let file = path.join(CATALOG_FILE);
    let mut f = match File::open(&file) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => {
            return Err(StoreError::Io {
                op: "reading the catalog",
                source: e,
            })
        }
    };
    match f.read_exact(&mut magic) {
        Ok(()) => Ok(magic == MAGIC),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(StoreError::Io {
            op: "reading the catalog",
            source: e,
        }),
    }
}

/// Writes the marker durably (the file, then the directory entry).
pub(crate) fn write_marker(dir: &Path) -> Result<(), StoreError> {
    let path = dir.join(MARKER_FILE);
    let mut f = File::create(&path).map_err(io("writing the store marker"))?;
    f.write_all(MARKER)
        .and_then(|()| crate::store::disk::io::sync_all(&f))
        .map_err(io("writing the store marker"))?;
    crate::store::disk::io::sync_dir(dir).map_err(io("syncing the database directory"))
}
