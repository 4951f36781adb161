//! The migration workload's starting point: the store-format-2 fixture
//! (`migrations/fixtures/store-v2/`, described in `migrations/README.md`)
//! with guard storage added the way format 2 kept it (as
//! `tests/guard/migrate.rs` does), so that a migration moves tables
//! and guard records; and the check that they all read back.

use super::model::Checked;
use filterstore::{Change, DiffStorage, FilterStore, SledDiffStorage};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The fixture's tables (both sized for 6,000 keys, seed 2).
pub const TABLES: [&str; 2] = ["blocked", "standard"];
/// The guard storage added to it.
const ACCOUNTS: &str = "accounts";
const BASE_RECORDS: u32 = 2_000;

/// `key-0100` … `key-1199` and `hot-key`: the fixture's live keys.
fn fixture_keys() -> impl Iterator<Item = Vec<u8>> {
    (100..1200u32)
        .map(|i| format!("key-{i:04}").into_bytes())
        .chain(std::iter::once(b"hot-key".to_vec()))
}

fn account(i: u32) -> Vec<u8> {
    format!("acct-{i:05}").into_bytes()
}

/// The change recorded for account `i` (every tenth of 0..3,000; every
/// thirtieth a delete).
fn change(i: u32) -> Option<Change> {
    match i {
        _ if i.is_multiple_of(30) => Some(Change::Delete),
        _ if i.is_multiple_of(10) => Some(Change::Put(format!("new {i}").into_bytes())),
        _ => None,
    }
}

/// Copies the fixture under `work` and adds the guard storage; returns its
/// directory (loaded, all durable, at the start of every migration chain).
pub fn prepare(work: &Path) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/fixtures/store-v2");
    let to = work.join("store-v2-with-guard");
    std::fs::create_dir_all(&to).unwrap();
    for e in std::fs::read_dir(&from).expect("the store-v2 fixture is missing") {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let db = loop {
        match sled::Config::new().path(&to).open() {
            Ok(db) => break db,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("sled does not open the fixture: {e}"),
        }
    };
    let base = db.open_tree("filterstore/guard/accounts/base").unwrap();
    let diff = db.open_tree("filterstore/guard/accounts/diff").unwrap();
    for i in 0..BASE_RECORDS {
        base.insert(account(i), format!("balance {i}").into_bytes())
            .unwrap();
    }
    for i in (0..3_000u32).step_by(10) {
        let v = match change(i) {
            Some(Change::Put(v)) => [vec![1u8], v].concat(),
            _ => vec![0u8],
        };
        diff.insert(account(i), v).unwrap();
    }
    db.flush().unwrap();
    drop((base, diff, db));
    to
}

/// The fixture's keys are in both tables (where they open: the model checks
/// that they do) and every guard record reads back.
pub fn check(store: &FilterStore, out: &mut Checked) {
    for name in TABLES {
        let Ok(t) = store.open_table(name) else {
            continue;
        };
        let missing = fixture_keys().filter(|k| !t.contains(k)).count() as u64;
        out.keys += 1_101;
        if missing > 0 {
            out.lost_keys += missing;
            out.failures.push(format!(
                "table {name}: {missing} of the format-2 fixture's keys lost"
            ));
        }
    }
    let storage = match SledDiffStorage::open(store, ACCOUNTS) {
        Ok(s) => s,
        Err(e) => {
            out.failed_open = true;
            out.failures
                .push(format!("the migrated guard storage does not open: {e}"));
            return;
        }
    };
    // Each record as a guarded read gives it: its change, else its base
    // record (store format 7 moves format 2's changes into the base when the
    // storage is first opened, so where a record lives is not checked).
    let mut wrong = 0u64;
    for i in 0..3_000u32 {
        let want = match change(i) {
            Some(Change::Put(v)) => Some(v),
            Some(Change::Delete) => None,
            None => (i < BASE_RECORDS).then(|| format!("balance {i}").into_bytes()),
        };
        let got = match storage.read_diff(&account(i)) {
            Ok(Some(Change::Put(v))) => Ok(Some(v)),
            Ok(Some(Change::Delete)) => Ok(None),
            Ok(None) => storage.read_base(&account(i)).map(|v| v.map(Vec::from)),
            Err(e) => Err(e),
        };
        if got.ok() != Some(want) {
            wrong += 1;
        }
    }
    out.keys += 3_000;
    if wrong > 0 {
        out.lost_keys += wrong;
        out.failures.push(format!(
            "the migrated guard storage: {wrong} of 3,000 accounts read wrong"
        ));
    }
}
