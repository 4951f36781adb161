//! Choosing `m` (array bits) and `k` (hash functions) for a Bloom filter that
//! is *transmitted compressed*.
//!
//! Mitzenmacher, "Compressed Bloom Filters" (PODC 2001; IEEE/ACM ToN 10(5),
//! 2002), §2–3: with `n` keys, `k` hash functions and `m` bits, a bit stays
//! zero with probability `q = e^(−k·n/m)` (the paper's `p`), the
//! false-positive rate is
//! `f = (1 − q)^k`, and an optimal compressor sends the array in
//! `z = m·H(q)` bits, `H` the binary entropy. A plain filter minimises `f`
//! for a given `m` (at `k = (m/n)·ln 2`, where `q = ½` and the array is
//! incompressible); a filter that is sent as a message should instead
//! minimise `f` for a given *transmitted* size `z`. That optimum has a larger,
//! sparser array and fewer hash functions: at `z/n = 8` the plain optimum
//! (`m/n = 8, k = 6`) has `f = 0.0216`, while `m/n = 14, k = 2` has
//! `f = 0.0177` and `m/n = 92, k = 1` has `f = 0.0108` for `z/n = 7.92`
//! (the paper's Table 1).
//!
//! The functions here are the paper's formulas in `f64` plus two searches
//! over `k ∈ 1..=32` and `m/n ≤ 256`: [`plan_for_budget`] (smallest `f` for a
//! transmit budget, the paper's Tables 1–3) and [`plan_for_fp`] (smallest
//! transmission for a target `f`, Tables 4–5). Both use the paper's
//! idealisations: positions independent and uniform, and an entropy coder
//! that reaches `m·H(q)` exactly. The `entropy` module's coder adds about
//! 7 bytes per filter (0.07% on the paper's 10,000-key filters); a caller
//! with a hard byte budget should plan for that much less.

use thiserror::Error;

/// Largest number of hash functions considered. Beyond ~20 a filter's
/// lookup cost dominates; 32 covers the plain optimum `k = (m/n)·ln 2` up to
/// 46 bits per key, i.e. false-positive rates down to ~10^-10.
pub(crate) const MAX_K: u32 = 32;

/// Largest array size considered, in bits per key. Compressed filters want
/// sparse arrays (the paper's tables go up to 93 bits per key); 256 leaves
/// room for `k = 1` filters aiming at `f` ≈ 0.4%, while keeping the array,
/// which the receiver holds uncompressed, within 32 bytes per key.
pub(crate) const MAX_BITS_PER_KEY: f64 = 256.0;

/// A filter configuration and its expected performance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransmitPlan {
    /// Array size `m` in bits.
    pub m_bits: u64,
    /// Number of hash functions `k`.
    pub k: u32,
    /// Expected false-positive rate `(1 − e^(−k·n/m))^k`.
    pub fp: f64,
    /// Expected transmitted size in bits: `m·H(e^(−k·n/m))` if
    /// [`TransmitPlan::compressed`], else `m`.
    pub transmit_bits: f64,
    /// Whether the array is meant to be sent entropy-coded. `false` for the
    /// plain filter `m = z`, which [`plan_for_budget`] returns only when no
    /// compressed array in range does better: budgets above
    /// 256 bits per key (`MAX_BITS_PER_KEY`), or below `1/ln 2 ≈ 1.44`, where no
    /// array that is at most half full fits.
    pub compressed: bool,
}

/// Why no plan could be made.
#[derive(Debug, Clone, Copy, PartialEq, Error)]
#[non_exhaustive]
pub enum OptimizeError {
    /// The filter is for zero keys: every ratio per key is undefined.
    #[error("a filter for zero keys has no parameters to optimise")]
    NoKeys,
    /// The transmit budget is below one bit per key, the bottom of the
    /// paper's range (`z ≥ n`), where even its limit `f → ½^(z/n)` is
    /// above ½.
    #[error("a budget of {budget_bits} bits is below one bit per key ({min_bits} bits)")]
    BudgetTooSmall {
        /// The budget asked for.
        budget_bits: u64,
        /// The smallest budget accepted, `n` bits.
        min_bits: u64,
    },
    /// The target false-positive rate is not a number strictly between 0 and
    /// 1 (NaN included).
    #[error("false-positive target {fp} is not strictly between 0 and 1")]
    InvalidFp {
        /// The target asked for.
        fp: f64,
    },
    /// No filter with at most 32 hash functions (`MAX_K`) and
    /// 256 bits per key (`MAX_BITS_PER_KEY`) reaches the target.
    #[error("false-positive target {fp} is below the reachable minimum {best}")]
    Unreachable {
        /// The target asked for.
        fp: f64,
        /// The lowest rate within the search range.
        best: f64,
    },
}

/// `H(p) = −p·log2 p − (1 − p)·log2(1 − p)`, the entropy in bits of a bit
/// that is one with probability `p`; 0 at `p ∈ {0, 1}` (and outside).
#[must_use]
pub(crate) fn binary_entropy(p: f64) -> f64 {
    if p <= 0.0 || p >= 1.0 {
        0.0
    } else {
        -p * p.log2() - (1.0 - p) * (1.0 - p).log2()
    }
}

/// The paper's `z/n`: transmitted bits per key of an `m/n`-bits-per-key
/// filter with `k` hash functions under optimal compression,
/// `(m/n)·H(e^(−k·n/m))`. For example `(14, 2)` gives 7.923 (Table 1). It is
/// below `m/n` except at `e^(−k·n/m) = ½`, and increasing in `m/n` for every
/// `k` (checked in the tests), which the searches rely on.
#[must_use]
pub fn transmit_bits_per_key(m_over_n: f64, k: u32) -> f64 {
    m_over_n * binary_entropy(zero_fraction(m_over_n, k))
}

/// The false-positive rate `(1 − e^(−k·n/m))^k` of an `m/n`-bits-per-key
/// filter with `k` hash functions (the paper's `f`, §2); e.g. `(8, 6)`
/// gives 0.0216.
#[must_use]
pub(crate) fn fp(m_over_n: f64, k: u32) -> f64 {
    let power = i32::try_from(k).unwrap_or(i32::MAX);
    (1.0 - zero_fraction(m_over_n, k)).powi(power)
}

/// Expected fraction of zero bits, `e^(−k·n/m)`.
fn zero_fraction(m_over_n: f64, k: u32) -> f64 {
    (-f64::from(k) / m_over_n).exp()
}

/// The configuration with the lowest false-positive rate whose expected
/// transmitted size is at most `budget_bits`, for `n` keys.
///
/// For each `k` the search takes the largest `m ≤ 256·n` whose compressed
/// size `m·H(e^(−k·n/m))` fits (a bisection, since that size grows with `m`
/// while `f` falls), then keeps the best `k`. The plain array `m = z` with its
/// best `k` is a candidate too, and wins (with `compressed: false`) when the
/// budget exceeds 256 bits per key. At 8 bits per key this finds
/// `m/n = 96.9, k = 1, f = 0.0103`, a little better than the paper's best
/// sampled point in Table 1 (`m/n = 92`, `f = 0.0108`, at 7.923 bits); at 16
/// bits per key `m/n = 193.8, k = 2, f = 0.000105` (Table 2: 0.000222).
///
/// Only arrays at most half full are considered (`k ≤ (ln 2)·m/n`), the
/// paper's recommended side (§2: fewer hash functions, cheaper lookups).
/// The other side also beats the plain filter in theory, since `f → ½^(z/n)`
/// as `k → ∞` as well, and below ~5 bits per key it would win within
/// `k ≤ 32` (at 4 bits per key `k = 32, m/n = 11.6` gives `f = 0.120`
/// against 0.130 with `k = 1, m/n = 7.2`), but only with 32 hash functions
/// per lookup and an array that is most sensitive to an underestimated `n`.
///
/// # Errors
///
/// [`OptimizeError::NoKeys`] if `n = 0`, [`OptimizeError::BudgetTooSmall`] if
/// `budget_bits < n`.
///
/// # Examples
/// ```
/// use filterstore::plan_for_budget;
///
/// // 8 bits per key on the wire for 10,000 keys.
/// let plan = plan_for_budget(10_000, 80_000)?;
/// assert_eq!(plan.k, 1);
/// assert!((plan.m_bits as f64 / 10_000.0 - 96.9).abs() < 0.05, "{plan:?}");
/// assert!((plan.fp - 0.0103).abs() < 0.00005, "{plan:?}");
/// assert!(plan.compressed && plan.transmit_bits <= 80_000.0);
/// # Ok::<(), filterstore::OptimizeError>(())
/// ```
pub fn plan_for_budget(n: u64, budget_bits: u64) -> Result<TransmitPlan, OptimizeError> {
    if n == 0 {
        return Err(OptimizeError::NoKeys);
    }
    if budget_bits < n {
        return Err(OptimizeError::BudgetTooSmall {
            budget_bits,
            min_bits: n,
        });
    }
    let max_m = max_bits(n);
    let budget = budget_bits as f64;
    let mut best = plain_plan(n, budget_bits);
    for k in 1..=MAX_K {
        let fits = |m: u64| compressed_bits(m, n, k) <= budget;
        let (mut lo, mut hi) = (budget_bits.max(half_full_bits(n, k)).min(max_m), max_m);
        if !fits(lo) {
            continue;
        }
        if fits(hi) {
            lo = hi;
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let plan = compressed_plan(lo, n, k);
        if plan.fp < best.fp {
            best = plan;
        }
    }
    Ok(best)
}

/// The configuration with the smallest expected transmitted size whose
/// false-positive rate is at most `target_fp`, for `n` keys.
///
/// For each `k` the smallest sufficient array is
/// `m/n = −k / ln(1 − f^(1/k))` (solving `f = (1 − e^(−k·n/m))^k` for `m`) and, since the
/// compressed size grows with `m`, it is also the cheapest to send for that
/// `k`; the best `k` wins. As in [`plan_for_budget`], arrays stay at most
/// half full. At `f = 0.02` this is `m/n = 49.5`, `k = 1`, sending 7.001
/// bits per key: 1.24·log2(1/f), against the plain optimum's 8.14
/// (`m/n = 8.14`, `k = 6`, the usual 1.44·log2(1/f)). At the paper's Table 4
/// and 5 rates it matches or beats their best sampled points: 6.891 bits per
/// key for `f = 0.0215` and 13.815 for `f = 0.000453`.
///
/// # Errors
///
/// [`OptimizeError::NoKeys`] if `n = 0`, [`OptimizeError::InvalidFp`] unless
/// `0 < target_fp < 1`, and [`OptimizeError::Unreachable`] if no half-empty
/// array within the search range reaches it (below 1.7·10^-30, reached at
/// `m/n = 256, k = 32`).
///
/// # Examples
/// ```
/// use filterstore::plan_for_fp;
///
/// let plan = plan_for_fp(10_000, 0.02)?;
/// assert_eq!(plan.k, 1);
/// assert!((plan.m_bits as f64 / 10_000.0 - 49.5).abs() < 0.05, "{plan:?}");
/// assert!(plan.fp <= 0.02);
/// // 7.001 bits per key sent, against 8.14 for a filter sized for lookups.
/// assert!((plan.transmit_bits / 10_000.0 - 7.001).abs() < 0.001, "{plan:?}");
/// # Ok::<(), filterstore::OptimizeError>(())
/// ```
pub fn plan_for_fp(n: u64, target_fp: f64) -> Result<TransmitPlan, OptimizeError> {
    if n == 0 {
        return Err(OptimizeError::NoKeys);
    }
    if !(target_fp > 0.0 && target_fp < 1.0) {
        return Err(OptimizeError::InvalidFp { fp: target_fp });
    }
    let max_m = max_bits(n);
    let mut best: Option<TransmitPlan> = None;
    for k in 1..=MAX_K {
        let per_key = -f64::from(k) / (-target_fp.powf(1.0 / f64::from(k))).ln_1p();
        let Some(mut m) = whole_bits(per_key * n as f64) else {
            continue;
        };
        m = m.max(half_full_bits(n, k));
        // Rounding can leave the closed form a hair short of the target.
        for _ in 0..64 {
            if m > max_m || fp(m as f64 / n as f64, k) <= target_fp {
                break;
            }
            m += 1 + (m >> 40);
        }
        if m > max_m || fp(m as f64 / n as f64, k) > target_fp {
            continue;
        }
        let plan = compressed_plan(m, n, k);
        if best.is_none_or(|b| plan.transmit_bits < b.transmit_bits) {
            best = Some(plan);
        }
    }
    best.ok_or_else(|| OptimizeError::Unreachable {
        fp: target_fp,
        best: (1..=MAX_K)
            .map(|k| fp(MAX_BITS_PER_KEY, k))
            .fold(1.0, f64::min),
    })
}

/// The smallest `m` for which `k` hash functions leave at least half the
/// bits zero: `⌈k·n / ln 2⌉`.
fn half_full_bits(n: u64, k: u32) -> u64 {
    whole_bits(f64::from(k) * n as f64 / core::f64::consts::LN_2).unwrap_or(u64::MAX)
}

/// `256·n`, saturating.
fn max_bits(n: u64) -> u64 {
    n.saturating_mul(MAX_BITS_PER_KEY as u64)
}

/// `⌈x⌉` as a bit count, if it is one.
fn whole_bits(x: f64) -> Option<u64> {
    let x = x.ceil();
    (x.is_finite() && x >= 1.0 && x < u64::MAX as f64).then_some(x as u64)
}

/// Expected compressed size `m·H(e^(−k·n/m))` in bits.
fn compressed_bits(m: u64, n: u64, k: u32) -> f64 {
    m as f64 * binary_entropy(zero_fraction(m as f64 / n as f64, k))
}

fn compressed_plan(m_bits: u64, n: u64, k: u32) -> TransmitPlan {
    TransmitPlan {
        m_bits,
        k,
        fp: fp(m_bits as f64 / n as f64, k),
        transmit_bits: compressed_bits(m_bits, n, k),
        compressed: true,
    }
}

/// The plain filter that spends the whole budget on the array, with its best
/// `k`.
fn plain_plan(n: u64, budget_bits: u64) -> TransmitPlan {
    let per_key = budget_bits as f64 / n as f64;
    let (k, fp) = (1..=MAX_K)
        .map(|k| (k, fp(per_key, k)))
        .fold((1, f64::INFINITY), |a, b| if b.1 < a.1 { b } else { a });
    TransmitPlan {
        m_bits: budget_bits,
        k,
        fp,
        transmit_bits: budget_bits as f64,
        compressed: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tables 1–5 of Mitzenmacher, "Compressed Bloom Filters", as in
    /// shared/data/compressed_bloom_tables.csv:
    /// (table, m/n, printed z/n, k, printed fp). Rows with z/n = m/n are the
    /// uncompressed baselines, whose z/n is the array itself.
    const TABLES: [(u32, f64, f64, u32, f64); 14] = [
        (1, 8.0, 8.0, 6, 0.0216),
        (1, 14.0, 7.923, 2, 0.0177),
        (1, 92.0, 7.923, 1, 0.0108),
        (2, 16.0, 16.0, 11, 0.000459),
        (2, 28.0, 15.846, 4, 0.000314),
        (2, 48.0, 15.829, 3, 0.000222),
        (3, 4.0, 4.0, 3, 0.147),
        (3, 7.0, 3.962, 1, 0.133),
        (4, 8.0, 8.0, 6, 0.0216),
        (4, 12.6, 7.582, 2, 0.0216),
        (4, 46.0, 6.891, 1, 0.0215),
        (5, 16.0, 16.0, 11, 0.000459),
        (5, 37.5, 14.666, 3, 0.000454),
        (5, 93.0, 13.815, 2, 0.000453),
    ];

    #[test]
    fn formulas_reproduce_the_paper_tables() {
        for (table, m_over_n, z_over_n, k, printed_fp) in TABLES {
            let z = transmit_bits_per_key(m_over_n, k);
            if z_over_n == m_over_n {
                // Sent plain: the entropy is just below the array size
                // (7.982 for 8 bits per key, k = 6).
                assert!(z <= m_over_n && z > 0.99 * m_over_n, "table {table}: {z}");
            } else {
                // Printed to three decimals.
                assert!(
                    (z - z_over_n).abs() <= 0.0005,
                    "table {table}, m/n {m_over_n}: {z}"
                );
            }
            // Printed to three significant digits; the paper's 0.0216 for
            // m/n = 12.6, k = 2 is 0.02154 (0.27% off), hence 1%.
            let f = fp(m_over_n, k);
            assert!(
                (f / printed_fp - 1.0).abs() < 0.01,
                "table {table}, m/n {m_over_n}: {f}"
            );
        }
    }

    #[test]
    fn transmitted_size_grows_with_the_array() {
        for k in 1..=MAX_K {
            let mut prev = 0.0;
            let mut c = 0.05;
            while c <= MAX_BITS_PER_KEY {
                let z = transmit_bits_per_key(c, k);
                assert!(z >= prev, "k {k}, m/n {c}");
                assert!(z <= c * (1.0 + 1e-12));
                prev = z;
                c *= 1.001;
            }
        }
    }

    #[test]
    fn budget_plans_beat_the_paper_tables() {
        // (bits per key, best printed fp of Tables 1, 2 and 3). The search
        // is not limited to the paper's sampled points, so it may do better.
        let n = 10_000;
        for (bits, paper_best) in [(8, 0.0108), (16, 0.000222), (4, 0.133)] {
            let plan = plan_for_budget(n, bits * n).expect("feasible");
            eprintln!(
                "{bits} bits/key: {plan:?}, m/n {}",
                plan.m_bits as f64 / n as f64
            );
            assert!(plan.fp <= paper_best, "{bits} bits/key: {plan:?}");
            assert!(plan.transmit_bits <= (bits * n) as f64);
            assert!(plan.compressed);
            assert!(plan.m_bits <= 256 * n);
            assert_eq!(plan.fp, fp(plan.m_bits as f64 / n as f64, plan.k));
        }
    }

    #[test]
    fn fp_plans_need_fewer_bits_than_plain_filters() {
        let n = 10_000;
        let plan = plan_for_fp(n, 0.02).expect("reachable");
        let per_key = plan.transmit_bits / n as f64;
        eprintln!("fp 0.02: {plan:?}, {per_key} bits/key");
        assert!(plan.fp <= 0.02);
        // 1.25·log2(1/0.02) = 7.05 bits per key; a plain filter needs
        // 1.44·log2(1/0.02) = 8.14.
        assert!(per_key <= 1.25 * (1.0f64 / 0.02).log2(), "{per_key}");
        // The best points of Tables 4 and 5, printed to three decimals.
        for (target, paper_bits) in [(0.0215, 6.891), (0.000453, 13.815)] {
            let plan = plan_for_fp(n, target).expect("reachable");
            let per_key = plan.transmit_bits / n as f64;
            eprintln!("fp {target}: {plan:?}, {per_key} bits/key");
            assert!(
                plan.fp <= target && per_key <= paper_bits + 0.0005,
                "{per_key}"
            );
        }
    }

    #[test]
    fn huge_budgets_fall_back_to_plain_arrays() {
        let plan = plan_for_budget(100, 300 * 100).expect("feasible");
        assert!(!plan.compressed);
        assert_eq!(plan.m_bits, 30_000);
        assert_eq!(plan.transmit_bits, 30_000.0);
        assert_eq!(plan.k, 32);
    }

    #[test]
    fn bad_arguments_are_rejected() {
        assert_eq!(plan_for_budget(0, 100), Err(OptimizeError::NoKeys));
        assert_eq!(plan_for_fp(0, 0.1), Err(OptimizeError::NoKeys));
        assert_eq!(
            plan_for_budget(100, 99),
            Err(OptimizeError::BudgetTooSmall {
                budget_bits: 99,
                min_bits: 100
            })
        );
        for bad in [0.0, 1.0, -0.5, 2.0, f64::INFINITY] {
            assert_eq!(
                plan_for_fp(10, bad),
                Err(OptimizeError::InvalidFp { fp: bad })
            );
        }
        assert!(matches!(
            plan_for_fp(10, f64::NAN),
            Err(OptimizeError::InvalidFp { .. })
        ));
        assert!(matches!(
            plan_for_fp(10, 1e-40),
            Err(OptimizeError::Unreachable { .. })
        ));
        // Below 1/ln 2 = 1.44 bits per key no half-empty array fits the
        // budget, leaving the plain filter: m = n, k = 1, f = 1 − 1/e.
        let plan = plan_for_budget(100, 100).expect("one bit per key is allowed");
        assert!(!plan.compressed && plan.m_bits == 100 && plan.k == 1);
        assert!((plan.fp - (1.0 - (-1.0f64).exp())).abs() < 1e-12);
        let plan = plan_for_budget(u64::MAX / 2, u64::MAX).expect("large n");
        assert!(plan.fp < 0.5);
    }
}
