//! The bulk inserts (`insert_many`, `insert_many_mut` and their hashed
//! forms): a ring of keys hashed, placed and prefetched [`INSERT_AHEAD`]
//! keys before their bits are set, so the cache misses of many inserts
//! overlap. One loop per layout, chosen once per call (not per key), each
//! hashing with its layout's one algorithm, compiled once per probe
//! (`filter::simd`).
//!
//! Callgrind, 200,000 16-byte keys, 10 bits per key (lab loop,
//! `insert_many_mut`): the split-block layout 98 → 52 instructions per key
//! against one generic loop that matched on the layout and the hash
//! algorithm per key and computed the block twice.

use super::probe::{block_of, insert_standard, prefetch, prefetch_standard, Alone, Locked, WordOr};
use super::{stripes, BitFilter};
use crate::filter::geometry::WORDS_PER_BLOCK;
use crate::filter::hash::{
    for_each_standard_position, HashAlgo, KeyHash, KeyHasher, Xxh3Hasher, Xxh3_64Hasher,
    Xxh3_64SectorizedHasher, Xxh64Hasher,
};
use crate::filter::params::{split_block_of, FilterParams, Layout};
use crate::filter::simd::{
    base_kind, k_of, row_k, with_row_k, HashInsert, Job, MaskWay, Probe, SharedBlock, BLOCKED32,
    SECTORIZED, SPLIT, STANDARD,
};
use std::sync::atomic::AtomicU64;

/// Keys hashed ahead, their lines prefetched, in the bulk inserts (the
/// batched lookup's depth: 16 ahead hides a miss behind the work of 16 keys).
pub(crate) const INSERT_AHEAD: usize = 16;

/// Where a bulk insert's hashes come from.
pub(super) trait HashSource: Copy {
    /// How many keys.
    fn count(self) -> usize;
    /// The hash of key `i` under `hasher` (the filter's algorithm and seed).
    fn hash<H: KeyHasher>(self, hasher: H, i: usize) -> KeyHash;
}

/// Keys, hashed here.
pub(super) struct Keys<'a, K>(pub(super) &'a [K]);

impl<K> Clone for Keys<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K> Copy for Keys<'_, K> {}

impl<K: AsRef<[u8]>> HashSource for Keys<'_, K> {
    #[inline(always)]
    fn count(self) -> usize {
        self.0.len()
    }
    #[inline(always)]
    fn hash<H: KeyHasher>(self, hasher: H, i: usize) -> KeyHash {
        hasher.hash(self.0[i].as_ref())
    }
}

/// Keys hashed by the caller with the filter's spec.
#[derive(Clone, Copy)]
pub(super) struct Hashes<'a>(pub(super) &'a [KeyHash]);

impl HashSource for Hashes<'_> {
    #[inline(always)]
    fn count(self) -> usize {
        self.0.len()
    }
    #[inline(always)]
    fn hash<H: KeyHasher>(self, _: H, i: usize) -> KeyHash {
        self.0[i]
    }
}

/// Runs `each` over what `enter` returns for `0..n`, in order, each one
/// [`INSERT_AHEAD`] entries after it entered (`enter` prefetches); returns
/// the sum of what `each` returns. `state` is lent to both in turn.
///
/// The closures given are `#[inline(always)]`: a closure is a function of
/// its own, compiled without the AVX2 features of the `run_avx2` it is
/// defined in, and one left out of line cannot inline the vector
/// intrinsics it calls (callgrind: 166 instructions per key instead of 52).
#[inline(always)]
fn ring<S: ?Sized, T: Copy + Default>(
    n: usize,
    state: &mut S,
    enter: impl Fn(&S, usize) -> T,
    mut each: impl FnMut(&mut S, T) -> u64,
) -> u64 {
    let mut ring = [T::default(); INSERT_AHEAD];
    for (i, slot) in ring.iter_mut().enumerate().take(n) {
        *slot = enter(state, i);
    }
    let mut sum = 0;
    for i in INSERT_AHEAD..n {
        let t = std::mem::replace(&mut ring[i % INSERT_AHEAD], enter(state, i));
        sum += each(state, t);
    }
    for i in n.saturating_sub(INSERT_AHEAD)..n {
        sum += each(state, ring[i % INSERT_AHEAD]);
    }
    sum
}

/// `BitFilter::insert_many` and `BitFilter::insert_hashes` as a
/// [`Job`]: compiled once more with AVX2 (`mulx` in the hash and the range
/// map, `shlx` for the bits, the vector positions), run with the best this
/// CPU has. Sets each bit with `O` (the atomic OR of `BitFilter::insert`,
/// or the plain store of a filter one thread writes), where the word lacks
/// it.
pub(super) struct BulkInsert<'a, S, O> {
    /// The filter's parameters.
    pub(super) p: FilterParams,
    /// The filter's bits.
    pub(super) blocks: &'a [SharedBlock],
    pub(super) src: S,
    pub(super) or: O,
}

impl<S: HashSource, O: WordOr> Job for BulkInsert<'_, S, O> {
    type Out = u64;
    #[inline(always)]
    fn run<P: Probe>(self, probe: P) -> u64 {
        // `or` carries only its type, `O`.
        let (p, blocks, src, _) = (self.p, self.blocks, self.src, self.or);
        let seed = p.hash().seed;
        match (p.layout(), p.hash().algo) {
            (Layout::Blocked, HashAlgo::Xxh3_64) => with_row_k!(
                p.k(),
                K,
                insert_blocked::<S, O, P, _, K>(p, blocks, src, probe, Xxh3_64Hasher(seed))
            ),
            (Layout::Blocked, HashAlgo::Xxh3_64Sectorized) => {
                let hasher = Xxh3_64SectorizedHasher(seed);
                insert_blocked::<S, O, P, _, 8>(p, blocks, src, probe, hasher)
            }
            (Layout::Blocked, _) => with_row_k!(
                p.k(),
                K,
                insert_blocked::<S, O, P, _, K>(p, blocks, src, probe, Xxh3Hasher(seed))
            ),
            (Layout::SplitBlock, _) => insert_split_block::<S, O, P>(p, blocks, src, probe),
            (Layout::Standard, _) => insert_standard_layout::<S, O>(p, blocks, src),
        }
    }
}

/// [`BulkInsert`] into a blocked filter whose keys `hasher` hashes: how
/// many keys changed a bit. Compiled for `k = K` (`with_row_k`).
#[inline(always)]
fn insert_blocked<S: HashSource, O: WordOr, P: Probe, H: KeyHasher, const K: u32>(
    p: FilterParams,
    mut blocks: &[SharedBlock],
    src: S,
    probe: P,
    hasher: H,
) -> u64 {
    let n = src.count();
    let k = row_k::<K>(p.k());
    ring(
        n,
        &mut blocks,
        #[inline(always)]
        |blocks: &&[SharedBlock], i| {
            let h = src.hash(hasher, i);
            let b = block_of(&p, h);
            prefetch(&blocks[b]);
            (b, h.h2)
        },
        #[inline(always)]
        |blocks, (b, h2)| u64::from(O::or_block(&blocks[b].0, masks_of::<H, P>(probe, h2, k))),
    )
}

/// The word masks of a key's in-block positions in a blocked filter whose
/// keys `H` hashes, for a bulk loop (built by shifts, [`MaskWay::Shifts`]):
/// from 32-bit products when `h2` is `h << 32` (one `vpmulld` for eight
/// positions with AVX2), else from 64-bit ones; the sector bits of
/// `lo32(h)` for the sectorized hash.
#[inline(always)]
fn masks_of<H: KeyHasher, P: Probe>(probe: P, h2: u64, k: u32) -> [u64; WORDS_PER_BLOCK] {
    if H::SECTORIZED {
        probe.sector_masks((h2 >> 32) as u32)
    } else if H::H2_SHIFTED {
        probe.block_masks32((h2 >> 32) as u32, k, MaskWay::Shifts)
    } else {
        probe.block_masks(h2, k, MaskWay::Shifts)
    }
}

/// [`masks_of`] for a blocked kind ([`BLOCKED32`], [`SECTORIZED`] or
/// `BLOCKED`), for a key-by-key insert: built by windows
/// ([`MaskWay::Windows`]).
#[inline(always)]
fn kind_masks<P: Probe>(probe: P, kind: u8, h2: u64, k: u32) -> [u64; WORDS_PER_BLOCK] {
    match kind {
        SECTORIZED => probe.sector_masks((h2 >> 32) as u32),
        BLOCKED32 => probe.block_masks32((h2 >> 32) as u32, k, MaskWay::Windows),
        _ => probe.block_masks(h2, k, MaskWay::Windows),
    }
}

/// [`BulkInsert`] into a split-block filter.
#[inline(always)]
fn insert_split_block<S: HashSource, O: WordOr, P: Probe>(
    p: FilterParams,
    mut blocks: &[SharedBlock],
    src: S,
    probe: P,
) -> u64 {
    let n = src.count();
    let h64 = Xxh64Hasher(p.hash().seed);
    ring(
        n,
        &mut blocks,
        #[inline(always)]
        |blocks: &&[SharedBlock], i| {
            let h = src.hash(h64, i);
            let b = split_block_of(&p, h);
            prefetch(&SharedBlock::split_halves(blocks)[b]);
            (b, h.h1 as u32)
        },
        #[inline(always)]
        |blocks, (b, x)| {
            let half = &SharedBlock::split_halves(blocks)[b];
            u64::from(O::or_block(&half.0, probe.split_word_masks(x)))
        },
    )
}

/// [`BulkInsert`] into a standard filter.
#[inline(always)]
fn insert_standard_layout<S: HashSource, O: WordOr>(
    p: FilterParams,
    mut blocks: &[SharedBlock],
    src: S,
) -> u64 {
    let n = src.count();
    let h3 = Xxh3Hasher(p.hash().seed);
    ring(
        n,
        &mut blocks,
        #[inline(always)]
        |blocks: &&[SharedBlock], i| {
            let h = src.hash(h3, i);
            prefetch_standard(SharedBlock::flat(blocks), &p, h);
            h
        },
        #[inline(always)]
        |blocks, h| u64::from(insert_standard::<O>(SharedBlock::flat(blocks), &p, h)),
    )
}

/// `BitFilter::insert_many_mut` and `BitFilter::insert_hashes_mut` as
/// a [`Job`] (see [`BulkInsert`]): plain loads and stores, the filter being
/// borrowed exclusively.
pub(super) struct BulkInsertMut<'a, S> {
    /// The filter's parameters.
    pub(super) p: FilterParams,
    /// The filter's bits, borrowed exclusively.
    pub(super) blocks: &'a mut [SharedBlock],
    pub(super) src: S,
}

impl<S: HashSource> Job for BulkInsertMut<'_, S> {
    /// How many keys found one of their bits clear (as `insert` counts).
    type Out = u64;
    #[inline(always)]
    fn run<P: Probe>(self, probe: P) -> u64 {
        let (p, blocks, src) = (self.p, self.blocks, self.src);
        let seed = p.hash().seed;
        match (p.layout(), p.hash().algo) {
            (Layout::Blocked, HashAlgo::Xxh3_64) => with_row_k!(
                p.k(),
                K,
                insert_blocked_mut::<S, P, _, K>(p, blocks, src, probe, Xxh3_64Hasher(seed))
            ),
            (Layout::Blocked, HashAlgo::Xxh3_64Sectorized) => {
                let hasher = Xxh3_64SectorizedHasher(seed);
                insert_blocked_mut::<S, P, _, 8>(p, blocks, src, probe, hasher)
            }
            (Layout::Blocked, _) => with_row_k!(
                p.k(),
                K,
                insert_blocked_mut::<S, P, _, K>(p, blocks, src, probe, Xxh3Hasher(seed))
            ),
            (Layout::SplitBlock, _) => insert_split_block_mut(p, blocks, src, probe),
            (Layout::Standard, _) => insert_standard_mut(p, blocks, src),
        }
    }
}

/// [`BulkInsertMut`] into a blocked filter, compiled for `k = K`
/// (`with_row_k`).
#[inline(always)]
fn insert_blocked_mut<S: HashSource, P: Probe, H: KeyHasher, const K: u32>(
    p: FilterParams,
    blocks: &mut [SharedBlock],
    src: S,
    probe: P,
    hasher: H,
) -> u64 {
    let n = src.count();
    let k = row_k::<K>(p.k());
    ring(
        n,
        blocks,
        #[inline(always)]
        |blocks: &[SharedBlock], i| {
            let h = src.hash(hasher, i);
            let b = block_of(&p, h);
            prefetch(&blocks[b]);
            (b, h.h2)
        },
        #[inline(always)]
        |blocks, (b, h2)| {
            // The key's masks built in registers (`Probe::block_masks`),
            // then the prefetched block ORed as two registers. ORing each
            // position straight into its word was fewer instructions (146
            // against 159 per key when the masks were scattered through
            // the stack) but slower: shared `insert_many` of 1M `u64` ids,
            // which runs this on its copy, 8.7–9.0 → 6.4–6.6 ns per key
            // (`peers` bench, two pairs).
            u64::from(probe.block_or_mut(&mut blocks[b], masks_of::<H, P>(probe, h2, k)))
        },
    )
}

/// Sets the standard-layout positions of `h` in `words` (a filter of `m`
/// bits), held exclusively; returns whether one was clear.
#[inline(always)]
fn standard_set_mut(words: &mut [AtomicU64], m: u64, k: u32, h: KeyHash) -> bool {
    let mut clear = 0;
    for_each_standard_position(h, m, k, |pos| {
        let (word, bit) = (words[(pos / 64) as usize].get_mut(), 1 << (pos % 64));
        clear |= !*word & bit;
        *word |= bit;
        true
    });
    clear != 0
}

/// `BitFilter::insert_hash_mut`: one key's bits set with plain loads and
/// stores in a filter borrowed exclusively, through the filter's
/// [`InsertFn`](crate::filter::simd::InsertFn); whether one was clear.
impl HashInsert for BitFilter {
    #[inline(always)]
    fn insert_mut_with<P: Probe, const KIND: u8>(&mut self, probe: P, h: KeyHash) -> bool {
        let p = self.params;
        // A constant where the insert was compiled for this filter's `k`.
        let k = k_of(KIND, p.k());
        match base_kind(KIND) {
            STANDARD => standard_set_mut(SharedBlock::flat_mut(&mut self.blocks), p.m(), k, h),
            SPLIT => {
                let halves = SharedBlock::split_halves_mut(&mut self.blocks);
                probe.split_insert_mut(&mut halves[split_block_of(&p, h)], h.h1 as u32)
            }
            // The key's masks first, then the block read and written once: a
            // key-by-key insert's line is not prefetched, and ORing position
            // by position into a line still on its way (loads of words that
            // earlier probes just stored to) measured slower (lab loop of
            // `insert_mut`, 10M keys, this 2-core machine at load 5: 106 ns
            // per 16-byte key against 90, 74 per `u64` key against 66).
            kind => {
                let masks = kind_masks(probe, kind, h.h2, k);
                probe.block_or_mut(self.blocks.of_hash_mut(h.h1), masks)
            }
        }
    }

    /// `BitFilter::insert_hash` when this thread does not hold the write
    /// bias: the masks from `probe` (the AVX2 one where the CPU has it: one
    /// `vpmulld` for eight positions), the block ORed under its line's
    /// stripe lock (`bloom::stripes`), the standard layout's words with
    /// atomic ORs.
    #[inline(always)]
    fn insert_shared_with<P: Probe, const KIND: u8>(&self, probe: P, h: KeyHash) -> bool {
        let p = self.params;
        let blocks = &self.blocks[..];
        let k = k_of(KIND, p.k());
        match base_kind(KIND) {
            STANDARD => insert_standard::<Locked>(SharedBlock::flat(blocks), &p, h),
            SPLIT => {
                let half = &SharedBlock::split_halves(blocks)[split_block_of(&p, h)];
                let masks = probe.split_word_masks(h.h1 as u32);
                let lacks = probe.shared_split_lacks(half, &masks);
                if lacks {
                    stripes::or_lacking(&half.0, masks);
                }
                lacks
            }
            kind => {
                let block = self.blocks.of_hash(h.h1);
                let masks = kind_masks(probe, kind, h.h2, k);
                let lacks = probe.shared_block_lacks(block, &masks);
                if lacks {
                    stripes::or_lacking(&block.0, masks);
                }
                lacks
            }
        }
    }

    /// `BitFilter::insert_hash` by the holder of the write bias
    /// (`bloom::bias`): the same bits, each block read, ORed and stored
    /// with plain atomic accesses ([`Alone`], `Probe::shared_block_or_alone`),
    /// no locked instruction.
    #[inline(always)]
    fn insert_owned_with<P: Probe, const KIND: u8>(&self, probe: P, h: KeyHash) -> bool {
        let p = self.params;
        let blocks = &self.blocks[..];
        let k = k_of(KIND, p.k());
        match base_kind(KIND) {
            STANDARD => insert_standard::<Alone>(SharedBlock::flat(blocks), &p, h),
            SPLIT => {
                let half = &SharedBlock::split_halves(blocks)[split_block_of(&p, h)];
                probe.shared_split_or_alone(half, &probe.split_word_masks(h.h1 as u32))
            }
            kind => {
                let masks = kind_masks(probe, kind, h.h2, k);
                probe.shared_block_or_alone(self.blocks.of_hash(h.h1), &masks)
            }
        }
    }
}

/// [`BulkInsertMut`] into a split-block filter.
#[inline(always)]
fn insert_split_block_mut<S: HashSource, P: Probe>(
    p: FilterParams,
    blocks: &mut [SharedBlock],
    src: S,
    probe: P,
) -> u64 {
    let n = src.count();
    let h64 = Xxh64Hasher(p.hash().seed);
    ring(
        n,
        blocks,
        #[inline(always)]
        |blocks: &[SharedBlock], i| {
            let h = src.hash(h64, i);
            let b = split_block_of(&p, h);
            prefetch(&SharedBlock::split_halves(blocks)[b]);
            (b, h.h1 as u32)
        },
        #[inline(always)]
        |blocks, (b, x)| {
            let half = &mut SharedBlock::split_halves_mut(blocks)[b];
            u64::from(probe.split_insert_mut(half, x))
        },
    )
}

/// [`BulkInsertMut`] into a standard filter.
#[inline(always)]
fn insert_standard_mut<S: HashSource>(p: FilterParams, blocks: &mut [SharedBlock], src: S) -> u64 {
    let n = src.count();
    let h3 = Xxh3Hasher(p.hash().seed);
    let (m, k) = (p.m(), p.k());
    ring(
        n,
        blocks,
        #[inline(always)]
        |blocks: &[SharedBlock], i| {
            let h = src.hash(h3, i);
            let words = SharedBlock::flat(blocks);
            for_each_standard_position(h, m, k, |pos| {
                if let Some(w) = words.get((pos / 64) as usize) {
                    prefetch(w);
                }
                true
            });
            h
        },
        #[inline(always)]
        |blocks, h| u64::from(standard_set_mut(SharedBlock::flat_mut(blocks), m, k, h)),
    )
}
