//! The write bias's tests.

use super::*;
use crate::filter::bloom::{BitFilter, BloomRead};
use crate::filter::hash::HashSpec;
use crate::filter::params::{FilterParams, Layout};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// [`WriteBias::owned`]'s point after its first read of `owner`,
/// before `busy` is set.
pub(super) const BEFORE_BUSY: u8 = 1;
/// [`WriteBias::owned`]'s point after its second read, `busy` set,
/// before the owner's writes.
pub(super) const IN_WINDOW: u8 = 2;

/// Lets the owner go when dropped, so that a failed assertion ends
/// the test instead of leaving its scope waiting on the owner.
struct Release<'a>(&'a WriteBias);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.pause(0);
    }
}

/// A write of a second writer, in [`a_second_writer_waits_for_the_owners_write_in_progress`].
type Write<'a> = dyn Fn(&BitFilter) + Sync + 'a;

/// Waits (10 s at most) until the owner waits at `point`.
fn until_parked(bias: &WriteBias, point: u8) {
    let t0 = Instant::now();
    while bias.parked() != point {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the owner never got to {point}"
        );
        std::thread::yield_now();
    }
}

/// Every layout and hash a shared insert compiles apart, each on a
/// filter of `m` bits (small: the writers meet in the same words).
fn kinds(m: u64) -> Vec<FilterParams> {
    [
        (Layout::Blocked, HashSpec::xxh3_64(3), 7),
        (Layout::Blocked, HashSpec::xxh3(3), 7),
        (Layout::Blocked, HashSpec::xxh3(3), 11),
        (Layout::SplitBlock, HashSpec::xxh64(), 8),
        (Layout::Standard, HashSpec::xxh3(3), 7),
    ]
    .into_iter()
    .map(|(layout, hash, k)| FilterParams::new(layout, m, k, hash).unwrap())
    .collect()
}

/// The keys of writer `t`: 8-byte ids apart from every other writer's.
fn keys(t: u64, n: u64) -> Vec<[u8; 8]> {
    (0..n).map(|i| (t << 32 | i).to_le_bytes()).collect()
}

/// The bits of every key of `sets` inserted by one thread, `&mut`.
fn reference(p: FilterParams, sets: &[Vec<[u8; 8]>]) -> Vec<u64> {
    let mut f = BitFilter::new(p).unwrap();
    for set in sets {
        f.insert_many_mut(set);
    }
    f.to_words()
}

/// A filter's first writer takes the bias, writes as its owner, and
/// keeps it; a second thread's write revokes it for good. (Linux, where
/// the heavy barrier is there: elsewhere no filter is ever biased.)
#[test]
#[cfg(target_os = "linux")]
fn the_first_writer_holds_the_bias_until_a_second_writes() {
    for p in kinds(512 * 64) {
        let f = BitFilter::new(p).unwrap();
        assert!(!f.bias.is_held(), "{p:?}: unowned when made");
        assert!(f.insert(b"first"));
        assert!(f.bias.is_held(), "{p:?}: the first writer holds it");
        assert!(f.insert(b"second") | !f.insert(b"second"));
        assert!(f.bias.is_held(), "{p:?}: and keeps it");
        std::thread::scope(|s| {
            s.spawn(|| f.insert(b"other"));
        });
        assert!(!f.bias.is_held(), "{p:?}: a second writer revoked it");
        assert!(f.insert(b"third"));
        assert!(!f.bias.is_held(), "{p:?}: never held again");
        for key in [&b"first"[..], b"second", b"other", b"third"] {
            assert!(f.contains(key), "{p:?}: {key:?}");
        }
    }
}

/// No bit is lost when a second writer revokes the bias while its
/// owner writes. Per round, on a fresh filter of 4 blocks (every
/// writer meets the others in the same words): the owner takes the bias,
/// then it and two more writers start together, the owner key by key,
/// one more key by key (it revokes the bias, or waits for the revoker),
/// one with `insert_many` (which claims the bias before its locked
/// ORs); at the end the filter's words must be exactly those of one
/// thread inserting every key. A plain write of the owner beside a
/// locked one loses a bit that the comparison shows (a revoke that
/// skipped its wait for the owner's writes failed within the first
/// rounds when tried).
#[test]
fn no_bit_is_lost_when_the_bias_is_revoked_mid_write() {
    for p in kinds(512 * 4) {
        let sets = [keys(1, 600), keys(2, 600), keys(3, 600)];
        let want = reference(p, &sets);
        for round in 0..60 {
            let f = BitFilter::new(p).unwrap();
            f.insert(b"take the bias");
            let start = Barrier::new(3);
            std::thread::scope(|s| {
                let (f, start, sets) = (&f, &start, &sets);
                s.spawn(move || {
                    start.wait();
                    sets[0].iter().for_each(|k| {
                        f.insert(k);
                    });
                });
                s.spawn(move || {
                    start.wait();
                    sets[1].iter().for_each(|k| {
                        f.insert(k);
                    });
                });
                start.wait();
                f.insert_many(&sets[2]);
            });
            let mut got = BitFilter::new(p).unwrap();
            got.insert_mut(b"take the bias");
            let extra = got.to_words();
            let want: Vec<u64> = want.iter().zip(&extra).map(|(a, b)| a | b).collect();
            assert!(
                f.to_words() == want,
                "{p:?} round {round}: a bit was lost ({} set, {} wanted)",
                f.count_ones(),
                want.iter().map(|w| u64::from(w.count_ones())).sum::<u64>()
            );
        }
    }
}

/// Unions and single inserts from other threads meet a biased owner:
/// the union claims the bias first (revoking it), so no bit is lost.
#[test]
fn a_union_beside_the_owner_loses_no_bit() {
    for p in kinds(512 * 4) {
        let sets = [keys(1, 800), keys(2, 800)];
        let want = reference(p, &sets);
        let mut other = BitFilter::new(p).unwrap();
        other.insert_many_mut(&sets[1]);
        for round in 0..40 {
            let f = BitFilter::new(p).unwrap();
            f.insert(&sets[0][0]);
            let start = Barrier::new(2);
            std::thread::scope(|s| {
                let (f, start, sets, other) = (&f, &start, &sets, &other);
                s.spawn(move || {
                    start.wait();
                    sets[0].iter().for_each(|k| {
                        f.insert(k);
                    });
                });
                start.wait();
                f.union_with(other).unwrap();
            });
            assert!(f.to_words() == want, "{p:?} round {round}: a bit was lost");
        }
    }
}

/// A second writer waits for the owner's write in progress, whatever
/// it writes with: with the owner held inside its window (`busy` set,
/// its bits not yet written), another thread's `insert`, `insert_many`
/// (one key, and enough for its private copy), `union_with` or
/// `union_with_halved` does not
/// return; once the owner is let go, both return and every key is
/// there. (When tried, a revoke that skipped its wait for `busy`, and
/// an `insert_many` or a `union_with` that skipped its claim, each
/// returned at once and failed this.)
#[test]
#[cfg(target_os = "linux")]
fn a_second_writer_waits_for_the_owners_write_in_progress() {
    use std::sync::atomic::AtomicBool;
    let many = keys(9, 2_000);
    for p in kinds(512 * 64) {
        let mut other = BitFilter::new(p).unwrap();
        other.insert_mut(b"from the union");
        let halved = FilterParams::new(p.layout(), p.m() / 2, p.k(), p.hash()).unwrap();
        let mut half = BitFilter::new(halved).unwrap();
        half.insert_mut(b"from the union");
        let writes: [(&str, &Write<'_>); 5] = [
            ("insert", &|f| {
                f.insert(b"second writer");
            }),
            ("insert_many of one key", &|f| {
                f.insert_many(&[b"second writer"]);
            }),
            ("insert_many through a copy", &|f| {
                f.insert_many(&many);
            }),
            ("union_with", &|f| f.union_with(&other).unwrap()),
            ("union_with_halved", &|f| {
                f.union_with_halved(&half).unwrap()
            }),
        ];
        for (name, write) in writes {
            if name == "union_with_halved" && p.layout() == Layout::Standard {
                continue; // blocked and split-block filters only
            }
            let f = BitFilter::new(p).unwrap();
            let done = AtomicBool::new(false);
            std::thread::scope(|s| {
                let _release = Release(&f.bias);
                let owner = s.spawn(|| {
                    f.insert(b"take the bias");
                    f.bias.pause(IN_WINDOW);
                    f.insert(b"held in its window")
                });
                until_parked(&f.bias, IN_WINDOW);
                let second = s.spawn(|| {
                    write(&f);
                    done.store(true, Ordering::Release);
                });
                std::thread::sleep(Duration::from_millis(20));
                assert!(
                    !done.load(Ordering::Acquire),
                    "{p:?}: {name} wrote while the owner was writing"
                );
                f.bias.pause(0);
                assert!(owner.join().unwrap());
                second.join().unwrap();
            });
            assert!(!f.bias.is_held(), "{p:?} {name}: revoked");
            for key in [&b"take the bias"[..], b"held in its window"] {
                assert!(f.contains(key), "{p:?} {name}: {key:?}");
            }
        }
    }
}

/// An owner that read its id, then was revoked before it set `busy`
/// (the revoker found `busy` clear and went on), reads `owner` again
/// inside its window and does not write as the owner: `owned` says
/// `None`, and its insert takes the locks. (An owner that skipped the
/// second read said `Some`, and this failed, when tried.)
#[test]
#[cfg(target_os = "linux")]
fn an_owner_revoked_before_its_window_writes_under_the_locks() {
    let f = BitFilter::new(kinds(512 * 64)[0]).unwrap();
    std::thread::scope(|s| {
        let _release = Release(&f.bias);
        let owner = s.spawn(|| {
            f.insert(b"take the bias");
            f.bias.pause(BEFORE_BUSY);
            let owned = f.bias.owned().is_some();
            (owned, f.insert(b"after the revoke"))
        });
        until_parked(&f.bias, BEFORE_BUSY);
        s.spawn(|| f.insert(b"second writer")).join().unwrap();
        assert!(!f.bias.is_held(), "revoked while the owner waited");
        f.bias.pause(0);
        let (owned, fresh) = owner.join().unwrap();
        assert!(!owned, "the revoked owner wrote as the owner");
        assert!(fresh);
    });
    for key in [&b"take the bias"[..], b"second writer", b"after the revoke"] {
        assert!(f.contains(key), "{key:?}");
    }
}

/// A holder that only ever took the locks (bulk inserts, unions: a
/// query's runtime filter) is revoked without the heavy barrier; one
/// that wrote plainly (a key-by-key insert) with it, once.
#[test]
#[cfg(target_os = "linux")]
fn only_a_plain_holder_costs_the_heavy_barrier() {
    let p = kinds(512 * 64)[0];
    let ids = [keys(1, 100), keys(2, 100)];
    let bulk = BitFilter::new(p).unwrap();
    bulk.insert_many(&ids[0]);
    assert!(bulk.bias.is_held());
    std::thread::scope(|s| {
        s.spawn(|| bulk.insert_many(&ids[1]));
    });
    assert!(!bulk.bias.is_held(), "revoked");
    assert_eq!(bulk.bias.heavy_runs(), 0, "no plain write, no barrier");
    let single = BitFilter::new(p).unwrap();
    single.insert_many(&ids[0]);
    single.insert(b"a key by key insert");
    std::thread::scope(|s| {
        s.spawn(|| single.insert_many(&ids[1]));
    });
    assert!(!single.bias.is_held(), "revoked");
    assert_eq!(single.bias.heavy_runs(), 1, "a plain holder, one barrier");
    for f in [&bulk, &single] {
        assert!(ids.iter().flatten().all(|k| f.contains(k)));
    }
    assert!(single.contains(b"a key by key insert"));
}

/// Thread ids are distinct, never a state of `owner`, and stable.
#[test]
fn thread_ids_are_distinct_and_never_a_state() {
    let mine = me();
    assert_eq!(me(), mine, "stable within a thread");
    let theirs: Vec<u64> = (0..8)
        .map(|_| std::thread::spawn(me).join().unwrap())
        .collect();
    for (i, &id) in theirs.iter().enumerate() {
        assert!(![UNOWNED, NO_ID, mine].contains(&id) && id < PLAIN, "{id}");
        assert!(!theirs[..i].contains(&id), "ids are never reused");
    }
}
