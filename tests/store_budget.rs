//! A bulk load refused by the memory budget changes nothing: not the
//! table's keys, and not its files either (on a014611 the load folded the
//! log before it asked for the counters' memory, so a refused load rewrote
//! the log and the pages). Alone in its binary: the budget is the process's.
#![cfg(feature = "store")]

mod common;

use filterstore::{Durability, FilterStore, StoreConfig, StoreError, TableSpec, WriteBatch};
use std::path::Path;

/// Every file of the store, with its bytes.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for d in [dir.to_path_buf(), dir.join("tables")] {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.metadata().unwrap().is_file() {
                let name = e.path().strip_prefix(dir).unwrap().display().to_string();
                out.push((name, std::fs::read(e.path()).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_bulk_load_over_the_budget_leaves_the_files_as_they_were() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let spec = TableSpec::new(2_000_000, 0.01).seed(6);
        let params = filterstore::FilterParams::for_capacity(
            2_000_000,
            0.01,
            filterstore::Layout::Blocked,
            filterstore::HashSpec::xxh3(6),
        )
        .unwrap();
        // The bit filter fits, the counters (four times as large) do not.
        let budget = params.bit_bytes() * 3;
        let cfg = StoreConfig::default().memory_budget(Some(budget));
        let store = FilterStore::open_with(dir.path(), cfg).unwrap();
        let t = store.create_table("t", spec).unwrap();
        let mut b = WriteBatch::new();
        for i in 0..1_000u32 {
            b.insert(&i.to_le_bytes());
        }
        t.apply(&b, Durability::Durable).unwrap();
        assert!(
            t.pending_log_ops() > 0,
            "the log must hold something to fold"
        );
        let before = files(dir.path());
        let r = t.bulk_load((1_000..500_000u32).map(|i| i.to_le_bytes()));
        match r {
            Err(e @ StoreError::OverBudget { .. }) => {
                assert!(!e.to_string().contains('\n'), "{e}");
            }
            other => panic!("{other:?}"),
        }
        assert!(
            files(dir.path()) == before,
            "a refused bulk load changed the files"
        );
        assert_eq!(t.live_keys(), 1_000);
        assert!((0..1_000u32).all(|i| t.contains(&i.to_le_bytes())));
    })
}
