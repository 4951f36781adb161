//! `cargo bench --bench diffguard`: the differential-file guard on sled.
//!
//! A base of 1,000,000 records (16-byte keys, 64-byte values) and a
//! differential file holding changes to 10% of them, both trees of the filter
//! store's own database. Uniformly random point reads, in one run:
//! * **unguarded**: every read looks in the differential file, then the base;
//! * **guarded**: the filter of changed keys (1% target) decides;
//! * **oracle**: an exact in-memory `HashSet` of the changed keys decides —
//!   the ideal, but memory-hungry.
//!
//! Reports reads per second (criterion, median of samples), the share of the
//! unnecessary differential-file reads the guard avoided, and the memory of
//! guard and oracle. Oracle memory is estimated from the set's capacity: one
//! control byte and one `Vec<u8>` (24 bytes) per bucket, plus each key's heap
//! block (16 bytes rounded to the allocator's 32-byte minimum).
//!
//! Ends with `RESULT <name> <value> <unit>` lines.

mod common;

use criterion::Criterion;
use filterstore::{Change, DiffStorage, Guard, SledDiffStorage};
use filterstore::{FilterStore, StoreConfig, TableSpec};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashSet;
use std::hint::black_box;
use std::time::{Duration, Instant};

const RECORDS: u64 = 1_000_000;
const CHANGED: u64 = 100_000;
const READS_PER_SAMPLE: usize = 20_000;
const ROUNDS: usize = 3;

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.to_be_bytes());
    k[8..].copy_from_slice(&(i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_le_bytes());
    k
}

/// Appends to `samples` the seconds per read of `read` over the key stream.
fn sample(
    c: &mut Criterion,
    name: &str,
    keys: &[[u8; 16]],
    samples: &mut Vec<f64>,
    mut read: impl FnMut(&[u8]),
) {
    let mut at = 0usize;
    let before = samples.len();
    common::sample(c, name, samples, || {
        for _ in 0..READS_PER_SAMPLE {
            read(&keys[at % keys.len()]);
            at += 1;
        }
    });
    for s in &mut samples[before..] {
        *s /= READS_PER_SAMPLE as f64;
    }
}

fn reads_per_s(samples: Vec<f64>) -> f64 {
    1.0 / common::median(samples)
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let dir = tempfile::tempdir().unwrap();
    // The base and the differential file live in the store's own database
    // (one page cache, one flusher), sized for them.
    let store = FilterStore::open_with(
        dir.path().join("filters"),
        StoreConfig::default().cache_capacity(256 << 20),
    )
    .unwrap();
    let table = store
        .create_table("changes", TableSpec::new(CHANGED, 0.01))
        .unwrap();
    let guard = Guard::open(SledDiffStorage::open(&store, "t").unwrap(), table).unwrap();

    let t = Instant::now();
    for chunk in (0..RECORDS).collect::<Vec<_>>().chunks(10_000) {
        guard
            .storage()
            .load_base(chunk.iter().map(|&i| (key(i), [b'b'; 64])))
            .unwrap();
    }
    let mut rng = StdRng::seed_from_u64(1);
    let mut changed: Vec<u64> = (0..RECORDS).collect();
    for i in 0..CHANGED as usize {
        let j = rng.gen_range(i..changed.len());
        changed.swap(i, j);
    }
    changed.truncate(CHANGED as usize);
    for chunk in changed.chunks(1_000) {
        let changes: Vec<(Vec<u8>, Change)> = chunk
            .iter()
            .map(|&i| (key(i).to_vec(), Change::Put(vec![b'd'; 64])))
            .collect();
        guard.write(&changes).unwrap();
    }
    store.flush().unwrap();
    println!(
        "loaded {RECORDS} records and {CHANGED} changes in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let oracle: HashSet<Vec<u8>> = changed.iter().map(|&i| key(i).to_vec()).collect();
    let reads: Vec<[u8; 16]> = (0..200_000)
        .map(|_| key(rng.gen_range(0..RECORDS)))
        .collect();
    let storage = guard.storage().clone();

    // The three modes are measured in interleaved rounds, so that sled's
    // cache warming and bursts of load from other processes affect each alike;
    // each figure is the median over all its samples.
    let (mut s_unguarded, mut s_guarded, mut s_oracle) = (Vec::new(), Vec::new(), Vec::new());
    let before = guard.stats();
    for round in 0..ROUNDS {
        sample(
            &mut c,
            &format!("read/unguarded/{round}"),
            &reads,
            &mut s_unguarded,
            |k| {
                let v = match storage.read_diff(k).unwrap() {
                    Some(Change::Put(v)) => Some(v.into()),
                    Some(Change::Delete) => None,
                    None => storage.read_base(k).unwrap(),
                };
                black_box(v);
            },
        );
        sample(
            &mut c,
            &format!("read/guarded/{round}"),
            &reads,
            &mut s_guarded,
            |k| {
                black_box(guard.read(k).unwrap());
            },
        );
        sample(
            &mut c,
            &format!("read/oracle/{round}"),
            &reads,
            &mut s_oracle,
            |k| {
                let v = if oracle.contains(k) {
                    match storage.read_diff(k).unwrap() {
                        Some(Change::Put(v)) => Some(v.into()),
                        _ => None,
                    }
                } else {
                    storage.read_base(k).unwrap()
                };
                black_box(v);
            },
        );
    }
    let after = guard.stats();
    let (unguarded, guarded, oracle_rate) = (
        reads_per_s(s_unguarded),
        reads_per_s(s_guarded),
        reads_per_s(s_oracle),
    );

    // Unnecessary differential-file reads: reads of unchanged keys. The guard
    // avoided those it answered "absent"; its false positives are the rest.
    let avoided = after.diff_reads_avoided - before.diff_reads_avoided;
    let fps = after.false_positives - before.false_positives;
    let avoided_pct = avoided as f64 / (avoided + fps) as f64 * 100.0;
    let guard_bytes = guard.table().params().bit_bytes();
    let oracle_bytes = oracle.capacity() as u64 * 25 + CHANGED * 32;
    println!(
        "unguarded {unguarded:.0} reads/s, guarded {guarded:.0} ({:.2}x oracle), oracle {oracle_rate:.0}",
        guarded / oracle_rate
    );
    println!(
        "guarded reads of unchanged keys: {avoided} skipped the differential file, {fps} false positives ({avoided_pct:.2}% avoided)"
    );
    println!(
        "memory: guard {guard_bytes} bytes (bit filter; counters on disk), oracle ≈ {oracle_bytes} bytes ({:.1}% of the oracle)",
        guard_bytes as f64 / oracle_bytes as f64 * 100.0
    );
    println!();
    println!("RESULT diffguard_reads_per_s.guarded {guarded:.0} reads/s");
    println!("RESULT diffguard_reads_per_s.unguarded {unguarded:.0} reads/s");
    println!("RESULT diffguard_reads_per_s.oracle {oracle_rate:.0} reads/s");
    println!("RESULT diffguard_diff_reads_avoided_pct {avoided_pct:.3} %");
    println!("RESULT diffguard_guard_bytes {guard_bytes} bytes");
    println!("RESULT diffguard_oracle_bytes {oracle_bytes} bytes");
}
