//! The differential file as a log (store format 7): changes read back
//! after a reopen from the log alone, a full log merged into the base in
//! the background while reads stay right, a damaged log refused rather than
//! read short (a torn tail read as a prefix), a filter that lost keys
//! filled again by `Guard::open`, one state per storage name, and
//! buffered writes lost by a crash before a flush, never hidden.

use crate::common;

use filterstore::{
    Change, DiffStorage, Durability, FilterStore, Guard, SledDiffStorage, TableSpec, MERGE_AT,
};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn key(i: u32) -> Vec<u8> {
    format!("rec:{i:06}").into_bytes()
}

fn put(i: u32, round: u32, len: usize) -> (Vec<u8>, Change) {
    let mut v = format!("v{round}-{i}-").into_bytes();
    v.resize(len.max(v.len()), b'.');
    (key(i), Change::Put(v))
}

fn open_guard(store: &FilterStore) -> Guard<SledDiffStorage> {
    let table = store
        .open_or_create_table("changes", TableSpec::new(20_000, 0.01))
        .unwrap();
    Guard::open(SledDiffStorage::open(store, "t").unwrap(), table).unwrap()
}

/// The guard logs in a store directory.
fn logs(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir.join("guard-logs"))
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    found.sort();
    found
}

/// Copies the directory tree `from` to `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Waits (at most 60 s) until `storage` has no change left to merge.
fn wait_merged(storage: &SledDiffStorage) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while storage.diff_len().unwrap() > 0 {
        assert!(
            Instant::now() < deadline,
            "the background merge did not end"
        );
        assert_eq!(storage.merge_error(), None);
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn changes_are_read_back_from_the_log_after_a_reopen_and_then_merged() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = FilterStore::open(dir.path()).unwrap();
            let g = open_guard(&store);
            g.storage()
                .load_base((0..2_000u32).map(|i| (key(i), b"base")))
                .unwrap();
            for b in 0..10 {
                let changes: Vec<_> = (b * 100..b * 100 + 100).map(|i| put(i, 1, 20)).collect();
                g.write(&changes).unwrap();
            }
            g.write(&[(key(5), Change::Delete)]).unwrap();
            assert_eq!(g.storage().diff_len().unwrap(), 1_000);
            assert_eq!(logs(dir.path()).len(), 1, "one active log, nothing merged");
        }
        let store = common::reopen(dir.path(), "reopen");
        let g = open_guard(&store);
        let want = |i: u32| match i {
            5 => None,
            i if i < 1_000 => Some(put(i, 1, 20).1),
            _ => Some(Change::Put(b"base".to_vec())),
        };
        let check = |g: &Guard<SledDiffStorage>| {
            for i in 0..2_000u32 {
                let got = g.read(&key(i)).unwrap().map(|v| Change::Put(v.into()));
                assert_eq!(got, want(i), "key {i}");
            }
        };
        check(&g);
        // The recovered logs are merged in the background: the base then
        // holds every change, and the logs are gone but the new one.
        wait_merged(g.storage());
        assert_eq!(logs(dir.path()).len(), 1);
        for i in 0..2_000u32 {
            let base = g.storage().read_base(&key(i)).unwrap();
            assert_eq!(base.map(|v| Change::Put(v.into())), want(i), "base {i}");
        }
        check(&g);
    })
}

#[test]
fn a_full_log_is_merged_in_the_background_while_reads_stay_right() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let store = FilterStore::open(dir.path()).unwrap();
        let g = open_guard(&store);
        // 4,000-byte values: 600 changes are 2.4 MB, so the second batch
        // passes MERGE_AT and starts a merge; the next batches append while
        // it runs. Each round rewrites the same keys with new values.
        let value = 4_000;
        let per_batch = 600u32;
        assert!(u64::from(per_batch) * value as u64 * 2 > MERGE_AT);
        let done = std::sync::atomic::AtomicU32::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                for round in 1..=6u32 {
                    let changes: Vec<_> = (0..per_batch).map(|i| put(i, round, value)).collect();
                    g.write(&changes).unwrap();
                    done.store(round, std::sync::atomic::Ordering::Release);
                }
            });
            // A reader: every key reads as the last round written or a
            // later one, never an older value or the base.
            s.spawn(|| loop {
                let before = done.load(std::sync::atomic::Ordering::Acquire);
                for i in (0..per_batch).step_by(7) {
                    let got = g.read(&key(i)).unwrap();
                    if before == 0 {
                        continue;
                    }
                    let got = got.expect("a written key reads as absent");
                    let round: u32 =
                        std::str::from_utf8(&got[1..got.iter().position(|&b| b == b'-').unwrap()])
                            .unwrap()
                            .parse()
                            .unwrap();
                    assert!(
                        round >= before,
                        "key {i}: round {round} after round {before} was acknowledged"
                    );
                }
                if before == 6 {
                    break;
                }
            });
        });
        let st = g.storage();
        assert!(
            st.diff_log_bytes() < MERGE_AT * 3,
            "{}",
            st.diff_log_bytes()
        );
        g.merge().unwrap();
        assert_eq!(st.diff_len().unwrap(), 0);
        assert_eq!(logs(dir.path()).len(), 1);
        for i in 0..per_batch {
            assert_eq!(
                st.read_base(&key(i)).unwrap().map(Vec::from),
                match put(i, 6, value).1 {
                    Change::Put(v) => Some(v),
                    Change::Delete => None,
                }
            );
        }
    })
}

#[test]
fn a_damaged_log_is_refused_and_a_torn_tail_is_read_as_a_prefix() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = FilterStore::open(dir.path()).unwrap();
            let st = SledDiffStorage::open(&store, "t").unwrap();
            for b in 0..3u32 {
                let changes: Vec<_> = (b * 10..b * 10 + 10).map(|i| put(i, b, 30)).collect();
                st.write_diff(&changes).unwrap();
            }
        }
        let [log] = &logs(dir.path())[..] else {
            panic!("one log: {:?}", logs(dir.path()))
        };
        let bytes = std::fs::read(log).unwrap();
        let record = (bytes.len() - 24) / 3;
        // A byte of the second record flipped: the third, whole, says an
        // acknowledged record was lost; the open refuses, in one line, and
        // leaves the log as it was.
        let mut damaged = bytes.clone();
        damaged[24 + record + record / 2] ^= 0x10;
        std::fs::write(log, &damaged).unwrap();
        {
            let store = common::reopen(dir.path(), "damaged");
            let err = SledDiffStorage::open(&store, "t").unwrap_err().to_string();
            assert!(err.contains("damaged"), "{err}");
            assert!(!err.contains('\n'), "{err}");
        }
        assert_eq!(std::fs::read(log).unwrap(), damaged);
        // The last record torn: the first two read back, the third is a
        // write that never returned.
        std::fs::write(log, &bytes[..bytes.len() - 5]).unwrap();
        let store = common::reopen(dir.path(), "torn");
        let st = SledDiffStorage::open(&store, "t").unwrap();
        for i in 0..30u32 {
            let want = (i < 20).then(|| put(i, i / 10, 30).1);
            let got = st.read_diff(&key(i)).unwrap().or_else(|| {
                st.read_base(&key(i))
                    .unwrap()
                    .map(|v| Change::Put(v.into()))
            });
            assert_eq!(got, want, "key {i}");
        }
    })
}

#[test]
fn guard_open_fills_a_filter_that_lost_keys_and_opens_share_one_state() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let store = FilterStore::open(dir.path()).unwrap();
        let g = open_guard(&store);
        let changes: Vec<_> = (0..500u32).map(|i| put(i, 1, 10)).collect();
        g.write(&changes).unwrap();
        // Another handle of the storage sees the changes at once.
        let other = SledDiffStorage::open(&store, "t").unwrap();
        assert_eq!(other.diff_len().unwrap(), 500);
        assert_eq!(other.read_diff(&key(3)).unwrap(), Some(put(3, 1, 10).1));
        // The filter loses every key (as a table restored from an older
        // copy would) while the differential file keeps the changes.
        let table = g.table().clone();
        drop(g);
        table.clear().unwrap();
        assert_eq!(table.live_keys(), 0);
        let g = Guard::open(other, table).unwrap();
        for i in 0..500u32 {
            assert!(
                g.table().contains(&key(i)),
                "key {i} not in the filter again"
            );
            let got = g.read(&key(i)).unwrap().map(|v| Change::Put(v.into()));
            assert_eq!(got, Some(put(i, 1, 10).1), "key {i}");
        }
    })
}

/// The log cut at every length (a truncation, or a power cut that kept a
/// prefix): the storage opens, reads a prefix of the writes (each write
/// wholly there or wholly absent), and every change it reads is a "maybe"
/// of the guard's filter, so no read misses it.
#[test]
fn a_log_cut_at_any_length_reads_a_prefix_of_whole_writes_none_hidden_by_the_filter() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let writes = 6u32;
        {
            let store = FilterStore::open(dir.path()).unwrap();
            let g = open_guard(&store);
            for b in 0..writes {
                let changes: Vec<_> = (b * 5..b * 5 + 5).map(|i| put(i, b, 12)).collect();
                g.write(&changes).unwrap();
            }
        }
        let [log] = &logs(dir.path())[..] else {
            panic!("one log: {:?}", logs(dir.path()))
        };
        let bytes = std::fs::read(log).unwrap();
        let copy = tempfile::tempdir().unwrap();
        for len in (0..=bytes.len()).step_by(11).chain([bytes.len()]) {
            let _ = std::fs::remove_dir_all(copy.path().join("s"));
            copy_tree(dir.path(), &copy.path().join("s"));
            let cut = copy
                .path()
                .join("s")
                .join("guard-logs")
                .join(log.file_name().unwrap());
            std::fs::write(&cut, &bytes[..len]).unwrap();
            let store = common::reopen(&copy.path().join("s"), "cut");
            let g = open_guard(&store);
            let mut whole = 0;
            for b in 0..writes {
                let present: Vec<bool> = (b * 5..b * 5 + 5)
                    .map(|i| {
                        let got = g.read(&key(i)).unwrap().map(|v| Change::Put(v.into()));
                        // What the storage holds, read without the filter
                        // (a merge may move it meanwhile: the same value).
                        let st = g.storage();
                        let held = match st.read_diff(&key(i)).unwrap() {
                            Some(c) => Some(c),
                            None => st
                                .read_base(&key(i))
                                .unwrap()
                                .map(|v| Change::Put(v.into())),
                        };
                        assert_eq!(got, held, "{len}: key {i}'s change hidden by the filter");
                        got == Some(put(i, b, 12).1)
                    })
                    .collect();
                assert!(
                    present.iter().all(|&p| p == present[0]),
                    "{len}: write {b} torn"
                );
                if present[0] {
                    assert_eq!(whole, b, "{len}: write {b} read after a missing one");
                    whole += 1;
                }
            }
            drop(g);
        }
    })
}

/// Buffered guard writes (`Guard::write_with`, `Durability::Buffered`):
/// readable at once; a crash before a flush loses their changes but never
/// their filter inserts (durable first), so their keys read the base (a
/// false positive each), never a stale or missing record; after
/// `Guard::flush`, or once a merge moved them into the base, a crash keeps
/// them. A crash is a copy of the store's directory while it is open (no
/// merge running: the log is far below `MERGE_AT`).
#[test]
fn buffered_writes_are_lost_by_a_crash_before_a_flush_and_never_hidden() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let crashed = tempfile::tempdir().unwrap();
        let flushed = tempfile::tempdir().unwrap();
        let merged = tempfile::tempdir().unwrap();
        let store = FilterStore::open(dir.path()).unwrap();
        let g = open_guard(&store);
        g.storage()
            .load_base((0..300u32).map(|i| (key(i), b"base")))
            .unwrap();
        let round = |r: u32, ids: std::ops::Range<u32>| -> Vec<(Vec<u8>, Change)> {
            ids.map(|i| put(i, r, 20)).collect()
        };
        g.write(&round(1, 0..100)).unwrap();
        g.write_with(&round(1, 100..200), Durability::Buffered)
            .unwrap();
        for i in 0..200u32 {
            let got = g.read(&key(i)).unwrap().map(|v| Change::Put(v.into()));
            assert_eq!(got, Some(put(i, 1, 20).1), "key {i} before the crash");
        }
        copy_tree(dir.path(), crashed.path());
        g.flush().unwrap();
        copy_tree(dir.path(), flushed.path());
        g.write_with(&round(2, 200..300), Durability::Buffered)
            .unwrap();
        g.merge().unwrap();
        copy_tree(dir.path(), merged.path());
        drop(g);
        drop(store);
        let value = |i: u32, r: u32| match put(i, r, 20).1 {
            Change::Put(v) => v,
            Change::Delete => unreachable!(),
        };
        for (copy, what, want) in [
            (crashed.path(), "crashed", [1, 0, 0]),
            (flushed.path(), "flushed", [1, 1, 0]),
            (merged.path(), "merged", [1, 1, 2]),
        ] {
            let store = common::reopen(copy, what);
            let g = open_guard(&store);
            for i in 0..300u32 {
                let got = g.read(&key(i)).unwrap().map(|v| v.as_ref().to_vec());
                let expected = match want[(i / 100) as usize] {
                    0 => b"base".to_vec(),
                    r => value(i, r),
                };
                assert_eq!(got, Some(expected), "{what}: key {i}");
            }
            if what == "crashed" {
                let st = g.stats();
                assert!(
                    st.false_positives >= 100,
                    "the lost changes' keys stay in the filter: {st:?}"
                );
            }
        }
    })
}
