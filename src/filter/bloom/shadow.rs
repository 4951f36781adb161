//! Shared bulk inserts through a private copy: a batch dense enough to
//! set many bits in each block is inserted into a copy of the filter with
//! plain loads and stores, and the copy is then ORed into the shared bits
//! word by word, one locked OR per word that gained a bit (a blocked or
//! split-block filter: line by line, under the line's stripe lock,
//! `bloom::stripes`).
//!
//! # Why
//! A locked read-modify-write is a full barrier on x86-64, and an insert
//! needs one per word it adds a bit to: about five per key at k = 7 (the
//! expected number of distinct words of seven probes in eight). Measured
//! with the `peers` bench (10M keys, 10 bits per key, this 2-core
//! machine), the shared `insert_many` cost 3.8–8× the plain insert loop of
//! `sbbf-rs-safe`, and the locked ORs were its whole difference from
//! `insert_many_mut` (plain stores). Through a copy, a batch of `n` keys
//! into `B` blocks pays at most eight locked ORs per block instead of
//! about five per key: at the bench's 51 keys per block, 0.16 per key.
//!
//! # When
//! The copy costs the filter's bytes once more, a sequential read of the
//! bits and a sequential merge; it pays off once a batch puts a few keys in
//! each block. [`worth_copying`] takes the copy for batches of at least
//! one key per [`COPY_BYTES_PER_KEY`] bytes of filter (two keys per
//! 64-byte block): the copy never holds more bytes than that per key of
//! the batch. Smaller batches, and filters whose copy cannot be allocated,
//! take the direct path (one locked OR per word a key adds to).
//!
//! # What readers see
//! The same bits as one `insert` per key, and no false negative ever: a
//! key of the batch is only guaranteed present once `insert_many` has
//! returned, as before; lookups meanwhile see the batch's bits appear at
//! the merge instead of key by key. The count returned is the number of
//! keys that found a bit clear in the copy (the filter as the batch began,
//! plus the batch's earlier keys): what one `insert` per key counts when
//! no other thread writes meanwhile. A bit that another thread clears
//! (`clear`, `intersect_with`) while the batch runs may be set again by the
//! merge, which ORs the whole copy: a false positive at worst, and bits are
//! only cleared under the caller's own ordering anyway (`BitFilter` docs).

use super::probe::{Locked, WordOr};
use crate::filter::params::{FilterParams, Layout};
use crate::filter::simd::SharedBlock;
use std::sync::atomic::Ordering;

/// Filter bytes per key of the batch from which a shared bulk insert goes
/// through a copy (module docs): 32, two keys per 64-byte block.
pub(crate) const COPY_BYTES_PER_KEY: u64 = 32;

/// Whether a batch of `keys` keys into a filter of `p` goes through a copy.
pub(super) fn worth_copying(p: &FilterParams, keys: usize) -> bool {
    (keys as u64).saturating_mul(COPY_BYTES_PER_KEY) >= p.bit_bytes()
}

/// ORs every word of `copy` into the same word of `into` (a filter of
/// layout `layout`) where `into` lacks one of its bits (a plain read
/// first: a word the batch left unchanged costs no locked operation); a
/// blocked or split-block filter line by line, under the lines' stripe
/// locks (`bloom::stripes`).
pub(super) fn merge(copy: &[SharedBlock], into: &[SharedBlock], layout: Layout) {
    if layout != Layout::Standard {
        for (block, from) in into.iter().zip(copy) {
            let masks = std::array::from_fn(|w| from.0[w].load(Ordering::Relaxed));
            Locked::or_block(&block.0, masks);
        }
        return;
    }
    let from = SharedBlock::flat(copy);
    for (word, bits) in SharedBlock::flat(into).iter().zip(from) {
        let bits = bits.load(Ordering::Relaxed);
        if bits != 0 {
            Locked::or(word, bits);
        }
    }
}
