//! The guard's storage under concurrent traffic: the test that
//! `scripts/hang-loop.sh` loops (oversubscribed) to look for sled 0.34.7's
//! writer deadlock (#804) in what the store still keeps in sled. Writers
//! commit changes of up to 4 KiB (so sled's log fills segments), readers
//! read on their own threads beside the sled worker, and a merger moves the
//! differential file into the base and clears the filter (sled frees and
//! truncates segments). Every answer is checked: a read sees the base value
//! or a value a writer committed for that key, and once a write returned,
//! its value or a later one.

use crate::common;

use filterstore::{Change, FilterStore, Guard, SledDiffStorage, TableSpec};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

const BASE: u32 = 3_000;

fn key(i: u32) -> Vec<u8> {
    format!("rec:{i:06}").into_bytes()
}

/// The value of write `n` of writer `w` for key `i`: its length varies up
/// to 4 KiB, its first bytes say who wrote it.
fn value(w: u32, n: u32, i: u32) -> Vec<u8> {
    let mut v = format!("w{w}-n{n}-k{i}:").into_bytes();
    v.resize(64 + ((n * 977 + i * 31) % 4_000) as usize, b'x');
    v
}

fn is_valid(i: u32, v: &[u8]) -> bool {
    v == b"base"
        || v.starts_with(format!("w{}-", i % 3).as_bytes())
            && v.windows(format!("-k{i}:").len())
                .any(|x| x == format!("-k{i}:").as_bytes())
}

#[test]
fn guarded_traffic_with_merges_answers_right_and_ends() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let store = FilterStore::open(dir.path()).unwrap();
        let storage = SledDiffStorage::open(&store, "s").unwrap();
        storage
            .load_base((0..BASE).map(|i| (key(i), b"base".to_vec())))
            .unwrap();
        let table = store
            .create_table("changed", TableSpec::new(2_000, 0.01))
            .unwrap();
        let guard = Arc::new(Guard::open(storage, table).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let reads = Arc::new(AtomicU64::new(0));
        let writers: Vec<_> = (0..3u32)
            .map(|w| {
                let g = Arc::clone(&guard);
                std::thread::spawn(move || {
                    for n in 0..40u32 {
                        // Keys of writer w are ≡ w (mod 3): one writer per key.
                        let keys: Vec<u32> =
                            (0..12).map(|j| (w + 3 * (n * 12 + j)) % BASE).collect();
                        let changes: Vec<(Vec<u8>, Change)> = keys
                            .iter()
                            .map(|&i| (key(i), Change::Put(value(w, n, i))))
                            .collect();
                        g.write(&changes).unwrap();
                        let ks: Vec<Vec<u8>> = keys.iter().map(|&i| key(i)).collect();
                        let got = g.read_many(&ks).unwrap();
                        for (&i, v) in keys.iter().zip(got) {
                            assert_eq!(
                                v.map(Vec::from),
                                Some(value(w, n, i)),
                                "writer {w} lost its own write"
                            );
                        }
                    }
                })
            })
            .collect();
        let readers: Vec<_> = (0..2u32)
            .map(|r| {
                let (g, stop, reads) = (Arc::clone(&guard), Arc::clone(&stop), Arc::clone(&reads));
                std::thread::spawn(move || {
                    let mut x = 0x9e37_79b9u32 ^ r;
                    while !stop.load(Ordering::Relaxed) {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        let i = x % BASE;
                        let v = g.read(&key(i)).unwrap().expect("a record disappeared");
                        assert!(is_valid(i, &v), "key {i}: {:?}", &v[..v.len().min(40)]);
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        let merger = {
            let (g, stop) = (Arc::clone(&guard), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut merged = 0;
                while !stop.load(Ordering::Relaxed) {
                    merged += g.merge().unwrap();
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                merged
            })
        };
        for w in writers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().unwrap();
        }
        merger.join().unwrap();
        assert!(reads.load(Ordering::Relaxed) > 0);
        // After a last merge every record holds its last write or the base.
        guard.merge().unwrap();
        for i in 0..BASE {
            let v = guard.read(&key(i)).unwrap().unwrap();
            assert!(is_valid(i, &v), "key {i}");
        }
    })
}
