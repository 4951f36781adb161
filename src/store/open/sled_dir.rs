//! A store directory of format 1 or 2 (sled's files in the directory
//! itself): recognising one without opening sled, removing its sled files
//! once migrated, and the private copy a read-only open reads.
//!
//! **Read-only opens.** sled 0.34.7 writes on every open (a new snapshot and
//! log tail, even when nothing changes: measured with `list` on a fresh
//! store). So the commands that must not modify a store — `list`, `stats`,
//! `query`, `export` — open a copy of a store of format 1 or 2: under an
//! exclusive lock of the store's `db` file (the lock sled itself takes, so
//! no writer runs meanwhile), the store's files are copied to a private
//! temporary directory, which is migrated there and read, and removed
//! afterwards. The cost is one copy of the store's files (of the order of
//! the `m/2` bytes that opening a table reads anyway).

use crate::store::error::StoreError;
use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The catalog tree's name, as sled logs it when the tree is created.
const CATALOG_NAME: &[u8] = b"filterstore/catalog";

fn io(op: &'static str) -> impl Fn(std::io::Error) -> StoreError {
    move |source| StoreError::Io { op, source }
}

/// Whether `dir` itself holds sled's files: a store of format 1 or 2 (the
/// guard's database of formats 3 and 4 is in `guard/`).
pub(crate) fn has_sled(dir: &Path) -> bool {
    dir.join("db").is_file() || dir.join("conf").is_file()
}

/// Removes the sled database of a store of format 1 or 2 from `dir` (its
/// files `blobs.kept/`, `blobs/`, `snap.*`, `conf` and, last, `db`): garbage
/// once the catalog file exists.
pub(crate) fn remove_legacy_sled(dir: &Path) -> std::io::Result<()> {
    let gone = |r: std::io::Result<()>| match r {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    };
    gone(std::fs::remove_dir_all(dir.join("blobs.kept")))?;
    gone(std::fs::remove_dir_all(dir.join("blobs")))?;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if e.file_name().to_string_lossy().starts_with("snap.") {
            gone(std::fs::remove_file(e.path()))?;
        }
    }
    gone(std::fs::remove_file(dir.join("conf")))?;
    gone(std::fs::remove_file(dir.join("db")))
}

/// Whether `path` (a directory without the marker) holds a store made
/// before the marker: sled's files, whose log names our catalog tree.
/// Reads, never writes (sled's open would).
pub(crate) fn is_unmarked_store(path: &Path) -> Result<bool, StoreError> {
    let db = path.join("db");
    Ok(path.join("conf").is_file() && db.is_file() && file_contains(&db, CATALOG_NAME)?)
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
    crate::sled_engine::blobkeep::copy_restored(dir, &scratch.path)
        .map_err(io("making a temporary copy of the store"))?;
    drop(db); // releases the lock
    Ok(scratch)
}

/// Takes the exclusive lock of `db`, retrying for up to `wait`: a store
/// dropped a moment ago in this process lets go of it a few milliseconds
/// late (as [`FilterStore::open`](crate::FilterStore::open) also allows).
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
        if entry.file_name() == crate::sled_engine::blobkeep::KEEP_DIR {
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
