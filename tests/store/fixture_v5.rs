//! The store-format-5 fixture (`migrations/fixtures/store-v5/`): the
//! operations of the v3 and v4 fixtures (three tables, `standard`
//! regenerated), written by the code of store format 5 with a fold
//! threshold of 400: each table's last fold ran in the background, its
//! superblock names a log that starts past byte 0 (`log_start`,
//! `docs/FORMAT.md` § 11) with the last 200 inserts (the bytes before it
//! are kept: only a second fold in the background punches them out). Those bytes are on users' disks: they are
//! read, as they are and for writing, by every later build.

use super::fixture::{copy_tree, fixture_check, v3, v4};
use crate::common;
use crate::store_fixture_common::dir_size;
use filterstore::FilterStore;

fn dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/fixtures/store-v5")
}

/// Writes the fixture into [`dir`] if it is missing and
/// `FILTERSTORE_WRITE_FIXTURES` is set.
fn write_if_asked() {
    v4::write_fixture_if_asked(&dir(), |to| v4::write_with(to, true));
}

/// The `log_start` of the superblock in force of table `id`'s generation
/// 1 (`docs/FORMAT.md` § 11: two 4 KiB copies for these small tables, the
/// one in force the valid one with the higher fold number; frame header 24
/// bytes, fold at body byte 40, `log_start` at 64 in version 3).
fn log_start(dir: &std::path::Path, id: u64) -> u64 {
    let path = dir
        .join("tables")
        .join(format!("{id:016x}-{:016x}.pages", 1));
    let bytes = std::fs::read(path).unwrap();
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let (fold0, fold1) = (word(24 + 40), word(4096 + 24 + 40));
    let copy = if fold1 > fold0 { 4096 } else { 0 };
    assert_eq!(&bytes[copy + 4..copy + 8], &[3, 0, 3, 0], "frame version 3");
    word(copy + 24 + 64)
}

#[test]
fn v5_store_fixture_with_logs_that_start_past_byte_0_reads_exact() {
    common::with_timeout(common::TEST_LIMIT, || {
        write_if_asked();
        let tmp = tempfile::tempdir().unwrap();
        copy_tree(&dir(), tmp.path());
        // `blocked` (table 1): its last fold ran in the background; its log
        // starts past byte 0.
        assert!(log_start(tmp.path(), 1) > 0);
        let snapshot = FilterStore::open_snapshot(tmp.path()).unwrap();
        fixture_check(&snapshot, 200, 5);
        drop(snapshot);
        assert_eq!(dir_size(tmp.path()), dir_size(&dir()), "read-only wrote");
        // Opened for writing: migrated to format 6 (the catalog's log).
        let store = FilterStore::open(tmp.path()).unwrap();
        fixture_check(&store, 200, 8);
        let t = store.open_table("blocked").unwrap();
        t.insert(b"after").unwrap();
        t.flush().unwrap();
        drop((t, store));
        let store = FilterStore::open(tmp.path()).unwrap();
        let t = store.open_table("blocked").unwrap();
        assert!(t.contains(b"after") && t.contains(v3::key(1199).as_bytes()));
        assert!(dir_size(&dir()) <= 1 << 20);
    })
}
