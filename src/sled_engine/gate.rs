//! The gate of a tree (the engine's module docs): readers share it on their
//! own threads, a write call on the worker holds it until it has flushed
//! and settled the tree.

use super::IVec;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The most traversal rounds of one settling.
const SETTLE_ROUNDS: usize = 64;

/// Reader slots of a gate: a reader counts itself in the slot of its
/// thread, so that two reading threads do not pass one cache line back and
/// forth (a shared reader count cost them a tenth of a sled read).
const GATE_SLOTS: usize = 16;

/// One reader slot, alone on its cache line.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Slot(AtomicU64);

/// A tree's gate (module docs): readers share it, a write call holds it
/// until it has flushed and settled the tree. A reader announces itself in
/// its thread's slot, then checks that no writer holds the gate; a writer
/// raises its flag, then waits for every slot to empty. Both use sequentially
/// consistent operations, so one of the two always sees the other: a reader
/// and a writer are never inside together.
#[derive(Debug, Default)]
pub(super) struct Gate {
    slots: [Slot; GATE_SLOTS],
    writing: AtomicBool,
    /// Serialises writers (only the worker writes, but a fallback read on
    /// the worker and a write call never overlap anyway).
    writer: Mutex<()>,
    /// Whether the tree has nothing pending (reads may run on the caller's
    /// thread).
    pub(super) settled: AtomicBool,
}

/// The slot of the calling thread.
fn my_slot() -> usize {
    use std::cell::Cell;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    SLOT.with(|s| {
        if s.get() == usize::MAX {
            s.set(NEXT.fetch_add(1, Ordering::Relaxed) as usize % GATE_SLOTS);
        }
        s.get()
    })
}

/// A reader inside a gate; leaves when dropped.
pub(super) struct ReadGuard<'a>(&'a Slot);

impl Drop for ReadGuard<'_> {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Ordering::Release);
    }
}

/// A writer holding a gate; opens it when dropped.
pub(super) struct WriteGuard<'a> {
    gate: &'a Gate,
    _one: parking_lot::MutexGuard<'a, ()>,
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        self.gate.writing.store(false, Ordering::SeqCst);
    }
}

impl Gate {
    /// Enters as a reader, waiting at most `timeout` for a writer to leave.
    pub(super) fn read(&self, timeout: Duration) -> Option<ReadGuard<'_>> {
        let slot = &self.slots[my_slot()];
        let mut deadline = None;
        loop {
            slot.0.fetch_add(1, Ordering::SeqCst);
            if !self.writing.load(Ordering::SeqCst) {
                return Some(ReadGuard(slot));
            }
            slot.0.fetch_sub(1, Ordering::SeqCst);
            let end = *deadline.get_or_insert_with(|| Instant::now() + timeout);
            while self.writing.load(Ordering::SeqCst) {
                if Instant::now() >= end {
                    return None;
                }
                std::thread::yield_now();
            }
        }
    }

    /// Enters as the writer once every reader has left.
    pub(super) fn write(&self) -> WriteGuard<'_> {
        let one = self.writer.lock();
        self.writing.store(true, Ordering::SeqCst);
        for slot in &self.slots {
            while slot.0.load(Ordering::SeqCst) != 0 {
                std::thread::yield_now();
            }
        }
        WriteGuard {
            gate: self,
            _one: one,
        }
    }
}

/// The most bytes one sled flush of the engine made stable, in tests: what
/// the module docs' bounds are about ("The bounds"), measured by
/// `tests::one_flush_logs_far_less_than_a_segment_at_the_limits`.
#[cfg(test)]
pub(super) static MAX_FLUSHED: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// The bytes of one sled flush (`Tree::flush`'s answer), recorded in tests.
pub(super) fn noted(flushed: usize) -> usize {
    #[cfg(test)]
    MAX_FLUSHED.fetch_max(flushed, Ordering::Relaxed);
    flushed
}

/// Traverses every key of `keys` again, flushing after each traversal that
/// wrote, until a round writes nothing (module docs); `Ok(false)` if that
/// took more than [`SETTLE_ROUNDS`] rounds.
pub(super) fn settle_keys(tree: &sled::Tree, keys: &[IVec]) -> sled::Result<bool> {
    for _ in 0..SETTLE_ROUNDS {
        let mut wrote = 0;
        for k in keys {
            tree.get(k)?;
            wrote += noted(tree.flush()?);
        }
        if wrote == 0 {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Settles a whole tree: traverses all of it (an iteration reaches every
/// leaf through `view_for_key`), flushing after every item (so that no
/// flush covers more than one traversal, module docs "The bounds"), until
/// a pass writes nothing. A flush that finds nothing to write returns at
/// once.
pub(super) fn settle_all(tree: &sled::Tree) -> sled::Result<bool> {
    for _ in 0..SETTLE_ROUNDS {
        let mut wrote = 0;
        for item in tree.iter() {
            item?;
            wrote += noted(tree.flush()?);
        }
        wrote += noted(tree.flush()?);
        if wrote == 0 {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_gate_never_lets_a_reader_and_a_writer_in_together() {
        let gate = Arc::new(Gate::default());
        let inside_w = Arc::new(AtomicBool::new(false));
        let inside_r = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let total = Arc::new(AtomicU64::new(0));
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let (gate, w, r, stop) = (
                    gate.clone(),
                    inside_w.clone(),
                    inside_r.clone(),
                    stop.clone(),
                );
                let total = total.clone();
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let _g = gate.read(Duration::from_secs(10)).unwrap();
                        r.fetch_add(1, Ordering::SeqCst);
                        assert!(!w.load(Ordering::SeqCst), "a reader inside with the writer");
                        r.fetch_sub(1, Ordering::SeqCst);
                        total.fetch_add(1, Ordering::SeqCst);
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        for _ in 0..2_000 {
            {
                let _g = gate.write();
                inside_w.store(true, Ordering::SeqCst);
                assert_eq!(
                    inside_r.load(Ordering::SeqCst),
                    0,
                    "the writer inside with a reader"
                );
                inside_w.store(false, Ordering::SeqCst);
            }
            // Between two writes, give a reader a chance to get in (up to
            // 2 ms): on a loaded machine the readers might otherwise not be
            // scheduled before the loop ends, and nothing would be tested.
            let (before, t0) = (total.load(Ordering::SeqCst), Instant::now());
            while total.load(Ordering::SeqCst) == before && t0.elapsed() < Duration::from_millis(2)
            {
                std::thread::yield_now();
            }
        }
        stop.store(true, Ordering::Relaxed);
        let reads: u64 = readers.into_iter().map(|h| h.join().unwrap()).sum();
        assert!(reads > 0);
        // A reader waits at most its timeout for a writer that stays.
        let g = gate.write();
        let t0 = Instant::now();
        assert!(gate.read(Duration::from_millis(30)).is_none());
        assert!(t0.elapsed() >= Duration::from_millis(30));
        drop(g);
        assert!(gate.read(Duration::from_millis(30)).is_some());
    }
}
