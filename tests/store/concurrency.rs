//! Concurrency: writer threads inserting and removing (single operations,
//! buffered and durable batches) while reader threads look up keys that are
//! definitely present, on one small table whose blocks and counters all the
//! threads share, with folds forced every few hundred operations. Never a
//! false negative for a key that is definitely present, and at the end the
//! bits are exactly the non-zero counters and the live count is exact.

use crate::common;

use filterstore::BloomRead;
use filterstore::{Durability, FilterStore, StoreConfig, TableSpec, WriteBatch};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

const WRITERS: usize = 4;
const READERS: usize = 2;
const ROUNDS: u32 = 60;
const PER_ROUND: u32 = 50;

fn key(t: usize, i: u32) -> Vec<u8> {
    format!("w{t}-{i}").into_bytes()
}

#[test]
fn no_false_negative_under_concurrent_writers_and_readers() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let cfg = StoreConfig::default()
            .fold_threshold(300)
            .buffer_ops(64)
            .materialized_blocks(8);
        let store = FilterStore::open_with(dir.path(), cfg).unwrap();
        // 2,000 keys' worth of bits for ~7,000 live keys: blocks are shared by
        // many keys of all threads, so removes clear bits next to live keys.
        let table = store
            .create_table("shared", TableSpec::new(2_000, 0.05).seed(11))
            .unwrap();
        // Keys that stay present for the whole test.
        let stable: Vec<Vec<u8>> = (0..1000u32)
            .map(|i| format!("stable-{i}").into_bytes())
            .collect();
        let mut b = WriteBatch::new();
        for k in &stable {
            b.insert(k);
        }
        table.apply(&b, Durability::Durable).unwrap();

        let stop = Arc::new(AtomicBool::new(false));
        let start = Arc::new(Barrier::new(WRITERS + READERS));
        let mut readers = Vec::new();
        for r in 0..READERS {
            let (table, stable, stop, start) =
                (table.clone(), stable.clone(), stop.clone(), start.clone());
            readers.push(std::thread::spawn(move || {
                start.wait();
                let mut checks = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for k in &stable {
                        assert!(table.contains(k), "reader {r}: false negative");
                    }
                    assert!(table.contains_many(&stable).iter().all(|&h| h));
                    checks += 2 * stable.len() as u64;
                }
                checks
            }));
        }
        let mut writers = Vec::new();
        for t in 0..WRITERS {
            let (table, start) = (table.clone(), start.clone());
            // Each writer opens its own handle too: all share one state.
            let store = store.clone();
            writers.push(std::thread::spawn(move || {
                let own = store.open_table("shared").unwrap();
                start.wait();
                let mut present: Vec<u32> = Vec::new();
                let mut next = 0u32;
                let mut live = 0i64;
                for round in 0..ROUNDS {
                    // Inserts: single, buffered batch or durable batch.
                    let fresh: Vec<u32> = (next..next + PER_ROUND).collect();
                    next += PER_ROUND;
                    match round % 3 {
                        0 => {
                            for &i in &fresh {
                                own.insert(&key(t, i)).unwrap();
                            }
                        }
                        mode => {
                            let mut b = WriteBatch::new();
                            for &i in &fresh {
                                b.insert(&key(t, i));
                            }
                            let d = if mode == 1 {
                                Durability::Buffered
                            } else {
                                Durability::Durable
                            };
                            table.apply(&b, d).unwrap();
                        }
                    }
                    live += fresh.len() as i64;
                    present.extend(&fresh);
                    // Remove every third present key (singly or in a batch).
                    let mut keep = Vec::with_capacity(present.len());
                    let mut batch = WriteBatch::new();
                    for (n, &i) in present.iter().enumerate() {
                        if n % 3 == round as usize % 3 {
                            if round % 2 == 0 {
                                table.remove(&key(t, i)).unwrap();
                            } else {
                                batch.remove(&key(t, i));
                            }
                            live -= 1;
                        } else {
                            keep.push(i);
                        }
                    }
                    if !batch.is_empty() {
                        own.apply(&batch, Durability::Buffered).unwrap();
                    }
                    present = keep;
                    for &i in &present {
                        assert!(
                            table.contains(&key(t, i)),
                            "writer {t} round {round}: false negative for its own key {i}"
                        );
                    }
                }
                (present, live)
            }));
        }
        let mut live_total = stable.len() as i64;
        let mut all_present = Vec::new();
        for (t, w) in writers.into_iter().enumerate() {
            let (present, live) = w.join().unwrap();
            live_total += live;
            all_present.extend(present.into_iter().map(|i| key(t, i)));
        }
        stop.store(true, Ordering::Relaxed);
        let checks: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
        assert!(checks > 0);

        assert_eq!(table.live_keys() as i64, live_total);
        for k in all_present.iter().chain(&stable) {
            assert!(table.contains(k));
        }
        // Bits = non-zero counters, exactly, now and after a reopen.
        let check_exact = |t: &filterstore::Table| {
            let derived = t.counting_snapshot().unwrap().to_bit_filter().unwrap();
            for i in 0..t.params().num_words() {
                assert_eq!(t.bloom().word(i), derived.word(i), "word {i}");
            }
        };
        check_exact(&table);
        table.flush().unwrap();
        drop(table);
        drop(store);
        let store = FilterStore::open_with(dir.path(), cfg).unwrap();
        let table = store.open_table("shared").unwrap();
        assert_eq!(table.live_keys() as i64, live_total);
        for k in all_present.iter().chain(&stable) {
            assert!(table.contains(k));
        }
        check_exact(&table);
    })
}

#[test]
fn tables_are_independent_under_concurrency() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let store = FilterStore::open(dir.path()).unwrap();
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let store = store.clone();
                std::thread::spawn(move || {
                    let name = format!("t{t}");
                    let table = store
                        .create_table(&name, TableSpec::new(10_000, 0.01))
                        .unwrap();
                    for i in 0..2000u32 {
                        table.insert(format!("{t}-{i}").as_bytes()).unwrap();
                    }
                    table.flush().unwrap();
                    name
                })
            })
            .collect();
        for h in handles {
            let name = h.join().unwrap();
            let t = store.open_table(&name).unwrap();
            assert_eq!(t.live_keys(), 2000);
        }
        assert_eq!(store.list_tables().unwrap().len(), 4);
    })
}
