//! The write path of a table generation: the writer state behind its lock,
//! and staging, buffering and folding operations.
//!
//! # State, and the invariant that keeps lookups exact
//! The *absolute* counters of the table are the counter chunks on disk with
//! every logged (and buffered) operation applied in log order. Each 512-counter
//! block is in one of three states:
//!
//! * **clean** — the chunk on disk is the truth;
//! * **dirty** — operations are pending in the log, and only inserts (a remove
//!   on a dirty block first folds the log, so a dirty block never has a
//!   pending remove); one bit per block in `Writer::dirty`;
//! * **materialized** — its absolute counters are held in memory
//!   (`Writer::materialized`, bounded), because a remove needed them; later
//!   operations on it are applied there too.
//!
//! The bit filter always equals "absolute counter ≠ 0", position by position:
//! an insert into a clean or dirty block sets its bits (a counter going up
//! never turns a bit off), and every change to a materialized block rewrites
//! the block's eight words from its counters. So a lookup needs neither I/O
//! nor a lock, and a key whose insert has returned stays visible until it is
//! removed.
//!
//! # Costs (measured by `cargo bench --bench store`)
//! An insert costs hashing, setting `k` bits, and 17 bytes appended to the
//! in-memory buffer; every [`StoreConfig::buffer_ops`] operations (or at an
//! apply that is not [`Durability::Buffered`], or a flush) the buffer
//! becomes one record appended to the log file (one `pwrite`), and a
//! power-cut-safe apply then waits for one `fdatasync` of the log, shared
//! with every apply waiting at the same time. A remove needs its block's
//! counters: a cached copy, or one read of its chunk from the page file (and,
//! if the block is dirty, a fold first). A fold costs one read and one write
//! of each touched 16 KiB chunk and two `fdatasync`s of the page file (see
//! [`fold`](super::fold)); the one a write starts at the fold threshold
//! runs in the background ([`background`](super::background)), every other
//! call on the caller's thread.
//!
//! [`StoreConfig::buffer_ops`]: crate::StoreConfig::buffer_ops

use super::fold::fold_log;
use super::generation::Generation;
use super::state::Writer;
use crate::filter::counting::{nibble, COUNTER_BLOCK_BYTES};
use crate::filter::params::{FilterParams, Layout, BLOCK_BITS};
use crate::store::batch::Durability;
use crate::store::disk::chunks::{store_block_words, CHUNK_BLOCKS, MAX_PASS_OPS};
use crate::store::disk::log::LogOp;
use crate::store::disk::pagefile::PageFile;
use crate::store::disk::{io_err, page_err};
use crate::store::error::StoreError;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

/// Absolute counters (256 bytes per block) a batch works on, by block.
type Scratch = HashMap<u64, Box<[u8]>>;

/// Sorted, deduplicated blocks of a key's positions, through `f`.
#[inline]
fn for_each_block(p: &FilterParams, op: &LogOp, mut f: impl FnMut(u64)) {
    match p.layout() {
        Layout::Blocked => f(crate::filter::hash::map_to_range(
            op.hash.h1,
            p.num_blocks(),
        )),
        Layout::Standard | Layout::SplitBlock => {
            let mut last = u64::MAX;
            for &pos in p.positions(op.hash).as_slice() {
                let b = pos / BLOCK_BITS;
                if b != last {
                    f(b);
                    last = b;
                }
            }
        }
    }
}

impl Generation {
    /// The 256 bytes of absolute counters of clean block `b`, from the page
    /// file, through `chunks`, which keeps the chunks read by one batch (a
    /// batch of removes often hits several blocks of one 16 KiB chunk).
    fn read_block(
        &self,
        pages: &PageFile,
        b: u64,
        chunks: &mut HashMap<u64, Vec<u8>>,
    ) -> Result<Box<[u8]>, StoreError> {
        let chunk = b / CHUNK_BLOCKS;
        let counters = match chunks.entry(chunk) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let mut buf = Vec::new();
                pages
                    .read_chunk(chunk, &mut buf)
                    .map_err(page_err(&self.meta.name, "reading a counter page"))?;
                e.insert(buf)
            }
        };
        let at = (b % CHUNK_BLOCKS) as usize * COUNTER_BLOCK_BYTES;
        Ok(counters[at..at + COUNTER_BLOCK_BYTES].into())
    }

    /// Checks `ops`, changing nothing in memory or in the log: loads the
    /// absolute counters the batch must work on and applies it to those
    /// copies, refusing it whole if a remove finds a zero counter. What it
    /// returns is committed by [`commit_staged`](Generation::commit_staged),
    /// which cannot fail.
    fn prepare(&self, w: &mut Writer, ops: &[LogOp]) -> Result<Scratch, StoreError> {
        let mut scratch = self.load_scratch(w, ops)?;
        if !scratch.is_empty() {
            self.check_in_scratch(&mut scratch, ops)?;
        }
        Ok(scratch)
    }

    /// The absolute counters of the blocks this batch must work on: those of
    /// its removes (read from disk after folding the log if one is dirty),
    /// and the materialized blocks its inserts touch (kept exact).
    fn load_scratch(&self, w: &mut Writer, ops: &[LogOp]) -> Result<Scratch, StoreError> {
        let p = &self.params;
        let mut scratch = Scratch::new();
        if ops.iter().any(|o| !o.insert) {
            let mut needs_fold = false;
            for op in ops.iter().filter(|o| !o.insert) {
                for_each_block(p, op, |b| needs_fold |= w.is_dirty(b));
            }
            if needs_fold {
                self.fold(w)?;
            }
            let mut chunks = HashMap::new();
            for op in ops.iter().filter(|o| !o.insert) {
                let mut err = None;
                for_each_block(p, op, |b| {
                    if err.is_some() || scratch.contains_key(&b) {
                        return;
                    }
                    let block = match w.materialized.get(&b) {
                        Some(c) => Ok(c.clone()),
                        None => self.read_block(&w.pages, b, &mut chunks),
                    };
                    match block {
                        Ok(c) => {
                            scratch.insert(b, c);
                        }
                        Err(e) => err = Some(e),
                    }
                });
                if let Some(e) = err {
                    return Err(e);
                }
            }
        }
        if !w.materialized.is_empty() {
            for op in ops.iter().filter(|o| o.insert) {
                for_each_block(p, op, |b| {
                    if let (std::collections::hash_map::Entry::Vacant(slot), Some(c)) =
                        (scratch.entry(b), w.materialized.get(&b))
                    {
                        slot.insert(c.clone());
                    }
                });
            }
        }
        Ok(scratch)
    }

    /// Applies `ops` in order to the counters in `scratch`; refuses the batch
    /// at the first remove that finds a zero counter (every block of a
    /// remove is in `scratch`).
    fn check_in_scratch(&self, scratch: &mut Scratch, ops: &[LogOp]) -> Result<(), StoreError> {
        let p = &self.params;
        for (index, op) in ops.iter().enumerate() {
            let pos = p.positions(op.hash);
            if !op.insert {
                let present = pos.as_slice().iter().all(|&q| {
                    scratch
                        .get(&(q / BLOCK_BITS))
                        .is_some_and(|c| nibble::get(c, (q % BLOCK_BITS) as usize) > 0)
                });
                if !present {
                    return Err(StoreError::NotPresent {
                        table: self.meta.name.clone(),
                        index: Some(index),
                    });
                }
            }
            for &q in pos.as_slice() {
                if let Some(c) = scratch.get_mut(&(q / BLOCK_BITS)) {
                    if op.insert {
                        nibble::inc(c, (q % BLOCK_BITS) as usize);
                    } else {
                        nibble::dec(c, (q % BLOCK_BITS) as usize);
                    }
                }
            }
        }
        Ok(())
    }

    /// Commits a checked batch to memory: the buffer (when `buffered`: the
    /// batch is not in a log record yet), journal, bits, dirty map,
    /// materialized blocks (from `scratch`) and the live count.
    fn commit_staged(&self, w: &mut Writer, ops: &[LogOp], scratch: Scratch, buffered: bool) {
        let p = &self.params;
        if buffered {
            w.buffer.extend_from_slice(ops);
        }
        w.journal.record(ops);
        let mut delta = 0i64;
        if scratch.is_empty() {
            // No block of the batch is materialized (a remove loads its
            // blocks into `scratch`, so these are inserts): the bits of all
            // its inserts at once, each key's line prefetched ahead so that
            // the cache misses overlap (the bit filter of a 10M-key table is
            // 12 MB; one miss per key was 74% of a durable batch's CPU).
            let mut inserts = Vec::with_capacity(ops.len());
            for op in ops {
                if op.insert {
                    delta += 1;
                    for_each_block(p, op, |b| w.set_dirty(b));
                    inserts.push(op.hash);
                } else {
                    delta -= 1;
                }
            }
            // Under the writer lock, which every write of these bits holds:
            // plain stores, no locked OR (`BitFilter::insert_hashes_one_writer`).
            self.bits.insert_hashes_one_writer(&inserts);
        } else {
            for op in ops {
                if !op.insert {
                    delta -= 1;
                    continue;
                }
                delta += 1;
                for &q in p.positions(op.hash).as_slice() {
                    let b = q / BLOCK_BITS;
                    if !scratch.contains_key(&b) {
                        w.set_dirty(b);
                        self.bits.set_bit(q);
                    }
                }
            }
        }
        for (b, c) in scratch {
            store_block_words(&self.bits, b, &c);
            w.materialized.insert(b, c);
        }
        w.live += delta;
        self.live.store(w.live, Ordering::Relaxed);
    }

    /// Appends the buffer, then `ops`, to the log as one record (not
    /// synced); returns the log position after it (where a durable apply
    /// waits for a sync), or the position written so far if there is
    /// nothing to append. On an error nothing was appended and the buffer
    /// is kept: the next write appends it again.
    fn append_record(&self, w: &mut Writer, ops: &[LogOp]) -> Result<u64, StoreError> {
        if w.buffer.is_empty() && ops.is_empty() {
            return Ok(w.log.sync().written());
        }
        self.shared.check_writable()?;
        let pos = w
            .log
            .append_parts(&w.buffer, ops)
            .map_err(io_err("appending to the log"))?;
        w.log_ops += (w.buffer.len() + ops.len()) as u64;
        w.buffer.clear();
        self.pending.store(w.log_ops, Ordering::Relaxed);
        Ok(pos)
    }

    /// Appends the buffer to the log as one record ([`append_record`](Generation::append_record)).
    pub(super) fn write_buffer(&self, w: &mut Writer) -> Result<u64, StoreError> {
        self.append_record(w, &[])
    }

    /// Folds the buffer and the log into the counter chunks; afterwards every
    /// block is clean and the log is empty.
    pub(crate) fn fold(&self, w: &mut Writer) -> Result<(), StoreError> {
        self.check_sound()?;
        self.settle_fold(w, false);
        self.write_buffer(w)?;
        if w.log_ops > 0 {
            self.shared.check_writable()?;
            let folded = fold_log(w, &self.params, &self.meta.name, &self.shared)?;
            w.folded_live += folded.delta;
            w.saturated += folded.saturated;
            w.log_ops = 0;
            self.pending.store(0, Ordering::Relaxed);
            w.dirty.fill(0);
            w.fold_here = false;
        }
        w.materialized.clear();
        Ok(())
    }

    /// Applies `ops`; `Ok(false)`, having done nothing, when this generation
    /// was retired by a regeneration (the caller retries on the new one).
    ///
    /// **All or none.** Up to the log append, every step that can fail runs
    /// before anything of the batch reaches memory or the log: the fold that
    /// earlier writes asked for, writing out a buffer the batch would
    /// overflow, the counters its removes need (and a fold if one of their
    /// blocks is dirty), the check of the removes, then the append of the
    /// record that holds the batch. Only when the append returned is the
    /// batch committed to memory, which cannot fail. So an error up to here
    /// means that nothing of the batch changed, and the host may repeat it
    /// (a remove repeated after it was applied once would take counts from
    /// other keys: a false negative). After the append only a durable
    /// apply's sync can fail: the batch is then applied and logged but its
    /// durability unknown ([`StoreError::OutcomeUnknown`], and the store
    /// stops writing).
    pub(super) fn apply_ops(
        &self,
        ops: &[LogOp],
        durability: Durability,
    ) -> Result<bool, StoreError> {
        let written = {
            let mut w = self.writer.lock();
            if self.retired.load(Ordering::Acquire) {
                return Ok(false);
            }
            self.check_live()?;
            self.check_sound()?;
            self.shared.check_writable()?;
            self.fold_if_due(&mut w, ops.len())?;
            self.apply_locked(&mut w, ops, durability)?
        };
        if let (Durability::Durable, Some(pos)) = (durability, written) {
            self.sync_log(pos)?;
        }
        Ok(true)
    }

    /// The fold the writes before a batch of `batch` operations asked for,
    /// before the batch (so that its failure changes nothing of the batch):
    /// started in the background when the log reached the fold threshold
    /// ([`background`](super::background)), after waiting for the one
    /// running there if the log reached twice that (or the batch would take
    /// it past what one fold pass reads); on this thread when too many
    /// blocks are materialized, when background folds are off, or when the
    /// last one failed or left bytes it could not free.
    fn fold_if_due(&self, w: &mut Writer, batch: usize) -> Result<(), StoreError> {
        let config = &self.shared.config;
        let threshold = config.fold_threshold_ops(&self.params);
        self.poll_fold(w);
        // The log a reopen reads (every record since the superblock in
        // force's `log_start`) must stay within one fold pass.
        let unfolded = |w: &Writer| w.log_ops + (w.buffer.len() + batch) as u64;
        if w.log_ops >= 2 * threshold || unfolded(w) > MAX_PASS_OPS {
            self.settle_fold(w, false);
        }
        if w.materialized.len() > config.materialized_blocks || unfolded(w) > MAX_PASS_OPS {
            return self.fold(w);
        }
        if w.log_ops < threshold || w.background.is_some() {
            return Ok(());
        }
        if config.background_folds && !w.fold_here && self.start_fold(w)? {
            return Ok(());
        }
        self.fold(w)
    }

    /// [`apply_ops`](Generation::apply_ops) under the writer lock: returns
    /// the log position to sync to when the batch went into a log record.
    fn apply_locked(
        &self,
        w: &mut Writer,
        ops: &[LogOp],
        durability: Durability,
    ) -> Result<Option<u64>, StoreError> {
        let buffer_ops = self.shared.config.buffer_ops;
        if ops.is_empty() {
            return match durability {
                Durability::Buffered => Ok(None),
                _ => self.write_buffer(w).map(Some),
            };
        }
        // A batch never straddles two log records: write what is buffered
        // first if this batch would overflow it.
        if w.buffer.len() + ops.len() > buffer_ops {
            self.write_buffer(w)?;
        }
        let scratch = self.prepare(w, ops)?;
        let written =
            if durability != Durability::Buffered || w.buffer.len() + ops.len() >= buffer_ops {
                let from = w.log.end();
                let pos = self.append_record(w, ops)?;
                if durability == Durability::Durable {
                    w.log.start_writeback(from);
                }
                Some(pos)
            } else {
                None
            };
        self.commit_staged(w, ops, scratch, written.is_none());
        Ok(written)
    }

    /// Makes every log record up to position `pos` durable (one
    /// `fdatasync`, shared with concurrent callers). A failed sync leaves
    /// the records unknown ([`StoreError::OutcomeUnknown`]) and stops the
    /// store's writes ([`Shared::fail`](crate::store::shared::Shared::fail));
    /// the log's own failure is sticky ([`LogSync::sync_to`](crate::store::disk::log::LogSync::sync_to)).
    pub(super) fn sync_log(&self, pos: u64) -> Result<(), StoreError> {
        self.log_sync
            .sync_to(pos)
            .map_err(|e| self.shared.outcome_unknown("syncing the log", e))
    }

    /// Appends the buffer to the log (not synced); returns the position to
    /// sync to for everything written so far. Used by flushes and drops.
    pub(crate) fn write_pending(&self) -> Result<u64, StoreError> {
        let mut w = self.writer.lock();
        if self.dropped.load(Ordering::Acquire) || w.buffer.is_empty() {
            return Ok(w.log.sync().written());
        }
        self.write_buffer(&mut w)
    }

    /// Makes every write applied so far durable, against power loss too.
    /// A store that stopped writing after a failure never says so
    /// ([`StoreError::Degraded`]): a sync that failed may have dropped pages
    /// that no later sync writes.
    pub(crate) fn flush(&self) -> Result<(), StoreError> {
        if self.shared.read_only {
            return Ok(());
        }
        self.shared.check_writable()?;
        let pos = self.write_pending()?;
        self.sync_log(pos)
    }
}
