//! The blocked and split-block layouts' shared ORs: each block ORed under
//! one of a fixed set of striped spin locks, with plain loads and stores.
//!
//! # Why
//! A shared `insert(&self)` into a blocked filter sets a key's seven bits
//! in about five of its block's eight words, and x86-64 has no atomic
//! read-modify-write wider than 16 bytes: lock-free, that is five to eight
//! locked ORs per key, each a full barrier that waits for the key's cache
//! miss before the next key's can start. Measured with the `peers` bench
//! (`u64` ids, 1M keys, `floor_locked5` against `floor_locked1`), five
//! locked instructions per key alone cost 2.2–3.0× sbbf-rs-safe's whole
//! insert and one cost 0.92–1.15×. Under a lock, the block takes one
//! locked instruction (the lock's compare-and-swap; its release is a plain
//! store on x86-64) and eight plain stores. A split block (Parquet's
//! layout) sets one bit in each of its four words: four locked ORs
//! lock-free, one lock and four stores here. The same bench, one build
//! before and one after, 2026-12-04: a key-by-key shared insert of `u64`
//! ids took 14.7–20.2 ns against 42.6–45.0 at 1M keys and 29.4–68.9
//! against 74.7–90.0 at 10M; two threads inserting at once, 16.1 against
//! 32.3 per id of wall time at 1M, where they scale no better than one
//! thread: every insert writes one of the lock lines, which move between
//! the cores (`docs/BENCHMARKS.md`, `docs/KNOWN_ISSUES.md`).
//!
//! # The protocol
//! The one thread that holds a filter's write bias (`bloom::bias`) ORs
//! into it with plain atomic loads and stores, no lock; every other OR
//! through `&self` first claims the bias, which revokes it and waits for
//! the holder's write in progress, so no OR below ever meets one of the
//! holder's. Once the bias is revoked (or where no thread holds it),
//! every OR into a blocked or split-block filter's bits through `&self`
//! holds the lock of the 64-byte line it writes ([`or_block`], or
//! [`or_lacking`] after the caller's own first read; a line is a blocked
//! filter's block, or two split blocks): `insert`, `insert_hash`,
//! the direct path of `insert_many`, the merge of its copy
//! (`bloom::shadow`), `union_with` and `union_with_halved`. Those are all
//! the ORs of those layouts' `&self` API but the store's (`set_bit` and
//! `insert_hashes_one_writer`, which it calls only under a writer lock that
//! every write of those bits holds); the standard layout keeps its
//! lock-free ORs (`probe::Locked::or`), and no lock-free OR ever writes a
//! blocked or split-block filter, so a plain store under the lock cannot
//! erase a bit that another thread ORed in meanwhile. The writes that overwrite
//! words instead (`clear`, `intersect_with`, the store's writes under its
//! writer lock, which no `&self` OR meets) take no stripe: an OR under a
//! lock that meets one may set again bits it cleared, a false positive,
//! never a lost bit. Lookups take no lock: they read each word with a
//! relaxed load and see it before or after the store, as they saw the OR.
//!
//! # The locks
//! [`STRIPES`] locks in one static table, each on its own cache line,
//! chosen by the block's address: two blocks (of any filters) share a lock
//! one time in [`STRIPES`], which costs only a wait. A lock is held for
//! eight loads and eight stores, never across a call that can panic or
//! block, and never two at once, so no thread waits on a lock whose holder
//! waits on it; a waiter yields its thread after [`SPINS`] tries, so a
//! holder that lost its core gets it back.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// How many locks (a power of two): 4 KiB of lock lines in all.
const STRIPES: usize = 64;

/// Tries of a waiter before it yields its thread.
const SPINS: u32 = 64;

/// One lock on its own cache line: writers of blocks under other locks
/// never contend for its line.
#[repr(align(64))]
struct Stripe(AtomicBool);

static LOCKS: [Stripe; STRIPES] = [const { Stripe(AtomicBool::new(false)) }; STRIPES];

/// The lock of the 64-byte line that holds `words` (a blocked filter's
/// block, or a split block: half a line), by its address.
#[inline(always)]
fn stripe_of<const N: usize>(words: &[AtomicU64; N]) -> &'static AtomicBool {
    let line = words.as_ptr() as usize >> 6;
    &LOCKS[line % STRIPES].0
}

/// A held stripe lock, released when dropped.
struct Held(&'static AtomicBool);

impl Held {
    /// Takes `lock` if it is free: one compare-and-swap.
    #[inline(always)]
    fn try_take(lock: &'static AtomicBool) -> Option<Held> {
        // Not `then_some(Held(lock))`: that would make a `Held` (and drop
        // it, releasing another thread's lock) when the swap fails.
        let taken = lock
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok();
        taken.then(|| Held(lock))
    }

    /// Takes `lock`, waiting while it is held: [`SPINS`] spins, then the
    /// thread yields between tries.
    fn take(lock: &'static AtomicBool) -> Held {
        let mut tries = 0u32;
        loop {
            if let Some(held) = Held::try_take(lock) {
                return held;
            }
            while lock.load(Ordering::Relaxed) {
                tries += 1;
                if tries < SPINS {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
    }
}

impl Drop for Held {
    #[inline(always)]
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Sets the bits of `masks` in `words`, a block of a blocked filter or of
/// a split-block one, or a whole line of either (the module's protocol);
/// returns whether any was clear when read. Words that already hold them
/// all cost no lock and no write (a plain read first); else the lock of
/// their line is taken, and every word is read again and stored with its
/// mask (no branch per word: which of a key's words lack a bit is
/// unpredictable).
#[inline(always)]
pub(super) fn or_block<const N: usize>(words: &[AtomicU64; N], masks: [u64; N]) -> bool {
    let mut clear = 0;
    for (word, mask) in words.iter().zip(masks) {
        clear |= !word.load(Ordering::Relaxed) & mask;
    }
    if clear == 0 {
        return false;
    }
    or_lacking(words, masks);
    true
}

/// [`or_block`] past its first read: the caller read `words` (as relaxed
/// atomic loads would) and found a bit of `masks` clear. Takes the lock of
/// their line, then reads every word again and stores it with its mask.
#[inline(always)]
pub(super) fn or_lacking<const N: usize>(words: &[AtomicU64; N], masks: [u64; N]) {
    match Held::try_take(stripe_of(words)) {
        Some(held) => store_held(words, masks, held),
        None => or_block_waiting(words, masks),
    }
}

/// [`or_block`]'s writes once the line's lock is held: each word read
/// again and stored with its mask, then the lock released.
#[inline(always)]
fn store_held<const N: usize>(words: &[AtomicU64; N], masks: [u64; N], held: Held) {
    for (word, mask) in words.iter().zip(masks) {
        word.store(word.load(Ordering::Relaxed) | mask, Ordering::Relaxed);
    }
    drop(held);
}

/// [`or_block`] when its lock was held by another thread: waits for it,
/// then writes. Out of line and cold, so that no value of the fast path
/// lives across a call: a wait inlined there cost every insert six saved
/// registers and its masks spilled to the stack (callgrind, lab loops of
/// 200,000 and 400,000 `u64` ids, the difference per id: 106 → 94
/// instructions per split-block shared insert).
#[cold]
#[inline(never)]
fn or_block_waiting<const N: usize>(words: &[AtomicU64; N], masks: [u64; N]) {
    store_held(words, masks, Held::take(stripe_of(words)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::params::WORDS_PER_BLOCK;
    use crate::filter::simd::SharedBlock;
    use std::sync::Barrier;
    use std::time::Duration;

    /// An OR of masks into a block, as [`or_block`].
    type Or = fn(&[AtomicU64; WORDS_PER_BLOCK], [u64; WORDS_PER_BLOCK]) -> bool;

    /// Two threads, started together, each set their half of the bits of
    /// every word of 512 blocks, one bit at a time, sweeping the blocks in
    /// the same order; rounds until one loses a bit, at most `rounds`.
    /// Returns the first round that lost one.
    fn first_lost_bit(or: Or, rounds: u32) -> Option<u32> {
        let blocks: Vec<SharedBlock> = (0..512).map(|_| SharedBlock::zeroed()).collect();
        (0..rounds).find(|_| {
            for w in blocks.iter().flat_map(|b| &b.0) {
                w.store(0, Ordering::Relaxed);
            }
            let start = Barrier::new(2);
            std::thread::scope(|s| {
                for t in 0..2u32 {
                    let (blocks, start) = (&blocks, &start);
                    s.spawn(move || {
                        start.wait();
                        for b in blocks {
                            for bit in (t..64).step_by(2) {
                                or(&b.0, [1u64 << bit; WORDS_PER_BLOCK]);
                            }
                        }
                    });
                }
            });
            blocks
                .iter()
                .flat_map(|b| &b.0)
                .any(|w| w.load(Ordering::Relaxed) != u64::MAX)
        })
    }

    /// ORs under the block's lock lose no bit to each other (the same
    /// ORs as plain loads and stores without the lock lost bits here in
    /// most runs, but not in every run on a loaded machine, so that is
    /// not a test: the one below shows the lock is taken).
    /// Run on a thread of its own and waited for at most 120 s: the locks
    /// spin without a bound, so a lock left taken (what the test looks
    /// for) fails it instead of hanging it.
    #[test]
    fn ors_under_the_lock_lose_no_bit() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(first_lost_bit(or_block, 40));
        });
        let lost = rx.recv_timeout(Duration::from_secs(120));
        assert_eq!(lost, Ok(None), "a lost bit, or the ORs hung");
    }

    /// While a block's lock is held, an OR into the block neither writes
    /// nor returns; once it is released, the OR completes. Without the
    /// lock the OR would return at once (a thread that does not run within
    /// the 100 ms passes the first half vacuously, never fails it).
    #[test]
    fn an_or_waits_while_its_blocks_lock_is_held() {
        let b = SharedBlock::zeroed();
        let held = Held::take(stripe_of(&b.0));
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            // Dropped as the closure unwinds, before the scope joins the
            // thread: a failed assert cannot leave it waiting.
            let held = held;
            s.spawn(|| {
                or_block(&b.0, [1; WORDS_PER_BLOCK]);
                done.store(true, Ordering::Release);
            });
            std::thread::sleep(Duration::from_millis(100));
            assert!(!done.load(Ordering::Acquire), "the OR returned");
            assert_eq!(b.0[0].load(Ordering::Relaxed), 0, "the OR wrote");
            drop(held);
        });
        assert!(done.load(Ordering::Acquire));
        assert!(b.0.iter().all(|w| w.load(Ordering::Relaxed) == 1));
    }

    /// A block that holds its bits already is not written, and answers
    /// that nothing was clear.
    #[test]
    fn a_block_holding_the_bits_is_left_alone() {
        let b = SharedBlock::zeroed();
        let masks = [0b101; WORDS_PER_BLOCK];
        assert!(or_block(&b.0, masks));
        assert!(!or_block(&b.0, masks));
        assert!(!or_block(&b.0, [0b1; WORDS_PER_BLOCK]));
        assert!(b.0.iter().all(|w| w.load(Ordering::Relaxed) == 0b101));
    }
}
