//! The committed format-v1 store directory `migrations/fixtures/v1/store/`.
//!
//! Like the filter-file fixtures it is never regenerated: it stands for a
//! store on a user's disk. Every run copies it to a temporary directory,
//! opens it with today's code and checks every key, the counts, the
//! statistics, and that its exports are byte-for-byte the files an in-memory
//! filter fed the same operations encodes to. `tests/store_corruption.rs`
//! corrupts the same copy record by record.
//!
//! To create it when it is missing (never over an existing one):
//! `FILTERSTORE_WRITE_FIXTURES=1 cargo test --release --test store_fixture`.
#![cfg(feature = "store")]

mod common;

mod store_fixture_common;

use filterstore::{encode_bit_filter, encode_counting_filter};
use filterstore::{BitFilter, BloomRead, HashSpec};
use filterstore::{FilterStore, StoreConfig, TableSpec};
use store_fixture_common::*;

/// (table, m, k), pinned when the fixture was made.
const PINNED: [(&str, u64, u32); 2] = [("blocked", 4096, 7), ("standard", 3838, 7)];

fn write_fixture() {
    let dir = fixture_dir();
    if dir.exists() {
        return;
    }
    // A fold threshold far above the operations made, so that the last
    // inserts stay in the log (the fixture must hold both forms).
    let config = StoreConfig::default().fold_threshold(1 << 20);
    let store = FilterStore::open_with(&dir, config).unwrap();
    for (name, layout) in TABLES {
        let t = store
            .create_table(name, TableSpec::new(400, 0.01).layout(layout).seed(SEED))
            .unwrap();
        for k in folded_inserts() {
            t.insert(k.as_bytes()).unwrap();
        }
        for k in removed() {
            t.remove(k.as_bytes()).unwrap();
        }
        for _ in 0..HOT_COUNT {
            t.insert(HOT_KEY.as_bytes()).unwrap();
        }
        t.fold().unwrap();
        for k in logged_inserts() {
            t.insert(k.as_bytes()).unwrap();
        }
        t.flush().unwrap();
        assert_eq!(t.pending_log_ops(), logged_inserts().len() as u64);
    }
    store.flush().unwrap();
}

#[test]
fn v1_store_fixture_reads_with_every_key_and_exact_exports() {
    common::with_timeout(
        common::TEST_LIMIT,
        v1_store_fixture_reads_with_every_key_and_exact_exports_body,
    )
}

fn v1_store_fixture_reads_with_every_key_and_exact_exports_body() {
    if std::env::var_os("FILTERSTORE_WRITE_FIXTURES").is_some() {
        write_fixture();
    }
    let copy = copy_fixture();
    let store = FilterStore::open(copy.path()).unwrap();
    let names: Vec<String> = store.list_tables().unwrap();
    assert_eq!(names, ["blocked", "standard"]);
    for (name, layout) in TABLES {
        let t = store.open_table(name).unwrap();
        let p = t.params();
        assert_eq!(p.layout(), layout);
        assert_eq!(p.hash(), HashSpec::xxh3(SEED));
        assert_eq!(t.generation(), 1);
        // The log was not folded when the fixture was closed.
        assert_eq!(t.pending_log_ops(), logged_inserts().len() as u64, "{name}");
        for k in live_keys() {
            assert!(t.contains(k.as_bytes()), "{name}: {k} lost");
        }
        assert_eq!(t.live_keys(), LIVE, "{name}");
        let stats = t.stats().unwrap();
        // Migrated on open (v1 → v2 raises the header's version only).
        assert_eq!(stats.format_version, filterstore::STORE_FORMAT_VERSION);
        assert_eq!(stats.format_version, 2);
        assert!(stats.saturated_counters >= 1, "{name}: {stats:?}");
        // Exports equal the files of an in-memory filter fed the same
        // operations: same counters, same bits, same bytes.
        let expected = model(p, true);
        let counting = t.counting_snapshot().unwrap();
        assert_eq!(
            encode_counting_filter(&counting, LIVE),
            encode_counting_filter(&expected, LIVE),
            "{name}"
        );
        let words: Vec<u64> = (0..p.num_words()).map(|i| t.bloom().word(i)).collect();
        let bits = BitFilter::from_words(p, &words).unwrap();
        let model_bits = expected.to_bit_filter().unwrap();
        assert_eq!(
            encode_bit_filter(&bits, LIVE),
            encode_bit_filter(&model_bits, LIVE),
            "{name}"
        );
    }
    // Size of the committed directory: small enough for the repository.
    let size = dir_size(&fixture_dir());
    assert!(size <= 5 << 20, "{size} bytes");
}

#[test]
fn fixture_tables_have_the_pinned_shape() {
    common::with_timeout(
        common::TEST_LIMIT,
        fixture_tables_have_the_pinned_shape_body,
    )
}

fn fixture_tables_have_the_pinned_shape_body() {
    let copy = copy_fixture();
    let store = FilterStore::open(copy.path()).unwrap();
    for (name, m, k) in PINNED {
        let t = store.open_table(name).unwrap();
        assert_eq!((t.params().m(), t.params().k()), (m, k), "{name}");
        assert_eq!(t.expected_keys(), 400);
    }
}
