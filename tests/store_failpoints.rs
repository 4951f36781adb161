//! I/O failures injected with sled's failpoints (enabled for dev builds in
//! `Cargo.toml`) into the guard's storage, the part of the store still in
//! sled: at each of sled's log-write paths, a write fails; the guard must
//! return a typed error (never panic), and after a reopen every change made
//! durable before the failure must be read back. (The store's own files get
//! the same treatment from `store::table::fold_tests`, which fails each of
//! their writes and syncs in turn.)
//!
//! Failpoints are process-wide, so this file holds a single test that runs the
//! scenarios one after the other.
#![cfg(feature = "store")]

mod common;

use filterstore::{Change, FilterStore, Guard, SledDiffStorage, StoreConfig, TableSpec};
use std::path::Path;

fn open(dir: &Path) -> FilterStore {
    common::open_with_retry(dir, StoreConfig::default())
        .unwrap_or_else(|e| panic!("store does not open after an I/O failure: {e}"))
}

fn guard(store: &FilterStore) -> Guard<SledDiffStorage> {
    let table = store
        .open_or_create_table("changed", TableSpec::new(10_000, 0.01))
        .unwrap();
    Guard::open(SledDiffStorage::open(store, "g").unwrap(), table).unwrap()
}

fn changes(b: u32) -> Vec<(Vec<u8>, Change)> {
    (0..40)
        .map(|i| {
            (
                format!("b{b}-{i}").into_bytes(),
                Change::Put(format!("v{b}").into_bytes()),
            )
        })
        .collect()
}

/// Durable guarded writes, then `failpoint` armed, then more until one
/// fails. Returns whether the failpoint produced an error.
fn scenario(failpoint: &'static str) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let mut durable = 0u32;
    let mut failed = false;
    {
        let store = open(dir.path());
        let g = guard(&store);
        for b in 0..5 {
            g.write(&changes(b)).unwrap();
            durable = b + 1;
        }
        sled::fail::set(failpoint, u64::MAX);
        for b in 5..40 {
            match g.write(&changes(b)) {
                Ok(()) => durable = b + 1,
                Err(e) => {
                    assert!(!e.to_string().is_empty(), "{failpoint}");
                    failed = true;
                    break;
                }
            }
        }
        // Once sled has failed the storage refuses further writes, typed.
        if failed {
            assert!(g.write(&changes(99)).is_err());
        }
    }
    sled::fail::reset();
    let store = open(dir.path());
    let g = guard(&store);
    for b in 0..durable {
        for (k, _) in changes(b) {
            assert_eq!(
                g.read(&k).unwrap(),
                Some(format!("v{b}").into_bytes()),
                "{failpoint}: durable change {k:?} lost"
            );
        }
    }
    // The reopened storage works.
    g.write(&changes(100)).unwrap();
    failed
}

#[test]
fn injected_io_failures_are_typed_and_lose_nothing_durable() {
    common::with_timeout(common::TEST_LIMIT, || {
        // The two failpoints on sled's log writes: before and after the bytes
        // reach the file.
        for fp in ["buffer write", "buffer write post"] {
            assert!(scenario(fp), "failpoint {fp:?} produced no error");
        }
    })
}
