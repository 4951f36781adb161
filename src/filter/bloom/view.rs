//! [`FilterView`]: a read-only filter over borrowed bytes.

use super::probe::prefetch;
use super::{BitFilter, BloomRead};
use crate::error::{FilterError, ParamError};
use crate::filter::geometry::BLOCK_BYTES;
use crate::filter::hash::KeyHash;
use crate::filter::params::{FilterParams, Layout, WORDS_PER_BLOCK};
use crate::filter::simd::{le_words, ByteBlocks, LookupChoice, LookupFn};

/// A read-only filter over borrowed little-endian bytes (for instance the body
/// of a decoded message or a memory-mapped file): queried without copying.
/// Its blocks lie where the bytes do: bytes that do not start on a 64-byte
/// line make every block of the blocked layout span two lines, which a
/// lookup pays for (docs/KNOWN_ISSUES.md). For many lookups, copy them into
/// a [`crate::FrozenFilter`]: `view.to_owned_filter()?.freeze()`.
///
/// # Examples
/// ```
/// use filterstore::{BitFilter, FilterParams, FilterView, HashSpec, Layout};
/// let p = FilterParams::for_capacity(1_000, 0.01, Layout::Standard, HashSpec::xxh3(7))?;
/// let f = BitFilter::new(p)?;
/// f.insert(b"apple");
/// let bytes = f.to_le_bytes();
/// assert_eq!(bytes.len() as u64, p.bit_bytes());
/// let view = FilterView::new(p, &bytes)?;
/// assert!(view.contains(b"apple") && !view.contains(b"pear"));
/// assert!(FilterView::new(p, &bytes[1..]).is_err(), "the length is checked");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy)]
pub struct FilterView<'a> {
    params: FilterParams,
    bytes: &'a [u8],
    /// The compiled lookup for these parameters on this CPU, chosen once
    /// (an index, not the pointer: a `fn(&FilterView<'a>, _)` here would
    /// make the view invariant in `'a`).
    lookup: LookupChoice,
    /// `bytes` as the blocked layout's 64-byte blocks, for a view of that
    /// layout (`None` for the others).
    blocks: Option<ByteBlocks<'a>>,
}

impl std::fmt::Debug for FilterView<'_> {
    /// The parameters and the length, not the bytes (megabytes of them).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilterView")
            .field("params", &self.params)
            .field("bytes", &self.bytes.len())
            .finish()
    }
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
        let lookup = LookupChoice::best(params.layout(), params.hash().algo, params.k());
        // `m` is a whole number of blocks in this layout (`FilterParams`),
        // so these are the filter's `m / 512` blocks, no tail.
        let blocks = match params.layout() {
            Layout::Blocked => ByteBlocks::new(bytes),
            _ => None,
        };
        Ok(FilterView {
            params,
            bytes,
            lookup,
            blocks,
        })
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
    fn contains(&self, key: &[u8]) -> bool {
        // As `BitFilter`'s: a 64-bit hash goes to the probe alone.
        LookupFn::chosen(self.lookup).key(self, self.params.hash(), key)
    }
    #[inline(always)]
    fn contains_hash(&self, h: KeyHash) -> bool {
        // The pointer from the choice `new` made (one load): a stored
        // `fn(&FilterView<'a>)` would make the view invariant in `'a` (a
        // view of `'static` bytes could no longer be passed where a shorter
        // one is expected).
        LookupFn::chosen(self.lookup).call(self, h)
    }
    #[inline(always)]
    fn byte_blocks(&self) -> Option<ByteBlocks<'_>> {
        self.blocks
    }
    #[inline(always)]
    fn block_bytes(&self, b: usize) -> Option<&[u8; BLOCK_BYTES]> {
        // `None` is unreachable: `new` checked the length, and `b < m/512`.
        self.bytes
            .get(BLOCK_BYTES * b..BLOCK_BYTES * (b + 1))
            .and_then(|s| <&[u8; BLOCK_BYTES]>::try_from(s).ok())
    }
    #[inline(always)]
    fn split_block_bytes(&self, b: usize) -> Option<&[u8; 32]> {
        // `None` is unreachable: `new` checked the length, and `b < m/256`.
        self.bytes
            .get(32 * b..32 * b + 32)
            .and_then(|s| <&[u8; 32]>::try_from(s).ok())
    }
    #[inline(always)]
    fn block_words(&self, block: usize) -> [u64; WORDS_PER_BLOCK] {
        match self.block_bytes(block) {
            Some(b) => le_words(b),
            // Unreachable: `new` checked the length against the parameters.
            // All ones ("maybe") is the answer that can never be a false
            // negative.
            None => [u64::MAX; WORDS_PER_BLOCK],
        }
    }
}
