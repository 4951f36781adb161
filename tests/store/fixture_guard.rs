//! The guard storage's fixtures: `migrations/fixtures/store-v6-guard/` (the
//! code of store format 6 wrote 120 changes into the sled tree that was then
//! the differential file) and `migrations/fixtures/store-v7/` (store format
//! 7: the same changes in a differential-file log, unmerged). Both were
//! written by one program (`migrations/README.md`): a base of `acct-0000` …
//! `acct-0999` = `base <i>`, a table `accounts-changed`, then one guarded
//! write of every tenth key of `0..1200`: a delete for every thirtieth, else
//! `new <i>`. Those bytes are on users' disks: every later build reads the
//! same values through a guard, after migrating, and keeps writing.

use super::fixture::{copy_tree, write_tree_fixture_if_asked};
use crate::common;
use crate::store_fixture_common::dir_size;
use filterstore::{Change, DiffStorage, FilterStore, Guard, SledDiffStorage, TableSpec};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations/fixtures")
        .join(name)
}

fn key(i: u32) -> Vec<u8> {
    format!("acct-{i:04}").into_bytes()
}

/// The value key `i` reads as after the fixture's write.
fn want(i: u32) -> Option<Vec<u8>> {
    if i.is_multiple_of(10) && i < 1_200 {
        (!i.is_multiple_of(30)).then(|| format!("new {i}").into_bytes())
    } else {
        (i < 1_000).then(|| format!("base {i}").into_bytes())
    }
}

/// The fixture's writes, by this build (the store-v7 fixture; the
/// store-v6-guard one was written by the same steps with the code of
/// format 6).
fn write(to: &Path) {
    let store = FilterStore::open(to).unwrap();
    let storage = SledDiffStorage::open(&store, "accounts").unwrap();
    storage
        .load_base((0..1_000u32).map(|i| (key(i), format!("base {i}").into_bytes())))
        .unwrap();
    let table = store
        .create_table("accounts-changed", TableSpec::new(1_000, 0.01).seed(7))
        .unwrap();
    let guard = Guard::open(storage, table).unwrap();
    let changes: Vec<(Vec<u8>, Change)> = (0..1_200u32)
        .step_by(10)
        .map(|i| match want(i) {
            Some(v) => (key(i), Change::Put(v)),
            None => (key(i), Change::Delete),
        })
        .collect();
    guard.write(&changes).unwrap();
    assert_eq!(guard.storage().diff_len().unwrap(), 120);
}

/// Writes the store-v7 fixture if it is missing and
/// `FILTERSTORE_WRITE_FIXTURES` is set: the files a store holds, not its
/// lock.
fn write_if_asked() {
    write_tree_fixture_if_asked(&fixture("store-v7"), write);
}

/// Opens a copy of fixture `name` for writing and checks every key through
/// a guard; then writes, merges and reopens.
fn check_fixture(name: &str) {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&fixture(name), tmp.path());
    // Read-only: the tables read, nothing written.
    let snapshot = FilterStore::open_snapshot(tmp.path()).unwrap();
    assert_eq!(snapshot.list_tables().unwrap(), ["accounts-changed"]);
    drop(snapshot);
    assert_eq!(
        dir_size(tmp.path()),
        dir_size(&fixture(name)),
        "{name}: read-only wrote"
    );
    let store = FilterStore::open(tmp.path()).unwrap();
    let table = store.open_table("accounts-changed").unwrap();
    assert_eq!(table.stats().unwrap().format_version, 8, "{name}");
    let guard = Guard::open(SledDiffStorage::open(&store, "accounts").unwrap(), table).unwrap();
    for i in 0..1_300u32 {
        assert_eq!(
            guard.read(&key(i)).unwrap().map(Vec::from),
            want(i),
            "{name}: key {i}"
        );
    }
    guard
        .write(&[(key(1), Change::Put(b"later".to_vec()))])
        .unwrap();
    guard.merge().unwrap();
    assert_eq!(guard.storage().diff_len().unwrap(), 0, "{name}");
    drop(guard);
    drop(store);
    let store = common::reopen(tmp.path(), name);
    let storage = SledDiffStorage::open(&store, "accounts").unwrap();
    for i in 0..1_300u32 {
        let want = if i == 1 {
            Some(b"later".to_vec())
        } else {
            want(i)
        };
        assert_eq!(
            storage.read_base(&key(i)).unwrap().map(Vec::from),
            want,
            "{name}: base {i}"
        );
    }
    assert!(dir_size(&fixture(name)) <= 1 << 20);
}

#[test]
fn v6_guard_fixture_with_changes_in_sled_migrates_and_reads_exact() {
    common::with_timeout(common::TEST_LIMIT, || check_fixture("store-v6-guard"))
}

#[test]
fn v7_fixture_with_changes_in_the_guard_log_reads_exact() {
    common::with_timeout(common::TEST_LIMIT, || {
        write_if_asked();
        let logs = std::fs::read_dir(fixture("store-v7").join("guard-logs"))
            .unwrap()
            .count();
        assert_eq!(logs, 1, "the fixture's changes are in one log");
        check_fixture("store-v7");
    })
}
