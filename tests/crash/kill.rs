//! Crash test (`harness = false`: the child mode is this binary's `main`,
//! not a test that passes trivially): a child process (this test binary,
//! re-run in child mode)
//! writes batches to a table and prints `durable <n>` once batch `n` is
//! durable; the parent kills it with SIGKILL at a random moment, reopens the
//! store, and checks that
//!
//! * the store opens without error,
//! * every key of every durable batch is present, unless a later batch that
//!   may have been applied removed it,
//! * the live-key count equals the durable batches' net inserts, plus possibly
//!   those of the one batch that was in flight (a batch is atomic).
//!
//! What this covers: a **process** crash (kill -9) at any point — inside a
//! write, a fold, a flush, or the open and recovery of the previous round's
//! crash. It does **not** cover a power loss: after a kill the kernel still
//! writes the page cache to disk; a power loss would only lose what sled had
//! not fsynced, which is exactly what `flush` promises, but that is not
//! tested here.
//!
//! The rounds share one store, so every round also recovers from the previous
//! crash. Each child uses a random fold threshold, batch size and durability
//! mode. 200 rounds by default; `FILTERSTORE_CRASH_ROUNDS` sets another number.
use filterstore::{Durability, FilterStore, StoreConfig, StoreError, TableSpec, WriteBatch};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common;

const CHILD_ENV: &str = "FILTERSTORE_CRASH_CHILD";
const TABLE: &str = "crash";

/// The child's parameters, passed in its environment.
#[derive(Clone, Copy, Debug)]
struct Plan {
    round: u64,
    batch_keys: u32,
    fold_threshold: u64,
    buffer_ops: usize,
}

impl Plan {
    fn encode(&self) -> String {
        format!(
            "{} {} {} {}",
            self.round, self.batch_keys, self.fold_threshold, self.buffer_ops
        )
    }
    fn decode(s: &str) -> Plan {
        let v: Vec<u64> = s.split(' ').map(|x| x.parse().unwrap()).collect();
        Plan {
            round: v[0],
            batch_keys: v[1] as u32,
            fold_threshold: v[2],
            buffer_ops: v[3] as usize,
        }
    }
    fn config(&self) -> StoreConfig {
        StoreConfig::default()
            .fold_threshold(self.fold_threshold)
            .buffer_ops(self.buffer_ops)
            .materialized_blocks(16)
    }
}

fn key(round: u64, batch: u64, i: u32) -> Vec<u8> {
    format!("r{round}-b{batch}-{i}").into_bytes()
}

/// Batch `b` of a round inserts `batch_keys` fresh keys and removes the even
/// keys of batch `b − 2`.
fn batch(plan: &Plan, b: u64) -> (WriteBatch, i64) {
    let mut w = WriteBatch::new();
    for i in 0..plan.batch_keys {
        w.insert(&key(plan.round, b, i));
    }
    let mut removed = 0;
    if b >= 2 {
        for i in (0..plan.batch_keys).step_by(2) {
            w.remove(&key(plan.round, b - 2, i));
            removed += 1;
        }
    }
    (w, plan.batch_keys as i64 - removed)
}

/// The whole test may take this long before it counts as a hang.
const LIMIT: Duration = Duration::from_secs(1800);

/// The tests, each with its time limit (run by `main`).
pub(crate) const TESTS: &[(&str, fn(), Duration)] = &[(
    "kill_9_never_loses_a_durable_key",
    kill_9_never_loses_a_durable_key,
    LIMIT,
)];

/// Runs the child mode if the parent set its variable; returns whether it
/// did (then `main` is done).
pub(crate) fn child_mode() -> bool {
    match std::env::var(CHILD_ENV) {
        Ok(spec) => crash_child(&spec),
        Err(_) => return false,
    }
    true
}

/// Child mode (the parent sets the environment variable): write batches
/// until killed.
fn crash_child(spec: &str) {
    let (dir, plan) = spec.split_once('|').unwrap();
    let plan = Plan::decode(plan);
    let store = FilterStore::open_with(dir, plan.config()).unwrap();
    let table = match store.open_table(TABLE) {
        Ok(t) => t,
        Err(StoreError::NoSuchTable(_)) => store
            .create_table(TABLE, TableSpec::new(400_000, 0.01).seed(5))
            .unwrap(),
        Err(e) => panic!("{e}"),
    };
    println!("opened");
    let mut rng = StdRng::seed_from_u64(plan.round);
    for b in 0..10_000u64 {
        let (w, _) = batch(&plan, b);
        match rng.gen_range(0..4) {
            // One durable batch.
            0 | 1 => table.apply(&w, Durability::Durable).unwrap(),
            // A buffered batch, then a flush of the table.
            2 => {
                table.apply(&w, Durability::Buffered).unwrap();
                table.flush().unwrap();
            }
            // A buffered batch, then a store-wide flush.
            _ => {
                table.apply(&w, Durability::Buffered).unwrap();
                store.flush().unwrap();
            }
        }
        println!("durable {b}");
    }
}

fn rounds() -> u64 {
    std::env::var("FILTERSTORE_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

/// Opens the store (waiting for the killed child's lock to go, which the
/// kernel releases when the process is reaped).
fn open(dir: &std::path::Path, cfg: StoreConfig) -> FilterStore {
    common::open_with_retry(dir, cfg)
        .unwrap_or_else(|e| panic!("store does not open after a crash: {e}"))
}

fn kill_9_never_loses_a_durable_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let exe = std::env::current_exe().unwrap();
    let mut rng = StdRng::seed_from_u64(0x5EED);
    // Keys that must be present in every later round.
    let mut must_have: Vec<Vec<u8>> = Vec::new();
    let mut live: i64 = 0;
    let mut kills_during_open = 0;
    for round in 0..rounds() {
        let plan = Plan {
            round,
            batch_keys: rng.gen_range(1..200),
            fold_threshold: rng.gen_range(50..3000),
            buffer_ops: rng.gen_range(1..600),
        };
        // Kill after 0..=12 durable batches, plus a random delay of up to
        // 2 ms; 1 round in 8 kills during open (before "opened").
        let kill_after: i64 = if rng.gen_range(0..8) == 0 {
            -1
        } else {
            rng.gen_range(0..=12)
        };
        let extra = Duration::from_micros(rng.gen_range(0..2000));
        let stderr_path = dir.path().join(format!("child-{round}.stderr"));
        let mut child = Command::new(&exe)
            .env(CHILD_ENV, format!("{}|{}", db.display(), plan.encode()))
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut lines: Vec<String> = Vec::new();
        let durable_seen =
            |lines: &[String]| lines.iter().filter(|l| l.starts_with("durable ")).count() as i64;
        let deadline = Instant::now() + Duration::from_secs(20);
        if kill_after >= 0 {
            while durable_seen(&lines) <= kill_after && Instant::now() < deadline {
                match rx.recv_timeout(Duration::from_millis(100)) {
                    Ok(l) => lines.push(l),
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                }
            }
        }
        std::thread::sleep(extra);
        let _ = child.kill();
        let status = child.wait().unwrap();
        reader.join().unwrap();
        // The channel holds every other line the child wrote before it died.
        lines.extend(std::iter::from_fn(|| rx.try_recv().ok()));
        assert_eq!(
            status.signal(),
            Some(9),
            "round {round}: the child ended on its own ({status}); stderr in {}",
            stderr_path.display()
        );
        let opened = lines.iter().any(|l| l.ends_with("opened"));
        let last_durable: Option<u64> = lines
            .iter()
            .filter_map(|l| l.strip_prefix("durable "))
            .map(|n| n.parse().unwrap())
            .max();
        if !opened {
            kills_during_open += 1;
        }

        let cfg = plan.config();
        let store = open(&db, cfg);
        let table = match store.open_table(TABLE) {
            Ok(t) => t,
            Err(StoreError::NoSuchTable(_)) => {
                assert!(must_have.is_empty() && last_durable.is_none());
                continue;
            }
            Err(e) => panic!("round {round}: table does not open after a crash: {e}"),
        };
        for k in &must_have {
            assert!(
                table.contains(k),
                "round {round}: key {:?} of an earlier round lost",
                String::from_utf8_lossy(k)
            );
        }
        // This round: batches 0..=L are durable; batch L+1 may be applied.
        if let Some(l) = last_durable {
            for b in 0..=l {
                for i in 0..plan.batch_keys {
                    // Even keys of batch b are removed by batch b + 2, which
                    // may have been applied if b + 2 ≤ L + 1.
                    let removable = i % 2 == 0 && b + 2 <= l + 1;
                    let k = key(round, b, i);
                    if !removable {
                        assert!(
                            table.contains(&k),
                            "round {round}: durable key {:?} lost (last durable batch {l})",
                            String::from_utf8_lossy(&k)
                        );
                    }
                }
            }
            let durable_delta: i64 = (0..=l).map(|b| batch(&plan, b).1).sum();
            let in_flight = batch(&plan, l + 1).1;
            let got = table.live_keys() as i64;
            assert!(
                got == live + durable_delta || got == live + durable_delta + in_flight,
                "round {round}: live keys {got}, expected {} or {}",
                live + durable_delta,
                live + durable_delta + in_flight
            );
            live = got;
            // Keys that no later round touches: the odd ones, and the even
            // ones of batches whose remover never ran.
            for b in 0..=l {
                for i in 0..plan.batch_keys {
                    if i % 2 == 1 || b + 2 > l + 1 {
                        must_have.push(key(round, b, i));
                    }
                }
            }
        } else {
            // Nothing durable this round; batch 0 may have been applied.
            let got = table.live_keys() as i64;
            let in_flight = batch(&plan, 0).1;
            assert!(
                got == live || got == live + in_flight,
                "round {round}: live keys {got}, expected {live} or {}",
                live + in_flight
            );
            live = got;
        }
        // Every 25 rounds, check that the bits are exactly the non-zero
        // counters (this also folds the recovered log).
        if round % 25 == 24 {
            use filterstore::BloomRead;
            let derived = table.counting_snapshot().unwrap().to_bit_filter().unwrap();
            for i in 0..table.params().num_words() {
                assert_eq!(table.bloom().word(i), derived.word(i), "round {round}");
            }
            table.flush().unwrap();
        }
    }
    assert!(must_have.len() > 1000, "the test wrote too little");
    eprintln!(
        "{} rounds, {} keys checked in the last, {kills_during_open} kills during open",
        rounds(),
        must_have.len()
    );
}
