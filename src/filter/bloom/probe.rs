//! The probes of one key: which block, which bits, whether a block holds
//! them all (over any `BloomRead`), and the prefetch hint.

use super::BloomRead;
use crate::filter::hash::{for_each_standard_position, KeyHash, KeyHasher, StandardProbes};
use crate::filter::params::FilterParams;
use crate::filter::simd::Probe;
use std::sync::atomic::{AtomicU64, Ordering};

pub(super) use crate::filter::params::block_of;

/// Whether the `k` standard-layout positions of `h` are all set in `m` bits,
/// `word(i)` being word `i`.
///
/// The first two probes are read unconditionally and tested together; only
/// then does the lookup exit early. With half the bits set, one probe
/// settles an absent key half of the time: an exit after every probe is a
/// coin flip for the branch predictor, and each mispredict also holds up the
/// loads of the lookups that follow. Two probes tested together settle 3/4
/// of absent keys behind one well-predicted branch (measured at 10M keys:
/// absent lookups 2x faster than exiting after each probe).
#[inline(always)]
pub(super) fn probe_standard(h: KeyHash, m: u64, k: u32, word: impl Fn(usize) -> u64) -> bool {
    let mut probes = StandardProbes::new(h, m);
    let bit = |probes: &mut StandardProbes| {
        let pos = probes.next_position();
        word((pos / 64) as usize) >> (pos % 64) & 1
    };
    // `k ≥ 1` by construction.
    let k = k as u64;
    let mut all = bit(&mut probes);
    if k >= 2 {
        all &= bit(&mut probes);
    }
    if all == 0 {
        return false;
    }
    while probes.taken() < k {
        if bit(&mut probes) == 0 {
            return false;
        }
    }
    true
}

/// Whether the `k` in-block positions of `h2` are all set in the block's
/// words: the scalar probe (see `filter::simd` for why it is branch-free and
/// for the AVX2 one).
pub(super) use crate::filter::simd::scalar_block_has_all as probe_block;

/// How an insert sets the bits of a mask in a word; returns whether any
/// was clear when read.
pub(crate) trait WordOr: Copy {
    fn or(word: &AtomicU64, mask: u64) -> bool;

    /// Sets the bits of `masks` in the words of a block (a blocked
    /// filter's eight, a split block's four; a zero mask sets nothing);
    /// returns whether any was clear when read.
    #[inline(always)]
    fn or_block<const N: usize>(words: &[AtomicU64; N], masks: [u64; N]) -> bool {
        let mut clear = false;
        for (word, mask) in words.iter().zip(masks) {
            clear |= Self::or(word, mask);
        }
        clear
    }
}

/// For a filter any thread may write: a word with an atomic OR
/// ([`WordOr::or`], the standard layout), a blocked or split-block filter's
/// block under its line's stripe lock ([`WordOr::or_block`]).
#[derive(Clone, Copy)]
pub(crate) struct Locked;

impl WordOr for Locked {
    /// Reads before writing (see [`BitFilter::insert_hash`]), and asks the
    /// OR for nothing back: a `fetch_or` whose result is unused is one
    /// `lock or` on x86-64, where one whose result is used is a
    /// compare-and-swap loop (bulk shared inserts, 10M keys: 39.7 → 34.3 ns
    /// per key).
    ///
    /// [`BitFilter::insert_hash`]: super::BitFilter::insert_hash
    #[inline(always)]
    fn or(word: &AtomicU64, mask: u64) -> bool {
        let clear = word.load(Ordering::Relaxed) & mask != mask;
        if clear {
            word.fetch_or(mask, Ordering::Relaxed);
        }
        clear
    }

    /// A blocked or split-block filter's block: under its line's stripe
    /// lock, with plain loads and stores ([`super::stripes`], whose
    /// protocol every OR into those layouts through `&self` keeps). As
    /// before, a key whose bits are all set costs no locked instruction.
    #[inline(always)]
    fn or_block<const N: usize>(words: &[AtomicU64; N], masks: [u64; N]) -> bool {
        super::stripes::or_block(words, masks)
    }
}

/// For a filter one thread at a time writes (lookups may read it
/// meanwhile): a plain load and store of the word, no locked instruction.
/// A reader sees the word before or after the store, as with the atomic
/// OR; a second writer at the same time could lose bits (a logic error of
/// the caller, never undefined behaviour: the words are atomics). The
/// store's writes of a generation's bits all hold its writer lock.
/// Callgrind and `perf`: the locked ORs (about five per new key, each a
/// full barrier on x86-64 that waits for the prefetches before it) were the
/// largest part of a durable batch's CPU.
#[derive(Clone, Copy)]
pub(crate) struct Alone;

impl WordOr for Alone {
    #[inline(always)]
    fn or(word: &AtomicU64, mask: u64) -> bool {
        let old = word.load(Ordering::Relaxed);
        let clear = old & mask != mask;
        if clear {
            word.store(old | mask, Ordering::Relaxed);
        }
        clear
    }
}

pub(super) use crate::filter::simd::prefetch;

/// Prefetches the `k` words in `words` (the bits of a filter of parameters
/// `p`) that a standard-layout key `h` will write.
#[inline(always)]
pub(super) fn prefetch_standard(words: &[AtomicU64], p: &FilterParams, h: KeyHash) {
    for_each_standard_position(h, p.m(), p.k(), |pos| {
        if let Some(w) = words.get((pos / 64) as usize) {
            prefetch(w);
        }
        true
    });
}

/// The standard layout's insert of `h` into `words` (the bits of a filter
/// of parameters `p`), each bit set with `O`: the `k` lines prefetched
/// first, then each word read and written if it lacks its bit (see
/// `BitFilter::insert_hash`). Returns whether any bit was clear.
#[inline(always)]
pub(super) fn insert_standard<O: WordOr>(
    words: &[AtomicU64],
    p: &FilterParams,
    h: KeyHash,
) -> bool {
    let mut changed = false;
    prefetch_standard(words, p, h);
    for_each_standard_position(h, p.m(), p.k(), |pos| {
        changed |= O::or(&words[(pos / 64) as usize], 1 << (pos % 64));
        true
    });
    changed
}

/// Whether the `k` in-block positions of `h2` are all set in block `b` of
/// `f`: read with vector loads where `f` keeps the block as aligned atomic
/// words (an owned filter; `filter::simd`) or as plain bytes (a view), else
/// copied out word by word.
#[inline(always)]
pub(super) fn block_has_all<F: BloomRead + ?Sized, P: Probe>(
    f: &F,
    probe: P,
    b: usize,
    h2: u64,
    k: u32,
) -> bool {
    if let Some(shared) = f.shared_block(b) {
        return probe.shared_block_has_all(shared, h2, k);
    }
    match f.block_bytes(b) {
        Some(bytes) => probe.bytes_block_has_all(bytes, h2, k),
        None => probe.block_has_all(&f.block_words(b), h2, k),
    }
}

/// [`block_has_all`] of `h2 = x << 32` (the XXH3-64 hash): an owned
/// filter's block or a view's through the probe's 32-bit positions
/// (`Probe::shared_block_has_all32`, `Probe::bytes_block_has_all32`), any
/// other as `block_has_all` reads it.
#[inline(always)]
pub(super) fn block32_has_all<F: BloomRead + ?Sized, P: Probe>(
    f: &F,
    probe: P,
    b: usize,
    x: u32,
    k: u32,
) -> bool {
    if let Some(shared) = f.shared_block(b) {
        return probe.shared_block_has_all32(shared, x, k);
    }
    match f.block_bytes(b) {
        Some(bytes) => probe.bytes_block_has_all32(bytes, x, k),
        None => probe.block_has_all(&f.block_words(b), u64::from(x) << 32, k),
    }
}

/// Whether the eight sector bits of `x = lo32(h)` (the sectorized hash) are
/// all set in block `b` of `f`, read as [`block_has_all`] reads it.
#[inline(always)]
pub(super) fn sectors_has_all<F: BloomRead + ?Sized, P: Probe>(
    f: &F,
    probe: P,
    b: usize,
    x: u32,
) -> bool {
    if let Some(shared) = f.shared_block(b) {
        return probe.shared_sectors_has_all(shared, x);
    }
    match f.block_bytes(b) {
        Some(bytes) => probe.bytes_sectors_has_all(bytes, x),
        None => probe.sectors_has_all(&f.block_words(b), x),
    }
}

/// Whether the `k` in-block positions of `h2` (as `H` hashes) are all set
/// in block `b` of `f`: the sector bits of `lo32(h)` for the sectorized
/// hash, from 32-bit products where `h2` is `h << 32` (XXH3-64: one
/// `vpmulld` for eight positions), else from 64-bit ones.
#[inline(always)]
pub(super) fn block_h2_has_all<F: BloomRead + ?Sized, P: Probe, H: KeyHasher>(
    f: &F,
    probe: P,
    b: usize,
    h2: u64,
    k: u32,
) -> bool {
    if H::SECTORIZED {
        sectors_has_all(f, probe, b, (h2 >> 32) as u32)
    } else if H::H2_SHIFTED {
        block32_has_all(f, probe, b, (h2 >> 32) as u32, k)
    } else {
        block_has_all(f, probe, b, h2, k)
    }
}

/// Whether the eight lane bits of `x` are all set in split block `b` of `f`:
/// vector loads of the aligned atomic words of an owned filter, a vector
/// load of the bytes of a view, else the lanes copied out word by word.
#[inline(always)]
pub(super) fn split_block_has_all<F: BloomRead + ?Sized, P: Probe>(
    f: &F,
    probe: P,
    b: usize,
    x: u32,
) -> bool {
    if let Some(shared) = f.shared_split_block(b) {
        return probe.shared_split_has_all(shared, x);
    }
    match f.split_block_bytes(b) {
        Some(bytes) => probe.bytes_split_has_all(bytes, x),
        None => probe.split_has_all(&f.split_block_lanes(b), x),
    }
}
