//! One table generation: its parameters, bit filter, sled tree and writer,
//! opened from disk or built by a regeneration, and retired by the next.

use super::super::catalog::TableMeta;
use super::super::config::StoreConfig;
use super::super::engine;
use super::super::error::StoreError;
use super::super::pages::{self, CHUNK_BLOCKS};
use super::fold::{fold_log, scan_absolute, GenerationState};
use super::writer::{Journal, Writer};
use crate::filter::bloom::BitFilter;
use crate::filter::counting::COUNTER_BLOCK_BYTES;
use crate::filter::params::{FilterParams, WORDS_PER_BLOCK};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

/// One generation of a table: its parameters, bit filter, sled tree and
/// write path. A regeneration builds a new one beside it and swaps it in
/// ([`TableInner::gen`]); the old one is then *retired*: writes that find it
/// retired retry on the new one.
pub(crate) struct Generation {
    pub(crate) meta: TableMeta,
    pub(crate) params: FilterParams,
    pub(crate) bits: BitFilter,
    pub(crate) tree: engine::Tree,
    pub(super) db: engine::Db,
    pub(super) config: StoreConfig,
    pub(crate) writer: Mutex<Writer>,
    pub(super) live: AtomicI64,
    pub(super) pending: AtomicU64,
    pub(super) dropped: AtomicBool,
    /// Replaced by a newer generation (set under the writer lock).
    pub(crate) retired: AtomicBool,
}

pub(crate) fn sled_err(op: &'static str) -> impl Fn(sled::Error) -> StoreError {
    move |e| StoreError::sled(op, e)
}

/// Writes the eight words of block `b` from its 256 bytes of counters.
#[inline]
pub(crate) fn store_block_words(bits: &BitFilter, b: u64, counters: &[u8]) {
    let first = b as usize * WORDS_PER_BLOCK;
    for (w, c) in counters.chunks_exact(32).enumerate() {
        bits.store_word(first + w, pages::nonzero_word(c));
    }
}

impl Generation {
    /// Opens generation `meta.generation` of a table: derives the bit filter
    /// from the chunks and the log (see [`scan_absolute`]).
    pub(crate) fn load(
        db: &engine::Db,
        meta: TableMeta,
        config: StoreConfig,
    ) -> Result<Generation, StoreError> {
        let params = meta.params()?;
        let name = meta.name.clone();
        let tree = db
            .open_tree(meta.tree_name(meta.generation))
            .map_err(sled_err("opening a table"))?;
        let mut state = GenerationState::read(&tree, &name)?;
        let bits = BitFilter::new(params).map_err(|_| StoreError::OutOfMemory {
            table: name.clone(),
            bytes: params.bit_bytes(),
        })?;
        let derive = |state: &GenerationState| {
            scan_absolute(&tree, &params, &name, state, |idx, counters| {
                for (i, block) in counters.chunks_exact(COUNTER_BLOCK_BYTES).enumerate() {
                    store_block_words(&bits, idx * CHUNK_BLOCKS + i as u64, block);
                }
            })
        };
        let derived = match derive(&state)? {
            Some(d) => d,
            None => {
                // A log longer than one fold pass (left by failed folds), or
                // a fold that a crash interrupted, is folded first: open's
                // memory stays bounded, and the scan sees settled chunks.
                let mut ignored = 0;
                fold_log(&tree, &params, &name, &mut state, &mut ignored)?;
                derive(&state)?.ok_or_else(|| {
                    StoreError::storage(
                        "opening a table",
                        "the log is still longer than one fold pass after folding".into(),
                    )
                })?
            }
        };
        let mut dirty = vec![0u64; params.num_blocks().div_ceil(64) as usize];
        for b in derived.dirty_blocks {
            dirty[(b / 64) as usize] |= 1 << (b % 64);
        }
        let live = state.live_keys + derived.live_delta;
        let writer = Writer {
            buffer: Vec::new(),
            log_ops: derived.log_ops,
            next_seq: state.next_seq.max(derived.next_seq),
            dirty,
            materialized: HashMap::new(),
            live,
            folded_live: state.live_keys,
            saturated: derived.disk_saturated,
            journal: Journal::default(),
        };
        Ok(Generation::assemble(
            db,
            meta,
            config,
            params,
            bits,
            tree,
            writer,
            derived.log_ops,
        ))
    }

    /// A generation from its parts, neither dropped nor retired.
    #[allow(clippy::too_many_arguments)]
    fn assemble(
        db: &engine::Db,
        meta: TableMeta,
        config: StoreConfig,
        params: FilterParams,
        bits: BitFilter,
        tree: engine::Tree,
        writer: Writer,
        pending: u64,
    ) -> Generation {
        Generation {
            meta,
            params,
            bits,
            tree,
            db: db.clone(),
            config,
            live: AtomicI64::new(writer.live),
            writer: Mutex::new(writer),
            pending: AtomicU64::new(pending),
            dropped: AtomicBool::new(false),
            retired: AtomicBool::new(false),
        }
    }

    /// A generation whose tree holds exactly `bits`' counters, folded (no
    /// log): what a regeneration builds.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn built(
        db: &engine::Db,
        meta: TableMeta,
        config: StoreConfig,
        params: FilterParams,
        bits: BitFilter,
        tree: engine::Tree,
        live: i64,
        saturated: u64,
    ) -> Generation {
        let writer = Writer {
            buffer: Vec::new(),
            log_ops: 0,
            next_seq: 0,
            dirty: vec![0u64; params.num_blocks().div_ceil(64) as usize],
            materialized: HashMap::new(),
            live,
            folded_live: live,
            saturated,
            journal: Journal::default(),
        };
        Generation::assemble(db, meta, config, params, bits, tree, writer, 0)
    }

    /// Retires this generation for a newer one; `w` is its writer, locked.
    /// Its buffered operations were journaled into the new generation, so
    /// they are discarded (and never written into the old tree, which is
    /// about to be deleted).
    pub(crate) fn retire(&self, w: &mut Writer) {
        w.buffer.clear();
        w.journal.stop();
        self.retired.store(true, Ordering::Release);
        self.dropped.store(true, Ordering::Release);
    }

    /// Inserts minus removes, from the locked writer.
    pub(crate) fn live_keys_locked(&self, w: &Writer) -> u64 {
        w.live.max(0) as u64
    }

    pub(crate) fn check_live(&self) -> Result<(), StoreError> {
        if self.dropped.load(Ordering::Acquire) {
            return Err(StoreError::TableDropped(self.meta.name.clone()));
        }
        Ok(())
    }

    /// Marks the table dropped; afterwards no write touches its tree.
    pub(crate) fn mark_dropped(&self) {
        let _w = self.writer.lock();
        self.dropped.store(true, Ordering::Release);
    }
}

impl Drop for Generation {
    /// Hands buffered writes to sled, which writes them within its flush
    /// interval. Durability is still only promised by `flush`.
    fn drop(&mut self) {
        let _ = self.write_pending();
    }
}
