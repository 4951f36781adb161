//! sled 0.34.7, for what the store still keeps in it: the guard's storage
//! ([`SledDiffStorage`](crate::SledDiffStorage)), and the data of stores
//! of formats 1 and 2 while they are migrated. Writes run on one worker
//! thread of the process, one at a time, small, each flushed; reads run on
//! the caller's thread. This module proves from sled's code that sled's
//! writer deadlock (its issue #804) cannot close under these rules, and
//! gives every write a deadline that counts only its own running time.
//!
//! # The deadlock, from sled's code
//! A writer that fills a log segment asks the segment accountant (SA) for
//! the next one while holding the SA mutex (`pagecache/iobuf.rs`
//! `maybe_seal_and_write_iobuf` → `SegmentAccountant::next` →
//! `bump_tip`). If the file tail was freed earlier, `bump_tip` first waits
//! for the asynchronous truncation that freeing queued on sled's
//! process-wide thread pool (`pagecache/segment.rs` `truncate`). That pool
//! starts 7 threads and in practice never grows past them while busy
//! (`threadpool.rs`: a running task is subtracted twice from the count of
//! waiting threads). Every sealed log buffer queues one `write_to_log` task,
//! which ends in `sa_stabilize` → `with_sa`, i.e. waits for the SA mutex. If
//! all 7 threads hold such tasks while a writer in `bump_tip` holds the
//! mutex, the truncation behind them never runs. Upstream fixed this after
//! 0.34.7 (PR #1269), never released on the 0.34 line.
//!
//! # Why it cannot close here: writes
//! The cycle needs the writer in `bump_tip` to wait for a truncation task
//! that no pool thread will run. The argument below does not count pool
//! threads or tasks (a pool thread may be preempted anywhere, say between a
//! task's `mark_interval` and its `sa_stabilize`, and a lock's hand-off is
//! no bound): it rests on the order of sled's pool queue and of its segment
//! accountant.
//!
//! 1. **One writer.** Every call that may write runs on the engine's worker
//!    thread, so only the worker reserves log space, seals buffers and
//!    calls `SA::next`: sled's background flusher is off
//!    (`flush_every_ms(None)`, which also disables its segment cleaning,
//!    `PageCache::attempt_gc`, called only by that thread), `flush_async`
//!    is never called, and reads write nothing (next section).
//! 2. **A truncation leaves a free segment.**
//!    `SegmentAccountant::free_segment` (`pagecache/segment.rs`), the only
//!    caller of `truncate`, truncates only while more than one segment is
//!    free (`laziness_factor`): when a truncation task T is queued, a free
//!    segment remains. `SA::next` takes a free segment if there is one and
//!    calls `bump_tip` (which waits for T) only when there is none. So
//!    between T's queueing and a `bump_tip` that waits for it, `next` took
//!    a free segment at some moment t1, and the log then filled that
//!    segment: `next` is called again only when a buffer is sealed *maxed*
//!    (`iobuf.rs` `maybe_seal_and_write_iobuf`: a reservation does not fit
//!    in the rest of the segment, or less than a message header is left),
//!    i.e. after more than `segment_size` less the largest message was
//!    logged into it.
//! 3. **Flushed well within a segment.** Every write call, and every
//!    settling step (below), ends with a flush, and none logs that much
//!    (bounds below). So between t1 and that `bump_tip` a flush of ours
//!    returned that covered the buffer sealed at t1: `flush` returns once
//!    every byte reserved before it is stable (`make_stable`), i.e. once
//!    that buffer's `write_to_log` task has passed `mark_interval`.
//! 4. **The pool's queue is first-in first-out** (`threadpool.rs`: one
//!    `VecDeque`, `push_back`, `pop_front`; a task taken runs to its end on
//!    the thread that took it). The `write_to_log` task of the buffer sealed
//!    at t1 was queued after `next` returned at t1, so after T; it was
//!    taken (it ran `mark_interval`), so T was taken before it, and T
//!    (`set_len` and `sync_all` of the log file) takes no lock of sled. When
//!    the worker reaches `bump_tip`, T has finished or is running and will
//!    finish: the wait ends, however many pool threads are blocked.
//!
//! **The bounds.** The guard's database is created with sled's largest
//! segment, 16 MiB ([`GUARD_SEGMENT`]; its inline limit is a quarter of
//! it, `pagecache/logger.rs` `reserve_inner`). One write call hands sled at
//! most [`MAX_CALL_ITEMS`] = 8 items (a merge's transaction: 4 changes, an
//! insert and a remove each), keys of at most [`MAX_KEY`] = 256 bytes and
//! values of at most [`MAX_VALUE`] = 4,097: an item's fragment is under
//! 4.4 KiB; a leaf holds at most 17 items (sled splits one of more than 16
//! at the next traversal, `node.rs` `should_split`), under 75 KiB; an index
//! node at most 257 children, under 70 KiB; no message comes near the
//! inline limit, so nothing ever becomes a blob file. A call starts on a
//! settled tree (no split or merge pending, below). Each item makes at most
//! one node over- or under-full, and each split or merge resolves one and
//! may make its parent so: the traversal of item `j` finds at most `j − 1`
//! pending on its path, so a call makes at most 28 splits or merges (each
//! logging two nodes and a parent fragment, under 155 KiB) and 36
//! fragments (each of which may consolidate its node when its chain
//! reaches 10, `PAGE_CONSOLIDATION_THRESHOLD`: under 75 KiB): under 7 MiB
//! with a root hoist, far below 16 MiB less 4 MiB. Settling flushes after
//! the traversal of each key (`settle_all` after each item), which splits
//! or merges at most one node per level of its path. The database of a
//! store of format 1 or 2 has sled's default 512 KiB segments
//! ([`LEGACY_SEGMENT`]) and is opened only by the migration, which writes
//! one small catalog batch and settles the trees it reads: one traversal
//! per flush, at most a leaf split (two halves of at most 128 KiB each,
//! larger ones being blob pointers) and, per level above, a split of an
//! index node whose keys are the catalog's and the tables' (at most 129
//! bytes: under 35 KiB per node), under 512 KiB less 128 KiB. (A guard tree
//! of format 2 with keys over 256 bytes, which that format allowed, is
//! outside this bound; the migration refuses such records.) The cost of
//! the large segment: sled
//! allocates each log buffer at segment size (virtual memory, touched as it
//! is written) and grows its file a segment at a time.
//!
//! **Open: this count misses four things of sled's code** (found in issue
//! 28's work; the rules above are unchanged). (a) A split logs its parent
//! whole, not a fragment: `tree.rs` `split_node` allocates the right half
//! and replaces the left one and the parent, three nodes, under 220 KiB.
//! (b) Every `replace` may rewrite one more page, whole, that segment
//! cleaning queued (`pagecache/mod.rs` `replace` → `segment_cleaner.pop`
//! → `rewrite_page`). (c) A traversal restarts from the root after each
//! split or merge (`view_for_key`, `retry!`), so it also splits the parent
//! its split overfilled, and so on up: its splits are bounded by the
//! pending nodes it finds times the height. (d) A merge moves the child's
//! items into its left sibling (`merge_node` → `receive_merge`), which may
//! then be over-full: two pending nodes, not one. With (a) and (b), 28
//! splits of max-size nodes log about 10 MiB, merges half as much again:
//! "under 7 MiB" does not follow for records at the limits. Measured, the
//! guard's traffic at the limits (6,000 records written, merged, removed):
//! its largest flush, 218–389 KiB in four runs (`tests.rs`). Closing it needs
//! a count covering (a)-(d) or fewer items per call; a larger call ("What
//! it costs") needs it too.
//!
//! A crude count covering them (an upper bound, probably loose; its step
//! "2h per item" is assumed, not checked against every path of
//! `view_for_key`): a node is under 90 KiB (a merge may leave a leaf of 19
//! items, about 84 KiB, or an index node of 319 children, about 87 KiB;
//! the META page stays under it below about 150 guard storages); a split
//! or a merge logs at most three nodes (a merge: the sibling, and the
//! parent and the child through links, each of which a chain of 10 turns
//! into a `replace`), each with one rewrite by (b): six messages, under
//! 540 KiB. An item leaves at most one leaf pending; a split or a merge at
//! most two nodes more (the merged sibling, the parent), one level up at
//! the most; so one item accounts for at most 2h of them in a tree of h
//! levels, and a call of K items for 2Kh × 540 KiB, about 1.05·K·h MiB,
//! plus under 190 KiB per item (its fragment, a consolidation and its
//! rewrite). Under 12 MiB: K = 1 for h ≤ 11, K = 2 for h ≤ 5, K = 8 only
//! for h = 1 (the benchmark's 200,000 records make a tree of about 3
//! levels: leaves of 8–16 items under index nodes of up to 256 children).
//! So this count would prove the rule for calls of one item (a merge's
//! change then moves in two calls, base first; a crash between them leaves
//! it in both, and merging it again gives the same result), in trees of up
//! to 11 levels, not for the eight of today, whose worst case needs every
//! ancestor on eight paths at its limit at once. Calls of one item cost
//! the guard's writes a factor of five (`FILTERSTORE_BENCH_PROFILE=writes
//! cargo bench --bench store`, 40 batches of 1,000 new keys, this constant
//! set to 1 in a throwaway build: 5,450–5,770 keys/s against 26,300–28,100
//! at 8, three runs each, interleaved, load 1.6–1.8), against a write
//! figure already a fifth of its goal: the choice is left open
//! (`docs/KNOWN_ISSUES.md`).

//! # Why it cannot close here: reads on the caller's thread
//! A `Tree::get` traverses the tree from its root (`tree.rs`
//! `view_for_key`) and, on its way, finishes any structure modification it
//! finds pending: it splits a node that has grown past its limit
//! (`should_split`), merges one that has shrunk (`should_merge`), completes
//! a half-done split or merge, or hoists a new root — and each of those
//! *writes* (`pagecache.replace`, `link`, `allocate`). Reading a page that
//! is not in the cache pulls it from the log (`pagecache/logger.rs` `read`),
//! and if its position is not yet stable, `make_durable` seals the current
//! buffer, which may take `SA::next`. Neither may happen on a reader's
//! thread. So:
//!
//! * each tree has a **gate**: a read holds it shared, a write call on the
//!   worker holds it exclusively from before its first sled call until it
//!   has flushed and **settled** the tree: traversed again every key it
//!   wrote, flushing after each traversal, until a whole round wrote
//!   nothing (`Tree::flush` returns the bytes it made stable). A split or a
//!   merge changes only nodes on the written keys' paths, new halves (which
//!   start within their limits), and a merged node's left sibling, which
//!   then holds the written keys and is on their paths; so after a round
//!   that wrote nothing, no node of the tree has anything pending. A tree
//!   opened after a crash (whose recovery may have left a split half done)
//!   is settled by traversing all of it, the same way, before any read.
//! * every write call flushes, so every page of a settled tree is stable:
//!   a read that pulls one returns from `make_durable` at once (`stable >=
//!   lsn`) and reads the file with `pread`. Its remaining work (the page
//!   cache's in-memory eviction, `page_out`) takes no lock of the SA.
//!
//! A read of a settled tree therefore reserves no log space, seals no
//! buffer, queues no pool task and never takes the SA mutex: it cannot be
//! part of the cycle, and it runs beside the worker on any tree. Readers of
//! one tree wait only for a write call *of that tree* (one small call and
//! its settling); never for another tree or another store. If settling ever
//! stopped short (after 64 rounds, which a tree within these limits does
//! not need), the tree is marked unsettled and its reads go to the worker
//! until a write settles it again.
//!
//! # What it costs
//! Each write call ends with a sled `flush`, which seals sled's buffer and
//! waits for its `pwrite` and `sync_file_range` on sled's thread pool: a
//! device write per call of at most [`MAX_CALL_ITEMS`] items, and one per
//! settling traversal that split a node. So the guard's `write_diff` of
//! 1,000 new 16-byte keys is about 355 device writes (`strace -c` of 40
//! batches: 14,209 `pwrite` + `sync_file_range`, 125 per 1,000 from the
//! calls, 230 from settling; 75 µs of the two calls each on sled's pool,
//! plus the hand-offs: 194,000 `futex` calls) where sled's own batch of
//! the same records and one flush is one: 8,700–28,100 keys/s against
//! 108,600–217,000 on this VM (`guard.writes_vs_raw_sled_insert`,
//! 0.07–0.15; `cargo bench --bench store`, docs/KNOWN_ISSUES.md). The
//! hand-off to the worker is not the cost: up to 16 calls per job of the
//! worker measured the same. Fewer flushes need a bound on what more
//! items or traversals log (the open count above). What one would buy, in
//! throwaway runs with this limit raised and one flush per settling round:
//! 64 items per call 0.44×, 256 items 0.70× (largest flush of `tests.rs`
//! 2.0 and 3.1 MiB). Reads do not pay for the rules measurably: sled's get
//! on a database configured as the guard's, each database alone in a
//! process, took 1,604–2,036 ns against 1,660–1,894 on a default one (in
//! one process with other databases its speed moves with the order they
//! were built in: docs/KNOWN_ISSUES.md).
//!
//! # Power loss
//! sled's `flush` makes its log "stable" with `sync_file_range`
//! (`pagecache/iobuf.rs` `write_to_log`), which is not durable. So
//! [`Db::flush`] — called at the end of every operation of the guard's
//! storage — also syncs, in this order: every new blob file with its
//! directory ([`blobkeep`]: none are made within the
//! limits above, but a store of format 1 or 2 may hold some), then the log
//! (`fdatasync`) and the database directory. sled never syncs its `conf`
//! file, which it rewrites on every open (`config.rs` `write_config`); a
//! torn one fails its CRC and sled refuses to open. Its contents follow from
//! the configuration alone, so a `conf` that fails its CRC is removed before
//! sled opens (sled writes it again) and the new one is synced right after.
//!
//! # Deadlines
//! On a full disk sled 0.34.7 can wait forever (a failed log write leaves
//! `flush` waiting for a stable position that never comes). A write call's
//! caller waits for it at most the database's deadline **from the moment
//! the worker starts it**: the time it queued behind other databases' calls
//! is not counted. If the deadline passes, that database alone is marked
//! failed: its later writes fail at once, its handles are leaked rather than
//! dropped (dropping flushes, which may never return), and the caller gets
//! an I/O error of kind `TimedOut`; the worker is never replaced (a second
//! worker would put two threads into sled). A call of another database that
//! is still queued when the worker's current call has passed *its* deadline
//! is withdrawn and fails with kind `WouldBlock` ("the storage worker is
//! held by another store's call"), without marking its database failed:
//! retry later. Reads wait for their tree's gate at most the deadline.
//! Any I/O error, corruption or sled bug report marks the database failed
//! too. A sled panic is caught on the worker and reported as an error.

pub(crate) mod blobkeep;
mod gate;
mod iter;
mod open;
#[cfg(test)]
mod tests;
mod worker;

pub(crate) use iter::Iter;
pub(crate) use open::{open_with_retry, OpenError};
use open::{repair_conf, sync_conf};
pub(crate) use sled::IVec;

use gate::{noted, settle_all, settle_keys, Gate};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
#[cfg(test)]
pub(crate) use worker::SERIAL;
use worker::{dropped, io_error, Shared};

/// The most items (inserts and removes) one write call hands sled.
pub(crate) const MAX_CALL_ITEMS: usize = 8;
/// The longest key a write may carry, in bytes.
pub(crate) const MAX_KEY: usize = 256;
/// The longest value a write may carry, in bytes.
pub(crate) const MAX_VALUE: usize = 4097;
/// sled's segment size in the guard's database: sled's largest, 16 MiB
/// (module docs, "The bounds").
pub(crate) const GUARD_SEGMENT: usize = 1 << 24;
/// sled's default segment size, 512 KiB, with which stores of formats 1
/// and 2 were created.
pub(crate) const LEGACY_SEGMENT: usize = 512 * 1024;
/// The directory of the guard's database, in the store's directory.
pub(crate) const GUARD_DIR: &str = "guard";
/// The prefix of the guard storage's trees (formats 1 and 2 kept them in
/// the store's one database under the same names).
pub(crate) const GUARD_TREE_PREFIX: &str = "filterstore/guard/";

/// A sled database, reached only through the worker for writes.
#[derive(Debug)]
pub(crate) struct Db {
    inner: Option<sled::Db>,
    shared: Arc<Shared>,
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
/// "Power loss").
fn sync_files(dir: &Path) -> std::io::Result<()> {
    blobkeep::keep_new(dir)?;
    std::fs::File::open(dir.join("db"))?.sync_data()?;
    std::fs::File::open(dir)?.sync_all()?;
    blobkeep::release_deleted(dir)
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
    /// the open is a call with the deadline `timeout`, as every write.
    pub(crate) fn open(path: &Path, config: sled::Config, timeout: Duration) -> sled::Result<Db> {
        let shared = Shared::new(timeout);
        let config = config.path(path).flush_every_ms(None);
        let dir = path.to_path_buf();
        let inner = shared.call(move || {
            blobkeep::restore(&dir).map_err(sled::Error::Io)?;
            repair_conf(&dir);
            let db = config.open()?;
            sync_conf(&dir).map_err(sled::Error::Io)?;
            Ok(db)
        })?;
        Ok(Db {
            inner: Some(inner),
            shared,
            dir: Arc::new(path.to_path_buf()),
        })
    }

    fn db(&self) -> sled::Result<sled::Db> {
        self.inner.clone().ok_or_else(dropped)
    }

    /// Opens (or creates) a tree and settles all of it (module docs).
    pub(crate) fn open_tree(&self, name: impl AsRef<[u8]>) -> sled::Result<Tree> {
        let (db, name) = (self.db()?, name.as_ref().to_vec());
        let gate = Arc::new(Gate::default());
        let g = Arc::clone(&gate);
        let inner = self.shared.call(move || {
            let _w = g.write();
            let tree = db.open_tree(name)?;
            noted(db.flush()?);
            let settled = settle_all(&tree)?;
            g.settled.store(settled, Ordering::Release);
            Ok(tree)
        })?;
        Ok(Tree {
            inner: Some(inner),
            shared: self.shared.clone(),
            gate,
        })
    }

    pub(crate) fn tree_names(&self) -> sled::Result<Vec<IVec>> {
        let db = self.db()?;
        self.shared.call(move || Ok(db.tree_names()))
    }

    /// Makes everything written so far durable, also against power loss:
    /// sled's flush, then the syncs of the module docs ("Power loss").
    pub(crate) fn flush(&self) -> sled::Result<()> {
        let (db, dir) = (self.db()?, self.dir.clone());
        self.shared.call(move || {
            noted(db.flush()?);
            sync_files(&dir).map_err(sled::Error::Io)
        })
    }

    /// Whether the default tree is empty.
    pub(crate) fn is_empty(&self) -> sled::Result<bool> {
        let db = self.db()?;
        self.shared.call(move || Ok(db.is_empty()))
    }
}

/// A sled tree: writes through the worker, reads on the caller's thread.
#[derive(Debug)]
pub(crate) struct Tree {
    inner: Option<sled::Tree>,
    shared: Arc<Shared>,
    gate: Arc<Gate>,
}

impl Clone for Tree {
    fn clone(&self) -> Self {
        Tree {
            inner: self.inner.clone(),
            shared: self.shared.clone(),
            gate: self.gate.clone(),
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

impl Tree {
    fn tree(&self) -> sled::Result<sled::Tree> {
        self.inner.clone().ok_or_else(dropped)
    }

    /// Runs `read` on the caller's thread under the tree's gate (module
    /// docs), or on the worker if the tree is not settled.
    fn read<R: Send + 'static>(
        &self,
        read: impl FnOnce(&sled::Tree) -> sled::Result<R> + Send + 'static,
    ) -> sled::Result<R> {
        self.shared.check()?;
        let tree = self.inner.as_ref().ok_or_else(dropped)?;
        let Some(_shared) = self.gate.read(self.shared.timeout) else {
            return Err(io_error(
                std::io::ErrorKind::TimedOut,
                format!(
                    "a write of this storage held it for more than {:?}",
                    self.shared.timeout
                ),
            ));
        };
        if self.gate.settled.load(Ordering::Acquire) {
            return read(tree);
        }
        drop(_shared);
        let (tree, gate) = (tree.clone(), Arc::clone(&self.gate));
        self.shared.call(move || {
            let _w = gate.write();
            read(&tree)
        })
    }

    /// A write call (module docs): `call` on the worker under the gate(s),
    /// then a flush, then settling every tree in `trees` along `keys`.
    fn write<R: Send + 'static>(
        &self,
        others: &[&Tree],
        keys: Vec<IVec>,
        call: impl FnOnce(&sled::Tree) -> sled::Result<R> + Send + 'static,
    ) -> sled::Result<R> {
        let tree = self.tree()?;
        let mut all: Vec<(sled::Tree, Arc<Gate>)> = vec![(tree.clone(), Arc::clone(&self.gate))];
        for o in others {
            all.push((o.tree()?, Arc::clone(&o.gate)));
        }
        self.shared.call(move || {
            let _held: Vec<_> = all.iter().map(|(_, g)| g.write()).collect();
            for (t, g) in &all {
                if !g.settled.load(Ordering::Acquire) {
                    g.settled.store(settle_all(t)?, Ordering::Release);
                }
            }
            let result = call(&tree);
            noted(tree.flush()?);
            for (t, g) in &all {
                let settled = settle_keys(t, &keys)?;
                g.settled.store(settled, Ordering::Release);
            }
            result
        })
    }

    pub(crate) fn get(&self, key: impl AsRef<[u8]>) -> sled::Result<Option<IVec>> {
        let key = IVec::from(key.as_ref());
        self.read(move |t| t.get(key))
    }

    /// The values of `keys`, in order, under one acquisition of the gate.
    pub(crate) fn get_many(&self, keys: Vec<IVec>) -> sled::Result<Vec<Option<IVec>>> {
        self.read(move |t| keys.iter().map(|k| t.get(k)).collect())
    }

    pub(crate) fn len(&self) -> sled::Result<usize> {
        self.read(|t| Ok(t.len()))
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> sled::Result<bool> {
        self.read(|t| Ok(t.is_empty()))
    }

    /// Applies `batch` atomically (at most [`MAX_CALL_ITEMS`] items, each
    /// within [`MAX_KEY`] and [`MAX_VALUE`]: a larger one is a bug of the
    /// caller, refused).
    pub(crate) fn apply_batch(&self, batch: Batch) -> sled::Result<()> {
        batch.check()?;
        let keys = batch.keys.clone();
        self.write(&[], keys, move |t| t.apply_batch(batch.inner))
    }

    /// The records whose keys start with `prefix`, in key order, fetched
    /// [`ITER_BATCH`](iter::ITER_BATCH) at a time.
    pub(crate) fn scan_prefix(&self, prefix: impl AsRef<[u8]>) -> Iter {
        self.iter_from(Some(prefix.as_ref().to_vec()))
    }

    /// Every record, in key order.
    pub(crate) fn iter(&self) -> Iter {
        self.iter_from(None)
    }

    fn iter_from(&self, prefix: Option<Vec<u8>>) -> Iter {
        Iter::new(self.clone(), prefix)
    }

    /// Runs `f` as one sled transaction over `self` and `other`, writing at
    /// most [`MAX_CALL_ITEMS`] items whose keys are `keys` (settled
    /// afterwards in both trees).
    pub(crate) fn transaction2<A, E>(
        &self,
        other: &Tree,
        keys: Vec<IVec>,
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
        let b = other.tree()?;
        self.write(&[other], keys, move |a| {
            match (a, &b).transaction(|(x, y)| f(x, y)) {
                Ok(value) => Ok(Ok(value)),
                Err(TransactionError::Abort(e)) => Ok(Err(e)),
                Err(TransactionError::Storage(e)) => Err(e),
            }
        })
    }
}

/// An atomic batch of writes to one tree (see [`Tree::apply_batch`]).
#[derive(Default)]
pub(crate) struct Batch {
    inner: sled::Batch,
    keys: Vec<IVec>,
    oversized: bool,
}

impl Batch {
    pub(crate) fn insert(&mut self, key: impl AsRef<[u8]>, value: impl Into<IVec>) {
        let value = value.into();
        self.oversized |= key.as_ref().len() > MAX_KEY || value.len() > MAX_VALUE;
        self.keys.push(IVec::from(key.as_ref()));
        self.inner.insert(key.as_ref(), value);
    }

    pub(crate) fn remove(&mut self, key: impl AsRef<[u8]>) {
        self.oversized |= key.as_ref().len() > MAX_KEY;
        self.keys.push(IVec::from(key.as_ref()));
        self.inner.remove(key.as_ref());
    }

    fn check(&self) -> sled::Result<()> {
        if self.oversized || self.keys.len() > MAX_CALL_ITEMS {
            return Err(sled::Error::Unsupported(format!(
                "a storage call of {} items (at most {MAX_CALL_ITEMS}, keys of at most \
                 {MAX_KEY} bytes, values of at most {MAX_VALUE})",
                self.keys.len()
            )));
        }
        Ok(())
    }
}
