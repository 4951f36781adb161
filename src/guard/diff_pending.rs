//! The differential file's buffered changes (`diff_log` module docs), and
//! what a write's record came to.

use super::sled_error::SledDiffError;
use crate::store::disk::catalog_log::RECORD_HEAD;
use crate::store::disk::guard_log::GuardLog;
use crate::store::disk::CommitError;
use crate::store::StoreError;

/// What a write's group came to: the active log's length, or why not.
pub(super) type Outcome = Result<u64, (Failure, std::io::ErrorKind, String)>;

/// How a group's record failed.
#[derive(Clone, Copy)]
pub(super) enum Failure {
    /// Nothing written (the log's write failed, or an earlier one did).
    Before,
    /// Its sync failed: the outcome is unknown.
    After,
}

/// Buffered changes not yet in the log: the ops of their records, in the
/// order they were made. `DiffLog` locks them only while it holds its log.
#[derive(Default)]
pub(super) struct Pending {
    pub(super) ops: Vec<u8>,
    pub(super) count: u32,
}

/// The error of a write whose record failed as `failure` said.
pub(super) fn outcome_error(
    failure: Failure,
    kind: std::io::ErrorKind,
    what: String,
) -> SledDiffError {
    let source = std::io::Error::new(kind, what);
    match failure {
        Failure::Before => SledDiffError::Store(StoreError::Io {
            op: "writing the guard's differential file (nothing was written)",
            source,
        }),
        Failure::After => SledDiffError::OutcomeUnknown { source },
    }
}

/// Writes `pending` into `log` as one record, synced, and empties it
/// (already readable: the index is not touched); nothing without any.
pub(super) fn commit_pending(log: &mut GuardLog, pending: &mut Pending) -> Result<(), CommitError> {
    if pending.count == 0 {
        return Ok(());
    }
    let mut record = Vec::with_capacity(RECORD_HEAD + 4 + pending.ops.len());
    record.resize(RECORD_HEAD + 4, 0);
    record.extend_from_slice(&pending.ops);
    let count = pending.count;
    *pending = Pending::default();
    log.commit(&mut record, count)
}

/// [`commit_pending`], its error a write's.
pub(super) fn write_pending(
    log: &mut GuardLog,
    pending: &mut Pending,
) -> Result<(), SledDiffError> {
    commit_pending(log, pending).map_err(|e| match e {
        CommitError::Before(e) => outcome_error(Failure::Before, e.kind(), e.to_string()),
        CommitError::After(e) => outcome_error(Failure::After, e.kind(), e.to_string()),
    })
}
