//! The in-memory bit filter: three layouts, lock-free lookups, set
//! operations, estimators, and a zero-copy view over borrowed bytes.
//!
//! # Storage
//! Bits live in 64-byte aligned blocks of eight `AtomicU64` words, in every
//! layout (the standard layout's `m` is padded up to whole blocks, a
//! split-block filter with an odd number of its 256-bit blocks up to a
//! whole line; the padding is never set), stored as one flat slice of words. `insert` and
//! `contains` take `&self`. The thread that holds a filter's write bias
//! (`bias`: the first to write it, until a second does) inserts with plain
//! atomic loads and stores and no locked instruction. Other inserts are
//! `fetch_or` (after a plain read, for the words that lack a bit) in the
//! standard layout, and in the blocked and split-block layouts plain
//! stores of the block under one of a few striped spin locks (`stripes`:
//! one locked instruction per key instead of up to eight); lookups are
//! relaxed loads — plain `mov`s on
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
//! which [`FilterParams::for_capacity`] compensates with 3% more bits at a 1%
//! target (9.90 against 9.59 bits per key, k = 6 against 7) and 8% more at
//! 0.1% (15.5 against 14.4). Choose
//! the standard layout when a filter's bits must match the textbook analysis
//! (e.g. the compressed exchange, whose optimiser assumes it) or when `m` must
//! be a power of two for halving at any granularity.
//!
//! # Speed
//! A lookup in a filter larger than the cache is bound by memory latency,
//! and how many lookups overlap their cache misses is bounded by how many
//! fit in the CPU's out-of-order window: fewer instructions per lookup is
//! more lookups per second. Hence branch-free probing, the two-probe test of
//! the standard layout (`probe_standard`) and always inlined lookups.
//! Measured with callgrind (10M-key blocked filter, 16-byte keys, k = 7):
//! the scalar lookup is 143 instructions, of which XXH3-128 is ~45 and the
//! seven probes ~65 (nine each: multiply, shifts, load, AND, loop); the
//! AVX2 probe (`filter::simd`) then tested eight probes in ~25 and read the
//! block with four 16-byte loads (it was 20 instructions to copy the block
//! out of its atomic words word by word); the whole lookup was 142
//! instructions. Keeping the bits as a slice of aligned blocks (a block is
//! one bounds check away: no offset, no alignment test, fewer live
//! registers around the probe) made it 134, and probing `k ≤ 8` as one
//! row without a loop 128; calling each filter's lookup through a pointer
//! chosen when the filter is made (`filter::simd::LookupFn`: no per-call
//! CPU check, the hash in registers, one function per layout) 94, and
//! answering the probe with one `vptest` 92 (the same lookup built for AVX2
//! and inlined is 85). `sbbf-rs-safe` spends 46 on
//! its whole lookup (a 64-bit hash and eight 32-bit lanes at once).
//!
//! The blocked layout hashed with XXH3-64 ([`crate::HashSpec::xxh3_64`],
//! hash id 3) closes about half of that: one 64-bit hash, and positions that
//! are the top bits of 32-bit products, so the probe takes one `vpmulld`
//! per eight positions (`filter::simd::lookup::BLOCKED32`). Callgrind, lab
//! loop of `contains`, 200,000 absent keys, 10 bits per key, the hash
//! inlined (`HashSpec::hash`): 67 instructions per 16-byte key and 69 per
//! `u64` id, against 93 and 79 with XXH3-128 and sbbf-rs-safe's 46 and 47.
//! A lookup compiled for the filter's `k` (`filter::simd::kinds`), whose
//! block is found without a bounds check (`filter::simd::Blocks`) and whose
//! probe answers through the intrinsic `vptest`, takes 56 and 58 (83 and 66
//! with XXH3-128; the same lab loop of 200,000 and 400,000 keys, 2026-12-05).
//!
//! The blocked layout hashed with XXH3-64 sectorized
//! ([`crate::HashSpec::xxh3_64_sectorized`], hash id 4) goes the rest of the
//! way: one bit in each of the block's eight 64-bit sectors, so the probe
//! moves no lane (`filter::simd::lookup::SECTORIZED`): the lookup compiled
//! for it, the key already hashed, is 24 instructions, call and return
//! included (disassembled, 2026-12-05). It costs accuracy where `k = 8` is more than the block's best
//! (1.05% against 0.96% at 10 bits per key, `crate::fp_sectorized`).
//!
//! [`BitFilter::contains_many`] gets past that bound: it hashes keys ahead
//! and prefetches their lines, so 16 lookups' misses are in flight; at 10M
//! keys it answered in 0.2–0.45 of the time of one `contains` per key (five
//! runs on this shared 2-core machine).
//!
//! The `peers` bench (`cargo bench --bench peers`) measures all of this
//! against `fastbloom`, `sbbf-rs-safe`, `xorf` and `bloomfilter`.

mod batch;
mod bias;
mod bit_filter;
mod bulk;
mod frozen;
mod jobs;
mod partition;
mod probe;
mod setops;
mod shadow;
mod stripes;
#[cfg(test)]
mod tests;
mod view;

pub use bit_filter::BitFilter;
pub use frozen::FrozenFilter;
pub(crate) use setops::check_compatible;
pub use view::FilterView;

use crate::error::FilterError;
use crate::filter::geometry::{BLOCK_BYTES, SPLIT_BLOCK_BITS, SPLIT_K};
use crate::filter::hash::KeyHash;
use crate::filter::params::{FilterParams, Layout, BLOCK_BITS, WORDS_PER_BLOCK};
use crate::filter::simd;
use probe::{probe_block, probe_standard};

/// Read access to a filter's bits, shared by the owned [`BitFilter`] and the
/// borrowed [`FilterView`]: every query and estimator is written once, here.
///
/// An implementation provides [`params`](BloomRead::params) and
/// [`word`](BloomRead::word); every other method has a default. A few
/// methods hidden from these docs are the layouts' probes, which the
/// lookups call: not part of the API, and an implementation need not touch
/// them.
pub trait BloomRead {
    /// The filter's parameters.
    fn params(&self) -> &FilterParams;
    /// Word `i` of the bit array (bit `j` of the filter is bit `j % 64` of word
    /// `j / 64`). `i` must be below `params().num_words()`.
    fn word(&self, i: usize) -> u64;
    /// Hints that word `i` will be read soon. Never required for correctness.
    fn prefetch_word(&self, _i: usize) {}

    /// Whether `key` may be in the set. `false` means definitely absent.
    ///
    /// On x86-64 CPUs with AVX2 the blocked layout tests eight probes at a
    /// time; the answer is the same bit for bit.
    #[inline(always)]
    fn contains(&self, key: &[u8]) -> bool {
        // Hashed here, inlined into the caller (which may know the key's
        // length); only the probe runs behind the dispatch.
        self.contains_hash(self.params().hash().hash(key))
    }

    /// [`BloomRead::contains`] for a key hashed with this filter's
    /// [`crate::HashSpec`]. [`BitFilter`] and [`FilterView`] answer with the
    /// lookup compiled for their layout and this CPU, chosen when they were
    /// made.
    #[inline(always)]
    fn contains_hash(&self, h: KeyHash) -> bool {
        simd::dispatch(jobs::ContainsHash { f: self, h })
    }

    /// Whether the `k` standard-layout positions of `h` are all set. The
    /// default reads through [`BloomRead::word`]; implementors override it to
    /// resolve their storage once per lookup instead of once per probe.
    // Layout internals (the probes call them): not part of the documented API.
    #[doc(hidden)]
    #[inline]
    fn standard_has_all(&self, h: KeyHash) -> bool {
        let p = self.params();
        probe_standard(h, p.m(), p.k(), |i| self.word(i))
    }

    /// The eight words of block `block` (`< params().num_blocks()`), read
    /// one by one (relaxed loads for a shared filter). The default reads
    /// through [`BloomRead::word`]; implementors override it to check the
    /// block's bounds once.
    // Layout internals (the probes call them): not part of the documented API.
    #[doc(hidden)]
    #[inline]
    fn block_words(&self, block: usize) -> [u64; WORDS_PER_BLOCK] {
        let base = block * WORDS_PER_BLOCK;
        std::array::from_fn(|w| self.word(base + w))
    }

    /// All of a borrowed bitset's blocks (a [`FilterView`] of the blocked
    /// layout), for its lookup to find the block of a hash without a
    /// bounds check ([`simd::ByteBlocks::of_hash`]); `None` (the default)
    /// finds it by [`BloomRead::block_bytes`] or [`BloomRead::block_words`].
    #[doc(hidden)]
    #[inline(always)]
    fn byte_blocks(&self) -> Option<simd::ByteBlocks<'_>> {
        None
    }

    /// Block `block` as its 64 bytes, where the filter holds plain bytes (a
    /// [`FilterView`]), so that a lookup can read it with two vector loads;
    /// `None` (the default) reads [`BloomRead::block_words`].
    #[doc(hidden)]
    #[inline(always)]
    fn block_bytes(&self, _block: usize) -> Option<&[u8; BLOCK_BYTES]> {
        None
    }

    /// Block `block` as the aligned atomic words a shared filter keeps (an
    /// owned [`BitFilter`]), so that a lookup can read it with vector loads
    /// (`filter::simd`); `None` (the default) reads [`BloomRead::block_words`].
    #[doc(hidden)]
    #[inline(always)]
    fn shared_block(&self, _block: usize) -> Option<&simd::SharedBlock> {
        None
    }

    /// All of a shared filter's blocks (an owned [`BitFilter`]), for the
    /// blocked layout's lookup to find the block of a hash without a bounds
    /// check ([`simd::Blocks::of_hash`]); `None` (the default) finds it by
    /// [`BloomRead::shared_block`] or [`BloomRead::block_words`]. A blocked
    /// filter's are its `m / 512` blocks.
    #[doc(hidden)]
    #[inline(always)]
    fn shared_blocks(&self) -> Option<&simd::Blocks> {
        None
    }

    /// Split block `b` of a split-block filter as the aligned atomic words
    /// a shared filter keeps (an owned [`BitFilter`]), for vector loads;
    /// `None` (the default) reads [`BloomRead::split_block_bytes`].
    #[doc(hidden)]
    #[inline(always)]
    fn shared_split_block(&self, _b: usize) -> Option<&simd::SplitShared> {
        None
    }

    /// Split block `b` as its 32 bytes, where the filter holds plain bytes
    /// (a [`FilterView`]); `None` (the default) reads
    /// [`BloomRead::split_block_lanes`].
    #[doc(hidden)]
    #[inline(always)]
    fn split_block_bytes(&self, _b: usize) -> Option<&[u8; 32]> {
        None
    }

    /// Whether the bits are known to lie on huge pages (an owned filter
    /// whose advice the kernel took, `filter::pages`): where they do, a
    /// random block costs no page walk, and [`BatchStrategy::Auto`] keeps
    /// the pipeline, which is faster there than partitioning.
    fn on_huge_pages(&self) -> bool {
        false
    }

    /// The eight 32-bit lanes of split block `b` (`< m / 256`), read
    /// through [`BloomRead::word`].
    #[inline]
    fn split_block_lanes(&self, b: usize) -> [u32; SPLIT_K as usize] {
        std::array::from_fn(|i| (self.word(4 * b + i / 2) >> (32 * (i % 2))) as u32)
    }

    /// Whether the `k` in-block positions of `h2` are all set in block
    /// `block` (`< params().num_blocks()`): the scalar probe, the reference
    /// the SIMD probe is tested against.
    // Layout internals (the probes call them): not part of the documented API.
    #[doc(hidden)]
    #[inline]
    fn block_has_all(&self, block: usize, h2: u64, k: u32) -> bool {
        probe_block(&self.block_words(block), h2, k)
    }

    /// Batched lookup: `out[i] = contains(keys[i])`, the same answers as one
    /// [`BloomRead::contains`] per key, faster on filters larger than the
    /// cache because the memory accesses of many keys overlap.
    ///
    /// A software pipeline: each key is hashed and the cache lines its
    /// lookup will read are prefetched some keys before it is tested, so the
    /// lines have had that many lookups' time to arrive. A single lookup
    /// cannot do this: out-of-order execution overlaps only as many lookups
    /// as fit in the reorder buffer, two to four of ours. Filters up to
    /// 1 MiB are looked up key by key (they sit in the L2 cache, where the
    /// pipeline only adds work).
    ///
    /// # Panics
    /// If `out` is shorter than `keys` (a caller bug, not an input error).
    fn contains_many_into<K: AsRef<[u8]>>(&self, keys: &[K], out: &mut [bool]) {
        self.contains_many_with(keys, out, BatchStrategy::Auto);
    }

    /// [`BloomRead::contains_many_into`] with the way the batch runs
    /// chosen by the caller (the answers are the same whichever runs).
    ///
    /// # Panics
    /// If `out` is shorter than `keys` (a caller bug, not an input error).
    fn contains_many_with<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        out: &mut [bool],
        strategy: BatchStrategy,
    ) {
        assert!(out.len() >= keys.len(), "output slice shorter than keys");
        let out = &mut out[..keys.len()];
        simd::dispatch(jobs::ContainsMany {
            f: self,
            keys,
            out,
            strategy,
        });
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
        estimate_len_of(self.params(), |i| self.word(i))
    }

    /// The false-positive rate implied by the current fill: `(ones/m)^k`, or
    /// its mean over blocks for the blocked layout, or the mean over blocks
    /// of the product of the eight lanes' fills for the split-block layout.
    /// This is what a lookup of a random absent key experiences now,
    /// whatever was inserted or removed.
    fn estimated_fp(&self) -> f64 {
        let p = self.params();
        let k = p.k() as i32;
        match p.layout() {
            Layout::Standard => self.fill_ratio().powi(k),
            Layout::SplitBlock => {
                let blocks = p.m() / SPLIT_BLOCK_BITS;
                let sum: f64 = (0..blocks as usize)
                    .map(|b| {
                        let lanes = self.split_block_lanes(b);
                        lanes
                            .iter()
                            .map(|l| f64::from(l.count_ones()) / 32.0)
                            .product::<f64>()
                    })
                    .sum();
                sum / blocks as f64
            }
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
        Ok(estimate_len_of(self.params(), |i| {
            self.word(i) | other.word_dyn(i)
        }))
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

/// How a batched lookup runs ([`BloomRead::contains_many_with`]); every
/// strategy gives the same answers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BatchStrategy {
    /// Chosen by the sizes: key by key for filters up to 1 MiB (they sit in
    /// L2, where the pipeline only adds work), partitioned for filters of
    /// [`PARTITION_MIN_BYTES`] or more on base pages probed with batches of
    /// [`PARTITION_MIN_KEYS`] or more keys, the pipeline otherwise (also on
    /// huge pages, where a random block costs no page walk and the
    /// pipeline is faster: the `peers` bench's large point).
    #[default]
    Auto,
    /// One lookup after the other.
    KeyByKey,
    /// The prefetching pipeline (`contains_many_into`'s docs).
    Pipeline,
    /// Radix-partitioned probing (`filter::bloom::partition`): the batch is
    /// hashed, grouped by block range and probed range by range. The
    /// blocked and split-block layouts; the standard layout, whose keys
    /// touch `k` ranges, runs the pipeline.
    Partitioned,
}

/// The filter size from which [`BatchStrategy::Auto`] partitions a large
/// batch.
pub const PARTITION_MIN_BYTES: u64 = 256 << 20;
/// The batch size from which [`BatchStrategy::Auto`] partitions, on a
/// filter of [`PARTITION_MIN_BYTES`] or more.
pub const PARTITION_MIN_KEYS: usize = 1 << 16;

impl BatchStrategy {
    /// What [`BatchStrategy::Auto`] runs for a filter of `bytes` (on huge
    /// pages or not) and a batch of `keys`.
    pub(crate) fn auto(bytes: u64, huge: bool, keys: usize) -> BatchStrategy {
        if bytes <= batch::PIPELINE_MIN_BYTES {
            BatchStrategy::KeyByKey
        } else if bytes >= PARTITION_MIN_BYTES && !huge && keys >= PARTITION_MIN_KEYS {
            BatchStrategy::Partitioned
        } else {
            BatchStrategy::Pipeline
        }
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

/// The estimated number of keys of a filter of `p` whose word `i` is
/// `word(i)` (see [`BloomRead::estimate_len`]): from the zero bits of the
/// whole array (standard), of each block (blocked), or of each split block,
/// whose lanes of 32 bits each take one bit per key (a lane with `j` keys
/// has each bit clear with probability `(1 − 1/32)^j`, so `n̂ = ln(Z/256) /
/// ln(1 − 1/32)` from the block's `Z` zeros).
fn estimate_len_of(p: &FilterParams, word: impl Fn(usize) -> u64) -> f64 {
    let ones = |words: std::ops::Range<usize>| -> u64 {
        words.map(|i| u64::from(word(i).count_ones())).sum()
    };
    match p.layout() {
        Layout::Standard => estimate_from_zeros(p.m(), p.m() - ones(0..p.num_words()), p.k()),
        Layout::Blocked => (0..p.num_blocks() as usize)
            .map(|b| {
                let w = b * WORDS_PER_BLOCK;
                estimate_from_zeros(BLOCK_BITS, BLOCK_BITS - ones(w..w + WORDS_PER_BLOCK), p.k())
            })
            .sum(),
        Layout::SplitBlock => (0..(p.m() / SPLIT_BLOCK_BITS) as usize)
            .map(|b| {
                let zeros = SPLIT_BLOCK_BITS - ones(4 * b..4 * b + 4);
                // Z/256 = (Z/8)/32: one lane of 32 bits, one bit per key.
                estimate_from_zeros_f(32, zeros as f64 / 8.0, 1)
            })
            .sum(),
    }
}

fn estimate_from_zeros(m: u64, zeros: u64, k: u32) -> f64 {
    estimate_from_zeros_f(m, zeros as f64, k)
}

/// `ln(Z/m) / (k·ln(1 − 1/m))`, a saturated filter (no zero) read as if
/// half a bit were zero. An empty block gives `0 / negative`, which is
/// `-0.0`: adding `0.0` makes it `0.0`, so that an empty filter's estimate
/// prints as 0, not -0.
fn estimate_from_zeros_f(m: u64, zeros: f64, k: u32) -> f64 {
    let z = if zeros == 0.0 { 0.5 } else { zeros };
    (z / m as f64).ln() / (k as f64 * (-1.0 / m as f64).ln_1p()) + 0.0
}
