//! Bulk loads: many inserts applied straight to the counter pages, without
//! the log.
//!
//! The write path logs 17 bytes per operation and folds them later: right
//! for a stream of small batches, wasteful for loading millions of keys,
//! which it writes twice (as log records, then as pages) and sorts in fold
//! passes. A bulk load instead folds the log, reads the counting filter
//! once (`m/2` bytes), adds every key to it in memory, and writes each
//! touched page once (one flushed sled call each, see
//! [`engine`](super::super::engine)), then the generation state with the
//! new key count. Durable when it returns; **not atomic**: a crash in the
//! middle leaves some of the keys in the filter (false positives for
//! records the host has not committed, by its rule 1), none of them lost
//! once the call returned.

use super::super::engine;
use super::super::error::StoreError;
use super::super::keys::STATE_KEY;
use super::super::pages::{self, CHUNK_BLOCKS, CHUNK_COUNTERS};
use super::fold::{scan_absolute, GenerationState};
use super::generation::{sled_err, store_block_words, Generation};
use crate::filter::counting::{
    add_blocked_hashes, counter_bytes, nibble, COUNTER_BLOCK_BYTES, COUNTER_MAX,
};
use crate::filter::hash::{positions, KeyHash, Positions};
use crate::filter::params::{FilterParams, Layout};
use crate::filter::simd::prefetch;
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
        self.fold(&mut w)?;
        let state = GenerationState::read(&self.tree, &self.meta.name)?;
        let mut counters = self.read_counters(&state)?;
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
        // Visible now: the touched blocks' bits from their counters (one
        // sequential pass, cheaper than setting each key's bits).
        self.store_touched_bits(&counters, &load.touched);
        let keys = i64::try_from(load.keys).unwrap_or(i64::MAX);
        w.live += keys;
        self.live.store(w.live, Ordering::Relaxed);
        w.saturated += load.saturated;
        self.write_touched(&counters, &load.touched)?;
        let loaded = GenerationState::settled(state.live_keys + keys, state.next_seq);
        self.tree
            .insert(STATE_KEY, loaded.encode(&self.meta.name)?)
            .map_err(sled_err("writing table state"))?;
        w.folded_live = loaded.live_keys;
        // Durable against power loss too (see `engine`, "Power loss").
        self.db.flush().map_err(sled_err("flushing"))?;
        Ok(Some(load.keys))
    }

    /// The absolute counters on disk (the log is folded: a longer log than
    /// one fold pass is an error).
    pub(super) fn read_counters(&self, state: &GenerationState) -> Result<Vec<u8>, StoreError> {
        let total = counter_bytes(&self.params);
        let mut counters = Vec::new();
        counters
            .try_reserve_exact(total)
            .map_err(|_| StoreError::OutOfMemory {
                table: self.meta.name.clone(),
                bytes: total as u64,
            })?;
        counters.resize(total, 0);
        let chunk_bytes = (CHUNK_COUNTERS / 2) as usize;
        scan_absolute(
            &self.tree,
            &self.params,
            &self.meta.name,
            state,
            |idx, c| {
                let at = idx as usize * chunk_bytes;
                counters[at..at + c.len()].copy_from_slice(c);
            },
        )?
        .ok_or_else(|| {
            StoreError::storage(
                "reading counter pages",
                "the log is longer than one fold pass after a fold".into(),
            )
        })?;
        Ok(counters)
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

    /// Writes every page with a bit in `touched`, one sled call each.
    fn write_touched(&self, counters: &[u8], touched: &[u64]) -> Result<(), StoreError> {
        let mut result = Ok(());
        for_each_page(touched, |idx| {
            if result.is_ok() {
                let (at, end) = page_range(idx, counters.len());
                result = write_page(&self.tree, idx, &counters[at..end]);
            }
        });
        result
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

fn write_page(tree: &engine::Tree, idx: u64, counters: &[u8]) -> Result<(), StoreError> {
    tree.insert(pages::chunk_key(idx), pages::encode_chunk(idx, counters))
        .map_err(sled_err("writing counter pages"))
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
        let at = |h: KeyHash| positions(p.layout(), p.m(), p.k(), h);
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
