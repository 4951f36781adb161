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
//! `16·k` bytes (standard). An open sorts them ([`sort_entries`]); a fold
//! groups them by chunk with a counting sort over two reads of the log
//! ([`ByChunk`]), which keeps the log's order within a chunk, hence within
//! a unit, without comparing.

use crate::filter::counting::{
    for_each_distinct_in_block, nibble, COUNTER_BLOCK_BYTES, COUNTER_MAX,
};
use crate::filter::hash::map_to_range;
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
    for_each_entry(p, op_index, op, |e| out.push(e));
}

/// Calls `f` with each entry of operation number `op_index`.
#[inline]
fn for_each_entry(p: &FilterParams, op_index: u64, op: LogOp, mut f: impl FnMut(Entry)) {
    debug_assert!(op_index < MAX_PASS_OPS);
    let tail = (op_index << 1) | op.insert as u64;
    match p.layout() {
        Layout::Blocked => {
            let block = map_to_range(op.hash.h1, p.num_blocks());
            f(((block << 24) | tail, op.hash.h2));
        }
        // The split-block layout's eight positions are folded one by one,
        // as the standard layout's are.
        Layout::Standard | Layout::SplitBlock => {
            for &pos in p.positions(op.hash).as_slice() {
                f(((pos << 24) | tail, 0));
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
    match p.layout() {
        Layout::Blocked => {
            // One block's 256 bytes at a time, each counter updated without
            // a branch (`nibble::inc_in`, `dec_in`), the positions in probe
            // order with a well-predicted test for a repeat: reading them
            // off the block's eight mask words mispredicted on every entry
            // (perf: 48 ns per entry of a fold, against 10).
            for e in entries {
                let first = (entry_unit(e) * BLOCK_BITS - base) as usize / 2;
                let Some(block) = counters
                    .get_mut(first..first + COUNTER_BLOCK_BYTES)
                    .and_then(|b| <&mut [u8; COUNTER_BLOCK_BYTES]>::try_from(b).ok())
                else {
                    continue;
                };
                if e.0 & 1 == 1 {
                    for_each_distinct_in_block(p, e.1, |pos| {
                        let before = nibble::inc_in(block, pos);
                        saturated += u64::from(before == COUNTER_MAX - 1);
                    });
                } else {
                    for_each_distinct_in_block(p, e.1, |pos| {
                        nibble::dec_in(block, pos);
                    });
                }
            }
        }
        Layout::Standard | Layout::SplitBlock => {
            for e in entries {
                let i = (entry_unit(e) - base) as usize;
                if e.0 & 1 == 1 {
                    let before = nibble::get(counters, i);
                    saturated +=
                        (nibble::inc(counters, i) == COUNTER_MAX && before < COUNTER_MAX) as u64;
                } else {
                    nibble::dec(counters, i);
                }
            }
        }
    }
    saturated
}

/// The entries of a log grouped by chunk, in log order within each chunk,
/// without a sort: a counting sort over two passes of the log's
/// operations. The first pass counts the entries of each chunk
/// ([`ByChunk::count`]), the second puts each entry in the place its
/// chunk's count leaves for it ([`ByChunk::place`]). It is stable, so it
/// keeps the log's order within a unit, as [`sort_entries`] does; its work
/// is linear in the entries. A fold of 3.09M operations into a 10M-key
/// table spent 298 ms of CPU with the comparison sort, most of it in the
/// sort and the per-entry updates.
pub(crate) struct ByChunk {
    p: FilterParams,
    /// Entries per chunk (pass 1), then the next free place of each chunk
    /// (pass 2).
    cursor: Vec<u64>,
    entries: Vec<Entry>,
    placed: u64,
}

impl ByChunk {
    /// For a table of `p`: one counter per chunk, 8 bytes each
    /// ([`ByChunk::memory`]).
    pub(crate) fn new(p: &FilterParams) -> ByChunk {
        ByChunk {
            p: *p,
            cursor: vec![0; chunk_count(p) as usize],
            entries: Vec::new(),
            placed: 0,
        }
    }

    /// Bytes it holds beside the entries, for a table of `p`.
    pub(crate) fn memory(p: &FilterParams) -> u64 {
        chunk_count(p) * 8
    }

    /// Pass 1: counts the entries of `op`.
    #[inline]
    pub(crate) fn count(&mut self, op: LogOp) {
        let p = self.p;
        for_each_entry(&p, 0, op, |e| {
            self.cursor[entry_chunk(p.layout(), &e) as usize] += 1
        });
    }

    /// Between the passes: room for every counted entry, each chunk's place
    /// starting after the chunks before it. The caller has reserved
    /// [`entry_bytes`](crate::store::table) for them.
    pub(crate) fn start_placing(&mut self) -> Result<(), std::collections::TryReserveError> {
        let mut at = 0;
        for c in self.cursor.iter_mut() {
            let n = *c;
            *c = at;
            at += n;
        }
        self.entries.try_reserve_exact(at as usize)?;
        self.entries.resize(at as usize, (0, 0));
        Ok(())
    }

    /// Pass 2: places the entries of operation number `op_index`, `op`
    /// (the same operations, in the same order, as pass 1 counted).
    #[inline]
    pub(crate) fn place(&mut self, op_index: u64, op: LogOp) {
        let p = self.p;
        let (cursor, entries) = (&mut self.cursor, &mut self.entries);
        let mut placed = 0;
        for_each_entry(&p, op_index, op, |e| {
            let c = &mut cursor[entry_chunk(p.layout(), &e) as usize];
            if let Some(slot) = entries.get_mut(*c as usize) {
                *slot = e;
            }
            *c += 1;
            placed += 1;
        });
        self.placed += placed;
    }

    /// The entries, grouped by chunk in chunk order; `None` if pass 2 did
    /// not place as many as pass 1 counted (the log changed between them).
    pub(crate) fn finish(self) -> Option<Vec<Entry>> {
        (self.placed == self.entries.len() as u64).then_some(self.entries)
    }
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
            let pos = p.positions(h).as_slice()[0] as usize;
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

    /// 20,000 seeded operations on a pool of 300 keys, keys 0-3 inserted
    /// dozens of times (saturation), removes only of keys inserted more
    /// often than removed.
    fn seeded_ops(p: &FilterParams) -> Vec<LogOp> {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut live = std::collections::HashMap::<u32, u32>::new();
        let mut ops = Vec::new();
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = if x.is_multiple_of(10) {
                (x >> 8) as u32 % 4
            } else {
                (x >> 8) as u32 % 300
            };
            let count = live.entry(key).or_insert(0);
            let insert = *count == 0 || !x.is_multiple_of(3);
            *count = if insert { *count + 1 } else { *count - 1 };
            ops.push(LogOp {
                insert,
                hash: p.hash().hash(&key.to_le_bytes()),
            });
        }
        ops
    }

    /// `ops` applied one by one, in order, to a copy of `counters`: the
    /// counters, and how many reached the maximum.
    fn one_by_one(p: &FilterParams, counters: &[u8], ops: &[LogOp]) -> (Vec<u8>, u64) {
        let mut counters = counters.to_vec();
        let mut saturated = 0;
        for op in ops {
            for &q in p.positions(op.hash).as_slice() {
                let before = nibble::get(&counters, q as usize);
                if op.insert {
                    nibble::inc(&mut counters, q as usize);
                    saturated += u64::from(before == COUNTER_MAX - 1);
                } else {
                    nibble::dec(&mut counters, q as usize);
                }
            }
        }
        (counters, saturated)
    }

    #[test]
    fn entries_grouped_by_chunk_fold_as_the_operations_in_log_order() {
        // Seeded operations on a pool of 300 keys, some inserted dozens of
        // times (saturation), removes only of keys inserted more often than
        // removed, over counters that already hold keys: the entries grouped
        // by `ByChunk` and applied chunk by chunk leave the bytes, and count
        // the saturations, of the operations applied one by one in log
        // order (and so do the entries sorted by `sort_entries`).
        for (layout, k, hash) in [
            (Layout::Blocked, 7, HashSpec::xxh3(9)),
            (Layout::Standard, 7, HashSpec::xxh3(9)),
            (Layout::SplitBlock, 8, HashSpec::xxh64()),
        ] {
            let p = FilterParams::new(layout, 512 * (2 * CHUNK_BLOCKS + 9), k, hash).unwrap();
            let mut start = crate::filter::counting::CountingFilter::new(p).unwrap();
            for i in 0..2_000u32 {
                start.insert(&(i + 1_000_000).to_le_bytes());
            }
            let ops = seeded_ops(&p);
            // The reference: each operation in log order on the whole array.
            let (reference, sat_reference) = one_by_one(&p, start.as_bytes(), &ops);
            assert!(
                sat_reference > 0,
                "{layout}: nothing saturated, the test tests less"
            );
            let (grouped, sorted) = (group(&p, &ops, 0).unwrap(), sort(&p, &ops));
            for (how, entries) in [("grouped", &grouped), ("sorted", &sorted)] {
                let mut counters = start.as_bytes().to_vec();
                let mut saturated = 0;
                for (chunk, run) in by_chunk(p.layout(), entries) {
                    let at = chunk as usize * CHUNK_BLOCKS as usize * COUNTER_BLOCK_BYTES;
                    let len = blocks_in_chunk(&p, chunk) as usize * COUNTER_BLOCK_BYTES;
                    saturated += apply_entries(&p, &mut counters[at..at + len], chunk, run);
                }
                assert!(counters == reference, "{layout} {how}: the counters differ");
                assert_eq!(saturated, sat_reference, "{layout} {how}");
            }
            // One operation fewer in pass 2 than in pass 1: refused.
            assert!(group(&p, &ops, 1).is_none(), "{layout}");
        }
    }

    /// The entries of `ops` grouped by [`ByChunk`]: every operation
    /// counted, all but the first `skip` placed.
    fn group(p: &FilterParams, ops: &[LogOp], skip: usize) -> Option<Vec<Entry>> {
        let mut grouped = ByChunk::new(p);
        for op in ops {
            grouped.count(*op);
        }
        grouped.start_placing().unwrap();
        for (i, op) in ops.iter().enumerate().skip(skip) {
            grouped.place(i as u64, *op);
        }
        grouped.finish()
    }

    /// The entries of `ops` sorted by [`sort_entries`].
    fn sort(p: &FilterParams, ops: &[LogOp]) -> Vec<Entry> {
        let mut sorted = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            push_entries(p, i as u64, *op, &mut sorted);
        }
        sort_entries(&mut sorted);
        sorted
    }
}
