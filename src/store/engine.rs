//! The one door to sled: every call the store makes into sled 0.34.7 runs on
//! one worker thread of the process, one at a time, and every call that may
//! have written is flushed before the next one starts. This makes sled's
//! segment-accountant deadlock (sled issue #804) impossible for the store's
//! own traffic (the argument follows), and it gives every call a deadline
//! (the last section): a sled call that never returns — as on a full disk —
//! costs the caller [`StoreConfig::io_timeout`](super::StoreConfig::io_timeout)
//! and a typed error, not a hang.
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
//! 1. **One call at a time.** Every sled call of the process's stores runs on
//!    the engine's worker thread, reads included (a read of an unflushed
//!    page can seal a buffer); dropping a handle too. Only the worker
//!    reserves log space, so only it can be the writer in `bump_tip`; pool
//!    tasks never call `SA::next`.
//! 2. **Flushed before the next call.** A call that may have written
//!    flushes before it returns; `flush` returns once every
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
//! While the worker waits in `bump_tip`, the tasks that exist are its
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
//! sizes its own batches). Both still run on the worker.
//!
//! The price: sled calls of all stores in one process are serialised and
//! each write is its own flush. Lookups never call sled, and the write path
//! already groups operations into log records, so this costs only folds and
//! regenerations, which write one page per call (`cargo bench --bench
//! store` measures both).
//!
//! # Power loss
//! sled's `flush` makes its log "stable" with `sync_file_range` (`iobuf.rs`
//! `write_to_log`), which writes the data pages but neither the file's
//! metadata (its size grows as segments are added) nor the disk's volatile
//! cache: enough for a process kill, not for a power cut. So
//! [`Db::flush`] — which every durability point of the store calls (a
//! durable apply, `Table::flush`, a catalog change, a regeneration's swap,
//! the end of a bulk load) — also syncs, in this order: every new blob
//! file (sled never syncs those: `blob_io.rs` `write_blob`) with its
//! directory, then the log (`fdatasync`) and the database directory (sled
//! creates snapshots there). A blob is thus durable before any durable
//! record points at it. sled also deletes a replaced blob before the
//! replacing record is durable; [`blobkeep`](super::blobkeep) keeps a
//! second name for each blob until then, and puts it back before sled
//! recovers.
//!
//! # Deadlines, and a full disk
//! On a full disk sled 0.34.7 can wait forever: a failed snapshot or log
//! write leaves `flush` (called by every `Tree` drop) waiting for a stable
//! log position that never comes (reproduced on a 20 MB tmpfs: the 26th
//! 20k-key insert, and every open afterwards, hung in `Tree::drop` →
//! `PageCache::flush`). So the caller waits for the worker at most the
//! database's deadline; if it passes, the database is marked failed, the
//! stuck worker is abandoned to sled (a fresh one serves other databases),
//! and the caller gets an I/O error of kind `TimedOut`. Any I/O error,
//! corruption or sled bug report marks the database failed too (sled keeps
//! such an error for good). Every later call on a failed database fails at
//! once, and its handles are leaked rather than dropped, since dropping
//! flushes and the flush may never return: the directory stays locked
//! until the process exits. Lookups never call sled and keep working;
//! nothing durable is lost (sled only ever appends to its log). A sled
//! panic is caught on the worker and reported as an error.

use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

pub(crate) use sled::IVec;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// The sender of the process's sled worker; `None` until the first call and
/// after the worker was abandoned.
static WORKER: Mutex<Option<mpsc::Sender<Job>>> = parking_lot::const_mutex(None);

/// Queues `job` on the worker, starting one if there is none.
fn submit(job: Job) -> Result<(), Job> {
    let mut worker = WORKER.lock();
    let tx = worker.get_or_insert_with(spawn_worker);
    tx.send(job).map_err(|e| {
        *worker = None;
        e.0
    })
}

fn spawn_worker() -> mpsc::Sender<Job> {
    let (tx, rx) = mpsc::channel::<Job>();
    let spawned = std::thread::Builder::new()
        .name("filterstore-sled".into())
        .spawn(move || {
            for job in rx {
                // A sled panic must not take the worker with it: the job's
                // reply channel is dropped, which its caller reports.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            }
        });
    // Without a thread the receiver is gone and every send fails: reported.
    drop(spawned);
    tx
}

/// Abandons the worker (stuck in sled): the next call starts a fresh one.
fn abandon_worker() {
    *WORKER.lock() = None;
}

/// What the handles of one database share.
#[derive(Debug)]
struct Shared {
    /// How long a caller waits for one sled call.
    timeout: Duration,
    /// Set by a timeout or a fatal error: every later call fails at once.
    failed: AtomicBool,
    /// Why it failed.
    reason: Mutex<String>,
}

impl Shared {
    fn new(timeout: Duration) -> Arc<Shared> {
        Arc::new(Shared {
            timeout,
            failed: AtomicBool::new(false),
            reason: Mutex::new(String::new()),
        })
    }

    fn fail(&self, reason: String) {
        let mut r = self.reason.lock();
        if !self.failed.swap(true, Ordering::AcqRel) {
            *r = reason;
        }
    }

    fn failed_error(&self) -> sled::Error {
        io_error(
            std::io::ErrorKind::Other,
            format!(
                "the database failed earlier ({}); reopen the store",
                self.reason.lock()
            ),
        )
    }

    /// Runs `job` on the worker and waits for it at most the deadline.
    fn call<R: Send + 'static>(
        &self,
        job: impl FnOnce() -> sled::Result<R> + Send + 'static,
    ) -> sled::Result<R> {
        if self.failed.load(Ordering::Acquire) {
            return Err(self.failed_error());
        }
        let (tx, rx) = mpsc::sync_channel(1);
        let sent = submit(Box::new(move || {
            let _ = tx.send(job());
        }));
        if sent.is_err() {
            return Err(io_error(
                std::io::ErrorKind::Other,
                "could not start the storage engine's thread".into(),
            ));
        }
        match rx.recv_timeout(self.timeout) {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => {
                if is_fatal(&e) {
                    self.fail(e.to_string());
                }
                Err(e)
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let msg = format!(
                    "the storage engine did not answer within {:?} (a full or failing disk?)",
                    self.timeout
                );
                self.fail(msg.clone());
                abandon_worker();
                Err(io_error(std::io::ErrorKind::TimedOut, msg))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let msg = "the storage engine panicked".to_string();
                self.fail(msg.clone());
                Err(sled::Error::ReportableBug(msg))
            }
        }
    }

    /// Drops a handle on the worker (a drop may flush), or leaks it if the
    /// database failed (that flush may never return).
    fn release<T: Send + 'static>(&self, handle: T) {
        if self.failed.load(Ordering::Acquire) {
            std::mem::forget(handle);
        } else if let Err(job) = submit(Box::new(move || drop(handle))) {
            std::mem::forget(job);
        }
    }
}

/// The error of a call on a handle being dropped (which no caller can make).
fn dropped() -> sled::Error {
    sled::Error::ReportableBug("a storage handle was used while being dropped".into())
}

fn io_error(kind: std::io::ErrorKind, msg: String) -> sled::Error {
    sled::Error::Io(std::io::Error::new(kind, msg))
}

/// Errors after which sled's database is not to be trusted with more calls.
fn is_fatal(e: &sled::Error) -> bool {
    matches!(
        e,
        sled::Error::Io(_) | sled::Error::Corruption { .. } | sled::Error::ReportableBug(_)
    )
}

/// Flushes after a call that may have written; the call's error wins.
fn flushed<R>(result: sled::Result<R>, flush: sled::Result<usize>) -> sled::Result<R> {
    let value = result?;
    flush?;
    Ok(value)
}

/// A sled database, reached only through the worker.
#[derive(Debug)]
pub(crate) struct Db {
    inner: Option<sled::Db>,
    shared: Arc<Shared>,
    /// The database directory.
    dir: Arc<PathBuf>,
}

impl Clone for Db {
    fn clone(&self) -> Self {
        Db {
            inner: self.inner.clone(),
            shared: self.shared.clone(),
            dir: self.dir.clone(),
        }
    }
}

/// Steps 2 to 4 of a durability point, after sled's flush (module docs,
/// "Power loss"): blob files synced and kept, then sled's log
/// `fdatasync`ed and the database directory `fsync`ed (sled creates its
/// snapshots and configuration there), then the deleted blobs released.
fn sync_files(dir: &Path) -> std::io::Result<()> {
    super::blobkeep::keep_new(dir)?;
    std::fs::File::open(dir.join("db"))?.sync_data()?;
    std::fs::File::open(dir)?.sync_all()?;
    super::blobkeep::release_deleted(dir)
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Some(db) = self.inner.take() {
            self.shared.release(db);
        }
    }
}

impl Db {
    /// Opens a database with `config` (sled's background flusher disabled);
    /// every call on it, the open included, waits at most `timeout`.
    pub(crate) fn open(path: &Path, config: sled::Config, timeout: Duration) -> sled::Result<Db> {
        let shared = Shared::new(timeout);
        let config = config.path(path).flush_every_ms(None);
        let dir = path.to_path_buf();
        let inner = shared.call(move || {
            super::blobkeep::restore(&dir).map_err(sled::Error::Io)?;
            config.open()
        })?;
        Ok(Db {
            inner: Some(inner),
            shared,
            dir: Arc::new(path.to_path_buf()),
        })
    }

    /// sled's handle (`None` only while this handle is dropped).
    fn db(&self) -> sled::Result<sled::Db> {
        self.inner.clone().ok_or_else(dropped)
    }

    pub(crate) fn open_tree(&self, name: impl AsRef<[u8]>) -> sled::Result<Tree> {
        let (db, name) = (self.db()?, name.as_ref().to_vec());
        let inner = self.shared.call(move || {
            let tree = db.open_tree(name);
            flushed(tree, db.flush())
        })?;
        Ok(Tree {
            inner: Some(inner),
            shared: self.shared.clone(),
        })
    }

    pub(crate) fn drop_tree(&self, name: impl AsRef<[u8]>) -> sled::Result<bool> {
        let (db, name) = (self.db()?, name.as_ref().to_vec());
        self.shared.call(move || {
            let dropped = db.drop_tree(name);
            flushed(dropped, db.flush())
        })
    }

    pub(crate) fn tree_names(&self) -> sled::Result<Vec<IVec>> {
        let db = self.db()?;
        self.shared.call(move || Ok(db.tree_names()))
    }

    /// Makes everything written so far durable, also against power loss:
    /// sled's flush, then `fdatasync` of sled's log and `fsync` of the
    /// directories whose entries sled creates (module docs, "Power loss").
    pub(crate) fn flush(&self) -> sled::Result<()> {
        let (db, dir) = (self.db()?, self.dir.clone());
        self.shared.call(move || {
            db.flush()?;
            sync_files(&dir).map_err(sled::Error::Io)
        })
    }

    /// Whether the default tree is empty.
    pub(crate) fn is_empty(&self) -> sled::Result<bool> {
        let db = self.db()?;
        self.shared.call(move || Ok(db.is_empty()))
    }

    pub(crate) fn size_on_disk(&self) -> sled::Result<u64> {
        let db = self.db()?;
        self.shared.call(move || db.size_on_disk())
    }
}

/// A sled tree, reached only through the worker.
#[derive(Debug)]
pub(crate) struct Tree {
    inner: Option<sled::Tree>,
    shared: Arc<Shared>,
}

impl Clone for Tree {
    fn clone(&self) -> Self {
        Tree {
            inner: self.inner.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        if let Some(tree) = self.inner.take() {
            self.shared.release(tree);
        }
    }
}

/// Records fetched per worker call while iterating.
const ITER_BATCH: usize = 64;

impl Tree {
    /// sled's handle (`None` only while this handle is dropped).
    fn tree(&self) -> sled::Result<sled::Tree> {
        self.inner.clone().ok_or_else(dropped)
    }

    /// A call that may write: flushed before it returns.
    fn write<R: Send + 'static>(
        &self,
        call: impl FnOnce(&sled::Tree) -> sled::Result<R> + Send + 'static,
    ) -> sled::Result<R> {
        let tree = self.tree()?;
        self.shared.call(move || {
            let result = call(&tree);
            flushed(result, tree.flush())
        })
    }

    fn read<R: Send + 'static>(
        &self,
        call: impl FnOnce(&sled::Tree) -> sled::Result<R> + Send + 'static,
    ) -> sled::Result<R> {
        let tree = self.tree()?;
        self.shared.call(move || call(&tree))
    }

    pub(crate) fn get(&self, key: impl AsRef<[u8]>) -> sled::Result<Option<IVec>> {
        let key = IVec::from(key.as_ref());
        self.read(move |t| t.get(key))
    }

    pub(crate) fn len(&self) -> sled::Result<usize> {
        self.read(|t| Ok(t.len()))
    }

    pub(crate) fn is_empty(&self) -> sled::Result<bool> {
        self.read(|t| Ok(t.is_empty()))
    }

    pub(crate) fn insert(&self, key: impl AsRef<[u8]>, value: impl Into<IVec>) -> sled::Result<()> {
        let (key, value) = (IVec::from(key.as_ref()), value.into());
        self.write(move |t| t.insert(key, value)).map(drop)
    }

    pub(crate) fn remove(&self, key: impl AsRef<[u8]>) -> sled::Result<()> {
        let key = IVec::from(key.as_ref());
        self.write(move |t| t.remove(key)).map(drop)
    }

    pub(crate) fn apply_batch(&self, batch: Batch) -> sled::Result<()> {
        self.write(move |t| t.apply_batch(batch.inner))
    }

    pub(crate) fn clear(&self) -> sled::Result<()> {
        self.write(|t| t.clear())
    }

    /// The records whose keys start with `prefix`, in key order, fetched
    /// [`ITER_BATCH`] at a time.
    pub(crate) fn scan_prefix(&self, prefix: impl AsRef<[u8]>) -> Iter {
        self.iter_from(Start::Prefix(prefix.as_ref().to_vec()))
    }

    /// Every record, in key order.
    pub(crate) fn iter(&self) -> Iter {
        self.iter_from(Start::All)
    }

    fn iter_from(&self, start: Start) -> Iter {
        Iter {
            state: match self.inner.clone() {
                Some(tree) => IterState::Start(tree, start),
                None => IterState::Done,
            },
            shared: self.shared.clone(),
            buffered: std::collections::VecDeque::new(),
        }
    }

    /// Runs `f` as one sled transaction over `self` and `other`, flushed.
    pub(crate) fn transaction2<A, E>(
        &self,
        other: &Tree,
        f: impl Fn(
                &sled::transaction::TransactionalTree,
                &sled::transaction::TransactionalTree,
            ) -> sled::transaction::ConflictableTransactionResult<A, E>
            + Send
            + 'static,
    ) -> sled::Result<Result<A, E>>
    where
        A: Send + 'static,
        E: Send + 'static,
    {
        use sled::transaction::{TransactionError, Transactional};
        let (a, b) = (self.tree()?, other.tree()?);
        self.shared.call(move || {
            let result = (&a, &b).transaction(|(x, y)| f(x, y));
            let flush = a.flush();
            match result {
                Ok(value) => flush.map(|_| Ok(value)),
                Err(TransactionError::Abort(e)) => Ok(Err(e)),
                Err(TransactionError::Storage(e)) => Err(e),
            }
        })
    }
}

enum Start {
    All,
    Prefix(Vec<u8>),
}

enum IterState {
    /// Not started: the tree and where to start.
    Start(sled::Tree, Start),
    /// Between batches (the iterator is lent to the worker during one).
    Running(Box<sled::Iter>),
    /// Exhausted, failed, or lent to a worker that never returned it.
    Done,
}

/// A sled iterator driven by the worker, [`ITER_BATCH`] records per call.
pub(crate) struct Iter {
    state: IterState,
    shared: Arc<Shared>,
    buffered: std::collections::VecDeque<(IVec, IVec)>,
}

impl Iter {
    /// Fetches the next batch into `buffered`; the error of the call if any.
    fn refill(&mut self) -> Option<sled::Error> {
        let iter = match std::mem::replace(&mut self.state, IterState::Done) {
            IterState::Start(tree, Start::All) => Lent::Start(tree, None),
            IterState::Start(tree, Start::Prefix(p)) => Lent::Start(tree, Some(p)),
            IterState::Running(iter) => Lent::Running(iter),
            IterState::Done => return None,
        };
        let fetched = self.shared.call(move || {
            let mut iter = match iter {
                Lent::Start(tree, None) => Box::new(tree.iter()),
                Lent::Start(tree, Some(p)) => Box::new(tree.scan_prefix(p)),
                Lent::Running(iter) => iter,
            };
            let mut batch = Vec::with_capacity(ITER_BATCH);
            while batch.len() < ITER_BATCH {
                match iter.next() {
                    Some(item) => batch.push(item?),
                    None => return Ok((None, batch)),
                }
            }
            Ok((Some(iter), batch))
        });
        match fetched {
            Ok((rest, batch)) => {
                self.buffered.extend(batch);
                if let Some(iter) = rest {
                    self.state = IterState::Running(iter);
                }
                None
            }
            Err(e) => Some(e),
        }
    }
}

/// What a batch call takes to the worker.
enum Lent {
    Start(sled::Tree, Option<Vec<u8>>),
    Running(Box<sled::Iter>),
}

impl Iterator for Iter {
    type Item = sled::Result<(IVec, IVec)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buffered.is_empty() {
            if let Some(e) = self.refill() {
                return Some(Err(e));
            }
        }
        self.buffered.pop_front().map(Ok)
    }
}

impl Drop for Iter {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.state, IterState::Done) {
            IterState::Start(tree, _) => self.shared.release(tree),
            IterState::Running(iter) => self.shared.release(iter),
            IterState::Done => {}
        }
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
