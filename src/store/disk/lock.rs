//! The lock of a store directory: a file `LOCK` held exclusively by the
//! process that has the store open for writing, shared by read-only opens,
//! so that no two processes write a store and no reader reads one that is
//! being written.

use crate::store::error::StoreError;
use std::fs::{File, TryLockError};
use std::path::Path;
use std::time::{Duration, Instant};

/// The lock file's name.
pub(crate) const LOCK_FILE: &str = "LOCK";

/// A held lock; released when dropped (or when the process ends, however
/// it ends).
#[derive(Debug)]
pub(crate) struct DirLock {
    _file: File,
}

/// Takes the lock of the store in `dir` (exclusive for writing, shared for
/// reading), retrying for up to `wait`; [`StoreError::Locked`] after that.
/// A reader needs the file to exist (a store that was never opened for
/// writing by this format has none: `Ok(None)`).
pub(crate) fn lock(
    dir: &Path,
    exclusive: bool,
    wait: Duration,
) -> Result<Option<DirLock>, StoreError> {
    let path = dir.join(LOCK_FILE);
    let io = |source| StoreError::Io {
        op: "locking the database",
        source,
    };
    let file = if exclusive {
        File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?
    } else {
        match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(e)),
        }
    };
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        let attempt = if exclusive {
            file.try_lock()
        } else {
            file.try_lock_shared()
        };
        match attempt {
            Ok(()) => return Ok(Some(DirLock { _file: file })),
            Err(TryLockError::WouldBlock) if start.elapsed() < wait => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Err(TryLockError::WouldBlock) => {
                return Err(StoreError::Locked {
                    path: dir.to_path_buf(),
                })
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
    }
}
