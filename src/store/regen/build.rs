//! The counters of a new generation being built ([`Build`]): counted from
//! the key source (`source.rs` makes one), replayed from the journal, written
//! into the new generation's files (`swap.rs` commits them and puts the
//! generation in force; the steps of the [module docs](super)).

use super::RegenReport;
use crate::filter::bloom::BitFilter;
use crate::filter::counting::{add_blocked_hashes, counter_bytes, nibble, COUNTER_BLOCK_BYTES};
use crate::filter::hash::KeyHash;
use crate::filter::params::{FilterParams, Layout, BLOCK_BITS};
use crate::store::budget::{self, Reservation};
use crate::store::catalog::TableMeta;
use crate::store::disk::chunks::store_block_words;
use crate::store::disk::chunks::{self as pages, CHUNK_BLOCKS};
use crate::store::disk::create_files;
use crate::store::disk::log::{LogFile, LogOp};
use crate::store::disk::pagefile::PageFile;
use crate::store::error::StoreError;
use crate::store::shared::Shared;
use crate::store::table::Generation;
use std::collections::{BTreeSet, HashMap};

/// Counters being built, with the blocks the tail of the journal touched.
pub(super) struct Build {
    pub(super) params: FilterParams,
    counters: Vec<u8>,
    /// The budget reservation of `counters`.
    counters_memory: Option<Reservation>,
    /// Unmatched journaled inserts per hash (see the module docs).
    inserts: HashMap<(u64, u64), u32>,
    pub(super) live: i64,
    pub(super) report: RegenReport,
}

impl Build {
    fn add(&mut self, h: KeyHash, touched: Option<&mut BTreeSet<u64>>) {
        let p = &self.params;
        let pos = p.positions(h);
        for &q in pos.as_slice() {
            nibble::inc(&mut self.counters, q as usize);
        }
        if let Some(t) = touched {
            t.extend(pos.as_slice().iter().map(|q| q / BLOCK_BITS));
        }
    }

    fn sub(&mut self, h: KeyHash, touched: &mut Option<&mut BTreeSet<u64>>) {
        let p = &self.params;
        let pos = p.positions(h);
        for &q in pos.as_slice() {
            // Never below 1 before: the cancelled insert counted here.
            nibble::dec(&mut self.counters, q as usize);
        }
        if let Some(t) = touched {
            t.extend(pos.as_slice().iter().map(|q| q / BLOCK_BITS));
        }
    }

    /// Applies journaled operations by the rules of the module docs.
    pub(super) fn replay(&mut self, ops: &[LogOp], mut touched: Option<&mut BTreeSet<u64>>) {
        for op in ops {
            let key = (op.hash.h1, op.hash.h2);
            if op.insert {
                self.add(op.hash, touched.as_deref_mut());
                *self.inserts.entry(key).or_insert(0) += 1;
                self.live += 1;
                self.report.journaled_inserts += 1;
            } else {
                match self.inserts.get_mut(&key) {
                    Some(n) if *n > 0 => {
                        *n -= 1;
                        self.sub(op.hash, &mut touched);
                        self.live -= 1;
                        self.report.journaled_removes_applied += 1;
                    }
                    _ => self.report.journaled_removes_skipped += 1,
                }
            }
        }
    }

    /// Writes the pages of chunks `chunks` (all-zero ones too when
    /// `keep_zero`: a rewritten chunk must replace its earlier version)
    /// into their other slots of `pages` and commits them as one fold.
    fn write_chunks(
        &self,
        pages: &mut PageFile,
        shared: &Shared,
        chunks: impl Iterator<Item = u64>,
        keep_zero: bool,
    ) -> Result<(), StoreError> {
        let chunk_bytes = CHUNK_BLOCKS as usize * COUNTER_BLOCK_BYTES;
        let live = self.live;
        let mut fold = pages.begin_fold();
        for idx in chunks {
            let at = idx as usize * chunk_bytes;
            let len = pages::blocks_in_chunk(&self.params, idx) as usize * COUNTER_BLOCK_BYTES;
            let c = &self.counters[at..at + len];
            if keep_zero || c.iter().any(|&b| b != 0) {
                fold.write_chunk(idx, c)
                    .map_err(crate::store::disk::io_err("writing counter pages"))?;
            }
        }
        match fold.commit(0, live, 0) {
            Ok(()) => Ok(()),
            Err(crate::store::disk::pagefile::CommitError::Before(e)) => {
                Err(crate::store::disk::io_err("syncing counter pages")(e))
            }
            Err(crate::store::disk::pagefile::CommitError::After(e)) => {
                Err(shared.failed_with(crate::store::disk::io_err("committing counter pages")(e)))
            }
        }
    }
}

impl Build {
    /// Zeroed counters for `params` (`m/2` bytes, allocated fallibly), for
    /// a table that counted `live_before` live keys when the rebuild began.
    pub(super) fn new(
        params: FilterParams,
        capacity: u64,
        old: &Generation,
        live_before: u64,
        table: &str,
    ) -> Result<Build, StoreError> {
        let total = counter_bytes(&params);
        let (counters, memory) = budget::zeroed(
            || format!("the new counters of table {table:?} (regeneration)"),
            total,
        )?;
        Ok(Build {
            params,
            counters,
            counters_memory: Some(memory),
            inserts: HashMap::new(),
            live: 0,
            report: RegenReport {
                keys_read: 0,
                live_keys_before: live_before,
                old_generation: old.meta.generation,
                new_generation: old.meta.generation + 1,
                capacity,
                m_bits: params.m(),
                k: params.k(),
                journaled_inserts: 0,
                journaled_removes_applied: 0,
                journaled_removes_skipped: 0,
            },
        })
    }

    /// Step 2: counts the hashes of `step`, keys of the source.
    pub(super) fn count(&mut self, step: &[KeyHash]) {
        self.report.keys_read += step.len() as u64;
        if self.params.layout() == Layout::Blocked {
            // Prefetched ahead (`add_blocked_hashes`).
            add_blocked_hashes(&mut self.counters, &self.params, step, |_, _| {});
        } else {
            for &h in step {
                self.add(h, None);
            }
        }
        self.live = self.report.keys_read as i64;
    }

    /// Step 3: creates the new generation's files (replacing leftovers of a
    /// crash before an earlier attempt's catalog write, not yet collected),
    /// writes every non-zero chunk and commits them, synced. Done before the
    /// locks are taken: the commit under them then writes only the tail
    /// (writers wait milliseconds, not the seconds that `m/2` bytes of
    /// pages take to reach the disk).
    pub(super) fn write_new_files(
        &self,
        shared: &Shared,
        meta: &TableMeta,
    ) -> Result<(PageFile, LogFile), StoreError> {
        let (mut pages, log) =
            create_files(&shared.dir, crate::store::table::owner(meta), self.params)?;
        self.write_chunks(
            &mut pages,
            shared,
            0..pages::chunk_count(&self.params),
            false,
        )?;
        Ok((pages, log))
    }

    /// Step 4, under the locks: replays the rest of the journal, rewrites the
    /// chunks it touched and commits them with the final live count.
    pub(super) fn write_tail(
        &mut self,
        pages: &mut PageFile,
        shared: &Shared,
        tail: &[LogOp],
    ) -> Result<(), StoreError> {
        let mut touched = BTreeSet::new();
        self.replay(tail, Some(&mut touched));
        let chunks: BTreeSet<u64> = touched.iter().map(|blk| blk / CHUNK_BLOCKS).collect();
        self.write_chunks(pages, shared, chunks.into_iter(), true)
    }

    /// The record of the new generation: `meta` (the table's record at
    /// the start) with the built parameters, capacity and number.
    pub(super) fn new_meta(&self, meta: &TableMeta) -> TableMeta {
        TableMeta {
            layout: self.params.layout().id(),
            hash_algo: self.params.hash().algo.id(),
            seed: self.params.hash().seed,
            m: self.params.m(),
            k: self.params.k(),
            expected_keys: self.report.capacity,
            generation: self.report.new_generation,
            ..meta.clone()
        }
    }

    /// The bit filter of the finished counters and their saturated count;
    /// releases the counters.
    pub(super) fn derive_bits(
        &mut self,
        table: &str,
    ) -> Result<(BitFilter, Reservation, u64), StoreError> {
        let (bits, memory) = budget::bit_filter(table, self.params)?;
        for (blk, c) in self.counters.chunks_exact(COUNTER_BLOCK_BYTES).enumerate() {
            store_block_words(&bits, blk as u64, c);
        }
        let saturated = nibble::count_saturated(&self.counters);
        drop(std::mem::take(&mut self.counters));
        self.counters_memory = None;
        Ok((bits, memory, saturated))
    }
}
