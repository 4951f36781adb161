//! What an import checks of a counting filter's counters against the key
//! count `n` its file states, before the counters become a table.
//!
//! # What the counters of `n` keys must look like
//! A table's live count `n` is its inserts minus its removes; a key adds
//! one to each of its `d` *distinct* positions (`1 ≤ d ≤ k`), a remove
//! takes one off each, and a counter that reaches 15 sticks there. So, for
//! `n` distinct keys whose hashes behave as random:
//!
//! * **The saturated counters.** `n` distinct keys saturate a counter
//!   with the Poisson tail of its load (about `10⁻¹⁴` per counter at a
//!   table's capacity, `0.6%` at ten times it, [`saturation`]); more
//!   counters at 15 than that, 8 standard deviations and the counters of
//!   [`HOT_KEYS`] keys inserted past saturation, are refused. So one
//!   counter at 15 no longer waives the rest (issue 28: an all-zero
//!   payload with one counter at 15 imported 200,000 keys as absent).
//! * **The sum.** The counters below 15 add up to at most `k · n` (exact:
//!   each live key adds at most `k` to them). With the saturated counters
//!   counted at 15, they add up to `n · E[d]` within the spread of a sum of
//!   `n` independent `d` (`σ² = n · Var[d]`), less what the saturated
//!   counters of `n` keys lose above 15 in expectation, and within 8
//!   standard deviations; without a saturated counter, not more either.
//! * **The fill.** The number of non-zero counters is
//!   `m · (1 − (1 − E[d]/m)^n)` in expectation (each key misses a counter
//!   independently), and at least that less 8 standard deviations
//!   ([`fill_spread`]: the exact occupancy variance of the keys' positions
//!   at each block's load, plus, for the block layouts, the spread of the
//!   loads, bounded by the Efron–Stein inequality). A payload of fewer
//!   keys whose sum was made up by raising counters, or by inserting keys
//!   more than once, is refused here.
//! * **Every region.** A block (the blocked and split-block layouts) or a
//!   run of 512 counters (standard) without a saturated counter holds at
//!   least one increment per live key that touches it, and the number of
//!   keys touching it is binomial; a region lighter than the threshold
//!   whose chance over all regions is below 10⁻⁹ (Poisson's lower tail,
//!   which bounds the binomial's below its mean) is refused: a block
//!   zeroed in a payload otherwise right.
//! * **The split-block lanes.** A key sets one counter in each of the
//!   eight lanes of its block, so in a block without a saturated counter
//!   the eight lane sums are equal (exact). The same holds for the eight
//!   sectors of a blocked block hashed with XXH3-64 sectorized (sector `i`
//!   the counters of 32-bit words `i` and `i + 8`).
//!
//! `E[d]` and `Var[d]` are those of `k` independent uniform draws among
//! the 512 positions of a block (blocked: the layout's salted multiplies
//! agree with that model to 2·10⁻⁵ of `E[d]`, within the sampling error of
//! 4M hashed keys per `k`), exactly 8 and 0 (split-block, and blocked with
//! the XXH3-64 sectorized hash: one position per sector), and between the
//! model and `k` for the standard layout, whose enhanced double hashing
//! collides less often than independent draws.
//!
//! # What the check assumes, and what it cannot see
//! It assumes the live count counts distinct keys, but for [`HOT_KEYS`]
//! keys inserted past saturation: a table where more keys were inserted
//! many times, or whose removes left counters at 15 that its live keys do
//! not explain (a table loaded far past its capacity, then emptied), is
//! refused with a line that says to regenerate it from its keys instead.
//! No check of the counters alone can tell the counters of `n` keys from
//! those of `n` *other* keys: a payload built with another seed, or from
//! another key set of the same size, passes, and its table answers "absent"
//! for the keys it does not hold. Nor can it see a few keys missing: at
//! 200,000 keys and 1% (blocked, `k = 6`) the sum's tolerance is 609
//! increments, about 100 keys, and the fill's 3,057 counters, about 940
//! keys (0.5%) whose sum was made up by raising other counters.

use super::model::{
    distinct_moments, fill_spread, min_region_mass, region_counters, saturation, REGION_FALSE_ALARM,
};
use crate::error::CodecError;
use crate::filter::counting::COUNTER_MAX;
use crate::filter::geometry::{BLOCK_BITS, SPLIT_K};
use crate::filter::hash::HashAlgo;
use crate::filter::params::{FilterParams, Layout};

/// Standard deviations of every statistical tolerance: a normal tail of
/// `e^-32` (about `10⁻¹⁴`) per check.
const SIGMAS: f64 = 8.0;
/// Keys inserted past saturation that an import tolerates: their `k`
/// counters each are allowed at 15 beyond what the model expects (a file
/// of version 1's fixtures holds one such key). They can add at most
/// `15 · HOT_KEYS · k` to the sum, a few dozen keys' worth; the hidden
/// inserts of a key inserted many more times than 15 still fail the sum.
const HOT_KEYS: u64 = 4;
/// Counters per lane of a split block.
const LANE: usize = 32;

/// Per byte of counters (two 4-bit counters): the sum of those below 15,
/// the number at 15 and the number not zero, [`FIELD`] bits apart, so that
/// the entries of a whole chunk add up without a carry between fields.
const LUT: [u64; 256] = lut();
const FIELD: u32 = 21;
const FIELD_MASK: u64 = (1 << FIELD) - 1;

const fn lut() -> [u64; 256] {
    let mut t = [0u64; 256];
    let mut b = 0;
    while b < 256 {
        let (lo, hi) = ((b & 15) as u64, (b >> 4) as u64);
        let max = COUNTER_MAX as u64;
        let below = if lo < max { lo } else { 0 } + if hi < max { hi } else { 0 };
        let sat = (lo == max) as u64 + (hi == max) as u64;
        let nz = (lo != 0) as u64 + (hi != 0) as u64;
        t[b] = below | sat << FIELD | nz << (2 * FIELD);
        b += 1;
    }
    t
}

/// The packed sums of [`LUT`] over `bytes` (at most 2^FIELD / 30 bytes).
fn packed(bytes: &[u8]) -> u64 {
    bytes.iter().map(|&b| LUT[b as usize]).sum()
}

/// `(below, saturated, nonzero)` of a packed sum.
fn unpack(p: u64) -> (u64, u64, u64) {
    (
        p & FIELD_MASK,
        (p >> FIELD) & FIELD_MASK,
        (p >> (2 * FIELD)) & FIELD_MASK,
    )
}

/// The counters of an import, checked chunk by chunk ([`CounterCheck::add`])
/// and as a whole ([`CounterCheck::finish`]) against the model of the
/// module docs.
#[derive(Debug)]
pub(crate) struct CounterCheck {
    p: FilterParams,
    n: u64,
    model: Model,
    /// Sum of the counters below 15.
    below: u64,
    /// Counters at 15.
    saturated: u64,
    /// Counters not zero.
    nonzero: u64,
}

/// What the model expects of `n` keys in a filter of `p`.
#[derive(Debug, Clone, Copy)]
struct Model {
    /// `E[d]`, low and high ends (equal but for the standard layout).
    d_lo: f64,
    d_hi: f64,
    /// An upper bound on `Var[d]`.
    d_var: f64,
    /// Counters per region and the lightest region accepted.
    region: u64,
    min_region: u64,
}

impl CounterCheck {
    /// The check of the counters of `p` against `n` live keys; refuses at
    /// once an `n` that would put more than 15 on the average counter (no
    /// counter could then tell its keys).
    pub(crate) fn new(p: &FilterParams, n: u64) -> Result<CounterCheck, CodecError> {
        let k = f64::from(p.k());
        let (d_lo, d_hi, d_var) = match p.layout() {
            // One bit in each of the block's eight sectors: 8 distinct.
            Layout::Blocked if p.hash().algo == HashAlgo::Xxh3_64Sectorized => {
                (f64::from(p.k()), f64::from(p.k()), 0.0)
            }
            Layout::Blocked => {
                let (e, v) = distinct_moments(p.k(), BLOCK_BITS as f64);
                (e, e, v)
            }
            Layout::SplitBlock => (f64::from(SPLIT_K), f64::from(SPLIT_K), 0.0),
            Layout::Standard => {
                let (e, _) = distinct_moments(p.k(), p.m() as f64);
                (e, k, (k - 1.0) * (k - e))
            }
        };
        let load = n as f64 * d_lo / p.m() as f64;
        if load > f64::from(COUNTER_MAX) {
            return Err(refusal(format!(
                "{n} keys would put {load:.1} on the average counter, past the {COUNTER_MAX} a \
                 counter holds: no counter can show whether these are their counters \
                 (regenerate the table from its keys)"
            )));
        }
        let model = Model {
            d_lo,
            d_hi,
            d_var,
            region: region_counters(p),
            min_region: min_region_mass(p, n),
        };
        Ok(CounterCheck {
            p: *p,
            n,
            model,
            below: 0,
            saturated: 0,
            nonzero: 0,
        })
    }

    /// Adds chunk `idx`'s counters (`first` the index of its first counter,
    /// a multiple of 512): refuses non-zero padding (counters at `m` and
    /// above), a region lighter than the model allows and, in the
    /// split-block layout, a block whose lanes disagree.
    pub(crate) fn add(&mut self, first: u64, counters: &[u8]) -> Result<(), CodecError> {
        let region_bytes = (self.model.region / 2) as usize;
        for (i, bytes) in counters.chunks(region_bytes).enumerate() {
            let start = first + (i * region_bytes * 2) as u64;
            let (below, sat, nz) = unpack(packed(bytes));
            let inside = self.p.m().saturating_sub(start).min(bytes.len() as u64 * 2);
            if inside < bytes.len() as u64 * 2 {
                check_padding(bytes, start, inside, self.p.m())?;
            }
            self.below += below;
            self.saturated += sat;
            self.nonzero += nz;
            if sat > 0 || inside < self.model.region {
                continue;
            }
            if below < self.model.min_region {
                return Err(refusal(format!(
                    "the {} counters from counter {start} hold {below}, where every such \
                     region of {} keys holds at least {} (a chance below {REGION_FALSE_ALARM:e} \
                     otherwise): they are not the counters of {} keys",
                    self.model.region, self.n, self.model.min_region, self.n
                )));
            }
            if self.p.layout() == Layout::SplitBlock {
                check_lanes(bytes, start)?;
            } else if self.p.hash().algo == HashAlgo::Xxh3_64Sectorized {
                check_sectors(bytes, start)?;
            }
        }
        Ok(())
    }

    /// After the last chunk: the sum and the fill (module docs).
    pub(crate) fn finish(&self) -> Result<(), CodecError> {
        let (p, n, md) = (&self.p, self.n, &self.model);
        let nf = n as f64;
        let k = u64::from(p.k());
        if u128::from(self.below) > u128::from(k) * u128::from(n) {
            return Err(refusal(format!(
                "they sum to {}, more than k · n = {k} · {n}: they are not the counters of {n} \
                 keys",
                self.below
            )));
        }
        let sat = saturation(p, n, md.d_hi);
        let hot = (HOT_KEYS * k) as f64;
        let sat_most = sat.count_mean + SIGMAS * sat.count_var.sqrt() + 1.0 + hot;
        if self.saturated as f64 > sat_most {
            return Err(refusal(format!(
                "{} counters are at {COUNTER_MAX}, where {n} distinct keys saturate at most \
                 {sat_most:.0}: a key was inserted many times, or removed keys left them there, \
                 or these are not their counters (such a table cannot be imported: regenerate \
                 it from its keys)",
                self.saturated
            )));
        }
        let sum_sigma = (nf * md.d_var + sat.lost_var).sqrt();
        let held = self.below as f64 + f64::from(COUNTER_MAX) * self.saturated as f64;
        let least = nf * md.d_lo - sat.lost_mean - SIGMAS * sum_sigma - 1.0;
        if held < least {
            return Err(refusal(format!(
                "they hold {held:.0} key positions (a counter at {COUNTER_MAX} counted as \
                 {COUNTER_MAX}; {} are), where {n} distinct keys set at least {least:.0}: these \
                 are not the counters of {n} distinct keys (a key inserted many times makes a \
                 table that cannot be imported: regenerate it from its keys)",
                self.saturated
            )));
        }
        let most = nf * md.d_hi + SIGMAS * sum_sigma + 1.0;
        if self.saturated == 0 && self.below as f64 > most {
            return Err(refusal(format!(
                "they sum to {}, where {n} keys set at most {most:.0}: the file's n does not \
                 describe these counters",
                self.below
            )));
        }
        let (fill_mean, fill_var) = fill_spread(p, n, md.d_lo);
        let fill_least = fill_mean - SIGMAS * fill_var.sqrt() - 1.0;
        if (self.nonzero as f64) < fill_least {
            return Err(refusal(format!(
                "{} counters are not zero, where {n} distinct keys leave at least \
                 {fill_least:.0} so: these are not the counters of {n} distinct keys",
                self.nonzero
            )));
        }
        Ok(())
    }
}

fn refusal(reason: String) -> CodecError {
    CodecError::InvalidField {
        field: "counters",
        reason,
    }
}

/// Counters `inside..` of a region starting at counter `start` lie at `m`
/// and above: they must be zero.
fn check_padding(bytes: &[u8], start: u64, inside: u64, m: u64) -> Result<(), CodecError> {
    for i in inside..bytes.len() as u64 * 2 {
        let c = (bytes[(i / 2) as usize] >> ((i % 2) * 4)) & 15;
        if c != 0 {
            return Err(CodecError::InvalidField {
                field: "padding",
                reason: format!("counter {} past m = {m} is {c}", start + i),
            });
        }
    }
    Ok(())
}

/// The eight lane sums of a split block without a saturated counter must
/// be equal (module docs).
fn check_lanes(block: &[u8], start: u64) -> Result<(), CodecError> {
    let lanes: Vec<u64> = block
        .chunks(LANE / 2)
        .map(|lane| unpack(packed(lane)).0)
        .collect();
    if lanes.iter().any(|&s| s != lanes[0]) {
        return Err(refusal(format!(
            "the split block at counter {start} has lane sums {lanes:?}, where every key sets \
             one counter in each of its block's {SPLIT_K} lanes: not the counters of keys"
        )));
    }
    Ok(())
}

/// The eight sector sums of a sectorized block without a saturated counter
/// must be equal (module docs): sector `i` is the counters of 32-bit words
/// `i` and `i + 8`, 16 bytes each, 128 bytes apart.
fn check_sectors(block: &[u8], start: u64) -> Result<(), CodecError> {
    let half = block.len() / 2;
    let sectors: Vec<u64> = (0..SPLIT_K as usize)
        .map(|i| {
            let word = |at: usize| block.get(at..at + LANE / 2).unwrap_or_default();
            unpack(packed(word(i * LANE / 2))).0 + unpack(packed(word(half + i * LANE / 2))).0
        })
        .collect();
    if sectors.iter().any(|&s| s != sectors[0]) {
        return Err(refusal(format!(
            "the block at counter {start} has sector sums {sectors:?}, where every key sets \
             one counter in each of its block's {SPLIT_K} sectors: not the counters of keys"
        )));
    }
    Ok(())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::filter::hash::{positions, HashSpec, KeyHash};

    /// SplitMix64: the tests' seeded hashes.
    pub(in crate::store) fn splitmix(x: &mut u64) -> u64 {
        *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    #[test]
    fn the_model_of_distinct_positions_matches_the_layouts() {
        // 1M seeded hashes per case: the sampling error of E[d] is about
        // 2·10⁻⁴ (σ_d ≤ 0.2 at k = 7), so the blocked layout must agree
        // with the model within 5 standard errors, and the standard
        // layout must lie in [model, k].
        let mut x = 28;
        for (layout, m, k) in [
            (Layout::Blocked, 512 * 3750, 7),
            (Layout::Blocked, 512 * 19, 10),
            (Layout::Standard, 9_600, 7),
            (Layout::Standard, 1_917_011, 7),
        ] {
            let samples = 1 << 20;
            let (mut sum, mut sq) = (0.0, 0.0);
            for _ in 0..samples {
                let h = KeyHash {
                    h1: splitmix(&mut x),
                    h2: splitmix(&mut x),
                };
                let d = positions(layout, m, k, h).as_slice().len() as f64;
                sum += d;
                sq += d * d;
            }
            let mean = sum / samples as f64;
            let var = sq / samples as f64 - mean * mean;
            let se = (var / samples as f64).sqrt();
            let p = FilterParams::new(layout, m, k, HashSpec::xxh3(1)).unwrap();
            let md = CounterCheck::new(&p, 0).unwrap().model;
            assert!(
                mean >= md.d_lo - 5.0 * se - 1e-9 && mean <= md.d_hi + 5.0 * se + 1e-9,
                "{layout:?} m = {m} k = {k}: E[d] {mean} outside [{}, {}]",
                md.d_lo,
                md.d_hi
            );
            assert!(
                var <= md.d_var * 1.05 + 1e-6,
                "{layout:?}: Var[d] {var} > {}",
                md.d_var
            );
        }
    }
}
