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
//!   keys), each thread's reads over its own CPU time (`clock.rs`); beside
//!   them, `SledDiffStorage::read_base` alone and sled's get with the value
//!   copied into a `Vec` (what any `DiffStorage` returns), 30 short rounds.
//!
//! `FILTERSTORE_BENCH_PROFILE=durable|raw|copy|storage|guard|none` runs one
//! subject alone instead (durable batches and the bound in turn, or 4M
//! reads on one thread after the same setup), for `perf record`.
//!
//! The two insert subjects each have a table sized for 10M keys at 1%
//! (48 MiB of counters; its default fold threshold, 3.09M operations, keeps
//! a fold's rewrite near one byte per logged byte), and each inserts more
//! than that over the rounds (3.6M and 3.15M keys), so that one fold (every
//! chunk rewritten, two syncs) falls inside each figure as it falls inside
//! a user's stream of batches: a ratio is total keys over total time of all
//! rounds of a subject. A durable batch and the bound's append and sync
//! alternate, one each in turn, so that both meet the disk in the same
//! state (on this shared VM one `fdatasync` took from 0.9 to 5 ms from one
//! second to the next). Each line says the rounds' spread and the 1-minute
//! load average.

use filterstore::{
    Change, DiffStorage, Durability, FilterStore, Guard, SledDiffStorage, Table, TableSpec,
    WriteBatch,
};
use std::hint::black_box;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use super::clock::Tick;

const ROUNDS: usize = 9;
/// Batches of 1,000 keys per round of the durable subject (and of the
/// bound): over the rounds, 3.15M keys, past the fold threshold of a
/// 10M-key table (3.09M) once, as a stream of durable batches meets it.
const DURABLE_BATCHES: usize = 350;
/// Batches per round of the process-crash-safe subject.
const BUFFERED_BATCHES: usize = 400;
/// Raw sled inserts per round.
const RAW_INSERTS: u64 = 100_000;
/// Rounds of the guard's reads (0.3 s per subject each): short and many,
/// since the cache contention of the other processes on this machine moves
/// a subject's rate by 20% from one second to the next.
const GUARD_ROUNDS: usize = 30;

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

/// Inserts batches of 1,000 new keys into `t` at `level`.
struct Batches<'a> {
    t: &'a Table,
    batch: WriteBatch,
    next: u64,
    salt: u64,
}

impl Batches<'_> {
    /// One batch; returns the time of its `apply` alone.
    fn one(&mut self, level: Durability) -> Duration {
        self.batch.clear();
        for _ in 0..1000 {
            self.batch.insert(&key16(self.next, self.salt));
            self.next += 1;
        }
        let t0 = Instant::now();
        self.t.apply(&self.batch, level).unwrap();
        t0.elapsed()
    }
}

/// The first two figures.
pub fn insert_goals(dir: &Path) -> Vec<String> {
    let raw_db = sled::open(dir.join("raw")).unwrap();
    let store = FilterStore::open(dir.join("store")).unwrap();
    let spec = TableSpec::new(10_000_000, 0.01).seed(5);
    let (tb, td) = (
        store.create_table("buffered", spec).unwrap(),
        store.create_table("durable", spec).unwrap(),
    );
    let threshold = store.config().fold_threshold_ops(&td.params());
    let mut bound_file = std::fs::File::create(dir.join("store").join("bound.log")).unwrap();
    // The bytes of one record of 1,000 operations: a frame of 28 + 16 +
    // 17,000 bytes.
    let record = vec![0x5au8; 28 + 16 + 17 * 1000];
    let mut bound_op = || {
        let t0 = Instant::now();
        bound_file.write_all(&record).unwrap();
        bound_file.sync_data().unwrap();
        t0.elapsed()
    };
    let value = [7u8; 64];
    let (mut raw, mut buffered, mut durable, mut bound) = Default::default();
    let (mut r_buf, mut r_dur) = (Vec::new(), Vec::new());
    let mut raw_next = 0u64;
    let (mut b, mut d) = (
        Batches {
            t: &tb,
            batch: WriteBatch::with_capacity(1000, 16_000),
            next: 0,
            salt: 3,
        },
        Batches {
            t: &td,
            batch: WriteBatch::with_capacity(1000, 16_000),
            next: 0,
            salt: 4,
        },
    );
    // FILTERSTORE_BENCH_PROFILE=durable: durable batches and the bound
    // alone (no fold: 1,500 batches stay below the threshold), to profile.
    if std::env::var("FILTERSTORE_BENCH_PROFILE").as_deref() == Ok("durable") {
        let (mut dt, mut bt) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..1500 {
            dt += d.one(Durability::Durable);
            bt += bound_op();
        }
        println!(
            "(g) durable alone: {:.3} ms per batch; bound {:.3} ms",
            dt.as_secs_f64() / 1.5,
            bt.as_secs_f64() / 1.5
        );
        return Vec::new();
    }
    let mut folds = 0;
    for round in 0..ROUNDS {
        let (mut rr, mut rb, mut rd, mut rf) = (0.0, 0.0, 0.0, 0.0);
        for j in 0..3 {
            match (round + j) % 3 {
                0 => {
                    let t0 = Instant::now();
                    for _ in 0..RAW_INSERTS {
                        raw_db.insert(key16(raw_next, 2), &value[..]).unwrap();
                        raw_next += 1;
                    }
                    rr = Total::add(&mut raw, RAW_INSERTS as f64, t0.elapsed());
                }
                1 => {
                    let mut t = Duration::ZERO;
                    for _ in 0..BUFFERED_BATCHES {
                        t += b.one(Durability::ProcessCrashSafe);
                    }
                    rb = Total::add(&mut buffered, (BUFFERED_BATCHES * 1000) as f64, t);
                }
                _ => {
                    // A durable batch and the bound's append + sync in
                    // turn, so that both meet the disk in the same state.
                    let (mut dt, mut bt) = (Duration::ZERO, Duration::ZERO);
                    for _ in 0..DURABLE_BATCHES {
                        let pending = td.pending_log_ops();
                        dt += d.one(Durability::Durable);
                        folds += u32::from(td.pending_log_ops() < pending);
                        bt += bound_op();
                    }
                    let keys = (DURABLE_BATCHES * 1000) as f64;
                    rd = Total::add(&mut durable, keys, dt);
                    rf = Total::add(&mut bound, keys, bt);
                }
            }
        }
        r_buf.push(rb / rr);
        r_dur.push(rd / rf);
    }
    let (b0, b1, b2) = spread(&mut r_buf);
    let (d0, d1, d2) = spread(&mut r_dur);
    let st = td.stats().unwrap();
    println!(
        "(g) {ROUNDS} rounds; tables of m = {} bits, k = {}, fold threshold {threshold} operations; {} keys process-crash-safe, {} durable ({folds} fold(s) among the durable batches), estimated FP {:.3}%; load1 {}",
        st.m_bits,
        st.k,
        b.next,
        d.next,
        100.0 * st.estimated_fp,
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
/// uniformly random keys among `n`, for `secs` of wall time: each thread's
/// reads over its own CPU time (`clock.rs`: the time it waited for a CPU on
/// this shared machine is left out; contention between the threads, for
/// locks and cache lines, counts), summed over the threads.
fn reads_per_s(threads: usize, n: u64, secs: f64, read: &(dyn Fn(&[u8]) + Sync)) -> f64 {
    let stop = Instant::now() + Duration::from_secs_f64(secs);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|th| {
                s.spawn(move || {
                    let t0 = Tick::now();
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
                    count as f64 / t0.elapsed().as_secs_f64()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    })
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
    // One subject alone for a while, to profile it (`perf record`):
    // FILTERSTORE_BENCH_PROFILE=raw|storage|guard.
    if let Ok(which) = std::env::var("FILTERSTORE_BENCH_PROFILE") {
        // 4M reads on one thread: `perf stat` of two subjects differs by
        // their reads alone (the setup is the same).
        let t0 = Tick::now();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..4_000_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = key16(x % RECORDS, 1);
            match which.as_str() {
                "raw" => drop(black_box(raw_base.get(k).unwrap())),
                "copy" => drop(black_box(raw_base.get(k).unwrap().map(|v| v.to_vec()))),
                "storage" => drop(black_box(guard.storage().read_base(&k).unwrap())),
                "none" => drop(black_box(k)),
                _ => drop(black_box(guard.read(&k).unwrap())),
            }
        }
        println!(
            "(g) {which} alone: {:.0} ns per read",
            t0.elapsed().as_secs_f64() / 4e-3
        );
        return Vec::new();
    }
    // A fourth subject, sled's get with the value copied into a `Vec`:
    // what any `DiffStorage` returns (`read_base` gives an owned value), so
    // the floor of the storage's own overhead.
    let mut totals = [Total::default(); 4];
    let mut ratios = Vec::new();
    let secs = 0.3;
    for round in 0..GUARD_ROUNDS {
        let mut rates = [0.0; 4];
        for j in 0..4 {
            let which = (round + j) % 4;
            rates[which] = reads_per_s(THREADS, RECORDS, secs, &|k| match which {
                0 => drop(black_box(raw_base.get(k).unwrap())),
                1 => drop(black_box(guard.read(k).unwrap())),
                2 => drop(black_box(guard.storage().read_base(k).unwrap())),
                _ => drop(black_box(raw_base.get(k).unwrap().map(|v| v.to_vec()))),
            });
            totals[which].add(rates[which] * secs, Duration::from_secs_f64(secs));
        }
        ratios.push(rates[1] / rates[0]);
    }
    let [raw_total, guard_total, storage_total, copy_total] = totals;
    let (lo, med, hi) = spread(&mut ratios);
    let st = guard.stats();
    println!(
        "(g) reads, {THREADS} threads, {GUARD_ROUNDS} rounds, {RECORDS} records, 1% changed: sled get {:.0}/s; Guard::read {:.0}/s ({:.2}x; rounds {lo:.2}-{hi:.2}, median {med:.2}); SledDiffStorage::read_base {:.0}/s ({:.2}x); sled get + copy to a Vec {:.0}/s ({:.2}x); false positives {} of {} reads; load1 {}",
        raw_total.rate(),
        guard_total.rate(),
        guard_total.rate() / raw_total.rate(),
        storage_total.rate(),
        storage_total.rate() / raw_total.rate(),
        copy_total.rate(),
        copy_total.rate() / raw_total.rate(),
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
