//! Opening sled: retrying for a lock a dropped database still holds, and
//! what sled 0.34.7 leaves that would stop it from opening (a torn snapshot,
//! a torn `conf`).

use super::Db;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long [`open_with_retry`] waits for sled's lock held by a database
/// that was just dropped in this process.
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// Why [`open_with_retry`] did not open sled.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// Another handle (or process) holds sled's lock, past [`LOCK_WAIT`].
    Locked,
    /// sled's own error.
    Sled(sled::Error),
}

/// Opens sled in `path` with a cache of `cache_capacity` bytes, each write
/// call given `io_timeout` (see [`Db::open`]). sled releases its
/// directory lock only when the last of its background threads and
/// epoch-deferred destructors lets go of the file, a few milliseconds after
/// the `Db` is dropped; a reopen in the same process therefore retries for
/// up to [`LOCK_WAIT`] before reporting [`OpenError::Locked`].
///
/// `segment_size` must be the one the database was created with (sled
/// refuses another): [`LEGACY_SEGMENT`](super::LEGACY_SEGMENT) for the
/// database of a store of format 1 or 2,
/// [`GUARD_SEGMENT`](super::GUARD_SEGMENT) for the guard's.
pub(crate) fn open_with_retry(
    path: &Path,
    cache_capacity: u64,
    io_timeout: Duration,
    segment_size: usize,
) -> Result<Db, OpenError> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        let attempt = Db::open(
            path,
            sled::Config::new()
                .cache_capacity(cache_capacity)
                .segment_size(segment_size)
                .mode(sled::Mode::HighThroughput),
            io_timeout,
        );
        match attempt {
            Ok(db) => return Ok(db),
            Err(sled::Error::Io(io)) if io.to_string().contains("could not acquire lock") => {
                if start.elapsed() >= LOCK_WAIT {
                    return Err(OpenError::Locked);
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Err(sled::Error::Corruption { .. }) if remove_torn_snapshots(path) => {}
            Err(other) => return Err(OpenError::Sled(other)),
        }
    }
}

/// Works around a recovery bug of sled 0.34.7 (its issue #1527): sled writes
/// a snapshot to `snap.<lsn>.generating`, fsyncs it and renames it to
/// `snap.<lsn>`, deleting older snapshots only after the rename; but at open
/// it considers the `.generating` file too, and a process killed while
/// writing one leaves a torn file that fails its CRC, so the database no
/// longer opens. Such a file is by construction an unfinished snapshot, and
/// the complete one it was to replace is still there: removing it lets sled
/// recover from that one and the log. Called only after an open failed with
/// a corruption error, i.e. after this process acquired sled's lock, so no
/// other process is writing the file. Returns whether a file was removed
/// (then the open is retried).
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

/// Removes a `conf` that fails its CRC (module docs, "Power loss").
pub(super) fn repair_conf(dir: &Path) {
    let conf = dir.join("conf");
    if let Ok(b) = std::fs::read(&conf) {
        if b.len() > 8 {
            let (text, crc) = b.split_at(b.len() - 4);
            if crc32fast::hash(text).to_le_bytes() != crc {
                let _ = std::fs::remove_file(&conf);
            }
        }
    }
}

pub(super) fn sync_conf(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir.join("conf"))?.sync_all()?;
    std::fs::File::open(dir)?.sync_all()
}
