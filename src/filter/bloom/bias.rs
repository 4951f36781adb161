//! A filter's write bias: the one thread that writes a shared filter sets
//! its bits with plain atomic stores, no locked instruction, until a second
//! thread writes it.
//!
//! # Why
//! A key-by-key shared `insert(&self)` into a blocked filter took its
//! block's stripe lock (`bloom::stripes`): one locked compare-and-swap per
//! new key, a full barrier on x86-64 that waits for the previous key's
//! stores and keeps the next key's cache miss from starting early. That
//! one instruction alone cost 1.3–1.6× sbbf-rs-safe's whole insert, and the
//! insert 2.3–3.0× (`docs/BENCHMARKS.md`). Most shared filters have one
//! writer at a time (a table's flush thread, a query's build side) and
//! many readers: biased locking (Kawachiya, Koseki and Onodera, "Lock
//! Reservation", OOPSLA 2002; the JVM's biased locks) makes that writer's
//! path free of locked instructions and charges the rare second writer.
//!
//! # The protocol
//! `owner` holds [`UNOWNED`], a thread's id ([`me`]), that id marked
//! [`PLAIN`], [`REVOKING`] or [`REVOKED`], and only moves forward along
//! that list. Every OR into the filter through `&self` first claims the
//! bias ([`WriteBias::claim`]), which returns once `owner` is this thread's
//! id (marked or not) or [`REVOKED`]:
//! - [`UNOWNED`]: the thread takes the bias (a compare-and-swap).
//! - another thread's id: this thread revokes it. It swaps in
//!   [`REVOKING`]; if the id was marked [`PLAIN`], it runs the heavy
//!   barrier (`filter::barrier`) and waits while `busy` is set; then it
//!   stores [`REVOKED`] (release).
//! - [`REVOKING`]: it waits for [`REVOKED`].
//!
//! A holder's key-by-key insert ([`WriteBias::owned`]) first marks its id
//! [`PLAIN`] (once, a compare-and-swap, and only if the process has the
//! heavy barrier: else it swaps in [`REVOKED`] itself, needing no barrier
//! since it never wrote plainly, and takes the locks). A
//! revoke that swapped out an unmarked id therefore never meets a plain
//! write: the holder's mark would have had to swap `owner` first. Each
//! plain write then happens inside a window: the holder sets `busy`,
//! passes the light barrier, reads `owner` again, and writes only if that
//! still says its marked id; it clears `busy` (release) after the writes.
//! By the barrier pair, either that second read sees [`REVOKING`] (the
//! holder writes under the lock instead), or the revoker's read of `busy`
//! after the heavy barrier sees it set, and the revoker waits until the
//! holder's writes are done and visible (release, acquire). So the
//! holder's plain writes happen before [`REVOKED`] is stored, and every
//! write by any other thread after it: no locked OR ever runs beside a
//! plain one, and none is lost. Before the bias is revoked no other thread
//! writes at all (each would have had to revoke first), so the holder may
//! read, OR and store a block without re-reading it under a lock. Writes
//! that overwrite words (`clear`, `intersect_with`) are outside the
//! protocol, as they are outside the stripe locks' (`bloom::stripes`).
//!
//! The bias is never handed back: after a second writer, every OR takes
//! the locks. Its costs: the heavy barrier once per filter whose plain
//! holder a second thread revokes (under a microsecond here), and the
//! registration of the process for it, once, at its first plain write
//! (`filter::barrier`). A filter written only by bulk inserts and unions
//! (a query's runtime filter) costs neither.

use crate::filter::barrier;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// No thread holds the bias yet.
const UNOWNED: u64 = 0;
/// Set in `owner` beside the holder's id once the holder writes plainly
/// ([`WriteBias::owned`]): only then does a revoke need the heavy barrier.
const PLAIN: u64 = 1 << 62;
/// The id of a thread that came after 2^62 − 2 others (at a million new
/// threads a second, 146,000 years): never stored in `owner`, so such a
/// thread never holds a bias.
const NO_ID: u64 = PLAIN - 1;
/// A thread is revoking the bias.
const REVOKING: u64 = u64::MAX - 1;
/// No thread holds the bias, nor ever will: every OR takes the locks.
const REVOKED: u64 = u64::MAX;

/// Tries of a waiter before it yields its thread.
const SPINS: u32 = 64;

/// The next thread id to hand out (ids are never reused).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's id marked [`PLAIN`] (what `owner` holds while this
    /// thread writes plainly: the fast path compares it as it is), 0 until
    /// [`plain_me`] first asks.
    static PLAIN_ME: Cell<u64> = const { Cell::new(0) };
}

/// This thread's id marked [`PLAIN`]: unique in the process, or else
/// [`NO_ID`] marked.
#[inline(always)]
fn plain_me() -> u64 {
    PLAIN_ME.with(|id| match id.get() {
        0 => {
            let new = NEXT_ID.fetch_add(1, Ordering::Relaxed).min(NO_ID) | PLAIN;
            id.set(new);
            new
        }
        known => known,
    })
}

/// This thread's id: unique in the process, below [`PLAIN`] and never
/// [`UNOWNED`], or else [`NO_ID`].
fn me() -> u64 {
    plain_me() & !PLAIN
}

/// A filter's bias (the module docs): its own cache line, apart from the
/// fields lookups read, so that the owner's writes of `busy` never take a
/// reader's line away.
pub(super) struct WriteBias(Box<BiasLine>);

#[repr(align(128))]
struct BiasLine {
    owner: AtomicU64,
    busy: AtomicBool,
    /// The point of [`WriteBias::owned`] where the owner waits while this
    /// says so ([`tests::BEFORE_BUSY`], [`tests::IN_WINDOW`]; 0: none):
    /// the tests' way to make a revoker meet an owner there.
    #[cfg(test)]
    pause: std::sync::atomic::AtomicU8,
    /// Where the owner waits now (0: nowhere), for the tests.
    #[cfg(test)]
    parked: std::sync::atomic::AtomicU8,
    /// How many revokes of this bias ran the heavy barrier (tests).
    #[cfg(test)]
    heavy_runs: std::sync::atomic::AtomicU32,
}

#[cfg(test)]
impl BiasLine {
    /// Waits here while the tests pause this point.
    fn park(&self, point: u8) {
        if self.pause.load(Ordering::Acquire) == point {
            self.parked.store(point, Ordering::Release);
            while self.pause.load(Ordering::Acquire) == point {
                std::thread::yield_now();
            }
            self.parked.store(0, Ordering::Release);
        }
    }
}

/// Held while the owner writes plainly ([`WriteBias::owned`]); clears
/// `busy` when dropped.
pub(super) struct Owned<'a>(&'a AtomicBool);

impl Drop for Owned<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl Default for WriteBias {
    fn default() -> Self {
        WriteBias(Box::new(BiasLine {
            owner: AtomicU64::new(UNOWNED),
            busy: AtomicBool::new(false),
            #[cfg(test)]
            pause: Default::default(),
            #[cfg(test)]
            parked: Default::default(),
            #[cfg(test)]
            heavy_runs: Default::default(),
        }))
    }
}

impl WriteBias {
    /// For one OR through `&self`: `Some` if this thread holds the bias
    /// (taking it if no thread has), and may then write plainly until the
    /// guard drops; `None` once [`claim`](WriteBias::claim) has made it
    /// safe to write under the locks.
    #[inline(always)]
    pub(super) fn owned(&self) -> Option<Owned<'_>> {
        let line = &*self.0;
        let plain = plain_me();
        let owner = line.owner.load(Ordering::Relaxed);
        // Not the plain holder: a revoked bias (a filter that several
        // threads write) takes the locks at once, without a call.
        if owner != plain && (owner == REVOKED || !self.go_plain(plain & !PLAIN)) {
            return None;
        }
        #[cfg(test)]
        line.park(tests::BEFORE_BUSY);
        line.busy.store(true, Ordering::Relaxed);
        barrier::light();
        if line.owner.load(Ordering::Relaxed) == plain {
            #[cfg(test)]
            line.park(tests::IN_WINDOW);
            return Some(Owned(&line.busy));
        }
        line.busy.store(false, Ordering::Release);
        // Revoked meanwhile: wait until it is done.
        self.claim_as(plain & !PLAIN);
        None
    }

    /// Before an OR through `&self` that takes the locks (a bulk insert, a
    /// union): returns once this thread holds the bias or it is revoked,
    /// so that no plain write of another thread runs beside the OR. A
    /// holder that only ever took the locks is revoked without the heavy
    /// barrier, and the process never registers for it.
    pub(super) fn claim(&self) {
        self.claim_as(me());
    }

    /// [`WriteBias::owned`] the first time for thread `me`: takes the bias
    /// (or finds it held by `me`), then marks it [`PLAIN`] (a
    /// compare-and-swap: a revoke then sees the mark, or this swap fails)
    /// if the process has the heavy barrier (else it gives the bias up).
    /// Whether `me` may write plainly; if not, the bias is revoked, or
    /// being revoked by a thread that no plain write of `me` can meet.
    #[cold]
    fn go_plain(&self, me: u64) -> bool {
        if !self.claim_as(me) {
            return false;
        }
        let line = &*self.0;
        if !barrier::available() {
            // No plain writes in this process: give the bias up (no
            // holder ever wrote plainly, so no barrier is needed), and
            // the next inserts take the locks at once instead of calling
            // here. A failed swap is another thread's revoke, as good.
            let _ = line
                .owner
                .compare_exchange(me, REVOKED, Ordering::AcqRel, Ordering::Acquire);
            return false;
        }
        let marked =
            line.owner
                .compare_exchange(me, me | PLAIN, Ordering::AcqRel, Ordering::Acquire);
        match marked {
            Ok(_) => true,
            Err(owner) if owner == me | PLAIN => true,
            Err(_) => {
                // Revoked by another thread: wait until that is done.
                self.claim_as(me);
                false
            }
        }
    }

    /// [`WriteBias::claim`] for thread `me`: whether it holds the bias
    /// (plain or not; `false`: revoked, and the revoke is done).
    #[cold]
    fn claim_as(&self, me: u64) -> bool {
        let line = &*self.0;
        let mut tries = 0u32;
        loop {
            let owner = line.owner.load(Ordering::Acquire);
            let next = match owner {
                REVOKED => return false,
                _ if owner & !PLAIN == me => return true,
                REVOKING => {
                    wait(&mut tries);
                    continue;
                }
                UNOWNED if me != NO_ID => me,
                UNOWNED => REVOKED,
                _ => REVOKING,
            };
            let swapped = line
                .owner
                .compare_exchange(owner, next, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
            if swapped && next == REVOKING {
                self.revoke(owner & PLAIN != 0);
                return false;
            }
            if swapped {
                return next == me;
            }
        }
    }

    /// Ends another thread's bias, `owner` being [`REVOKING`] (this
    /// thread's swap from the holder's id, marked [`PLAIN`] or not):
    /// for a plain holder the heavy barrier, then a wait for its write in
    /// progress; then [`REVOKED`]. A holder never marked plain never wrote
    /// plainly, and cannot start: its mark would have to swap `owner`.
    fn revoke(&self, plain: bool) {
        let line = &*self.0;
        if plain {
            #[cfg(test)]
            line.heavy_runs.fetch_add(1, Ordering::Relaxed);
            barrier::heavy();
            let mut tries = 0u32;
            while line.busy.load(Ordering::Acquire) {
                wait(&mut tries);
            }
        }
        line.owner.store(REVOKED, Ordering::Release);
    }

    /// Whether some thread holds the bias (for the tests).
    #[cfg(test)]
    pub(super) fn is_held(&self) -> bool {
        !matches!(self.0.owner.load(Ordering::Relaxed), UNOWNED | REVOKED)
    }

    /// Holds the owner at `point` of its next [`WriteBias::owned`] (0: lets
    /// it go), for the tests.
    #[cfg(test)]
    fn pause(&self, point: u8) {
        self.0.pause.store(point, Ordering::Release);
    }

    /// Where the owner waits (0: nowhere), for the tests.
    #[cfg(test)]
    fn parked(&self) -> u8 {
        self.0.parked.load(Ordering::Acquire)
    }

    /// How many revokes of this bias ran the heavy barrier (tests).
    #[cfg(test)]
    fn heavy_runs(&self) -> u32 {
        self.0.heavy_runs.load(Ordering::Relaxed)
    }
}

/// One wait of a spinning thread: [`SPINS`] spins, then yields.
fn wait(tries: &mut u32) {
    *tries += 1;
    if *tries < SPINS {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
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
}
