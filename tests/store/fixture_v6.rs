//! The store-format-6 fixture (`migrations/fixtures/store-v6/`): two tables
//! (blocked and split-block, their keys durable), a table created and
//! dropped, and sealed filters committed in two batches (three filters,
//! then one replaced and one removed), every catalog change still in the
//! catalog log (`docs/FORMAT.md` § 8, § 9a) beside the file written when
//! the store was made. Those bytes are on users' disks: they are read, as
//! they are and for writing, by every later build.

use super::fixture::{copy_tree, write_tree_fixture_if_asked};
use crate::common;
use crate::store_fixture_common::dir_size;
use filterstore::{
    BitFilter, Durability, FilterParams, FilterStore, HashSpec, Layout, NewSealed, SealedBatch,
    TableSpec, WriteBatch,
};
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/fixtures/store-v6")
}

fn keys(prefix: &str, n: u32) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

fn sealed(name: &str, prefix: &str) -> NewSealed {
    let p = FilterParams::for_capacity(300, 1e-4, Layout::Blocked, HashSpec::xxh3(5)).unwrap();
    let f = BitFilter::new(p).unwrap();
    for k in keys(prefix, 300) {
        f.insert(k.as_bytes());
    }
    NewSealed::new(name, f, 300)
        .target_fp(1e-4)
        .tag(format!("tag of {prefix}"))
}

fn write(to: &Path) {
    let store = FilterStore::open(to).unwrap();
    let tables = [
        ("blocked", "a", Layout::Blocked, 1000),
        ("split", "b", Layout::SplitBlock, 500),
    ];
    for (name, prefix, layout, n) in tables {
        let mut spec = TableSpec::new(2000, 0.01).layout(layout);
        if layout != Layout::SplitBlock {
            spec = spec.seed(11);
        }
        let t = store.create_table(name, spec).unwrap();
        let mut b = WriteBatch::new();
        for k in keys(prefix, n) {
            b.insert(k.as_bytes());
        }
        t.apply(&b, Durability::Durable).unwrap();
    }
    store
        .create_table("dropped", TableSpec::new(10, 0.1).seed(1))
        .unwrap();
    store.drop_table("dropped").unwrap();
    let mut first = SealedBatch::new();
    first
        .put(sealed("s.0", "s0"))
        .put(sealed("s.1", "s1"))
        .put(sealed("s.2", "s2"));
    store.commit_sealed(first).unwrap();
    let mut second = SealedBatch::new();
    second.put(sealed("s.1", "r1")).remove("s.2");
    store.commit_sealed(second).unwrap();
}

/// Writes the fixture into [`dir`] if it is missing and
/// `FILTERSTORE_WRITE_FIXTURES` is set: the files a store holds, not its
/// lock.
fn write_if_asked() {
    write_tree_fixture_if_asked(&dir(), write);
}

/// The fixture's tables and sealed filters, as written.
fn check(store: &FilterStore) {
    assert_eq!(store.list_tables().unwrap(), ["blocked", "split"]);
    for (name, prefix, n) in [("blocked", "a", 1000), ("split", "b", 500)] {
        let t = store.open_table(name).unwrap();
        assert!(
            keys(prefix, n).iter().all(|k| t.contains(k.as_bytes())),
            "{name}"
        );
        assert_eq!(t.live_keys(), u64::from(n), "{name}");
    }
    let infos = store.list_sealed("s.").unwrap();
    let names: Vec<&str> = infos.iter().map(|i| i.name()).collect();
    assert_eq!(names, ["s.0", "s.1"]);
    assert_eq!(infos[1].tag(), b"tag of r1");
    for (info, f) in infos.iter().zip(store.load_sealed(&infos)) {
        let f = f.unwrap();
        let prefix = if info.name() == "s.0" { "s0" } else { "r1" };
        assert!(keys(prefix, 300).iter().all(|k| f.contains(k.as_bytes())));
        assert_eq!((info.keys(), info.target_fp()), (300, 1e-4));
    }
}

#[test]
fn v6_store_fixture_with_its_changes_in_the_catalog_log_reads_exact() {
    common::with_timeout(common::TEST_LIMIT, || {
        write_if_asked();
        // Every change after the store's creation is in the log.
        let log = std::fs::read(dir().join("catalog.log")).unwrap();
        assert!(log.len() > 24 + 6 * 16, "{} bytes", log.len());
        let tmp = tempfile::tempdir().unwrap();
        copy_tree(&dir(), tmp.path());
        let snapshot = FilterStore::open_snapshot(tmp.path()).unwrap();
        check(&snapshot);
        drop(snapshot);
        assert_eq!(dir_size(tmp.path()), dir_size(&dir()), "read-only wrote");
        let store = FilterStore::open(tmp.path()).unwrap();
        check(&store);
        let mut more = SealedBatch::new();
        more.put(sealed("u.3", "s3"));
        store.commit_sealed(more).unwrap();
        drop(store);
        let store = FilterStore::open(tmp.path()).unwrap();
        check(&store);
        assert_eq!(store.list_sealed("u.").unwrap().len(), 1);
        assert!(dir_size(&dir()) <= 1 << 20);
    })
}
