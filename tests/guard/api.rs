//! The differential-file guard: reads see every change, merges clear the
//! filter, an interrupted merge is completed on open, and concurrent writers
//! never make a reader miss a committed change.

use crate::common;

use filterstore::BloomRead;
use filterstore::{Change, DiffStorage, Guard, SledDiffStorage};
use filterstore::{FilterStore, TableSpec};
use std::sync::Arc;

fn key(i: u32) -> Vec<u8> {
    format!("rec:{i:06}").into_bytes()
}

fn setup(dir: &std::path::Path) -> FilterStore {
    FilterStore::open(dir.join("filters")).unwrap()
}

fn open_guard(store: &FilterStore) -> Guard<SledDiffStorage> {
    let table = match store.open_table("changes") {
        Ok(t) => t,
        Err(_) => store
            .create_table("changes", TableSpec::new(10_000, 0.01))
            .unwrap(),
    };
    Guard::open(SledDiffStorage::open(store, "t").unwrap(), table).unwrap()
}

#[test]
fn reads_see_changes_and_merges_clear_the_filter() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let store = setup(dir.path());
        let guard = open_guard(&store);
        guard
            .storage()
            .load_base((0..5_000u32).map(|i| (key(i), b"base")))
            .unwrap();
        let changes: Vec<(Vec<u8>, Change)> = (0..500u32)
            .map(|i| {
                let c = if i % 5 == 0 {
                    Change::Delete
                } else {
                    Change::Put(b"new".to_vec())
                };
                (key(i), c)
            })
            .collect();
        guard.write(&changes).unwrap();
        for i in 0..5_000u32 {
            let got = guard.read(&key(i)).unwrap();
            let want: Option<&[u8]> = match i {
                i if i < 500 && i % 5 == 0 => None,
                i if i < 500 => Some(b"new"),
                _ => Some(b"base"),
            };
            assert_eq!(got.as_deref(), want, "key {i}");
        }
        let s = guard.stats();
        assert_eq!(s.reads, 5_000);
        assert_eq!(s.diff_reads + s.diff_reads_avoided, 5_000);
        // 4,500 unchanged keys at a 1% target: 45 false positives expected,
        // 5σ of Binomial(4500, 0.01) is 33.
        assert!(s.false_positives <= 45 + 34, "{s:?}");
        assert_eq!(s.diff_reads - s.false_positives, 500);
        // Every read of an unchanged key was reported to the drift monitor.
        let observed = guard.table().observed_fp();
        assert_eq!(observed.trials, 4_500);
        assert_eq!(observed.false_positives, s.false_positives);

        assert_eq!(guard.merge().unwrap(), 500);
        assert!(guard.storage().diff_is_empty().unwrap());
        assert_eq!(guard.table().live_keys(), 0);
        assert_eq!(guard.table().bloom().count_ones(), 0);
        for i in 0..5_000u32 {
            let want: Option<&[u8]> = match i {
                i if i < 500 && i % 5 == 0 => None,
                i if i < 500 => Some(b"new"),
                _ => Some(b"base"),
            };
            assert_eq!(
                guard.read(&key(i)).unwrap().as_deref(),
                want,
                "after merge, key {i}"
            );
        }
    })
}

#[test]
fn an_interrupted_merge_is_completed_on_open() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let store = setup(dir.path());
        {
            let guard = open_guard(&store);
            guard
                .write(&[(key(1), Change::Put(b"v1".to_vec()))])
                .unwrap();
            // The host merged, then the process died before the filter was cleared.
            guard.storage().merge().unwrap();
            assert!(guard.table().live_keys() > 0);
            // Reads stay correct meanwhile: the filter only over-approximates.
            assert_eq!(guard.read(&key(1)).unwrap().as_deref(), Some(&b"v1"[..]));
        }
        let guard = open_guard(&store);
        assert_eq!(guard.table().live_keys(), 0);
        assert_eq!(guard.read(&key(1)).unwrap().as_deref(), Some(&b"v1"[..]));
    })
}

#[test]
fn a_write_is_in_the_filter_before_it_is_in_the_differential_file() {
    common::with_timeout(common::TEST_LIMIT, || {
        // If the process dies after the filter insert but before the change is
        // committed, the key is a false positive: never a change the filter misses.
        let dir = tempfile::tempdir().unwrap();
        let store = setup(dir.path());
        let guard = open_guard(&store);
        guard
            .write(&[(key(7), Change::Put(b"x".to_vec()))])
            .unwrap();
        for i in 0..1_000u32 {
            let in_diff = guard.storage().read_diff(&key(i)).unwrap().is_some();
            if in_diff {
                assert!(
                    guard.table().contains(&key(i)),
                    "change without filter entry"
                );
            }
        }
    })
}

#[test]
fn concurrent_writers_never_hide_a_committed_change() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let store = setup(dir.path());
        let guard = Arc::new(open_guard(&store));
        guard
            .storage()
            .load_base((0..2_000u32).map(|i| (key(i), b"base")))
            .unwrap();
        let writers: Vec<_> = (0..3u32)
            .map(|w| {
                let g = Arc::clone(&guard);
                std::thread::spawn(move || {
                    for i in (w..600).step_by(3) {
                        let value = format!("w{w}-{i}").into_bytes();
                        g.write(&[(key(i), Change::Put(value.clone()))]).unwrap();
                        // Once write returns, every reader sees the change.
                        assert_eq!(g.read(&key(i)).unwrap().map(Vec::from), Some(value));
                    }
                })
            })
            .collect();
        let reader = {
            let g = Arc::clone(&guard);
            std::thread::spawn(move || {
                for round in 0..5 {
                    for i in 600..2_000u32 {
                        assert_eq!(
                            g.read(&key(i)).unwrap().as_deref(),
                            Some(&b"base"[..]),
                            "round {round}"
                        );
                    }
                }
            })
        };
        for w in writers {
            w.join().unwrap();
        }
        reader.join().unwrap();
        for i in 0..600u32 {
            let want = format!("w{}-{i}", i % 3).into_bytes();
            assert_eq!(guard.read(&key(i)).unwrap().map(Vec::from), Some(want));
        }
    })
}
