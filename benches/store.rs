//! `cargo bench --bench store`: the persistent store against sled itself.
//!
//! * (a) durable inserts in batches of 1,000 keys, one flush per batch,
//!   against sled's raw single `insert` of 16-byte keys with 64-byte values
//!   (no flush) measured in the same run;
//! * (b) durable inserts of one key per batch (one flush per key);
//! * (c) lookups of absent and present keys in a 10M-key table, with the
//!   measured false-positive rate;
//! * (d) reopen time of a 10M-key table and the RSS after reopen next to the
//!   size of its bit filter, measured in a child process (this binary in
//!   child mode) so that the parent's memory — criterion, the build — does
//!   not count.
//! * (e) `Table::contains` and `Table::reader` against a bare `BitFilter`
//!   with the same bits, interleaved (see [`lookup_ratios`]);
//! * (f) bulk loads of as many keys into new tables, through the library
//!   and through `filterstore insert` (`store/bulk.rs`);
//! * (g) the figures issues 22 and 28 set goals for, each against its bound
//!   in the same run, interleaved (`store/goals.rs`, `store/guard.rs`,
//!   `store/guard_reads.rs`):
//!   `store.buffered_batch_vs_raw_sled`, `store.durable_batch_vs_fsync_bound`
//!   (on the VM's disk, and `.fast_sync` on ext4 on a tmpfs-backed loop
//!   device that the bench mounts itself as root, `store/fastfs.rs`),
//!   `guard.reads_vs_raw_sled_get` (each subject in a process of its own)
//!   and `guard.changed_reads_vs_raw_sled_get`, `guard.writes_vs_raw_sled_insert`,
//!   `guard.writes_vs_fsync_bound`, `guard.merge_keys_per_s`,
//!   `guard.buffered_writes_vs_durable`, `guard.group_commit_4_writers_vs_1`
//!   (the last five also `.fast_sync`).
//!   `FILTERSTORE_BENCH_ONLY=goals` runs only this part and (h),
//!   `FILTERSTORE_BENCH_ONLY=guard` only the guard's figures
//!   (`guard-writes`: only its writes' figures; `guard-reads`: only the
//!   reads' figures in processes of their own).
//! * (h) a store of 10,000 tables and one of 10,000 sealed filters: create,
//!   open, list, look up across, drop (`store/scale.rs`);
//!   `FILTERSTORE_BENCH_ONLY=scale` runs only this part.
//!
//! Ends with `RESULT <name> <value> <unit>` lines. The figures come from the
//! same criterion measurements (total time over total iterations of every
//! sample). Set `FILTERSTORE_BENCH_KEYS` to change the 10M of (c), (d) and (f).

use criterion::{BenchmarkId, Criterion, Throughput};
use filterstore::BloomRead;
use filterstore::{BitFilter, Durability, FilterStore, StoreConfig, Table, TableSpec, WriteBatch};
use std::cell::Cell;
use std::hint::black_box;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

#[path = "store/bulk.rs"]
mod bulk;
#[path = "common/clock.rs"]
mod clock;
#[path = "store/fastfs.rs"]
mod fastfs;
#[path = "store/goals.rs"]
mod goals;
#[path = "store/guard.rs"]
mod guard;
#[path = "store/guard_reads.rs"]
mod guard_reads;
#[path = "store/scale.rs"]
mod scale;
use clock::Tick;

const CHILD_ENV: &str = "FILTERSTORE_BENCH_REOPEN";

/// 16-byte keys: a counter and a fixed salt, so that every key is new.
fn key16(i: u64, salt: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.to_le_bytes());
    k[8..].copy_from_slice(&salt.to_le_bytes());
    k
}

/// Accumulates what criterion measured, to print RESULT lines at the end.
#[derive(Default)]
struct Tally {
    iters: Cell<u64>,
    time: Cell<Duration>,
}

impl Tally {
    fn add(&self, iters: u64, t: Duration) -> Duration {
        self.iters.set(self.iters.get() + iters);
        self.time.set(self.time.get() + t);
        t
    }
    /// Runs `f` `iters` times and adds the time taken.
    fn run(&self, iters: u64, mut f: impl FnMut()) -> Duration {
        let t0 = Instant::now();
        for _ in 0..iters {
            f();
        }
        self.add(iters, t0.elapsed())
    }
    fn per_iter_s(&self) -> f64 {
        self.time.get().as_secs_f64() / self.iters.get().max(1) as f64
    }
}

fn vm_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn bench_keys() -> u64 {
    std::env::var("FILTERSTORE_BENCH_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000)
}

/// Child mode: open the store, time the open of the table, report RSS.
fn reopen_child(dir: &Path) {
    let rss_before = vm_rss_mb();
    let t0 = Instant::now();
    let store = FilterStore::open(dir).expect("open store");
    let table = store.open_table("big").expect("open table");
    let open_s = t0.elapsed().as_secs_f64();
    let rss_after = vm_rss_mb();
    // Touch every word of the bit filter (a full scan), as lookups would.
    let ones = table.bloom().count_ones();
    let rss_touched = vm_rss_mb();
    let bits_mb = table.params().bit_bytes() as f64 / (1 << 20) as f64;
    let cache_mb = store.config().cache_capacity_bytes() as f64 / (1 << 20) as f64;
    println!(
        "reopen open_s={open_s:.4} rss_before_mb={rss_before:.1} rss_mb={rss_after:.1} rss_touched_mb={rss_touched:.1} bits_mb={bits_mb:.2} cache_mb={cache_mb:.0} ones={ones} pending={}",
        table.pending_log_ops()
    );
}

/// (e) `Table::contains` and a `TableReader` against a bare `BitFilter`
/// holding the same bits (same parameters, same keys), on absent keys:
/// `LOOKUP_ROUNDS` rounds, each timing every subject on its own segment of
/// keys, in a rotating order, on the thread's CPU clock (`common/clock.rs`), so
/// that load from other processes falls on all three; the figure is the
/// median of the per-round ratios, with the spread and the 1-minute load
/// average beside it.
fn lookup_ratios(t: &Table, n: u64, absent: &[[u8; 16]]) -> Vec<String> {
    const LOOKUP_ROUNDS: usize = 15;
    const SEGMENT: usize = 50_000;
    let bare = BitFilter::new(t.params()).unwrap();
    for i in 0..n {
        bare.insert(&key16(i, 1));
    }
    let mut reader = t.reader();
    let mut ns = [const { Vec::new() }; 3];
    for round in 0..LOOKUP_ROUNDS {
        for j in 0..3 {
            let subject = (round + j) % 3;
            // A segment of its own for every subject of the round: the table
            // and the reader share one filter, and a segment the other had
            // just looked up would find its lines in this core's L2.
            let segments = absent.len() / SEGMENT;
            let keys = &absent[(round * 3 + j) % segments * SEGMENT..][..SEGMENT];
            let t0 = Tick::now();
            let found = match subject {
                0 => keys.iter().filter(|k| bare.contains(&k[..])).count(),
                1 => keys.iter().filter(|k| t.contains(&k[..])).count(),
                _ => keys.iter().filter(|k| reader.contains(&k[..])).count(),
            };
            black_box(found);
            ns[subject].push(t0.elapsed().as_secs_f64() * 1e9 / SEGMENT as f64);
        }
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load1 = load.split_whitespace().next().unwrap_or("?").to_string();
    let mut out = Vec::new();
    for (subject, name) in [(1, "table_contains"), (2, "table_reader")] {
        let mut r: Vec<f64> = (0..LOOKUP_ROUNDS)
            .map(|i| ns[subject][i] / ns[0][i])
            .collect();
        r.sort_by(|a, b| a.total_cmp(b));
        println!(
            "{name}: {:.1} ns vs bare {:.1} ns; median of per-round ratios {:.3} (min {:.3}, max {:.3}); load1 {load1}; {}",
            median_of(&ns[subject]),
            median_of(&ns[0]),
            r[r.len() / 2],
            r[0],
            r[r.len() - 1],
            clock::source()
        );
        out.push(format!(
            "RESULT ratio.{name}_vs_bare {:.3} x",
            r[r.len() / 2]
        ));
    }
    out
}

fn median_of(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Builds a table of `n` keys: bulk load with a large fold threshold, then
/// the last 1,000,000 keys through the default configuration, under its
/// fold threshold (for a blocked table at least 1,048,576 operations; 3.09M for a 10M-key
/// table, `StoreConfig::fold_threshold_ops`), so that the reopen replays an
/// unfolded log of 1M operations.
fn build_big(dir: &Path, n: u64) -> Duration {
    let t0 = Instant::now();
    let tail = n.min(1_000_000);
    {
        let cfg = StoreConfig::default().fold_threshold(4 << 20);
        let store = FilterStore::open_with(dir, cfg).unwrap();
        let t = store
            .create_table("big", TableSpec::new(n, 0.01).seed(0xB16))
            .unwrap();
        let mut b = WriteBatch::with_capacity(4096, 4096 * 16);
        for start in (0..n - tail).step_by(4096) {
            b.clear();
            for i in start..(start + 4096).min(n - tail) {
                b.insert(&key16(i, 1));
            }
            t.apply(&b, Durability::Buffered).unwrap();
        }
        t.fold().unwrap();
        t.flush().unwrap();
    }
    let store = open_retry(dir, StoreConfig::default());
    let t = store.open_table("big").unwrap();
    let mut b = WriteBatch::with_capacity(1000, 1000 * 16);
    for start in (n - tail..n).step_by(1000) {
        b.clear();
        for i in start..(start + 1000).min(n) {
            b.insert(&key16(i, 1));
        }
        t.apply(&b, Durability::Buffered).unwrap();
    }
    t.flush().unwrap();
    t0.elapsed()
}

fn open_retry(dir: &Path, cfg: StoreConfig) -> FilterStore {
    for _ in 0..100 {
        if let Ok(s) = FilterStore::open_with(dir, cfg) {
            return s;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    FilterStore::open_with(dir, cfg).unwrap()
}

fn main() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        reopen_child(Path::new(&dir));
        return;
    }
    if let Ok(spec) = std::env::var(guard_reads::CHILD_ENV) {
        guard_reads::child(&spec);
        return;
    }
    // (g) first: it wants the machine as quiet as this run leaves it.
    let goals_dir = tempfile::tempdir().unwrap();
    if let Ok(which) = std::env::var("FILTERSTORE_BENCH_PROFILE") {
        // One subject alone, to profile it (`store/goals.rs`).
        match which.as_str() {
            "durable" | "fold" => match fastfs::FastFs::mount() {
                Ok(fs) => goals::profile_durable(&fs.path(), which == "fold"),
                Err(why) => {
                    println!("(g) no fast-sync file system ({why}): the VM's disk");
                    goals::profile_durable(goals_dir.path(), which == "fold");
                }
            },
            "writes" => guard::profile_writes(goals_dir.path()),
            _ => drop(guard::guard_reads_goal(goals_dir.path())),
        }
        return;
    }
    if std::env::var("FILTERSTORE_BENCH_ONLY").as_deref() == Ok("scale") {
        for r in scale::scale(goals_dir.path()) {
            println!("{r}");
        }
        return;
    }
    if std::env::var("FILTERSTORE_BENCH_ONLY").as_deref() == Ok("guard-writes") {
        for r in guard_writes(goals_dir.path()) {
            println!("{r}");
        }
        return;
    }
    if std::env::var("FILTERSTORE_BENCH_ONLY").as_deref() == Ok("guard-reads") {
        for r in guard_reads::guard_reads_processes(goals_dir.path()) {
            println!("{r}");
        }
        return;
    }
    if std::env::var("FILTERSTORE_BENCH_ONLY").as_deref() == Ok("guard") {
        for r in guard_reads::guard_reads_processes(goals_dir.path())
            .into_iter()
            .chain(guard::guard_reads_goal(goals_dir.path()))
            .chain(guard_writes(goals_dir.path()))
        {
            println!("{r}");
        }
        return;
    }
    let mut goal_results = goals::insert_goals(goals_dir.path());
    match fastfs::FastFs::mount() {
        Ok(fs) => {
            let what = fs.describe();
            println!("(g) fast-sync file system: {what}");
            goal_results.extend(goals::fast_sync_goal(&fs.path(), &what));
        }
        Err(why) => println!(
            "(g) no RESULT store.durable_batch_vs_fsync_bound.fast_sync: cannot mount the \
             fast-sync file system ({why})"
        ),
    }
    goal_results.extend(guard_reads::guard_reads_processes(goals_dir.path()));
    goal_results.extend(guard::guard_reads_goal(goals_dir.path()));
    goal_results.extend(guard_writes(goals_dir.path()));
    goal_results.extend(scale::scale(goals_dir.path()));
    drop(goals_dir);
    if std::env::var("FILTERSTORE_BENCH_ONLY").as_deref() == Ok("goals") {
        for r in goal_results {
            println!("{r}");
        }
        return;
    }
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .configure_from_args();
    let mut results: Vec<String> = Vec::new();

    // (a) and (b): durable inserts, against sled's raw insert.
    let raw = Tally::default();
    let b1000 = Tally::default();
    let b1 = Tally::default();
    let single = Tally::default();
    {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path().join("raw")).unwrap();
        let value = [7u8; 64];
        let mut g = c.benchmark_group("store_insert");
        g.throughput(Throughput::Elements(1));
        let mut next = 0u64;
        g.bench_function("sled_raw_insert_16B_key_64B_value", |b| {
            b.iter_custom(|iters| {
                raw.run(iters, || {
                    db.insert(key16(next, 2), &value[..]).unwrap();
                    next += 1;
                })
            })
        });
        drop(db);

        let store = FilterStore::open(dir.path().join("store")).unwrap();
        // Sized for more than the keys the run inserts (a few million).
        let t = store
            .create_table("ins", TableSpec::new(10_000_000, 0.01).seed(3))
            .unwrap();
        let mut next = 0u64;
        let mut batch = WriteBatch::with_capacity(1000, 16_000);
        g.throughput(Throughput::Elements(1000));
        g.bench_function(BenchmarkId::new("durable_batch", 1000), |b| {
            b.iter_custom(|iters| {
                b1000.run(iters, || {
                    batch.clear();
                    for _ in 0..1000 {
                        batch.insert(&key16(next, 3));
                        next += 1;
                    }
                    t.apply(&batch, Durability::Durable).unwrap();
                })
            })
        });
        g.throughput(Throughput::Elements(1));
        g.bench_function(BenchmarkId::new("durable_batch", 1), |b| {
            b.iter_custom(|iters| {
                b1.run(iters, || {
                    batch.clear();
                    batch.insert(&key16(next, 3));
                    next += 1;
                    t.apply(&batch, Durability::Durable).unwrap();
                })
            })
        });
        g.bench_function("single_insert_buffered", |b| {
            b.iter_custom(|iters| {
                single.run(iters, || {
                    t.insert(&key16(next, 3)).unwrap();
                    next += 1;
                })
            })
        });
        g.finish();
        t.flush().unwrap();
        let inserted = next;
        let s = t.stats().unwrap();
        println!(
            "insert table: {inserted} keys, m = {} bits, k = {}, estimated FP {:.3}%, disk {:.1} MB",
            s.m_bits,
            s.k,
            100.0 * s.estimated_fp,
            store.size_on_disk().unwrap_or(0) as f64 / 1e6
        );
    }
    let raw_ops = 1.0 / raw.per_iter_s();
    let keys1000 = 1000.0 / b1000.per_iter_s();
    let keys1 = 1.0 / b1.per_iter_s();
    println!(
        "durable batches of 1,000: {:.0} keys/s = {:.1}x sled's raw single insert ({raw_ops:.0} ops/s)",
        keys1000,
        keys1000 / raw_ops
    );
    results.push(format!(
        "RESULT store_insert_keys_per_s.batch1000 {keys1000:.0} keys/s"
    ));
    results.push(format!(
        "RESULT store_insert_keys_per_s.batch1 {keys1:.0} keys/s"
    ));
    results.push(format!(
        "RESULT sled_insert_ops_per_s.raw {raw_ops:.0} ops/s"
    ));
    results.push(format!(
        "RESULT store_insert_ops_per_s.single_buffered {:.0} ops/s",
        1.0 / single.per_iter_s()
    ));

    // (d) first: build the big table, reopen it in a child.
    let n = bench_keys();
    let dir = tempfile::tempdir().unwrap();
    let build = build_big(dir.path(), n);
    println!("built a {n}-key table in {:.1} s", build.as_secs_f64());
    // Give sled's background threads a moment to let go of the lock.
    std::thread::sleep(Duration::from_millis(200));
    let out = Command::new(std::env::current_exe().unwrap())
        .env(CHILD_ENV, dir.path())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout).to_string();
    println!("{}", report.trim());
    let field = |name: &str| -> f64 {
        report
            .split_whitespace()
            .find_map(|f| f.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    };
    let (open_s, rss, bits_mb, cache_mb) = (
        field("open_s"),
        field("rss_mb"),
        field("bits_mb"),
        field("cache_mb"),
    );
    println!(
        "reopen of {n} keys: {open_s:.3} s; RSS {rss:.1} MB = {:.2}x (bit filter {bits_mb:.1} MB + cache {cache_mb:.0} MB)",
        rss / (bits_mb + cache_mb)
    );

    // (c) lookups in the big table.
    let store = open_retry(dir.path(), StoreConfig::default());
    let t = store.open_table("big").unwrap();
    let absent: Vec<[u8; 16]> = (0..1_000_000u64).map(|i| key16(i, 99)).collect();
    let present: Vec<[u8; 16]> = (0..1_000_000u64).map(|i| key16(i * 7 % n, 1)).collect();
    let fp = absent.iter().filter(|k| t.contains(&k[..])).count() as f64 / absent.len() as f64;
    assert!(present.iter().all(|k| t.contains(&k[..])), "false negative");
    let look = Tally::default();
    let mut g = c.benchmark_group("store_lookup");
    g.throughput(Throughput::Elements(1));
    let mut i = 0usize;
    g.bench_function("absent_10M", |b| {
        b.iter_custom(|iters| {
            look.run(iters, || {
                black_box(t.contains(&absent[i % absent.len()][..]));
                i += 1;
            })
        })
    });
    g.bench_function("present_10M", |b| {
        b.iter(|| {
            i += 1;
            black_box(t.contains(&present[i % present.len()][..]))
        })
    });
    g.finish();
    let lookup_ns = look.per_iter_s() * 1e9;
    println!(
        "lookup of absent keys: {lookup_ns:.1} ns, measured FP {:.3}% (target 1%)",
        100.0 * fp
    );
    results.push(format!("RESULT store_lookup_ns {lookup_ns:.1} ns"));
    results.extend(lookup_ratios(&t, n, &absent));
    results.push(format!("RESULT store_open_s.10M {open_s:.3} s"));
    results.push(format!("RESULT store_rss_mb.10M {rss:.1} MB"));
    results.push(format!("RESULT store_bits_mb.10M {bits_mb:.1} MB"));
    drop(t);
    drop(store);
    // (f) bulk loads into new tables.
    results.extend(bulk::bulk_loads(n, key16));
    results.extend(goal_results);
    for r in results {
        println!("{r}");
    }
}

/// The guard's write figures on the VM's disk, then on the fast-sync file
/// system when the bench can mount it (`.fast_sync`: a sync there costs
/// about what one of a fast SSD does, so what `write_diff` adds to the
/// bytes and the sync weighs as it would there).
fn guard_writes(dir: &std::path::Path) -> Vec<String> {
    let mut results = guard::guard_writes_goal(dir, "");
    results.extend(guard::guard_buffered_goal(dir, ""));
    results.extend(guard::guard_group_goal(dir, ""));
    match fastfs::FastFs::mount() {
        Ok(fs) => {
            println!("(g) fast-sync file system: {}", fs.describe());
            results.extend(guard::guard_writes_goal(&fs.path(), ".fast_sync"));
            results.extend(guard::guard_buffered_goal(&fs.path(), ".fast_sync"));
            results.extend(guard::guard_group_goal(&fs.path(), ".fast_sync"));
        }
        Err(why) => println!(
            "(g) no RESULT guard.writes_vs_fsync_bound.fast_sync: cannot mount the fast-sync \
             file system ({why})"
        ),
    }
    results
}
