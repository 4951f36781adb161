//! (g) `guard.reads_vs_raw_sled_get` (goal ≥ 0.9), each subject in a
//! process of its own, as a user runs one or the other: `Guard::read`
//! through `SledDiffStorage` against sled's own `Tree::get` on a default
//! database, the same 200,000 records (16-byte keys, 64-byte values), 1%
//! of them changed through the guard (`Change::Put`), 2 threads.
//!
//! Why processes: in one process (`guard.rs`, now
//! `guard.reads_vs_raw_sled_get.one_process`) the databases' nodes share
//! one heap, and which database reads faster moves with the order they
//! were built in. A throwaway run of six sled databases of the same
//! records in one process, differing in one setting each, ranked sled's
//! get on the guard's configuration 0.94× the default one built first and
//! 0.99× with the build order reversed, while the setting alone (16 MiB
//! segments) ranked 0.92× and then 1.10×; each alone in a process, 8M gets
//! on one thread, the default and the guard's configuration took
//! 1,660–1,894 and 1,604–2,036 ns per get, three runs each.
//!
//! Each round starts one child per subject, in turns (the order alternates
//! by round). A child builds its subject's base in a directory of its own,
//! warms it for 0.5 s, then measures, [`CHILD_ROUNDS`] times in turn,
//! reads of uniformly random keys among all records (`all`, 1% of them
//! changed) and among the changed records only (`changed`: the guard's
//! differential index answers them; sled reads the same keys), each
//! thread's reads over its own CPU time (`clock.rs`). Two figures:
//! `guard.reads_vs_raw_sled_get` (all keys) and
//! `guard.changed_reads_vs_raw_sled_get` (changed keys), sums of reads over
//! sums of time, the spread of the per-round ratios beside them.

use super::goals::{key16, load1, spread};
use super::guard::reads_per_s;
use filterstore::{Change, FilterStore, Guard, SledDiffStorage, TableSpec};
use std::hint::black_box;
use std::path::Path;
use std::process::Command;

/// The variable that makes the bench binary a child measuring one
/// subject: `raw:<dir>` or `guard:<dir>`.
pub const CHILD_ENV: &str = "FILTERSTORE_BENCH_GUARD_READS";
const RECORDS: u64 = 200_000;
/// One record in `CHANGED_EVERY` is changed.
const CHANGED_EVERY: u64 = 100;
const THREADS: usize = 2;
/// Rounds of children (one child per subject and round).
const ROUNDS: usize = 8;
/// Turns of the two key sets within a child, 0.3 s each.
const CHILD_ROUNDS: usize = 4;
const SECS: f64 = 0.3;

/// The child: builds `spec`'s subject and prints `READS all <reads/s>` and
/// `READS changed <reads/s>`.
pub fn child(spec: &str) {
    let (subject, dir) = spec.split_once(':').expect("subject:dir");
    let dir = Path::new(dir);
    let value = [9u8; 64];
    let changes: Vec<(Vec<u8>, Change)> = (0..RECORDS)
        .step_by(CHANGED_EVERY as usize)
        .map(|i| (key16(i, 1).to_vec(), Change::Put(b"changed".to_vec())))
        .collect();
    let rates = if subject == "raw" {
        let db = sled::open(dir.join("raw")).unwrap();
        let base = db.open_tree("base").unwrap();
        for i in 0..RECORDS {
            base.insert(key16(i, 1), &value[..]).unwrap();
        }
        for (k, c) in &changes {
            if let Change::Put(v) = c {
                base.insert(k, &v[..]).unwrap();
            }
        }
        db.flush().unwrap();
        measure(&|k| drop(black_box(base.get(k).unwrap())))
    } else {
        let store = FilterStore::open(dir.join("guard-store")).unwrap();
        let storage = SledDiffStorage::open(&store, "g").unwrap();
        storage
            .load_base((0..RECORDS).map(|i| (key16(i, 1), value)))
            .unwrap();
        let table = store
            .create_table(
                "changed",
                TableSpec::new(RECORDS / CHANGED_EVERY, 0.01).seed(4),
            )
            .unwrap();
        let guard = Guard::open(storage, table).unwrap();
        guard.write(&changes).unwrap();
        measure(&|k| drop(black_box(guard.read(k).unwrap())))
    };
    println!("READS all {}", rates[0]);
    println!("READS changed {}", rates[1]);
}

/// Reads per second of `read` over all keys and over the changed ones,
/// after a warm-up, the two in turns.
fn measure(read: &(dyn Fn(&[u8]) + Sync)) -> [f64; 2] {
    reads_per_s(THREADS, RECORDS, 1, 0.5, read);
    let mut sums = [0.0; 2];
    for _ in 0..CHILD_ROUNDS {
        sums[0] += reads_per_s(THREADS, RECORDS, 1, SECS, read);
        sums[1] += reads_per_s(THREADS, RECORDS / CHANGED_EVERY, CHANGED_EVERY, SECS, read);
    }
    sums.map(|s| s / CHILD_ROUNDS as f64)
}

/// Runs one child for `subject` in a new directory under `dir`.
fn run_child(dir: &Path, subject: &str, round: usize) -> [f64; 2] {
    let sub = dir.join(format!("reads-{subject}-{round}"));
    std::fs::create_dir_all(&sub).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .env(CHILD_ENV, format!("{subject}:{}", sub.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "reads child {subject}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&sub).unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let rate = |which: &str| -> f64 {
        let prefix = format!("READS {which} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("reads child {subject} printed no {which}: {text}"))
    };
    [rate("all"), rate("changed")]
}

/// The figures (module docs).
pub fn guard_reads_processes(dir: &Path) -> Vec<String> {
    let (mut raw, mut guard) = ([0.0; 2], [0.0; 2]);
    let (mut all_ratios, mut changed_ratios) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let (r, g) = if round % 2 == 0 {
            let r = run_child(dir, "raw", round);
            (r, run_child(dir, "guard", round))
        } else {
            let g = run_child(dir, "guard", round);
            (run_child(dir, "raw", round), g)
        };
        for i in 0..2 {
            raw[i] += r[i];
            guard[i] += g[i];
        }
        all_ratios.push(g[0] / r[0]);
        changed_ratios.push(g[1] / r[1]);
    }
    let (a_lo, a_med, a_hi) = spread(&mut all_ratios);
    let (c_lo, c_med, c_hi) = spread(&mut changed_ratios);
    let rounds = ROUNDS as f64;
    println!(
        "(g) reads, one process per subject, {ROUNDS} rounds, {THREADS} threads, {RECORDS} records, 1 in {CHANGED_EVERY} changed: all keys: sled get {:.0}/s, Guard::read {:.0}/s ({:.3}x; rounds {a_lo:.2}-{a_hi:.2}, median {a_med:.2}); changed keys: sled get {:.0}/s, Guard::read {:.0}/s ({:.3}x; rounds {c_lo:.2}-{c_hi:.2}, median {c_med:.2}); load1 {}",
        raw[0] / rounds,
        guard[0] / rounds,
        guard[0] / raw[0],
        raw[1] / rounds,
        guard[1] / rounds,
        guard[1] / raw[1],
        load1()
    );
    vec![
        format!(
            "RESULT guard.reads_vs_raw_sled_get {:.3} x",
            guard[0] / raw[0]
        ),
        format!(
            "RESULT guard.changed_reads_vs_raw_sled_get {:.3} x",
            guard[1] / raw[1]
        ),
    ]
}
