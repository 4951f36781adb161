//! Statistical tests: measured false-positive rates and estimator errors
//! against the models in `params`, with seeded RNGs and tolerances derived from
//! theory.
//!
//! Tolerance for a measured false-positive count `X` over `N` absent probes
//! when the model predicts rate `f`:
//! * given the filter, `X ~ Binomial(N, f_filter)`, variance `N·f(1 − f)`;
//! * the filter itself varies: its fraction of set bits `q` has relative
//!   standard deviation about `sqrt(p0(1 − p0)/m) / q` (p0 = e^(−kn/m), the
//!   zero-bit probability; bits are negatively correlated, so this is an
//!   upper bound), and `f ∝ q^k`, so `f_filter` has relative deviation
//!   `k·sqrt(p0(1 − p0)/m)/q`. The blocked layout's per-block loads add their
//!   own spread: we double that term for it.
//!
//! Both terms combine into one σ, and every check allows 5σ (a false alarm
//! about once in 1.7 million runs), plus 3 counts for expectations of a few
//! events (Poisson with a tiny mean).
//!
//! The split-block layout's filter term is computed exactly instead
//! ([`split_band`]): its per-block rates vary far more than one fill ratio
//! suggests, because a block's eight 32-bit lanes fill together.

use filterstore::{fp_for, fp_split_block};
use filterstore::{BitFilter, BloomRead, FilterParams, HashSpec, Layout};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn key(i: u64, tag: u8) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.to_le_bytes());
    k[8] = tag;
    k
}

/// 5σ band for the false-positive count, as derived in the module docs.
fn band(p: &FilterParams, n: u64, probes: u64) -> (f64, f64) {
    let f = fp_for(p.layout(), p.m(), n, p.k());
    let mean = probes as f64 * f;
    let p0 = (-(p.k() as f64) * n as f64 / p.m() as f64).exp();
    let mut rel = p.k() as f64 * (p0 * (1.0 - p0) / p.m() as f64).sqrt() / (1.0 - p0);
    if p.layout() == Layout::Blocked {
        rel *= 2.0;
    }
    let sigma = (mean * (1.0 - f) + (rel * mean).powi(2)).sqrt();
    ((mean - 5.0 * sigma).max(0.0), mean + 5.0 * sigma + 3.0)
}

/// 5σ band for a split-block filter of `z` blocks ([`lanes_band`] with
/// 32-bit lanes).
fn split_band(z: u64, n: u64, probes: u64) -> (f64, f64) {
    lanes_band(fp_split_block(z, n), 32, z, n, probes)
}

/// 5σ band for a filter of `z` blocks whose keys set one bit in each of a
/// block's eight lanes of `lane` bits, `f` its model's rate (the split-block
/// layout: 32-bit lanes; the sectorized blocked one: 64-bit sectors). Given
/// the filter the count is Binomial(N, f_filter). Across filters, f_filter
/// is the mean over the blocks of X, one block's rate: `X = Π_i (o_i/L)`,
/// `o_i` the set bits of lane `i`. Given the block's load `j` the lanes are
/// independent, each `o` the occupancy of `j` balls in `L` bins:
/// `E[o] = L(1 − q1)`, `Var(o) = L·q1(1 − q1) + L(L − 1)(q2 − q1²)` with
/// `q1 = ((L − 1)/L)^j`, `q2 = ((L − 2)/L)^j`; so `E[X² | j] = (E[o²]/L²)^8`
/// and, with `j` Poisson(λ), `Var(X) = Σ_j Pois(λ; j)·E[X² | j] − f²`. The
/// blocks' loads are multinomial (negatively correlated), so
/// `Var(f_filter) ≤ Var(X)/z`.
fn lanes_band(f: f64, lane: u32, z: u64, n: u64, probes: u64) -> (f64, f64) {
    let l = f64::from(lane);
    let lambda = n as f64 / z as f64;
    let (mut ex2, mut ln_pmf) = (0.0, -lambda);
    let top = (lambda + 50.0 * lambda.sqrt() + 50.0) as u64;
    for j in 0..=top {
        let (q1, q2) = (
            ((l - 1.0) / l).powi(j as i32),
            ((l - 2.0) / l).powi(j as i32),
        );
        let mean = l * (1.0 - q1);
        let var = l * q1 * (1.0 - q1) + l * (l - 1.0) * (q2 - q1 * q1);
        ex2 += ln_pmf.exp() * ((var + mean * mean) / (l * l)).powi(8);
        ln_pmf += lambda.ln() - ((j + 1) as f64).ln();
    }
    let var_filter = (ex2 - f * f).max(0.0) / z as f64;
    let mean = probes as f64 * f;
    let sigma = (mean * (1.0 - f) + probes as f64 * probes as f64 * var_filter).sqrt();
    ((mean - 5.0 * sigma).max(0.0), mean + 5.0 * sigma + 3.0)
}

/// The hash of a filter of `layout`: seeded XXH3-128, or the split-block
/// layout's fixed XXH64 (its keys differ per test instead).
fn spec(layout: Layout, seed: u64) -> HashSpec {
    match layout {
        Layout::SplitBlock => HashSpec::xxh64(),
        _ => HashSpec::xxh3(seed),
    }
}

fn measure(p: FilterParams, n: u64, probes: u64, seed: u64) -> u64 {
    let mut rng = StdRng::seed_from_u64(seed);
    let base: u64 = rng.gen();
    let f = BitFilter::new(p).unwrap();
    for i in 0..n {
        f.insert(&key(base.wrapping_add(i), 0));
    }
    for i in 0..n {
        assert!(f.contains(&key(base.wrapping_add(i), 0)), "false negative");
    }
    (0..probes)
        .filter(|&i| f.contains(&key(base.wrapping_add(i), 1)))
        .count() as u64
}

#[test]
fn measured_fp_matches_model_over_the_grid() {
    let n = 20_000u64;
    let probes = 400_000u64;
    let mut seed = 1000;
    for layout in [Layout::Standard, Layout::Blocked] {
        for bpk in [4u64, 8, 12, 16, 20, 24] {
            let m = match layout {
                Layout::Standard => bpk * n,
                _ => (bpk * n).div_ceil(512) * 512,
            };
            let k_opt = filterstore::optimal_k(m, n, layout);
            for k in [k_opt.saturating_sub(2).max(1), k_opt, k_opt + 2] {
                let p = FilterParams::new(layout, m, k, HashSpec::xxh3(seed)).unwrap();
                seed += 1;
                let x = measure(p, n, probes, seed) as f64;
                let (lo, hi) = band(&p, n, probes);
                assert!(
                    (lo..=hi).contains(&x),
                    "{layout} bits/key={bpk} k={k}: {x} false positives, expected {lo:.1}..{hi:.1}"
                );
            }
        }
    }
}

/// The blocked layout hashed with XXH3-64 (one 64-bit hash: the block
/// from all of it, each position from a 32-bit product of its low half)
/// against the blocked model, as [`measured_fp_matches_model_over_the_grid`]
/// checks XXH3-128: 4 to 24 bits per key at `k*` and `k* ± 2` (k up to 16,
/// the positions of 16 probes from 32 bits), at 20,000 keys, and at the
/// optimal `k` for 200,000 and 1,000,000 keys (more blocks: the block and
/// the positions come from one hash, so a dependence between them would
/// grow with the block count).
#[test]
fn blocked_xxh3_64_fp_matches_model_over_the_grid() {
    let probes = 400_000u64;
    let mut seed = 3000;
    let mut check = |n: u64, bpk: u64, k: u32| {
        let m = (bpk * n).div_ceil(512) * 512;
        let p = FilterParams::new(Layout::Blocked, m, k, HashSpec::xxh3_64(seed)).unwrap();
        seed += 1;
        let x = measure(p, n, probes, seed) as f64;
        let (lo, hi) = band(&p, n, probes);
        assert!(
            (lo..=hi).contains(&x),
            "xxh3-64 n={n} bits/key={bpk} k={k}: {x} false positives, expected {lo:.1}..{hi:.1}"
        );
    };
    let n = 20_000u64;
    for bpk in [4u64, 8, 12, 16, 20, 24] {
        let k_opt = filterstore::optimal_k((bpk * n).div_ceil(512) * 512, n, Layout::Blocked);
        for k in [k_opt.saturating_sub(2).max(1), k_opt, k_opt + 2] {
            check(n, bpk, k);
        }
    }
    for n in [200_000u64, 1_000_000] {
        for bpk in [6u64, 10, 16] {
            let k_opt = filterstore::optimal_k((bpk * n).div_ceil(512) * 512, n, Layout::Blocked);
            check(n, bpk, k_opt);
        }
    }
}

/// The blocked layout with sectorized positions (XXH3-64 sectorized: one
/// bit in each 64-bit sector of a 512-bit block, `k = 8`) against its model
/// (`fp_sectorized`, the split-block mixture with 64-bit lanes), in the band
/// of [`lanes_band`]: 4 to 24 bits per key at 20,000 keys, and 6, 10 and 16
/// at 200,000 and 1,000,000 keys (more blocks: the block and the sector
/// bits come from one 64-bit hash, so a dependence between them would grow
/// with the block count).
#[test]
fn blocked_sectorized_fp_matches_model_over_the_grid() {
    let probes = 400_000u64;
    let mut seed = 5000;
    let mut check = |n: u64, bpk: u64| {
        let z = (bpk * n).div_ceil(512);
        let spec = HashSpec::xxh3_64_sectorized(seed);
        let p = FilterParams::new(Layout::Blocked, 512 * z, 8, spec).unwrap();
        seed += 1;
        let x = measure(p, n, probes, seed) as f64;
        let f = p.expected_fp(n);
        assert_eq!(f, filterstore::fp_sectorized(z, n));
        let (lo, hi) = lanes_band(f, 64, z, n, probes);
        assert!(
            (lo..=hi).contains(&x),
            "sectorized n={n} bits/key={bpk}: {x} false positives, expected {lo:.1}..{hi:.1}"
        );
    };
    for bpk in [4u64, 8, 10, 12, 16, 20, 24] {
        check(20_000, bpk);
    }
    for n in [200_000u64, 1_000_000] {
        for bpk in [6u64, 10, 16] {
            check(n, bpk);
        }
    }
}

/// The split-block layout against its model ([`split_band`]) from 4 to 24
/// bits per key, at 20,000 keys (one seeded key set per point), and at a
/// block count that is not a power of two.
#[test]
fn split_block_fp_matches_model_over_the_grid() {
    let n = 20_000u64;
    let probes = 400_000u64;
    for (i, bpk) in [4u64, 8, 10, 12, 16, 20, 24].into_iter().enumerate() {
        let z = (bpk * n).div_ceil(256);
        let p = FilterParams::new(Layout::SplitBlock, 256 * z, 8, HashSpec::xxh64()).unwrap();
        let x = measure(p, n, probes, 5000 + i as u64) as f64;
        let (lo, hi) = split_band(z, n, probes);
        assert!(
            (lo..=hi).contains(&x),
            "split-block bits/key={bpk} (z = {z}): {x} false positives, expected {lo:.1}..{hi:.1}"
        );
    }
}

#[test]
fn filters_sized_for_a_rate_measure_at_most_that_rate() {
    // Every layout is sized with its own model, so 1% means 1% in each.
    let n = 100_000u64;
    let probes = 1_000_000u64;
    for (i, layout) in Layout::ALL.into_iter().enumerate() {
        for (j, target) in [0.05, 0.01, 0.001].into_iter().enumerate() {
            let p =
                FilterParams::for_capacity(n, target, layout, spec(layout, 7 + i as u64)).unwrap();
            let x = measure(p, n, probes, 77 + (i * 10 + j) as u64) as f64;
            let mean = target * probes as f64;
            let limit = mean + 5.0 * mean.sqrt() + 3.0;
            assert!(
                x <= limit,
                "{layout} sized for {target}: measured {} ({x} of {probes}), limit {limit}",
                x / probes as f64
            );
        }
    }
}

#[test]
fn estimated_fp_from_fill_tracks_the_measurement() {
    let n = 50_000u64;
    let probes = 500_000u64;
    for layout in Layout::ALL {
        let p = FilterParams::with_bits_per_key(n, 8.0, layout, spec(layout, 11)).unwrap();
        let f = BitFilter::new(p).unwrap();
        for i in 0..n {
            f.insert(&key(i, 0));
        }
        let est = f.estimated_fp();
        let x = (0..probes).filter(|&i| f.contains(&key(i, 1))).count() as f64;
        // Given the filter, the count is Binomial(N, est): 5σ.
        let mean = est * probes as f64;
        let sigma = (mean * (1.0 - est)).sqrt();
        assert!(
            (x - mean).abs() <= 5.0 * sigma + 3.0,
            "{layout}: {x} vs {mean}"
        );
    }
}

#[test]
fn estimators_len_within_two_percent() {
    for layout in Layout::ALL {
        for (i, n) in [1_000u64, 10_000, 100_000, 1_000_000]
            .into_iter()
            .enumerate()
        {
            let p =
                FilterParams::with_bits_per_key(n, 10.0, layout, spec(layout, i as u64)).unwrap();
            let f = BitFilter::new(p).unwrap();
            for j in 0..n {
                f.insert(&key(j, 2));
            }
            let est = f.estimate_len();
            let rel = (est - n as f64).abs() / n as f64;
            assert!(
                rel < 0.02,
                "{layout} n={n}: estimate {est} ({:.2}%)",
                rel * 100.0
            );
        }
    }
}

#[test]
fn estimators_intersection() {
    // Two sets of 100,000 keys overlapping by 0..100%: the documented error
    // bound is ±1,500 keys (1.5% of the set size) at 10 bits per key.
    let n = 100_000u64;
    for layout in Layout::ALL {
        let p = FilterParams::with_bits_per_key(n, 10.0, layout, spec(layout, 5)).unwrap();
        for overlap in [0u64, 25_000, 50_000, 75_000, 100_000] {
            let a = BitFilter::new(p).unwrap();
            let b = BitFilter::new(p).unwrap();
            for j in 0..n {
                a.insert(&key(j, 3));
                b.insert(&key(j + n - overlap, 3));
            }
            let est = a.estimate_intersection_len(&b).unwrap();
            assert!(
                (est - overlap as f64).abs() < 1_500.0,
                "{layout} overlap {overlap}: estimate {est}"
            );
            let union = a.estimate_union_len(&b).unwrap();
            let true_union = (2 * n - overlap) as f64;
            assert!((union - true_union).abs() / true_union < 0.02);
        }
    }
}
