//! What every table of a store shares below the store itself: its
//! directory, configuration, whether it may write, and whether an earlier
//! failure stopped its writes.

use super::config::StoreConfig;
use super::error::StoreError;
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// The store-wide state below the catalog (see module docs).
#[derive(Debug)]
pub(crate) struct Shared {
    /// The store directory.
    pub(crate) dir: PathBuf,
    pub(crate) config: StoreConfig,
    /// Opened read-only: every write is refused.
    pub(crate) read_only: bool,
    failed: AtomicBool,
    reason: Mutex<String>,
}

impl Shared {
    pub(crate) fn new(dir: PathBuf, config: StoreConfig, read_only: bool) -> Shared {
        Shared {
            dir,
            config,
            read_only,
            failed: AtomicBool::new(false),
            reason: Mutex::new(String::new()),
        }
    }

    /// Whether a write may start: not read-only, not stopped.
    pub(crate) fn check_writable(&self) -> Result<(), StoreError> {
        if self.read_only {
            return Err(StoreError::ReadOnly {
                path: self.dir.clone(),
            });
        }
        if self.failed.load(Ordering::Acquire) {
            return Err(StoreError::Degraded {
                path: self.dir.clone(),
                reason: self.reason.lock().clone(),
            });
        }
        Ok(())
    }

    /// Stops every later write: after a failed sync the kernel may have
    /// dropped pages it could not write, and after a commit that failed
    /// half-way the disk's state is unknown, so nothing more is written
    /// until the store is reopened (recovery then reads what is durable).
    pub(crate) fn fail(&self, reason: String) {
        let mut r = self.reason.lock();
        if !self.failed.swap(true, Ordering::AcqRel) {
            *r = reason;
        }
    }

    /// `e`, after stopping the store's writes (see [`Shared::fail`]).
    pub(crate) fn failed_with(&self, e: StoreError) -> StoreError {
        self.fail(e.to_string());
        e
    }
}
