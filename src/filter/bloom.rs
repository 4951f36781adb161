//! The in-memory bit filter: two layouts, lock-free lookups, set operations,
//! estimators, and a zero-copy view over borrowed bytes.
//!
//! # Storage
//! Bits live in 64-byte aligned blocks of eight `AtomicU64` words, in both
//! layouts (the standard layout's `m` is padded up to whole blocks; the
//! padding is never set), stored as one flat slice of words. `insert` and
//! `contains` take `&self`: inserts are `fetch_or` (after a plain read, for
//! the words that lack a bit), lookups are relaxed loads — plain `mov`s on
//! x86-64 — so readers never take a lock and never wait for writers. A key whose `insert` has returned (and
//! whose return happens-before the lookup, e.g. through a channel or a lock) is
//! always found: the bits are only ever cleared by [`BitFilter::clear`],
//! [`BitFilter::intersect_with`] and the store's counter-driven removal.
//!
//! # Which layout
//! Measured by `cargo bench --bench peers` (10M keys, 10 bits per key, this
//! 2-core machine; see README for the full table): the blocked layout answers
//! absent-key lookups in one cache miss and is the default; it costs about 17%
//! more false positives for the same `m` (0.97% vs 0.82% at 10 bits per key),
//! which [`FilterParams::for_capacity`] compensates with ~5% more bits. Choose
//! the standard layout when a filter's bits must match the textbook analysis
//! (e.g. the compressed exchange, whose optimiser assumes it) or when `m` must
//! be a power of two for halving at any granularity.
//!
//! # Speed
//! A lookup in a filter larger than the cache is bound by memory latency,
//! and how many lookups overlap their cache misses is bounded by how many
//! fit in the CPU's out-of-order window: fewer instructions per lookup is
//! more lookups per second. Hence branch-free probing (`probe_block`), the
//! two-probe test of the standard layout (`probe_standard`) and always
//! inlined lookups. Hashing is most of what is left: XXH3-128 of a 16-byte
//! key is ~38 instructions (foldhash, which `fastbloom` users pick, ~12, but
//! its output is not a stable format). With foldhash in place of XXH3 our
//! standard probes measured faster than `fastbloom`'s (10M keys: 57 against
//! 60 ns absent, 57 against 104 ns present). The blocked layout's seven
//! scalar probes cost ~55 instructions, about what `sbbf-rs-safe` spends on
//! its whole lookup (a 64-bit hash, then eight lanes at once in AVX2, which
//! needs `unsafe` runtime dispatch): one lookup at a time it is ~2x faster.
//!
//! [`BitFilter::contains_many`] gets past that bound: it hashes keys ahead
//! and prefetches their lines, so 16 lookups' misses are in flight; at 10M
//! keys it answered in 0.2–0.45 of the time of one `contains` per key (five
//! runs on this shared 2-core machine).
//!
//! The `peers` bench (`cargo bench --bench peers`) measures all of this
//! against `fastbloom`, `sbbf-rs-safe`, `xorf` and `bloomfilter`.

use crate::error::{FilterError, ParamError};
use crate::filter::hash::{
    for_each_standard_position, in_block_masks, in_block_position, map_to_range, KeyHash,
    StandardProbes,
};
use crate::filter::params::{FilterParams, Layout, BLOCK_BITS, MAX_K, WORDS_PER_BLOCK};
use std::sync::atomic::{AtomicU64, Ordering};

/// Keys in flight in the batched lookup's pipeline (its ring of hashes).
const RING: usize = 16;

/// Filters up to this size are looked up one key after the other even in a
/// batch: they sit in the L2 cache, where the pipeline's prefetches and ring
/// only add work (measured at 200,000 keys, 250 KB: 19 ns/key pipelined
/// against 12 ns/key one by one).
const PIPELINE_MIN_BYTES: u64 = 1 << 20;

/// Read access to a filter's bits, shared by the owned [`BitFilter`] and the
/// borrowed [`FilterView`]: every query and estimator is written once, here.
pub trait BloomRead {
    /// The filter's parameters.
    fn params(&self) -> &FilterParams;
    /// Word `i` of the bit array (bit `j` of the filter is bit `j % 64` of word
    /// `j / 64`). `i` must be below `params().num_words()`.
    fn word(&self, i: usize) -> u64;
    /// Hints that word `i` will be read soon. Never required for correctness.
    fn prefetch_word(&self, _i: usize) {}

    /// Whether `key` may be in the set. `false` means definitely absent.
    #[inline(always)]
    fn contains(&self, key: &[u8]) -> bool {
        self.contains_hash(self.params().hash().hash(key))
    }

    /// [`BloomRead::contains`] for a key hashed with this filter's [`crate::HashSpec`].
    ///
    /// Always inlined: a lookup is ~100 instructions, and a call with its
    /// register saves adds ~15 more. Out-of-order execution overlaps as many
    /// lookups (and their cache misses) as fit in its window, so on a filter
    /// larger than the cache fewer instructions per lookup is directly more
    /// lookups per second.
    #[inline(always)]
    fn contains_hash(&self, h: KeyHash) -> bool {
        let p = self.params();
        match p.layout() {
            Layout::Standard => self.standard_has_all(h),
            Layout::Blocked => self.block_has_all(block_of(p, h), h.h2, p.k()),
        }
    }

    /// Whether the `k` standard-layout positions of `h` are all set. The
    /// default reads through [`BloomRead::word`]; implementors override it to
    /// resolve their storage once per lookup instead of once per probe.
    #[inline]
    fn standard_has_all(&self, h: KeyHash) -> bool {
        let p = self.params();
        probe_standard(h, p.m(), p.k(), |i| self.word(i))
    }

    /// Whether the `k` in-block positions of `h2` are all set in block
    /// `block` (`< params().num_blocks()`). The default reads through
    /// [`BloomRead::word`]; implementors override it to check the block's
    /// bounds once per lookup instead of once per probe.
    #[inline]
    fn block_has_all(&self, block: usize, h2: u64, k: u32) -> bool {
        let base = block * WORDS_PER_BLOCK;
        probe_block(h2, k, |w| self.word(base + w))
    }

    /// Batched lookup: `out[i] = contains(keys[i])`, the same answers as one
    /// [`BloomRead::contains`] per key, faster on filters larger than the
    /// cache because the memory accesses of many keys overlap.
    ///
    /// A software pipeline: each key is hashed and the cache lines its
    /// lookup will read are prefetched some keys before it is tested, so the
    /// lines have had that many lookups' time to arrive. A single lookup
    /// cannot do this: out-of-order execution overlaps only as many lookups
    /// as fit in the reorder buffer, two or three of ours. Filters up to
    /// 1 MiB are looked up key by key (they sit in the L2 cache, where the
    /// pipeline only adds work).
    ///
    /// # Panics
    /// If `out` is shorter than `keys` (a caller bug, not an input error).
    fn contains_many_into<K: AsRef<[u8]>>(&self, keys: &[K], out: &mut [bool]) {
        assert!(out.len() >= keys.len(), "output slice shorter than keys");
        let out = &mut out[..keys.len()];
        let p = *self.params();
        let spec = p.hash();
        if p.bit_bytes() <= PIPELINE_MIN_BYTES {
            for (o, key) in out.iter_mut().zip(keys) {
                *o = self.contains_hash(spec.hash(key.as_ref()));
            }
            return;
        }
        match p.layout() {
            Layout::Standard => standard_pipeline(self, keys, out),
            Layout::Blocked => blocked_pipeline(self, keys, out),
        }
    }

    /// Batched lookup returning a new vector.
    fn contains_many<K: AsRef<[u8]>>(&self, keys: &[K]) -> Vec<bool> {
        let mut out = vec![false; keys.len()];
        self.contains_many_into(keys, &mut out);
        out
    }

    /// Number of bits set.
    fn count_ones(&self) -> u64 {
        (0..self.params().num_words())
            .map(|i| self.word(i).count_ones() as u64)
            .sum()
    }

    /// Fraction of the `m` bits that are set.
    fn fill_ratio(&self) -> f64 {
        self.count_ones() as f64 / self.params().m() as f64
    }

    /// Estimated number of distinct keys inserted, from the zero bits (survey
    /// §2.4: `n̂ = ln(Z/m) / (k·ln(1 − 1/m))`), summed per block for the
    /// blocked layout, whose blocks fill unevenly. A saturated filter (no zero
    /// bit) is read as if half a bit were zero, giving a large finite value.
    ///
    /// Measured error (test `estimators_len_within_two_percent`, 10 bits per
    /// key, one seeded run): standard 0.31% at n = 1,000, 0.15% at 10,000,
    /// 0.05% at 1,000,000; blocked 0.95%, 0.39% and 0.02%. The test asserts 2%.
    fn estimate_len(&self) -> f64 {
        let p = self.params();
        match p.layout() {
            Layout::Standard => estimate_from_zeros(p.m(), p.m() - self.count_ones(), p.k()),
            Layout::Blocked => (0..p.num_blocks() as usize)
                .map(|b| {
                    let ones: u64 = (0..WORDS_PER_BLOCK)
                        .map(|w| self.word(b * WORDS_PER_BLOCK + w).count_ones() as u64)
                        .sum();
                    estimate_from_zeros(BLOCK_BITS, BLOCK_BITS - ones, p.k())
                })
                .sum(),
        }
    }

    /// The false-positive rate implied by the current fill: `(ones/m)^k`, or
    /// its mean over blocks for the blocked layout. This is what a lookup of a
    /// random absent key experiences now, whatever was inserted or removed.
    fn estimated_fp(&self) -> f64 {
        let p = self.params();
        let k = p.k() as i32;
        match p.layout() {
            Layout::Standard => self.fill_ratio().powi(k),
            Layout::Blocked => {
                let blocks = p.num_blocks() as usize;
                let sum: f64 = (0..blocks)
                    .map(|b| {
                        let ones: u32 = (0..WORDS_PER_BLOCK)
                            .map(|w| self.word(b * WORDS_PER_BLOCK + w).count_ones())
                            .sum();
                        (ones as f64 / BLOCK_BITS as f64).powi(k)
                    })
                    .sum();
                sum / blocks as f64
            }
        }
    }

    /// Estimated size of the union of the two sets, from the OR of the filters.
    fn estimate_union_len(&self, other: &dyn BloomReadDyn) -> Result<f64, FilterError> {
        check_compatible(self.params(), other.params_dyn())?;
        let p = self.params();
        let or = |i: usize| self.word(i) | other.word_dyn(i);
        Ok(match p.layout() {
            Layout::Standard => {
                let ones: u64 = (0..p.num_words()).map(|i| or(i).count_ones() as u64).sum();
                estimate_from_zeros(p.m(), p.m() - ones, p.k())
            }
            Layout::Blocked => (0..p.num_blocks() as usize)
                .map(|b| {
                    let ones: u64 = (0..WORDS_PER_BLOCK)
                        .map(|w| or(b * WORDS_PER_BLOCK + w).count_ones() as u64)
                        .sum();
                    estimate_from_zeros(BLOCK_BITS, BLOCK_BITS - ones, p.k())
                })
                .sum(),
        })
    }

    /// Estimated size of the intersection of the two sets by inclusion and
    /// exclusion, `n̂(A) + n̂(B) − n̂(A ∪ B)`, clamped at zero (survey §2.4).
    ///
    /// Measured error (test `estimators_intersection`): with 100,000 keys per
    /// side at 10 bits per key and overlaps of 0–100%, at most 83 keys off in
    /// the standard layout and 206 in the blocked layout (0.2% of the set
    /// size); the test asserts ±1,500. The absolute error scales with the set
    /// sizes, not with the intersection: small intersections of large sets are
    /// imprecise.
    fn estimate_intersection_len(&self, other: &dyn BloomReadDyn) -> Result<f64, FilterError> {
        let union = self.estimate_union_len(other)?;
        let a = self.estimate_len();
        let b = other.estimate_len_dyn();
        Ok((a + b - union).max(0.0))
    }
}

/// Object-safe subset of [`BloomRead`], so estimators can mix owned filters
/// and views.
pub trait BloomReadDyn {
    /// See [`BloomRead::params`].
    fn params_dyn(&self) -> &FilterParams;
    /// See [`BloomRead::word`].
    fn word_dyn(&self, i: usize) -> u64;
    /// See [`BloomRead::estimate_len`].
    fn estimate_len_dyn(&self) -> f64;
}

impl<T: BloomRead> BloomReadDyn for T {
    fn params_dyn(&self) -> &FilterParams {
        self.params()
    }
    fn word_dyn(&self, i: usize) -> u64 {
        self.word(i)
    }
    fn estimate_len_dyn(&self) -> f64 {
        self.estimate_len()
    }
}

fn estimate_from_zeros(m: u64, zeros: u64, k: u32) -> f64 {
    let z = if zeros == 0 { 0.5 } else { zeros as f64 };
    (z / m as f64).ln() / (k as f64 * (-1.0 / m as f64).ln_1p())
}

/// The block of `h` in the blocked layout, whose `m` is a multiple of 512.
#[inline(always)]
fn block_of(p: &FilterParams, h: KeyHash) -> usize {
    map_to_range(h.h1, p.m() / BLOCK_BITS) as usize
}

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
fn probe_standard(h: KeyHash, m: u64, k: u32, word: impl Fn(usize) -> u64) -> bool {
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

/// Whether the `k` in-block positions of `h2` are all set, `word(w)` being
/// word `w < 8` of the block.
///
/// Branch-free on purpose: at 10 bits per key half the bits are set, so an
/// early exit would mispredict on about every other absent key (~15 cycles
/// each) and stop the next lookups' loads from overlapping with this one;
/// all probes hit the one cache line already being loaded. Each probe is a
/// multiply, two shifts, a load and an AND, accumulated in a register (the
/// first version OR-ed the probes into eight masks on the stack and measured
/// 3x slower: store-to-load forwarding through variable addresses).
#[inline(always)]
fn probe_block(h2: u64, k: u32, word: impl Fn(usize) -> u64) -> bool {
    let mut acc = 1u64;
    // `k ≤ MAX_K` by construction; the min lets the salt lookups go unchecked.
    for i in 0..(k as usize).min(MAX_K as usize) {
        let pos = in_block_position(h2, i);
        acc &= word((pos / 64) as usize) >> (pos % 64);
    }
    acc & 1 == 1
}

/// Sets the bits of `mask` in `word`; returns whether any was clear. Reads
/// before writing (see [`BitFilter::insert_hash`]).
#[inline(always)]
fn or_into(word: &AtomicU64, mask: u64) -> bool {
    word.load(Ordering::Relaxed) & mask != mask
        && word.fetch_or(mask, Ordering::Relaxed) & mask != mask
}

/// The batched lookup of the blocked layout: key `i + RING` is hashed and
/// its block prefetched while key `i` is tested (measured at 10M keys:
/// 16 ahead as fast as 32, 8 ahead leaves misses exposed).
#[inline(always)]
fn blocked_pipeline<F: BloomRead + ?Sized, K: AsRef<[u8]>>(f: &F, keys: &[K], out: &mut [bool]) {
    let p = *f.params();
    let spec = p.hash();
    let enter = |key: &K| {
        let h = spec.hash(key.as_ref());
        f.prefetch_word(block_of(&p, h) * WORDS_PER_BLOCK);
        h
    };
    let mut ring = [KeyHash { h1: 0, h2: 0 }; RING];
    for (slot, key) in ring.iter_mut().zip(keys) {
        *slot = enter(key);
    }
    for (i, o) in out.iter_mut().enumerate() {
        let slot = &mut ring[i % RING];
        let h = *slot;
        if let Some(next) = keys.get(i + RING) {
            *slot = enter(next);
        }
        *o = f.block_has_all(block_of(&p, h), h.h2, p.k());
    }
}

/// One key in the standard layout's batched lookup.
#[derive(Clone, Copy)]
struct StandardSlot {
    /// Positions 0 and 1 (0 twice when `k = 1`).
    first: [u64; 2],
    /// The probe sequence, advanced past `first`.
    rest: StandardProbes,
    /// Whether `first` are both set: only then are the rest read.
    maybe: bool,
}

/// The batched lookup of the standard layout, in three stages, so that
/// absent keys (3/4 of which are settled by their first two probes) never
/// fetch the lines of their later probes:
///
/// 1. `RING` keys ahead: hash, prefetch the lines of probes 0 and 1;
/// 2. `RING / 2` keys ahead: test probes 0 and 1; if both are set, prefetch
///    the lines of the other `k − 2` probes;
/// 3. test the other probes of the keys that passed stage 2.
///
/// Measured at 10M keys against prefetching all `k` lines 16 keys ahead:
/// present keys as fast, absent keys ~10% faster while fetching 2 lines
/// instead of 7 (memory bandwidth left to the other cores).
#[inline(always)]
fn standard_pipeline<F: BloomRead + ?Sized, K: AsRef<[u8]>>(f: &F, keys: &[K], out: &mut [bool]) {
    let p = *f.params();
    let (m, k, spec) = (p.m(), u64::from(p.k()), p.hash());
    let bit = |pos: u64| f.word((pos / 64) as usize) >> (pos % 64) & 1 == 1;
    let prefetch = |pos: u64| f.prefetch_word((pos / 64) as usize);
    let empty = StandardSlot {
        first: [0; 2],
        rest: StandardProbes::new(KeyHash { h1: 0, h2: 0 }, m),
        maybe: false,
    };
    let mut ring = [empty; RING];
    const STAGE2: usize = RING / 2;
    for step in 0..keys.len() + RING {
        // Stage 3 for key `step − RING`, whose slot stage 1 reuses below.
        if let Some(i) = step.checked_sub(RING) {
            let slot = &mut ring[i % RING];
            let mut rest = slot.rest;
            let mut all = slot.maybe;
            while all && rest.taken() < k {
                all = bit(rest.next_position());
            }
            out[i] = all;
        }
        // Stage 2 for key `step − STAGE2`.
        if let Some(i) = step.checked_sub(STAGE2).filter(|&i| i < keys.len()) {
            let slot = &mut ring[i % RING];
            slot.maybe = bit(slot.first[0]) & bit(slot.first[1]);
            if slot.maybe {
                let mut rest = slot.rest;
                while rest.taken() < k {
                    prefetch(rest.next_position());
                }
            }
        }
        // Stage 1 for key `step`.
        if let Some(key) = keys.get(step) {
            let mut rest = StandardProbes::new(spec.hash(key.as_ref()), m);
            let p0 = rest.next_position();
            let p1 = if k >= 2 { rest.next_position() } else { p0 };
            prefetch(p0);
            prefetch(p1);
            ring[step % RING] = StandardSlot {
                first: [p0, p1],
                rest,
                maybe: false,
            };
        }
    }
}

pub(crate) fn check_compatible(a: &FilterParams, b: &FilterParams) -> Result<(), FilterError> {
    if a == b {
        return Ok(());
    }
    let mut diffs = Vec::new();
    if a.layout() != b.layout() {
        diffs.push(format!("layout {} vs {}", a.layout(), b.layout()));
    }
    if a.m() != b.m() {
        diffs.push(format!("m {} vs {}", a.m(), b.m()));
    }
    if a.k() != b.k() {
        diffs.push(format!("k {} vs {}", a.k(), b.k()));
    }
    if a.hash() != b.hash() {
        diffs.push(format!(
            "hash {}/{:#x} vs {}/{:#x}",
            a.hash().algo.name(),
            a.hash().seed,
            b.hash().algo.name(),
            b.hash().seed
        ));
    }
    Err(FilterError::Incompatible(diffs.join(", ")))
}

/// Issues a prefetch of the cache line holding `*p`.
#[inline(always)]
fn prefetch<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    // SAFETY: `_mm_prefetch` is a hint: it never faults, reads nothing into the
    // program and writes nothing; the pointer comes from a live reference. It
    // is `unsafe` only because it carries `#[target_feature(enable = "sse")]`,
    // which every x86-64 CPU has. Exercised by every batched-lookup test.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p as *const T as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// A Bloom filter held in memory, safe to share between threads.
pub struct BitFilter {
    params: FilterParams,
    /// `num_words()` words starting at `offset`, which is chosen so that they
    /// start on a 64-byte boundary (every block is one cache line), plus
    /// `WORDS_PER_BLOCK - 1` words of slack that stay zero. One flat slice
    /// rather than a slice of aligned 64-byte blocks: a standard-layout probe
    /// is then one bounds check and one load at `offset + pos / 64`, where
    /// nested indexing (block, then word) cost five more instructions per
    /// probe.
    storage: Box<[AtomicU64]>,
    offset: usize,
}

impl std::fmt::Debug for BitFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BitFilter")
            .field("params", &self.params)
            .field("ones", &self.count_ones())
            .finish()
    }
}

impl BloomRead for BitFilter {
    fn params(&self) -> &FilterParams {
        &self.params
    }
    #[inline(always)]
    fn word(&self, i: usize) -> u64 {
        self.atomic_word(i).load(Ordering::Relaxed)
    }
    #[inline(always)]
    fn prefetch_word(&self, i: usize) {
        if let Some(w) = self.storage.get(self.offset + i) {
            prefetch(w);
        }
    }
    #[inline(always)]
    fn standard_has_all(&self, h: KeyHash) -> bool {
        let words = &self.storage[self.offset..];
        probe_standard(h, self.params.m(), self.params.k(), |i| {
            words[i].load(Ordering::Relaxed)
        })
    }
    #[inline(always)]
    fn block_has_all(&self, block: usize, h2: u64, k: u32) -> bool {
        let b = self.block(block);
        probe_block(h2, k, |w| b[w].load(Ordering::Relaxed))
    }
}

impl BitFilter {
    /// An empty filter. Fails only if the memory cannot be allocated.
    pub fn new(params: FilterParams) -> Result<Self, ParamError> {
        let n = params.num_words() + WORDS_PER_BLOCK - 1;
        let mut v: Vec<AtomicU64> = Vec::new();
        v.try_reserve_exact(n)
            .map_err(|_| ParamError::AllocationFailed {
                bytes: params.bit_bytes(),
            })?;
        v.resize_with(n, AtomicU64::default);
        let storage = v.into_boxed_slice();
        // Words to skip to reach a 64-byte boundary: 0..=7 for an 8-aligned
        // pointer. Should the standard library ever answer "cannot align"
        // (it may, in principle), blocks straddle two lines: slower, still
        // correct.
        let offset = match storage.as_ptr().align_offset(64) {
            o if o < WORDS_PER_BLOCK => o,
            _ => 0,
        };
        Ok(BitFilter {
            params,
            storage,
            offset,
        })
    }

    /// A filter holding the given words (as produced by [`BitFilter::to_words`]).
    pub fn from_words(params: FilterParams, words: &[u64]) -> Result<Self, FilterError> {
        if words.len() != params.num_words() {
            return Err(FilterError::LengthMismatch {
                expected: params.bit_bytes(),
                found: words.len() as u64 * 8,
            });
        }
        let f = BitFilter::new(params).map_err(|_| FilterError::LengthMismatch {
            expected: params.bit_bytes(),
            found: 0,
        })?;
        for (i, w) in words.iter().enumerate() {
            f.store_word(i, *w);
        }
        Ok(f)
    }

    /// Whether `key` may be in the set (inherent shortcut for [`BloomRead::contains`]).
    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        BloomRead::contains(self, key)
    }

    /// Batched lookup (inherent shortcut for [`BloomRead::contains_many`]).
    pub fn contains_many<K: AsRef<[u8]>>(&self, keys: &[K]) -> Vec<bool> {
        BloomRead::contains_many(self, keys)
    }

    /// Adds `key`. Returns `true` if at least one bit was newly set (so `false`
    /// means the key was already reported as present).
    #[inline]
    pub fn insert(&self, key: &[u8]) -> bool {
        self.insert_hash(self.params.hash().hash(key))
    }

    /// [`BitFilter::insert`] for a key already hashed with this filter's spec.
    #[inline]
    pub fn insert_hash(&self, h: KeyHash) -> bool {
        let p = self.params;
        let mut changed = false;
        // A locked read-modify-write is a full barrier on x86-64: no later
        // load starts before it completes. Hence (1) a word is read first
        // and only written if it lacks a bit (a key inserted twice, or whose
        // bits other keys already set, costs no locked operation), and (2)
        // the standard layout prefetches its k lines before the first write,
        // so the k misses overlap instead of queueing behind each barrier.
        // Skipping a write whose bits are already set is safe: bits are only
        // cleared by `clear`, `intersect_with` and the counting layer's
        // removals, which the store orders under its page locks, and any
        // lookup that happens after this insert sees what this read saw.
        match p.layout() {
            Layout::Standard => {
                for_each_standard_position(h, p.m(), p.k(), |pos| {
                    self.prefetch_word((pos / 64) as usize);
                    true
                });
                for_each_standard_position(h, p.m(), p.k(), |pos| {
                    changed |= or_into(self.atomic_word((pos / 64) as usize), 1 << (pos % 64));
                    true
                });
            }
            Layout::Blocked => {
                let block = self.block(block_of(&p, h));
                for (word, mask) in block.iter().zip(in_block_masks(h.h2, p.k())) {
                    changed |= or_into(word, mask);
                }
            }
        }
        changed
    }

    /// Sets bit `pos`; returns whether it was clear. `pos < m`.
    #[inline]
    pub fn set_bit(&self, pos: u64) -> bool {
        let bit = 1u64 << (pos % 64);
        self.atomic_word((pos / 64) as usize)
            .fetch_or(bit, Ordering::Relaxed)
            & bit
            == 0
    }

    /// Clears bit `pos`. Only the counting layer may call this, after its
    /// counter for `pos` reached zero: clearing a bit of a live key creates a
    /// false negative.
    #[inline]
    pub fn clear_bit(&self, pos: u64) {
        let bit = 1u64 << (pos % 64);
        self.atomic_word((pos / 64) as usize)
            .fetch_and(!bit, Ordering::Relaxed);
    }

    /// Whether bit `pos` is set.
    pub fn bit(&self, pos: u64) -> bool {
        self.word((pos / 64) as usize) & (1 << (pos % 64)) != 0
    }

    /// Overwrites word `i` (used when deriving the filter from counters).
    pub fn store_word(&self, i: usize, w: u64) {
        self.atomic_word(i).store(w, Ordering::Relaxed);
    }

    /// Word `i`. Indexes up to seven past `num_words()` reach the zero slack
    /// instead of panicking; every caller stays below `num_words()`.
    #[inline(always)]
    fn atomic_word(&self, i: usize) -> &AtomicU64 {
        &self.storage[self.offset + i]
    }

    /// The eight words of block `block` (one cache line).
    #[inline(always)]
    fn block(&self, block: usize) -> &[AtomicU64; WORDS_PER_BLOCK] {
        let start = self.offset + block * WORDS_PER_BLOCK;
        let words = &self.storage[start..start + WORDS_PER_BLOCK];
        match words.try_into() {
            Ok(b) => b,
            // The range above has exactly WORDS_PER_BLOCK elements.
            Err(_) => unreachable!("a block is {WORDS_PER_BLOCK} words"),
        }
    }

    /// Clears every bit.
    pub fn clear(&self) {
        for w in self.storage.iter() {
            w.store(0, Ordering::Relaxed);
        }
    }

    /// A snapshot of the words (concurrent inserts may or may not be included).
    pub fn to_words(&self) -> Vec<u64> {
        (0..self.params.num_words()).map(|i| self.word(i)).collect()
    }

    /// The bit array as little-endian bytes, padding included.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.params.bit_bytes() as usize);
        for i in 0..self.params.num_words() {
            out.extend_from_slice(&self.word(i).to_le_bytes());
        }
        out
    }

    /// A copy of this filter.
    pub fn try_clone(&self) -> Result<BitFilter, ParamError> {
        let f = BitFilter::new(self.params)?;
        for i in 0..self.params.num_words() {
            f.store_word(i, self.word(i));
        }
        Ok(f)
    }

    /// Adds every key of `other` (bitwise OR). Afterwards this filter answers
    /// "maybe" for the union of both sets: exactly the filter that inserting
    /// both sets would have built.
    pub fn union_with(&self, other: &dyn BloomReadDyn) -> Result<(), FilterError> {
        check_compatible(&self.params, other.params_dyn())?;
        for i in 0..self.params.num_words() {
            self.atomic_word(i)
                .fetch_or(other.word_dyn(i), Ordering::Relaxed);
        }
        Ok(())
    }

    /// Bitwise AND with `other`. Every key of the intersection of the two sets
    /// stays present (no false negative); the result may hold more bits than a
    /// filter built from the intersection alone, so it can have a higher FP rate.
    pub fn intersect_with(&self, other: &dyn BloomReadDyn) -> Result<(), FilterError> {
        check_compatible(&self.params, other.params_dyn())?;
        for i in 0..self.params.num_words() {
            self.atomic_word(i)
                .fetch_and(other.word_dyn(i), Ordering::Relaxed);
        }
        Ok(())
    }

    /// Halves the filter by OR-ing pairs (survey §2.4). Positions are mapped to
    /// a range by multiply-high, so when `m` is a power of two a position is
    /// its top bits, and halving `m` drops one bit: positions `2j` and `2j+1`
    /// fold onto `j` (adjacent pairs, not the two halves as with `mod m`).
    ///
    /// * Standard layout: needs `m` a power of two, `m ≥ 128`.
    /// * Blocked layout: needs a power-of-two number of blocks, at least 2;
    ///   whole blocks `2j` and `2j+1` fold onto block `j`, in-block positions
    ///   are unchanged, so every key stays present.
    ///
    /// The result answers "maybe" for every key this filter held, with a higher
    /// false-positive rate.
    pub fn halve(&self) -> Result<BitFilter, FilterError> {
        let p = self.params;
        let new_m = p.m() / 2;
        match p.layout() {
            Layout::Standard => {
                if !p.m().is_power_of_two() || p.m() < 128 {
                    return Err(FilterError::NotHalvable(
                        "standard layout needs m to be a power of two, at least 128",
                    ));
                }
            }
            Layout::Blocked => {
                if !p.num_blocks().is_power_of_two() || p.num_blocks() < 2 {
                    return Err(FilterError::NotHalvable(
                        "blocked layout needs a power-of-two number of blocks, at least 2",
                    ));
                }
            }
        }
        let np = FilterParams::new(p.layout(), new_m, p.k(), p.hash())
            .map_err(|_| FilterError::NotHalvable("the halved filter would be too small"))?;
        let out = BitFilter::new(np)
            .map_err(|_| FilterError::NotHalvable("could not allocate the halved filter"))?;
        match p.layout() {
            Layout::Standard => {
                for i in 0..(new_m.div_ceil(64)) as usize {
                    let lo = fold_pairs(self.word(2 * i));
                    let hi = fold_pairs(self.word(2 * i + 1));
                    out.store_word(i, lo as u64 | ((hi as u64) << 32));
                }
            }
            Layout::Blocked => {
                for j in 0..np.num_blocks() as usize {
                    for w in 0..WORDS_PER_BLOCK {
                        let a = self.word(2 * j * WORDS_PER_BLOCK + w);
                        let b = self.word((2 * j + 1) * WORDS_PER_BLOCK + w);
                        out.store_word(j * WORDS_PER_BLOCK + w, a | b);
                    }
                }
            }
        }
        Ok(out)
    }
}

/// Bit `j` of the result is bit `2j` OR bit `2j+1` of `x`.
fn fold_pairs(x: u64) -> u32 {
    // OR each pair into its even bit, then compact the even bits.
    let mut v = (x | (x >> 1)) & 0x5555_5555_5555_5555;
    v = (v | (v >> 1)) & 0x3333_3333_3333_3333;
    v = (v | (v >> 2)) & 0x0f0f_0f0f_0f0f_0f0f;
    v = (v | (v >> 4)) & 0x00ff_00ff_00ff_00ff;
    v = (v | (v >> 8)) & 0x0000_ffff_0000_ffff;
    v = (v | (v >> 16)) & 0x0000_0000_ffff_ffff;
    v as u32
}

/// A read-only filter over borrowed little-endian bytes (for instance the body
/// of a decoded message or a memory-mapped file): queried without copying.
#[derive(Clone, Copy, Debug)]
pub struct FilterView<'a> {
    params: FilterParams,
    bytes: &'a [u8],
}

impl<'a> FilterView<'a> {
    /// A view of `bytes`, which must hold exactly `params.bit_bytes()` bytes.
    pub fn new(params: FilterParams, bytes: &'a [u8]) -> Result<Self, FilterError> {
        if bytes.len() as u64 != params.bit_bytes() {
            return Err(FilterError::LengthMismatch {
                expected: params.bit_bytes(),
                found: bytes.len() as u64,
            });
        }
        Ok(FilterView { params, bytes })
    }

    /// Whether `key` may be in the set.
    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        BloomRead::contains(self, key)
    }

    /// The borrowed bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// An owned copy.
    pub fn to_owned_filter(&self) -> Result<BitFilter, ParamError> {
        let f = BitFilter::new(self.params)?;
        for i in 0..self.params.num_words() {
            f.store_word(i, self.word(i));
        }
        Ok(f)
    }
}

impl BloomRead for FilterView<'_> {
    fn params(&self) -> &FilterParams {
        &self.params
    }
    #[inline(always)]
    fn word(&self, i: usize) -> u64 {
        let mut w = [0u8; 8];
        if let Some(s) = self.bytes.get(i * 8..i * 8 + 8) {
            w.copy_from_slice(s);
        }
        u64::from_le_bytes(w)
    }
    #[inline(always)]
    fn prefetch_word(&self, i: usize) {
        if let Some(b) = self.bytes.get(i * 8) {
            prefetch(b);
        }
    }
    #[inline(always)]
    fn block_has_all(&self, block: usize, h2: u64, k: u32) -> bool {
        const BLOCK_BYTES: usize = (BLOCK_BITS / 8) as usize;
        let start = block * BLOCK_BYTES;
        match self
            .bytes
            .get(start..start + BLOCK_BYTES)
            .and_then(|b| <&[u8; BLOCK_BYTES]>::try_from(b).ok())
        {
            Some(b) => probe_block(h2, k, |w| {
                let mut x = [0u8; 8];
                x.copy_from_slice(&b[w * 8..w * 8 + 8]);
                u64::from_le_bytes(x)
            }),
            // Unreachable: `new` checked the length against the parameters.
            // "Maybe" is the answer that can never be a false negative.
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::hash::HashSpec;

    fn keys(range: std::ops::Range<u64>) -> Vec<[u8; 8]> {
        range.map(|i| i.to_le_bytes()).collect()
    }

    #[test]
    fn fold_pairs_folds() {
        assert_eq!(fold_pairs(0b11), 1);
        assert_eq!(fold_pairs(0b10), 1);
        assert_eq!(fold_pairs(0b100), 0b10);
        assert_eq!(fold_pairs(1 << 63), 1 << 31);
        assert_eq!(fold_pairs(u64::MAX), u32::MAX);
        assert_eq!(fold_pairs(0), 0);
    }

    /// The optimised lookups (branch-free block probe, pipelined batch, the
    /// view's block reader) must answer exactly as the reference: a key is
    /// present when every one of its positions from `hash::positions` is set.
    fn assert_lookups_match_reference(f: &BitFilter, probe: &[[u8; 8]]) -> Vec<bool> {
        let p = *f.params();
        let layout = p.layout();
        let bytes = f.to_le_bytes();
        let view = FilterView::new(p, &bytes).unwrap();
        let reference: Vec<bool> = probe
            .iter()
            .map(|k| {
                crate::filter::hash::positions(layout, p.m(), p.k(), p.hash().hash(k))
                    .as_slice()
                    .iter()
                    .all(|&pos| f.bit(pos))
            })
            .collect();
        let single: Vec<bool> = probe.iter().map(|k| f.contains(k)).collect();
        let view_single: Vec<bool> = probe.iter().map(|k| view.contains(k)).collect();
        assert_eq!(single, reference, "{layout}: contains");
        assert_eq!(view_single, reference, "{layout}: view contains");
        // Batch lengths around both pipeline depths, and a long one.
        let lens = [0, 1, 7, 8, 9, RING - 1, RING, RING + 1, 2 * RING + 3];
        for len in lens.into_iter().chain([probe.len()]) {
            let want = &reference[..len];
            assert_eq!(
                f.contains_many(&probe[..len]),
                want,
                "{layout}: batch {len}"
            );
            assert_eq!(
                BloomRead::contains_many(&view, &probe[..len]),
                want,
                "{layout}: view batch {len}"
            );
        }
        reference
    }

    /// A small filter (batches looked up key by key) filled by inserts to
    /// 10 bits per key, so both answers occur.
    #[test]
    fn lookups_match_the_reference_positions() {
        for layout in [Layout::Standard, Layout::Blocked] {
            let p =
                FilterParams::with_bits_per_key(2_000, 10.0, layout, HashSpec::xxh3(9)).unwrap();
            let f = BitFilter::new(p).unwrap();
            for k in keys(0..2_000) {
                f.insert(&k);
            }
            let reference = assert_lookups_match_reference(&f, &keys(0..20_000));
            assert!(
                reference[..2_000].iter().all(|&x| x),
                "{layout}: false negative"
            );
            // Expected 148 (standard, 0.82%) or 175 (blocked, 0.97%) of
            // 18,000, σ ≈ 13: the band is more than 7σ wide on each side.
            let fp = reference[2_000..].iter().filter(|&&x| x).count();
            assert!(
                (50..500).contains(&fp),
                "{layout}: {fp} false positives of 18000"
            );
        }
    }

    /// A filter above `PIPELINE_MIN_BYTES` (batches go through the prefetch
    /// pipeline), its words filled at random with 7/8 of the bits set so that
    /// about (7/8)^7 = 39% of keys are reported present.
    #[test]
    fn pipelined_lookups_match_the_reference_positions() {
        use rand::{RngCore, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for layout in [Layout::Standard, Layout::Blocked] {
            let m = 4 * PIPELINE_MIN_BYTES * 8;
            let p = FilterParams::new(layout, m, 7, HashSpec::xxh3(11)).unwrap();
            let f = BitFilter::new(p).unwrap();
            for i in 0..p.num_words() {
                f.store_word(i, rng.next_u64() | rng.next_u64() | rng.next_u64());
            }
            let reference = assert_lookups_match_reference(&f, &keys(0..20_000));
            // 39% of 20,000 = 7,850, σ ≈ 70.
            let present = reference.iter().filter(|&&x| x).count();
            assert!((7_000..8_700).contains(&present), "{layout}: {present}");
        }
    }

    /// `insert` reads before it writes; its answer must still say whether a
    /// bit changed, and the bits it skipped must be set.
    #[test]
    fn insert_reports_new_bits_only() {
        for layout in [Layout::Standard, Layout::Blocked] {
            let p = FilterParams::new(layout, 512 * 64, 7, HashSpec::xxh3(2)).unwrap();
            let f = BitFilter::new(p).unwrap();
            let mut fresh = 0;
            for k in keys(0..500) {
                fresh += f.insert(&k) as u32;
                assert!(!f.insert(&k), "{layout}: second insert changed bits");
                assert!(f.contains(&k), "{layout}: inserted key missing");
            }
            // Later keys may find all their bits set already (a false
            // positive at insert time), but at 500 keys in 32,768 bits that
            // is rare: the expected count is below 1.
            assert!(fresh >= 495, "{layout}: {fresh}");
            let ones = f.count_ones();
            for k in keys(0..500) {
                f.insert(&k);
            }
            assert_eq!(f.count_ones(), ones);
        }
    }

    #[test]
    fn view_and_owned_agree() {
        for layout in [Layout::Standard, Layout::Blocked] {
            let p = FilterParams::for_capacity(1000, 0.01, layout, HashSpec::xxh3(3)).unwrap();
            let f = BitFilter::new(p).unwrap();
            for k in keys(0..1000) {
                f.insert(&k);
            }
            let bytes = f.to_le_bytes();
            let v = FilterView::new(p, &bytes).unwrap();
            let probe = keys(0..5000);
            assert_eq!(
                f.contains_many(&probe),
                BloomRead::contains_many(&v, &probe)
            );
            assert!(FilterView::new(p, &bytes[1..]).is_err());
        }
    }

    #[test]
    fn incompatible_union_is_refused() {
        let a = FilterParams::new(Layout::Standard, 1024, 3, HashSpec::xxh3(1)).unwrap();
        let b = FilterParams::new(Layout::Standard, 1024, 3, HashSpec::xxh3(2)).unwrap();
        let fa = BitFilter::new(a).unwrap();
        let fb = BitFilter::new(b).unwrap();
        let err = fa.union_with(&fb).unwrap_err();
        assert!(matches!(err, FilterError::Incompatible(ref s) if s.contains("hash")));
    }

    #[test]
    fn halving_refuses_non_powers_of_two() {
        let p = FilterParams::new(Layout::Standard, 1000, 3, HashSpec::xxh3(1)).unwrap();
        assert!(BitFilter::new(p).unwrap().halve().is_err());
        let p = FilterParams::new(Layout::Blocked, 512 * 3, 3, HashSpec::xxh3(1)).unwrap();
        assert!(BitFilter::new(p).unwrap().halve().is_err());
        let p = FilterParams::new(Layout::Blocked, 512, 3, HashSpec::xxh3(1)).unwrap();
        assert!(BitFilter::new(p).unwrap().halve().is_err());
    }
}
