//! [`SledDiffError`], the errors of
//! [`SledDiffStorage`](super::SledDiffStorage), and the limits they name.

use crate::sled_engine as engine;
use crate::store::StoreError;
use thiserror::Error;

/// Bytes of buffered changes (guard writes at
/// [`Durability::Buffered`](crate::Durability)) a
/// [`SledDiffStorage`](super::SledDiffStorage) holds before the next
/// buffered write first writes them into its differential file (one
/// record, one sync): what a crash can lose is bounded, and so is the copy
/// they take beside the index.
pub const GUARD_PENDING_LIMIT: usize = 1 << 20;

/// The longest key [`SledDiffStorage`](super::SledDiffStorage) takes, in bytes.
pub const MAX_GUARD_KEY: usize = engine::MAX_KEY;
/// The longest value [`SledDiffStorage`](super::SledDiffStorage) takes, in bytes.
pub const MAX_GUARD_VALUE: usize = engine::MAX_VALUE - 1;
/// Changes that [`SledDiffStorage`](super::SledDiffStorage) writes atomically together.
pub const GUARD_GROUP: usize = engine::MAX_CALL_ITEMS;

/// Errors of [`SledDiffStorage`](super::SledDiffStorage).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SledDiffError {
    /// A key or value over [`SledDiffStorage`](super::SledDiffStorage)'s limits; nothing was written.
    #[error("a record with a {key}-byte key and a {value}-byte value is over the guard storage's limits ({MAX_GUARD_KEY}-byte keys, {MAX_GUARD_VALUE}-byte values); nothing was written")]
    TooLarge {
        /// Bytes of the key.
        key: usize,
        /// Bytes of the value.
        value: usize,
    },
    /// The storage failed (the engine's error is this error's source).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The sync of a write to the differential file failed after its record
    /// was written: the write may or may not be durable (the kernel may
    /// have dropped its pages). Its changes are not read until the store is
    /// reopened, which reads back every change acknowledged before it, with
    /// or without this one's; the storage takes no more writes until then.
    /// The guard's filter already holds the write's keys, so no read misses
    /// a change whichever way it went.
    #[error("the outcome of a write to the guard's differential file is unknown (its sync failed: {source}); the changes may or may not be durable; this storage takes no more writes: reopen the store, which reads back every earlier change with or without this write's")]
    OutcomeUnknown {
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A differential-file record left in sled by store format 6 or older
    /// is not a valid change (corrupt, or written by something else):
    /// nothing was merged.
    #[error("differential-file record is corrupt (first byte {0:?}); nothing was merged")]
    BadRecord(Option<u8>),
}

impl SledDiffError {
    /// Whether the write's outcome is unknown
    /// ([`SledDiffError::OutcomeUnknown`], or a [`StoreError`] that says
    /// so); every other error of a write means nothing changed.
    pub fn is_outcome_unknown(&self) -> bool {
        match self {
            SledDiffError::OutcomeUnknown { .. } => true,
            SledDiffError::Store(e) => e.is_outcome_unknown(),
            _ => false,
        }
    }
}
