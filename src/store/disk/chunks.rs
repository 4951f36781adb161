//! Counter chunks, and the arithmetic that folds logged operations into
//! them.
//!
//! # Chunks
//! Counters are stored in *chunks* of [`CHUNK_BLOCKS`] = 64 counter blocks
//! (64 × 256 bytes = 16 KiB of packed 4-bit counters, the layout of
//! [`crate::filter::counting`]), each in a slot of the page file
//! ([`pagefile`](super::pagefile)). The size was chosen when
//! each chunk was one sled value (format 2): folding 1M logged inserts into
//! a 10M-key table (48 MiB of counters, every chunk touched) took 450–700 ms
//! with 4 KiB chunks, 330–400 ms with 8 KiB, 245–300 ms with 16 KiB and
//! 260–280 ms with 32 KiB on a shared 2-core machine; a remove that must
//! read its block from disk reads and checksums the whole chunk. A chunk
//! that was never written is all zeros, so creating a table writes none.
//!
//! The chunk's bytes are specified in `docs/FORMAT.md` §10.
//!
//! # Entries
//! A fold (and an open) turns logged operations into *entries*: one per key
//! in the blocked layout (the key's block, and its `h2`, from which the
//! positions inside the block follow), one per distinct position in the
//! standard layout. Each is keyed `unit << 24 | op_index << 1 | insert`;
//! sorting by that key groups the entries by chunk and, within one unit,
//! keeps the log's order — which matters, because a 15 is sticky:
//! `14, +1, −1` ends at 15, `14, −1, +1` at 14. 40 bits of unit (m ≤ 2^40) and
//! 23 bits of operation index bound one fold pass to [`MAX_PASS_OPS`]
//! operations. Per logged operation a fold holds 16 bytes (blocked) or
//! `16·k` bytes (standard).

use crate::filter::counting::{nibble, COUNTER_MAX};
use crate::filter::hash::{in_block_position, map_to_range, positions};
use crate::filter::params::{FilterParams, Layout, BLOCK_BITS, WORDS_PER_BLOCK};

use super::log::LogOp;

/// Counter blocks per chunk.
pub(crate) const CHUNK_BLOCKS: u64 = 64;
/// Counters per chunk.
pub(crate) const CHUNK_COUNTERS: u64 = CHUNK_BLOCKS * BLOCK_BITS;
/// The most operations one pass of a fold or an open sorts at once (23 bits).
pub(crate) const MAX_PASS_OPS: u64 = 1 << 23;

/// The most logged operations the log may gather before it is folded (the
/// largest fold threshold). A log holds at most this plus one record's
/// operations, which stays below the 23-bit operation index of the
/// position entries.
pub(crate) const MAX_FOLD_OPS: u64 = MAX_PASS_OPS / 2;
const _: () = assert!(MAX_FOLD_OPS + super::log::MAX_RECORD_OPS as u64 <= MAX_PASS_OPS);

/// Number of chunks of a filter.
pub(crate) fn chunk_count(p: &FilterParams) -> u64 {
    p.num_blocks().div_ceil(CHUNK_BLOCKS)
}

/// Number of blocks in chunk `idx` (`idx < chunk_count`).
pub(crate) fn blocks_in_chunk(p: &FilterParams, idx: u64) -> u64 {
    (p.num_blocks() - idx * CHUNK_BLOCKS).min(CHUNK_BLOCKS)
}

/// One logged operation on one fold unit (see module docs): the sort key
/// `unit << 24 | op_index << 1 | insert`, and the key's `h2` (blocked layout,
/// where the unit is a block and `h2` gives the positions inside it) or 0
/// (standard layout, where the unit is one counter).
pub(crate) type Entry = (u64, u64);

/// Appends the entries of operation number `op_index`.
#[inline]
pub(crate) fn push_entries(p: &FilterParams, op_index: u64, op: LogOp, out: &mut Vec<Entry>) {
    debug_assert!(op_index < MAX_PASS_OPS);
    let tail = (op_index << 1) | op.insert as u64;
    match p.layout() {
        Layout::Blocked => {
            let block = map_to_range(op.hash.h1, p.num_blocks());
            out.push(((block << 24) | tail, op.hash.h2));
        }
        // The split-block layout's eight positions are folded one by one,
        // as the standard layout's are.
        Layout::Standard | Layout::SplitBlock => {
            for &pos in positions(p.layout(), p.m(), p.k(), op.hash).as_slice() {
                out.push(((pos << 24) | tail, 0));
            }
        }
    }
}

/// The fold unit of an entry: a block (blocked layout) or a counter (standard).
#[inline]
fn entry_unit(e: &Entry) -> u64 {
    e.0 >> 24
}

/// Counters per fold unit.
#[inline]
fn unit_counters(layout: Layout) -> u64 {
    match layout {
        Layout::Blocked => BLOCK_BITS,
        Layout::Standard | Layout::SplitBlock => 1,
    }
}

/// The block of an entry (for the dirty map).
#[inline]
pub(crate) fn entry_block(layout: Layout, e: &Entry) -> u64 {
    entry_unit(e) * unit_counters(layout) / BLOCK_BITS
}

/// The chunk of an entry.
#[inline]
pub(crate) fn entry_chunk(layout: Layout, e: &Entry) -> u64 {
    entry_unit(e) * unit_counters(layout) / CHUNK_COUNTERS
}

/// Calls `f` with the distinct in-block positions of a key of the blocked
/// layout, ascending (the same set as [`positions`]): through a 512-bit mask
/// rather than a sort.
#[inline]
fn for_each_in_block(h2: u64, k: u32, mut f: impl FnMut(u64)) {
    let mut mask = [0u64; 8];
    for i in 0..k as usize {
        let pos = in_block_position(h2, i);
        mask[(pos / 64) as usize] |= 1 << (pos % 64);
    }
    for (w, mut bits) in mask.into_iter().enumerate() {
        while bits != 0 {
            f(w as u64 * 64 + bits.trailing_zeros() as u64);
            bits &= bits - 1;
        }
    }
}

/// Applies sorted `entries`, all of chunk `chunk`, to its `counters`.
/// Returns how many counters became saturated (a 15 is never decremented,
/// so that count only grows). A decrement of a zero counter cannot come from
/// a validated log and is ignored (it leaves a zero, which can only drop bits
/// that no key holds).
pub(crate) fn apply_entries(
    p: &FilterParams,
    counters: &mut [u8],
    chunk: u64,
    entries: &[Entry],
) -> u64 {
    let base = chunk * CHUNK_COUNTERS;
    let mut saturated = 0;
    let mut one = |i: usize, insert: bool| {
        if insert {
            let before = nibble::get(counters, i);
            saturated += (nibble::inc(counters, i) == COUNTER_MAX && before < COUNTER_MAX) as u64;
        } else {
            nibble::dec(counters, i);
        }
    };
    for e in entries {
        let insert = e.0 & 1 == 1;
        match p.layout() {
            Layout::Blocked => {
                let first = (entry_unit(e) * BLOCK_BITS - base) as usize;
                for_each_in_block(e.1, p.k(), |pos| one(first + pos as usize, insert));
            }
            Layout::Standard | Layout::SplitBlock => one((entry_unit(e) - base) as usize, insert),
        }
    }
    saturated
}

/// Splits sorted entries into runs of one chunk each: `(chunk, entries)`.
pub(crate) fn by_chunk(layout: Layout, entries: &[Entry]) -> impl Iterator<Item = (u64, &[Entry])> {
    let mut rest = entries;
    std::iter::from_fn(move || {
        let first = rest.first()?;
        let chunk = entry_chunk(layout, first);
        let end = rest.partition_point(|e| entry_chunk(layout, e) == chunk);
        let (run, tail) = rest.split_at(end);
        rest = tail;
        Some((chunk, run))
    })
}

/// Sorts entries by unit, keeping the log's order within a unit.
pub(crate) fn sort_entries(entries: &mut [Entry]) {
    entries.sort_unstable_by_key(|e| e.0);
}

/// Writes the eight words of block `b` from its 256 bytes of counters.
#[inline]
pub(crate) fn store_block_words(bits: &crate::filter::bloom::BitFilter, b: u64, counters: &[u8]) {
    let first = b as usize * WORDS_PER_BLOCK;
    for (w, c) in counters.chunks_exact(32).enumerate() {
        bits.store_word(first + w, nonzero_word(c));
    }
}

/// The "counter > 0" word of 64 counters packed in 32 bytes: bit `j` is set
/// when counter `j` is non-zero. Branch-free: the two nibbles of each byte are
/// tested with a SWAR trick on 8 bytes at a time.
#[inline]
pub(crate) fn nonzero_word(bytes32: &[u8]) -> u64 {
    let mut w = 0u64;
    for (q, chunk) in bytes32.chunks_exact(8).enumerate() {
        let mut a = [0u8; 8];
        a.copy_from_slice(chunk);
        let x = u64::from_le_bytes(a);
        // Per byte: bit 0 = low nibble non-zero, bit 4 = high nibble non-zero.
        let lo = x & 0x0f0f_0f0f_0f0f_0f0f;
        let hi = (x >> 4) & 0x0f0f_0f0f_0f0f_0f0f;
        let lo_nz = ((lo + 0x0f0f_0f0f_0f0f_0f0f) >> 4) & 0x0101_0101_0101_0101;
        let hi_nz = ((hi + 0x0f0f_0f0f_0f0f_0f0f) >> 4) & 0x0101_0101_0101_0101;
        // Interleave: counter 2j is lo of byte j, counter 2j+1 is hi of byte j.
        let mut bits = 0u64;
        for j in 0..8 {
            bits |= ((lo_nz >> (8 * j)) & 1) << (2 * j);
            bits |= ((hi_nz >> (8 * j)) & 1) << (2 * j + 1);
        }
        w |= bits << (16 * q);
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::counting::COUNTER_BLOCK_BYTES;
    use crate::filter::hash::{HashSpec, KeyHash};
    use crate::filter::params::Layout;

    #[test]
    fn nonzero_word_matches_the_core_definition() {
        let mut b = [0u8; 32];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..2000 {
            for byte in b.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Mostly zeros and small counters, some 15s.
                *byte = match x % 5 {
                    0 => (x >> 8) as u8,
                    1 => 0xf0,
                    2 => 0x0f,
                    _ => 0,
                };
            }
            assert_eq!(nonzero_word(&b), nibble::nonzero_word(&b), "round {round}");
        }
    }

    #[test]
    fn entries_keep_log_order_within_a_unit() {
        for layout in [Layout::Blocked, Layout::Standard] {
            let p = FilterParams::new(layout, 512, 1, HashSpec::xxh3(1)).unwrap();
            let h = KeyHash { h1: 3, h2: 5 };
            let pos = positions(layout, 512, 1, h).as_slice()[0] as usize;
            // Counter at 14: insert then remove → 15 (sticky, and newly
            // saturated); remove then insert → 14.
            for (first, expect, newly) in [(true, 15, 1), (false, 14, 0)] {
                let mut e = Vec::new();
                for (i, insert) in [first, !first].into_iter().enumerate() {
                    push_entries(&p, i as u64, LogOp { insert, hash: h }, &mut e);
                }
                sort_entries(&mut e);
                let mut c = vec![0u8; 256];
                nibble::set(&mut c, pos, 14);
                assert_eq!(apply_entries(&p, &mut c, 0, &e), newly);
                assert_eq!(nibble::get(&c, pos), expect, "{layout}");
            }
        }
    }

    #[test]
    fn entries_touch_the_same_counters_as_the_core() {
        for layout in [Layout::Blocked, Layout::Standard] {
            let p = FilterParams::new(layout, 512 * (2 * CHUNK_BLOCKS + 9), 7, HashSpec::xxh3(9))
                .unwrap();
            let mut core = crate::filter::counting::CountingFilter::new(p).unwrap();
            let mut counters = vec![0u8; crate::filter::counting::counter_bytes(&p)];
            let mut e = Vec::new();
            for i in 0..500u32 {
                let key = i.to_le_bytes();
                core.insert(&key);
                let hash = p.hash().hash(&key);
                push_entries(&p, i as u64, LogOp { insert: true, hash }, &mut e);
            }
            sort_entries(&mut e);
            for (chunk, run) in by_chunk(p.layout(), &e) {
                let at = chunk as usize * CHUNK_BLOCKS as usize * COUNTER_BLOCK_BYTES;
                let len = blocks_in_chunk(&p, chunk) as usize * COUNTER_BLOCK_BYTES;
                apply_entries(&p, &mut counters[at..at + len], chunk, run);
            }
            assert_eq!(counters, core.as_bytes(), "{layout}");
        }
    }
}
