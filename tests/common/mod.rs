//! Helpers shared by the store and guard tests: opening a store whose lock a
//! killed child (or a store just dropped) still holds, with a deadline, and
//! running a test body under a time limit so that a hang is a failure.
//!
//! Every loop here is bounded by a deadline.
#![allow(dead_code)]

use filterstore::{FilterStore, StoreConfig, StoreError};
use std::path::Path;
use std::time::{Duration, Instant};

mod timeout;
pub use timeout::with_timeout;

/// How long [`open_with_retry`] waits for a lock to go: the kernel releases
/// a killed process's lock when it is reaped, sled a dropped store's a few
/// milliseconds after the drop.
pub const OPEN_DEADLINE: Duration = Duration::from_secs(10);

/// The time limit of an ordinary store test (a hang becomes a failure).
pub const TEST_LIMIT: Duration = Duration::from_secs(300);

/// Opens the store in `dir`, retrying while it is [`StoreError::Locked`] for
/// up to [`OPEN_DEADLINE`]; any other outcome is returned at once.
pub fn open_with_retry(dir: &Path, cfg: StoreConfig) -> Result<FilterStore, StoreError> {
    let deadline = Instant::now() + OPEN_DEADLINE;
    loop {
        match FilterStore::open_with(dir, cfg) {
            Err(StoreError::Locked { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

/// [`open_with_retry`] with the default configuration, panicking with
/// `what` if the store does not open.
pub fn reopen(dir: &Path, what: &str) -> FilterStore {
    open_with_retry(dir, StoreConfig::default())
        .unwrap_or_else(|e| panic!("{what}: the store does not open: {e}"))
}

/// Runs the `main` of a `harness = false` test target: each test under its
/// time limit, in order, with libtest-style lines; exits with status 101 if
/// one failed (as libtest does), so every listed test can fail.
pub fn run_main(tests: &[(String, fn(), Duration)]) {
    // Arguments libtest would take are accepted; `--list` lists the tests,
    // and a plain argument filters them by name, as libtest does.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        for (name, _, _) in tests {
            println!("{name}: test");
        }
        return;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let start = Instant::now();
    let (mut passed, mut failed) = (0, 0);
    for (name, body, limit) in tests {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let (body, limit) = (*body, *limit);
        match std::panic::catch_unwind(|| with_timeout(limit, body)) {
            Ok(()) => {
                println!("test {name} ... ok");
                passed += 1;
            }
            Err(_) => {
                println!("test {name} ... FAILED");
                failed += 1;
            }
        }
    }
    let verdict = if failed == 0 { "ok" } else { "FAILED" };
    println!(
        "\ntest result: {verdict}. {passed} passed; {failed} failed; finished in {:.2}s",
        start.elapsed().as_secs_f64()
    );
    if failed > 0 {
        std::process::exit(101);
    }
}

/// The offsets of the frames of a log, one after another by their lengths
/// (docs/FORMAT.md §2: the body length at byte 12, 28 bytes of frame).
pub fn record_starts(bytes: &[u8]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut at = 0;
    while at + 24 <= bytes.len() && &bytes[at..at + 4] == b"FSTR" {
        starts.push(at);
        at += 28 + u64::from_le_bytes(bytes[at + 12..at + 20].try_into().unwrap()) as usize;
    }
    starts
}
