//! [`FrozenFilter`]: a bit filter no thread writes, whose lookups may read
//! a block with wider loads than a shared filter's.

use super::probe::prefetch;
use super::{BitFilter, BloomRead};
use crate::filter::hash::KeyHash;
use crate::filter::params::FilterParams;
use crate::filter::simd::{FrozenBlocks, LookupFn};
#[cfg(target_endian = "little")]
use crate::filter::{
    geometry::BLOCK_BYTES,
    params::WORDS_PER_BLOCK,
    simd::{le_words, ByteBlocks},
};

/// A [`BitFilter`] that is done being written: read-only, with the same
/// answers bit for bit, and lookups of the blocked layout that read less.
///
/// A [`BitFilter`]'s `insert` takes `&self`, so another thread may write a
/// block while a lookup reads it, and its lookup reads the key's 64-byte
/// block with four 16-byte loads: the widest load Intel and AMD document
/// as one atomic access (a wider one could read a word half before and
/// half after a store). No thread writes a frozen filter, so its lookup
/// reads the block with two 32-byte loads, as a [`crate::FilterView`] of
/// plain bytes does, from bits that stay 64-byte aligned (a view's are
/// where its caller put them): at 1M 16-byte keys, sectorized, 0.95–0.96×
/// sbbf-rs-safe's time per absent key where the shared filter takes 1.02–1.04×
/// (`cargo bench --bench peers`, docs/BENCHMARKS.md, "A frozen filter").
/// Freeze a filter that only answers lookups from then on: a runtime filter
/// on its probe side, a file's filter loaded for reads.
/// [`FrozenFilter::thaw`] makes it writable again. Neither copies a bit:
/// both take the filter by value and keep its memory.
///
/// # Examples
/// ```
/// use filterstore::{BitFilter, FilterParams, HashSpec, Layout};
/// let p = FilterParams::for_capacity(1_000, 0.01, Layout::Blocked, HashSpec::xxh3_64_sectorized(7))?;
/// let f = BitFilter::new(p)?;
/// f.insert(b"apple");
/// let frozen = f.freeze();
/// assert!(frozen.contains(b"apple"));
/// let f = frozen.thaw(); // writable again, the same bits
/// f.insert(b"pear");
/// assert!(f.contains(b"apple") && f.contains(b"pear"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct FrozenFilter {
    params: FilterParams,
    /// The filter's blocks, which nothing writes while it is frozen.
    blocks: FrozenBlocks,
    /// This filter's lookup for this CPU (`filter::simd`), compiled for a
    /// frozen filter's bytes.
    lookup: LookupFn<FrozenFilter>,
    /// Whether the kernel took the advice to back the bits with huge pages.
    huge: bool,
}

impl std::fmt::Debug for FrozenFilter {
    /// The parameters and the count of set bits, not the bits.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrozenFilter")
            .field("params", &self.params)
            .field("ones", &self.count_ones())
            .finish()
    }
}

impl BitFilter {
    /// This filter, read-only ([`FrozenFilter`]): the same bits, moved,
    /// not copied; its lookups of the blocked layout read each block with
    /// two 32-byte loads instead of four 16-byte ones.
    pub fn freeze(self) -> FrozenFilter {
        let (params, blocks, huge) = self.into_parts();
        FrozenFilter {
            params,
            blocks: FrozenBlocks::new(blocks),
            lookup: LookupFn::best(params.layout(), params.hash().algo, params.k()),
            huge,
        }
    }
}

impl FrozenFilter {
    /// The filter again, writable: the same bits, moved, not copied. Its
    /// first writer takes its write bias afresh (`bloom::bias`).
    pub fn thaw(self) -> BitFilter {
        BitFilter::from_parts(self.params, self.blocks.into_blocks(), self.huge)
    }

    /// Whether `key` may be in the set (inherent shortcut for
    /// [`BloomRead::contains`]).
    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        BloomRead::contains(self, key)
    }

    /// Batched lookup (inherent shortcut for [`BloomRead::contains_many`]).
    pub fn contains_many<K: AsRef<[u8]>>(&self, keys: &[K]) -> Vec<bool> {
        BloomRead::contains_many(self, keys)
    }

    /// The bit array as little-endian bytes, padding included: what
    /// [`BitFilter::to_le_bytes`] gives.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.params.bit_bytes() as usize);
        for i in 0..self.params.num_words() {
            out.extend_from_slice(&self.word(i).to_le_bytes());
        }
        out
    }
}

impl BloomRead for FrozenFilter {
    fn params(&self) -> &FilterParams {
        &self.params
    }
    #[inline(always)]
    fn word(&self, i: usize) -> u64 {
        // The words are in this target's byte order (`FrozenBlocks::bytes`).
        let mut w = [0u8; 8];
        if let Some(s) = self.blocks.bytes().get(i * 8..i * 8 + 8) {
            w.copy_from_slice(s);
        }
        u64::from_ne_bytes(w)
    }
    #[inline(always)]
    fn prefetch_word(&self, i: usize) {
        if let Some(b) = self.blocks.bytes().get(i * 8) {
            prefetch(b);
        }
    }
    #[inline(always)]
    fn contains(&self, key: &[u8]) -> bool {
        // As `BitFilter`'s: a 64-bit hash goes to the probe alone.
        self.lookup.key(self, self.params.hash(), key)
    }
    #[inline(always)]
    fn contains_hash(&self, h: KeyHash) -> bool {
        self.lookup.call(self, h)
    }
    // The byte-level probes read the bytes as little-endian words (a view's
    // format); on a big-endian target the lookups read `word` instead.
    #[cfg(target_endian = "little")]
    #[inline(always)]
    fn byte_blocks(&self) -> Option<ByteBlocks<'_>> {
        Some(self.blocks.byte_blocks())
    }
    #[cfg(target_endian = "little")]
    #[inline(always)]
    fn block_bytes(&self, b: usize) -> Option<&[u8; BLOCK_BYTES]> {
        self.blocks
            .bytes()
            .get(BLOCK_BYTES * b..BLOCK_BYTES * (b + 1))
            .and_then(|s| <&[u8; BLOCK_BYTES]>::try_from(s).ok())
    }
    #[cfg(target_endian = "little")]
    #[inline(always)]
    fn split_block_bytes(&self, b: usize) -> Option<&[u8; 32]> {
        self.blocks
            .bytes()
            .get(32 * b..32 * b + 32)
            .and_then(|s| <&[u8; 32]>::try_from(s).ok())
    }
    #[cfg(target_endian = "little")]
    #[inline(always)]
    fn block_words(&self, block: usize) -> [u64; WORDS_PER_BLOCK] {
        match self.block_bytes(block) {
            Some(b) => le_words(b),
            // Unreachable: the blocks are the filter's `num_blocks()`, and
            // `block` is below it. All ones ("maybe") can never be a false
            // negative.
            None => [u64::MAX; WORDS_PER_BLOCK],
        }
    }
    fn on_huge_pages(&self) -> bool {
        self.huge
    }
}

#[cfg(test)]
mod tests;
