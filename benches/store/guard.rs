//! (g) The guard's figures, each against sled itself in the same run, the
//! subjects interleaved round by round:
//!
//! * `guard.reads_vs_raw_sled_get.one_process`: `Guard::read` through
//!   `SledDiffStorage` (2 threads, uniformly random keys of a base of
//!   200,000 records, 1% of them changed) in reads per second, over sled's
//!   own `Tree::get` on a database holding the same base in the same
//!   process (2 threads, same keys), each thread's reads over its own CPU
//!   time (`clock.rs`); beside them, `SledDiffStorage::read_base` alone,
//!   sled's get with the value copied into a `Vec` (what a `DiffStorage`
//!   whose `Value` is a `Vec` costs; `SledDiffStorage` returns sled's
//!   buffer), and sled's get on a database configured as the guard's
//!   (`guard.reads_vs_sled_get_guard_config`: no background flusher and
//!   16 MiB segments, as the engine's deadlock proof requires, and the
//!   store's cache), 30 short rounds. In one process the databases share a
//!   heap and their relative speed moves with the order they were built
//!   in (`guard_reads.rs`), so the goal's figure,
//!   `guard.reads_vs_raw_sled_get`, runs each subject in a process of its
//!   own (`guard_reads.rs`).
//! * `guard.writes_vs_raw_sled_insert` (goal ≥ 3): `SledDiffStorage::write_diff`
//!   of batches of 1,000 changes (16-byte keys, 64-byte values; durable
//!   against power loss when it returns) in keys per second, over sled's
//!   own batched inserts of the same records (one `Batch` of 1,000 and one
//!   `flush` per batch, into a database of its own on the same disk); and
//!   `guard.writes_vs_fsync_bound` (goal ≥ 0.8), over the same bytes
//!   appended to a file with one `fdatasync` per batch. The three subjects
//!   take turns round by round, the spread of the per-round ratios beside
//!   each figure. The three figures again with `.fast_sync` on ext4 on a
//!   tmpfs-backed loop device (`fastfs.rs`, as root), where a sync costs
//!   what a fast SSD's does: a slow disk's sync hides what `write_diff`
//!   adds to it, this one does not.
//! * `guard.merge_keys_per_s`: the merge of every change written above into
//!   the sled base (keys per second; what a background merge sustains).
//! * `guard.buffered_writes_vs_durable`: writes of 10 changes at
//!   `Durability::Buffered` with a flush after every 100 of them, over the
//!   same writes each durable ([`guard_buffered_goal`]).
//! * `guard.group_commit_4_writers_vs_1`: four threads each calling
//!   `write_diff` with batches of 100 changes, in keys per second, over one
//!   thread doing the same, interleaved round by round: what group commit
//!   gives (with one sync per call it would be about 1).

use super::clock::Tick;
use super::goals::{key16, load1, spread, Total};
use filterstore::{
    Change, DiffStorage, Durability, FilterStore, Guard, SledDiffStorage, TableSpec,
};
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

/// Rounds of the guard's reads (0.3 s per subject each): short and many,
/// since the cache contention of the other processes on this machine moves
/// a subject's rate by 20% from one second to the next.
const GUARD_ROUNDS: usize = 30;
/// Rounds of the writes, and batches of 1,000 per subject and round.
const WRITE_ROUNDS: usize = 9;
const WRITE_BATCHES: usize = 4;
/// Records per chunk when the read figure's three bases are built.
const BUILD_CHUNK: usize = 5_000;

/// Reads per second of `threads` threads each calling `read` on
/// uniformly random keys among `n`, for `secs` of wall time: each thread's
/// reads over its own CPU time (`clock.rs`: the time it waited for a CPU on
/// this shared machine is left out; contention between the threads, for
/// locks and cache lines, counts), summed over the threads.
pub fn reads_per_s(
    threads: usize,
    n: u64,
    stride: u64,
    secs: f64,
    read: &(dyn Fn(&[u8]) + Sync),
) -> f64 {
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
                            read(&key16(x % n * stride, 1));
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

/// The reads' figure.
pub fn guard_reads_goal(dir: &Path) -> Vec<String> {
    const RECORDS: u64 = 200_000;
    const THREADS: usize = 2;
    let value = [9u8; 64];
    let raw = sled::open(dir.join("raw-guard")).unwrap();
    let raw_base = raw.open_tree("base").unwrap();
    // sled configured as the guard's database (`src/sled_engine/
    // open.rs` and `mod.rs`: `GUARD_SEGMENT`, `flush_every_ms(None)`).
    let same = sled::Config::new()
        .path(dir.join("raw-guard-config"))
        .cache_capacity(filterstore::DEFAULT_CACHE_CAPACITY)
        .segment_size(1 << 24)
        .mode(sled::Mode::HighThroughput)
        .flush_every_ms(None)
        .open()
        .unwrap();
    let same_base = same.open_tree("base").unwrap();
    let store = FilterStore::open(dir.join("guard-store")).unwrap();
    let storage = SledDiffStorage::open(&store, "g").unwrap();
    // The three bases are built together, a chunk at a time, each chunk
    // starting with another of them: built one after the other, the later
    // database's reads ran 5-10% slower than the same database's built
    // first (its nodes among the others' in the heap), whatever its
    // configuration (README "Known issues", issue 28).
    for (c, chunk) in (0..RECORDS).step_by(BUILD_CHUNK).enumerate() {
        let ids = chunk..(chunk + BUILD_CHUNK as u64).min(RECORDS);
        for which in (0..3).map(|j| (c + j) % 3) {
            match which {
                0 => ids.clone().for_each(|i| {
                    raw_base.insert(key16(i, 1), &value[..]).unwrap();
                }),
                1 => ids.clone().for_each(|i| {
                    same_base.insert(key16(i, 1), &value[..]).unwrap();
                }),
                _ => storage
                    .load_base(ids.clone().map(|i| (key16(i, 1), value)))
                    .unwrap(),
            }
        }
    }
    raw.flush().unwrap();
    same.flush().unwrap();
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
    reads_per_s(THREADS, RECORDS, 1, 0.5, &|k| {
        black_box(raw_base.get(k).unwrap());
    });
    reads_per_s(THREADS, RECORDS, 1, 0.5, &|k| {
        black_box(guard.read(k).unwrap());
    });
    reads_per_s(THREADS, RECORDS, 1, 0.5, &|k| {
        black_box(same_base.get(k).unwrap());
    });
    // One subject alone for a while, to profile it (`perf record`):
    // FILTERSTORE_BENCH_PROFILE=raw|same|copy|storage|guard.
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
                "same" => drop(black_box(same_base.get(k).unwrap())),
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
    // what a read would cost if the storage copied its values out (its
    // `Value` is sled's buffer, `GuardValue`); a fifth, sled's get on the
    // database configured as the guard's (module docs).
    let mut totals = [Total::default(); 5];
    let (mut ratios, mut same_ratios) = (Vec::new(), Vec::new());
    let secs = 0.3;
    for round in 0..GUARD_ROUNDS {
        let mut rates = [0.0; 5];
        for j in 0..5 {
            let which = (round + j) % 5;
            rates[which] = reads_per_s(THREADS, RECORDS, 1, secs, &|k| match which {
                0 => drop(black_box(raw_base.get(k).unwrap())),
                1 => drop(black_box(guard.read(k).unwrap())),
                2 => drop(black_box(guard.storage().read_base(k).unwrap())),
                3 => drop(black_box(raw_base.get(k).unwrap().map(|v| v.to_vec()))),
                _ => drop(black_box(same_base.get(k).unwrap())),
            });
            totals[which].add(rates[which] * secs, Duration::from_secs_f64(secs));
        }
        ratios.push(rates[1] / rates[0]);
        same_ratios.push(rates[1] / rates[4]);
    }
    let [raw_total, guard_total, storage_total, copy_total, same_total] = totals;
    let (lo, med, hi) = spread(&mut ratios);
    let (s_lo, s_med, s_hi) = spread(&mut same_ratios);
    let st = guard.stats();
    println!(
        "(g) reads, {THREADS} threads, {GUARD_ROUNDS} rounds, {RECORDS} records, 1% changed: sled get {:.0}/s; Guard::read {:.0}/s ({:.2}x; rounds {lo:.2}-{hi:.2}, median {med:.2}); SledDiffStorage::read_base {:.0}/s ({:.2}x); sled get + copy to a Vec {:.0}/s ({:.2}x); sled get, the guard's configuration {:.0}/s ({:.2}x; Guard::read over it {:.2}x, rounds {s_lo:.2}-{s_hi:.2}, median {s_med:.2}); false positives {} of {} reads; load1 {}",
        raw_total.rate(),
        guard_total.rate(),
        guard_total.rate() / raw_total.rate(),
        storage_total.rate(),
        storage_total.rate() / raw_total.rate(),
        copy_total.rate(),
        copy_total.rate() / raw_total.rate(),
        same_total.rate(),
        same_total.rate() / raw_total.rate(),
        guard_total.rate() / same_total.rate(),
        st.false_positives,
        st.reads,
        load1()
    );
    vec![
        format!(
            "RESULT guard.reads_vs_raw_sled_get.one_process {:.3} x",
            guard_total.rate() / raw_total.rate()
        ),
        format!(
            "RESULT guard.storage_reads_vs_raw_sled_get {:.3} x",
            storage_total.rate() / raw_total.rate()
        ),
        format!(
            "RESULT guard.reads_vs_sled_get_guard_config {:.3} x",
            guard_total.rate() / same_total.rate()
        ),
    ]
}

/// The records of write batch `b` (1,000 changes): new keys each batch, as
/// a stream of changes to distinct records.
fn write_batch(b: u64) -> Vec<(Vec<u8>, Change)> {
    (0..1000)
        .map(|i| (key16(b * 1000 + i, 7).to_vec(), Change::Put(vec![9u8; 64])))
        .collect()
}

/// Writes of one 1,000-change batch through `storage` (its bound, sled's
/// own: the same bytes in one batch and one flush).
fn storage_write(storage: &SledDiffStorage, batch: &[(Vec<u8>, Change)]) -> Duration {
    let t0 = Instant::now();
    storage.write_diff(batch).unwrap();
    t0.elapsed()
}

fn raw_write(db: &sled::Db, tree: &sled::Tree, batch: &[(Vec<u8>, Change)]) -> Duration {
    let t0 = Instant::now();
    let mut b = sled::Batch::default();
    for (k, c) in batch {
        if let Change::Put(v) = c {
            let mut value = Vec::with_capacity(v.len() + 1);
            value.push(1);
            value.extend_from_slice(v);
            b.insert(k.as_slice(), value);
        }
    }
    tree.apply_batch(b).unwrap();
    db.flush().unwrap();
    t0.elapsed()
}

/// `FILTERSTORE_BENCH_PROFILE=writes`: 40 batches through the storage alone.
pub fn profile_writes(dir: &Path) {
    let store = FilterStore::open(dir.join("guard-writes")).unwrap();
    let storage = SledDiffStorage::open(&store, "w").unwrap();
    let t0 = Instant::now();
    for b in 0..40 {
        storage.write_diff(&write_batch(b)).unwrap();
    }
    println!(
        "(g) guard writes alone: {:.0} keys/s",
        40_000.0 / t0.elapsed().as_secs_f64()
    );
}

/// The bytes `batch`'s record takes in the differential file's log
/// (`docs/FORMAT.md` § 8b): record head, op count, per op a tag, key and
/// value lengths, key, value.
fn record_bytes(batch: &[(Vec<u8>, Change)]) -> Vec<u8> {
    let mut out = vec![0u8; 20];
    for (k, c) in batch {
        let v: &[u8] = match c {
            Change::Put(v) => v,
            Change::Delete => &[],
        };
        out.push(1);
        out.extend_from_slice(&(k.len() as u16).to_le_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(k);
        out.extend_from_slice(v);
    }
    out
}

/// The bound: the same bytes appended to a file of the same disk with one
/// `fdatasync` per batch.
fn fsync_write(file: &mut std::fs::File, batch: &[(Vec<u8>, Change)]) -> Duration {
    use std::io::Write;
    let t0 = Instant::now();
    file.write_all(&record_bytes(batch)).unwrap();
    file.sync_data().unwrap();
    t0.elapsed()
}

/// The writes' figures, three subjects interleaved round by round:
/// `SledDiffStorage::write_diff`, sled's batched insert, and the
/// `fdatasync` bound; then the merge of what the storage holds, timed.
/// `suffix` names the file system in the RESULT lines (`""` for the VM's
/// disk, `".fast_sync"` for the bench's own, `fastfs.rs`).
pub fn guard_writes_goal(dir: &Path, suffix: &str) -> Vec<String> {
    let raw = sled::open(dir.join("raw-writes")).unwrap();
    let raw_diff = raw.open_tree("diff").unwrap();
    let store = FilterStore::open(dir.join("guard-writes")).unwrap();
    let storage = SledDiffStorage::open(&store, "w").unwrap();
    let mut bound_file = std::fs::File::create(dir.join("fsync-bound.log")).unwrap();
    let mut totals = [Total::default(); 3];
    let (mut ratios, mut bound_ratios) = (Vec::new(), Vec::new());
    let mut next = 0u64;
    for round in 0..WRITE_ROUNDS {
        let mut rates = [0.0; 3];
        for j in 0..3 {
            let which = (round + j) % 3;
            let mut t = Duration::ZERO;
            for _ in 0..WRITE_BATCHES {
                let batch = write_batch(next);
                next += 1;
                t += match which {
                    0 => storage_write(&storage, &batch),
                    1 => raw_write(&raw, &raw_diff, &batch),
                    _ => fsync_write(&mut bound_file, &batch),
                };
            }
            rates[which] = totals[which].add((WRITE_BATCHES * 1000) as f64, t);
        }
        ratios.push(rates[0] / rates[1]);
        bound_ratios.push(rates[0] / rates[2]);
    }
    let [s_total, r_total, b_total] = totals;
    let (lo, med, hi) = spread(&mut ratios);
    let (b_lo, b_med, b_hi) = spread(&mut bound_ratios);
    let ratio = s_total.rate() / r_total.rate();
    let bound = s_total.rate() / b_total.rate();
    println!(
        "(g) writes{suffix}, batches of 1,000 changes, {WRITE_ROUNDS} rounds: SledDiffStorage::write_diff {:.0} keys/s; sled Batch + flush {:.0} keys/s: {ratio:.3}x (rounds {lo:.2}-{hi:.2}, median {med:.2}); the same bytes appended with one fdatasync per batch {:.0} keys/s: {bound:.3}x (rounds {b_lo:.2}-{b_hi:.2}, median {b_med:.2}); load1 {}",
        s_total.rate(),
        r_total.rate(),
        b_total.rate(),
        load1()
    );
    // The merge of every change written: the rate a background merge
    // sustains (the same code, on the caller's thread).
    let pending = storage.diff_len().unwrap();
    let t0 = Instant::now();
    let merged = storage.merge().unwrap();
    let merge_rate = merged as f64 / t0.elapsed().as_secs_f64();
    println!(
        "(g) merge{suffix} of {merged} changes ({pending} pending) into the sled base: {merge_rate:.0} keys/s; load1 {}",
        load1()
    );
    vec![
        format!("RESULT guard.writes_vs_raw_sled_insert{suffix} {ratio:.3} x"),
        format!("RESULT guard.writes_vs_fsync_bound{suffix} {bound:.3} x"),
        format!("RESULT guard.merge_keys_per_s{suffix} {merge_rate:.0} keys/s"),
    ]
}

/// Rounds of the group-commit figure, and 100-change batches per writer
/// and round.
const GROUP_ROUNDS: usize = 7;
const GROUP_BATCHES: u64 = 40;

/// Keys per second of `writers` threads each writing `GROUP_BATCHES`
/// batches of 100 new changes through `storage`; `next` numbers batches.
fn group_rate(storage: &SledDiffStorage, writers: u64, next: &mut u64) -> (f64, Duration) {
    let first = *next;
    *next += writers * GROUP_BATCHES;
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for w in 0..writers {
            s.spawn(move || {
                for b in 0..GROUP_BATCHES {
                    let n = first + w * GROUP_BATCHES + b;
                    let batch: Vec<_> = (0..100)
                        .map(|i| (key16(n * 100 + i, 11).to_vec(), Change::Put(vec![3u8; 64])))
                        .collect();
                    storage.write_diff(&batch).unwrap();
                }
            });
        }
    });
    let d = t0.elapsed();
    ((writers * GROUP_BATCHES * 100) as f64 / d.as_secs_f64(), d)
}

/// `guard.group_commit_4_writers_vs_1` (module docs).
pub fn guard_group_goal(dir: &Path, suffix: &str) -> Vec<String> {
    let store = FilterStore::open(dir.join("guard-group")).unwrap();
    let storage = SledDiffStorage::open(&store, "g").unwrap();
    let mut next = 0u64;
    let mut totals = [Total::default(); 2];
    let mut ratios = Vec::new();
    for round in 0..GROUP_ROUNDS {
        let mut rates = [0.0; 2];
        for j in 0..2 {
            let which = (round + j) % 2;
            let (_, d) = group_rate(&storage, [1, 4][which], &mut next);
            let keys = [1.0, 4.0][which] * (GROUP_BATCHES * 100) as f64;
            rates[which] = totals[which].add(keys, d);
        }
        ratios.push(rates[1] / rates[0]);
    }
    let (lo, med, hi) = spread(&mut ratios);
    let ratio = totals[1].rate() / totals[0].rate();
    println!(
        "(g) group commit{suffix}, batches of 100 changes, {GROUP_ROUNDS} rounds: 4 writers {:.0} keys/s, 1 writer {:.0} keys/s: {ratio:.3}x (rounds {lo:.2}-{hi:.2}, median {med:.2}); load1 {}",
        totals[1].rate(),
        totals[0].rate(),
        load1()
    );
    vec![format!(
        "RESULT guard.group_commit_4_writers_vs_1{suffix} {ratio:.3} x"
    )]
}

/// Rounds of the buffered-write figure; in each, each subject writes
/// `SMALL_WRITES` writes of `SMALL` changes.
const BUFFERED_ROUNDS: usize = 7;
const SMALL: u64 = 10;
const SMALL_WRITES: u64 = 100;

/// `guard.buffered_writes_vs_durable`: `write_diff_with(Buffered)` of
/// writes of 10 changes, with one `flush_diff` after every 100 of them (a
/// host that commits a group of small writes at once), in keys per second
/// (the flush inside the time), over `write_diff` of the same writes, each
/// durable: one sync per 1,000 changes against one per 10. Interleaved
/// round by round.
pub fn guard_buffered_goal(dir: &Path, suffix: &str) -> Vec<String> {
    let store = FilterStore::open(dir.join("guard-buffered")).unwrap();
    let storage = SledDiffStorage::open(&store, "b").unwrap();
    let mut totals = [Total::default(); 2];
    let mut ratios = Vec::new();
    let mut next = 0u64;
    for round in 0..BUFFERED_ROUNDS {
        let mut rates = [0.0; 2];
        for j in 0..2 {
            let which = (round + j) % 2;
            let writes: Vec<Vec<(Vec<u8>, Change)>> = (0..SMALL_WRITES)
                .map(|w| {
                    let first = (next + w) * SMALL;
                    (first..first + SMALL)
                        .map(|i| (key16(i, 8).to_vec(), Change::Put(vec![9u8; 64])))
                        .collect()
                })
                .collect();
            next += SMALL_WRITES;
            let t0 = Instant::now();
            for w in &writes {
                match which {
                    0 => storage.write_diff_with(w, Durability::Buffered).unwrap(),
                    _ => storage.write_diff(w).unwrap(),
                }
            }
            if which == 0 {
                storage.flush_diff().unwrap();
            }
            rates[which] = totals[which].add((SMALL * SMALL_WRITES) as f64, t0.elapsed());
        }
        ratios.push(rates[0] / rates[1]);
    }
    let (lo, med, hi) = spread(&mut ratios);
    let ratio = totals[0].rate() / totals[1].rate();
    println!(
        "(g) buffered writes{suffix}, {SMALL_WRITES} writes of {SMALL} changes per round, {BUFFERED_ROUNDS} rounds: buffered + one flush {:.0} keys/s; each durable {:.0} keys/s: {ratio:.2}x (rounds {lo:.2}-{hi:.2}, median {med:.2}); load1 {}",
        totals[0].rate(),
        totals[1].rate(),
        load1()
    );
    vec![format!(
        "RESULT guard.buffered_writes_vs_durable{suffix} {ratio:.3} x"
    )]
}
