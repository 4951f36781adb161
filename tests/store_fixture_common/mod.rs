//! What the v1 store fixture holds, shared by the tests that read it.
#![allow(dead_code)]

use filterstore::{CountingFilter, FilterParams, Layout};
use std::path::{Path, PathBuf};

/// The seed of both tables (the filter-file fixtures' seed).
pub const SEED: u64 = 0xF11E_5EED_0000_0001;
/// The tables: name and layout.
pub const TABLES: [(&str, Layout); 2] =
    [("blocked", Layout::Blocked), ("standard", Layout::Standard)];
/// Inserted this many times, so that its counters saturate (15 is sticky).
pub const HOT_KEY: &str = "hot-key";
/// Inserts of [`HOT_KEY`].
pub const HOT_COUNT: u64 = 16;
/// Live keys: 300 folded inserts − 50 removes + 16 hot + 50 logged.
pub const LIVE: u64 = 300 - 50 + HOT_COUNT + 50;

/// `key-0000` … `key-0299`, inserted and folded.
pub fn folded_inserts() -> Vec<String> {
    (0..300).map(|i| format!("key-{i:04}")).collect()
}

/// `key-0200` … `key-0249`, removed before the fold.
pub fn removed() -> Vec<String> {
    (200..250).map(|i| format!("key-{i:04}")).collect()
}

/// `late-0000` … `late-0049`, inserted after the fold: still in the log.
pub fn logged_inserts() -> Vec<String> {
    (0..50).map(|i| format!("late-{i:04}")).collect()
}

/// Every key that must be present.
pub fn live_keys() -> Vec<String> {
    let mut v: Vec<String> = folded_inserts()
        .into_iter()
        .filter(|k| !removed().contains(k))
        .collect();
    v.push(HOT_KEY.to_string());
    v.extend(logged_inserts());
    v
}

/// The committed directory.
pub fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/fixtures/v1/store")
}

/// A fresh copy of the fixture in a temporary directory (tests never open
/// the committed one: opening writes to a sled directory).
pub fn copy_fixture() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&fixture_dir(), tmp.path());
    tmp
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).expect("the v1 store fixture is missing") {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// Total bytes of the files under `dir`.
pub fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                dir_size(&e.path())
            } else {
                e.metadata().unwrap().len()
            }
        })
        .sum()
}

/// An in-memory counting filter fed the fixture's operations: the folded
/// ones, and the logged ones too when `with_log`.
pub fn model(params: FilterParams, with_log: bool) -> CountingFilter {
    let mut c = CountingFilter::new(params).unwrap();
    for k in folded_inserts() {
        c.insert(k.as_bytes());
    }
    for k in removed() {
        c.remove(k.as_bytes()).unwrap();
    }
    for _ in 0..HOT_COUNT {
        c.insert(HOT_KEY.as_bytes());
    }
    if with_log {
        for k in logged_inserts() {
            c.insert(k.as_bytes());
        }
    }
    c
}
