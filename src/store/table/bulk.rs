//! Bulk loads: many inserts applied straight to the counter pages, without
//! the log.
//!
//! The write path logs 17 bytes per operation and folds them later: right
//! for a stream of small batches, wasteful for loading millions of keys,
//! which it writes twice (as log records, then as pages) and sorts in fold
//! passes. A bulk load instead folds the log, reads the counting filter
//! once (`m/2` bytes, under the memory budget), adds every key to it in
//! memory, and writes each touched page once into its other slot, then
//! commits them with the new key count as one fold
//! ([`disk::pagefile`](crate::store::disk::pagefile)). Durable when it
//! returns, and atomic: a crash before the commit leaves none of its keys,
//! after it all of them.

use super::fold::{crash_point, scan_chunks};
use super::generation::Generation;
use super::state::Writer;
use crate::filter::counting::{
    add_blocked_hashes, counter_bytes, nibble, COUNTER_BLOCK_BYTES, COUNTER_MAX,
};
use crate::filter::hash::{KeyHash, Positions};
use crate::filter::params::{FilterParams, Layout};
use crate::filter::simd::prefetch;
use crate::store::budget;
use crate::store::disk::chunks::store_block_words;
use crate::store::disk::chunks::{self as pages, CHUNK_BLOCKS, CHUNK_COUNTERS};
use crate::store::disk::io_err;
use crate::store::disk::pagefile::CommitError;
use crate::store::error::StoreError;
use std::sync::atomic::Ordering;

/// Keys whose counters are prefetched ahead of the one being added.
const AHEAD: usize = 8;

/// Keys hashed per step of a bulk load.
const BULK_STEP: usize = 1 << 16;

impl Generation {
    /// Loads `keys` into this generation (module docs). `Ok(None)`, having
    /// consumed nothing, when the generation was retired or a regeneration
    /// journals its writes: the caller then takes the ordinary write path.
    pub(super) fn bulk_insert<K: AsRef<[u8]>>(
        &self,
        keys: &mut dyn Iterator<Item = K>,
    ) -> Result<Option<u64>, StoreError> {
        let mut w = self.writer.lock();
        if self.retired.load(Ordering::Acquire) || w.journal.is_active() {
            return Ok(None);
        }
        self.check_live()?;
        self.shared.check_writable()?;
        // The counters' memory before the fold: a load refused for memory
        // leaves the table's files as they were.
        let why = || format!("the counters of table {:?} for a bulk load", self.meta.name);
        let memory = budget::reserve(why, counter_bytes(&self.params) as u64)?;
        self.fold(&mut w)?;
        let (mut counters, _memory) = self.read_counters(&w, why(), memory)?;
        let mut load = Load::new(self.params);
        let spec = self.params.hash();
        let mut hashes = Vec::with_capacity(BULK_STEP);
        loop {
            hashes.clear();
            hashes.extend(keys.take(BULK_STEP).map(|k| spec.hash(k.as_ref())));
            if hashes.is_empty() {
                break;
            }
            load.add_all(&mut counters, &hashes);
        }
        // Durable (and atomic) first; visible after: a key is never visible
        // before its load can survive a crash.
        let keys = i64::try_from(load.keys).unwrap_or(i64::MAX);
        self.commit_touched(&mut w, &counters, &load.touched, keys)?;
        // Visible now: the touched blocks' bits from their counters (one
        // sequential pass, cheaper than setting each key's bits).
        self.store_touched_bits(&counters, &load.touched);
        w.live += keys;
        w.folded_live += keys;
        self.live.store(w.live, Ordering::Relaxed);
        w.saturated += load.saturated;
        Ok(Some(load.keys))
    }

    /// The absolute counters (`m/2` bytes, held under `memory`, reserved
    /// for `what`) of a generation whose log is folded.
    pub(super) fn read_counters(
        &self,
        w: &Writer,
        what: String,
        memory: budget::Reservation,
    ) -> Result<(Vec<u8>, budget::Reservation), StoreError> {
        let total = counter_bytes(&self.params);
        let (mut counters, memory) = budget::zeroed_under(what, total, memory)?;
        let chunk_bytes = (CHUNK_COUNTERS / 2) as usize;
        scan_chunks(&w.pages, &self.params, &self.meta.name, &[], |idx, c| {
            let at = idx as usize * chunk_bytes;
            counters[at..at + c.len()].copy_from_slice(c);
        })?;
        Ok((counters, memory))
    }

    /// Rewrites the bit words of every page with a bit in `touched` from
    /// its counters (counters only grew: no bit is cleared).
    fn store_touched_bits(&self, counters: &[u8], touched: &[u64]) {
        for_each_page(touched, |idx| {
            let first_block = idx * CHUNK_BLOCKS;
            let (at, end) = page_range(idx, counters.len());
            for (i, block) in counters[at..end]
                .chunks_exact(COUNTER_BLOCK_BYTES)
                .enumerate()
            {
                store_block_words(&self.bits, first_block + i as u64, block);
            }
        });
    }

    /// Writes every page with a bit in `touched` into its other slot and
    /// commits them, with `keys` more live keys, as one fold.
    fn commit_touched(
        &self,
        w: &mut Writer,
        counters: &[u8],
        touched: &[u64],
        keys: i64,
    ) -> Result<(), StoreError> {
        let folded_seq = w.log.next_seq();
        let live = w.pages.superblock().live_keys + keys;
        let mut fold = w.pages.begin_fold();
        let mut result = Ok(());
        for_each_page(touched, |idx| {
            if result.is_ok() {
                let (at, end) = page_range(idx, counters.len());
                result = crash_point().and_then(|()| {
                    fold.write_chunk(idx, &counters[at..end])
                        .map_err(io_err("writing counter pages"))
                });
            }
        });
        result?;
        match fold.commit(folded_seq, live, 0) {
            Ok(()) => {}
            Err(CommitError::Before(e)) => return Err(io_err("syncing counter pages")(e)),
            // The superblock may or may not be in force: the load's keys may
            // or may not be in the table after a reopen.
            Err(CommitError::After(e)) => {
                return Err(self.shared.outcome_unknown("committing a bulk load", e))
            }
        }
        // The superblock now expects the record after the log's last one:
        // start the log again there (as a fold does).
        let _ = w.log.reset();
        Ok(())
    }
}

/// Calls `f` with the index of every page whose bit is set in `touched`.
fn for_each_page(touched: &[u64], mut f: impl FnMut(u64)) {
    for (word_idx, &word) in touched.iter().enumerate() {
        let mut bits = word;
        while bits != 0 {
            f((word_idx * 64) as u64 + u64::from(bits.trailing_zeros()));
            bits &= bits - 1;
        }
    }
}

/// The byte range of page `idx` in a counter array of `len` bytes.
fn page_range(idx: u64, len: usize) -> (usize, usize) {
    let chunk_bytes = (CHUNK_COUNTERS / 2) as usize;
    let at = idx as usize * chunk_bytes;
    (at, (at + chunk_bytes).min(len))
}

/// What a bulk load has added so far.
struct Load {
    params: FilterParams,
    keys: u64,
    /// Counters that reached 15.
    saturated: u64,
    /// One bit per page.
    touched: Vec<u64>,
}

impl Load {
    fn new(params: FilterParams) -> Load {
        Load {
            params,
            keys: 0,
            saturated: 0,
            touched: vec![0; pages::chunk_count(&params).div_ceil(64) as usize],
        }
    }

    /// Adds every key of `hashes`, the counters of the key [`AHEAD`] places
    /// on prefetched (a 10M-key table's counters are 48 MiB: without it,
    /// nearly every key waits for memory).
    fn add_all(&mut self, counters: &mut [u8], hashes: &[KeyHash]) {
        let p = self.params;
        if p.layout() == Layout::Blocked {
            add_blocked_hashes(counters, &p, hashes, |b, out| {
                self.saturated += u64::from(out.newly_saturated);
                let chunk = b as u64 / CHUNK_BLOCKS;
                self.touched[(chunk / 64) as usize] |= 1 << (chunk % 64);
                self.keys += 1;
            });
            return;
        }
        let at = |h: KeyHash| p.positions(h);
        let mut ring: [Positions; AHEAD] = std::array::from_fn(|i| match hashes.get(i) {
            Some(&h) => at(h),
            None => Positions::default(),
        });
        for (i, _) in hashes.iter().enumerate() {
            let slot = i % AHEAD;
            let current = ring[slot];
            if let Some(&h) = hashes.get(i + AHEAD) {
                ring[slot] = at(h);
                for &q in ring[slot].as_slice() {
                    prefetch(&counters[(q / 2) as usize]);
                }
            }
            self.add(counters, &current);
        }
    }

    #[inline]
    fn add(&mut self, counters: &mut [u8], positions: &Positions) {
        for &q in positions.as_slice() {
            let before = nibble::get(counters, q as usize);
            let after = nibble::inc(counters, q as usize);
            self.saturated += u64::from(before < COUNTER_MAX && after == COUNTER_MAX);
            let chunk = q / CHUNK_COUNTERS;
            self.touched[(chunk / 64) as usize] |= 1 << (chunk % 64);
        }
        self.keys += 1;
    }
}
