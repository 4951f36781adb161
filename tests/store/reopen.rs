//! Reopening a store after a failed sync, in the same boot: what the open
//! reads, it makes durable before it takes a write.
//!
//! After a failed `fdatasync` Linux marks the pages it could not write clean
//! and keeps them readable: a store reopened then reads log records,
//! superblocks and directory entries the disk never got. The power-cut
//! test's EIO model shows what that costs (`tests/crash/power_cut.rs`,
//! `eio_reopen`, and its scenarios `reopen_after_each_failed_sync_*`). Here,
//! through the store's fault seam (feature `test-internals`, a per-thread
//! plan, no FUSE needed): a writing open syncs the store's directories, and
//! a writing table open writes back and syncs its superblock and its log; a
//! failure of any of those refuses the open with a typed, one-line error
//! and changes nothing (the next open succeeds and finds every key); a
//! read-only open writes and syncs nothing.

use crate::common;

use filterstore::__internals::fault::{self, Op, EIO, ENOSPC};
use filterstore::{Durability, FilterStore, StoreError, Table, TableSpec, WriteBatch};
use std::path::Path;

fn batch(prefix: &str, n: u32) -> WriteBatch {
    let mut b = WriteBatch::new();
    for i in 0..n {
        b.insert(format!("{prefix}-{i}").as_bytes());
    }
    b
}

fn holds(t: &Table, prefix: &str, n: u32) -> bool {
    (0..n).all(|i| t.contains(format!("{prefix}-{i}").as_bytes()))
}

/// A store with table `t`: a durable batch `a`, a batch `b` written to the
/// log without a sync, and a fold between (so the page file has a
/// superblock of its own), then closed.
fn prepared(dir: &Path) {
    let store = FilterStore::open(dir).unwrap();
    let t = store
        .create_table("t", TableSpec::new(10_000, 0.01).seed(3))
        .unwrap();
    t.apply(&batch("f", 50), Durability::Durable).unwrap();
    t.fold().unwrap();
    t.apply(&batch("a", 50), Durability::Durable).unwrap();
    t.apply(&batch("b", 50), Durability::ProcessCrashSafe)
        .unwrap();
}

/// An error of an open: an I/O error, on one line.
fn assert_refused<T: std::fmt::Debug>(r: Result<T, StoreError>, what: &str) {
    match r {
        Err(e @ StoreError::Io { .. }) => {
            let line = e.to_string();
            assert!(!line.contains('\n'), "{what}: {line:?} is not one line");
        }
        other => panic!("{what}: the open did not refuse: {other:?}"),
    }
}

/// The names the open reads (the catalog's, the table files') are made
/// durable before the open collects garbage or takes a write: a failed
/// directory sync refuses the open, and the open deleted nothing.
#[test]
fn a_writing_open_syncs_the_store_directories() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        prepared(dir.path());
        // A table file no catalog record names: garbage for the open.
        let garbage = dir
            .path()
            .join("tables")
            .join("00000000000000ff-0000000000000000.log");
        std::fs::write(&garbage, b"left by a crash").unwrap();
        for synced in [dir.path().to_path_buf(), dir.path().join("tables")] {
            fault::fail_on(Op::SyncDir, &synced, EIO);
            let r = FilterStore::open(dir.path());
            assert!(
                fault::clear(),
                "{synced:?} was not synced by the open: a catalog whose rename \
                 was not durable would be trusted"
            );
            assert_refused(r, &format!("a failed sync of {synced:?}"));
            assert!(garbage.exists(), "the open deleted before its sync");
        }
        let store = common::reopen(dir.path(), "after failed directory syncs");
        assert!(!garbage.exists(), "the open collects garbage");
        let t = store.open_table("t").unwrap();
        assert!(holds(&t, "f", 50) && holds(&t, "a", 50) && holds(&t, "b", 50));
    })
}

/// A writing table open writes back and syncs the superblock in force and
/// the log records not known durable; each of those writes and syncs
/// failed in turn refuses the open with a typed error, and the table opens
/// afterwards with every key and takes durable writes.
#[test]
fn a_writing_table_open_writes_back_and_syncs_what_it_read() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        prepared(dir.path());
        let store = common::reopen(dir.path(), "prepared");
        for (op, errno) in [(Op::Write, ENOSPC), (Op::Sync, EIO)] {
            // The superblock's, then the log's.
            for skip in 0..2 {
                fault::fail_after(op, skip, errno);
                let r = store.open_table("t");
                assert!(
                    fault::clear(),
                    "{op:?} {skip}: the table open made fewer than {} of them",
                    skip + 1
                );
                assert_refused(r, &format!("{op:?} {skip} failed"));
            }
        }
        let t = store.open_table("t").unwrap();
        assert!(holds(&t, "f", 50) && holds(&t, "a", 50) && holds(&t, "b", 50));
        t.apply(&batch("c", 50), Durability::Durable).unwrap();
        drop((t, store));
        let store = common::reopen(dir.path(), "after failed table opens");
        let t = store.open_table("t").unwrap();
        assert!(holds(&t, "a", 50) && holds(&t, "c", 50));
    })
}

/// A read-only open (`open_snapshot`) writes nothing and syncs nothing: not
/// the directories, not the superblock, not the log.
#[test]
fn a_read_only_open_writes_and_syncs_nothing() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        prepared(dir.path());
        for op in [Op::Write, Op::Sync, Op::SyncDir, Op::Rename] {
            fault::fail_after(op, 0, EIO);
            let store = FilterStore::open_snapshot(dir.path()).unwrap();
            let t = store.open_table("t").unwrap();
            assert!(holds(&t, "a", 50) && holds(&t, "b", 50));
            drop((t, store));
            assert!(!fault::clear(), "a read-only open made a {op:?}");
        }
    })
}

/// The guard's directory (made on first use) is durable in the store's
/// directory before the guard's storage takes a write, also when the first
/// attempt failed at that sync and the host tried again (the directory
/// existed then, made by the attempt that failed).
#[test]
fn the_guard_directory_is_synced_when_a_failed_first_use_is_retried() {
    use filterstore::SledDiffStorage;
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let store = FilterStore::open(dir.path()).unwrap();
        for attempt in 0..2 {
            fault::fail_on(Op::SyncDir, dir.path(), EIO);
            let r = SledDiffStorage::open(&store, "g");
            assert!(
                fault::clear(),
                "attempt {attempt}: the guard's directory was not synced"
            );
            assert!(r.is_err(), "attempt {attempt}: {:?}", r.map(|_| ()));
        }
        let storage = SledDiffStorage::open(&store, "g").unwrap();
        storage.load_base([(b"k".to_vec(), b"v".to_vec())]).unwrap();
    })
}
