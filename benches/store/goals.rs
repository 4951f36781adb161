//! (g) The figures issues 22 and 28 set goals for, each measured against
//! its bound in the same run, the subjects interleaved round by round (their
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
//!   same bytes, 17,068, to a file in the same directory + `fdatasync`).
//!   `.fast_sync`: the same on ext4 on a loop device backed by tmpfs
//!   (`fastfs.rs`), where a sync costs little and the batch's CPU shows.
//! * the guard's figures, `guard.rs`.
//!
//! `FILTERSTORE_BENCH_PROFILE=durable|fold|raw|copy|storage|guard|same|writes|none`
//! runs one subject alone instead (durable batches and the bound in turn,
//! on the fast file system when it can be mounted, without or with a fold;
//! 4M reads on one thread after the same setup; the guard's writes), for
//! `perf record` or callgrind.
//!
//! The two insert subjects each have a table sized for 10M keys at 1%
//! (48 MiB of counters; its default fold threshold, 3.09M operations, keeps
//! a fold's rewrite near one byte per logged byte), and each inserts more
//! than that over the rounds (3.6M and 4.5M keys), so that one fold (every
//! chunk rewritten, two syncs) falls inside each figure as it falls inside
//! a user's stream of batches: a ratio is total keys over total time of all
//! rounds of a subject. The fold runs in the background
//! (`StoreConfig::background_folds`, on by default): the line says how many
//! folds were taken in within the figure. A durable batch and the bound's append and sync
//! alternate, one each in turn, so that both meet the disk in the same
//! state (on this shared VM one `fdatasync` took from 0.2 to 5 ms from one
//! minute to the next). Each line says the rounds' spread and the 1-minute
//! load average.

use filterstore::{Durability, FilterStore, Table, TableSpec, WriteBatch};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

const ROUNDS: usize = 9;
/// Batches of 1,000 keys per round of the durable subject (and of the
/// bound): over the rounds, 4.5M keys, past the fold threshold of a
/// 10M-key table (3.09M) once, as a stream of durable batches meets it,
/// and on for long enough that the fold, which runs in the background
/// (`StoreConfig::background_folds`), ends and is taken in within the
/// figure: its cost to the writes (the CPU and the disk it shares with
/// them, the wait if the log reached twice the threshold) is counted.
const DURABLE_BATCHES: usize = 500;
/// Batches per round of the process-crash-safe subject.
const BUFFERED_BATCHES: usize = 400;
/// Raw sled inserts per round.
const RAW_INSERTS: u64 = 100_000;

pub fn key16(i: u64, salt: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.to_le_bytes());
    k[8..].copy_from_slice(&salt.to_le_bytes());
    k
}

pub fn load1() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    load.split_whitespace().next().unwrap_or("?").to_string()
}

/// Per-subject totals over the rounds.
#[derive(Default, Clone, Copy)]
pub struct Total {
    units: f64,
    secs: f64,
}

impl Total {
    pub fn add(&mut self, units: f64, d: Duration) -> f64 {
        self.units += units;
        self.secs += d.as_secs_f64();
        units / d.as_secs_f64()
    }
    pub fn rate(&self) -> f64 {
        self.units / self.secs
    }
}

pub fn spread(v: &mut [f64]) -> (f64, f64, f64) {
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
    fn new(t: &Table, salt: u64) -> Batches<'_> {
        Batches {
            t,
            batch: WriteBatch::with_capacity(1000, 16_000),
            next: 0,
            salt,
        }
    }

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

/// Durable batches and the bound's append + `fdatasync`, in turn.
struct Durable<'a> {
    batches: Batches<'a>,
    bound_file: std::fs::File,
    record: Vec<u8>,
    total: Total,
    bound: Total,
    ratios: Vec<f64>,
    folds: u32,
}

impl<'a> Durable<'a> {
    /// Its table is `t`; the bound's file goes in `dir` (the table's file
    /// system).
    fn new(t: &'a Table, dir: &Path) -> Durable<'a> {
        Durable {
            batches: Batches::new(t, 4),
            bound_file: std::fs::File::create(dir.join("bound.log")).unwrap(),
            // The bytes of one record of 1,000 operations (store format 4):
            // a frame of 28 + 40 + 17,000 bytes.
            record: vec![0x5au8; 28 + 40 + 17 * 1000],
            total: Total::default(),
            bound: Total::default(),
            ratios: Vec::new(),
            folds: 0,
        }
    }

    fn bound_op(&mut self) -> Duration {
        let t0 = Instant::now();
        self.bound_file.write_all(&self.record).unwrap();
        self.bound_file.sync_data().unwrap();
        t0.elapsed()
    }

    /// `batches` durable batches, each followed by one bound operation.
    fn round(&mut self, batches: usize) {
        let (mut dt, mut bt) = (Duration::ZERO, Duration::ZERO);
        let t = self.batches.t;
        for _ in 0..batches {
            let pending = t.pending_log_ops();
            dt += self.batches.one(Durability::Durable);
            self.folds += u32::from(t.pending_log_ops() < pending);
            bt += self.bound_op();
        }
        let keys = (batches * 1000) as f64;
        let rd = self.total.add(keys, dt);
        let rf = self.bound.add(keys, bt);
        self.ratios.push(rd / rf);
    }

    /// The summary line and the ratio.
    fn report(&mut self, what: &str) -> (String, f64) {
        let (d0, d1, d2) = spread(&mut self.ratios);
        let ratio = self.total.rate() / self.bound.rate();
        let line = format!(
            "(g) {what}: durable batches {:.0} keys/s = {:.3} ms per batch; bound (append 17 KB + fdatasync) {:.3} ms = {:.0} keys/s: {ratio:.2}x (rounds {d0:.2}-{d2:.2}, median {d1:.2}); {} keys, {} fold(s); load1 {}",
            self.total.rate(),
            1000.0 / self.total.rate() * 1e3,
            1000.0 / self.bound.rate() * 1e3,
            self.bound.rate(),
            self.batches.next,
            self.folds,
            load1()
        );
        (line, ratio)
    }
}

/// The table spec of the insert subjects.
fn spec() -> TableSpec {
    TableSpec::new(10_000_000, 0.01).seed(5)
}

/// `FILTERSTORE_BENCH_PROFILE=durable`: durable batches and the bound
/// alone, in `dir`: 1,500 batches (no fold), or with `fold`, as many as
/// the figure's rounds (one fold).
pub fn profile_durable(dir: &Path, fold: bool) {
    let store = FilterStore::open(dir.join("store")).unwrap();
    let td = store.create_table("durable", spec()).unwrap();
    let mut d = Durable::new(&td, &dir.join("store"));
    d.round(if fold { ROUNDS * DURABLE_BATCHES } else { 1500 });
    let (line, _) = d.report("durable alone");
    println!("{line}");
}

/// `store.durable_batch_vs_fsync_bound.fast_sync`, on the file system at
/// `dir` (`fastfs.rs`).
pub fn fast_sync_goal(dir: &Path, what: &str) -> Vec<String> {
    let store = FilterStore::open(dir.join("store")).unwrap();
    let td = store.create_table("durable", spec()).unwrap();
    let mut d = Durable::new(&td, &dir.join("store"));
    for _ in 0..ROUNDS {
        d.round(DURABLE_BATCHES);
    }
    let (line, ratio) = d.report(what);
    println!("{line}");
    vec![format!(
        "RESULT store.durable_batch_vs_fsync_bound.fast_sync {ratio:.3} x"
    )]
}

/// The first two figures.
pub fn insert_goals(dir: &Path) -> Vec<String> {
    let raw_db = sled::open(dir.join("raw")).unwrap();
    let store = FilterStore::open(dir.join("store")).unwrap();
    let (tb, td) = (
        store.create_table("buffered", spec()).unwrap(),
        store.create_table("durable", spec()).unwrap(),
    );
    let threshold = store.config().fold_threshold_ops(&td.params());
    let value = [7u8; 64];
    let (mut raw, mut buffered) = (Total::default(), Total::default());
    let mut r_buf = Vec::new();
    let mut raw_next = 0u64;
    let mut b = Batches::new(&tb, 3);
    let mut d = Durable::new(&td, &dir.join("store"));
    for round in 0..ROUNDS {
        let (mut rr, mut rb) = (0.0, 0.0);
        for j in 0..3 {
            match (round + j) % 3 {
                0 => {
                    let t0 = Instant::now();
                    for _ in 0..RAW_INSERTS {
                        raw_db.insert(key16(raw_next, 2), &value[..]).unwrap();
                        raw_next += 1;
                    }
                    rr = raw.add(RAW_INSERTS as f64, t0.elapsed());
                }
                1 => {
                    let mut t = Duration::ZERO;
                    for _ in 0..BUFFERED_BATCHES {
                        t += b.one(Durability::ProcessCrashSafe);
                    }
                    rb = buffered.add((BUFFERED_BATCHES * 1000) as f64, t);
                }
                _ => d.round(DURABLE_BATCHES),
            }
        }
        r_buf.push(rb / rr);
    }
    let (b0, b1, b2) = spread(&mut r_buf);
    let st = td.stats().unwrap();
    println!(
        "(g) {ROUNDS} rounds; tables of m = {} bits, k = {}, fold threshold {threshold} operations; {} keys process-crash-safe, estimated FP {:.3}%; load1 {}",
        st.m_bits,
        st.k,
        b.next,
        100.0 * st.estimated_fp,
        load1()
    );
    println!(
        "(g) sled raw insert {:.0} ops/s; process-crash-safe batches {:.0} keys/s: {:.2}x (rounds {b0:.2}-{b2:.2}, median {b1:.2})",
        raw.rate(),
        buffered.rate(),
        buffered.rate() / raw.rate()
    );
    let (line, ratio) = d.report("the VM's disk");
    println!("{line}");
    vec![
        format!(
            "RESULT store.buffered_batch_vs_raw_sled {:.2} x",
            buffered.rate() / raw.rate()
        ),
        format!("RESULT store.durable_batch_vs_fsync_bound {ratio:.3} x"),
    ]
}
