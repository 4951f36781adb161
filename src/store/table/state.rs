//! The mutable state of a table generation's write path, behind its writer
//! lock ([`Writer`]), and the journal of a regeneration ([`Journal`]). The
//! invariant that keeps lookups exact is stated in [`writer`](super::writer).

use crate::store::disk::log::{LogFile, LogOp};
use crate::store::disk::pagefile::{PageFile, Superblock};
use crate::store::error::StoreError;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;

/// Mutable state of the write path, behind the table's writer lock.
pub(crate) struct Writer {
    /// Operations applied in memory and not yet in the log file.
    pub(super) buffer: Vec<LogOp>,
    /// Operations in log records not yet folded.
    pub(super) log_ops: u64,
    /// One bit per block: pending inserts not reflected in `materialized`.
    pub(super) dirty: Vec<u64>,
    /// Absolute counters of blocks that removes needed (256 bytes each).
    pub(super) materialized: HashMap<u64, Box<[u8]>>,
    /// Inserts minus removes, everything included.
    pub(super) live: i64,
    /// Inserts minus removes folded into the chunks.
    pub(super) folded_live: i64,
    /// Saturated counters in the chunks (exact after a fold or an open).
    pub(super) saturated: u64,
    /// While a regeneration runs: every operation staged since it started.
    pub(crate) journal: Journal,
    /// The page file.
    pub(crate) pages: PageFile,
    /// The log file.
    pub(crate) log: LogFile,
    /// The fold running in the background, if one is
    /// ([`background`](super::background)).
    pub(crate) background: Option<Background>,
    /// The next fold runs on the writer's thread: the last one in the
    /// background failed, or the log's folded bytes could not be freed.
    pub(super) fold_here: bool,
}

/// The journal of a regeneration: while one runs, every operation staged on
/// the generation it replaces, in order, so that the new generation can
/// replay them (see [`regen`](crate::store::regen)). Lives in the writer
/// state: started, drained and finished under the writer lock.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    ops: Option<Vec<LogOp>>,
}

impl Journal {
    /// Starts journaling (a regeneration began).
    pub(crate) fn start(&mut self) {
        self.ops = Some(Vec::new());
    }

    /// Stops journaling and discards what was journaled (the regeneration
    /// failed, or its generation was retired).
    pub(crate) fn stop(&mut self) {
        self.ops = None;
    }

    /// Whether a regeneration is journaling.
    pub(crate) fn is_active(&self) -> bool {
        self.ops.is_some()
    }

    /// Records staged operations, if a regeneration runs.
    pub(super) fn record(&mut self, ops: &[LogOp]) {
        if let Some(journal) = &mut self.ops {
            journal.extend_from_slice(ops);
        }
    }

    /// The operations journaled so far; journaling goes on.
    pub(crate) fn drain(&mut self) -> Vec<LogOp> {
        self.ops.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// The operations journaled since the last drain; journaling stops.
    pub(crate) fn finish(&mut self) -> Vec<LogOp> {
        self.ops.take().unwrap_or_default()
    }
}

impl Writer {
    /// The writer of a generation whose chunks hold everything (an empty
    /// log): `live` live keys, `saturated` saturated counters.
    pub(crate) fn empty(
        params: crate::filter::params::FilterParams,
        pages: PageFile,
        log: LogFile,
        live: i64,
        saturated: u64,
    ) -> Writer {
        Writer {
            buffer: Vec::new(),
            log_ops: 0,
            dirty: vec![0u64; params.num_blocks().div_ceil(64) as usize],
            materialized: HashMap::new(),
            live,
            folded_live: live,
            saturated,
            journal: Journal::default(),
            pages,
            log,
            background: None,
            fold_here: false,
        }
    }

    #[inline]
    pub(super) fn is_dirty(&self, block: u64) -> bool {
        self.dirty[(block / 64) as usize] & (1 << (block % 64)) != 0
    }
    #[inline]
    pub(super) fn set_dirty(&mut self, block: u64) {
        self.dirty[(block / 64) as usize] |= 1 << (block % 64);
    }
}

/// A fold running on its own thread (started and joined by
/// [`background`](super::background)).
pub(crate) struct Background {
    pub(super) handle: JoinHandle<Result<Done, StoreError>>,
    pub(super) cancel: Arc<AtomicBool>,
}

/// What a fold in the background committed.
pub(super) struct Done {
    /// The superblock it committed.
    pub(super) sb: Superblock,
    /// Operations it folded.
    pub(super) ops: u64,
    /// Inserts minus removes it folded.
    pub(super) delta: i64,
    /// Counters it saturated.
    pub(super) saturated: u64,
}
