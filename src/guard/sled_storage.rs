//! [`SledDiffStorage`]: the guard's host side inside the filter store's
//! directory, on sled.

use super::diff_index::ChangeRef;
use super::diff_log::{DiffLog, Frozen};
use super::sled_error::{SledDiffError, GUARD_GROUP, MAX_GUARD_KEY, MAX_GUARD_VALUE};
use super::storage::{Change, DiffStorage};
use super::value::{GuardValue, Repr};
use crate::sled_engine as engine;
use crate::store::{Durability, FilterStore, StoreError};
use parking_lot::Mutex;
use std::sync::Arc;
use std::thread::JoinHandle;

/// [`DiffStorage`] inside the filter store's directory: the base in a sled
/// tree (read-mostly), the differential file an append-only log of the
/// store's own format (store format 7: `guard-logs/`, `docs/FORMAT.md`
/// § 8b) with an in-memory index of the changed keys, and a merge that
/// moves the log's changes into the base in the background. The storage
/// engine stays an implementation detail: no engine type appears in this
/// API, and engine errors are the [`source`](std::error::Error::source) of
/// a [`StoreError`].
///
/// * **Writes** ([`write_diff`](DiffStorage::write_diff)) append one
///   checksummed record and `fdatasync` it: at most one sync per call,
///   whatever its size, all or none of it durable (a record is whole or not
///   there). Records are written one at a time and synced outside that
///   turn: writers that arrive while a sync runs share the next one (group
///   commit). A write at [`Durability::Buffered`]
///   ([`write_diff_with`](DiffStorage::write_diff_with)) is readable at once
///   and held in memory until the next durable write or
///   [`flush_diff`](DiffStorage::flush_diff).
/// * **Reads** of the differential file look in the index (a read lock, no
///   I/O); reads of the base are sled gets on the caller's thread.
/// * **Merges**: when the log passes [`MERGE_AT`] bytes, a new log is
///   begun and a thread of the storage's own moves the old one's changes
///   into the base, in sled calls of at most eight items, each flushed
///   (`src/sled_engine/mod.rs` proves from sled's code why this
///   keeps sled 0.34.7's writer deadlock from closing), then deletes the
///   old log. Writers never wait for it, except a writer that finds the
///   log at [`WAIT_AT`] bytes while a merge still runs: it waits for that
///   merge to end. [`merge`](DiffStorage::merge) merges everything on the
///   caller's thread. `cargo bench --bench store` reports the merge's
///   sustained rate (`RESULT guard.merge_keys_per_s`).
/// * **Recovery**: opening the storage reads every log into the index and
///   merges them in the background; a damaged log (one whose readable
///   prefix a whole record follows) refuses the open instead of losing
///   acknowledged changes. A store of format 6 or older kept the
///   differential file in sled: the first open of each storage moves what
///   it holds into the base.
///
/// Every handle of one storage name in a process shares one state: the
/// second [`open`](SledDiffStorage::open) returns the first one's.
///
/// Limits: a key of at most [`MAX_GUARD_KEY`] bytes and a value of at most
/// [`MAX_GUARD_VALUE`] (larger ones are refused with
/// [`SledDiffError::TooLarge`], before anything is written: sled would
/// store them as blob files, whose names a power cut can lose); the index
/// is charged to the store's memory budget, and a write over it is refused
/// with nothing written. [`load_base`](SledDiffStorage::load_base) and
/// [`clear`](SledDiffStorage::clear) are atomic per group of
/// [`GUARD_GROUP`] records. Every operation but a buffered write is
/// durable against power loss when it returns.
///
/// Measured by `cargo bench --bench diffguard` and `cargo bench --bench
/// store` (`RESULT guard.reads_vs_raw_sled_get`,
/// `guard.writes_vs_fsync_bound`).
#[derive(Clone)]
pub struct SledDiffStorage {
    handle: Arc<Handle>,
}

impl std::fmt::Debug for SledDiffStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SledDiffStorage")
            .field("name", &self.handle.shared.name)
            .finish_non_exhaustive()
    }
}

/// Active-log bytes past which a write starts a background merge.
pub const MERGE_AT: u64 = 4 << 20;
/// Active-log bytes at which a write waits for a running merge to end
/// before it appends (the log's size limit).
pub const WAIT_AT: u64 = 64 << 20;

/// What every handle of one storage shares; its drop waits for the merge
/// thread, which holds only [`Shared`].
struct Handle {
    shared: Arc<Shared>,
    merger: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        if let Some(h) = self.merger.get_mut().take() {
            let _ = h.join();
        }
    }
}

/// What the merge thread needs.
struct Shared {
    name: String,
    store: FilterStore,
    base: engine::Tree,
    log: DiffLog,
    /// One merge at a time.
    merging: Mutex<()>,
    /// Why the last background merge failed, if it did (its changes stay
    /// in the index and the logs; the next merge tries again).
    failed: Mutex<Option<String>>,
    /// Unit tests: [`MERGE_AT`] and [`WAIT_AT`] made smaller.
    #[cfg(test)]
    limits: Mutex<(u64, u64)>,
}

/// Refuses a record over the limits, before anything is written.
fn check_size(key: &[u8], value_len: usize) -> Result<(), SledDiffError> {
    if key.len() > MAX_GUARD_KEY || value_len > MAX_GUARD_VALUE {
        return Err(SledDiffError::TooLarge {
            key: key.len(),
            value: value_len,
        });
    }
    Ok(())
}

impl SledDiffStorage {
    /// Opens (or creates) the base and differential file named `name` (the
    /// rules of table names, [`NameError`](crate::NameError)) in `store`.
    /// They live beside the store's tables and never collide with them.
    ///
    /// # Examples
    /// ```
    /// use filterstore::{Change, DiffStorage, FilterStore, Guard, SledDiffStorage, TableSpec};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = tempfile::tempdir()?;
    /// let store = FilterStore::open(dir.path())?;
    /// let storage = SledDiffStorage::open(&store, "accounts")?;
    /// storage.load_base([(b"alice".to_vec(), b"10".to_vec()), (b"bob".to_vec(), b"20".to_vec())])?;
    /// let changed = store.open_or_create_table("accounts-changed", TableSpec::new(1_000, 0.01))?;
    /// let guard = Guard::open(storage, changed)?;
    ///
    /// guard.write(&[(b"bob".to_vec(), Change::Put(b"25".to_vec()))])?;
    /// assert_eq!(guard.read(b"bob")?.as_deref(), Some(&b"25"[..])); // from the differential file
    /// assert_eq!(guard.read(b"alice")?.as_deref(), Some(&b"10"[..])); // the filter skipped the diff
    /// assert_eq!(guard.stats().reads, 2);
    /// assert_eq!(guard.stats().diff_reads_avoided + guard.stats().diff_reads, 2);
    ///
    /// assert_eq!(guard.merge()?, 1); // one change merged into the base
    /// assert_eq!(guard.storage().read_base(b"bob")?.as_deref(), Some(&b"25"[..]));
    /// assert_eq!(guard.table().live_keys(), 0); // and the filter cleared
    /// # Ok(()) }
    /// ```
    pub fn open(store: &FilterStore, name: &str) -> Result<Self, StoreError> {
        let handle = store.guard_storage(name, |dir| {
            let (base, legacy_diff) = store.guard_trees(name)?;
            drain_legacy(&base, &legacy_diff).map_err(|e| match e {
                SledDiffError::Store(e) => e,
                other => StoreError::Io {
                    op: "moving a format-6 differential file into the base",
                    source: std::io::Error::new(std::io::ErrorKind::InvalidData, other.to_string()),
                },
            })?;
            store.flush_storage()?;
            let log = DiffLog::open(dir, name)?;
            let shared = Arc::new(Shared {
                name: name.to_string(),
                store: store.clone(),
                base,
                log,
                merging: Mutex::new(()),
                failed: Mutex::new(None),
                #[cfg(test)]
                limits: Mutex::new((MERGE_AT, WAIT_AT)),
            });
            let handle = Arc::new(Handle {
                shared,
                merger: Mutex::new(None),
            });
            // The logs recovery found, merged in the background.
            handle.kick(false)?;
            Ok(handle)
        })?;
        Ok(SledDiffStorage { handle })
    }

    fn shared(&self) -> &Shared {
        &self.handle.shared
    }

    /// Writes `records` into the base, unguarded (a bulk load before the
    /// guard is used, or by the host's own merge), in atomic groups of
    /// [`GUARD_GROUP`], all durable before this returns. Every record is
    /// checked against the size limits before the first is written.
    pub fn load_base<K, V>(
        &self,
        records: impl IntoIterator<Item = (K, V)>,
    ) -> Result<(), SledDiffError>
    where
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let records: Vec<(K, V)> = records.into_iter().collect();
        for (k, v) in &records {
            check_size(k.as_ref(), v.as_ref().len())?;
        }
        for group in records.chunks(GUARD_GROUP) {
            let mut batch = engine::Batch::default();
            for (k, v) in group {
                batch.insert(k.as_ref(), v.as_ref());
            }
            self.shared()
                .base
                .apply_batch(batch)
                .map_err(sled_err("loading the base"))?;
        }
        self.shared().flush()
    }

    /// Empties the base and the differential file (durable when this
    /// returns), after any merge running ends. The guard's table is the
    /// caller's to clear.
    pub fn clear(&self) -> Result<(), SledDiffError> {
        self.handle.join_merge();
        let shared = self.shared();
        let _one = shared.merging.lock();
        shared.log.clear()?;
        let tree = &shared.base;
        loop {
            let keys: Vec<engine::IVec> = tree
                .iter()
                .take(GUARD_GROUP)
                .map(|kv| kv.map(|(k, _)| k))
                .collect::<Result<_, _>>()
                .map_err(sled_err("clearing the base"))?;
            if keys.is_empty() {
                break;
            }
            let mut batch = engine::Batch::default();
            for k in keys {
                batch.remove(k);
            }
            tree.apply_batch(batch)
                .map_err(sled_err("clearing the base"))?;
        }
        shared.flush()
    }

    /// Records in the base.
    pub fn base_len(&self) -> Result<usize, SledDiffError> {
        self.shared()
            .base
            .len()
            .map_err(sled_err("counting the base"))
    }

    /// Keys with a change in the differential file.
    pub fn diff_len(&self) -> Result<usize, SledDiffError> {
        Ok(self.shared().log.len())
    }

    /// Bytes of the differential file's log being appended to (a merge
    /// starts past [`MERGE_AT`]).
    pub fn diff_log_bytes(&self) -> u64 {
        self.shared().log.active_len()
    }

    /// Why the last background merge failed, if it did: its changes stay
    /// readable and durable in the differential file, and the next merge
    /// (a write's, or [`merge`](DiffStorage::merge)) tries again.
    pub fn merge_error(&self) -> Option<String> {
        self.shared().failed.lock().clone()
    }
}

impl Handle {
    /// Waits for the background merge, if one runs.
    fn join_merge(&self) {
        if let Some(h) = self.merger.lock().take() {
            let _ = h.join();
        }
    }

    /// Starts a background merge of what [`DiffLog::freeze`] gives, unless
    /// one runs (then, if `wait`, waits for it first and starts the next).
    /// With `wait`, a merge that failed is not started again: its error is
    /// returned (the log is full, and what it holds could not be merged).
    fn kick(&self, wait: bool) -> Result<(), StoreError> {
        let mut slot = self.merger.lock();
        if let Some(h) = slot.take() {
            if h.is_finished() || wait {
                let _ = h.join();
            } else {
                *slot = Some(h);
                return Ok(());
            }
        }
        if wait {
            if let Some(e) = self.shared.failed.lock().clone() {
                return Err(StoreError::storage(
                    "writing the guard's differential file (nothing was written: its log is at \
                     its size limit and its merge into the base failed; merge() retries it)",
                    e,
                ));
            }
        }
        let frozen = self.shared.log.freeze()?;
        if frozen.is_empty() {
            return Ok(());
        }
        let shared = self.shared.clone();
        let spawned = std::thread::Builder::new()
            .name("filterstore-guard-merge".into())
            .spawn(move || {
                let outcome = shared.merge_frozen(&frozen);
                *shared.failed.lock() = outcome.err().map(|e| e.to_string());
            })
            .map_err(|source| StoreError::Io {
                op: "starting the guard's merge thread",
                source,
            })?;
        *slot = Some(spawned);
        Ok(())
    }
}

impl Shared {
    /// The log's bytes past which a write starts a merge, and at which it
    /// waits for one: [`MERGE_AT`] and [`WAIT_AT`].
    #[cfg(not(test))]
    fn limits(&self) -> (u64, u64) {
        (MERGE_AT, WAIT_AT)
    }

    #[cfg(test)]
    fn limits(&self) -> (u64, u64) {
        *self.limits.lock()
    }

    fn flush(&self) -> Result<(), SledDiffError> {
        self.store.flush_storage().map_err(SledDiffError::Store)
    }

    /// Moves `frozen`'s changes into the base (groups of [`GUARD_GROUP`],
    /// then sled flushed), then deletes its logs ([`DiffLog::finish`]).
    /// Returns the keys merged.
    fn merge_frozen(&self, frozen: &Arc<Frozen>) -> Result<u64, SledDiffError> {
        let _one = self.merging.lock();
        #[cfg(test)]
        tests::injected_merge_failure(&self.name)?;
        let changes: Vec<(&[u8], ChangeRef<'_>)> = frozen.changes().collect();
        for group in changes.chunks(GUARD_GROUP) {
            let mut batch = engine::Batch::default();
            for (key, change) in group {
                match change {
                    ChangeRef::Put(v) => batch.insert(*key, *v),
                    ChangeRef::Delete => batch.remove(*key),
                }
            }
            self.base
                .apply_batch(batch)
                .map_err(sled_err("merging the differential file into the base"))?;
        }
        self.flush()?;
        self.log.finish(frozen)?;
        Ok(changes.len() as u64)
    }
}

fn sled_err(op: &'static str) -> impl Fn(sled::Error) -> SledDiffError {
    move |e| SledDiffError::Store(StoreError::sled(op, e))
}

fn decode_change(v: &[u8]) -> Result<Change, SledDiffError> {
    match v.split_first() {
        Some((1, rest)) => Ok(Change::Put(rest.to_vec())),
        Some((0, [])) => Ok(Change::Delete),
        other => Err(SledDiffError::BadRecord(other.map(|(t, _)| *t))),
    }
}

/// Moves every change a store of format 6 or older left in the sled tree
/// `diff` into `base`, a group of [`GUARD_GROUP`] / 2 at a time (each group
/// one transaction: its base writes and its removal from `diff`). A crash
/// leaves each change either still in `diff` or in the base, never lost;
/// the next open goes on.
fn drain_legacy(base: &engine::Tree, diff: &engine::Tree) -> Result<u64, SledDiffError> {
    use sled::transaction::ConflictableTransactionError;
    let mut n = 0u64;
    loop {
        let changes: Vec<(engine::IVec, engine::IVec)> = diff
            .iter()
            .take(GUARD_GROUP / 2)
            .collect::<Result<_, _>>()
            .map_err(sled_err("reading the format-6 differential file"))?;
        if changes.is_empty() {
            break;
        }
        n += changes.len() as u64;
        let keys = changes.iter().map(|(k, _)| k.clone()).collect();
        base.transaction2(diff, keys, move |base, diff| {
            for (key, value) in &changes {
                match decode_change(value) {
                    Ok(Change::Put(v)) => {
                        base.insert(key, v)?;
                    }
                    Ok(Change::Delete) => {
                        base.remove(key)?;
                    }
                    Err(e) => return Err(ConflictableTransactionError::Abort(e)),
                }
                diff.remove(key)?;
            }
            Ok(())
        })
        .map_err(sled_err("merging the format-6 differential file"))??;
    }
    Ok(n)
}

impl DiffStorage for SledDiffStorage {
    type Error = SledDiffError;
    type Value = GuardValue;

    /// The base's record, in the engine's own buffer (not copied).
    fn read_base(&self, key: &[u8]) -> Result<Option<GuardValue>, SledDiffError> {
        Ok(self
            .shared()
            .base
            .get(key)
            .map_err(sled_err("reading the base"))?
            .map(|v| GuardValue(Repr::Engine(v))))
    }

    fn read_diff(&self, key: &[u8]) -> Result<Option<Change>, SledDiffError> {
        Ok(self.shared().log.get(key))
    }

    /// Appends `changes` to the differential file as one record, durable
    /// when this returns (the type's docs), after every change is checked
    /// against the size limits; may start a background merge, or wait for
    /// one when the log is at [`WAIT_AT`] bytes.
    fn write_diff(&self, changes: &[(Vec<u8>, Change)]) -> Result<(), SledDiffError> {
        self.write_diff_with(changes, Durability::Durable)
    }

    /// [`write_diff`](DiffStorage::write_diff) at `durability`: `Durable`
    /// and `ProcessCrashSafe` both append a synced record (a record written
    /// unsynced could be torn by a power cut behind a later synced one,
    /// which recovery must read as damage); `Buffered` makes the changes
    /// readable at once and holds them in memory, in order, until the next
    /// durable write, [`flush_diff`](DiffStorage::flush_diff), merge (in the
    /// background too) or the drop of the storage (its last handle) writes
    /// them as one synced record, or a buffer
    /// of [`GUARD_PENDING_LIMIT`](crate::GUARD_PENDING_LIMIT) bytes is full (the next buffered write
    /// writes it first). A crash loses the buffered changes, never part of
    /// one.
    fn write_diff_with(
        &self,
        changes: &[(Vec<u8>, Change)],
        durability: Durability,
    ) -> Result<(), SledDiffError> {
        for (key, change) in changes {
            let len = match change {
                Change::Put(v) => v.len(),
                Change::Delete => 0,
            };
            check_size(key, len)?;
        }
        if changes.is_empty() {
            return Ok(());
        }
        let log = &self.shared().log;
        let (merge_at, wait_at) = self.shared().limits();
        if log.active_len() >= wait_at {
            self.handle.kick(true)?;
        }
        let len = match durability {
            Durability::Buffered => log.append_buffered(changes)?,
            _ => log.append(changes)?,
        };
        if len >= merge_at {
            self.handle.kick(false)?;
        }
        Ok(())
    }

    /// Writes the buffered changes into the differential file as one
    /// record and syncs it (nothing to do without any).
    fn flush_diff(&self) -> Result<(), SledDiffError> {
        self.shared().log.flush()
    }

    /// Moves every change into the base on the caller's thread (after a
    /// background merge running ends), durable when this returns; returns
    /// the keys merged. Changes written meanwhile by another thread may
    /// stay in the differential file (the guard serialises its writers
    /// with its merges).
    fn merge(&self) -> Result<u64, SledDiffError> {
        self.handle.join_merge();
        let mut n = 0;
        // What a failed or cut merge left frozen, then the active part.
        for _ in 0..2 {
            let frozen = self.shared().log.freeze()?;
            if frozen.is_empty() {
                break;
            }
            n += self.shared().merge_frozen(&frozen)?;
        }
        *self.shared().failed.lock() = None;
        Ok(n)
    }

    fn read_base_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<GuardValue>>, SledDiffError> {
        let keys = keys.iter().map(|k| engine::IVec::from(*k)).collect();
        Ok(self
            .shared()
            .base
            .get_many(keys)
            .map_err(sled_err("reading the base"))?
            .into_iter()
            .map(|v| v.map(|v| GuardValue(Repr::Engine(v))))
            .collect())
    }

    fn read_diff_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Change>>, SledDiffError> {
        Ok(self.shared().log.get_many(keys))
    }

    fn diff_is_empty(&self) -> Result<bool, SledDiffError> {
        Ok(self.shared().log.is_empty())
    }

    fn diff_keys(&self) -> Result<Option<Vec<Vec<u8>>>, SledDiffError> {
        Ok(Some(self.shared().log.keys()))
    }
}

#[cfg(test)]
#[path = "sled_storage_tests.rs"]
mod tests;
