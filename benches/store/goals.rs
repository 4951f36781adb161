//! (g) The three figures issue 22 sets goals for, each measured against its
//! bound in the same run, the subjects interleaved round by round (their
//! order rotating) so that the load of this shared machine falls on all:
//!
//! * `store.buffered_batch_vs_raw_sled` (goal ≥ 10): process-crash-safe
//!   batches of 1,000 keys (`Durability::ProcessCrashSafe`: one `pwrite` of
//!   the log record per batch) in keys per second, over sled's raw single
//!   `insert` (16-byte keys, 64-byte values, no flush) in operations per
//!   second.
//! * `store.durable_batch_vs_fsync_bound` (goal ≥ 0.8): power-cut-safe
//!   batches of 1,000 keys (`Durability::Durable`) in keys per second, over
//!   the bound the disk allows: 1,000 keys per (append of a record of the
//!   same bytes, 17,052, to a file in the same directory + `fdatasync`).
//! * `guard.reads_vs_raw_sled_get` (goal ≥ 0.9): `Guard::read` through
//!   `SledDiffStorage` (2 threads, uniformly random keys of a base of
//!   200,000 records, 1% of them changed) in reads per second, over sled's
//!   own `Tree::get` on a database holding the same base (2 threads, same
//!   keys).
//!
//! The insert table is sized for 10M keys at 1% (48 MiB of counters), the
//! default fold threshold (1,048,576 operations) applies, and every round
//! runs enough batches that the folds they cause (each rewriting the chunks
//! it touches and syncing twice) are inside the figures: a ratio is total
//! keys over total time of all rounds of a subject, so the fold cost is
//! amortized as a user sees it. Each line says the rounds' spread and the
//! 1-minute load average.

use filterstore::{
    Change, DiffStorage, Durability, FilterStore, Guard, SledDiffStorage, TableSpec, WriteBatch,
};
use std::hint::black_box;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const ROUNDS: usize = 9;
/// Batches of 1,000 keys per round of a durable subject (and of the bound).
const DURABLE_BATCHES: usize = 200;
/// Batches per round of the process-crash-safe subject.
const BUFFERED_BATCHES: usize = 400;
/// Raw sled inserts per round.
const RAW_INSERTS: u64 = 100_000;

fn key16(i: u64, salt: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.to_le_bytes());
    k[8..].copy_from_slice(&salt.to_le_bytes());
    k
}

fn load1() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    load.split_whitespace().next().unwrap_or("?").to_string()
}

/// Per-subject totals over the rounds.
#[derive(Default, Clone, Copy)]
struct Total {
    units: f64,
    secs: f64,
}

impl Total {
    fn add(&mut self, units: f64, d: Duration) -> f64 {
        self.units += units;
        self.secs += d.as_secs_f64();
        units / d.as_secs_f64()
    }
    fn rate(&self) -> f64 {
        self.units / self.secs
    }
}

fn spread(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

/// The first two figures.
pub fn insert_goals(dir: &Path) -> Vec<String> {
    let raw_db = sled::open(dir.join("raw")).unwrap();
    let store = FilterStore::open(dir.join("store")).unwrap();
    let t = store
        .create_table("goal", TableSpec::new(10_000_000, 0.01).seed(5))
        .unwrap();
    let mut bound_file = std::fs::File::create(dir.join("store").join("bound.log")).unwrap();
    // The bytes of one record of 1,000 operations: a frame of 28 + 16 +
    // 17,000 bytes.
    let record = vec![0x5au8; 28 + 16 + 17 * 1000];
    let value = [7u8; 64];
    let (mut raw, mut buffered, mut durable, mut bound) = Default::default();
    let (mut r_buf, mut r_dur) = (Vec::new(), Vec::new());
    let mut next = 0u64;
    let mut raw_next = 0u64;
    let mut batch = WriteBatch::with_capacity(1000, 16_000);
    let mut run_batches = |n: usize, level: Durability, next: &mut u64| {
        let t0 = Instant::now();
        for _ in 0..n {
            batch.clear();
            for _ in 0..1000 {
                batch.insert(&key16(*next, 3));
                *next += 1;
            }
            t.apply(&batch, level).unwrap();
        }
        t0.elapsed()
    };
    for round in 0..ROUNDS {
        let (mut rr, mut rb, mut rd, mut rf) = (0.0, 0.0, 0.0, 0.0);
        for j in 0..4 {
            match (round + j) % 4 {
                0 => {
                    let t0 = Instant::now();
                    for _ in 0..RAW_INSERTS {
                        raw_db.insert(key16(raw_next, 2), &value[..]).unwrap();
                        raw_next += 1;
                    }
                    rr = Total::add(&mut raw, RAW_INSERTS as f64, t0.elapsed());
                }
                1 => {
                    let d = run_batches(BUFFERED_BATCHES, Durability::ProcessCrashSafe, &mut next);
                    rb = Total::add(&mut buffered, (BUFFERED_BATCHES * 1000) as f64, d);
                }
                2 => {
                    let d = run_batches(DURABLE_BATCHES, Durability::Durable, &mut next);
                    rd = Total::add(&mut durable, (DURABLE_BATCHES * 1000) as f64, d);
                }
                _ => {
                    let t0 = Instant::now();
                    for _ in 0..DURABLE_BATCHES {
                        bound_file.write_all(&record).unwrap();
                        bound_file.sync_data().unwrap();
                    }
                    rf = Total::add(&mut bound, (DURABLE_BATCHES * 1000) as f64, t0.elapsed());
                }
            }
        }
        // The bound's file grows as the log would until a fold empties it.
        if round % 3 == 2 {
            bound_file.set_len(0).unwrap();
            bound_file = std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(dir.join("store").join("bound.log"))
                .unwrap();
        }
        r_buf.push(rb / rr);
        r_dur.push(rd / rf);
    }
    let s = t.stats().unwrap();
    let (b0, b1, b2) = spread(&mut r_buf);
    let (d0, d1, d2) = spread(&mut r_dur);
    println!(
        "(g) {ROUNDS} rounds; keys inserted {next} (table m = {} bits, k = {}, estimated FP {:.3}%); load1 {}",
        s.m_bits,
        s.k,
        100.0 * s.estimated_fp,
        load1()
    );
    println!(
        "(g) sled raw insert {:.0} ops/s; process-crash-safe batches {:.0} keys/s: {:.2}x (rounds {b0:.2}-{b2:.2}, median {b1:.2})",
        raw.rate(),
        buffered.rate(),
        buffered.rate() / raw.rate()
    );
    println!(
        "(g) durable batches {:.0} keys/s = {:.2} ms per batch; bound (append 17 KB + fdatasync) {:.2} ms = {:.0} keys/s: {:.2}x (rounds {d0:.2}-{d2:.2}, median {d1:.2})",
        durable.rate(),
        1000.0 / durable.rate() * 1e3,
        1000.0 / bound.rate() * 1e3,
        bound.rate(),
        durable.rate() / bound.rate()
    );
    vec![
        format!(
            "RESULT store.buffered_batch_vs_raw_sled {:.2} x",
            buffered.rate() / raw.rate()
        ),
        format!(
            "RESULT store.durable_batch_vs_fsync_bound {:.3} x",
            durable.rate() / bound.rate()
        ),
    ]
}

/// Reads per second of `threads` threads each calling `read` on
/// uniformly random keys among `n`, for `secs`.
fn reads_per_s(threads: usize, n: u64, secs: f64, read: &(dyn Fn(&[u8]) + Sync)) -> f64 {
    let done = AtomicU64::new(0);
    let stop = Instant::now() + Duration::from_secs_f64(secs);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for th in 0..threads {
            let done = &done;
            s.spawn(move || {
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ th as u64;
                let mut count = 0u64;
                while Instant::now() < stop {
                    for _ in 0..256 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        read(&key16(x % n, 1));
                    }
                    count += 256;
                }
                done.fetch_add(count, Ordering::Relaxed);
            });
        }
    });
    done.load(Ordering::Relaxed) as f64 / t0.elapsed().as_secs_f64()
}

/// The third figure.
pub fn guard_goal(dir: &Path) -> Vec<String> {
    const RECORDS: u64 = 200_000;
    const THREADS: usize = 2;
    let value = [9u8; 64];
    let raw = sled::open(dir.join("raw-guard")).unwrap();
    let raw_base = raw.open_tree("base").unwrap();
    for i in 0..RECORDS {
        raw_base.insert(key16(i, 1), &value[..]).unwrap();
    }
    raw.flush().unwrap();
    let store = FilterStore::open(dir.join("guard-store")).unwrap();
    let storage = SledDiffStorage::open(&store, "g").unwrap();
    storage
        .load_base((0..RECORDS).map(|i| (key16(i, 1), value)))
        .unwrap();
    let table = store
        .create_table("changed", TableSpec::new(RECORDS / 100, 0.01).seed(4))
        .unwrap();
    let guard = Guard::open(storage, table).unwrap();
    let changes: Vec<(Vec<u8>, Change)> = (0..RECORDS)
        .step_by(100)
        .map(|i| (key16(i, 1).to_vec(), Change::Put(b"changed".to_vec())))
        .collect();
    guard.write(&changes).unwrap();
    // Warm both caches.
    reads_per_s(THREADS, RECORDS, 0.5, &|k| {
        black_box(raw_base.get(k).unwrap());
    });
    reads_per_s(THREADS, RECORDS, 0.5, &|k| {
        black_box(guard.read(k).unwrap());
    });
    let (mut raw_total, mut guard_total, mut storage_total) =
        (Total::default(), Total::default(), Total::default());
    let mut ratios = Vec::new();
    let secs = 0.6;
    for round in 0..ROUNDS {
        let (mut r, mut g, mut s) = (0.0, 0.0, 0.0);
        for j in 0..3 {
            match (round + j) % 3 {
                0 => {
                    r = reads_per_s(THREADS, RECORDS, secs, &|k| {
                        black_box(raw_base.get(k).unwrap());
                    });
                    raw_total.add(r * secs, Duration::from_secs_f64(secs));
                }
                1 => {
                    g = reads_per_s(THREADS, RECORDS, secs, &|k| {
                        black_box(guard.read(k).unwrap());
                    });
                    guard_total.add(g * secs, Duration::from_secs_f64(secs));
                }
                _ => {
                    s = reads_per_s(THREADS, RECORDS, secs, &|k| {
                        black_box(guard.storage().read_base(k).unwrap());
                    });
                    storage_total.add(s * secs, Duration::from_secs_f64(secs));
                }
            }
        }
        let _ = s;
        ratios.push(g / r);
    }
    let (lo, med, hi) = spread(&mut ratios);
    let st = guard.stats();
    println!(
        "(g) reads, {THREADS} threads, {RECORDS} records, 1% changed: sled get {:.0}/s; Guard::read {:.0}/s ({:.2}x; rounds {lo:.2}-{hi:.2}, median {med:.2}); SledDiffStorage::read_base {:.0}/s ({:.2}x); false positives {} of {} reads; load1 {}",
        raw_total.rate(),
        guard_total.rate(),
        guard_total.rate() / raw_total.rate(),
        storage_total.rate(),
        storage_total.rate() / raw_total.rate(),
        st.false_positives,
        st.reads,
        load1()
    );
    vec![
        format!(
            "RESULT guard.reads_vs_raw_sled_get {:.3} x",
            guard_total.rate() / raw_total.rate()
        ),
        format!(
            "RESULT guard.storage_reads_vs_raw_sled_get {:.3} x",
            storage_total.rate() / raw_total.rate()
        ),
    ]
}
