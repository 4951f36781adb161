//! Group commit of the differential file's log: writers queued behind a
//! record share the next one (one write, one sync), become readable only
//! once it is durable, and all learn of its failure.

use super::*;
use crate::store::disk::io::fault;
use std::time::{Duration, Instant};

fn put(key: &str, value: &str) -> (Vec<u8>, Change) {
    (
        key.as_bytes().to_vec(),
        Change::Put(value.as_bytes().to_vec()),
    )
}

/// Waits (20 s at most) for `cond`.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// `WRITERS` threads append one write each while the log is held (as a
/// record being synced holds it); returns each one's outcome.
/// `fail_sync`: every writer's thread plans its next sync to fail
/// (whichever commits the group meets it).
fn appends_behind_a_held_log(log: &DiffLog, fail_sync: bool) -> Vec<Result<u64, SledDiffError>> {
    const WRITERS: usize = 4;
    std::thread::scope(|s| {
        let gate = log.writer.lock();
        let writers: Vec<_> = (0..WRITERS)
            .map(|t| {
                s.spawn(move || {
                    if fail_sync {
                        fault::fail_after(fault::Op::Sync, 0, fault::EIO);
                    }
                    log.append(&[put(&format!("own{t}"), "v"), put("shared", &t.to_string())])
                })
            })
            .collect();
        wait_until("every write queued", || {
            log.queue.lock().waiting.len() == WRITERS
        });
        for t in 0..WRITERS {
            assert_eq!(
                log.get(format!("own{t}").as_bytes()),
                None,
                "a change is readable before it was written"
            );
        }
        drop(gate);
        wait_until("every writer done", || {
            writers.iter().all(|w| w.is_finished())
        });
        writers.into_iter().map(|w| w.join().unwrap()).collect()
    })
}

#[test]
fn writers_behind_one_sync_share_the_next_and_are_read_only_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = DiffLog::open(dir.path(), "g").unwrap();
    let before = log.writer.lock().syncs();
    let lengths: Vec<u64> = appends_behind_a_held_log(&log, false)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        log.writer.lock().syncs() - before,
        1,
        "four writes, one sync"
    );
    assert!(
        lengths.windows(2).all(|w| w[0] == w[1]),
        "one record: {lengths:?}"
    );
    for t in 0..4 {
        assert_eq!(
            log.get(format!("own{t}").as_bytes()),
            Some(Change::Put(b"v".to_vec()))
        );
    }
    // Readable in the order written: the shared key's change is the last
    // record's, as recovery reads it.
    let shared = log.get(b"shared");
    assert!(shared.is_some());
    drop(log);
    let again = DiffLog::open(dir.path(), "g").unwrap();
    assert_eq!(again.get(b"shared"), shared);
    assert_eq!(again.len(), 5);
}

#[test]
fn a_failed_group_sync_fails_every_writer_behind_it_and_shows_none() {
    let dir = tempfile::tempdir().unwrap();
    let log = DiffLog::open(dir.path(), "g").unwrap();
    for outcome in appends_behind_a_held_log(&log, true) {
        let e = outcome.unwrap_err();
        assert!(e.is_outcome_unknown(), "{e}");
    }
    assert!(
        log.is_empty(),
        "a change whose sync failed was made readable"
    );
    // The log takes nothing more: a write now is refused, nothing written.
    let e = log.append(&[put("later", "v")]).unwrap_err();
    assert!(!e.is_outcome_unknown(), "{e}");
    assert!(log.freeze().unwrap().is_empty());
    drop(log);
    // The outcome was unknown: a reopen reads the group's record whole or
    // not at all (here the injected failure came before the system call,
    // so it is there), never the refused write.
    let again = DiffLog::open(dir.path(), "g").unwrap();
    let own = (0..4)
        .filter(|t| again.get(format!("own{t}").as_bytes()).is_some())
        .count();
    assert!(own == 0 || own == 4, "{own} of one record's four writes");
    assert_eq!(again.len(), own + usize::from(own > 0));
    assert_eq!(again.get(b"later"), None);
}
