//! Folds in the background ([`background`](super::background)): a stream
//! of batches that crosses the fold threshold many times, with removes and
//! explicit folds between, leaves exactly the counters of its operations,
//! in memory and after a reopen; the folds commit while writes go on, and
//! the log's folded bytes are given back.

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
        Err(_) => store
            .create_table("t", TableSpec::new(100_000, 0.01).seed(11))
            .unwrap(),
    };
    (store, t)
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
        let mut batch = WriteBatch::new();
        for _ in 0..500 {
            batch.insert(&key(next));
            model.insert(&key(next));
            live.push(next);
            next += 1;
        }
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
    // Batches until a fold committed in the background has been taken in
    // with the log starting a page or more in.
    let mut start = 0;
    for b in 0..40u32 {
        let mut batch = WriteBatch::new();
        for i in 0..500 {
            batch.insert(&key(b * 500 + i));
        }
        t.apply(&batch, Durability::Durable).unwrap();
        start = superblock(&t).1;
        if start >= 4096 {
            break;
        }
    }
    assert!(start >= 4096, "no fold was taken in from the background");
    let g = t.inner.gen.load_full();
    let w = g.writer.lock();
    let mut head = vec![1u8; 4096];
    crate::store::disk::io::read_exact_at(w.log.file(), &mut head, 0).unwrap();
    // Punched (the bytes before the log's start read as zeros), unless the
    // file system cannot punch: then the next fold runs on the writer's
    // thread and empties the log.
    assert!(
        head.iter().all(|&b| b == 0) || w.fold_here,
        "folded bytes still there"
    );
}
