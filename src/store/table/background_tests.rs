//! Folds in the background ([`background`](super::background)): a stream
//! of batches that crosses the fold threshold many times, with removes and
//! explicit folds between, leaves exactly the counters of its operations,
//! in memory and after a reopen; the folds commit while writes go on, and
//! the log's folded bytes are given back.

use super::truncation_tests::image;
use crate::filter::counting::CountingFilter;
use crate::store::{Durability, FilterStore, StoreConfig, Table, TableSpec, WriteBatch};

fn key(i: u32) -> Vec<u8> {
    format!("bg-{i:06}").into_bytes()
}

fn open(dir: &std::path::Path, background: bool) -> (FilterStore, Table) {
    let config = StoreConfig::default()
        .fold_threshold(2_000)
        .background_folds(background);
    let store = FilterStore::open_with(dir, config).unwrap();
    let t = match store.open_table("t") {
        Ok(t) => t,
        Err(crate::store::StoreError::NoSuchTable(_)) => store
            .create_table("t", TableSpec::new(100_000, 0.01).seed(11))
            .unwrap(),
        Err(e) => panic!("{e}"),
    };
    (store, t)
}

/// A batch inserting the keys of `range`.
fn inserts(range: std::ops::Range<u32>) -> WriteBatch {
    let mut batch = WriteBatch::new();
    for i in range {
        batch.insert(&key(i));
    }
    batch
}

/// The superblock in force of `t`'s writer: (folds, `log_start`).
fn superblock(t: &Table) -> (u64, u64) {
    let g = t.inner.gen.load_full();
    let w = g.writer.lock();
    let sb = w.pages.superblock();
    (sb.fold, sb.log_start)
}

/// 60 batches of 500 inserts (durable or buffered in turn), every seventh
/// followed by removes of 100 keys inserted before (a remove on a block
/// with pending inserts folds on the caller's thread, after waiting for the
/// fold in the background) and every eleventh by an explicit fold. Returns
/// the model and the live keys; checks after every batch that every live
/// key answers.
fn stream(t: &Table, starts: &mut Vec<(u64, u64)>) -> (CountingFilter, Vec<u32>) {
    let mut model = CountingFilter::new(t.params()).unwrap();
    let mut live: Vec<u32> = Vec::new();
    let mut next = 0u32;
    for b in 0..60u32 {
        let batch = inserts(next..next + 500);
        for i in next..next + 500 {
            model.insert(&key(i));
            live.push(i);
        }
        next += 500;
        let level = [Durability::Durable, Durability::Buffered][b as usize % 2];
        t.apply(&batch, level).unwrap();
        if b % 7 == 6 {
            let mut removes = WriteBatch::new();
            for i in live.drain(..100) {
                removes.remove(&key(i));
                model.remove(&key(i)).unwrap();
            }
            t.apply(&removes, Durability::Durable).unwrap();
        }
        if b % 11 == 10 {
            t.fold().unwrap();
        }
        for &i in live.iter().step_by(37) {
            assert!(t.contains(&key(i)), "batch {b}: key {i} lost");
        }
        starts.push(superblock(t));
    }
    t.flush().unwrap();
    (model, live)
}

fn check(t: &Table, model: &CountingFilter, live: &[u32], what: &str) {
    assert_eq!(t.live_keys(), live.len() as u64, "{what}");
    for &i in live {
        assert!(t.contains(&key(i)), "{what}: key {i} lost");
    }
    let counting = t.counting_snapshot().unwrap();
    assert!(
        counting.as_bytes() == model.as_bytes(),
        "{what}: counters differ from the model"
    );
}

#[test]
fn background_folds_keep_exact_counters_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut starts = Vec::new();
    let (model, live) = {
        let (_store, t) = open(dir.path(), true);
        stream(&t, &mut starts)
    };
    // Folds committed with the log starting past byte 0: in the
    // background, while later records stayed in the log.
    assert!(
        starts.iter().any(|&(_, start)| start > 0),
        "no fold ran in the background: {starts:?}"
    );
    let (_store, t) = open(dir.path(), true);
    check(&t, &model, &live, "reopened");
}

#[test]
fn background_and_foreground_folds_agree() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut starts = Vec::new();
    let (model, live) = {
        let (_store, t) = open(a.path(), true);
        stream(&t, &mut starts)
    };
    let mut here = Vec::new();
    {
        let (_store, t) = open(b.path(), false);
        stream(&t, &mut here);
        check(&t, &model, &live, "folds on the caller's thread");
    }
    assert!(here.iter().all(|&(_, start)| start == 0), "{here:?}");
    let (_store, t) = open(a.path(), false);
    check(&t, &model, &live, "background folds, reopened without them");
}

#[test]
fn folded_log_bytes_are_given_back() {
    let dir = tempfile::tempdir().unwrap();
    let (_store, t) = open(dir.path(), true);
    // Batches until two folds committed in the background have been taken
    // in, the earlier one's log starting a page or more in: the bytes
    // before it are punched, the ones from it on kept (the copy before the
    // one in force reads them).
    let mut starts = vec![superblock(&t)];
    for b in 0..80u32 {
        t.apply(&inserts(b * 500..b * 500 + 500), Durability::Durable)
            .unwrap();
        let now = superblock(&t);
        if now != *starts.last().unwrap() {
            starts.push(now);
        }
        let n = starts.len();
        if n >= 3 && starts[n - 2].1 >= 4096 && starts[n - 1].1 > starts[n - 2].1 {
            break;
        }
    }
    let n = starts.len();
    assert!(
        n >= 3 && starts[n - 2].1 >= 4096,
        "no two folds taken in from the background: {starts:?}"
    );
    let (before, now) = (starts[n - 2].1, starts[n - 1].1);
    let g = t.inner.gen.load_full();
    let w = g.writer.lock();
    let mut head = vec![1u8; 4096];
    crate::store::disk::io::read_exact_at(w.log.file(), &mut head, 0).unwrap();
    // Punched (zeros), unless the file system cannot punch: then the next
    // fold runs on the writer's thread and empties the log.
    assert!(
        head.iter().all(|&b| b == 0) || w.fold_here,
        "folded bytes still there"
    );
    // The record where the copy before starts the log is still there.
    let first = crate::store::disk::log_read::first_seq(w.log.file(), before, w.log.binding());
    assert!(
        first.unwrap().is_some(),
        "record at {before} punched ({now})"
    );
}

/// Batches into `t` (recorded in `model`, keys from `*next` on) until two
/// folds in a row were taken in from the background and none runs any more;
/// returns the fold number in force.
fn two_background_folds(t: &Table, model: &mut CountingFilter, next: &mut u32) -> u64 {
    let mut last = superblock(t);
    let mut background = 0;
    let running = || t.inner.gen.load_full().writer.lock().background.is_some();
    let started = std::time::Instant::now();
    while background < 2 || running() {
        assert!(*next < 80_000, "no two folds in the background");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "a background fold still running after 60 s"
        );
        let batch = if background < 2 {
            for i in *next..*next + 500 {
                model.insert(&key(i));
            }
            *next += 500;
            inserts(*next - 500..*next)
        } else {
            // Only take in the fold still running.
            std::thread::sleep(std::time::Duration::from_millis(2));
            WriteBatch::new()
        };
        t.apply(&batch, Durability::Durable).unwrap();
        let now = superblock(t);
        if now != last {
            background = if now.1 > 0 { background + 1 } else { 0 };
            last = now;
        }
    }
    t.flush().unwrap();
    last.0
}

/// Whether the file system under `dir` punches holes (a scratch file).
fn can_punch(dir: &std::path::Path) -> bool {
    let path = dir.join("punch-probe");
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(8192).unwrap();
    let punched = matches!(crate::store::disk::sys::punch_prefix(&f, 4096), Ok(true));
    std::fs::remove_file(&path).unwrap();
    punched
}

/// Flips a byte in the body of the superblock copy in force of the one
/// table in `dir` (copy `fold % 2`; one 4 KiB copy for this table's 30
/// chunks): its CRC fails, and the copy before comes back.
fn damage_superblock(dir: &std::path::Path, fold: u64) {
    let pages = std::fs::read_dir(dir.join("tables"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "pages"))
        .unwrap();
    let mut bytes = std::fs::read(&pages).unwrap();
    bytes[(fold % 2) as usize * 4096 + 40] ^= 0x40;
    std::fs::write(&pages, &bytes).unwrap();
}

/// `docs/FORMAT.md` § 11: a damaged superblock copy in force brings back
/// the copy before it. After a fold in the background that copy still
/// finds every record it needs (its slots untouched, the log kept from its
/// `log_start` on): every key answers, the counters are exact. The store is
/// taken as a crash leaves it (its files copied while it is open): a clean
/// close may commit one more copy, claiming the log's last synced records
/// (`PageFile::claim_durable`), and the copy before would then be the
/// fold's own.
#[test]
fn a_damaged_superblock_after_a_background_fold_falls_back_losing_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let crashed = tempfile::tempdir().unwrap();
    let mut next = 0u32;
    let (model, fold) = {
        let (_store, t) = open(dir.path(), true);
        let mut model = CountingFilter::new(t.params()).unwrap();
        let fold = two_background_folds(&t, &mut model, &mut next);
        // Where the file system punches holes (ext4, XFS, tmpfs), the
        // folds above punched the log's head: the fallback below reads a
        // punched log, the path a fold that punched too much would break.
        let g = t.inner.gen.load_full();
        let w = g.writer.lock();
        let mut head = vec![1u8; 4096];
        crate::store::disk::io::read_exact_at(w.log.file(), &mut head, 0).unwrap();
        assert!(
            head.iter().all(|&b| b == 0) || !can_punch(dir.path()),
            "the folds punched nothing on a file system that punches"
        );
        drop(w);
        image(dir.path(), crashed.path());
        (model, fold)
    };
    damage_superblock(crashed.path(), fold);
    let (_store, t) = open(crashed.path(), true);
    assert_eq!(superblock(&t).0, fold - 1, "the copy before is in force");
    let live: Vec<u32> = (0..next).collect();
    check(&t, &model, &live, "after the fallback");
}

/// The same damage after a fold on the writer's thread, which emptied the
/// log that the copy before (a fold in the background, whose log started
/// past byte 0) needs: the table is refused as corrupt, never opened
/// without the records the damaged copy had folded (as a crash leaves the
/// store). After a clean close, whose claim of the batch after the fold is
/// the copy in force, damage to that copy brings back the fold's: every key
/// answers.
#[test]
fn a_damaged_superblock_whose_fold_emptied_the_log_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let crashed = tempfile::tempdir().unwrap();
    let mut next = 0u32;
    let fold = {
        let (_store, t) = open(dir.path(), true);
        let mut model = CountingFilter::new(t.params()).unwrap();
        two_background_folds(&t, &mut model, &mut next);
        t.fold().unwrap();
        let mut batch = WriteBatch::new();
        batch.insert(b"after the fold");
        t.apply(&batch, Durability::Durable).unwrap();
        image(dir.path(), crashed.path());
        superblock(&t).0
    };
    damage_superblock(crashed.path(), fold);
    let store = FilterStore::open(crashed.path()).unwrap();
    match store.open_table("t") {
        Err(e @ crate::store::StoreError::Corrupt { .. }) => {
            assert!(e.to_string().contains("newer copy was damaged"), "{e}");
            // One line, words single-spaced (a message split across
            // source lines keeps no indentation).
            assert!(!e.to_string().contains("  "), "{e}");
        }
        other => panic!("{:?}", other.map(|t| t.live_keys())),
    }
    damage_superblock(dir.path(), fold + 1);
    let (_store, t) = open(dir.path(), true);
    assert_eq!(superblock(&t).0, fold, "the fold's copy is in force");
    assert!((0..next).all(|i| t.contains(&key(i))) && t.contains(b"after the fold"));
    assert!(!t.health().unwrap().needs_regeneration());
}

/// Durable batches of 500 new keys into `t` (and `model`) until `done`
/// holds after one, at most 200.
fn batches_until(
    t: &Table,
    model: &mut CountingFilter,
    next: &mut u32,
    mut done: impl FnMut(&Table) -> bool,
) -> Result<(), crate::store::StoreError> {
    for _ in 0..200 {
        t.apply(&inserts(*next..*next + 500), Durability::Durable)?;
        for i in *next..*next + 500 {
            model.insert(&key(i));
        }
        *next += 500;
        if done(t) {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    panic!("not reached in 200 batches");
}

/// The fold thread's chunk sync fails (before its superblock: nothing
/// committed): the writes go on, the writer takes the failure in, the
/// next fold runs on the writer's thread (it empties the log), and every
/// key is there, also after a reopen.
#[test]
fn a_failed_sync_in_a_background_fold_commits_nothing_and_the_next_fold_runs_here() {
    use crate::store::disk::io::fault::{self, Op, EIO};
    let dir = tempfile::tempdir().unwrap();
    let mut next = 0u32;
    let model = {
        let (_store, t) = open(dir.path(), true);
        let mut model = CountingFilter::new(t.params()).unwrap();
        let before = superblock(&t).0;
        fault::fail_in_next_background_fold(dir.path(), Op::Sync, 0, EIO);
        let taken_in = |t: &Table| {
            let g = t.inner.gen.load_full();
            let w = g.writer.lock();
            fault::background_fold_failed(dir.path()) && w.background.is_none()
        };
        batches_until(&t, &mut model, &mut next, taken_in).unwrap();
        // The failed fold committed nothing; the next fold (maybe in the
        // same write that took the failure in) ran on this thread and
        // emptied the log: one fold more, the log from byte 0.
        if superblock(&t).0 == before {
            batches_until(&t, &mut model, &mut next, |t| superblock(t).0 > before).unwrap();
        }
        assert_eq!(superblock(&t), (before + 1, 0));
        let live: Vec<u32> = (0..next).collect();
        check(&t, &model, &live, "after the failed fold");
        model
    };
    let (_store, t) = open(dir.path(), true);
    check(&t, &model, &(0..next).collect::<Vec<_>>(), "reopened");
}

/// The fold thread's sync after its superblock write fails: whether the
/// disk holds the new superblock is unknown, so the store stops writing
/// (the next write is refused, lookups answer), and a reopen finds every
/// acknowledged key with exact counters.
#[test]
fn a_failed_superblock_sync_in_a_background_fold_stops_the_writes() {
    use crate::store::disk::io::fault::{self, Op, EIO};
    let dir = tempfile::tempdir().unwrap();
    let mut next = 0u32;
    let mut model = None;
    {
        let (_store, t) = open(dir.path(), true);
        let m = model.get_or_insert_with(|| CountingFilter::new(t.params()).unwrap());
        fault::fail_in_next_background_fold(dir.path(), Op::Sync, 1, EIO);
        let refused = batches_until(&t, m, &mut next, |_| false);
        assert!(refused.is_err(), "writes went on after an unknown commit");
        assert!(fault::background_fold_failed(dir.path()));
        for i in (0..next).step_by(7) {
            assert!(t.contains(&key(i)), "key {i} lost in memory");
        }
    }
    let (_store, t) = open(dir.path(), true);
    check(
        &t,
        model.as_ref().unwrap(),
        &(0..next).collect::<Vec<_>>(),
        "reopened",
    );
}
