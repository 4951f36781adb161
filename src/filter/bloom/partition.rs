//! The partitioned batched lookup, for filters larger than the last-level
//! cache (radix-partitioned probing: Schmidt, Bandle and Giceva, "A
//! four-dimensional analysis of partitioned approximate filters", PVLDB
//! 14(11), 2021). A batch is probed in rounds of up to [`ROUND_KEYS`] keys:
//!
//! 1. every key of the round is hashed and placed (block index, the probe's
//!    hash bits, its place in the batch), and counted into the partition of
//!    its block: blocks `[j·2^s, (j+1)·2^s)` for partition `j`, a range of
//!    at most [`PART_BYTES`] of the filter;
//! 2. the entries are scattered into partition order;
//! 3. the partitions are probed in order, each entry's block prefetched
//!    [`AHEAD`] entries before it is tested.
//!
//! Step 3 walks the filter range by range: the blocks a range's keys touch
//! share a few pages (64 base pages for 256 KiB), so their translations stay
//! in the TLB and the page walks of a random probe order disappear, and
//! blocks two keys share are read once from memory. What it costs is the
//! two passes over the entries (16 bytes per key, sequential). The `peers`
//! bench's large point measures it against the pipeline on a 1 GiB filter.

use super::BloomRead;
use std::mem::size_of;

/// Keys per round: the scratch memory of a round is two arrays of
/// [`Entry`], 32 MiB at most, whatever the batch.
pub(super) const ROUND_KEYS: usize = 1 << 20;
/// The most filter bytes one partition covers.
const PART_BYTES: usize = 256 << 10;
/// The most partitions (their counters stay in L1).
const MAX_PARTS: usize = 1 << 14;
/// Entries ahead whose block is prefetched while one is tested.
const AHEAD: usize = 16;

/// One key of a round.
#[derive(Clone, Copy, Default)]
struct Entry {
    /// The key's block.
    block: u32,
    /// The key's place in the round.
    idx: u32,
    /// What the probe needs of the hash (`h2`, or the split-block hash).
    h: u64,
}

const _: () = assert!(size_of::<Entry>() == 16);

/// The scratch memory of [`partitioned`]: a round's keys as placed, then in
/// partition order, and the partitions' starts.
struct Scratch {
    /// A block's partition is its index shifted right by this.
    shift: u32,
    placed: Vec<Entry>,
    sorted: Vec<Entry>,
    starts: Vec<u32>,
}

impl Scratch {
    /// The scratch for `keys` keys into `count` blocks of `bytes` bytes;
    /// `None` if its memory cannot be had.
    #[inline(always)]
    fn new(count: u64, bytes: usize, keys: usize) -> Option<Scratch> {
        let per_part = (PART_BYTES / bytes).max(1) as u64;
        let mut shift = per_part.ilog2();
        while count.div_ceil(1 << shift) > MAX_PARTS as u64 {
            shift += 1;
        }
        let parts = count.div_ceil(1 << shift) as usize;
        let round = keys.min(ROUND_KEYS);
        let (mut placed, mut sorted, mut starts) = (Vec::new(), Vec::new(), Vec::new());
        if placed.try_reserve_exact(round).is_err()
            || sorted.try_reserve_exact(round).is_err()
            || starts.try_reserve_exact(parts + 1).is_err()
        {
            return None;
        }
        sorted.resize(round, Entry::default());
        starts.resize(parts + 1, 0u32);
        Some(Scratch {
            shift,
            placed,
            sorted,
            starts,
        })
    }

    /// Steps 1 and 2 of a round of at most [`ROUND_KEYS`] keys: each key's
    /// block and probe bits from `enter`, then the keys in partition order.
    #[inline(always)]
    fn sort<K, E>(&mut self, keys: &[K], enter: &E) -> &[Entry]
    where
        K: AsRef<[u8]>,
        E: Fn(&[u8]) -> (u64, u64),
    {
        let (shift, placed, starts) = (self.shift, &mut self.placed, &mut self.starts);
        // 1. Place and count.
        placed.clear();
        starts.iter_mut().for_each(|s| *s = 0);
        for (idx, key) in keys.iter().enumerate() {
            let (block, h) = enter(key.as_ref());
            starts[(block >> shift) as usize + 1] += 1;
            placed.push(Entry {
                block: block as u32,
                idx: idx as u32,
                h,
            });
        }
        // 2. Scatter into partition order (`starts[j]`: the next free slot
        //    of partition j, after the prefix sum).
        for j in 1..starts.len() {
            starts[j] += starts[j - 1];
        }
        for e in placed.iter() {
            let slot = &mut starts[(e.block >> shift) as usize];
            self.sorted[*slot as usize] = *e;
            *slot += 1;
        }
        &self.sorted[..keys.len()]
    }
}

/// `out[i]` = whether `keys[i]` may be in `f`, by rounds of partitioned
/// probing, for a filter of `count` blocks of `bytes` bytes (64 or 32;
/// `count ≤ 2^32`): `enter` hashes a key into its block and the bits its
/// probe needs, `test` probes them. Both are `#[inline(always)]` closures
/// (see `bulk::ring`). Returns `false`, having answered nothing, if its
/// scratch memory cannot be had (the caller falls back to the pipeline).
#[inline(always)]
pub(super) fn partitioned<F, K, E, T>(
    f: &F,
    keys: &[K],
    out: &mut [bool],
    (count, bytes): (u64, usize),
    enter: E,
    test: T,
) -> bool
where
    F: BloomRead + ?Sized,
    K: AsRef<[u8]>,
    E: Fn(&[u8]) -> (u64, u64),
    T: Fn(usize, u64) -> bool,
{
    let Some(mut scratch) = Scratch::new(count, bytes, keys.len()) else {
        return false;
    };
    let words_per_block = bytes / 8;
    for (keys, out) in keys.chunks(ROUND_KEYS).zip(out.chunks_mut(ROUND_KEYS)) {
        let sorted = scratch.sort(keys, &enter);
        // 3. Probe in order, prefetching ahead.
        for (j, e) in sorted.iter().enumerate() {
            if let Some(next) = sorted.get(j + AHEAD) {
                f.prefetch_word(next.block as usize * words_per_block);
            }
            if let Some(o) = out.get_mut(e.idx as usize) {
                *o = test(e.block as usize, e.h);
            }
        }
    }
    true
}
