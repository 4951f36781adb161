//! Sizing math: false-positive models, the choice of `k`, and sizing `m` for a
//! target false-positive rate, for the three layouts.
//!
//! Formulas and where they come from:
//!
//! * Probability that a given bit is still zero after `n` keys with `k` hash
//!   functions into `m` bits: `p' = (1 − 1/m)^(kn)` (Broder & Mitzenmacher,
//!   "Network Applications of Bloom Filters: A Survey", §2.1). The false
//!   positive rate is then `(1 − p')^k`; [`fp_standard`] evaluates it exactly,
//!   [`fp_standard_approx`] with `p' ≈ e^(−kn/m)`, which is what the Summary
//!   Cache tables print (Fan, Cao, Almeida & Broder, Table 1; reproduced in the
//!   tests from `tests/filter/data/fan_fp_table.csv`).
//! * The optimum `k* = (m/n)·ln 2` is not an integer. Following the PlanetP
//!   paper, [`optimal_k`] evaluates the false-positive formula at `⌊k*⌋` and
//!   `⌈k*⌉` and keeps the better one (never a random pick between them).
//! * The blocked layout puts every position of a key in one 512-bit block.
//!   Block loads are then Poisson distributed with mean `λ = n/B` (B blocks),
//!   and the FP rate is the Poisson mixture
//!   `Σ_j Pois(λ; j) · (1 − (1 − 1/512)^(kj))^k` ([`fp_blocked`]; the model of
//!   Putze, Sanders & Singler, "Cache-, Hash- and Space-Efficient Bloom
//!   Filters"). At 10 bits per key it predicts 0.97% for k = 7 against 0.82%
//!   for the standard layout: the measured cost of one cache line per lookup.
//!   Because the optimum shifts to a smaller `k`, the blocked layout evaluates
//!   every `k` in `1..=⌈k*⌉` under its own model and keeps the best.
//! * The split-block layout (Parquet's SBBF) puts a key's eight bits in one
//!   256-bit block, one in each 32-bit lane. A lane of a block holding `j`
//!   keys has each bit clear with probability `(1 − 1/32)^j`, and the lanes
//!   are independent given `j`, so the FP rate is the Poisson mixture
//!   `Σ_j Pois(λ; j) · (1 − (1 − 1/32)^j)^8` with `λ = n/z` for `z` blocks
//!   ([`fp_split_block`]). `k` is fixed at 8. At 10 bits per key it predicts
//!   1.26% (blocked 0.97%): 32-bit lanes crowd sooner than 512-bit blocks,
//!   so a 1% target needs 10.53 bits per key where the blocked layout needs
//!   9.90. The naive `(1 − e^(−8n/m))^8` behind arrow-rs's sizing predicts
//!   0.85% at 10 bits per key, and the 9.68 bits per key it gives for 1%
//!   measure 1.46% (arrow-rs then rounds the size up to a power of two).
//! * The sectorized positions of the blocked layout
//!   ([`HashSpec::xxh3_64_sectorized`]) put one of a key's eight bits in each
//!   64-bit sector of its 512-bit block: the split-block model with 64-bit
//!   lanes in 512-bit blocks, `Σ_j Pois(λ; j) · (1 − (1 − 1/64)^j)^8`
//!   ([`fp_sectorized`]), `k` fixed at 8. At 10 bits per key it predicts
//!   1.05% (blocked 0.96% at its best `k`, split-block 1.26%); a 1% target
//!   needs 10.10 bits per key.
//! * Space lower bound `n·log2(1/ε)` bits ([`space_lower_bound_bits`]); a
//!   standard Bloom filter needs `1/ln 2 ≈ 1.44×` that.
//! * Counter overflow: `P(max counter ≥ j) ≤ m·(e·ln 2 / j)^j` with the optimal
//!   `k` (survey §2.1, counting Bloom filters), `1.37e−15·m` for 4-bit
//!   counters ([`counter_overflow_bound`]).

use crate::error::ParamError;
pub(crate) use crate::filter::geometry::{
    Layout, BLOCK_BITS, MAX_K, MAX_M_BITS, MIN_M_BITS, WORDS_PER_BLOCK,
};
use crate::filter::geometry::{MAX_SPLIT_BLOCKS, SPLIT_BLOCK_BITS, SPLIT_K};
use crate::filter::hash::{
    map_to_range, positions, sectorized_positions, HashAlgo, HashSpec, KeyHash, Positions, SECTORS,
};
use crate::filter::split::split_block_index;

/// The complete, validated shape of a filter: everything needed to derive a
/// key's positions. Two filters with equal `FilterParams` are compatible for
/// union and intersection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FilterParams {
    layout: Layout,
    m: u64,
    k: u32,
    hash: HashSpec,
}

impl FilterParams {
    /// Validates explicit parameters. For the blocked layout `m` must be a
    /// multiple of 512. The split-block layout takes whole 256-bit blocks
    /// (`1 ..= 2^31 − 1` of them, as the Parquet specification allows: any
    /// count, not only powers of two), `k = 8` and [`HashSpec::xxh64`];
    /// XXH64 hashes no other layout. XXH3-64 ([`HashSpec::xxh3_64`]) hashes
    /// the blocked layout only.
    ///
    /// ```
    /// use filterstore::{FilterParams, HashSpec, Layout, ParamError};
    /// let p = FilterParams::new(Layout::SplitBlock, 256 * 3, 8, HashSpec::xxh64())?;
    /// assert_eq!(p.bit_bytes(), 128, "three 32-byte blocks, padded to two lines");
    /// let e = FilterParams::new(Layout::SplitBlock, 256, 8, HashSpec::xxh3(1)).unwrap_err();
    /// assert!(matches!(e, ParamError::HashNotForLayout { .. }));
    /// # Ok::<(), ParamError>(())
    /// ```
    pub fn new(layout: Layout, m: u64, k: u32, hash: HashSpec) -> Result<Self, ParamError> {
        if k == 0 || k > MAX_K {
            return Err(ParamError::KOutOfRange { k, max: MAX_K });
        }
        if !(MIN_M_BITS..=MAX_M_BITS).contains(&m) {
            return Err(ParamError::MOutOfRange {
                m,
                min: MIN_M_BITS,
                max: MAX_M_BITS,
            });
        }
        if layout == Layout::Blocked && !m.is_multiple_of(BLOCK_BITS) {
            return Err(ParamError::BlockedMNotMultiple { m });
        }
        if layout == Layout::SplitBlock
            && (k != SPLIT_K
                || !m.is_multiple_of(SPLIT_BLOCK_BITS)
                || m / SPLIT_BLOCK_BITS > MAX_SPLIT_BLOCKS)
        {
            return Err(ParamError::SplitBlockShape { m, k });
        }
        if hash.algo == HashAlgo::Xxh3_64Sectorized && k != SECTORS {
            return Err(ParamError::SectorizedK { k });
        }
        let hash_fits = match layout {
            Layout::SplitBlock => hash == HashSpec::xxh64(),
            Layout::Blocked => hash.algo != HashAlgo::Xxh64,
            Layout::Standard => hash.algo == HashAlgo::Xxh3_128,
        };
        if !hash_fits {
            return Err(ParamError::HashNotForLayout {
                layout: layout.name(),
                algo: hash.algo.name(),
                seed: hash.seed,
            });
        }
        Ok(FilterParams { layout, m, k, hash })
    }

    /// Sizes a filter for `n` keys at false-positive rate `fp`: the smallest
    /// `m` (a multiple of 512 for the blocked layout) for which the layout's own
    /// model, with `k` chosen by [`optimal_k`], predicts at most `fp`.
    ///
    /// # Examples
    /// A million keys at 1%: the standard layout needs 9.59 bits per key with
    /// k = 7, the blocked layout 3% more with k = 6.
    /// ```
    /// use filterstore::{FilterParams, HashSpec, Layout};
    /// let std = FilterParams::for_capacity(1_000_000, 0.01, Layout::Standard, HashSpec::xxh3(1))?;
    /// assert_eq!((std.m(), std.k()), (9_592_956, 7));
    /// let blk = FilterParams::for_capacity(1_000_000, 0.01, Layout::Blocked, HashSpec::xxh3(1))?;
    /// assert_eq!((blk.m(), blk.k()), (9_895_936, 6));
    /// assert!(blk.expected_fp(1_000_000) <= 0.01);
    /// let bits_per_key = blk.m() as f64 / 1e6;
    /// assert!((9.89..9.90).contains(&bits_per_key));
    /// # Ok::<(), filterstore::ParamError>(())
    /// ```
    pub fn for_capacity(
        n: u64,
        fp: f64,
        layout: Layout,
        hash: HashSpec,
    ) -> Result<Self, ParamError> {
        validate_n_fp(n, fp)?;
        let ideal = (n as f64) * (1.0 / fp).ln() / (std::f64::consts::LN_2.powi(2));
        // Search in units of the layout's granularity.
        let unit = layout_unit(layout);
        let to_units = |bits: f64| ((bits / unit as f64).ceil() as u64).max(1);
        let meets = |units: u64| {
            let m = (units * unit).max(MIN_M_BITS);
            model_fp(layout, hash.algo, m, n, k_for(m, n, layout, hash.algo)) <= fp
        };
        let mut lo = to_units(ideal * 0.9);
        let mut hi = to_units(ideal * 1.6 + BLOCK_BITS as f64);
        if hi.saturating_mul(unit) > max_m(layout) || !meets(hi) {
            return Err(ParamError::TooLarge { n, fp });
        }
        while meets(lo) && lo > 1 {
            lo /= 2;
        }
        // Invariant: !meets(lo) (or lo == 1), meets(hi).
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if meets(mid) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        let units = if meets(lo) { lo } else { hi };
        let m = (units * unit).max(MIN_M_BITS).div_ceil(unit) * unit;
        FilterParams::new(layout, m, k_for(m, n, layout, hash.algo), hash)
    }

    /// A filter of `bits_per_key · n` bits (rounded up to the layout's
    /// granularity) with `k` chosen by [`optimal_k`]. This is how the
    /// benchmarks and the Summary Cache tables fix the space per key.
    pub fn with_bits_per_key(
        n: u64,
        bits_per_key: f64,
        layout: Layout,
        hash: HashSpec,
    ) -> Result<Self, ParamError> {
        if n == 0 {
            return Err(ParamError::ZeroKeys);
        }
        if !(bits_per_key.is_finite() && (1.0..=1024.0).contains(&bits_per_key)) {
            return Err(ParamError::BitsPerKeyOutOfRange(bits_per_key));
        }
        let raw = (n as f64 * bits_per_key).ceil();
        if raw > max_m(layout) as f64 {
            return Err(ParamError::MOutOfRange {
                m: raw as u64,
                min: MIN_M_BITS,
                max: max_m(layout),
            });
        }
        let unit = layout_unit(layout);
        let m = (raw as u64).max(MIN_M_BITS).div_ceil(unit) * unit;
        FilterParams::new(layout, m, k_for(m, n, layout, hash.algo), hash)
    }

    /// The layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }
    /// Number of bits (and of counters, for a counting filter).
    pub fn m(&self) -> u64 {
        self.m
    }
    /// Number of hash functions.
    pub fn k(&self) -> u32 {
        self.k
    }
    /// The hash algorithm and seed.
    pub fn hash(&self) -> HashSpec {
        self.hash
    }
    /// Number of 512-bit blocks backing the filter (storage is padded to whole
    /// blocks in both layouts so that every block is one aligned cache line).
    pub fn num_blocks(&self) -> u64 {
        self.m.div_ceil(BLOCK_BITS)
    }
    /// Number of 64-bit storage words, padding included.
    pub fn num_words(&self) -> usize {
        // Bounded by MAX_M_BITS / 64 = 2^34, which fits in usize on 64-bit targets.
        (self.num_blocks() as usize) * WORDS_PER_BLOCK
    }
    /// Bytes of the bit array, padding included.
    pub fn bit_bytes(&self) -> u64 {
        self.num_blocks() * (BLOCK_BITS / 8)
    }
    /// The false-positive rate this layout's model predicts after `n` distinct keys.
    pub fn expected_fp(&self, n: u64) -> f64 {
        model_fp(self.layout, self.hash.algo, self.m, n, self.k)
    }
    /// The distinct positions of a key hashed to `h` (with this filter's
    /// hash), ascending: [`positions`] for this filter's layout, `m`, `k`
    /// and hash, sectorized ones included. XXH3-64's read `h2`'s upper half
    /// only, as its probes do (`KeyHash::upper_h2`; the lower half of a
    /// hash XXH3-64 makes is zero).
    pub fn positions(&self, h: KeyHash) -> Positions {
        match self.hash.algo {
            HashAlgo::Xxh3_64Sectorized => sectorized_positions(self.m, h),
            HashAlgo::Xxh3_64 => positions(self.layout, self.m, self.k, h.upper_h2()),
            _ => positions(self.layout, self.m, self.k, h),
        }
    }
    /// The same parameters with another hash (a table regenerated under a
    /// new seed). Refused where the layout does not take that hash: the
    /// split-block layout's hash is fixed.
    pub fn with_hash(self, hash: HashSpec) -> Result<Self, ParamError> {
        FilterParams::new(self.layout, self.m, self.k, hash)
    }
}

/// The granularity of `m` in a layout: a bit, or a whole block.
fn layout_unit(layout: Layout) -> u64 {
    match layout {
        Layout::Standard => 1,
        Layout::Blocked => BLOCK_BITS,
        Layout::SplitBlock => SPLIT_BLOCK_BITS,
    }
}

/// The largest `m` of a layout.
fn max_m(layout: Layout) -> u64 {
    match layout {
        Layout::Standard | Layout::Blocked => MAX_M_BITS,
        Layout::SplitBlock => MAX_SPLIT_BLOCKS * SPLIT_BLOCK_BITS,
    }
}

fn validate_n_fp(n: u64, fp: f64) -> Result<(), ParamError> {
    if n == 0 {
        return Err(ParamError::ZeroKeys);
    }
    if !(fp.is_finite() && fp > 0.0 && fp < 1.0) {
        return Err(ParamError::FpOutOfRange(fp));
    }
    Ok(())
}

/// The `k` a filter of `m` bits for `n` keys takes: 8 for the sectorized
/// hash (one bit per sector), else [`optimal_k`].
fn k_for(m: u64, n: u64, layout: Layout, algo: HashAlgo) -> u32 {
    match algo {
        HashAlgo::Xxh3_64Sectorized => SECTORS,
        _ => optimal_k(m, n, layout),
    }
}

/// The false-positive rate the model of `layout` hashed with `algo`
/// predicts: [`fp_sectorized`] for the sectorized hash, else [`fp_for`].
fn model_fp(layout: Layout, algo: HashAlgo, m: u64, n: u64, k: u32) -> f64 {
    match algo {
        HashAlgo::Xxh3_64Sectorized => fp_sectorized(m / BLOCK_BITS, n),
        _ => fp_for(layout, m, n, k),
    }
}

/// The false-positive rate predicted by the model of `layout` (for the
/// sectorized hash, [`fp_sectorized`]; [`FilterParams::expected_fp`]
/// picks by the filter's hash).
pub fn fp_for(layout: Layout, m: u64, n: u64, k: u32) -> f64 {
    match layout {
        Layout::Standard => fp_standard(m, n, k),
        Layout::Blocked => fp_blocked(m.div_ceil(BLOCK_BITS), n, k),
        Layout::SplitBlock => fp_split_block(m / SPLIT_BLOCK_BITS, n),
    }
}

/// Exact standard-layout false-positive rate `(1 − (1 − 1/m)^(kn))^k`.
pub fn fp_standard(m: u64, n: u64, k: u32) -> f64 {
    if m == 0 {
        return 1.0;
    }
    let zero = ((k as f64) * (n as f64) * (-1.0 / m as f64).ln_1p()).exp();
    (1.0 - zero).powi(k as i32)
}

/// The usual approximation `(1 − e^(−k/b))^k` with `b = m/n` bits per key:
/// the formula behind the Summary Cache tables.
pub fn fp_standard_approx(bits_per_key: f64, k: u32) -> f64 {
    (1.0 - (-(k as f64) / bits_per_key).exp()).powi(k as i32)
}

/// Blocked-layout false-positive rate for `blocks` blocks of 512 bits: the
/// Poisson mixture over per-block load described in the module docs.
pub fn fp_blocked(blocks: u64, n: u64, k: u32) -> f64 {
    poisson_mixture(blocks, n, |j| fp_standard(BLOCK_BITS, j, k))
}

/// Split-block false-positive rate for `blocks` blocks of 256 bits (eight
/// lanes of 32): the Poisson mixture over per-block load in the module docs.
///
/// ```
/// use filterstore::{fp_for, fp_split_block, Layout};
/// let fp = fp_split_block(1_000_000 * 10 / 256, 1_000_000);
/// assert!((fp - 0.01265).abs() < 0.0001, "{fp}");
/// assert_eq!(fp, fp_for(Layout::SplitBlock, 10_000_000 / 256 * 256, 1_000_000, 8));
/// ```
pub fn fp_split_block(blocks: u64, n: u64) -> f64 {
    poisson_mixture(blocks, n, |j| fp_standard(32, j, 1).powi(SPLIT_K as i32))
}

/// Sectorized blocked false-positive rate ([`HashSpec::xxh3_64_sectorized`])
/// for `blocks` blocks of 512 bits, eight sectors of 64: the Poisson mixture
/// in the module docs.
///
/// ```
/// use filterstore::{fp_sectorized, FilterParams, HashSpec, Layout};
/// let fp = fp_sectorized(1_000_000 * 10 / 512, 1_000_000);
/// assert!((fp - 0.0105).abs() < 0.0001, "{fp}");
/// let p = FilterParams::new(Layout::Blocked, 1_000_000 * 10 / 512 * 512, 8, HashSpec::xxh3_64_sectorized(1))?;
/// assert_eq!(p.expected_fp(1_000_000), fp);
/// # Ok::<(), filterstore::ParamError>(())
/// ```
pub fn fp_sectorized(blocks: u64, n: u64) -> f64 {
    poisson_mixture(blocks, n, |j| fp_standard(64, j, 1).powi(SECTORS as i32))
}

/// `Σ_j Pois(n / blocks; j) · per_block(j)`: the FP rate of a layout whose
/// keys each land in one of `blocks` blocks, `per_block(j)` being the rate
/// of a block holding `j` keys (non-decreasing in `j`, at most 1).
fn poisson_mixture(blocks: u64, n: u64, per_block: impl Fn(u64) -> f64) -> f64 {
    if blocks == 0 {
        return 1.0;
    }
    let lambda = n as f64 / blocks as f64;
    if lambda == 0.0 {
        return 0.0;
    }
    // Past 25,000 keys per block, every load within 10σ of the mean exceeds
    // 512·40 keys, where (1 − 1/512)^(k·j) < e^−40 (and (1 − 1/32)^j far
    // less): each such block answers "maybe" to everything to f64
    // precision, and the rate is 1. Returning here also bounds the sum
    // below, which would otherwise walk ~√λ terms downwards (hours for the
    // λ ≈ 10^18 a hostile file header can claim) through ln-factorials that
    // cancel catastrophically at such j.
    if lambda > 25_000.0 {
        return 1.0;
    }
    // Sum outwards from the mode in log space (λ may be in the thousands,
    // where e^(−λ) underflows) until the terms are negligible.
    let ln_pmf = |j: u64| -lambda + (j as f64) * lambda.ln() - ln_factorial(j);
    let mode = lambda.floor() as u64;
    let mut total = 0.0;
    let mut j = mode;
    loop {
        let w = ln_pmf(j).exp();
        total += w * per_block(j);
        if (w < 1e-18 && j > mode) || j > mode + 100_000 {
            break;
        }
        j += 1;
    }
    let mut j = mode;
    while j > 0 {
        j -= 1;
        let w = ln_pmf(j).exp();
        total += w * per_block(j);
        if w < 1e-18 {
            break;
        }
    }
    total.min(1.0)
}

/// `ln(j!)`, exact summation for small `j`, Stirling's series beyond.
fn ln_factorial(j: u64) -> f64 {
    if j < 32 {
        (2..=j).map(|i| (i as f64).ln()).sum()
    } else {
        let x = j as f64 + 1.0;
        // Stirling series for ln Γ(x), error < 1e-12 for x ≥ 33.
        (x - 0.5) * x.ln() - x + 0.5 * (2.0 * std::f64::consts::PI).ln() + 1.0 / (12.0 * x)
            - 1.0 / (360.0 * x.powi(3))
    }
}

/// The number of hash functions for `m` bits and `n` keys.
///
/// Split-block layout: always 8 (one bit per lane, fixed by Parquet).
/// Standard layout: the PlanetP rule — `k* = (m/n)·ln 2`, evaluate the exact
/// false-positive rate at `⌊k*⌋` and `⌈k*⌉`, keep the better (the smaller on a
/// tie: it is cheaper). Blocked layout: the same idea under the blocked model,
/// over every candidate in `1..=⌈k*⌉`, because crowding inside a block moves the
/// optimum down by one or two. Always within `1..=MAX_K`.
///
/// # Examples
/// ```
/// use filterstore::{fp_for, optimal_k, Layout};
/// // 10 bits per key: k* = 6.93, and 7 beats 6 in the standard layout ...
/// assert_eq!(optimal_k(10_000_000, 1_000_000, Layout::Standard), 7);
/// let fp = fp_for(Layout::Standard, 10_000_000, 1_000_000, 7);
/// assert!((fp - 0.00819).abs() < 0.00001, "{fp}");
/// // ... and in the blocked layout, at 17% more false positives.
/// assert_eq!(optimal_k(10_000_384, 1_000_000, Layout::Blocked), 7);
/// let fp = fp_for(Layout::Blocked, 10_000_384, 1_000_000, 7);
/// assert!((fp - 0.00957).abs() < 0.00005, "{fp}");
/// ```
pub fn optimal_k(m: u64, n: u64, layout: Layout) -> u32 {
    if layout == Layout::SplitBlock {
        return SPLIT_K;
    }
    if n == 0 {
        return 1;
    }
    let k_star = (m as f64 / n as f64) * std::f64::consts::LN_2;
    let hi = (k_star.ceil() as u32).clamp(1, MAX_K);
    let lo = match layout {
        Layout::Standard => (k_star.floor() as u32).clamp(1, MAX_K),
        Layout::Blocked | Layout::SplitBlock => 1,
    };
    let mut best = lo;
    let mut best_fp = fp_for(layout, m, n, lo);
    for k in lo + 1..=hi {
        let f = fp_for(layout, m, n, k);
        if f < best_fp {
            best = k;
            best_fp = f;
        }
    }
    best
}

/// Information-theoretic minimum space in bits for `n` keys at rate `fp`.
pub fn space_lower_bound_bits(n: u64, fp: f64) -> f64 {
    n as f64 * (1.0 / fp).log2()
}

/// Upper bound on the probability that any of `m` counters reaches `j`
/// (with the optimal `k`): `m·(e·ln 2 / j)^j`. For 4-bit counters (`j = 16`)
/// this is `1.37e−15·m`.
pub fn counter_overflow_bound(m: u64, j: u32) -> f64 {
    let e_ln2 = std::f64::consts::E * std::f64::consts::LN_2;
    (m as f64) * (e_ln2 / j as f64).powi(j as i32)
}

/// The block of `h` in the blocked layout of `p` (whose `m` is a multiple
/// of 512): the one definition, for the bit and the counting filters.
#[inline(always)]
pub(crate) fn block_of(p: &FilterParams, h: KeyHash) -> usize {
    map_to_range(h.h1, p.m() / BLOCK_BITS) as usize
}

/// The 256-bit block of `h` in the split-block layout of `p`.
#[inline(always)]
pub(crate) fn split_block_of(p: &FilterParams, h: KeyHash) -> usize {
    split_block_index(h.h1, p.m() / SPLIT_BLOCK_BITS) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> HashSpec {
        HashSpec::xxh3(7)
    }

    #[test]
    fn survey_overflow_constant() {
        let b = counter_overflow_bound(1, 16);
        assert!((b - 1.37e-15).abs() < 0.01e-15, "{b}");
    }

    #[test]
    fn planetp_rule_at_ten_bits() {
        // k* = 6.93: 7 beats 6 at 10 bits per key (0.819% vs 0.843%).
        assert_eq!(optimal_k(10_000, 1_000, Layout::Standard), 7);
        // Summary Cache: at m/n = 10, k = 4 gives 1.2% and k = 5 gives 0.9%.
        assert!((fp_standard_approx(10.0, 4) - 0.0118).abs() < 0.0002);
        assert!((fp_standard_approx(10.0, 5) - 0.0094).abs() < 0.0002);
    }

    #[test]
    fn sizing_meets_target_in_both_layouts() {
        for layout in [Layout::Standard, Layout::Blocked] {
            for &fp in &[0.1, 0.01, 0.001, 1e-5] {
                for &n in &[1u64, 100, 10_000, 1_000_000] {
                    let p = FilterParams::for_capacity(n, fp, layout, spec()).unwrap();
                    assert!(p.expected_fp(n) <= fp, "{layout} n={n} fp={fp}: {p:?}");
                    // Not wastefully large: within 25% of the standard ideal
                    // (or the minimum size).
                    let ideal = n as f64 * (1.0 / fp).ln() / std::f64::consts::LN_2.powi(2);
                    assert!(
                        (p.m() as f64) < ideal * 1.25 + 1024.0,
                        "{layout} n={n} fp={fp}: m={} ideal={ideal}",
                        p.m()
                    );
                }
            }
        }
    }

    #[test]
    fn blocked_model_costs_about_seventeen_percent_at_ten_bits() {
        let n = 1_000_000;
        let std_fp = fp_standard(10 * n, n, 7);
        let blk_fp = fp_blocked(10 * n / 512, n, 7);
        let ratio = blk_fp / std_fp;
        assert!((1.1..1.3).contains(&ratio), "ratio {ratio}");
    }

    #[test]
    fn overloaded_blocked_filters_are_saturated_and_cheap_to_evaluate() {
        // Just below the cut-off the sum itself already gives 1.0 ...
        assert_eq!(fp_blocked(1, 25_000, 1), 1.0);
        assert_eq!(fp_blocked(4, 100_000, 32), 1.0);
        // ... and far above it (a header may claim any n) it returns at once.
        assert_eq!(fp_blocked(1, u64::MAX, 7), 1.0);
        assert_eq!(fp_for(Layout::Blocked, 512, 1 << 40, 3), 1.0);
    }

    #[test]
    fn poisson_mixture_matches_the_exact_binomial_mixture() {
        // The exact per-block load is Binomial(n, 1/B); the model replaces it
        // by Poisson(n/B). For B = 2000 blocks the two agree to well under 1%.
        let (blocks, n, k) = (2000u64, 100_000u64, 7u32);
        let q = 1.0 / blocks as f64;
        let mut exact = 0.0;
        let mut ln_pmf = (n as f64) * (1.0 - q).ln(); // j = 0
        for j in 0..=400u64 {
            exact += ln_pmf.exp() * fp_standard(BLOCK_BITS, j, k);
            ln_pmf += ((n - j) as f64 / (j + 1) as f64).ln() + (q / (1.0 - q)).ln();
        }
        let model = fp_blocked(blocks, n, k);
        assert!((model - exact).abs() / exact < 0.01, "{model} vs {exact}");
    }

    #[test]
    fn invalid_parameters_are_typed_errors() {
        let h = spec();
        assert!(matches!(
            FilterParams::for_capacity(0, 0.01, Layout::Standard, h),
            Err(ParamError::ZeroKeys)
        ));
        for fp in [0.0, 1.0, -0.5, 2.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                FilterParams::for_capacity(10, fp, Layout::Blocked, h),
                Err(ParamError::FpOutOfRange(_))
            ));
        }
        assert!(matches!(
            FilterParams::new(Layout::Standard, 1024, 0, h),
            Err(ParamError::KOutOfRange { .. })
        ));
        assert!(matches!(
            FilterParams::new(Layout::Standard, 1024, 1000, h),
            Err(ParamError::KOutOfRange { .. })
        ));
        assert!(matches!(
            FilterParams::new(Layout::Standard, u64::MAX, 3, h),
            Err(ParamError::MOutOfRange { .. })
        ));
        assert!(matches!(
            FilterParams::new(Layout::Blocked, 1000, 3, h),
            Err(ParamError::BlockedMNotMultiple { .. })
        ));
        assert!(matches!(
            FilterParams::for_capacity(u64::MAX, 1e-9, Layout::Standard, h),
            Err(ParamError::TooLarge { .. })
        ));
        assert!(matches!(
            FilterParams::with_bits_per_key(10, f64::NAN, Layout::Standard, h),
            Err(ParamError::BitsPerKeyOutOfRange(_))
        ));
    }
}
