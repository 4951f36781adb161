//! A fold cut short after every one of its steps (a crash between two
//! writes, as far as the disk sees) leaves a table that reopens with
//! exactly the counters of its operations: no key lost, none counted twice
//! (the page file's two slots per chunk and its superblock,
//! `docs/FORMAT.md` §10).

use super::fold::WRITES_BEFORE_CRASH;
use crate::filter::counting::CountingFilter;
use crate::store::{Durability, FilterStore, StoreConfig, Table, TableSpec, WriteBatch};

const SEED: u64 = 0x5EED_F01D;

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:05}").into_bytes()
}

fn config() -> StoreConfig {
    // No automatic fold: the test folds when it chooses.
    StoreConfig::default().fold_threshold(1 << 30)
}

/// Opens the store, creating table "t" (about 60 chunks) on first use.
fn open(dir: &std::path::Path) -> (FilterStore, Table) {
    let store = FilterStore::open_with(dir, config()).unwrap();
    let t = match store.open_table("t") {
        Ok(t) => t,
        Err(_) => store
            .create_table("t", TableSpec::new(200_000, 0.01).seed(SEED))
            .unwrap(),
    };
    (store, t)
}

/// Inserts `0..1500` and removes `0..300` (folded), then logs inserts of
/// `1500..3000` in three records and `hot` 20 times, unfolded. Returns the
/// model of the final counters and the live keys.
fn prepare(t: &Table) -> (CountingFilter, Vec<Vec<u8>>) {
    let mut model = CountingFilter::new(t.params()).unwrap();
    let mut batch = WriteBatch::new();
    for i in 0..1500 {
        batch.insert(&key(i));
        model.insert(&key(i));
    }
    t.apply(&batch, Durability::Durable).unwrap();
    for i in 0..300 {
        t.remove(&key(i)).unwrap();
        model.remove(&key(i)).unwrap();
    }
    t.fold().unwrap();
    for part in 0..3 {
        let mut batch = WriteBatch::new();
        for i in 1500 + part * 500..2000 + part * 500 {
            batch.insert(&key(i));
            model.insert(&key(i));
        }
        t.apply(&batch, Durability::Durable).unwrap();
    }
    let mut hot = WriteBatch::new();
    for _ in 0..20 {
        hot.insert(b"hot");
        model.insert(b"hot");
    }
    t.apply(&hot, Durability::Durable).unwrap();
    let live = (300..3000).map(key).chain([b"hot".to_vec()]).collect();
    (model, live)
}

fn check(t: &Table, model: &CountingFilter, live: &[Vec<u8>], what: &str) {
    for k in live {
        assert!(t.contains(k), "{what}: {k:?} lost");
    }
    assert_eq!(t.live_keys(), 2700 + 20, "{what}");
    let counters = t.counting_snapshot().unwrap();
    assert!(
        counters.as_bytes() == model.as_bytes(),
        "{what}: counters differ from the model"
    );
}

/// Runs a fold allowed `budget` writes; whether it finished.
fn fold_with_budget(t: &Table, budget: u32) -> bool {
    WRITES_BEFORE_CRASH.set(Some(budget));
    let result = t.fold();
    WRITES_BEFORE_CRASH.set(None);
    result.is_ok()
}

#[test]
fn a_fold_cut_after_any_write_reopens_exact() {
    let mut budget = 0;
    loop {
        let dir = tempfile::tempdir().unwrap();
        let (store, t) = open(dir.path());
        let (model, live) = prepare(&t);
        let finished = fold_with_budget(&t, budget);
        drop((store, t));
        let (_store, t) = open(dir.path());
        check(
            &t,
            &model,
            &live,
            &format!("reopened after {budget} writes"),
        );
        if finished {
            // Every cut point was visited: about 60 chunks, 4 records, and
            // the three state writes.
            assert!(budget > 60, "only {budget} writes");
            return;
        }
        budget += 1;
        assert!(budget < 1_000, "the fold never finished: {budget} writes");
    }
}

#[test]
fn a_fold_cut_short_is_finished_by_the_next_one() {
    for budget in [0, 1, 17, 40, 58, 60, 61, 62, 63, 64] {
        let dir = tempfile::tempdir().unwrap();
        let (_store, t) = open(dir.path());
        let (model, live) = prepare(&t);
        fold_with_budget(&t, budget);
        // The same handle, no reopen: the next fold resumes from the marks
        // on disk.
        t.fold().unwrap();
        assert_eq!(t.pending_log_ops(), 0);
        check(
            &t,
            &model,
            &live,
            &format!("refolded after {budget} writes"),
        );
    }
}

/// Every write and every sync of the store's files, failed in turn, inside
/// a workload of durable batches, folds and removes: the failing call
/// returns a typed error (never a panic), and after a reopen every key of
/// every batch that returned durable before it is there. (The failure is
/// injected on the caller's thread, where every table call runs:
/// `disk::io::fault`.)
#[test]
fn an_io_failure_at_any_write_or_sync_loses_nothing_durable() {
    use crate::store::disk::io::fault::{self, Op, EIO};
    let batch = |b: u32| {
        let mut w = WriteBatch::new();
        for i in 0..300 {
            w.insert(format!("b{b}-{i}").as_bytes());
        }
        w
    };
    for op in [Op::Write, Op::Sync] {
        for n in 0..40 {
            let dir = tempfile::tempdir().unwrap();
            let mut durable = 0;
            let mut failed = false;
            {
                let store =
                    FilterStore::open_with(dir.path(), StoreConfig::default().fold_threshold(1000))
                        .unwrap();
                let t = store
                    .create_table("t", TableSpec::new(50_000, 0.01).seed(SEED))
                    .unwrap();
                fault::fail_after(op, n, EIO);
                for b in 0..12u32 {
                    let r = t.apply(&batch(b), Durability::Durable).and_then(|()| {
                        if b % 5 == 4 {
                            t.fold()
                        } else {
                            Ok(())
                        }
                    });
                    match r {
                        Ok(()) => durable = b + 1,
                        Err(e) => {
                            assert!(!e.to_string().is_empty());
                            failed = true;
                            break;
                        }
                    }
                }
                fault::clear();
            }
            let store = FilterStore::open(dir.path()).unwrap();
            let t = store.open_table("t").unwrap();
            for b in 0..durable {
                for i in 0..300 {
                    assert!(
                        t.contains(format!("b{b}-{i}").as_bytes()),
                        "{op:?} {n}: durable key b{b}-{i} lost"
                    );
                }
            }
            // The reopened store writes again.
            t.apply(&batch(99), Durability::Durable).unwrap();
            if n == 0 {
                assert!(failed, "{op:?} {n}: no failure");
            }
        }
    }
}
