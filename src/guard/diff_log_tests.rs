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

/// A crash: the log is never dropped (its buffered changes are not
/// written), and the directory is opened again.
fn crash_and_reopen(log: DiffLog, dir: &Path) -> DiffLog {
    std::mem::forget(log);
    DiffLog::open(dir, "g").unwrap()
}

#[test]
fn buffered_changes_are_readable_at_once_and_durable_only_from_the_next_sync() {
    let dir = tempfile::tempdir().unwrap();
    let log = DiffLog::open(dir.path(), "g").unwrap();
    log.append(&[put("a", "durable")]).unwrap();
    let syncs = log.writer.lock().syncs();
    let len = log.active_len();
    log.append_buffered(&[put("b", "1"), put("a", "buffered")])
        .unwrap();
    log.append_buffered(&[put("c", "1")]).unwrap();
    assert_eq!(log.get(b"a"), Some(Change::Put(b"buffered".to_vec())));
    assert_eq!(log.get(b"c"), Some(Change::Put(b"1".to_vec())));
    assert_eq!(log.writer.lock().syncs(), syncs, "a buffered write synced");
    assert_eq!(log.active_len(), len, "a buffered write was written");
    // Lost by a crash; the durable change is what is left.
    let log = crash_and_reopen(log, dir.path());
    assert_eq!(log.get(b"a"), Some(Change::Put(b"durable".to_vec())));
    assert_eq!((log.get(b"b"), log.get(b"c")), (None, None));
    // A flush writes them as one record, one sync.
    log.append_buffered(&[put("b", "2")]).unwrap();
    log.append_buffered(&[put("c", "2")]).unwrap();
    let syncs = log.writer.lock().syncs();
    log.flush().unwrap();
    log.flush().unwrap();
    assert_eq!(log.writer.lock().syncs() - syncs, 1, "one record, once");
    let log = crash_and_reopen(log, dir.path());
    assert_eq!(log.get(b"b"), Some(Change::Put(b"2".to_vec())));
    assert_eq!(log.get(b"c"), Some(Change::Put(b"2".to_vec())));
    // A drop writes them too.
    log.append_buffered(&[put("d", "1")]).unwrap();
    drop(log);
    let log = DiffLog::open(dir.path(), "g").unwrap();
    assert_eq!(log.get(b"d"), Some(Change::Put(b"1".to_vec())));
}

#[test]
fn a_durable_write_takes_the_buffered_ones_into_its_record_in_the_order_made() {
    let dir = tempfile::tempdir().unwrap();
    let log = DiffLog::open(dir.path(), "g").unwrap();
    // Buffered, then durable, of one key: the durable one is the newest.
    log.append_buffered(&[put("k", "1"), put("only-buffered", "x")])
        .unwrap();
    let syncs = log.writer.lock().syncs();
    log.append(&[put("k", "2")]).unwrap();
    assert_eq!(log.writer.lock().syncs() - syncs, 1, "one record for both");
    assert_eq!(log.get(b"k"), Some(Change::Put(b"2".to_vec())));
    // Durable, then buffered: the buffered one is the newest, and stays so
    // once a later durable write of another key makes it durable.
    log.append_buffered(&[put("k", "3"), (b"gone".to_vec(), Change::Delete)])
        .unwrap();
    log.append(&[put("other", "v")]).unwrap();
    assert_eq!(log.get(b"k"), Some(Change::Put(b"3".to_vec())));
    let log = crash_and_reopen(log, dir.path());
    assert_eq!(log.get(b"k"), Some(Change::Put(b"3".to_vec())));
    assert_eq!(log.get(b"gone"), Some(Change::Delete));
    assert_eq!(log.get(b"only-buffered"), Some(Change::Put(b"x".to_vec())));
    assert_eq!(log.len(), 4);
}

#[test]
fn buffered_changes_past_the_limit_are_written_first_and_clear_drops_them() {
    let dir = tempfile::tempdir().unwrap();
    let log = DiffLog::open(dir.path(), "g").unwrap();
    let value = "v".repeat(60 << 10);
    let writes = GUARD_PENDING_LIMIT / value.len() + 2;
    let syncs = log.writer.lock().syncs();
    for i in 0..writes {
        log.append_buffered(&[put(&format!("k{i}"), &value)])
            .unwrap();
    }
    assert_eq!(log.writer.lock().syncs() - syncs, 1, "the full buffer");
    let log = crash_and_reopen(log, dir.path());
    let kept = (0..writes)
        .filter(|i| log.get(format!("k{i}").as_bytes()).is_some())
        .count();
    assert!(
        (writes - 3..writes).contains(&kept),
        "{kept} of {writes}: the buffer written when full is durable, the rest lost"
    );
    // A clear empties the buffer: nothing of it comes back.
    log.append_buffered(&[put("cleared", "v")]).unwrap();
    log.clear().unwrap();
    assert_eq!(log.get(b"cleared"), None);
    log.append(&[put("after", "v")]).unwrap();
    let log = crash_and_reopen(log, dir.path());
    assert_eq!(log.get(b"cleared"), None);
    assert_eq!(log.len(), 1);
}

#[test]
fn after_a_failed_write_a_buffered_write_is_refused_and_shows_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = DiffLog::open(dir.path(), "g").unwrap();
    log.append_buffered(&[put("held", "v")]).unwrap();
    fault::fail_after(fault::Op::Write, 0, fault::EIO);
    let e = log.append(&[put("durable", "v")]).unwrap_err();
    assert!(!e.is_outcome_unknown(), "{e}");
    assert_eq!(log.get(b"durable"), None);
    let e = log.append_buffered(&[put("later", "v")]).unwrap_err();
    assert!(!e.is_outcome_unknown(), "{e}");
    assert_eq!(log.get(b"later"), None);
    let log = crash_and_reopen(log, dir.path());
    assert_eq!(
        (log.get(b"held"), log.get(b"durable"), log.get(b"later")),
        (None, None, None)
    );
}

#[test]
fn a_freeze_writes_the_buffered_changes_into_the_log_it_freezes() {
    let dir = tempfile::tempdir().unwrap();
    let log = DiffLog::open(dir.path(), "g").unwrap();
    log.append_buffered(&[put("b", "1")]).unwrap();
    let frozen = log.freeze().unwrap();
    assert_eq!(frozen.changes().count(), 1);
    drop(frozen);
    // The frozen log (not yet merged) holds the change: a crash keeps it.
    let log = crash_and_reopen(log, dir.path());
    assert_eq!(log.get(b"b"), Some(Change::Put(b"1".to_vec())));
    assert_eq!(log.len(), 1);
}

#[test]
fn a_large_buffered_write_is_durable_and_a_full_record_leaves_the_buffer_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let log = DiffLog::open(dir.path(), "g").unwrap();
    // Over the buffer's limit alone: written and synced as a durable write.
    let big = "b".repeat(GUARD_PENDING_LIMIT + 1);
    let syncs = log.writer.lock().syncs();
    log.append_buffered(&[put("big", &big)]).unwrap();
    assert_eq!(log.writer.lock().syncs() - syncs, 1);
    // Buffered changes, then a durable write whose record is nearly the
    // largest one: together they would pass `MAX_RECORD` (recovery takes no
    // larger record as evidence of damage behind a torn one), so they go in
    // two records, in order.
    log.append_buffered(&[put("held", "1")]).unwrap();
    let huge = "h".repeat(MAX_RECORD - RECORD_HEAD - 4 - 7 - 4 - 8);
    let syncs = log.writer.lock().syncs();
    log.append(&[put("huge", &huge)]).unwrap();
    assert_eq!(log.writer.lock().syncs() - syncs, 2, "two records");
    let log = crash_and_reopen(log, dir.path());
    assert_eq!(log.get(b"big"), Some(Change::Put(big.into_bytes())));
    assert_eq!(log.get(b"held"), Some(Change::Put(b"1".to_vec())));
    assert_eq!(log.get(b"huge"), Some(Change::Put(huge.into_bytes())));
}

#[test]
fn a_flush_whose_write_or_sync_fails_says_so_and_the_log_takes_no_more() {
    // A failed write: nothing written, said as such; the buffered change
    // stays readable until the process ends, and is gone after a crash.
    let dir = tempfile::tempdir().unwrap();
    let log = DiffLog::open(dir.path(), "g").unwrap();
    log.append_buffered(&[put("held", "v")]).unwrap();
    fault::fail_after(fault::Op::Write, 0, fault::EIO);
    let e = log.flush().unwrap_err();
    assert!(!e.is_outcome_unknown(), "{e}");
    assert!(log.append(&[put("later", "v")]).is_err());
    let log = crash_and_reopen(log, dir.path());
    assert_eq!((log.get(b"held"), log.get(b"later")), (None, None));
    // A failed sync: the outcome is unknown, and a reopen reads the
    // record whole or not at all.
    log.append_buffered(&[put("a", "1"), put("b", "1")])
        .unwrap();
    fault::fail_after(fault::Op::Sync, 0, fault::EIO);
    let e = log.flush().unwrap_err();
    assert!(e.is_outcome_unknown(), "{e}");
    assert!(log.append_buffered(&[put("later", "v")]).is_err());
    let log = crash_and_reopen(log, dir.path());
    assert_eq!(
        log.get(b"a").is_some(),
        log.get(b"b").is_some(),
        "half a record"
    );
    assert_eq!(log.get(b"later"), None);
}
