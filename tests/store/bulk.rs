//! `Table::bulk_load`: the same counters, bits and counts as the ordinary
//! write path, on a fresh table and on one with folded pages and an unfolded
//! log, for both layouts; removes and reopens afterwards.

use crate::common;

use filterstore::{
    BloomRead, CountingFilter, Durability, FilterStore, Layout, StoreConfig, Table, TableSpec,
    WriteBatch,
};

fn key(prefix: &str, i: u32) -> Vec<u8> {
    format!("{prefix}-{i:06}").into_bytes()
}

fn spec(layout: Layout) -> TableSpec {
    TableSpec::new(50_000, 0.01).layout(layout).seed(0xB01C)
}

/// A table with history: 3,000 keys folded, 300 of them removed, 40 `hot`
/// inserts (saturated counters), 2,000 keys in the unfolded log.
fn with_history(t: &Table, model: &mut CountingFilter) {
    let mut b = WriteBatch::new();
    for i in 0..3000 {
        b.insert(&key("old", i));
        model.insert(&key("old", i));
    }
    for _ in 0..40 {
        b.insert(b"hot");
        model.insert(b"hot");
    }
    t.apply(&b, Durability::Durable).unwrap();
    for i in 0..300 {
        t.remove(&key("old", i)).unwrap();
        model.remove(&key("old", i)).unwrap();
    }
    t.fold().unwrap();
    let mut b = WriteBatch::new();
    for i in 0..2000 {
        b.insert(&key("log", i));
        model.insert(&key("log", i));
    }
    t.apply(&b, Durability::Durable).unwrap();
    assert!(t.pending_log_ops() > 0);
}

fn check(t: &Table, model: &CountingFilter, live: u64, what: &str) {
    assert_eq!(t.live_keys(), live, "{what}");
    let counters = t.counting_snapshot().unwrap();
    assert!(
        counters.as_bytes() == model.as_bytes(),
        "{what}: counters differ"
    );
    // `hot` (40 inserts) and `again` (20) saturate their counters.
    let stats = t.stats().unwrap();
    assert_eq!(
        stats.saturated_counters,
        model.saturated(),
        "{what}: saturated"
    );
    let bits = model.to_bit_filter().unwrap();
    for w in 0..t.params().num_words() {
        assert_eq!(t.bloom().word(w), bits.word(w), "{what}: bit word {w}");
    }
}

#[test]
fn bulk_loads_equal_the_write_path() {
    common::with_timeout(common::TEST_LIMIT, || {
        for layout in [Layout::Blocked, Layout::Standard] {
            for history in [false, true] {
                let what = format!("{layout:?}, history {history}");
                let dir = tempfile::tempdir().unwrap();
                let store = FilterStore::open_with(dir.path(), StoreConfig::default()).unwrap();
                let t = store.create_table("t", spec(layout)).unwrap();
                let mut model = CountingFilter::new(t.params()).unwrap();
                let mut live = 0;
                if history {
                    with_history(&t, &mut model);
                    live = 3000 - 300 + 40 + 2000;
                }
                // 40,000 distinct keys, then one key 20 times: the bulk
                // path saturates its counters itself.
                let mut new: Vec<Vec<u8>> = (0..40_000).map(|i| key("bulk", i)).collect();
                new.extend(std::iter::repeat_n(b"again".to_vec(), 20));
                assert_eq!(t.bulk_load(&new).unwrap(), 40_020);
                for k in &new {
                    model.insert(k);
                }
                live += 40_020;
                assert_eq!(t.pending_log_ops(), 0, "{what}");
                check(&t, &model, live, &what);
                // Removes see the loaded counters.
                for i in 0..500 {
                    t.remove(&key("bulk", i)).unwrap();
                    model.remove(&key("bulk", i)).unwrap();
                }
                live -= 500;
                t.flush().unwrap();
                drop((t, store));
                let store = common::reopen(dir.path(), &what);
                let t = store.open_table("t").unwrap();
                check(&t, &model, live, &format!("{what}, reopened"));
            }
        }
    })
}

#[test]
fn an_empty_bulk_load_changes_nothing() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let store = FilterStore::open(dir.path()).unwrap();
        let t = store.create_table("t", spec(Layout::Blocked)).unwrap();
        assert_eq!(t.bulk_load(std::iter::empty::<&[u8]>()).unwrap(), 0);
        assert_eq!(t.live_keys(), 0);
        assert_eq!(t.bloom().count_ones(), 0);
    })
}
