//! The catalog's commits through its log (format 6): the bytes written
//! stay linear in the changes, a torn or damaged tail is cut off at the
//! next writing open, and every injected failure of an append, a
//! checkpoint or the log's making either changed nothing or says the
//! outcome is unknown, and a reopen finds the catalog as it was before or
//! after the change.

use super::commit::CHECKPOINT_MIN_BYTES;
use super::records::LogSlot;
use super::{Catalog, StoreHeader, TableMeta};
use crate::filter::hash::HashSpec;
use crate::filter::params::{FilterParams, Layout};
use crate::store::disk::catalog_log::LOG_FILE;
use crate::store::disk::io::fault::{self, Op, EIO};
use crate::store::error::StoreError;

fn meta(id: u64) -> TableMeta {
    let p = FilterParams::for_capacity(100, 0.01, Layout::Blocked, HashSpec::xxh3(1)).unwrap();
    TableMeta::new_table(id, &format!("table-{id:05}"), &p, 100, 0.01)
}

/// A new catalog in `dir` and a writing open of it.
fn writable(dir: &std::path::Path) -> Catalog {
    Catalog::create(dir).unwrap();
    reopen(dir)
}

fn reopen(dir: &std::path::Path) -> Catalog {
    let mut c = Catalog::load(dir).unwrap().unwrap();
    c.open_log().unwrap();
    c
}

fn names(c: &Catalog) -> Vec<String> {
    c.records().unwrap().into_iter().map(|m| m.name).collect()
}

fn log_id(c: &Catalog) -> u64 {
    match &c.log {
        LogSlot::Open(l) => l.id(),
        other => panic!("{other:?}"),
    }
}

fn put(c: &mut Catalog, id: u64) -> Result<(), StoreError> {
    c.commit(|e| {
        let mut h: StoreHeader = e.header();
        h.next_table_id = id + 1;
        e.set_header(h);
        e.put(meta(id));
    })?;
    c.checkpoint_if_due()
}

#[test]
fn creating_n_tables_writes_bytes_linear_in_n() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = writable(dir.path());
    let n = 3_000;
    let (mut files, mut checkpoints, mut largest_log) = (0u64, 0, 0u64);
    for id in 1..=n {
        let before = log_id(&c);
        put(&mut c, id).unwrap();
        let LogSlot::Open(l) = &c.log else { panic!() };
        largest_log = largest_log.max(l.len());
        // The log never grows past the checkpoint threshold by more than
        // one record (here under 200 bytes).
        assert!(
            l.len() <= CHECKPOINT_MIN_BYTES.max(c.file_bytes) + 200,
            "{}",
            l.len()
        );
        if l.id() != before {
            checkpoints += 1;
            files += c.file_bytes;
        }
    }
    // Rewriting the file on every change would write about n/2 final
    // files; the checkpoints write a few, each at most twice the log it
    // folds (the threshold doubles with the file).
    let whole_rewrites = c.file_bytes * n / 2;
    assert!((3..30).contains(&checkpoints), "{checkpoints}");
    assert!(
        files * 20 < whole_rewrites,
        "{files} bytes against {whole_rewrites}"
    );
    assert!(largest_log <= 2 * c.file_bytes + CHECKPOINT_MIN_BYTES);
    drop(c);
    assert_eq!(names(&reopen(dir.path())).len(), n as usize);
}

#[test]
fn a_torn_or_damaged_tail_is_cut_off_and_appends_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = writable(dir.path());
    put(&mut c, 1).unwrap();
    put(&mut c, 2).unwrap();
    drop(c);
    let log = dir.path().join(LOG_FILE);
    let whole = std::fs::read(&log).unwrap();
    // A record cut short, then garbage after whole records.
    for tail in [
        &whole[..whole.len() - 3],
        &[whole.as_slice(), &[7u8; 40]].concat(),
    ] {
        std::fs::write(&log, tail).unwrap();
        let mut c = reopen(dir.path());
        let kept = names(&c).len();
        put(&mut c, 10).unwrap();
        drop(c);
        let c = reopen(dir.path());
        assert_eq!(names(&c).len(), kept + 1);
        assert!(names(&c).contains(&"table-00010".to_string()));
        drop(c);
        std::fs::write(&log, &whole).unwrap();
    }
}

#[test]
fn every_failure_of_an_append_or_a_checkpoint_is_before_or_unknown() {
    let base = tempfile::tempdir().unwrap();
    bring_to_a_checkpoints_edge(base.path());
    // Failures counted by where they struck: [commit refused, commit
    // unknown, checkpoint refused, checkpoint unknown].
    let mut seen = [0; 4];
    for op in [Op::Write, Op::Sync, Op::SyncDir, Op::Rename] {
        for skip in 0.. {
            if !commit_failing_at(base.path(), op, skip, &mut seen) {
                break;
            }
            assert!(skip < 32);
        }
    }
    assert!(seen.iter().all(|&n| n >= 1), "{seen:?}");
}

/// Makes a catalog in `dir` whose log is within 150 bytes of a checkpoint.
fn bring_to_a_checkpoints_edge(dir: &std::path::Path) {
    let mut c = writable(dir);
    let mut id = 1;
    let edge = |c: &Catalog| CHECKPOINT_MIN_BYTES.max(c.file_bytes) - 150;
    while !matches!(&c.log, LogSlot::Open(l) if l.len() > edge(&c)) {
        put(&mut c, id).unwrap();
        id += 1;
        assert!(
            id < 100_000,
            "the log never came within 150 bytes of a checkpoint"
        );
    }
}

/// Commits one table into a copy of the catalog in `base` (and
/// checkpoints, if due) with the `skip + 1`-th `op` failing; checks that a
/// refused failure lost nothing and left the catalog writable, and that an
/// unknown one left either outcome, counting each kind into `seen` (as the
/// test). Whether the failure fired.
fn commit_failing_at(base: &std::path::Path, op: Op, skip: u32, seen: &mut [usize; 4]) -> bool {
    let d = tempfile::tempdir().unwrap();
    copy_dir(base, d.path());
    let mut c = reopen(d.path());
    let n0 = names(&c).len();
    fault::fail_after(op, skip, EIO);
    let committed = c.commit(|e| e.put(meta(90_000)));
    let checkpoint = committed.as_ref().map(|_| c.checkpoint_if_due());
    let fired = fault::clear();
    let what = format!("{op:?} {skip}: {committed:?} {checkpoint:?}");
    let unknown = match (&committed, &checkpoint) {
        (Err(e), _) if !e.is_outcome_unknown() => {
            seen[0] += 1;
            Some(n0)
        }
        (Err(_), _) => {
            seen[1] += 1;
            None
        }
        (Ok(()), Ok(Err(e))) if !e.is_outcome_unknown() => {
            seen[2] += 1;
            Some(n0 + 1)
        }
        (Ok(()), Ok(Err(_))) => {
            seen[3] += 1;
            None
        }
        (Ok(()), _) => Some(n0 + 1),
    };
    match unknown {
        // The store would stop writing: a reopen finds either.
        None => {
            let got = names(&reopen_after(c, d.path())).len();
            assert!(got == n0 || got == n0 + 1, "{what}");
        }
        // Nothing lost, and the next commit is durable.
        Some(want) => {
            put(&mut c, 90_001).unwrap();
            let got = names(&reopen_after(c, d.path())).len();
            assert_eq!(got, want + 1, "{what}");
        }
    }
    fired
}

/// Drops the catalog and reopens the store's catalog from disk.
fn reopen_after(c: Catalog, dir: &std::path::Path) -> Catalog {
    drop(c);
    reopen(dir)
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}
