//! The statistics of the counters of `n` keys that an import checks
//! ([`check`](super::check) states the checks): the number of
//! distinct positions of a key, the fill, the saturated counters and what
//! they lose, and the lightest region, each with its spread.

use crate::filter::counting::COUNTER_MAX;
use crate::filter::geometry::{BLOCK_BITS, SPLIT_BLOCK_BITS};
use crate::filter::params::{FilterParams, Layout};

/// The chance, over all regions of a payload, that an honest region is
/// lighter than the threshold of [`min_region_mass`].
pub(super) const REGION_FALSE_ALARM: f64 = 1e-9;
/// The counters of a region of the standard layout (no block structure).
const STANDARD_REGION: u64 = 512;

/// Counters per region ([`CounterCheck::add`](super::check::CounterCheck::add)).
pub(super) fn region_counters(p: &FilterParams) -> u64 {
    match p.layout() {
        Layout::Blocked => BLOCK_BITS,
        Layout::SplitBlock => SPLIT_BLOCK_BITS,
        Layout::Standard => STANDARD_REGION,
    }
}

/// The number of regions, and the mean number of keys touching one (a
/// lower bound for the standard layout, by Bonferroni's inequality).
fn region_load(p: &FilterParams, n: u64, region: u64) -> (f64, f64) {
    let regions = (p.m() / region) as f64;
    let nf = n as f64;
    match p.layout() {
        Layout::Standard => {
            let share = region as f64 / p.m() as f64;
            let k = f64::from(p.k());
            let touch = (k * share - k * k * share * share).max(0.0);
            (regions, nf * touch)
        }
        _ => (regions, nf / regions),
    }
}

/// The lightest region accepted: the largest `t` such that a region
/// touched by fewer than `t` of `n` keys has a chance below
/// [`REGION_FALSE_ALARM`] over all regions. A region touched by `K` keys
/// holds at least `K` (no counter saturated), and `P(K ≤ j) ≤ (j + 1) ·
/// P(K = j)` for `j` below the mean (the probabilities grow up to it).
pub(super) fn min_region_mass(p: &FilterParams, n: u64) -> u64 {
    let (regions, lambda) = region_load(p, n, region_counters(p));
    if regions < 1.0 || lambda < 1.0 {
        return 0;
    }
    let mut t = 0;
    let mut j = 0u64;
    while (j as f64) < lambda - 1.0 {
        let tail = (j + 1) as f64 * poisson_ln_pmf(lambda, j).exp() * regions;
        if tail > REGION_FALSE_ALARM {
            break;
        }
        t = j + 1;
        j += 1;
    }
    t
}

/// Mean and variance of the number of distinct positions among `k`
/// independent uniform draws from `slots`.
pub(super) fn distinct_moments(k: u32, slots: f64) -> (f64, f64) {
    let k = k as usize;
    let mut p = vec![0.0f64; k + 1];
    p[0] = 1.0;
    for _ in 0..k {
        for j in (0..=k).rev() {
            let stay = p[j] * j as f64 / slots;
            let new = if j > 0 {
                p[j - 1] * (slots - (j - 1) as f64) / slots
            } else {
                0.0
            };
            p[j] = stay + new;
        }
    }
    let mean: f64 = p.iter().enumerate().map(|(j, q)| j as f64 * q).sum();
    let second: f64 = p.iter().enumerate().map(|(j, q)| (j * j) as f64 * q).sum();
    (mean, (second - mean * mean).max(0.0))
}

/// `ln P(X = j)` for `X` Poisson with mean `lambda > 0`.
pub(super) fn poisson_ln_pmf(lambda: f64, j: u64) -> f64 {
    j as f64 * lambda.ln() - lambda - ln_factorial(j)
}

/// `ln j!`: exact below 20, Stirling's series above (error below 10⁻¹⁰).
fn ln_factorial(j: u64) -> f64 {
    if j < 20 {
        return (2..=j).map(|i| (i as f64).ln()).sum();
    }
    let x = j as f64;
    x * x.ln() - x + 0.5 * (2.0 * std::f64::consts::PI * x).ln() + 1.0 / (12.0 * x)
        - 1.0 / (360.0 * x * x * x)
}

/// `P(X ≥ 15)`, `E[(X − 15)⁺]` and `E[((X − 15)⁺)²]` for `X` Poisson
/// with mean `mu`: how often a counter of that load saturates and what it
/// loses at 15, summed over the tail.
pub(super) fn poisson_tail(mu: f64) -> [f64; 3] {
    if mu <= 0.0 {
        return [0.0; 3];
    }
    let max = u64::from(COUNTER_MAX);
    let mut pj = poisson_ln_pmf(mu, max).exp();
    let mut t = [0.0; 3];
    let end = max + 60 + (mu + 20.0 * mu.sqrt()) as u64;
    for j in max..=end {
        let over = (j - max) as f64;
        t[0] += pj;
        t[1] += over * pj;
        t[2] += over * over * pj;
        pj *= mu / (j + 1) as f64;
    }
    t
}

/// `Σ_K w(K) · f(K)` and `Σ_K w(K) · f(K)²` over the Poisson(`lambda`)
/// distribution of a block's keys, `K` within 12 standard deviations of
/// the mean (plus 40), the rest being below `10⁻³⁰` of the mass.
fn over_block_loads(lambda: f64, mut f: impl FnMut(f64) -> (f64, f64)) -> (f64, f64, f64) {
    let spread = 12.0 * lambda.sqrt() + 40.0;
    let lo = (lambda - spread).max(0.0) as u64;
    let hi = (lambda + spread) as u64;
    let (mut mean, mut second, mut inner) = (0.0, 0.0, 0.0);
    for kk in lo..=hi {
        let w = poisson_ln_pmf(lambda, kk).exp();
        let (g, v) = f(kk as f64);
        mean += w * g;
        second += w * g * g;
        inner += w * v;
    }
    (mean, second, inner)
}

/// The variance of the number of empty counters among `slots` after
/// `keys` keys of `d` distinct positions each: the exact occupancy variance
/// `S·a + S(S−1)·b − S²a²`, `a` the chance that a key misses a counter and
/// `b` that it misses two, written so that it keeps its precision for any
/// `S`.
fn occupancy_var(slots: f64, keys: f64, d: f64) -> f64 {
    if keys <= 0.0 || d >= slots {
        return 0.0;
    }
    let a = (keys * (-d / slots).ln_1p()).exp();
    // b / a² = (1 − d / ((S − 1)(S − d)))^keys.
    let ratio = keys * (-d / ((slots - 1.0) * (slots - d))).ln_1p();
    let r = ratio.exp();
    (slots * a + slots * slots * a * a * (ratio.exp_m1() - r / slots)).max(0.0)
}

/// Expected count of non-zero counters for `n` keys of `d` distinct
/// positions on average, and a bound on its variance (module docs): for
/// the standard layout the occupancy variance of `n` keys over `m`
/// counters; for the block layouts, the blocks' occupancy variances at
/// their Poisson loads, plus the spread the loads add, bounded by the
/// Efron–Stein inequality over the keys' choice of block: moving one key
/// changes the count by `S·q·((1 − q)^K' − (1 − q)^K)`, whence at most
/// `n·d²·Var[(1 − q)^K]` with `K` Poisson(`n / blocks`), in closed form.
pub(super) fn fill_spread(p: &FilterParams, n: u64, d: f64) -> (f64, f64) {
    let (m, nf) = (p.m() as f64, n as f64);
    let mean = m * -(nf * (-d / m).ln_1p()).exp_m1();
    let var = match p.layout() {
        Layout::Standard => occupancy_var(m, nf, d),
        _ => {
            let slots = region_counters(p) as f64;
            let blocks = m / slots;
            let (lambda, q) = (nf / blocks, d / slots);
            let (_, _, within) = over_block_loads(lambda, |kk| (0.0, occupancy_var(slots, kk, d)));
            let loads = (-lambda * q * (2.0 - q)).exp() - (-2.0 * lambda * q).exp();
            blocks * within + nf * d * d * loads.max(0.0)
        }
    };
    (mean, var)
}

/// What the saturated counters of `n` keys look like: the expected number
/// at 15 and the expected total they lose above it, each with a bound on
/// its variance (a counter's saturation and overflow grow with its count,
/// and the counts are negatively associated given the blocks' loads, so
/// the variance is at most the sum over the counters, plus the loads'
/// spread between blocks).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Saturation {
    pub(super) count_mean: f64,
    pub(super) count_var: f64,
    pub(super) lost_mean: f64,
    pub(super) lost_var: f64,
}

pub(super) fn saturation(p: &FilterParams, n: u64, d: f64) -> Saturation {
    let m = p.m() as f64;
    match p.layout() {
        Layout::Standard => {
            let [ps, e1, e2] = poisson_tail(n as f64 * d / m);
            Saturation {
                count_mean: m * ps,
                count_var: m * ps * (1.0 - ps),
                lost_mean: m * e1,
                lost_var: m * e2,
            }
        }
        _ => {
            let slots = region_counters(p) as f64;
            let blocks = m / slots;
            let q = d / slots;
            let lambda = n as f64 / blocks;
            let (c1, c2, cv) = over_block_loads(lambda, |kk| {
                let [ps, _, _] = poisson_tail(kk * q);
                (slots * ps, slots * ps * (1.0 - ps))
            });
            let (l1, l2, lv) = over_block_loads(lambda, |kk| {
                let [_, e1, e2] = poisson_tail(kk * q);
                (slots * e1, slots * e2)
            });
            Saturation {
                count_mean: blocks * c1,
                count_var: blocks * ((c2 - c1 * c1).max(0.0) + cv),
                lost_mean: blocks * l1,
                lost_var: blocks * ((l2 - l1 * l1).max(0.0) + lv),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::hash::HashSpec;

    #[test]
    fn the_fill_model_matches_simulated_filters() {
        // 40 counting filters of 20,000 seeded keys per layout: every
        // non-zero count lies within the model's 8 σ of its mean, and the
        // model's σ is that of the 40 counts within their sampling error
        // (40 samples: the sample σ is within ±35% at 3 standard errors).
        for (layout, m) in [(Layout::Blocked, 512 * 400), (Layout::Standard, 199_999)] {
            let p = FilterParams::new(layout, m, 7, HashSpec::xxh3(1)).unwrap();
            let n = 20_000u64;
            let (mean, var) = fill_spread(&p, n, distinct_moments(7, BLOCK_BITS as f64).0);
            let mut x = 7;
            let mut seen = Vec::new();
            for _ in 0..40 {
                let mut c = crate::filter::counting::CountingFilter::new(p).unwrap();
                for _ in 0..n {
                    c.insert(&crate::store::import::check::tests::splitmix(&mut x).to_le_bytes());
                }
                let nz = (0..p.m()).filter(|&i| c.counter(i) != 0).count() as f64;
                assert!(
                    (nz - mean).abs() <= 8.0 * var.sqrt(),
                    "{layout:?}: {nz} vs {mean}"
                );
                seen.push(nz);
            }
            let avg = seen.iter().sum::<f64>() / seen.len() as f64;
            let sd = (seen.iter().map(|v| (v - avg).powi(2)).sum::<f64>() / 39.0).sqrt();
            let ratio = var.sqrt() / sd;
            assert!(
                (0.65..1.6).contains(&ratio),
                "{layout:?}: model σ {} against {sd}",
                var.sqrt()
            );
        }
    }

    #[test]
    fn overflow_is_negligible_at_capacity_and_grows_past_it() {
        assert!(poisson_tail(0.7)[0] < 1e-12);
        let [ps, e1, _] = poisson_tail(10.0);
        assert!(e1 > 0.01 && e1 < 1.0, "{e1}");
        assert!((ps - 0.0835).abs() < 1e-3, "{ps}");
        // E[(X − 15)⁺] at mean 15 by direct summation of the pmf.
        let mut direct = 0.0;
        let mut pj = (-15.0f64).exp();
        for j in 0..200u64 {
            if j > 15 {
                direct += (j - 15) as f64 * pj;
            }
            pj *= 15.0 / (j + 1) as f64;
        }
        assert!((poisson_tail(15.0)[1] - direct).abs() < 1e-9);
    }

    #[test]
    fn the_region_threshold_bounds_the_poisson_tail() {
        let p = FilterParams::new(Layout::Blocked, 512 * 3750, 7, HashSpec::xxh3(1)).unwrap();
        let t = min_region_mass(&p, 200_000);
        // 53 keys per block on average; a block of fewer than t keys has a
        // chance below 1e-9 / 3750, one of t keys does not.
        let cdf = |j: u64| {
            (0..=j)
                .map(|i| poisson_ln_pmf(200_000.0 / 3750.0, i).exp())
                .sum::<f64>()
        };
        assert!(t > 5 && t < 53, "{t}");
        assert!(cdf(t - 1) * 3750.0 <= REGION_FALSE_ALARM);
        assert!(cdf(t + 1) * 3750.0 > REGION_FALSE_ALARM * 1e-3);
        // Few keys per block: no threshold.
        assert_eq!(min_region_mass(&p, 3_000), 0);
    }

    #[test]
    fn ln_factorial_is_continuous_at_its_switch() {
        let exact: f64 = (2..=20u64).map(|i| (i as f64).ln()).sum();
        assert!((ln_factorial(20) - exact).abs() < 1e-9);
    }
}
