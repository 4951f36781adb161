//! Store tables hashed with XXH3-64 (hash id 3, format version 4) or
//! XXH3-64 sectorized (hash id 4, format version 6): the store creates its
//! own tables with XXH3-128, but a filter file of the blocked layout hashed
//! with either imports into a table that keeps the hash through writes,
//! removals and a reopen, and exports with the hash's version.

use crate::common;

use filterstore::{
    decode_filter, CountingFilter, Durability, ExportKind, FilterParams, FilterStore, HashSpec,
    Layout, WriteBatch,
};

fn key(i: u32) -> Vec<u8> {
    format!("id-{i:07}").into_bytes()
}

#[test]
fn an_imported_xxh3_64_table_keeps_its_hash_across_a_reopen() {
    keeps_its_hash_across_a_reopen(HashSpec::xxh3_64(77), 4);
}

#[test]
fn an_imported_xxh3_64_sectorized_table_keeps_its_hash_across_a_reopen() {
    keeps_its_hash_across_a_reopen(HashSpec::xxh3_64_sectorized(77), 6);
}

/// A table imported from a counting filter hashed with `spec`, written
/// and reopened, answers as a counting filter given the same operations,
/// and exports as frame `version`.
fn keeps_its_hash_across_a_reopen(spec: HashSpec, version: u16) {
    common::with_timeout(common::TEST_LIMIT, move || {
        let dir = tempfile::tempdir().unwrap();
        let p = FilterParams::for_capacity(20_000, 0.01, Layout::Blocked, spec).unwrap();
        // The reference: a counting filter of the same shape, given the
        // same operations as the table.
        let mut model = CountingFilter::new(p).unwrap();
        for i in 0..8_000 {
            model.insert(&key(i));
        }
        {
            let store = FilterStore::open(dir.path()).unwrap();
            let t = store.import_counting("ids", &model, 8_000).unwrap();
            assert_eq!(t.params(), p);
            let mut batch = WriteBatch::new();
            for i in 8_000..12_000 {
                batch.insert(&key(i));
                model.insert(&key(i));
            }
            for i in 0..2_000 {
                batch.remove(&key(i));
                model.remove(&key(i)).unwrap();
            }
            t.apply(&batch, Durability::Durable).unwrap();
        }
        let store = FilterStore::open(dir.path()).unwrap();
        let t = store.open_table("ids").unwrap();
        assert_eq!(t.params().hash(), spec);
        let probe: Vec<Vec<u8>> = (0..40_000).map(key).collect();
        let want: Vec<bool> = probe.iter().map(|k| model.contains(k)).collect();
        assert_eq!(t.contains_many(&probe), want);
        assert!(
            (2_000..12_000).all(|i| t.contains(&key(i))),
            "false negative"
        );
        for kind in [ExportKind::Bits, ExportKind::Counting] {
            let file = t.export(kind).unwrap();
            let d = decode_filter(&file).unwrap();
            assert_eq!((d.version, d.min_reader), (version, version), "{kind:?}");
            assert_eq!(*d.params(), p);
        }
        let bits = decode_filter(&t.export(ExportKind::Bits).unwrap())
            .unwrap()
            .to_bit_filter()
            .unwrap();
        assert_eq!(bits.contains_many(&probe), want);
    })
}
