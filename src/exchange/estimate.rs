//! Join-size estimates that count repeated keys.
//!
//! The set estimators of [`BloomRead`] (`estimate_len`,
//! `estimate_intersection_len`) count *distinct* keys; a join's size counts
//! *rows*, and a key that appears `a` times on one side and `b` times on the
//! other contributes `a·b` rows. These estimates fit the semi-join flow:
//!
//! 1. the build side sends a filter of its distinct join keys and its
//!    [`BuildStats`] (rows and distinct keys, two numbers), both in one
//!    message ([`encode_message_with_stats`](crate::encode_message_with_stats));
//! 2. the probe side counts its rows the filter passes (`N` rows probed,
//!    `P` passed: [`probe`](super::probe)`(..).len()`, or any loop over
//!    `contains`);
//! 3. [`estimate_join_size`] corrects `P` for false positives and scales by
//!    the build side's rows per distinct key; from the message alone,
//!    [`DecodedMessage::estimate_join_size`](crate::DecodedMessage::estimate_join_size).
//!
//! # The formula
//! With `T` the probe rows whose key is on the build side and `fp` the
//! filter's false-positive rate, every one of the `T` rows passes (no false
//! negatives) and each of the other `N − T` passes with probability `fp`, so
//! `E[P] = T + fp·(N − T)`, and
//!
//! ```text
//! T̂    = (P − fp·N) / (1 − fp)            clamped to [0, P]
//! rows = T̂ · build.rows / build.distinct_keys
//! ```
//!
//! `fp` is the filter's own rate at its current fill
//! ([`BloomRead::estimated_fp`]), not the rate it was sized for. Probe-side
//! repeats need no statistics: each probe row is counted.
//!
//! # Assumptions and error
//! * **Uniform multiplicity**: the build-side keys the probe rows hit have, on
//!   average, the build side's mean multiplicity `build.rows /
//!   build.distinct_keys`. Skew that correlates with the probe side (the
//!   probe side hitting mostly the heaviest build keys) biases the estimate;
//!   no two-number summary can see it.
//! * The `N − T` non-matching probe keys behave like random keys to the
//!   filter (its seed is unknown to whoever chose them). The binomial error
//!   below counts each non-matching *row* as an independent trial; a
//!   non-matching key repeated on `r` rows passes or fails `r` times at once,
//!   which multiplies that variance by `E[r²] / E[r]` (the estimate itself
//!   stays unbiased).
//!
//! Standard error: `√((N − T)·fp / (1 − fp))` rows for `T̂` (the binomial
//! noise of the false positives), times the mean multiplicity; plus, when
//! multiplicities vary, `√T · σ` for a multiplicity standard deviation `σ`
//! (the matched keys' multiplicities are a sample). [`JoinSizeEstimate`]
//! reports the first term, the only one the two numbers allow.
//!
//! Measured (test `join_size_counts_repeated_keys`, one seeded run: 20,000
//! distinct build keys, 100,000 probe rows of which 30% match a uniformly
//! drawn build key, filter at 1%): with 1–9 build rows per key the estimate
//! was 0.16% under the true 150,584 rows, for a predicted standard deviation
//! of 0.31% (both terms); with 3 rows per key, 0.05% over the true 90,321,
//! for a predicted 0.09% (the false-positive term alone). Counting passed
//! rows without the correction overshoots by the ~700 false positives: 2.3%.
//!
//! From two filters and two row counts ([`estimate_join_size_from_filters`])
//! the distinct intersection is estimated from the filters
//! ([`BloomRead::estimate_intersection_len`]), so its absolute error scales
//! with the *set* sizes (about 0.2% of them at 10 bits per key), not with
//! the join: it suits a join of comparable sets, not a needle in a haystack.

use crate::error::FilterError;
use crate::filter::bloom::{BloomRead, BloomReadDyn};

/// What the build side of a semi-join sends with its filter: two numbers
/// that turn a count of matching probe rows into a count of join rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuildStats {
    /// Rows on the build side (each key counted as often as it appears).
    pub rows: u64,
    /// Distinct join keys on the build side: the keys in its filter.
    pub distinct_keys: u64,
}

impl BuildStats {
    /// Mean rows per distinct key; 0 for an empty side.
    pub fn rows_per_key(&self) -> f64 {
        if self.distinct_keys == 0 {
            0.0
        } else {
            self.rows as f64 / self.distinct_keys as f64
        }
    }
}

/// An estimated join size (see the formula in [`estimate_join_size`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JoinSizeEstimate {
    /// Estimated rows of the join.
    pub rows: f64,
    /// Estimated probe rows whose key is on the build side (`T̂`).
    pub matching_probe_rows: f64,
    /// Standard error of [`Self::rows`] from the false positives alone
    /// (binomial); infinite when the filter is saturated.
    pub std_error: f64,
    /// The false-positive rate the correction used.
    pub fp: f64,
}

/// Estimates the rows of `build ⋈ probe` on the join key, from the build
/// side's `filter` of distinct keys and its [`BuildStats`], and the probe
/// side's count of rows: `probe_rows` probed, `passed` of them passed by the
/// filter.
///
/// `T̂ = (passed − fp·probe_rows) / (1 − fp)` (clamped to `[0, passed]`) is the
/// number of probe rows that truly match, `fp` the filter's current rate
/// ([`BloomRead::estimated_fp`]); the join has `T̂ · build.rows /
/// build.distinct_keys` rows, assuming the matched keys have the build
/// side's mean multiplicity. The module documentation derives the formula
/// and its error. A saturated filter (`fp = 1`) says nothing: the estimate is
/// then the upper bound `passed` rows times the multiplicity, with an
/// infinite standard error.
///
/// # Examples
/// ```
/// use filterstore::{estimate_join_size, probe, BitFilter, BloomRead, BuildStats};
/// use filterstore::{FilterParams, HashSpec, Layout};
///
/// // Build side: keys 0..1,000, each on 4 rows (orders per customer).
/// let p = FilterParams::for_capacity(1_000, 0.01, Layout::Standard, HashSpec::xxh3(5))?;
/// let f = BitFilter::new(p)?;
/// for c in 0u32..1_000 {
///     f.insert(&c.to_le_bytes());
/// }
/// let build = BuildStats { rows: 4_000, distinct_keys: 1_000 };
///
/// // Probe side: 20,000 rows over keys 0..4,000, each key on 5 rows; the
/// // 5,000 rows with keys below 1,000 match, 4 build rows each.
/// let rows: Vec<[u8; 4]> = (0u32..20_000).map(|i| (i % 4_000).to_le_bytes()).collect();
/// let passed = probe(&f, &rows, |r| &r[..]).len() as u64;
/// assert_eq!(passed, 5_115); // 5,000 matches and 115 false positives
///
/// let est = estimate_join_size(&f, build, rows.len() as u64, passed);
/// let exact = 5_000.0 * 4.0;
/// assert!((est.rows - exact).abs() < 3.0 * est.std_error, "{est:?}");
/// assert!((est.rows - exact).abs() / exact < 0.01);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn estimate_join_size(
    filter: &impl BloomRead,
    build: BuildStats,
    probe_rows: u64,
    passed: u64,
) -> JoinSizeEstimate {
    join_size_from_counts(filter.estimated_fp(), build, probe_rows, passed)
}

/// [`estimate_join_size`] for a known false-positive rate `fp`.
pub(crate) fn join_size_from_counts(
    fp: f64,
    build: BuildStats,
    probe_rows: u64,
    passed: u64,
) -> JoinSizeEstimate {
    let per_key = build.rows_per_key();
    let (n, p) = (probe_rows as f64, passed.min(probe_rows) as f64);
    if fp >= 1.0 {
        return JoinSizeEstimate {
            rows: p * per_key,
            matching_probe_rows: p,
            std_error: f64::INFINITY,
            fp,
        };
    }
    let fp = fp.max(0.0);
    let matching = ((p - fp * n) / (1.0 - fp)).clamp(0.0, p);
    let sd = ((n - matching) * fp / (1.0 - fp)).sqrt();
    JoinSizeEstimate {
        rows: matching * per_key,
        matching_probe_rows: matching,
        std_error: sd * per_key,
        fp,
    }
}

/// Estimates the rows of `A ⋈ B` from a filter of each side's distinct keys
/// and each side's row count: `|A ∩ B|̂ · (a_rows / n̂_A) · (b_rows / n̂_B)`,
/// the distinct counts `n̂` and the intersection estimated from the filters
/// ([`BloomRead::estimate_len`], [`BloomRead::estimate_intersection_len`]).
/// Assumes uniform multiplicity on both sides; the intersection's absolute
/// error scales with the set sizes (module documentation).
///
/// # Errors
/// [`FilterError::Incompatible`] unless both filters have the same layout,
/// `m`, `k`, hash algorithm and seed.
///
/// # Examples
/// ```
/// use filterstore::{estimate_join_size_from_filters, BitFilter};
/// use filterstore::{FilterParams, HashSpec, Layout};
///
/// let p = FilterParams::for_capacity(20_000, 0.01, Layout::Standard, HashSpec::xxh3(9))?;
/// let (a, b) = (BitFilter::new(p)?, BitFilter::new(p)?);
/// for k in 0u32..10_000 {
///     a.insert(&k.to_le_bytes()); // A: 10,000 keys, 3 rows each
/// }
/// for k in 5_000u32..15_000 {
///     b.insert(&k.to_le_bytes()); // B: 10,000 keys, 2 rows each
/// }
/// // 5,000 shared keys, each giving 3 · 2 rows.
/// let rows = estimate_join_size_from_filters(&a, 30_000, &b, 20_000)?;
/// assert!((rows - 30_000.0).abs() / 30_000.0 < 0.02, "{rows}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn estimate_join_size_from_filters(
    a: &impl BloomRead,
    a_rows: u64,
    b: &dyn BloomReadDyn,
    b_rows: u64,
) -> Result<f64, FilterError> {
    let shared = a.estimate_intersection_len(b)?;
    let (na, nb) = (a.estimate_len(), b.estimate_len_dyn());
    if na <= 0.0 || nb <= 0.0 {
        return Ok(0.0);
    }
    Ok(shared * (a_rows as f64 / na) * (b_rows as f64 / nb))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::bloom::BitFilter;
    use crate::filter::hash::HashSpec;
    use crate::filter::params::{FilterParams, Layout};
    use rand::{rngs::StdRng, Rng, SeedableRng};

    /// Build keys `0..distinct` with the given multiplicities; probe rows of
    /// which `match_share` hit a uniformly chosen build key and the rest a
    /// key outside the build set. Returns the estimate, the exact join rows,
    /// the predicted standard deviation of the error, and the rows passed.
    fn run(
        seed: u64,
        mult: &[u64],
        probe_rows: u64,
        match_share: f64,
    ) -> (JoinSizeEstimate, f64, f64, u64) {
        let mut rng = StdRng::seed_from_u64(seed);
        let distinct = mult.len() as u64;
        let p = FilterParams::for_capacity(distinct, 0.01, Layout::Standard, HashSpec::xxh3(seed))
            .unwrap();
        let f = BitFilter::new(p).unwrap();
        for k in 0..distinct {
            f.insert(&k.to_le_bytes());
        }
        let build = BuildStats {
            rows: mult.iter().sum(),
            distinct_keys: distinct,
        };
        let (mut exact, mut passed, mut matched) = (0u64, 0u64, 0u64);
        for row in 0..probe_rows {
            let key = if rng.gen_bool(match_share) {
                let k = rng.gen_range(0..distinct);
                exact += mult[k as usize];
                matched += 1;
                k
            } else {
                // A key outside the build set, distinct per row, so that false
                // positives are independent (see the module documentation).
                distinct + row
            };
            passed += u64::from(f.contains(&key.to_le_bytes()));
        }
        let est = estimate_join_size(&f, build, probe_rows, passed);
        // Predicted error: the false-positive term the estimate reports, and
        // the multiplicity-sampling term √T·σ of the module documentation.
        let mean = build.rows_per_key();
        let var = mult.iter().map(|&m| (m as f64 - mean).powi(2)).sum::<f64>() / distinct as f64;
        let sd = (est.std_error.powi(2) + matched as f64 * var).sqrt();
        (est, exact as f64, sd, passed)
    }

    #[test]
    fn join_size_counts_repeated_keys() {
        // 20,000 build keys with 1–9 rows each (mean 5, σ² = 6.67), 100,000
        // probe rows of which 30% match. Predicted standard deviation
        // ≈ √(5² · 70,000 · 0.01 / 0.99 + 30,000 · 6.67) ≈ 470 rows, 0.31% of
        // the ~150,000 join rows (computed exactly below); the test allows 5σ
        // (a failure rate of 6·10^-7 for a normal error).
        let mut rng = StdRng::seed_from_u64(11);
        let mult: Vec<u64> = (0..20_000).map(|_| rng.gen_range(1..=9)).collect();
        let (est, exact, sd, _) = run(12, &mult, 100_000, 0.3);
        let err = est.rows - exact;
        eprintln!(
            "varied multiplicity: estimate {:.0}, exact {exact}, error {:.3}%, predicted sd {:.3}%",
            est.rows,
            100.0 * err / exact,
            100.0 * sd / exact
        );
        assert!(err.abs() <= 5.0 * sd, "{est:?} vs {exact} (sd {sd})");

        // Equal multiplicities: only the false-positive term is left, and it
        // is the one the estimate reports.
        let (est, exact, sd, passed) = run(13, &[3; 20_000], 100_000, 0.3);
        assert!((sd - est.std_error).abs() < 1e-9);
        let err = est.rows - exact;
        eprintln!(
            "equal multiplicity: estimate {:.0}, exact {exact}, error {:.3}%, predicted sd {:.3}%",
            est.rows,
            100.0 * err / exact,
            100.0 * sd / exact
        );
        assert!(err.abs() <= 5.0 * sd, "{est:?} vs {exact} (sd {sd})");
        // The passed rows times the multiplicity are biased upward by the
        // ~700 false positives (≈ 2,100 rows, 26 sd): the correction matters.
        let naive = passed as f64 * 3.0;
        assert!(naive - exact > 5.0 * sd, "naive {naive}, exact {exact}");
    }

    #[test]
    fn edge_cases_are_finite_or_bounded() {
        let build = BuildStats {
            rows: 10,
            distinct_keys: 5,
        };
        // No false positives possible: the count is exact.
        let e = join_size_from_counts(0.0, build, 100, 40);
        assert_eq!(
            (e.matching_probe_rows, e.rows, e.std_error),
            (40.0, 80.0, 0.0)
        );
        // Fewer rows passed than the false positives alone predict: zero.
        let e = join_size_from_counts(0.5, build, 100, 10);
        assert_eq!(e.rows, 0.0);
        // A saturated filter: the upper bound, with no confidence.
        let e = join_size_from_counts(1.0, build, 100, 100);
        assert_eq!(e.rows, 200.0);
        assert!(e.std_error.is_infinite());
        // An empty build side joins nothing.
        let empty = BuildStats {
            rows: 0,
            distinct_keys: 0,
        };
        assert_eq!(join_size_from_counts(0.01, empty, 100, 3).rows, 0.0);
    }

    #[test]
    fn two_filters_estimate_the_join_of_comparable_sets() {
        // A: 40,000 keys × 2 rows; B: 40,000 keys × 3 rows; 10,000 shared:
        // 60,000 join rows. The intersection estimator is within ±1,500 keys
        // at this size (its own test); allow 1,500 · 6 rows.
        let p =
            FilterParams::for_capacity(80_000, 0.01, Layout::Blocked, HashSpec::xxh3(4)).unwrap();
        let (a, b) = (BitFilter::new(p).unwrap(), BitFilter::new(p).unwrap());
        for k in 0u32..40_000 {
            a.insert(&k.to_le_bytes());
            b.insert(&(k + 30_000).to_le_bytes());
        }
        let rows = estimate_join_size_from_filters(&a, 80_000, &b, 120_000).unwrap();
        assert!((rows - 60_000.0).abs() < 9_000.0, "{rows}");
        let other = BitFilter::new(
            FilterParams::for_capacity(80_000, 0.01, Layout::Blocked, HashSpec::xxh3(5)).unwrap(),
        )
        .unwrap();
        assert!(estimate_join_size_from_filters(&a, 1, &other, 1).is_err());
    }
}
