//! The one door to sled: every call the store makes into sled 0.34.7 goes
//! through this module, one at a time per process, and every call that may
//! have written is flushed before the next one starts. This is what makes
//! sled's segment-accountant deadlock (sled issue #804) impossible for the
//! store's own traffic; the argument follows.
//!
//! # The deadlock, from sled's code
//! A writer that fills a log segment asks the segment accountant (SA) for
//! the next one while holding the SA mutex (`iobuf.rs`
//! `maybe_seal_and_write_iobuf` → `SegmentAccountant::next` → `bump_tip`).
//! If the file tail was freed earlier, `bump_tip` first waits for the
//! asynchronous truncation that freeing queued on sled's process-wide thread
//! pool (`segment.rs` `truncate`). That pool starts 7 threads and grows only
//! when its queue is deeper than 7 *and* fewer than 7 threads are counted as
//! waiting — a count that wraps below zero while more than half the threads
//! run tasks (`threadpool.rs`: a running task is subtracted twice), so in
//! practice it never grows past 7 while busy. Every sealed log buffer queues
//! one `write_to_log` task, which ends in `sa_stabilize` → `with_sa`, i.e.
//! waits for the SA mutex. If all 7 threads hold such tasks while a writer
//! in `bump_tip` holds the mutex, the truncation behind them never runs: the
//! writer waits for the truncation, the truncation for a thread, the threads
//! for the writer. Upstream fixed this after 0.34.7 with a dedicated
//! truncation thread (PR #1269), never released on the 0.34 line.
//!
//! # Why it cannot close here
//! The cycle needs 7 `write_to_log` tasks blocked at once. Their only
//! sources are sealed buffers (from writes and flushes), `Tree::flush_async`
//! (never called) and sled's background flusher (disabled: the store opens
//! sled with `flush_every_ms(None)`, which also disables sled's background
//! segment cleaning, `PageCache::attempt_gc`, which only that thread calls).
//! The store keeps three rules:
//!
//! 1. **One call at a time.** Every sled call of the process's stores takes
//!    [`GATE`], reads included (a read of an unflushed page can seal a
//!    buffer). Only the gate holder can reserve log space, so only it can
//!    be the writer in `bump_tip`; pool tasks never call `SA::next`.
//! 2. **Flushed before the gate opens.** A call that may have written
//!    flushes before it releases the gate; `flush` returns once every
//!    buffer sealed so far has been written (`make_stable`), so those tasks
//!    have only their `sa_stabilize` left, which needs the SA mutex for a
//!    moment and nothing else.
//! 3. **Small calls.** Steady-state calls write at most two items of at most
//!    one counter page each (16 KiB; log records are either small or larger
//!    than sled's inline limit of `segment_size / 4` = 128 KiB, in which
//!    case sled writes them to a blob file and logs a pointer). Per item sled
//!    may also log a consolidated node (its fragment chain reached its
//!    threshold) and split a node, each inline only below 128 KiB; so a call
//!    logs under 1 MiB = 2 segments of 512 KiB: at most 2 buffers sealed
//!    full, plus the 1 sealed by the flush — 3 tasks per call.
//!
//! While the gate holder waits in `bump_tip`, the tasks that exist are its
//! own call's (≤ 3) and the previous call's (≤ 3, past `make_stable`); one
//! more call's worth would need a task to stay parked on the SA mutex across
//! a whole call of another thread, which ends with an `fsync` — while
//! parking_lot (sled's mutex) hands a contended lock to a waiter at least
//! every 0.5 ms. So at most 6 of the 7 threads can be blocked, and the
//! truncation — queued behind at most 6 tasks in FIFO order — gets the 7th.
//!
//! Exceptions, outside the steady state and documented where they occur: a
//! store migration's switch batch (one item per table, once per store), and
//! the host records of [`SledDiffStorage`](crate::SledDiffStorage) (the host
//! sizes its own batches). Both still take the gate.
//!
//! The price: sled calls of all stores in one process are serialised and
//! each write is its own flush. Lookups never call sled, and the write path
//! already groups operations into log records, so this costs only folds and
//! regenerations, which write one page per call (`cargo bench --bench
//! store` measures both).

use parking_lot::{Mutex, MutexGuard};

pub(crate) use sled::IVec;

/// Held for every sled call of this process (see the module docs).
static GATE: Mutex<()> = parking_lot::const_mutex(());

fn gate() -> MutexGuard<'static, ()> {
    GATE.lock()
}

/// Runs a call that may write, then flushes, under the gate. The call's
/// error wins over the flush's.
fn write_call<R>(
    flush: impl FnOnce() -> sled::Result<usize>,
    call: impl FnOnce() -> sled::Result<R>,
) -> sled::Result<R> {
    let _gate = gate();
    let result = call();
    let flushed = flush();
    let value = result?;
    flushed?;
    Ok(value)
}

/// A sled database reached only through the gate.
#[derive(Clone, Debug)]
pub(crate) struct Db {
    inner: sled::Db,
}

impl Db {
    /// Opens a database with `config`, sled's background flusher disabled.
    pub(crate) fn open(config: sled::Config) -> sled::Result<Db> {
        let _gate = gate();
        let inner = config.flush_every_ms(None).open()?;
        Ok(Db { inner })
    }

    pub(crate) fn open_tree(&self, name: impl AsRef<[u8]>) -> sled::Result<Tree> {
        let inner = write_call(|| self.inner.flush(), || self.inner.open_tree(name))?;
        Ok(Tree { inner })
    }

    pub(crate) fn drop_tree(&self, name: impl AsRef<[u8]>) -> sled::Result<bool> {
        write_call(|| self.inner.flush(), || self.inner.drop_tree(name))
    }

    pub(crate) fn tree_names(&self) -> Vec<IVec> {
        let _gate = gate();
        self.inner.tree_names()
    }

    pub(crate) fn flush(&self) -> sled::Result<()> {
        let _gate = gate();
        self.inner.flush().map(drop)
    }

    /// Whether the default tree is empty.
    pub(crate) fn is_empty(&self) -> bool {
        let _gate = gate();
        self.inner.is_empty()
    }

    pub(crate) fn size_on_disk(&self) -> sled::Result<u64> {
        let _gate = gate();
        self.inner.size_on_disk()
    }
}

/// A sled tree reached only through the gate.
#[derive(Clone, Debug)]
pub(crate) struct Tree {
    inner: sled::Tree,
}

impl Tree {
    fn write<R>(&self, call: impl FnOnce(&sled::Tree) -> sled::Result<R>) -> sled::Result<R> {
        write_call(|| self.inner.flush(), || call(&self.inner))
    }

    fn read<R>(&self, call: impl FnOnce(&sled::Tree) -> R) -> R {
        let _gate = gate();
        call(&self.inner)
    }

    pub(crate) fn get(&self, key: impl AsRef<[u8]>) -> sled::Result<Option<IVec>> {
        self.read(|t| t.get(key))
    }

    pub(crate) fn len(&self) -> usize {
        self.read(|t| t.len())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.read(|t| t.is_empty())
    }

    pub(crate) fn insert(&self, key: impl AsRef<[u8]>, value: impl Into<IVec>) -> sled::Result<()> {
        let (key, value) = (key.as_ref(), value.into());
        self.write(|t| t.insert(key, value)).map(drop)
    }

    pub(crate) fn remove(&self, key: impl AsRef<[u8]>) -> sled::Result<()> {
        self.write(|t| t.remove(key)).map(drop)
    }

    pub(crate) fn apply_batch(&self, batch: Batch) -> sled::Result<()> {
        self.write(|t| t.apply_batch(batch.inner))
    }

    pub(crate) fn clear(&self) -> sled::Result<()> {
        self.write(|t| t.clear())
    }

    /// The records whose keys start with `prefix`, in key order; each step
    /// takes the gate.
    pub(crate) fn scan_prefix(&self, prefix: impl AsRef<[u8]>) -> Iter {
        let inner = self.read(|t| t.scan_prefix(prefix));
        Iter { inner }
    }

    /// Every record, in key order; each step takes the gate.
    pub(crate) fn iter(&self) -> Iter {
        let inner = self.read(|t| t.iter());
        Iter { inner }
    }

    /// Runs `f` as one sled transaction over `self` and `other`, flushed.
    pub(crate) fn transaction2<A, E>(
        &self,
        other: &Tree,
        f: impl Fn(
            &sled::transaction::TransactionalTree,
            &sled::transaction::TransactionalTree,
        ) -> sled::transaction::ConflictableTransactionResult<A, E>,
    ) -> sled::transaction::TransactionResult<A, E> {
        use sled::transaction::Transactional;
        let _gate = gate();
        let result = (&self.inner, &other.inner).transaction(|(a, b)| f(a, b));
        match (result, self.inner.flush()) {
            (Ok(_), Err(e)) => Err(sled::transaction::TransactionError::Storage(e)),
            (result, _) => result,
        }
    }
}

/// A sled iterator whose every step takes the gate.
pub(crate) struct Iter {
    inner: sled::Iter,
}

impl Iterator for Iter {
    type Item = sled::Result<(IVec, IVec)>;

    fn next(&mut self) -> Option<Self::Item> {
        let _gate = gate();
        self.inner.next()
    }
}

/// An atomic batch of writes to one tree.
#[derive(Default)]
pub(crate) struct Batch {
    inner: sled::Batch,
}

impl Batch {
    pub(crate) fn insert(&mut self, key: impl AsRef<[u8]>, value: impl Into<IVec>) {
        self.inner.insert(key.as_ref(), value);
    }

    pub(crate) fn remove(&mut self, key: impl AsRef<[u8]>) {
        self.inner.remove(key.as_ref());
    }
}
