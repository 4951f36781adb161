//! I/O failures injected with sled's failpoints (enabled for dev builds in
//! `Cargo.toml`): at each of sled's write paths, a write fails; the store must
//! return a typed error (never panic), and after a reopen every key made
//! durable before the failure must be present.
//!
//! Failpoints are process-wide, so this file holds a single test that runs the
//! scenarios one after the other.
#![cfg(feature = "store")]

mod common;

use filterstore::{Durability, FilterStore, StoreConfig, StoreError, TableSpec, WriteBatch};
use std::path::Path;

fn open(dir: &Path) -> FilterStore {
    common::open_with_retry(dir, StoreConfig::default().fold_threshold(2000))
        .unwrap_or_else(|e| panic!("store does not open after an I/O failure: {e}"))
}

fn batch(b: u32) -> WriteBatch {
    let mut w = WriteBatch::new();
    for i in 0..500 {
        w.insert(format!("b{b}-{i}").as_bytes());
    }
    w
}

/// Runs one scenario: durable batches, then `failpoint` armed for its next
/// `hits` passes, then more batches until an error. Returns whether the
/// failpoint produced an error.
fn scenario(failpoint: &'static str) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let mut durable = 0u32;
    let mut failed = false;
    {
        let store = open(dir.path());
        let t = store
            .create_table("t", TableSpec::new(200_000, 0.01).seed(1))
            .unwrap();
        for b in 0..10 {
            t.apply(&batch(b), Durability::Durable).unwrap();
            durable = b + 1;
        }
        sled::fail::set(failpoint, u64::MAX);
        for b in 10..60 {
            // Durable batches, a fold now and then, and removes (reads).
            let r = t
                .apply(&batch(b), Durability::Durable)
                .and_then(|()| if b % 7 == 0 { t.fold() } else { Ok(()) })
                .and_then(|()| t.remove(format!("b{}-0", b - 10).as_bytes()));
            match r {
                Ok(()) => {}
                Err(e) => {
                    // A typed error with a message that says what to do.
                    assert!(
                        matches!(e, StoreError::Storage { .. } | StoreError::Io { .. }),
                        "{failpoint}: {e:?}"
                    );
                    assert!(!e.to_string().is_empty());
                    failed = true;
                    break;
                }
            }
            // The remove of b−10's key 0 is not durable until the next
            // batch's flush; count only the inserts of fully durable batches
            // and leave key 0 out of the check below.
            durable = b + 1;
        }
        // Once sled has failed it refuses further writes, with a typed error.
        if failed {
            assert!(t.apply(&batch(99), Durability::Durable).is_err());
        }
    }
    sled::fail::reset();
    let store = open(dir.path());
    let t = store.open_table("t").unwrap();
    for b in 0..durable {
        for i in 1..500 {
            assert!(
                t.contains(format!("b{b}-{i}").as_bytes()),
                "{failpoint}: durable key b{b}-{i} lost"
            );
        }
    }
    // The reopened store works.
    t.apply(&batch(100), Durability::Durable).unwrap();
    failed
}

#[test]
fn injected_io_failures_are_typed_and_lose_nothing_durable() {
    common::with_timeout(common::TEST_LIMIT, || {
        // The two failpoints on sled's log writes: before and after the bytes
        // reach the file. sled's other failpoints sit on segment GC, snapshots
        // (every million operations) and config writes, which a workload of a
        // few hundred writes does not reach; the disk-full test
        // (`store_disk_full.rs`) covers failures wherever they fall.
        for fp in ["buffer write", "buffer write post"] {
            assert!(scenario(fp), "failpoint {fp:?} produced no error");
        }
    })
}
