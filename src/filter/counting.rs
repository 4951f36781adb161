//! Counting Bloom filter with packed 4-bit saturating counters (Summary Cache,
//! Fan et al. §V).
//!
//! * Counters are packed two to a byte (docs/FORMAT.md §10 draws the bytes),
//!   so a 512-counter block, the blocked layout's unit, is 256 contiguous
//!   bytes: one counter page; a 256-bit block of the split-block layout is
//!   128 (two cache lines; its eight counters lie one per 16-byte lane).
//! * 4 bits suffice: with the optimal `k` the chance that any counter ever
//!   reaches 16 is below `1.37e−15·m` ([`crate::filter::params::counter_overflow_bound`]).
//!   Should one reach 15 anyway it *sticks*: never incremented past, never
//!   decremented, so its bit stays set forever. A sticky counter can only cause
//!   false positives, never a false negative; [`CountingFilter::saturated`]
//!   counts them, and the drift monitor regenerates the filter when they appear.
//! * A key adds one to each of its *distinct* positions ([`crate::filter::hash::positions`]),
//!   so insert and remove are exact inverses even when two probes collide.
//! * A remove is refused, changing nothing, when one of the key's counters is
//!   zero: the key was never inserted, and decrementing the others would
//!   create false negatives for keys that share them. A remove of a key that was
//!   never inserted but whose counters are all non-zero (a false positive)
//!   cannot be detected by any counting filter: the host must only remove keys
//!   it inserted (see the durability contract in the README).
//!
//! The in-memory [`CountingFilter`] is used for building, exporting and
//! testing; the store keeps the same counter bytes in pages on disk and applies
//! the same [`nibble`] operations to them.

use crate::error::{FilterError, ParamError};
use crate::filter::bloom::BitFilter;
use crate::filter::geometry::{
    Layout, BLOCK_BITS, MAX_K, SPLIT_BLOCK_BITS, SPLIT_K, WORDS_PER_BLOCK,
};
use crate::filter::hash::{in_block_position, sector_position, HashAlgo, KeyHash, Positions};
use crate::filter::params::{block_of, split_block_of, FilterParams};
use crate::filter::simd::prefetch;
use crate::filter::split::split_lane_bit;

/// The largest counter value; a counter that reaches it is sticky.
pub const COUNTER_MAX: u8 = 15;

/// Bytes of counters per 512-bit block.
pub(crate) const COUNTER_BLOCK_BYTES: usize = 256;

/// Bytes of counters per 256-bit block of the split-block layout.
pub(crate) const SPLIT_COUNTER_BYTES: usize = 128;

/// Operations on packed 4-bit counters, shared by the in-memory filter and the
/// store's counter pages.
pub(crate) mod nibble {
    use super::COUNTER_MAX;

    /// Counter `i` of `bytes`.
    #[inline]
    pub(crate) fn get(bytes: &[u8], i: usize) -> u8 {
        (bytes[i / 2] >> ((i % 2) * 4)) & 0x0f
    }

    /// Sets counter `i` of `bytes` to `v` (`v ≤ 15`).
    #[inline]
    pub(crate) fn set(bytes: &mut [u8], i: usize, v: u8) {
        let shift = (i % 2) * 4;
        let b = &mut bytes[i / 2];
        *b = (*b & !(0x0f << shift)) | ((v & 0x0f) << shift);
    }

    /// Increments counter `i` unless it is saturated. Returns the new value.
    #[inline]
    pub(crate) fn inc(bytes: &mut [u8], i: usize) -> u8 {
        let v = get(bytes, i);
        if v < COUNTER_MAX {
            set(bytes, i, v + 1);
            v + 1
        } else {
            v
        }
    }

    /// Decrements counter `i` unless it is saturated (sticky) or zero. Returns
    /// the new value.
    #[inline]
    pub(crate) fn dec(bytes: &mut [u8], i: usize) -> u8 {
        let v = get(bytes, i);
        if v > 0 && v < COUNTER_MAX {
            set(bytes, i, v - 1);
            v - 1
        } else {
            v
        }
    }

    /// Counter `pos` (`< 2·N`) of an `N`-byte block; no bounds check.
    #[inline(always)]
    pub(crate) fn get_in<const N: usize>(block: &[u8; N], pos: usize) -> u8 {
        (block[(pos / 2) % N] >> ((pos % 2) * 4)) & 0x0f
    }

    /// [`inc`] of counter `pos` (`< 2·N`) of an `N`-byte block, without
    /// branches. Returns the value before.
    #[inline(always)]
    pub(crate) fn inc_in<const N: usize>(block: &mut [u8; N], pos: usize) -> u8 {
        let shift = (pos % 2) * 4;
        let b = &mut block[(pos / 2) % N];
        let v = (*b >> shift) & 0x0f;
        // v + 1 ≤ 15 when v < 15: no carry into the other counter.
        *b += u8::from(v < COUNTER_MAX) << shift;
        v
    }

    /// [`dec`] of counter `pos` (`< 2·N`) of an `N`-byte block, without
    /// branches. Returns the value before.
    #[inline(always)]
    pub(crate) fn dec_in<const N: usize>(block: &mut [u8; N], pos: usize) -> u8 {
        let shift = (pos % 2) * 4;
        let b = &mut block[(pos / 2) % N];
        let v = (*b >> shift) & 0x0f;
        *b -= u8::from(v > 0 && v < COUNTER_MAX) << shift;
        v
    }

    /// Number of saturated counters in `bytes`.
    pub(crate) fn count_saturated(bytes: &[u8]) -> u64 {
        bytes
            .iter()
            .map(|b| (b & 0x0f == 0x0f) as u64 + (b >> 4 == 0x0f) as u64)
            .sum()
    }

    /// The 64-bit word of "counter > 0" bits for counters `64·w .. 64·w + 64`,
    /// read from the 32 bytes that hold them.
    #[inline]
    pub(crate) fn nonzero_word(bytes32: &[u8]) -> u64 {
        let mut w = 0u64;
        for (j, b) in bytes32.iter().enumerate() {
            w |= (((b & 0x0f) != 0) as u64) << (2 * j);
            w |= (((b >> 4) != 0) as u64) << (2 * j + 1);
        }
        w
    }
}

/// What an insert into a counting filter did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InsertOutcome {
    /// Counters that went from 0 to 1 (their bits must be set).
    pub new_bits: u32,
    /// Counters that reached 15 with this insert and are now sticky.
    pub newly_saturated: u32,
}

/// A counting Bloom filter held in memory: 4 bits per position.
///
/// # Examples
/// ```
/// use filterstore::{CountingFilter, FilterError, FilterParams, HashSpec, Layout};
/// let p = FilterParams::for_capacity(1_000, 0.01, Layout::Blocked, HashSpec::xxh3(7))?;
/// let mut c = CountingFilter::new(p)?;
/// let first = c.insert(b"apple");
/// assert_eq!(first.new_bits, p.k(), "k = {}: every counter went 0 -> 1", p.k());
/// assert_eq!(c.insert(b"apple").new_bits, 0, "the second insert counts to 2");
/// assert!(c.remove(b"apple")?.as_slice().is_empty(), "counters back at 1");
/// assert!(c.contains(b"apple"));
/// assert_eq!(c.remove(b"apple")?.as_slice().len(), p.k() as usize, "all bits clear");
/// assert!(!c.contains(b"apple"));
/// assert_eq!(c.remove(b"apple"), Err(FilterError::NotPresent));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct CountingFilter {
    params: FilterParams,
    counters: Vec<u8>,
}

impl std::fmt::Debug for CountingFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountingFilter")
            .field("params", &self.params)
            .field("saturated", &self.saturated())
            .finish()
    }
}

impl CountingFilter {
    /// An empty counting filter (`m/2` bytes, padded to whole blocks).
    pub fn new(params: FilterParams) -> Result<Self, ParamError> {
        let bytes = counter_bytes(&params);
        let mut counters = Vec::new();
        counters
            .try_reserve_exact(bytes)
            .map_err(|_| ParamError::AllocationFailed {
                bytes: bytes as u64,
            })?;
        counters.resize(bytes, 0);
        Ok(CountingFilter { params, counters })
    }

    /// A counting filter over existing counter bytes.
    pub fn from_bytes(params: FilterParams, counters: Vec<u8>) -> Result<Self, FilterError> {
        let expected = counter_bytes(&params);
        if counters.len() != expected {
            return Err(FilterError::LengthMismatch {
                expected: expected as u64,
                found: counters.len() as u64,
            });
        }
        Ok(CountingFilter { params, counters })
    }

    /// The parameters.
    pub fn params(&self) -> &FilterParams {
        &self.params
    }

    /// The packed counters (layout in the module docs).
    pub fn as_bytes(&self) -> &[u8] {
        &self.counters
    }

    /// Counter at position `pos`.
    pub fn counter(&self, pos: u64) -> u8 {
        nibble::get(&self.counters, pos as usize)
    }

    /// Adds `key`.
    pub fn insert(&mut self, key: &[u8]) -> InsertOutcome {
        let p = self.params;
        let h = p.hash().hash(key);
        match p.layout() {
            Layout::Blocked => {
                let (_, block) = self.block_mut(h);
                block_insert(block, &p, h.h2)
            }
            Layout::SplitBlock => {
                let (_, block) = self.split_block_mut(h);
                split_insert(block, h.h1 as u32)
            }
            Layout::Standard => {
                let mut out = InsertOutcome::default();
                for &pos in p.positions(h).as_slice() {
                    let before = nibble::get(&self.counters, pos as usize);
                    nibble::inc(&mut self.counters, pos as usize);
                    out.new_bits += (before == 0) as u32;
                    out.newly_saturated += (before == COUNTER_MAX - 1) as u32;
                }
                out
            }
        }
    }

    /// Removes one occurrence of `key`. Refused with
    /// [`FilterError::NotPresent`], changing nothing, if any of its counters
    /// is zero. Returns the positions whose counters reached zero (their bits
    /// must be cleared), sorted.
    pub fn remove(&mut self, key: &[u8]) -> Result<Positions, FilterError> {
        let p = self.params;
        let h = p.hash().hash(key);
        if !self.contains_hash(h) {
            return Err(FilterError::NotPresent);
        }
        match p.layout() {
            Layout::Blocked => {
                let (base, block) = self.block_mut(h);
                let mut cleared = Positions::default();
                for_each_distinct_in_block(&p, h.h2, |pos| {
                    // Every counter is non-zero (checked above): 1 goes to 0.
                    let reached_zero = nibble::dec_in(block, pos) == 1;
                    cleared.push_if(base + pos as u64, reached_zero);
                });
                cleared.sort_small();
                Ok(cleared)
            }
            Layout::SplitBlock => {
                let (base, block) = self.split_block_mut(h);
                let mut cleared = Positions::default();
                // One counter per lane, ascending with the lane: the list
                // stays sorted without a sort.
                for i in 0..SPLIT_K as usize {
                    let pos = 32 * i + split_lane_bit(h.h1 as u32, i) as usize;
                    let reached_zero = nibble::dec_in(block, pos) == 1;
                    cleared.push_if(base + pos as u64, reached_zero);
                }
                Ok(cleared)
            }
            Layout::Standard => {
                let mut cleared = Positions::default();
                for &i in p.positions(h).as_slice() {
                    if nibble::dec(&mut self.counters, i as usize) == 0 {
                        cleared.push_sorted(i);
                    }
                }
                Ok(cleared)
            }
        }
    }

    /// Whether `key` may be present (all its counters are non-zero).
    pub fn contains(&self, key: &[u8]) -> bool {
        self.contains_hash(self.params.hash().hash(key))
    }

    /// [`CountingFilter::contains`] of a hashed key. The blocked layout
    /// reads the `k` counters of one 256-byte block without branches (no
    /// early exit: the loads of all probes overlap, see `filter::bloom`).
    fn contains_hash(&self, h: KeyHash) -> bool {
        let p = self.params;
        match p.layout() {
            Layout::Blocked => {
                let block = self.block(h);
                let mut all = 1u8;
                for i in 0..(p.k() as usize).min(MAX_K as usize) {
                    all &= (nibble::get_in(block, in_block_probe(&p, h.h2, i)) != 0) as u8;
                }
                all == 1
            }
            Layout::SplitBlock => {
                let b = split_block_of(&p, h) * SPLIT_COUNTER_BYTES;
                let Some(block) = self.counters.get(b..b + SPLIT_COUNTER_BYTES) else {
                    // Unreachable: `b` is below `m / 256`, and the counters
                    // hold 128 bytes per 256-bit block. "Maybe" can never
                    // be a false negative.
                    return true;
                };
                let mut all = 1u8;
                for i in 0..SPLIT_K as usize {
                    let pos = 32 * i + split_lane_bit(h.h1 as u32, i) as usize;
                    all &= (nibble::get(block, pos) != 0) as u8;
                }
                all == 1
            }
            Layout::Standard => p
                .positions(h)
                .as_slice()
                .iter()
                .all(|&i| nibble::get(&self.counters, i as usize) > 0),
        }
    }

    /// The counter block of `h` (blocked layout).
    #[inline(always)]
    fn block(&self, h: KeyHash) -> &[u8; COUNTER_BLOCK_BYTES] {
        let b = block_of(&self.params, h);
        match self.counters[b * COUNTER_BLOCK_BYTES..][..COUNTER_BLOCK_BYTES].try_into() {
            Ok(block) => block,
            // The range above has exactly COUNTER_BLOCK_BYTES elements.
            Err(_) => unreachable!("a block is {COUNTER_BLOCK_BYTES} bytes"),
        }
    }

    /// The first position and the counter block of `h` (blocked layout).
    #[inline(always)]
    fn block_mut(&mut self, h: KeyHash) -> (u64, &mut [u8; COUNTER_BLOCK_BYTES]) {
        let b = block_of(&self.params, h);
        (
            b as u64 * BLOCK_BITS,
            counter_block_mut(&mut self.counters, b),
        )
    }

    /// The first position and the 128 counter bytes of `h`'s split block.
    #[inline(always)]
    fn split_block_mut(&mut self, h: KeyHash) -> (u64, &mut [u8; SPLIT_COUNTER_BYTES]) {
        let b = split_block_of(&self.params, h);
        let block = match (&mut self.counters[b * SPLIT_COUNTER_BYTES..][..SPLIT_COUNTER_BYTES])
            .try_into()
        {
            Ok(block) => block,
            // The range above has exactly SPLIT_COUNTER_BYTES elements.
            Err(_) => unreachable!("a split block is {SPLIT_COUNTER_BYTES} bytes"),
        };
        (b as u64 * SPLIT_BLOCK_BITS, block)
    }

    /// Number of sticky (saturated) counters.
    pub fn saturated(&self) -> u64 {
        nibble::count_saturated(&self.counters)
    }

    /// The bit filter this counting filter answers with: bit `i` is set
    /// exactly when counter `i` is non-zero.
    pub fn to_bit_filter(&self) -> Result<BitFilter, ParamError> {
        let f = BitFilter::new(self.params)?;
        for (w, chunk) in self.counters.chunks(32).enumerate() {
            f.store_word(w, nibble::nonzero_word(chunk));
        }
        Ok(f)
    }
}

/// Adds one to each distinct counter of the in-block positions of `h2` in
/// `block` (the blocked layout's 256 counter bytes of the key's block, in a
/// filter of `p`).
#[inline(always)]
pub(crate) fn block_insert(
    block: &mut [u8; COUNTER_BLOCK_BYTES],
    p: &FilterParams,
    h2: u64,
) -> InsertOutcome {
    let mut out = InsertOutcome::default();
    for_each_distinct_in_block(p, h2, |pos| {
        let before = nibble::inc_in(block, pos);
        out.new_bits += (before == 0) as u32;
        out.newly_saturated += (before == COUNTER_MAX - 1) as u32;
    });
    out
}

/// Adds one to each of the eight counters of `x` (the lower half of a
/// split-block hash, one position per lane: distinct by construction) in
/// `block`, the 128 counter bytes of the key's split block.
#[inline(always)]
pub(crate) fn split_insert(block: &mut [u8; SPLIT_COUNTER_BYTES], x: u32) -> InsertOutcome {
    let mut out = InsertOutcome::default();
    for i in 0..SPLIT_K as usize {
        let before = nibble::inc_in(block, 32 * i + split_lane_bit(x, i) as usize);
        out.new_bits += (before == 0) as u32;
        out.newly_saturated += (before == COUNTER_MAX - 1) as u32;
    }
    out
}

/// Block `b`'s 256 counter bytes in `counters` (`b` below the block count).
#[inline(always)]
fn counter_block_mut(counters: &mut [u8], b: usize) -> &mut [u8; COUNTER_BLOCK_BYTES] {
    match (&mut counters[b * COUNTER_BLOCK_BYTES..][..COUNTER_BLOCK_BYTES]).try_into() {
        Ok(block) => block,
        // The range above has exactly COUNTER_BLOCK_BYTES elements.
        Err(_) => unreachable!("a block is {COUNTER_BLOCK_BYTES} bytes"),
    }
}

/// Keys ahead whose counter block is prefetched in [`add_blocked_hashes`]
/// (a 10M-key table's counters are 48 MiB: without it, nearly every key
/// waits for memory).
#[cfg_attr(not(feature = "store"), allow(dead_code))]
const ADD_AHEAD: usize = 8;

/// Adds the keys of `hashes` to `counters`, the packed counters of a
/// blocked-layout filter of `p`, prefetching the four lines of the block of
/// the key [`ADD_AHEAD`] places on; calls `each(block, outcome)` per key.
/// The bulk paths of the store (bulk loads, regeneration) use it.
#[cfg_attr(not(feature = "store"), allow(dead_code))]
pub(crate) fn add_blocked_hashes(
    counters: &mut [u8],
    p: &FilterParams,
    hashes: &[KeyHash],
    mut each: impl FnMut(usize, InsertOutcome),
) {
    for (i, &h) in hashes.iter().enumerate() {
        if let Some(&next) = hashes.get(i + ADD_AHEAD) {
            let at = block_of(p, next) * COUNTER_BLOCK_BYTES;
            let lines = counters.get(at..).unwrap_or_default();
            for line in lines.iter().take(COUNTER_BLOCK_BYTES).step_by(64) {
                prefetch(line);
            }
        }
        let b = block_of(p, h);
        each(b, block_insert(counter_block_mut(counters, b), p, h.h2));
    }
}

/// The `i`-th in-block position (`0..512`) of a key whose hash has `h2`, in
/// a blocked filter of `p`: its sector's bit for the sectorized hash
/// (`h2 = h << 32`), else the blocked layout's formula (docs/FORMAT.md §6).
#[inline(always)]
pub(crate) fn in_block_probe(p: &FilterParams, h2: u64, i: usize) -> usize {
    match p.hash().algo {
        HashAlgo::Xxh3_64Sectorized => sector_position((h2 >> 32) as u32, i) as usize,
        // `KeyHash::upper_h2`: the bits a bit filter's probe reads.
        HashAlgo::Xxh3_64 => in_block_position(h2 >> 32 << 32, i) as usize,
        HashAlgo::Xxh3_128 | HashAlgo::Xxh64 => in_block_position(h2, i) as usize,
    }
}

/// Calls `f` once with each distinct in-block position of `h2` in a blocked
/// filter of `p` (its `k` probes, [`in_block_probe`], a repeat skipped), in
/// probe order. A repeat is rare (about `k²/1024` per key; never, for
/// sectorized positions), so the test is a well-predicted branch, where
/// reading positions off the block's masks mispredicts on every key.
#[inline(always)]
pub(crate) fn for_each_distinct_in_block(p: &FilterParams, h2: u64, mut f: impl FnMut(usize)) {
    let mut seen = [0u64; WORDS_PER_BLOCK];
    for i in 0..(p.k() as usize).min(MAX_K as usize) {
        let pos = in_block_probe(p, h2, i);
        let (w, bit) = (pos / 64 % WORDS_PER_BLOCK, 1u64 << (pos % 64));
        if seen[w] & bit == 0 {
            seen[w] |= bit;
            f(pos);
        }
    }
}

/// Bytes of counters for `params`: half a byte per bit, padded to whole blocks.
pub fn counter_bytes(params: &FilterParams) -> usize {
    params.num_blocks() as usize * COUNTER_BLOCK_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::hash::HashSpec;
    use crate::filter::params::Layout;

    #[test]
    fn nibble_ops_saturate_and_stick() {
        let mut b = [0u8; 2];
        for _ in 0..20 {
            nibble::inc(&mut b, 1);
        }
        assert_eq!(nibble::get(&b, 1), 15);
        assert_eq!(nibble::get(&b, 0), 0);
        assert_eq!(nibble::dec(&mut b, 1), 15, "15 is sticky");
        assert_eq!(nibble::dec(&mut b, 0), 0, "0 never underflows");
        assert_eq!(nibble::count_saturated(&b), 1);
        nibble::set(&mut b, 2, 7);
        assert_eq!(b[1], 7);
        assert_eq!(nibble::get(&b, 3), 0);
    }

    #[test]
    fn nonzero_word_maps_counter_i_to_bit_i() {
        let mut b = [0u8; 32];
        for i in [0usize, 1, 17, 62, 63] {
            nibble::set(&mut b, i, 3);
        }
        let w = nibble::nonzero_word(&b);
        assert_eq!(w, (1 << 0) | (1 << 1) | (1 << 17) | (1 << 62) | (1 << 63));
    }

    #[test]
    fn remove_of_absent_key_changes_nothing() {
        let p = FilterParams::for_capacity(100, 0.01, Layout::Blocked, HashSpec::xxh3(5)).unwrap();
        let mut c = CountingFilter::new(p).unwrap();
        c.insert(b"present");
        let before = c.as_bytes().to_vec();
        assert_eq!(c.remove(b"absent"), Err(FilterError::NotPresent));
        assert_eq!(c.as_bytes(), &before[..]);
        assert!(c.remove(b"present").is_ok());
        assert!(c.as_bytes().iter().all(|&b| b == 0));
    }
}
