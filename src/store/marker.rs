//! What makes a directory a filterstore database, and opening one without
//! writing to it.
//!
//! **The marker.** A store directory holds a file [`MARKER_FILE`] that
//! filterstore writes (and fsyncs, with the directory) when it creates the
//! store, after the catalog header is durable (`docs/FORMAT.md` §8). sled's
//! files alone do not make a store: another program's sled database is not
//! ours to open, since sled's open always writes. A store made before the
//! marker existed (the v1 fixture, say) is recognised without opening sled,
//! by the name of the catalog tree in sled's log (`db`), and gains the
//! marker at its next writing open.
//!
//! **Read-only opens.** sled 0.34.7 writes on every open (a new snapshot and
//! log tail, even when nothing changes: measured with `list` on a fresh
//! store). So the commands that must not modify a store — `list`, `stats`,
//! `query`, `export` — open a copy: under an exclusive lock of the store's
//! `db` file (the lock sled itself takes, so no writer runs meanwhile), the
//! store's files are copied to a private temporary directory, which sled
//! then opens and which is removed afterwards. The cost is one copy of the
//! store's files (of the order of the `m/2` bytes that opening a table reads
//! anyway).

use super::error::StoreError;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The marker file's name in a store directory.
pub const MARKER_FILE: &str = "FILTERSTORE";

/// The marker file's contents.
const MARKER: &[u8] = b"filterstore database\nmarker 1\n";

/// The catalog tree's name, as sled logs it when the tree is created.
const CATALOG_NAME: &[u8] = b"filterstore/catalog";

/// What a directory is, decided without writing anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DirKind {
    /// Nothing there.
    Missing,
    /// An empty directory: a new store may be made in it.
    Empty,
    /// A store with its marker.
    Marked,
    /// A store made before the marker: sled's files with our catalog.
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
    let mut entries = fs::read_dir(path).map_err(io("reading the database directory"))?;
    if entries.next().is_none() {
        return Ok(DirKind::Empty);
    }
    let db = path.join("db");
    if path.join("conf").is_file() && db.is_file() && file_contains(&db, CATALOG_NAME)? {
        return Ok(DirKind::Legacy);
    }
    Ok(DirKind::Foreign)
}

/// Whether the file holds `needle` (read in 1 MiB steps).
fn file_contains(file: &Path, needle: &[u8]) -> Result<bool, StoreError> {
    let mut f = File::open(file).map_err(io("reading the database"))?;
    let mut buf = vec![0u8; (1 << 20) + needle.len()];
    let mut kept = 0;
    loop {
        let n = f
            .read(&mut buf[kept..])
            .map_err(io("reading the database"))?;
        if n == 0 {
            return Ok(false);
        }
        let filled = kept + n;
        if buf[..filled].windows(needle.len()).any(|w| w == needle) {
            return Ok(true);
        }
        kept = (needle.len() - 1).min(filled);
        buf.copy_within(filled - kept..filled, 0);
    }
}

/// Writes the marker durably (the file, then the directory entry).
pub(crate) fn write_marker(dir: &Path) -> Result<(), StoreError> {
    let path = dir.join(MARKER_FILE);
    let mut f = File::create(&path).map_err(io("writing the store marker"))?;
    f.write_all(MARKER)
        .and_then(|()| super::disk::io::sync_all(&f))
        .map_err(io("writing the store marker"))?;
    super::disk::io::sync_dir(dir).map_err(io("syncing the database directory"))
}

/// A private copy of a store's files, removed when dropped.
#[derive(Debug)]
pub(crate) struct Scratch {
    path: PathBuf,
}

impl Scratch {
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// Copies the store in `dir` to a new temporary directory, holding the
/// store's `db` lock meanwhile (a store in use elsewhere is
/// [`StoreError::Locked`]). Reads `dir`, never writes it.
pub(crate) fn copy_store(dir: &Path, wait: std::time::Duration) -> Result<Scratch, StoreError> {
    let db = File::open(dir.join("db")).map_err(io("reading the database"))?;
    lock(&db, dir, wait)?;
    let scratch = Scratch {
        path: scratch_path(),
    };
    private_dir(&scratch.path).map_err(io("making a temporary copy of the store"))?;
    copy_tree(dir, &scratch.path)?;
    super::blobkeep::copy_restored(dir, &scratch.path)
        .map_err(io("making a temporary copy of the store"))?;
    drop(db); // releases the lock
    Ok(scratch)
}

/// Takes the exclusive lock of `db`, retrying for up to `wait`: a store
/// dropped a moment ago in this process lets go of it a few milliseconds
/// late (as [`FilterStore::open`](super::FilterStore::open) also allows).
fn lock(db: &File, dir: &Path, wait: std::time::Duration) -> Result<(), StoreError> {
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        match db.try_lock() {
            Ok(()) => return Ok(()),
            Err(fs::TryLockError::WouldBlock) if start.elapsed() < wait => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(50));
            }
            Err(fs::TryLockError::WouldBlock) => {
                return Err(StoreError::Locked {
                    path: dir.to_path_buf(),
                })
            }
            Err(fs::TryLockError::Error(e)) => return Err(io("locking the database")(e)),
        }
    }
}

/// Creates `dir` readable by its owner only (the copy of a store is as
/// private as the store may be).
fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut b = fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(dir)
}

/// The prefix of a private copy's directory name: `<prefix><pid>-...`.
const SCRATCH_PREFIX: &str = "filterstore-ro-";

/// Removes the private copies left in the temporary directory by processes
/// that no longer run (a kill -9 skips the copy's removal). Best effort:
/// where it cannot tell whether the process runs (no `/proc`), it leaves the
/// copy.
pub(crate) fn remove_stale_scratch() {
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(SCRATCH_PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let alive = Path::new("/proc").join(pid.to_string()).exists();
        if pid != std::process::id() && !alive && Path::new("/proc/self").exists() {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

fn scratch_path() -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    std::env::temp_dir().join(format!(
        "{SCRATCH_PREFIX}{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Copies the regular files of `from` (and of its subdirectories, sled's
/// `blobs/`) into `to`.
fn copy_tree(from: &Path, to: &Path) -> Result<(), StoreError> {
    let copy = io("making a temporary copy of the store");
    for entry in fs::read_dir(from).map_err(&copy)? {
        let entry = entry.map_err(&copy)?;
        let kind = entry.file_type().map_err(&copy)?;
        let target = to.join(entry.file_name());
        if entry.file_name() == super::blobkeep::KEEP_DIR {
            continue; // second names of blobs: `copy_restored` takes what is needed
        }
        if kind.is_dir() {
            fs::create_dir(&target).map_err(&copy)?;
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            fs::copy(entry.path(), &target).map_err(&copy)?;
        }
    }
    Ok(())
}
