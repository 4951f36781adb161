//! Store tables of the split-block layout (Parquet's SBBF): created with
//! their layout, counted, folded, reopened and regenerated without leaving
//! it (the hash stays XXH64 seed 0), and moved to and from another layout
//! by a rebuild from the host's keys with writers held out.

use crate::common;

use filterstore::{
    BitFilter, BloomRead, FilterParams, FilterStore, HashAlgo, HashSpec, Layout, ParamError,
    RegenOptions, StoreError, TableSpec,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:06}").into_bytes()
}

/// Every word of a filter.
fn words(f: &impl BloomRead) -> Vec<u64> {
    (0..f.params().num_words()).map(|i| f.word(i)).collect()
}

/// The split-block bit filter of exactly `keys` in `p`'s shape.
fn filter_of(p: FilterParams, keys: impl Iterator<Item = Vec<u8>>) -> BitFilter {
    let mut f = BitFilter::new(p).unwrap();
    let keys: Vec<Vec<u8>> = keys.collect();
    f.insert_many_mut(&keys);
    f
}

#[test]
fn a_split_block_table_stays_parquets_filter() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let store = FilterStore::open(dir.path()).unwrap();
        // Seeds are refused: the layout's hash has none.
        let seeded = TableSpec::new(10_000, 0.01)
            .layout(Layout::SplitBlock)
            .seed(7);
        assert!(matches!(
            store.create_table("x", seeded),
            Err(StoreError::Params(ParamError::HashNotForLayout { .. }))
        ));
        let t = store
            .create_table("t", TableSpec::new(10_000, 0.01).layout(Layout::SplitBlock))
            .unwrap();
        let p = t.params();
        assert_eq!(
            (p.layout(), p.hash(), p.k()),
            (Layout::SplitBlock, HashSpec::xxh64(), 8)
        );
        for i in 0..5_000 {
            t.insert(&key(i)).unwrap();
        }
        for i in 0..1_000 {
            t.remove(&key(i)).unwrap();
        }
        // Counters exact (no saturation at this load): the live filter is
        // bit for bit the split-block filter of the live keys.
        let live = || (1_000..5_000).map(key);
        let want = filter_of(p, live());
        assert!(words(&t.bloom()) == want.to_words());
        t.flush().unwrap();
        drop(t);
        drop(store);
        let store = common::reopen(dir.path(), "after a split-block table");
        let t = store.open_table("t").unwrap();
        assert_eq!(t.params(), p);
        assert!(words(&t.bloom()) == want.to_words());
        assert_eq!(t.stats().unwrap().hash, HashAlgo::Xxh64);
        // A regeneration keeps the layout and its hash.
        let keys: Vec<Vec<u8>> = live().collect();
        let source = || keys.iter().map(Ok::<_, std::io::Error>);
        t.regenerate(source, &RegenOptions::default()).unwrap();
        let q = t.params();
        assert_eq!(
            (q.layout(), q.hash()),
            (Layout::SplitBlock, HashSpec::xxh64())
        );
        assert!(words(&t.bloom()) == filter_of(q, live()).to_words());
        assert!(live().all(|k| t.contains(&k)));
    });
}

#[test]
fn a_table_moves_between_layouts_and_back() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let store = FilterStore::open(dir.path()).unwrap();
        let t = store
            .create_table("t", TableSpec::new(4_000, 0.01))
            .unwrap();
        let keys: Vec<Vec<u8>> = (0..4_000).map(key).collect();
        for k in &keys {
            t.insert(k).unwrap();
        }
        let seed = t.params().hash().seed;
        let source = || keys.iter().map(Ok::<_, std::io::Error>);
        let r = t
            .change_layout(Layout::SplitBlock, source, &RegenOptions::default())
            .unwrap();
        assert_eq!(
            (r.keys_read, r.old_generation, r.new_generation),
            (4_000, 1, 2)
        );
        let p = t.params();
        assert_eq!(
            (p.layout(), p.hash()),
            (Layout::SplitBlock, HashSpec::xxh64())
        );
        assert!(words(&t.bloom()) == filter_of(p, keys.iter().cloned()).to_words());
        assert_eq!(t.live_keys(), 4_000);
        // Writes go on in the new layout, and survive a reopen.
        t.insert(&key(9_999)).unwrap();
        t.flush().unwrap();
        drop(t);
        drop(store);
        let store = common::reopen(dir.path(), "after a layout change");
        let t = store.open_table("t").unwrap();
        assert_eq!(t.params().layout(), Layout::SplitBlock);
        assert!(keys.iter().all(|k| t.contains(k)) && t.contains(&key(9_999)));
        // And back, under a fresh seed of the blocked layout's hash.
        let mut all = keys.clone();
        all.push(key(9_999));
        let source = || all.iter().map(Ok::<_, std::io::Error>);
        t.change_layout(Layout::Blocked, source, &RegenOptions::default())
            .unwrap();
        let q = t.params();
        assert_eq!(
            (q.layout(), q.hash().algo),
            (Layout::Blocked, HashAlgo::Xxh3_128)
        );
        assert_ne!(q.hash().seed, seed);
        assert!(all.iter().all(|k| t.contains(k)));
        assert_eq!(t.live_keys(), 4_001);
    });
}

/// Writes wait for a layout change: an insert started while the rebuild
/// reads its source returns only after the source is exhausted, and lands
/// in the new layout.
#[test]
fn writers_wait_for_a_layout_change() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let store = FilterStore::open(dir.path()).unwrap();
        let t = store
            .create_table("t", TableSpec::new(2_000, 0.01))
            .unwrap();
        let keys: Vec<Vec<u8>> = (0..2_000).map(key).collect();
        for k in &keys {
            t.insert(k).unwrap();
        }
        let started = AtomicBool::new(false);
        let mut exhausted = None;
        let inserted_at = std::thread::scope(|s| {
            let writer = s.spawn(|| {
                while !started.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                t.insert(&key(5_000)).unwrap();
                Instant::now()
            });
            // A slow source: 2,000 keys over about 200 ms.
            let source = || {
                started.store(true, Ordering::Release);
                keys.iter().enumerate().map(|(i, k)| {
                    if i % 100 == 0 {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Ok::<_, std::io::Error>(k)
                })
            };
            t.change_layout(Layout::SplitBlock, source, &RegenOptions::default())
                .unwrap();
            exhausted = Some(Instant::now());
            writer.join().unwrap()
        });
        // The writer returned after the rebuild swapped (which is after the
        // source ended): it waited for the writer lock the rebuild held.
        // (`exhausted` is taken after `change_layout` returns, a little
        // after the swap, so allow the insert to finish in between.)
        let exhausted = exhausted.unwrap();
        assert!(
            inserted_at + Duration::from_millis(50) >= exhausted,
            "the insert did not wait for the layout change"
        );
        assert_eq!(t.params().layout(), Layout::SplitBlock);
        assert!(t.contains(&key(5_000)) && keys.iter().all(|k| t.contains(k)));
        assert_eq!(t.live_keys(), 2_001);
    });
}

#[test]
fn a_failed_layout_change_changes_nothing() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let store = FilterStore::open(dir.path()).unwrap();
        let t = store
            .create_table("t", TableSpec::new(1_000, 0.01))
            .unwrap();
        let keys: Vec<Vec<u8>> = (0..1_000).map(key).collect();
        for k in &keys {
            t.insert(k).unwrap();
        }
        let before = (t.params(), words(&t.bloom()), t.generation());
        let source = || {
            keys.iter().enumerate().map(|(i, k)| match i {
                500 => Err(std::io::Error::other("the host's scan failed")),
                _ => Ok(k),
            })
        };
        let err = t
            .change_layout(Layout::SplitBlock, source, &RegenOptions::default())
            .unwrap_err();
        assert!(matches!(err, StoreError::KeySource { .. }), "{err}");
        assert!((t.params(), words(&t.bloom()), t.generation()) == before);
        t.insert(&key(7_777)).unwrap();
        assert!(keys.iter().all(|k| t.contains(k)) && t.contains(&key(7_777)));
    });
}
