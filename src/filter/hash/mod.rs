//! Stable, seeded key hashing and the derivation of a key's `k` positions.
//!
//! Everything persisted or shipped must be re-derivable by another process on
//! another platform, so keys are hashed with a named algorithm — XXH3-128
//! from `xxhash-rust` for the standard and blocked layouts, XXH3-64 for the
//! blocked one, XXH64 for the split-block one — and a seed, both stored in
//! every filter's header.
//! `std`'s hashers are never used: their output is not specified and the
//! default one is randomly keyed.
//!
//! From the 128-bit hash `(h1, h2)`:
//!
//! * **Standard layout**: enhanced double hashing (Dillinger & Manolios,
//!   "Bloom Filters in Probabilistic Verification"; Kirsch & Mitzenmacher show
//!   two hashes lose nothing asymptotically): `x = h1, y = h2`, then for each
//!   `i`: position `i` is `x` mapped to `[0, m)`, `x += y`, `y += i`. The cubic
//!   term removes the failure of plain double hashing when `y ≈ 0`.
//! * **Blocked layout**: the block is `h1` mapped to `[0, blocks)`; position
//!   `i` inside the 512-bit block is the top 9 bits of `h2·SALT[i]` with 32
//!   fixed odd multipliers (multiply-shift hashing, as in Parquet's split block
//!   filter). The block index uses the high bits of `h1` and the in-block
//!   positions only `h2`, so the two are independent.
//! * Mapping to a range is multiply-high, `(x·m) >> 64`: no division, and no
//!   modulo bias worth measuring for `m ≤ 2^40`.
//!
//! * **Split-block layout**: one 64-bit hash, XXH64 seed 0 ([`HashAlgo::Xxh64`],
//!   carried as `h1`; `h2` is 0), and Parquet's own positions
//!   (`split_positions`, from `filter::split`'s block index and lane bits).
//! * **XXH3-64** ([`HashAlgo::Xxh3_64`], the blocked layout only): one
//!   64-bit hash `h`, carried as `h1 = h` and `h2 = h << 32`. The blocked
//!   layout's formulas above are unchanged; with the low half of `h2` zero,
//!   position `i` is the top 9 bits of the 32-bit product
//!   `lo32(h) · lo32(SALT[i])`, one 32-bit multiply, and the block is picked
//!   by all 64 bits of `h`, mostly its upper ones. Why a second hash: a
//!   single lookup is bound by how many lookups the CPU overlaps, and the
//!   128-bit hash's two 64×64→128 multiplies and longer dependency chain
//!   cost more than the whole rest of the lookup (module docs of
//!   `filter::bloom`).
//!
//! * **XXH3-64, sectorized** ([`HashAlgo::Xxh3_64Sectorized`], the blocked
//!   layout only, `k = 8`): the hash and the block of XXH3-64, `x = lo32(h)`.
//!   The block's sixteen 32-bit words (word `j` is bits `32j .. 32j + 32`)
//!   form eight sectors, sector `i` being words `i` and `i + 8`; the key
//!   sets one bit in each. With `r = (x · lo32(SALT[i])) >> 26`, the top 6
//!   bits of the 32-bit product, its bit in sector `i` is bit `r & 31` of
//!   word `i + 8·(r >> 5)`, position `32·(i + 8·(r >> 5)) + (r & 31)`. A
//!   lookup is then one multiply for the eight positions, two shifts for
//!   their masks (one per half of the block) and one test, where a probe
//!   that may land in any word permutes the block's words first
//!   (`filter::simd`). Sectorization (Lang, Neumann, Kemper and Boncz,
//!   "Performance-Optimal Filtering", VLDB 2019) costs some accuracy where
//!   `k = 8` is more than a block's best: 1.05% against 0.96% at 10 bits per
//!   key, still under the split-block layout's 1.27% (`fp_sectorized`).
//!
//! A golden test pins the positions produced for fixed keys and seeds: this
//! function can never change by accident, on any platform.

use crate::filter::geometry::{
    Layout, BLOCK_BITS, MAX_K, SPLIT_BLOCK_BITS, SPLIT_K, WORDS_PER_BLOCK,
};
use crate::filter::split::{split_block_index, split_lane_bit};
use crate::filter::xxh64::xxh64;
use xxhash_rust::xxh3::{xxh3_128_with_seed, xxh3_64_with_seed};

/// Identifies a hash algorithm in persisted headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HashAlgo {
    /// XXH3, 128-bit output, seeded (`xxh3_128_with_seed`). Id 1.
    Xxh3_128,
    /// XXH64, 64-bit output (Parquet's Bloom filter hash). Id 2. Only the
    /// split-block layout hashes with it, with seed 0.
    Xxh64,
    /// XXH3, 64-bit output, seeded (`xxh3_64_with_seed`), as `h1 = h`,
    /// `h2 = h << 32` (module docs). Id 3, format version 4. Only the
    /// blocked layout hashes with it.
    Xxh3_64,
    /// XXH3-64 as [`HashAlgo::Xxh3_64`], with sectorized positions: the
    /// block's sixteen 32-bit words form eight sectors (words `i` and
    /// `i + 8`), and a key sets one bit in each (module docs). Id 4, format
    /// version 6. Only the blocked layout hashes with it, with `k = 8`.
    Xxh3_64Sectorized,
}

impl HashAlgo {
    /// Stable one-byte identifier used in every persisted header.
    pub fn id(self) -> u8 {
        match self {
            HashAlgo::Xxh3_128 => 1,
            HashAlgo::Xxh64 => 2,
            HashAlgo::Xxh3_64 => 3,
            HashAlgo::Xxh3_64Sectorized => 4,
        }
    }
    /// Inverse of [`HashAlgo::id`].
    pub fn from_id(id: u8) -> Option<HashAlgo> {
        match id {
            1 => Some(HashAlgo::Xxh3_128),
            2 => Some(HashAlgo::Xxh64),
            3 => Some(HashAlgo::Xxh3_64),
            4 => Some(HashAlgo::Xxh3_64Sectorized),
            _ => None,
        }
    }
    /// Human-readable name.
    pub fn name(self) -> &'static str {
        match self {
            HashAlgo::Xxh3_128 => "xxh3-128",
            HashAlgo::Xxh64 => "xxh64",
            HashAlgo::Xxh3_64 => "xxh3-64",
            HashAlgo::Xxh3_64Sectorized => "xxh3-64-sectorized",
        }
    }
}

/// An algorithm and its seed: everything needed to hash keys the same way again.
///
/// # Examples
/// The output is part of the file format: it is the same on every platform
/// and in every release.
/// ```
/// use filterstore::HashSpec;
/// let h = HashSpec::xxh3(42).hash(b"key");
/// assert_eq!((h.h1, h.h2), (0x6719_7794_b225_585e, 0x26c0_feb9_b96a_e472));
/// assert_ne!(HashSpec::xxh3(43).hash(b"key"), h, "the seed matters");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HashSpec {
    /// The algorithm.
    pub algo: HashAlgo,
    /// The seed. Per-table seeds are random by default so that an adversary who
    /// does not know the seed cannot craft keys that collide in the filter.
    pub seed: u64,
}

impl HashSpec {
    /// XXH3-128 with the given seed.
    pub fn xxh3(seed: u64) -> Self {
        HashSpec {
            algo: HashAlgo::Xxh3_128,
            seed,
        }
    }

    /// XXH3-128 with a seed drawn from the operating system's random source.
    pub fn random() -> Self {
        HashSpec::xxh3(random_seed())
    }

    /// XXH3-64 with the given seed ([`HashAlgo::Xxh3_64`]): the blocked
    /// layout's cheaper hash, for the fastest single lookups. Filters that
    /// use it are written as format version 4 (`docs/FORMAT.md` § 15), which
    /// older releases refuse to read ("upgrade filterstore").
    ///
    /// ```
    /// use filterstore::HashSpec;
    /// let h = HashSpec::xxh3_64(42).hash(b"key");
    /// assert_eq!(h.h2, h.h1 << 32, "one 64-bit hash, its low half in h2");
    /// assert_eq!(h.h1, 0x6719_7794_b225_585e);
    /// ```
    pub fn xxh3_64(seed: u64) -> Self {
        HashSpec {
            algo: HashAlgo::Xxh3_64,
            seed,
        }
    }

    /// XXH3-64 with the given seed and sectorized positions
    /// ([`HashAlgo::Xxh3_64Sectorized`]): the blocked layout's fastest
    /// lookups and inserts, one bit in each of a block's eight 64-bit
    /// sectors (`k = 8`). It hashes a key as [`HashSpec::xxh3_64`] does;
    /// the positions differ. Filters that use it are written as format
    /// version 6 (`docs/FORMAT.md` § 15), which older releases refuse to
    /// read ("upgrade filterstore").
    ///
    /// ```
    /// use filterstore::{FilterParams, HashSpec, Layout};
    /// let spec = HashSpec::xxh3_64_sectorized(42);
    /// assert_eq!(spec.hash(b"key"), HashSpec::xxh3_64(42).hash(b"key"));
    /// let p = FilterParams::for_capacity(1_000_000, 0.01, Layout::Blocked, spec)?;
    /// assert_eq!(p.k(), 8, "one bit per sector");
    /// # Ok::<(), filterstore::ParamError>(())
    /// ```
    pub fn xxh3_64_sectorized(seed: u64) -> Self {
        HashSpec {
            algo: HashAlgo::Xxh3_64Sectorized,
            seed,
        }
    }

    /// XXH64 with seed 0: Parquet's Bloom filter hash, the one hash of the
    /// split-block layout ([`Layout::SplitBlock`]).
    ///
    /// # Keys an adversary chooses
    /// The specification fixes the hash and its seed, so that every reader
    /// derives the same bits; there is no per-table secret. Whoever can
    /// choose the keys of a split-block filter can therefore compute, offline,
    /// keys that all land in one block (about `z` tries per key for `z`
    /// blocks), saturating it so that any key of that block answers "maybe".
    /// That costs the host extra reads for those keys, never a false
    /// negative, and does not raise the false-positive rate of keys in other
    /// blocks. Equally, an adversary can pick absent keys that are false
    /// positives of a published filter. Hosts whose keys come from untrusted
    /// parties and who need no Parquet interoperability should keep the
    /// blocked layout, whose per-table random seed ([`HashSpec::random`])
    /// hides the positions.
    ///
    /// ```
    /// use filterstore::HashSpec;
    /// // XXH64 of "abc", seed 0, as the xxHash reference computes it.
    /// assert_eq!(HashSpec::xxh64().hash(b"abc").h1, 0x44bc_2cf5_ad77_0999);
    /// ```
    pub fn xxh64() -> Self {
        HashSpec {
            algo: HashAlgo::Xxh64,
            seed: 0,
        }
    }

    /// The hash a new filter of `layout` takes by default: XXH64 seed 0 for
    /// the split-block layout (fixed by Parquet), XXH3-128 with a random
    /// seed for the others.
    pub fn default_for(layout: Layout) -> Self {
        match layout {
            Layout::SplitBlock => HashSpec::xxh64(),
            Layout::Standard | Layout::Blocked => HashSpec::random(),
        }
    }

    /// Hashes one key. Always inlined: where the caller knows the key's
    /// length (a `u64` id, a fixed-size key), the hash's branches on the
    /// length fold away, and a lookup does not call out of line to hash.
    #[inline(always)]
    pub fn hash(&self, key: &[u8]) -> KeyHash {
        match self.algo {
            HashAlgo::Xxh3_128 => Xxh3Hasher(self.seed).hash(key),
            HashAlgo::Xxh64 => Xxh64Hasher(self.seed).hash(key),
            HashAlgo::Xxh3_64 | HashAlgo::Xxh3_64Sectorized => Xxh3_64Hasher(self.seed).hash(key),
        }
    }

    /// The one 64-bit hash `h` of `key` where this spec's hash is that
    /// (XXH3-64, either position rule): then [`HashSpec::hash`] is
    /// [`KeyHash::of_64`]`(h)`. A single lookup passes `h` alone to its
    /// compiled probe ([`crate::BitFilter`]'s `contains`), which derives
    /// `h2` itself: the caller's shift and the callee's shift back cost
    /// the lookup more than their two instructions (docs/BENCHMARKS.md).
    #[inline(always)]
    pub(crate) fn hash64(&self, key: &[u8]) -> Option<u64> {
        match self.algo {
            HashAlgo::Xxh3_64 | HashAlgo::Xxh3_64Sectorized => {
                Some(xxh3_64_with_seed(key, self.seed))
            }
            HashAlgo::Xxh3_128 | HashAlgo::Xxh64 => None,
        }
    }
}

/// One hash algorithm with its seed, as a type: a loop over many keys is
/// compiled once per algorithm, with no match on the algorithm per key
/// (the bulk inserts and the batched lookups pick one per layout: every
/// layout has exactly one algorithm, `FilterParams::new`).
pub(crate) trait KeyHasher: Copy {
    /// Whether `h2` is `h << 32` (XXH3-64), whose in-block positions the
    /// probes compute from 32-bit products
    /// (`Probe::block_masks32`).
    const H2_SHIFTED: bool = false;

    /// Whether a key's positions are sectorized
    /// ([`HashAlgo::Xxh3_64Sectorized`]: [`sector_masks`]).
    const SECTORIZED: bool = false;

    /// The hash of `key`.
    fn hash(self, key: &[u8]) -> KeyHash;
}

/// XXH3-128 with a seed ([`HashAlgo::Xxh3_128`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Xxh3Hasher(pub(crate) u64);

impl KeyHasher for Xxh3Hasher {
    #[inline(always)]
    fn hash(self, key: &[u8]) -> KeyHash {
        let h = xxh3_128_with_seed(key, self.0);
        KeyHash {
            h1: h as u64,
            h2: (h >> 64) as u64,
        }
    }
}

/// XXH3-64 with a seed ([`HashAlgo::Xxh3_64`]): `h1 = h`, `h2 = h << 32`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Xxh3_64Hasher(pub(crate) u64);

impl KeyHasher for Xxh3_64Hasher {
    const H2_SHIFTED: bool = true;

    #[inline(always)]
    fn hash(self, key: &[u8]) -> KeyHash {
        KeyHash::of_64(xxh3_64_with_seed(key, self.0))
    }
}

/// XXH3-64 with a seed and sectorized positions
/// ([`HashAlgo::Xxh3_64Sectorized`]): the hash of [`Xxh3_64Hasher`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Xxh3_64SectorizedHasher(pub(crate) u64);

impl KeyHasher for Xxh3_64SectorizedHasher {
    const H2_SHIFTED: bool = true;
    const SECTORIZED: bool = true;

    #[inline(always)]
    fn hash(self, key: &[u8]) -> KeyHash {
        Xxh3_64Hasher(self.0).hash(key)
    }
}

/// XXH64 with a seed ([`HashAlgo::Xxh64`]), in `h1`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Xxh64Hasher(pub(crate) u64);

impl KeyHasher for Xxh64Hasher {
    #[inline(always)]
    fn hash(self, key: &[u8]) -> KeyHash {
        KeyHash {
            h1: xxh64(key, self.0),
            h2: 0,
        }
    }
}

/// A 64-bit seed from the operating system's random source, through std:
/// each `RandomState` is keyed with OS randomness (per thread, then
/// incremented), and hashing the wall clock and a process-wide counter with
/// it gives distinct seeds for calls in the same nanosecond.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    CALLS.fetch_add(1, Ordering::Relaxed).hash(&mut h);
    std::time::SystemTime::now().hash(&mut h);
    h.finish()
}

/// The hash of a key, from which all of its positions are derived: 128
/// bits (XXH3-128), or 64 (XXH64, in `h1`; `h2` is 0; XXH3-64, in `h1`
/// and, shifted left by 32, in `h2`). A filter hashed with XXH3-64 reads
/// only the upper half of `h2`, in every path, so a hash made by hand for
/// it has the positions of its `h2` with the lower half cleared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyHash {
    /// Low 64 bits: drives the first position (standard) or the block
    /// (blocked); the whole XXH64 hash (split-block: its upper half picks
    /// the block, its lower half the lanes' bits).
    pub h1: u64,
    /// High 64 bits: drives the step (standard) or the in-block positions
    /// (blocked); 0 for XXH64.
    pub h2: u64,
}

impl KeyHash {
    /// The hash of a key whose one 64-bit hash is `h` (XXH3-64, either
    /// position rule): `h1 = h`, `h2 = h << 32`.
    #[inline(always)]
    pub(crate) const fn of_64(h: u64) -> KeyHash {
        KeyHash { h1: h, h2: h << 32 }
    }

    /// This hash as the probes of the blocked layout hashed with XXH3-64
    /// read it: `h2`'s upper half only (`x = h2 >> 32`, one 32-bit
    /// product per position). The lower half of every hash XXH3-64 makes
    /// is zero, so this is the same hash; one made by hand
    /// ([`crate::BitFilter::insert_hash`]) may have it nonzero, and then
    /// its positions are still the bits the bit filter sets.
    #[inline(always)]
    pub(crate) const fn upper_h2(self) -> KeyHash {
        KeyHash {
            h1: self.h1,
            h2: self.h2 >> 32 << 32,
        }
    }
}

/// A hash as a compiled lookup or insert takes it (`filter::simd`): a
/// key's [`KeyHash`], or the one 64-bit hash of a key hashed with XXH3-64
/// ([`HashSpec::hash64`]), whose `KeyHash` the callee makes
/// ([`KeyHash::of_64`]): the caller's shift and the callee's shift back
/// cost a lookup 8% (docs/BENCHMARKS.md, "A key's one 64-bit hash to the
/// probe").
pub(crate) trait HashArg: Copy {
    /// The hash's [`KeyHash`].
    fn key_hash(self) -> KeyHash;
}

impl HashArg for KeyHash {
    #[inline(always)]
    fn key_hash(self) -> KeyHash {
        self
    }
}

impl HashArg for u64 {
    #[inline(always)]
    fn key_hash(self) -> KeyHash {
        KeyHash::of_64(self)
    }
}

/// Multiply-high range reduction: maps `x` uniformly onto `[0, n)`.
#[inline(always)]
#[cfg_attr(not(feature = "test-internals"), allow(unreachable_pub))]
pub fn map_to_range(x: u64, n: u64) -> u64 {
    ((x as u128 * n as u128) >> 64) as u64
}

/// Odd multipliers for the in-block positions of the blocked layout: the first
/// 32 outputs of SplitMix64 seeded with 0x0B10_0F11_7E25, forced odd; pinned here
/// (and by the golden test) because changing them changes every blocked filter.
pub(crate) const BLOCK_SALTS: [u64; MAX_K as usize] = [
    0x89b0b159d666f075,
    0x13b42b663a61e25d,
    0x7c4c638638cc6ff5,
    0x66a6ee61b4b440d7,
    0xc8bf60d835264a0f,
    0xd85a91eb14d08df3,
    0x74a9b7729b46bbe1,
    0x6896f527c49022fb,
    0xeb2ca2b09a59b937,
    0x8322cd210400288d,
    0x1e267516cc0d0b65,
    0xfc6d030271d05ce9,
    0x6ffaee5f503c572f,
    0xdfea5cae52c89ec9,
    0xc5a76a4ddd7edf37,
    0xc67b55842f340721,
    0x3a4d60ac9eb9ac71,
    0xcd5f491b5fb51a83,
    0x7e6813b602131ea7,
    0x04f538925013631b,
    0x1774854330e51d7d,
    0xdb824dfa46f8304b,
    0x15beaf100286440b,
    0xe43bad0a50e9a04f,
    0xda510f29e3c0c479,
    0x1fda8d787983ce3f,
    0xbf76a6478139f6a5,
    0x4e7131000f4ef9b9,
    0xf5344d3a05b61c27,
    0x00f838e0c9ad7ef9,
    0x85978ae44e55cd3d,
    0x1bedcc3be7c9c193,
];

/// Position (0..512) of the `i`-th probe of a key inside its block.
#[inline(always)]
pub(crate) fn in_block_position(h2: u64, i: usize) -> u32 {
    (h2.wrapping_mul(BLOCK_SALTS[i]) >> 55) as u32
}

/// Bits a sectorized key sets ([`HashAlgo::Xxh3_64Sectorized`]): one per
/// sector, eight sectors of two 32-bit words in a 512-bit block.
pub(crate) const SECTORS: u32 = 8;

/// The 6-bit offset (`0..64`) of sector `i`'s bit of a sectorized key
/// with `x = lo32(h)`: the top 6 bits of `x · lo32(SALT[i])`.
#[inline(always)]
pub(crate) fn sector_offset(x: u32, i: usize) -> u32 {
    x.wrapping_mul(BLOCK_SALTS[i] as u32) >> 26
}

/// The position (`0..512`) of sector `i`'s bit (module docs): bit
/// `r & 31` of 32-bit word `i + 8·(r >> 5)`.
#[inline(always)]
pub(crate) fn sector_position(x: u32, i: usize) -> u32 {
    let r = sector_offset(x, i);
    32 * (i as u32 + 8 * (r >> 5)) + (r & 31)
}

/// A sectorized key's eight positions as the eight 64-bit words of its
/// block ([`in_block_masks`] for [`HashAlgo::Xxh3_64Sectorized`]): the
/// scalar probe's, and the reference of the AVX2 one.
#[inline(always)]
pub(crate) fn sector_masks(x: u32) -> [u64; WORDS_PER_BLOCK] {
    let mut masks = [0u64; WORDS_PER_BLOCK];
    for i in 0..SECTORS as usize {
        let pos = sector_position(x, i);
        masks[(pos / 64) as usize] |= 1 << (pos % 64);
    }
    masks
}

/// The standard layout's probe sequence of one key (enhanced double hashing,
/// module docs): each [`StandardProbes::next_position`] returns the next
/// position in `[0, m)`. The one definition of the standard positions, used
/// by [`for_each_standard_position`] and by the lookups that peel probes off
/// one at a time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StandardProbes {
    x: u64,
    y: u64,
    i: u64,
    m: u64,
}

impl StandardProbes {
    /// The probes of `h` in a filter of `m` bits.
    #[inline(always)]
    pub(crate) fn new(h: KeyHash, m: u64) -> Self {
        StandardProbes {
            x: h.h1,
            y: h.h2,
            i: 0,
            m,
        }
    }

    /// The next position. A key uses the first `k` of the sequence.
    #[inline(always)]
    pub(crate) fn next_position(&mut self) -> u64 {
        let pos = map_to_range(self.x, self.m);
        self.x = self.x.wrapping_add(self.y);
        self.y = self.y.wrapping_add(self.i);
        self.i += 1;
        pos
    }

    /// How many positions [`StandardProbes::next_position`] has returned.
    #[inline(always)]
    pub(crate) fn taken(&self) -> u64 {
        self.i
    }
}

/// A key's in-block positions as the eight 64-bit words of a 512-bit block:
/// bit `p % 64` of word `p / 64` is set for each probe `p` (repeats merge).
/// The scalar probe's `Probe::block_masks`, and the reference of the AVX2
/// one (`simd::tests::block_masks_match_the_reference`); used by
/// [`positions`].
#[inline(always)]
pub(crate) fn in_block_masks(h2: u64, k: u32) -> [u64; WORDS_PER_BLOCK] {
    let mut masks = [0u64; WORDS_PER_BLOCK];
    for i in 0..(k as usize).min(MAX_K as usize) {
        let pos = in_block_position(h2, i);
        masks[(pos / 64) as usize] |= 1 << (pos % 64);
    }
    masks
}

/// Calls `f` with each of the `k` positions (in `[0, m)`) of a key in the
/// standard layout, in probe order, until `f` returns `false`. Positions may
/// repeat.
#[inline(always)]
pub(crate) fn for_each_standard_position(
    h: KeyHash,
    m: u64,
    k: u32,
    mut f: impl FnMut(u64) -> bool,
) {
    let mut probes = StandardProbes::new(h, m);
    for _ in 0..k {
        if !f(probes.next_position()) {
            return;
        }
    }
}

/// A key's distinct positions, sorted ascending: what a counting filter
/// increments, so that inserting and removing a key are exact inverses even
/// when two probes land on the same position.
#[derive(Clone, Copy, Debug, Default)]
pub struct Positions {
    buf: [u64; MAX_K as usize],
    len: usize,
}

impl PartialEq for Positions {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Positions {}

impl Positions {
    /// The positions, sorted, without repeats.
    pub fn as_slice(&self) -> &[u64] {
        &self.buf[..self.len]
    }

    /// The bits of `masks` (word `w` covering positions `base + 64·w ..`),
    /// read off in order: sorted and distinct as they come. At most
    /// [`MAX_K`] bits may be set, as in the masks of one key.
    #[inline(always)]
    pub(crate) fn from_block_masks(base: u64, masks: [u64; WORDS_PER_BLOCK]) -> Positions {
        let (mut buf, mut len) = ([0u64; MAX_K as usize], 0);
        for (w, mut mask) in (0u64..).zip(masks) {
            while mask != 0 && len < buf.len() {
                buf[len] = base + w * 64 + u64::from(mask.trailing_zeros());
                len += 1;
                mask &= mask - 1;
            }
        }
        Positions { buf, len }
    }

    /// Appends `pos` if `keep`, without a branch (the list is unsorted until
    /// [`Positions::sort_small`]); `pos` must not be held already.
    #[inline(always)]
    pub(crate) fn push_if(&mut self, pos: u64, keep: bool) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = pos;
            self.len += usize::from(keep);
        }
    }

    /// Sorts the positions (an insertion sort: a key has a few).
    #[inline(always)]
    pub(crate) fn sort_small(&mut self) {
        let s = &mut self.buf[..self.len];
        for i in 1..s.len() {
            let mut j = i;
            while j > 0 && s[j - 1] > s[j] {
                s.swap(j - 1, j);
                j -= 1;
            }
        }
    }

    /// Appends `pos`, which must be above every position held (the list
    /// stays sorted); ignored once [`MAX_K`] are held.
    #[inline(always)]
    pub(crate) fn push_sorted(&mut self, pos: u64) {
        debug_assert!(self.len == 0 || self.buf[self.len - 1] < pos);
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = pos;
            self.len += 1;
        }
    }
}

/// The positions of hash `h` in a split-block filter of `m` bits (a
/// multiple of 256): eight, one per lane, ascending and distinct by
/// construction.
pub(crate) fn split_positions(h: u64, m: u64) -> Positions {
    let base = split_block_index(h, m / SPLIT_BLOCK_BITS) * SPLIT_BLOCK_BITS;
    let mut out = Positions::default();
    for i in 0..SPLIT_K as usize {
        out.push_sorted(base + 32 * i as u64 + u64::from(split_lane_bit(h as u32, i)));
    }
    out
}

/// The positions of a sectorized key ([`HashAlgo::Xxh3_64Sectorized`]) in a
/// blocked filter of `m` bits: eight, one per sector, ascending and
/// distinct by construction. `x = lo32(h)` is read from `h2 = h << 32`, as
/// every probe of the bit and counting filters reads it (the same value as
/// `lo32(h1)` for every hash the spec makes).
pub(crate) fn sectorized_positions(m: u64, h: KeyHash) -> Positions {
    let base = map_to_range(h.h1, m / BLOCK_BITS) * BLOCK_BITS;
    Positions::from_block_masks(base, sector_masks((h.h2 >> 32) as u32))
}

/// The distinct positions of a key, for any layout (the split-block
/// layout's `k` is always 8) and any hash but XXH3-64 sectorized, whose
/// positions differ from the blocked layout's formula: for a filter's own
/// positions whatever its hash, use [`crate::FilterParams::positions`].
pub fn positions(layout: Layout, m: u64, k: u32, h: KeyHash) -> Positions {
    let mut buf = [0u64; MAX_K as usize];
    let mut len = 0;
    match layout {
        Layout::Standard => for_each_standard_position(h, m, k, |p| {
            buf[len] = p;
            len += 1;
            true
        }),
        Layout::Blocked => {
            // Read off the block's masks in order: sorted and distinct as
            // they come, no sort (whose mispredicts cost more than the
            // probes themselves at k = 7).
            let base = map_to_range(h.h1, m / BLOCK_BITS) * BLOCK_BITS;
            return Positions::from_block_masks(base, in_block_masks(h.h2, k));
        }
        Layout::SplitBlock => return split_positions(h.h1, m),
    }
    let slice = &mut buf[..len];
    slice.sort_unstable();
    let mut w = 0;
    for r in 0..len {
        if r == 0 || slice[r] != slice[w - 1] {
            slice[w] = slice[r];
            w += 1;
        }
    }
    Positions { buf, len: w }
}

#[cfg(test)]
mod tests;
