//! Semi-join prefiltering across sites (survey §3.2, the employees × cities
//! example): the site holding the smaller key set builds a filter of its join
//! keys and ships it; the other site keeps only the rows whose key may match
//! and sends them back; the first site removes the false positives exactly.
//!
//! The rows shipped back are the true matches plus about `fp · (rows that do
//! not join)` false positives, which [`Refiner`] removes, so the result always
//! equals the exact join.

use crate::filter::bloom::BloomRead;
use std::collections::HashSet;

/// Keys probed per batch: large enough for the batched lookup to overlap its
/// memory accesses, small enough to stay in L1.
const PROBE_BATCH: usize = 256;

/// Receiving side: the rows whose key may be in the filter, in input order.
/// Rows are borrowed, never copied; lookups are batched
/// ([`BloomRead::contains_many_into`]).
///
/// # Examples
/// ```
/// use filterstore::{probe, BitFilter, FilterParams, HashSpec, Layout};
///
/// // The origin's cities 0..500, in a filter at 1%.
/// let p = FilterParams::for_capacity(500, 0.01, Layout::Blocked, HashSpec::xxh3(4))?;
/// let cities = BitFilter::new(p)?;
/// for c in 0u32..500 {
///     cities.insert(&c.to_le_bytes());
/// }
/// // The remote site's 10,000 employees over cities 0..2,000: a quarter join.
/// let employees: Vec<(u32, [u8; 4])> =
///     (0u32..10_000).map(|e| (e, (e % 2_000).to_le_bytes())).collect();
/// let sent_back = probe(&cities, &employees, |row| &row.1[..]);
/// // Every one of the 2,500 matches, plus about 1% of the other 7,500 rows.
/// assert!(sent_back.len() >= 2_500 && sent_back.len() < 2_500 + 75 + 5 * 9, "{}", sent_back.len());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn probe<'r, R, F>(filter: &impl BloomRead, rows: &'r [R], key_of: F) -> Vec<&'r R>
where
    F: Fn(&R) -> &[u8],
{
    let mut out = Vec::new();
    let mut hits = [false; PROBE_BATCH];
    for chunk in rows.chunks(PROBE_BATCH) {
        let keys: Vec<&[u8]> = chunk.iter().map(&key_of).collect();
        filter.contains_many_into(&keys, &mut hits[..chunk.len()]);
        out.extend(
            chunk
                .iter()
                .zip(&hits[..chunk.len()])
                .filter(|(_, hit)| **hit)
                .map(|(r, _)| r),
        );
    }
    out
}

/// Origin side: knows its exact key set and removes the false positives from
/// the rows sent back.
///
/// # Examples
/// ```
/// use filterstore::Refiner;
///
/// let refiner = Refiner::new([b"paris".as_slice(), b"oslo"]);
/// // Rows the remote site sent back: two true matches and a false positive.
/// let rows = vec![(1, "paris"), (2, "lima"), (3, "oslo")];
/// let (joined, stats) = refiner.refine(rows, |r| r.1.as_bytes());
/// assert_eq!(joined, [(1, "paris"), (3, "oslo")]);
/// assert_eq!((stats.received, stats.kept, stats.false_positives), (3, 2, 1));
/// ```
#[derive(Debug, Default)]
pub struct Refiner {
    keys: HashSet<Vec<u8>>,
}

/// What refinement did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RefineStats {
    /// Rows received.
    pub received: u64,
    /// Rows kept: their key is in the origin's set.
    pub kept: u64,
    /// False positives removed.
    pub false_positives: u64,
}

impl Refiner {
    /// A refiner for the origin's join keys.
    pub fn new<K: AsRef<[u8]>>(keys: impl IntoIterator<Item = K>) -> Self {
        Refiner {
            keys: keys.into_iter().map(|k| k.as_ref().to_vec()).collect(),
        }
    }

    /// Whether `key` is one of the origin's keys.
    pub fn matches(&self, key: &[u8]) -> bool {
        self.keys.contains(key)
    }

    /// Keeps the rows whose key is truly in the origin's set.
    pub fn refine<R, F>(&self, rows: Vec<R>, key_of: F) -> (Vec<R>, RefineStats)
    where
        F: Fn(&R) -> &[u8],
    {
        let received = rows.len() as u64;
        let kept: Vec<R> = rows
            .into_iter()
            .filter(|r| self.keys.contains(key_of(r)))
            .collect();
        let stats = RefineStats {
            received,
            kept: kept.len() as u64,
            false_positives: received - kept.len() as u64,
        };
        (kept, stats)
    }

    /// Number of distinct keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::bloom::BitFilter;
    use crate::filter::hash::HashSpec;
    use crate::filter::params::{FilterParams, Layout};

    #[test]
    fn probe_then_refine_equals_the_exact_semijoin() {
        // Origin: cities 0..2000 (even only). Remote: 20,000 rows over cities 0..4000.
        let cities: Vec<Vec<u8>> = (0u32..2000)
            .filter(|c| c % 2 == 0)
            .map(|c| c.to_le_bytes().to_vec())
            .collect();
        let p = FilterParams::for_capacity(1000, 0.05, Layout::Blocked, HashSpec::xxh3(3)).unwrap();
        let f = BitFilter::new(p).unwrap();
        for c in &cities {
            f.insert(c);
        }
        let rows: Vec<(u32, [u8; 4])> = (0u32..20_000)
            .map(|i| (i, ((i * 7919) % 4000).to_le_bytes()))
            .collect();
        let candidates = probe(&f, &rows, |r| &r.1);
        let refiner = Refiner::new(&cities);
        let (joined, stats) = refiner.refine(candidates, |r| &r.1);
        let exact: Vec<&(u32, [u8; 4])> = rows.iter().filter(|r| refiner.matches(&r.1)).collect();
        assert_eq!(joined, exact);
        assert_eq!(stats.kept as usize, exact.len());
        // 15,000 rows do not join; at ≤ 5% FP expect ≈ 750 false positives
        // (5σ of Binomial(15000, 0.05) is ≈ 134).
        assert!(
            stats.false_positives > 0 && stats.false_positives < 900,
            "{stats:?}"
        );
    }
}
