//! The durability bookkeeping of a table generation's log ([`LogSync`]):
//! which positions are written and synced, and the one `fdatasync` at a
//! time that concurrent durable applies share (group commit). The log
//! itself: [`log`](super::log).

use parking_lot::Mutex;
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Durability bookkeeping of one log, shared with the callers that sync it
/// outside the table's writer lock. Positions count every byte ever
/// appended to this log, across [`LogFile::reset`]s.
///
/// [`LogFile::reset`]: super::log::LogFile::reset
#[derive(Debug)]
pub(crate) struct LogSync {
    pub(super) file: Arc<File>,
    /// Position up to which every record is written.
    pub(super) written: AtomicU64,
    /// Every record numbered below this is written.
    pub(super) written_seq: AtomicU64,
    /// Position up to which every record is durable.
    pub(super) synced: AtomicU64,
    /// Every record numbered below this is durable (what a record appended
    /// now says it is: its `synced_below`).
    pub(super) synced_seq: AtomicU64,
    /// One `fdatasync` at a time: a caller that waited finds its record
    /// synced by the one before it (group commit).
    pub(super) lock: Mutex<()>,
    /// A sync failed: set under `lock`, never cleared (see [`LogSync::sync_to`]).
    pub(super) failed: AtomicBool,
}

impl LogSync {
    /// Makes every record up to position `pos` durable: returns at once if
    /// it is, else syncs the file (once for every caller waiting).
    ///
    /// **A failure is sticky.** Linux reports a failed writeback to one
    /// `fdatasync` and may drop the pages it could not write; a later
    /// `fdatasync` then returns 0 without having written them ("fsyncgate";
    /// the kernel's errseq reports each error once per open file). So after
    /// one sync of this log failed, every position it had not made durable
    /// stays not durable: each later call for one fails too, among them a
    /// caller that was waiting for the failed sync (it would otherwise sync
    /// again, get 0, and report its record durable). Positions synced before
    /// the failure stay durable. Only reopening the store starts a log
    /// afresh: the page cache may still show the dropped pages, so the open
    /// writes back and syncs what it read before it appends
    /// (`Generation::load`).
    pub(crate) fn sync_to(&self, pos: u64) -> io::Result<()> {
        if self.synced.load(Ordering::Acquire) >= pos {
            return Ok(());
        }
        let _one = self.lock.lock();
        if self.synced.load(Ordering::Acquire) >= pos {
            return Ok(());
        }
        if self.failed.load(Ordering::Acquire) {
            return Err(io::Error::other(
                "an earlier fdatasync of this log failed: the kernel may have dropped the pages \
                 it could not write, so no later sync can prove them durable",
            ));
        }
        // The number first: every record below it was written before the
        // position read next (`append` stores the position, then the number).
        let target_seq = self.written_seq.load(Ordering::Acquire);
        let target = self.written.load(Ordering::Acquire);
        if let Err(e) = super::io::sync_data(&self.file) {
            self.failed.store(true, Ordering::Release);
            return Err(e);
        }
        self.synced.fetch_max(target, Ordering::AcqRel);
        self.synced_seq.fetch_max(target_seq, Ordering::AcqRel);
        Ok(())
    }

    /// Every record numbered below this is durable: a sync that covered it
    /// returned (or a fold put it in the page file). What a superblock may
    /// claim (`Superblock::durable_seq`), read before it is written.
    pub(crate) fn synced_seq(&self) -> u64 {
        self.synced_seq.load(Ordering::Acquire)
    }

    /// Position up to which records are written.
    pub(crate) fn written(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }
}
