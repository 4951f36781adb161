//! The index in memory: per data file, the identity its filters were built
//! from and its filter of each indexed column; and the probe that picks
//! the files a lookup must read.
//!
//! A file is skipped only when it is listed with exactly the identity its
//! filters were built from, and the filter of a constrained column, built
//! with the index's own hash, says none of the allowed keys is there. A
//! file the index does not know, or knows in another version, or whose
//! filter is missing, unreadable or of another hash, is read.

use super::identity::FileIdentity;
use super::predicate::KeySets;
use datafusion::object_store::ObjectMeta;
use filterstore::{HashSpec, KeyHash, SealedFilter};
use std::collections::HashMap;
use std::sync::Arc;

/// What the index holds of one data file.
#[derive(Clone, Debug)]
pub(crate) struct IndexedFile {
    pub(crate) identity: FileIdentity,
    /// Per indexed column: its filter (`None`: none usable).
    pub(crate) filters: Vec<Option<Arc<SealedFilter>>>,
}

impl IndexedFile {
    /// The expected false-positive rate of its filters: the largest over
    /// its columns (a lookup constrains one column or more).
    pub(crate) fn fp(&self) -> f64 {
        self.filters
            .iter()
            .flatten()
            .map(|f| f.info().params().expected_fp(f.info().keys()))
            .fold(0.0, f64::max)
    }
}

/// Why a listed file is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum ReadReason {
    /// The index holds no filter of it: new, or indexing it failed.
    Unindexed,
    /// It was rewritten since it was indexed (size, time or ETag differ).
    Changed,
    /// Its filters may hold a wanted key.
    Maybe,
    /// A constrained column has no usable filter in it.
    NoFilter,
    /// The scan's filters constrain no indexed column: not a lookup.
    NoLookup,
}

/// The outcome of a probe: the files to read, each with why, and how many
/// were skipped.
#[derive(Debug, Default)]
pub(crate) struct Probe {
    pub(crate) read: Vec<(ObjectMeta, ReadReason)>,
    pub(crate) skipped: usize,
}

/// The index of a table in memory, by path.
#[derive(Debug, Default)]
pub(crate) struct FileMap {
    pub(crate) files: HashMap<String, IndexedFile>,
}

impl FileMap {
    /// The file `meta` describes, if the index holds its current version.
    pub(crate) fn current(&self, meta: &ObjectMeta) -> Option<&IndexedFile> {
        let f = self.files.get(meta.location.as_ref())?;
        (f.identity == FileIdentity::of(meta)).then_some(f)
    }

    /// Which of `listed` may hold a row the key sets allow (every file when
    /// `sets` is empty), each key hashed once with `hash`.
    pub(crate) fn probe(&self, listed: Vec<ObjectMeta>, sets: &KeySets, hash: HashSpec) -> Probe {
        let hashed: Vec<(usize, Vec<KeyHash>)> = sets
            .iter()
            .map(|(&c, keys)| (c, keys.iter().map(|k| hash.hash(k)).collect()))
            .collect();
        let mut out = Probe::default();
        for meta in listed {
            let reason = match self.files.get(meta.location.as_ref()) {
                None => ReadReason::Unindexed,
                Some(f) if f.identity != FileIdentity::of(&meta) => ReadReason::Changed,
                Some(_) if hashed.is_empty() => ReadReason::NoLookup,
                Some(f) => match skip(f, &hashed, hash) {
                    Some(()) => {
                        out.skipped += 1;
                        continue;
                    }
                    None if lacks_filter(f, &hashed, hash) => ReadReason::NoFilter,
                    None => ReadReason::Maybe,
                },
            };
            out.read.push((meta, reason));
        }
        out
    }
}

/// The filter of column `c` of `f`, if it was built with `hash`.
fn usable(f: &IndexedFile, c: usize, hash: HashSpec) -> Option<&SealedFilter> {
    let filter = f.filters.get(c)?.as_deref()?;
    (filter.info().params().hash() == hash).then_some(filter)
}

/// `Some` if a constrained column's filter holds none of its keys.
fn skip(f: &IndexedFile, hashed: &[(usize, Vec<KeyHash>)], hash: HashSpec) -> Option<()> {
    hashed
        .iter()
        .any(|(c, hs)| {
            usable(f, *c, hash).is_some_and(|filter| !hs.iter().any(|h| filter.contains_hash(*h)))
        })
        .then_some(())
}

fn lacks_filter(f: &IndexedFile, hashed: &[(usize, Vec<KeyHash>)], hash: HashSpec) -> bool {
    hashed.iter().any(|(c, _)| usable(f, *c, hash).is_none())
}

/// The false-positive rate a file indexed now gets, with `files` files
/// listed, so that the expected number of false files per lookup stays
/// below `false_files` however the table grows: half of it spread over a
/// capacity `C` = the power of two at or above `2 · files` (at least
/// 1,024), each file getting `false_files / (2 · C)`. When the table
/// doubles past `C`, older files keep their rate: the files of each
/// capacity add at most `false_files / 4` (at most `C / 2` of them at
/// `false_files / (2 · C)`), and [`over_budget`] picks the files to rebuild
/// when the sum passes `false_files`.
pub(crate) fn fp_for_new_file(files: usize, false_files: f64) -> f64 {
    let capacity = (2 * files).max(1024).next_power_of_two();
    false_files / (2.0 * capacity as f64)
}

/// The files to build again (the highest rates first) so that the
/// expected false files of the files kept (their rates summed, over
/// `map`'s files that `listed` holds), plus `room` for the files being
/// added, stays below `false_files`.
pub(crate) fn over_budget(
    map: &FileMap,
    listed: &[ObjectMeta],
    room: f64,
    false_files: f64,
) -> Vec<String> {
    let mut rates: Vec<(f64, &str)> = listed
        .iter()
        .filter_map(|m| map.current(m))
        .map(|f| (f.fp(), f.identity.path.as_str()))
        .collect();
    let mut sum: f64 = rates.iter().map(|r| r.0).sum::<f64>() + room;
    rates.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut out = Vec::new();
    for (rate, path) in rates {
        if sum <= false_files {
            break;
        }
        sum -= rate;
        out.push(path.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_of_new_files_keeps_the_sum_below_the_budget_as_the_table_grows() {
        // Files added one by one up to 200,000, each at the rate its time
        // gives: the sum of all rates stays below half the budget times the
        // number of capacities seen, and every capacity adds at most a
        // quarter of the budget.
        let budget = 0.1;
        let mut sum = 0.0;
        let mut by_capacity: HashMap<usize, f64> = HashMap::new();
        for n in 1..=200_000usize {
            let p = fp_for_new_file(n, budget);
            sum += p;
            *by_capacity
                .entry((2 * n).max(1024).next_power_of_two())
                .or_default() += p;
        }
        for (c, s) in &by_capacity {
            assert!(*s <= budget / 4.0 + 1e-12, "capacity {c}: {s}");
        }
        assert!(sum <= budget / 4.0 * by_capacity.len() as f64 + 1e-12);
        // At 10,000 files a new file gets 0.1 / 65,536.
        assert_eq!(fp_for_new_file(10_000, 0.1), 0.1 / 65_536.0);
    }
}
