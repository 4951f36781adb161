//! The log's size limit when merges fail: a writer that finds the log at
//! [`WAIT_AT`] bytes after a failed merge gets the merge's error and writes
//! nothing; every change written before stays readable; a merge that
//! succeeds later takes the writes again.

use super::*;
use std::collections::HashSet;

/// Storage names whose merges fail (this module's tests only).
static FAILING: Mutex<Option<HashSet<String>>> = parking_lot::const_mutex(None);

/// The seam in [`Shared::merge_frozen`]: an injected failure for the
/// storages named in [`FAILING`].
pub(super) fn injected_merge_failure(name: &str) -> Result<(), SledDiffError> {
    if FAILING.lock().as_ref().is_some_and(|f| f.contains(name)) {
        return Err(SledDiffError::Store(StoreError::Io {
            op: "merging the differential file into the base",
            source: std::io::Error::other("a test's injected failure"),
        }));
    }
    Ok(())
}

fn set_failing(name: &str, failing: bool) {
    let mut f = FAILING.lock();
    let set = f.get_or_insert_with(HashSet::new);
    if failing {
        set.insert(name.to_string());
    } else {
        set.remove(name);
    }
}

/// Batch `b`: 1,000 changes of new keys, 64-byte values.
fn batch(b: u64) -> Vec<(Vec<u8>, Change)> {
    (0..1000u64)
        .map(|i| {
            let key = format!("k{:08}", b * 1000 + i).into_bytes();
            (key, Change::Put(vec![(b % 251) as u8; 64]))
        })
        .collect()
}

#[test]
fn a_full_log_whose_merge_failed_refuses_writes_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = FilterStore::open(dir.path()).unwrap();
    let name = "fails-to-merge";
    set_failing(name, true);
    let storage = SledDiffStorage::open(&store, name).unwrap();
    // The limits made small (64 KiB, 1 MiB): the same code at a size
    // whose final merge takes a second, not a minute.
    let (merge_at, wait_at) = (64 << 10, 1 << 20);
    *storage.shared().limits.lock() = (merge_at, wait_at);
    let mut b = 0u64;
    let refused = loop {
        // A change takes about 90 bytes of the log: the limit is reached
        // long before this bound.
        assert!(b < 100, "no write was refused at the log's size limit");
        let before = storage.diff_log_bytes();
        match storage.write_diff(&batch(b)) {
            Ok(()) => b += 1,
            Err(e) => break (e, before),
        }
    };
    let (e, before) = refused;
    assert!(
        before >= wait_at,
        "refused at {before} bytes, under the limit"
    );
    assert!(!e.is_outcome_unknown(), "{e}");
    assert!(e.to_string().contains("size limit"), "{e}");
    assert!(e.to_string().contains("injected"), "the merge's error: {e}");
    assert!(storage.merge_error().is_some());
    // Nothing of the refused write, everything before it.
    assert_eq!(storage.diff_log_bytes(), before);
    assert_eq!(storage.read_diff(&batch(b)[0].0).unwrap(), None);
    for done in [0, b / 2, b - 1] {
        let (key, change) = &batch(done)[999];
        assert_eq!(storage.read_diff(key).unwrap().as_ref(), Some(change));
    }
    assert_eq!(storage.diff_len().unwrap(), (b * 1000) as usize);
    // The merge succeeds once the failure is gone; writes go on.
    set_failing(name, false);
    assert_eq!(storage.merge().unwrap(), b * 1000);
    assert!(storage.merge_error().is_none());
    storage.write_diff(&batch(b)).unwrap();
    let (key, change) = &batch(b - 1)[0];
    match change {
        Change::Put(v) => {
            assert_eq!(storage.read_base(key).unwrap().as_deref(), Some(&v[..]))
        }
        Change::Delete => unreachable!(),
    }
}

/// `clear` stopped by a failed write, sync or directory sync at each of
/// its first steps: an error, then a second `clear` empties everything,
/// in memory and after a reopen, and the storage takes writes.
#[test]
fn a_clear_stopped_by_an_io_error_is_finished_by_the_next() {
    use crate::store::disk::io::fault;
    for op in [fault::Op::Write, fault::Op::Sync, fault::Op::SyncDir] {
        for skip in 0..4 {
            let dir = tempfile::tempdir().unwrap();
            let name = "cleared";
            {
                let store = FilterStore::open(dir.path()).unwrap();
                let storage = SledDiffStorage::open(&store, name).unwrap();
                storage
                    .load_base((0..20u8).map(|i| (vec![i], vec![i; 3])))
                    .unwrap();
                storage.write_diff(&batch(0)).unwrap();
                storage.merge().unwrap();
                storage.write_diff(&batch(1)).unwrap();
                fault::fail_after(op, skip, fault::EIO);
                let first = storage.clear();
                let fired = fault::clear();
                assert_eq!(first.is_err(), fired, "{op:?} {skip}: {first:?}");
                storage.clear().unwrap();
                assert_eq!(storage.diff_len().unwrap(), 0);
                assert_eq!(storage.base_len().unwrap(), 0);
                storage.write_diff(&batch(2)).unwrap();
                storage.clear().unwrap();
            }
            let store = FilterStore::open(dir.path()).unwrap();
            let storage = SledDiffStorage::open(&store, name).unwrap();
            assert_eq!(storage.diff_len().unwrap(), 0, "{op:?} {skip}");
            assert_eq!(storage.base_len().unwrap(), 0, "{op:?} {skip}");
        }
    }
}
