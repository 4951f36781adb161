//! A split-block table (issue 23's layout) in store format 3's own files
//! goes every way a blocked table goes: durable, process-crash-safe and
//! buffered batches across several folds, a bulk load, a reopen, a
//! read-only open and a counting snapshot, each time with exactly the
//! split-block filter of its live keys (no saturation at this load, so the
//! counters are exact and so are the bits). The power cuts and kills of
//! `tests/crash/power_cut.rs` alternate between a blocked and a split-block
//! table; regeneration and layout changes are in `tests/store/split_block.rs`.

use crate::common;

use filterstore::{
    BitFilter, BloomRead, Durability, FilterParams, FilterStore, Layout, StoreConfig, TableSpec,
    WriteBatch,
};

fn key(i: u32) -> Vec<u8> {
    format!("sb-{i:06}").into_bytes()
}

fn words(f: &impl BloomRead) -> Vec<u64> {
    (0..f.params().num_words()).map(|i| f.word(i)).collect()
}

/// The split-block filter of exactly `keys` in `p`'s shape.
fn filter_of(p: FilterParams, keys: impl Iterator<Item = Vec<u8>>) -> Vec<u64> {
    let mut f = BitFilter::new(p).unwrap();
    let keys: Vec<Vec<u8>> = keys.collect();
    f.insert_many_mut(&keys);
    f.to_words()
}

#[test]
fn a_split_block_table_folds_reopens_and_opens_read_only_exactly() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        // Folds every 1,500 logged operations: the batches below cross
        // several.
        let config = || StoreConfig::default().fold_threshold(1_500).buffer_ops(300);
        let store = FilterStore::open_with(dir.path(), config()).unwrap();
        let t = store
            .create_table("t", TableSpec::new(40_000, 0.01).layout(Layout::SplitBlock))
            .unwrap();
        let p = t.params();
        assert_eq!(p.layout(), Layout::SplitBlock);
        // Keys 0..12,000 in batches of 500 (each batch removing the first
        // 100 keys of the batch before it), at the three durability levels
        // in turn; then keys 20,000..30,000 by a bulk load.
        let mut live = std::collections::BTreeSet::new();
        for b in 0..24u32 {
            let mut w = WriteBatch::new();
            for i in b * 500..(b + 1) * 500 {
                w.insert(&key(i));
                live.insert(i);
            }
            if b > 0 {
                for i in (b - 1) * 500..(b - 1) * 500 + 100 {
                    w.remove(&key(i));
                    live.remove(&i);
                }
            }
            let level = [
                Durability::Durable,
                Durability::ProcessCrashSafe,
                Durability::Buffered,
            ][b as usize % 3];
            t.apply(&w, level).unwrap();
        }
        // 14,300 operations logged: folds took all but the last few.
        assert!(t.pending_log_ops() < 2_000, "{}", t.pending_log_ops());
        assert_eq!(t.bulk_load((20_000..30_000).map(key)).unwrap(), 10_000);
        live.extend(20_000..30_000);
        let want = filter_of(p, live.iter().map(|&i| key(i)));
        assert!(words(&t.bloom()) == want, "live");
        assert_eq!(t.live_keys(), live.len() as u64);
        t.flush().unwrap();
        drop(t);
        drop(store);
        // Reopened: the same bits, from the pages and the log.
        let store = FilterStore::open_with(dir.path(), config()).unwrap();
        let t = store.open_table("t").unwrap();
        assert_eq!(t.params(), p);
        assert!(words(&t.bloom()) == want, "reopened");
        assert_eq!(t.live_keys(), live.len() as u64);
        let counting = t.counting_snapshot().unwrap();
        assert_eq!(counting.params(), &p);
        drop(t);
        drop(store);
        // Read-only: the same bits, nothing written.
        let ro = FilterStore::open_snapshot(dir.path()).unwrap();
        let t = ro.open_table("t").unwrap();
        assert!(words(&t.bloom()) == want, "read-only");
        assert!(live.iter().all(|&i| t.contains(&key(i))));
    });
}
