//! Set operations between compatible filters: union, intersection, halving.

use super::probe::{Locked, WordOr};
use super::{BitFilter, BloomRead, BloomReadDyn};
use crate::error::FilterError;
use crate::filter::geometry::SPLIT_BLOCK_BITS;
use crate::filter::params::{FilterParams, Layout, WORDS_PER_BLOCK};
use crate::filter::simd::SharedBlock;
use std::sync::atomic::Ordering;

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

impl BitFilter {
    /// Adds every key of `other` (bitwise OR). Afterwards this filter answers
    /// "maybe" for the union of both sets: exactly the filter that inserting
    /// both sets would have built.
    pub fn union_with(&self, other: &dyn BloomReadDyn) -> Result<(), FilterError> {
        check_compatible(&self.params, other.params_dyn())?;
        self.bias.claim();
        if self.params.layout() != Layout::Standard {
            for b in 0..self.blocks.len() {
                self.or_from(b, other, b);
            }
            return Ok(());
        }
        for i in 0..self.params.num_words() {
            self.atomic_word(i)
                .fetch_or(other.word_dyn(i), Ordering::Relaxed);
        }
        Ok(())
    }

    /// ORs line `from` of `other` into line `b` of this blocked or
    /// split-block filter, under the line's stripe lock (`bloom::stripes`).
    fn or_from(&self, b: usize, other: &dyn BloomReadDyn, from: usize) {
        let masks = std::array::from_fn(|w| other.word_dyn(from * WORDS_PER_BLOCK + w));
        Locked::or_block(&self.blocks[b].0, masks);
    }

    /// Adds every key of `other`, a filter of this one's shape halved
    /// `j ≥ 0` times ([`Self::halve`]; `j = 0` is [`Self::union_with`]).
    /// Halving folds blocks `2i` and `2i+1` onto block `i`, so each block
    /// `b` of this filter takes the bits of `other`'s block `b >> j`: every
    /// key of `other` then finds its bits in whichever of the `2^j` blocks
    /// it would have taken here, and the result answers "maybe" for every
    /// key of both (no false negative). `other`'s part keeps the fill, and
    /// so the false-positive rate, it had at its own size; halving the
    /// result `j` times gives exactly the union of this filter halved `j`
    /// times and `other`.
    ///
    /// Blocked and split-block layouts only (whole blocks are copied); a
    /// standard filter must be of this one's size.
    ///
    /// # Errors
    /// [`FilterError::Incompatible`] when `other` differs in layout, `k`
    /// or hash, or its size is not this one's halved `j` times.
    pub fn union_with_halved(&self, other: &dyn BloomReadDyn) -> Result<(), FilterError> {
        let (p, o) = (self.params, *other.params_dyn());
        if o.m() == p.m() {
            return self.union_with(other);
        }
        if o.layout() != p.layout() || o.k() != p.k() || o.hash() != p.hash() {
            return check_compatible(&p, &o);
        }
        self.bias.claim();
        // Words per block: the unit halving folds.
        let unit = match p.layout() {
            Layout::Blocked => WORDS_PER_BLOCK,
            Layout::SplitBlock => (SPLIT_BLOCK_BITS / 64) as usize,
            Layout::Standard => 0,
        };
        let folds = p.m() / o.m().max(1);
        if unit == 0 || !folds.is_power_of_two() || folds * o.m() != p.m() {
            return Err(FilterError::Incompatible(format!(
                "m {} is not m {} halved (blocked and split-block layouts only)",
                o.m(),
                p.m()
            )));
        }
        let shift = folds.trailing_zeros();
        let blocks = (p.m() / (unit as u64 * 64)) as usize;
        if p.layout() == Layout::Blocked {
            for b in 0..blocks {
                self.or_from(b, other, b >> shift);
            }
            return Ok(());
        }
        // Split blocks, each under its line's stripe lock.
        let halves = SharedBlock::split_halves(&self.blocks);
        for (b, half) in halves.iter().enumerate().take(blocks) {
            let from = (b >> shift) * unit;
            let masks = std::array::from_fn(|w| other.word_dyn(from + w));
            Locked::or_block(&half.0, masks);
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
    /// a range by multiply-high, `⌊x·n / 2^64⌋`, and for an even `n`
    /// `⌊x·(n/2) / 2^64⌋ = ⌊⌊x·n / 2^64⌋ / 2⌋` (both sides are `⌊y/2⌋` of the
    /// same real `y = x·n / 2^64`): positions `2j` and `2j+1` fold onto `j`
    /// (adjacent pairs, not the two halves as with `mod m`).
    ///
    /// * Standard layout: needs `m` a power of two, `m ≥ 128` (the bits are
    ///   folded a word at a time).
    /// * Blocked layout: needs an even number of blocks, at least 2; whole
    ///   blocks `2j` and `2j+1` fold onto block `j`, in-block positions are
    ///   unchanged (they depend on `h2` alone), so every key stays present,
    ///   and the result is exactly the filter that inserting the same keys
    ///   at half the blocks builds.
    /// * Split-block layout: needs an even number of 256-bit blocks (the
    ///   block index `((h >> 32)·z) >> 32` halves with any even `z`), and
    ///   folds blocks `2j` and `2j+1` onto block `j`: exactly the filter
    ///   that inserting the same keys into `z/2` blocks builds, as arrow-rs's
    ///   `Sbbf::fold_n` does.
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
                if !p.num_blocks().is_multiple_of(2) || p.num_blocks() < 2 {
                    return Err(FilterError::NotHalvable(
                        "blocked layout needs an even number of blocks, at least 2",
                    ));
                }
            }
            Layout::SplitBlock => {
                if !p.m().is_multiple_of(2 * SPLIT_BLOCK_BITS) {
                    return Err(FilterError::NotHalvable(
                        "split-block layout needs an even number of 256-bit blocks",
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
            Layout::SplitBlock => {
                // Split block j (words 4j..4j+4) = blocks 2j and 2j+1.
                for j in 0..(new_m / SPLIT_BLOCK_BITS) as usize {
                    for w in 0..4 {
                        out.store_word(4 * j + w, self.word(8 * j + w) | self.word(8 * j + 4 + w));
                    }
                }
            }
        }
        Ok(out)
    }
}

/// Bit `j` of the result is bit `2j` OR bit `2j+1` of `x`.
pub(super) fn fold_pairs(x: u64) -> u32 {
    // OR each pair into its even bit, then compact the even bits.
    let mut v = (x | (x >> 1)) & 0x5555_5555_5555_5555;
    v = (v | (v >> 1)) & 0x3333_3333_3333_3333;
    v = (v | (v >> 2)) & 0x0f0f_0f0f_0f0f_0f0f;
    v = (v | (v >> 4)) & 0x00ff_00ff_00ff_00ff;
    v = (v | (v >> 8)) & 0x0000_ffff_0000_ffff;
    v = (v | (v >> 16)) & 0x0000_0000_ffff_ffff;
    v as u32
}
