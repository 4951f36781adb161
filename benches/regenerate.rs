//! `cargo bench --bench regenerate`: regeneration of a 10M-key table against
//! bulk-loading the same keys, and lookup latency during the regeneration
//! against idle, in one run.
//!
//! * **bulk load**: a table created for the 10M keys, loaded in buffered
//!   batches of 4,096 keys (`Durability::Buffered`), then flushed;
//! * **regeneration**: the same table regenerated from a key source yielding
//!   the same 10M keys (hashing, counting in memory, writing the counter
//!   pages, the commit with its flushes);
//! * **lookup latency**: another thread looks up absent keys in a loop,
//!   timing each batch of 64 lookups with `Instant` and dividing by 64 (one
//!   `Instant` pair costs about as much as a lookup, so per-lookup timing
//!   would measure the clock); p50 and p99 over the batches, idle (1.5 s
//!   before the regeneration and 1.5 s after it) and during it.
//!
//! One-shot wall-clock timings (not criterion): one 10M regeneration takes
//! seconds, and the latency figures are distributions of their own. The
//! measured false-positive rate of the regenerated table is printed beside.
//! Ends with `RESULT` lines. `FILTERSTORE_BENCH_KEYS` changes the 10M.

use filterstore::{Durability, FilterStore, RegenOptions, TableSpec, WriteBatch};
use std::hint::black_box;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn key16(i: u64, salt: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.to_le_bytes());
    k[8..].copy_from_slice(&salt.to_le_bytes());
    k
}

const BATCH: usize = 64;
/// Phases of the lookup thread.
const IDLE: u8 = 0;
const DURING: u8 = 1;
const STOP: u8 = 2;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let n: u64 = std::env::var("FILTERSTORE_BENCH_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let label = if n == 10_000_000 {
        "10M".to_string()
    } else {
        n.to_string()
    };
    let dir = tempfile::tempdir().unwrap();
    let store = FilterStore::open(dir.path()).unwrap();
    let t = store
        .create_table("t", TableSpec::new(n, 0.01).seed(7))
        .unwrap();

    let t0 = Instant::now();
    let mut b = WriteBatch::with_capacity(4096, 4096 * 16);
    for i in 0..n {
        b.insert(&key16(i, 1));
        if b.len() == 4096 {
            t.apply(&b, Durability::Buffered).unwrap();
            b.clear();
        }
    }
    t.apply(&b, Durability::Buffered).unwrap();
    t.flush().unwrap();
    let bulk_s = t0.elapsed().as_secs_f64();
    println!("bulk load of {n} keys: {bulk_s:.2} s");

    let phase = Arc::new(AtomicU8::new(IDLE));
    let looker = {
        let (t, phase) = (t.clone(), phase.clone());
        std::thread::spawn(move || {
            let absent: Vec<[u8; 16]> = (0..(1u64 << 16)).map(|i| key16(i, 99)).collect();
            let (mut idle, mut during) = (Vec::new(), Vec::new());
            let mut i = 0usize;
            loop {
                let ph = phase.load(Ordering::Relaxed);
                if ph == STOP {
                    break;
                }
                let s = Instant::now();
                for _ in 0..BATCH {
                    black_box(t.contains(&absent[i & 0xffff][..]));
                    i += 1;
                }
                let ns = s.elapsed().as_nanos() as f64 / BATCH as f64;
                // A batch that straddled a phase change counts in neither.
                if phase.load(Ordering::Relaxed) == ph {
                    if ph == IDLE { &mut idle } else { &mut during }.push(ns);
                }
            }
            (idle, during)
        })
    };
    std::thread::sleep(Duration::from_millis(1500));
    phase.store(DURING, Ordering::Relaxed);
    let t0 = Instant::now();
    let report = t
        .regenerate(
            || (0..n).map(|i| Ok::<_, std::io::Error>(key16(i, 1))),
            &RegenOptions::default(),
        )
        .unwrap();
    let regen_s = t0.elapsed().as_secs_f64();
    // Idle again, on the new generation: the idle figures cover both sides
    // of the regeneration, so that a burst of load from other processes on
    // a shared machine weighs less on either.
    phase.store(IDLE, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(1500));
    phase.store(STOP, Ordering::Relaxed);
    let (mut idle, mut during) = looker.join().unwrap();
    idle.sort_by(f64::total_cmp);
    during.sort_by(f64::total_cmp);
    println!(
        "regeneration of {n} keys: {regen_s:.2} s = {:.2}x the bulk load (target <= 1.5x); {report:?}",
        regen_s / bulk_s
    );
    assert!(
        (0..n).step_by(97).all(|i| t.contains(&key16(i, 1))),
        "false negative"
    );
    let probes = 1_000_000u64;
    let fp = (0..probes).filter(|&i| t.contains(&key16(i, 55))).count() as f64 / probes as f64;
    println!(
        "measured FP after regeneration {:.3}% (target 1%)",
        100.0 * fp
    );
    let (i50, i99) = (percentile(&idle, 0.5), percentile(&idle, 0.99));
    let (d50, d99) = (percentile(&during, 0.5), percentile(&during, 0.99));
    println!(
        "lookup latency (per lookup, batches of {BATCH}): idle p50 {i50:.1} ns p99 {i99:.1} ns over {} batches; during regeneration p50 {d50:.1} ns p99 {d99:.1} ns over {} batches ({:.2}x idle p99, target <= 2x)",
        idle.len(),
        during.len(),
        d99 / i99
    );
    println!("RESULT regen_s.{label} {regen_s:.3} s");
    println!("RESULT bulkload_s.{label} {bulk_s:.3} s");
    println!("RESULT lookup_p50_ns.idle {i50:.1} ns");
    println!("RESULT lookup_p99_ns.idle {i99:.1} ns");
    println!("RESULT lookup_p50_ns.during_regen {d50:.1} ns");
    println!("RESULT lookup_p99_ns.during_regen {d99:.1} ns");
}
