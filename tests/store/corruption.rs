//! Corruption of the records inside the v1 store fixture, met by the
//! migration to format 3. sled checksums its own files, so flipping bytes of
//! the files would only test sled; these tests rewrite one record's *value*
//! through sled's API — the store header, a table's catalog record, its
//! state record, a counter page, a log record — with one byte inverted or
//! the value truncated, and require that opening the store or the table
//! returns `StoreError::Corrupt` naming the record and its table and saying
//! what to do: never a panic, never a table that opens and answers from
//! damaged data. The other table stays readable. (Format 3's own files are
//! corrupted byte by byte in `tests/store/corruption_files.rs`.)
//!
//! Every byte of the small records is flipped; the counter page (2 KiB) and
//! the log record (≈ 900 bytes) get every byte of their frame header and
//! trailer plus one payload byte in 41 (all of them with
//! `FILTERSTORE_CORRUPTION_FULL=1`): one flip costs a copy and two sled opens.

use crate::common;

use crate::store_fixture_common;

use filterstore::{FilterStore, StoreError};
use store_fixture_common::*;

/// The data tree of table "blocked" (id 1, generation 1) and of "standard".
const BLOCKED_TREE: &str = "filterstore/table/0000000000000001/gen/0000000000000001";
const CATALOG_TREE: &str = "filterstore/catalog";

#[derive(Clone, Copy, Debug)]
enum Record {
    Header,
    Meta,
    State,
    Page,
    Log,
}

impl Record {
    fn location(self) -> (&'static str, Vec<u8>) {
        match self {
            Record::Header => (CATALOG_TREE, b"\x00header".to_vec()),
            Record::Meta => (CATALOG_TREE, b"\x01blocked".to_vec()),
            Record::State => (BLOCKED_TREE, vec![0]),
            Record::Page => (BLOCKED_TREE, [&[1u8][..], &0u64.to_be_bytes()].concat()),
            Record::Log => (BLOCKED_TREE, vec![]), // the first key with prefix 2
        }
    }

    /// Words the error must contain.
    fn names(self) -> &'static [&'static str] {
        match self {
            Record::Header => &["store header"],
            Record::Meta => &["catalog record", "blocked"],
            Record::State => &["state record", "blocked"],
            Record::Page => &["counter page", "blocked"],
            Record::Log => &["log record", "blocked"],
        }
    }
}

fn sled_open(dir: &std::path::Path) -> sled::Db {
    // The store's sled instance may release its lock a few ms after drop.
    for _ in 0..200 {
        match sled::open(dir) {
            Ok(db) => return db,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
        }
    }
    panic!("sled lock not released");
}

/// The key and value of `record` in the fixture.
fn original(record: Record) -> (Vec<u8>, Vec<u8>) {
    let copy = copy_fixture();
    let db = sled_open(copy.path());
    let (tree, key) = record.location();
    let tree = db.open_tree(tree).unwrap();
    if let Record::Log = record {
        let (k, v) = tree.scan_prefix([2u8]).next().unwrap().unwrap();
        return (k.to_vec(), v.to_vec());
    }
    let v = tree.get(&key).unwrap().unwrap();
    (key, v.to_vec())
}

/// Writes `value` at `record` in a fresh copy, opens the store and the
/// table "blocked": the outcome must be a `Corrupt` error that names it.
fn check_refused(record: Record, key: &[u8], value: &[u8], what: &str) {
    let copy = copy_fixture();
    {
        let db = sled_open(copy.path());
        let tree = db.open_tree(record.location().0).unwrap();
        tree.insert(key, value).unwrap();
        db.flush().unwrap();
    }
    let result = FilterStore::open(copy.path()).and_then(|s| {
        // A damaged table must not open; the other one must.
        let blocked = s.open_table("blocked");
        if !matches!(record, Record::Header | Record::Meta) {
            let standard = s.open_table("standard").unwrap();
            for k in live_keys() {
                assert!(standard.contains(k.as_bytes()));
            }
        }
        if let (Record::Meta, Err(StoreError::Corrupt { .. })) = (record, &blocked) {
            // The other table works, the damaged one can be dropped and
            // re-created, and the next open keeps the files of exactly the
            // two tables (the migration wrote none for the damaged one).
            let standard = s.open_table("standard").unwrap();
            assert!(standard.contains(live_keys()[0].as_bytes()));
            s.drop_table("blocked").unwrap();
            s.create_table("blocked", filterstore::TableSpec::new(10, 0.01))
                .unwrap();
            if !REOPENED.swap(true, std::sync::atomic::Ordering::Relaxed) {
                drop(standard);
                drop(s);
                let s = FilterStore::open(copy.path()).unwrap();
                assert_eq!(s.list_tables().unwrap().len(), 2);
                drop(s);
                let files = std::fs::read_dir(copy.path().join("tables"))
                    .unwrap()
                    .count();
                assert_eq!(files, 4, "table files of two tables expected");
            }
        }
        blocked.map(|_| ())
    });
    match result {
        Err(e @ StoreError::Corrupt { .. }) => {
            let msg = e.to_string();
            for word in record.names() {
                assert!(msg.contains(word), "{what}: {msg}");
            }
            assert!(msg.contains("rebuild the table"), "{what}: {msg}");
        }
        Err(e @ StoreError::UnsupportedFormat { .. }) if matches!(record, Record::Header) => {
            // A flip of the header's version field to a larger number.
            assert!(e.to_string().contains("upgrade"), "{e}");
        }
        other => panic!("{what}: {record:?} accepted or wrong error: {other:?}"),
    }
}

/// The reopen after a drop of a corrupt table is checked once (it costs a
/// sled open and a lock wait).
static REOPENED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn positions(len: usize, full: bool) -> Vec<usize> {
    // Frame header (24 bytes) and CRC trailer (4) always; the body sampled.
    (0..len)
        .filter(|&i| full || len < 200 || i < 24 || i + 4 >= len || i % 41 == 0)
        .collect()
}

fn flips_and_truncations(record: Record) {
    let full = std::env::var_os("FILTERSTORE_CORRUPTION_FULL").is_some();
    let (key, value) = original(record);
    for i in positions(value.len(), full) {
        let mut v = value.clone();
        v[i] ^= 0xFF;
        check_refused(record, &key, &v, &format!("byte {i} inverted"));
    }
    for len in positions(value.len(), full) {
        check_refused(record, &key, &value[..len], &format!("truncated to {len}"));
    }
}

#[test]
fn store_header_corruption_is_refused() {
    common::with_timeout(common::TEST_LIMIT, || {
        flips_and_truncations(Record::Header);
    })
}

#[test]
fn catalog_record_corruption_is_refused() {
    common::with_timeout(common::TEST_LIMIT, || {
        flips_and_truncations(Record::Meta);
    })
}

#[test]
fn state_record_corruption_is_refused() {
    common::with_timeout(common::TEST_LIMIT, || {
        flips_and_truncations(Record::State);
    })
}

#[test]
fn counter_page_corruption_is_refused() {
    common::with_timeout(common::TEST_LIMIT, || {
        flips_and_truncations(Record::Page);
    })
}

#[test]
fn log_record_corruption_is_refused() {
    common::with_timeout(common::TEST_LIMIT, || {
        flips_and_truncations(Record::Log);
    })
}
