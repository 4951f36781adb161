//! `Guard::read_many`: the answers and statistics of `Guard::read` for each
//! key, in one trip per storage (one `read_diff_many`, one `read_base_many`,
//! no single reads), over a storage that counts its calls and over
//! `SledDiffStorage`.

use crate::common;
use filterstore::{Change, DiffStorage, FilterStore, Guard, SledDiffStorage, TableSpec};
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};

/// A storage in memory that counts every call.
#[derive(Default)]
struct Counted {
    base: Mutex<HashMap<Vec<u8>, Vec<u8>>>,
    diff: Mutex<HashMap<Vec<u8>, Change>>,
    single_reads: AtomicU64,
    diff_many: AtomicU64,
    base_many: AtomicU64,
}

impl DiffStorage for Counted {
    type Error = Infallible;
    type Value = Vec<u8>;
    fn read_base(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Infallible> {
        self.single_reads.fetch_add(1, Ordering::Relaxed);
        Ok(self.base.lock().get(key).cloned())
    }
    fn read_diff(&self, key: &[u8]) -> Result<Option<Change>, Infallible> {
        self.single_reads.fetch_add(1, Ordering::Relaxed);
        Ok(self.diff.lock().get(key).cloned())
    }
    fn write_diff(&self, changes: &[(Vec<u8>, Change)]) -> Result<(), Infallible> {
        let mut d = self.diff.lock();
        for (k, c) in changes {
            d.insert(k.clone(), c.clone());
        }
        Ok(())
    }
    fn merge(&self) -> Result<u64, Infallible> {
        let mut d = self.diff.lock();
        let mut b = self.base.lock();
        let n = d.len() as u64;
        for (k, c) in d.drain() {
            match c {
                Change::Put(v) => b.insert(k, v),
                Change::Delete => b.remove(&k),
            };
        }
        Ok(n)
    }
    fn diff_is_empty(&self) -> Result<bool, Infallible> {
        Ok(self.diff.lock().is_empty())
    }
    fn read_base_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>, Infallible> {
        self.base_many.fetch_add(1, Ordering::Relaxed);
        let b = self.base.lock();
        Ok(keys.iter().map(|k| b.get(*k).cloned()).collect())
    }
    fn read_diff_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Change>>, Infallible> {
        self.diff_many.fetch_add(1, Ordering::Relaxed);
        let d = self.diff.lock();
        Ok(keys.iter().map(|k| d.get(*k).cloned()).collect())
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:06}").into_bytes()
}

/// Base records 0..4,000; changes (puts and deletes) on a random quarter
/// of 0..6,000 (so some change a key the base lacks); a filter sized so
/// that absent keys give false positives (a 5% target).
fn fill<S: DiffStorage>(guard: &Guard<S>, load_base: impl FnOnce(Vec<(Vec<u8>, Vec<u8>)>))
where
    S::Error: std::fmt::Debug,
{
    load_base(
        (0..4_000u32)
            .map(|i| (key(i), format!("b{i}").into_bytes()))
            .collect(),
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(22);
    let mut changes = Vec::new();
    for i in 0..6_000u32 {
        if rng.gen_ratio(1, 4) {
            let c = if rng.gen_bool(0.5) {
                Change::Put(format!("d{i}").into_bytes())
            } else {
                Change::Delete
            };
            changes.push((key(i), c));
        }
    }
    for chunk in changes.chunks(100) {
        guard.write(chunk).unwrap();
    }
}

/// A read of 3,000 random keys of 0..8,000 (base, changed, both, neither,
/// repeats) with `read_many` answers as `read` does key by key, and moves
/// the statistics by the same amounts.
fn same_as_single_reads<S: DiffStorage>(guard: &Guard<S>) -> usize
where
    S::Error: std::fmt::Debug,
{
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let keys: Vec<Vec<u8>> = (0..3_000).map(|_| key(rng.gen_range(0..8_000))).collect();
    let s0 = guard.stats();
    let owned = |v: Option<S::Value>| v.map(|v| v.as_ref().to_vec());
    let many: Vec<Option<Vec<u8>>> = guard
        .read_many(&keys)
        .unwrap()
        .into_iter()
        .map(owned)
        .collect();
    let s1 = guard.stats();
    let single: Vec<Option<Vec<u8>>> = keys.iter().map(|k| owned(guard.read(k).unwrap())).collect();
    let s2 = guard.stats();
    assert_eq!(many, single);
    assert_eq!(s1.reads - s0.reads, 3_000);
    assert_eq!(s1.reads - s0.reads, s2.reads - s1.reads);
    assert_eq!(s1.diff_reads - s0.diff_reads, s2.diff_reads - s1.diff_reads);
    assert_eq!(
        s1.diff_reads_avoided - s0.diff_reads_avoided,
        s2.diff_reads_avoided - s1.diff_reads_avoided
    );
    assert_eq!(
        s1.false_positives - s0.false_positives,
        s2.false_positives - s1.false_positives
    );
    // Both kinds of answer occur, or the comparison proves little.
    assert!(s1.diff_reads > s0.diff_reads && s1.diff_reads_avoided > s0.diff_reads_avoided);
    assert!(
        s1.false_positives > s0.false_positives,
        "no false positive met"
    );
    many.iter().filter(|v| v.is_some()).count()
}

/// The guard's table of these tests, sized for 1,500 changed keys at 5%.
fn changed_table(store: &FilterStore) -> filterstore::Table {
    store
        .create_table("changed", TableSpec::new(1_500, 0.05).seed(3))
        .unwrap()
}

#[test]
fn read_many_answers_as_single_reads_in_one_trip_per_storage() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let store = FilterStore::open(dir.path()).unwrap();
        let table = changed_table(&store);
        let storage = Counted::default();
        let guard = Guard::open(storage, table).unwrap();
        fill(&guard, |records| {
            guard.storage().base.lock().extend(records)
        });
        let st = guard.storage();
        let (s0, d0, b0) = (
            st.single_reads.load(Ordering::Relaxed),
            st.diff_many.load(Ordering::Relaxed),
            st.base_many.load(Ordering::Relaxed),
        );
        let keys: Vec<Vec<u8>> = (0..500).map(|i| key(i * 16)).collect();
        let got = guard.read_many(&keys).unwrap();
        assert_eq!(got.len(), 500);
        assert_eq!(st.single_reads.load(Ordering::Relaxed), s0, "a single read");
        assert_eq!(st.diff_many.load(Ordering::Relaxed), d0 + 1);
        assert_eq!(st.base_many.load(Ordering::Relaxed), b0 + 1);
        assert!(same_as_single_reads(&guard) > 0);
        // An empty batch reads nothing wrongly and answers nothing.
        assert!(guard.read_many::<&[u8]>(&[]).unwrap().is_empty());
    });
}

#[test]
fn read_many_over_sled_answers_as_single_reads() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let store = FilterStore::open(dir.path()).unwrap();
        let storage = SledDiffStorage::open(&store, "accounts").unwrap();
        let table = changed_table(&store);
        let guard = Guard::open(storage, table).unwrap();
        fill(&guard, |records| {
            guard.storage().load_base(records).unwrap()
        });
        assert!(same_as_single_reads(&guard) > 0);
        // After a merge the filter is empty: every read is avoided and answered
        // from the base, which now holds the changes.
        guard.merge().unwrap();
        let keys: Vec<Vec<u8>> = (0..6_000).map(key).collect();
        let many = guard.read_many(&keys).unwrap();
        let single: Vec<_> = keys.iter().map(|k| guard.read(k).unwrap()).collect();
        assert_eq!(many, single);
    });
}

#[test]
fn statistics_count_every_read_of_every_thread() {
    common::with_timeout(common::TEST_LIMIT, || {
        // The counters are kept per thread slot (16 of them) and summed: 20
        // threads (more than the slots, so some share one) of 2,000 reads each,
        // half through `read`, half through `read_many`, must add up exactly.
        let dir = tempfile::tempdir().unwrap();
        let store = FilterStore::open(dir.path()).unwrap();
        let table = changed_table(&store);
        let guard = Guard::open(Counted::default(), table).unwrap();
        fill(&guard, |records| {
            guard.storage().base.lock().extend(records)
        });
        let s0 = guard.stats();
        std::thread::scope(|s| {
            for t in 0..20u32 {
                let guard = &guard;
                s.spawn(move || {
                    let keys: Vec<Vec<u8>> = (0..1_000).map(|i| key(t * 1_000 + i)).collect();
                    for k in &keys {
                        guard.read(k).unwrap();
                    }
                    guard.read_many(&keys).unwrap();
                });
            }
        });
        let s1 = guard.stats();
        assert_eq!(s1.reads - s0.reads, 40_000);
        assert_eq!(
            (s1.diff_reads - s0.diff_reads) + (s1.diff_reads_avoided - s0.diff_reads_avoided),
            40_000
        );
        assert!(s1.false_positives - s0.false_positives <= s1.diff_reads - s0.diff_reads);
    });
}
