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
mod tests;
