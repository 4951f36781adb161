//! The migrations to store formats 3 and 7 carry a guard's storage over: the
//! store-format-2 fixture with guard trees added the way format 2 kept them
//! (in the store's one sled database, trees `filterstore/guard/<name>/base`
//! and `/diff`, a change being a tag byte and the value), opened by this
//! build: every record is read back through `SledDiffStorage` from the
//! guard's own database (`guard/`), with format 2's differential file moved
//! into the base by the storage's first open (format 7 keeps it as a log),
//! the old database is gone, and its files
//! left at the top by a crash after the switch are removed by the next
//! writing open (a read-only open leaves them). A record over the guard's
//! limits stops the migration and leaves the store as it was.

use crate::common;

use filterstore::{Change, DiffStorage, FilterStore, SledDiffStorage, StoreError};
use std::path::Path;
use std::time::{Duration, Instant};

fn v2_copy() -> tempfile::TempDir {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/fixtures/store-v2");
    let tmp = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(&from).expect("the store-v2 fixture is missing") {
        let e = e.unwrap();
        std::fs::copy(e.path(), tmp.path().join(e.file_name())).unwrap();
    }
    tmp
}

fn key(i: u32) -> Vec<u8> {
    format!("acct-{i:05}").into_bytes()
}

/// Opens the fixture's sled database as format 2 did (sled's defaults),
/// retrying while a dropped handle still holds its lock.
fn raw_sled(dir: &Path) -> sled::Db {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match sled::Config::new().path(dir).open() {
            Ok(db) => return db,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("sled does not open: {e}"),
        }
    }
}

/// Adds guard storage "accounts" (2,000 base records, 300 changes: every
/// tenth key put, every thirtieth deleted) and, if `oversized`, one base
/// record with a 300-byte key.
fn add_guard_trees(dir: &Path, oversized: bool) {
    let db = raw_sled(dir);
    let base = db.open_tree("filterstore/guard/accounts/base").unwrap();
    let diff = db.open_tree("filterstore/guard/accounts/diff").unwrap();
    for i in 0..2_000u32 {
        base.insert(key(i), format!("balance {i}").into_bytes())
            .unwrap();
    }
    for i in (0..3_000u32).step_by(10) {
        let v = if i % 30 == 0 {
            vec![0u8]
        } else {
            let mut v = vec![1u8];
            v.extend_from_slice(format!("new {i}").as_bytes());
            v
        };
        diff.insert(key(i), v).unwrap();
    }
    if oversized {
        base.insert(vec![b'x'; 300], &b"too long a key"[..])
            .unwrap();
    }
    db.flush().unwrap();
}

/// Every record reads as the guard trees said: a changed key as its change
/// (the first open of the storage in format 7 moved format 2's
/// differential file into the base), any other key as its base record.
fn expect_guard_records(storage: &SledDiffStorage) {
    // The base after the move: keys 0..2,000, less the deleted ones among
    // them, plus the puts of keys from 2,000 on.
    let deleted = (0..2_000u32).filter(|i| i % 30 == 0).count();
    let added = (2_000..3_000u32)
        .filter(|i| i % 10 == 0 && i % 30 != 0)
        .count();
    assert_eq!(storage.base_len().unwrap(), 2_000 - deleted + added);
    assert_eq!(storage.diff_len().unwrap(), 0);
    for i in 0..3_000u32 {
        let want = if i % 30 == 0 {
            None
        } else if i % 10 == 0 {
            Some(format!("new {i}").into_bytes())
        } else if i < 2_000 {
            Some(format!("balance {i}").into_bytes())
        } else {
            None
        };
        assert_eq!(storage.read_diff(&key(i)).unwrap(), None, "diff {i}");
        assert_eq!(
            storage.read_base(&key(i)).unwrap().map(Vec::from),
            want,
            "record {i}"
        );
    }
}

fn sled_files_at_top(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n == "db" || n == "conf" || n.starts_with("snap.") || n.starts_with("blobs"))
        .collect()
}

#[test]
fn guard_storage_of_format_2_is_migrated_and_the_old_database_removed() {
    common::with_timeout(common::TEST_LIMIT, || {
        let copy = v2_copy();
        add_guard_trees(copy.path(), false);
        let store = common::reopen(copy.path(), "migrating");
        assert_eq!(sled_files_at_top(copy.path()), Vec::<String>::new());
        assert!(copy.path().join("guard").join("db").is_file());
        let t = store.open_table("blocked").unwrap();
        assert!(t.contains(b"key-1199"));
        let storage = SledDiffStorage::open(&store, "accounts").unwrap();
        expect_guard_records(&storage);
        // The guard's database works on: a change and a merge.
        storage
            .write_diff(&[(key(7), Change::Put(b"seven".to_vec()))])
            .unwrap();
        assert_eq!(storage.merge().unwrap(), 1);
        assert_eq!(
            storage.read_base(&key(7)).unwrap().as_deref(),
            Some(&b"seven"[..])
        );
        assert_eq!(storage.read_base(&key(30)).unwrap(), None);
        drop((storage, t, store));

        // A crash after the switch, before the old database was removed:
        // its files at the top are garbage. A read-only open leaves them;
        // the next writing open removes them and nothing else.
        for name in ["db", "conf", "snap.0000000000001234"] {
            std::fs::write(copy.path().join(name), b"left by a crash").unwrap();
        }
        std::fs::create_dir(copy.path().join("blobs")).unwrap();
        let snapshot = FilterStore::open_snapshot(copy.path()).unwrap();
        assert!(snapshot
            .open_table("blocked")
            .unwrap()
            .contains(b"key-1199"));
        drop(snapshot);
        assert_eq!(sled_files_at_top(copy.path()).len(), 4);
        let store = common::reopen(copy.path(), "after the leftover");
        assert_eq!(sled_files_at_top(copy.path()), Vec::<String>::new());
        let storage = SledDiffStorage::open(&store, "accounts").unwrap();
        assert_eq!(
            storage.read_base(&key(7)).unwrap().as_deref(),
            Some(&b"seven"[..])
        );
        assert_eq!(storage.diff_len().unwrap(), 0);
        let deleted = (0..2_000u32).filter(|i| i % 30 == 0).count();
        let added = (2_000..3_000u32)
            .filter(|i| i % 10 == 0 && i % 30 != 0)
            .count();
        assert_eq!(storage.base_len().unwrap(), 2_000 - deleted + added);
    })
}

#[test]
fn a_guard_record_over_the_limits_stops_the_migration_and_changes_nothing() {
    common::with_timeout(common::TEST_LIMIT, || {
        let copy = v2_copy();
        add_guard_trees(copy.path(), true);
        for _ in 0..2 {
            match common::open_with_retry(copy.path(), Default::default()) {
                Err(e @ StoreError::MigrationRefused { .. }) => {
                    let text = e.to_string();
                    assert!(text.contains("300-byte key"), "{text}");
                    assert!(!text.contains('\n'), "one line: {text}");
                }
                Err(e) => panic!("unexpected error: {e}"),
                Ok(_) => panic!("an over-limit record was migrated"),
            }
            // Still a format-2 store: no catalog file, sled's catalog and
            // guard trees as they were.
            assert!(!copy.path().join("catalog").exists());
            let db = raw_sled(copy.path());
            assert!(db
                .tree_names()
                .iter()
                .any(|n| n.as_ref() == b"filterstore/catalog"));
            let base = db.open_tree("filterstore/guard/accounts/base").unwrap();
            assert_eq!(base.len(), 2_001);
            drop(db);
        }
    })
}
