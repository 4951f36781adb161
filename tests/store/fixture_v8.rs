//! The store-format-8 fixture (`migrations/fixtures/store-v8/`): each page
//! file's superblock in force says how far its log was durable
//! (`durable_seq`, frame version 5, `docs/FORMAT.md` § 11), claimed by the
//! clean close that ended the writes, so that a log cut short opens
//! *damaged* instead of silently losing its last synced batches. Two
//! tables: `closed` (three durable batches, a fold on the writer's thread,
//! two more) and `background` (five durable batches, the fourth starting a
//! fold in the background of the first three). Those bytes are on users'
//! disks: they are read, as they are and for writing, by every later build.
//! Also here: the store-v7 fixture migrated to format 8, whose first clean
//! close claims its log.

use super::fixture::{copy_tree, write_tree_fixture_if_asked};
use crate::common;
use crate::store_fixture_common::dir_size;
use filterstore::{Durability, FilterStore, StoreConfig, Table, TableSpec, WriteBatch};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations/fixtures")
        .join(name)
}

fn key(table: &str, i: u32) -> Vec<u8> {
    format!("{table}-{i:04}").into_bytes()
}

/// Durable batch `b` of table `name`: 100 inserts.
fn batch(t: &Table, name: &str, b: u32) {
    let mut w = WriteBatch::new();
    for i in b * 100..(b + 1) * 100 {
        w.insert(&key(name, i));
    }
    t.apply(&w, Durability::Durable).unwrap();
}

const TABLES: [&str; 2] = ["closed", "background"];

/// The fixture's writes, by the code of store format 8.
fn write(to: &Path) {
    let config = StoreConfig::default().fold_threshold(250);
    let store = FilterStore::open_with(to, config).unwrap();
    for (n, name) in TABLES.into_iter().enumerate() {
        let spec = TableSpec::new(2_000, 0.01).seed(8 + n as u64);
        let t = store.create_table(name, spec).unwrap();
        for b in 0..3 {
            batch(&t, name, b);
        }
        if name == "closed" {
            t.fold().unwrap();
        }
        for b in 3..5 {
            batch(&t, name, b);
        }
        // A write takes in the fold that finished in the background.
        for _ in 0..1_000 {
            if t.pending_log_ops() == 200 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            t.apply(&WriteBatch::new(), Durability::Durable).unwrap();
        }
        assert_eq!(t.pending_log_ops(), 200, "{name}");
    }
}

/// Writes the store-v8 fixture if it is missing and
/// `FILTERSTORE_WRITE_FIXTURES` is set: the files a store holds, not its
/// lock.
fn write_if_asked() {
    write_tree_fixture_if_asked(&fixture("store-v8"), write);
}

/// The superblock copy in force of the page file at `path` (two 4 KiB
/// copies for these small tables, the one in force the valid one with the
/// higher fold number; frame header 24 bytes): (frame version, fold,
/// `folded_seq`, `log_start`, `durable_seq`; 0 in a version below 5).
fn superblock(path: &Path) -> (u16, u64, u64, u64, u64) {
    let bytes = std::fs::read(path).unwrap();
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let (fold0, fold1) = (word(24 + 40), word(4096 + 24 + 40));
    let at = if fold1 > fold0 { 4096 } else { 0 };
    let version = u16::from_le_bytes([bytes[at + 4], bytes[at + 5]]);
    let durable = if version >= 5 { word(at + 24 + 72) } else { 0 };
    let body = at + 24;
    (
        version,
        word(body + 40),
        word(body + 48),
        word(body + 64),
        durable,
    )
}

/// The files of `dir`'s tables with extension `ext`, in table order.
fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("tables"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

/// Every key of both tables answers, both sound, 200 operations in each
/// log, 500 live keys.
fn check(store: &FilterStore, format: u32) {
    for name in TABLES {
        let t = store.open_table(name).unwrap();
        assert_eq!(t.pending_log_ops(), 200, "{name}");
        assert!((0..500).all(|i| t.contains(&key(name, i))), "{name}");
        assert!(!t.health().unwrap().needs_regeneration(), "{name}");
        assert_eq!(t.live_keys(), 500, "{name}");
        assert_eq!(t.stats().unwrap().format_version, format, "{name}");
    }
}

#[test]
fn v8_store_fixture_claims_its_logs_and_reads_exact() {
    common::with_timeout(common::TEST_LIMIT, || {
        write_if_asked();
        let tmp = tempfile::tempdir().unwrap();
        copy_tree(&fixture("store-v8"), tmp.path());
        // Each superblock in force is version 5 and claims the log's two
        // batches past its fold; `background`'s log starts past byte 0.
        let sbs: Vec<_> = files(tmp.path(), "pages")
            .iter()
            .map(|p| superblock(p))
            .collect();
        for (version, _, folded_seq, _, durable_seq) in &sbs {
            assert_eq!(*version, 5, "{sbs:?}");
            assert!(durable_seq >= &(folded_seq + 2), "{sbs:?}");
        }
        assert!(sbs[1].3 > 0, "{sbs:?}");
        let snapshot = FilterStore::open_snapshot(tmp.path()).unwrap();
        check(&snapshot, 8);
        drop(snapshot);
        let size = dir_size(&fixture("store-v8"));
        assert_eq!(dir_size(tmp.path()), size, "read-only wrote");
        let store = FilterStore::open(tmp.path()).unwrap();
        check(&store, 8);
        let t = store.open_table("closed").unwrap();
        t.insert(b"after").unwrap();
        t.flush().unwrap();
        drop((t, store));
        let store = common::reopen(tmp.path(), "store-v8");
        let t = store.open_table("closed").unwrap();
        assert!(t.contains(b"after") && t.contains(&key("closed", 499)));
        assert!(size <= 1 << 20);
    })
}

/// Both logs of the fixture emptied: both tables open damaged ("maybe"
/// for every key, a regeneration asked for), read-only and for writing.
#[test]
fn v8_store_fixture_with_its_logs_emptied_opens_damaged() {
    common::with_timeout(common::TEST_LIMIT, || {
        write_if_asked();
        let tmp = tempfile::tempdir().unwrap();
        copy_tree(&fixture("store-v8"), tmp.path());
        for log in files(tmp.path(), "log") {
            std::fs::write(log, b"").unwrap();
        }
        for write in [false, true] {
            let store = if write {
                FilterStore::open(tmp.path()).unwrap()
            } else {
                FilterStore::open_snapshot(tmp.path()).unwrap()
            };
            for name in TABLES {
                let t = store.open_table(name).unwrap();
                assert!(t.health().unwrap().needs_regeneration(), "{name}");
                assert!((0..500).all(|i| t.contains(&key(name, i))), "{name}");
                assert!(t.contains(b"never inserted"), "{name}: maybe");
            }
        }
    })
}

/// The store-v7 fixture (superblocks of frame version 3, which claim
/// nothing past their chunks) opened for writing: migrated to format 8 by
/// `steps/v7_to_v8.rs`; its first clean close claims the table's log
/// (records synced by the open), and a copy of the store with that log
/// emptied then opens damaged, where format 7 lost the log silently.
#[test]
fn v7_store_fixture_migrates_and_its_first_close_claims_the_log() {
    common::with_timeout(common::TEST_LIMIT, || {
        let tmp = tempfile::tempdir().unwrap();
        copy_tree(&fixture("store-v7"), tmp.path());
        let pages = files(tmp.path(), "pages").remove(0);
        let before = superblock(&pages);
        assert_eq!(before.0, 3, "{before:?}");
        // (`Table::stats` would fold the log: nothing left to claim.)
        let pending = {
            let store = FilterStore::open(tmp.path()).unwrap();
            let t = store.open_table("accounts-changed").unwrap();
            t.pending_log_ops()
        };
        assert!(pending > 0, "the fixture's table has a log");
        let after = superblock(&pages);
        assert_eq!((after.0, after.1, after.2), (5, before.1 + 1, before.2));
        assert!(after.4 > after.2, "{after:?}");
        let emptied = tempfile::tempdir().unwrap();
        copy_tree(tmp.path(), emptied.path());
        std::fs::remove_file(emptied.path().join("LOCK")).ok();
        std::fs::write(files(emptied.path(), "log").remove(0), b"").unwrap();
        let store = FilterStore::open(emptied.path()).unwrap();
        let t = store.open_table("accounts-changed").unwrap();
        assert!(t.health().unwrap().needs_regeneration());
        let store = common::reopen(tmp.path(), "store-v7 migrated");
        let t = store.open_table("accounts-changed").unwrap();
        assert!(!t.health().unwrap().needs_regeneration());
        assert_eq!(t.stats().unwrap().format_version, 8);
    })
}
