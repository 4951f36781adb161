//! Crash test of regeneration (`harness = false`: the child mode is this
//! binary's `main`, not a test that passes trivially): a child process (this
//! test binary in child mode) alternates durable batches of fresh keys with regenerations of the
//! whole table (`clear` is the same code path with an empty source) and is
//! killed with SIGKILL at a random moment — inside a build, a
//! page write, the commit, the deletion of the old tree or a write. The
//! parent reopens the store and checks that
//!
//! * it opens, and the generation in force loads (old or new, whichever the
//!   catalog names);
//! * every key of every durable batch, of this round and all earlier ones,
//!   is present (no false negative);
//! * every 10 rounds, the bits equal the non-zero counters.
//!
//! The rounds share one store, so every round also recovers from the
//! previous crash (including the collection of the tree a crash left
//! behind). 100 rounds by default; `FILTERSTORE_REGEN_CRASH_ROUNDS` sets
//! another number. Removes during regeneration are covered by
//! `tests/store/regen.rs` (concurrent writers); this test is about crashes.
use filterstore::{Durability, FilterStore, RegenOptions, StoreError, TableSpec, WriteBatch};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common;

const CHILD_ENV: &str = "FILTERSTORE_REGEN_CRASH_CHILD";
const TABLE: &str = "regen";
const BATCH_KEYS: u32 = 25;

fn key(round: u64, batch: u64, i: u32) -> Vec<u8> {
    format!("r{round}-b{batch}-{i}").into_bytes()
}

/// Every key a round may have written: batches `0..=max` of each earlier
/// round (`max` = the last batch possibly applied), then this round's.
fn all_keys(prev: &[u64], round: u64, upto: u64) -> impl Iterator<Item = Vec<u8>> + '_ {
    prev.iter()
        .enumerate()
        .flat_map(|(r, &max)| (0..=max).map(move |b| (r as u64, b)))
        .chain((0..=upto).map(move |b| (round, b)))
        .flat_map(|(r, b)| (0..BATCH_KEYS).map(move |i| key(r, b, i)))
}

/// The whole test may take this long before it counts as a hang.
const LIMIT: Duration = Duration::from_secs(1800);

/// The tests, each with its time limit (run by `main`).
pub(crate) const TESTS: &[(&str, fn(), Duration)] = &[(
    "kill_9_during_regeneration_never_loses_a_durable_key",
    kill_9_during_regeneration_never_loses_a_durable_key,
    LIMIT,
)];

/// Runs the child mode if the parent set its variable; returns whether it
/// did (then `main` is done).
pub(crate) fn child_mode() -> bool {
    match std::env::var(CHILD_ENV) {
        Ok(spec) => regen_crash_child(&spec),
        Err(_) => return false,
    }
    true
}

/// Child mode (the parent sets the environment variable): write and
/// regenerate until killed.
fn regen_crash_child(spec: &str) {
    let mut parts = spec.split('|');
    let dir = parts.next().unwrap();
    let round: u64 = parts.next().unwrap().parse().unwrap();
    let prev: Vec<u64> = parts
        .next()
        .unwrap()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    let store = FilterStore::open(dir).unwrap();
    let table = match store.open_table(TABLE) {
        Ok(t) => t,
        Err(StoreError::NoSuchTable(_)) => store
            .create_table(TABLE, TableSpec::new(1_000, 0.01))
            .unwrap(),
        Err(e) => panic!("{e}"),
    };
    println!("opened");
    for b in 0..10_000u64 {
        let mut w = WriteBatch::new();
        for i in 0..BATCH_KEYS {
            w.insert(&key(round, b, i));
        }
        table.apply(&w, Durability::Durable).unwrap();
        println!("durable {b}");
        // Alternate the sizing, so that m changes from one generation to
        // the next (a stale page of the wrong size would be caught).
        let headroom = if b % 2 == 0 { 1.0 } else { 1.7 };
        table
            .regenerate(
                || all_keys(&prev, round, b).map(Ok::<_, std::io::Error>),
                &RegenOptions {
                    headroom,
                    capacity: None,
                },
            )
            .unwrap();
        println!("regenerated {b}");
    }
}

fn rounds() -> u64 {
    std::env::var("FILTERSTORE_REGEN_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}

fn open(dir: &std::path::Path) -> FilterStore {
    common::reopen(dir, "after a crash")
}

fn kill_9_during_regeneration_never_loses_a_durable_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let exe = std::env::current_exe().unwrap();
    let mut rng = StdRng::seed_from_u64(0xC0FFEE);
    // Per finished round: the last batch possibly applied.
    let mut prev: Vec<u64> = Vec::new();
    // Per finished round: the last durable batch, if any.
    let mut durable: Vec<Option<u64>> = Vec::new();
    let mut generations_seen = std::collections::BTreeSet::new();
    for round in 0..rounds() {
        let prev_list: Vec<String> = prev.iter().map(u64::to_string).collect();
        let stderr_path = dir.path().join(format!("child-{round}.stderr"));
        let mut child = Command::new(&exe)
            .env(
                CHILD_ENV,
                format!("{}|{round}|{}", db.display(), prev_list.join(",")),
            )
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            let mut lines = Vec::new();
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(l.clone());
                lines.push(l);
            }
            lines
        });
        // Kill at a random moment: one round in ten 0–20 ms after the spawn
        // (during the open), the others 0–100 ms after the child says it
        // opened (during a write or, mostly, a regeneration). Timed from the
        // child's own report, so a slow open on a loaded machine does not
        // push every kill into the open.
        if rng.gen_range(0..10) == 0 {
            std::thread::sleep(Duration::from_micros(rng.gen_range(0..20_000)));
        } else {
            let opened = rx.iter().find(|l| l == "opened").is_some();
            assert!(
                opened,
                "round {round}: the child ended before it opened; stderr in {}",
                stderr_path.display()
            );
            std::thread::sleep(Duration::from_micros(rng.gen_range(0..100_000)));
        }
        let _ = child.kill();
        let status = child.wait().unwrap();
        let lines = reader.join().unwrap();
        assert_eq!(
            status.signal(),
            Some(9),
            "round {round}: the child ended on its own ({status}); stderr in {}",
            stderr_path.display()
        );
        let last_durable: Option<u64> = lines
            .iter()
            .filter_map(|l| l.strip_prefix("durable "))
            .map(|n| n.parse().unwrap())
            .max();
        prev.push(last_durable.map_or(0, |l| l + 1));
        durable.push(last_durable);

        let store = open(&db);
        let table = match store.open_table(TABLE) {
            Ok(t) => t,
            Err(StoreError::NoSuchTable(_)) => {
                assert!(durable.iter().all(Option::is_none));
                continue;
            }
            Err(e) => panic!("round {round}: table does not open after a crash: {e}"),
        };
        let stats = table.stats().unwrap();
        assert_eq!(stats.generation, table.generation());
        generations_seen.insert(stats.generation);
        for (r, d) in durable.iter().enumerate() {
            let Some(l) = d else { continue };
            for b in 0..=*l {
                for i in 0..BATCH_KEYS {
                    let k = key(r as u64, b, i);
                    assert!(
                        table.contains(&k),
                        "round {round}: durable key {:?} lost (generation {})",
                        String::from_utf8_lossy(&k),
                        stats.generation
                    );
                }
            }
        }
        if round % 10 == 9 {
            use filterstore::BloomRead;
            let derived = table.counting_snapshot().unwrap().to_bit_filter().unwrap();
            for i in 0..table.params().num_words() {
                assert_eq!(table.bloom().word(i), derived.word(i), "round {round}");
            }
        }
    }
    assert!(
        generations_seen.len() > rounds() as usize / 4,
        "the children regenerated too little: {generations_seen:?}"
    );
    eprintln!(
        "{} rounds, {} generations seen, {} durable batches checked",
        rounds(),
        generations_seen.len(),
        durable.iter().flatten().map(|l| l + 1).sum::<u64>()
    );
}
