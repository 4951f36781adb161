//! A guard for the differential-file pattern (Severance & Lohman, 1976; the
//! survey's §3.2 cites Gremillion's "Designing a Bloom filter for
//! differential file access"): changed records go to a small differential
//! file, the large base stays read-mostly, and a Bloom filter of the changed
//! keys says which reads can skip the differential file.
//!
//! * **Read**: the filter answers "absent" → the key has no change: read the
//!   base only. "Maybe" → read the differential file; if it holds no change
//!   for the key (a false positive, reported to the drift monitor through
//!   [`Table::report_lookup`]), read the base.
//! * **Write**: the key's filter insert is made durable *before* the change
//!   is committed to the differential file (GUIDE §4: a crash can then only
//!   leave a key in the filter without a change — a false positive — never a
//!   change the filter does not know about, which would make reads return
//!   stale base records).
//! * **Merge**: the host applies the differential file to the base and
//!   empties it (atomically and durably, its side of the contract), *then* the
//!   guard clears the filter with one atomic generation swap
//!   ([`Table::clear`]). A crash between the two leaves an empty differential
//!   file and a full filter: reads are still correct (false positives only),
//!   and [`Guard::open`] finishes the job by clearing the filter when it finds
//!   the differential file empty.
//!
//! A merge waits for the writes in flight and holds new ones back; writers
//! take turns only for their filter inserts, then commit their changes to
//! the differential file side by side (a storage may group their syncs, as
//! [`SledDiffStorage`] does); readers never wait.
//!
//! # When it pays
//! The guard saves a differential-file read for every key without a change,
//! and costs a filter lookup on every read (plus a durable filter insert per
//! newly changed key). It pays when a differential-file read costs more than
//! a filter lookup: with the differential file in sled (store format 6),
//! `cargo bench --bench diffguard` ran guarded reads 1.69× as fast as
//! unguarded ones, as fast as an exact in-memory set of the changed keys
//! (docs/BENCHMARKS.md gives the machine, the load and the other runs).
//! Since format 7 `SledDiffStorage` reads its differential file from an
//! in-memory index, the case below where the guard can only add its lookup;
//! that figure was not measured again. Over a differential file whose
//! read costs no more than the lookup, such as an in-memory hash map, the
//! guard can only add the lookup.
//!
//! A key whose change is rewritten is not inserted into the filter again when
//! the filter already answers "maybe" for it: the bits that answer are
//! durable (every guard write is), so a hot key cannot drive its counters to
//! saturation.

use crate::store::{Durability, StoreError, Table, WriteBatch};
use parking_lot::{Mutex, RwLock};
use std::sync::atomic::{AtomicU64, Ordering};
use thiserror::Error;

mod diff_index;
mod diff_log;
mod diff_pending;
mod sled_error;
mod sled_storage;
mod storage;
mod value;
pub use sled_error::{
    SledDiffError, GUARD_GROUP, GUARD_PENDING_LIMIT, MAX_GUARD_KEY, MAX_GUARD_VALUE,
};
pub use sled_storage::{SledDiffStorage, MERGE_AT, WAIT_AT};
pub use storage::{Change, DiffStorage};
pub use value::GuardValue;

/// Errors of guarded operations.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum GuardError<E: std::error::Error + 'static> {
    /// The filter store failed; nothing was committed to the differential file.
    #[error("filter store: {0}")]
    Store(#[from] StoreError),
    /// The host's storage failed.
    #[error("storage: {0}")]
    Storage(#[source] E),
}

/// Counters of what the guard did (since it was opened).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GuardStats {
    /// Reads served.
    pub reads: u64,
    /// Reads that went to the differential file ("maybe").
    pub diff_reads: u64,
    /// Reads whose differential-file read was skipped ("absent").
    pub diff_reads_avoided: u64,
    /// Differential-file reads that found no change (false positives).
    pub false_positives: u64,
}

/// A differential-file guard over a host's storage and a filterstore table.
///
/// # Examples
/// ```
/// use filterstore::{Change, FilterStore, Guard, SledDiffStorage, TableSpec};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let store = FilterStore::open(dir.path())?;
/// let storage = SledDiffStorage::open(&store, "accounts")?;
/// storage.load_base((0..1_000u32).map(|i| (i.to_le_bytes(), *b"100")))?;
/// let table = store.open_or_create_table("accounts-changed", TableSpec::new(100, 0.01))?;
/// let guard = Guard::open(storage, table)?;
/// let changes: Vec<(Vec<u8>, Change)> = (0..1_000u32)
///     .step_by(10)
///     .map(|i| (i.to_le_bytes().to_vec(), Change::Put(b"250".to_vec())))
///     .collect();
/// guard.write(&changes)?; // filter inserts durable first, then the changes
/// for i in 0..1_000u32 {
///     let want: &[u8] = if i % 10 == 0 { b"250" } else { b"100" };
///     assert_eq!(guard.read(&i.to_le_bytes())?.as_deref(), Some(want));
/// }
/// let s = guard.stats();
/// assert_eq!(s.reads, 1_000);
/// // 900 reads had no change; the filter skipped all but its false positives.
/// assert_eq!(s.diff_reads_avoided + s.false_positives, 900);
/// assert!(s.false_positives < 45, "{}", s.false_positives);
/// # Ok(()) }
/// ```
pub struct Guard<S: DiffStorage> {
    storage: S,
    table: Table,
    /// Shared by writes in flight, taken alone by a merge.
    writers: RwLock<()>,
    /// Writers' filter inserts, one writer at a time: a key a writer finds
    /// in the filter was put there by an insert already durable.
    filter_inserts: Mutex<()>,
    counters: Box<[Counters; COUNTER_SLOTS]>,
}

impl<S: DiffStorage> Drop for Guard<S> {
    /// Reports the reads not reported yet to the table's drift monitor.
    fn drop(&mut self) {
        for c in self.counters.iter() {
            self.report(c, 1);
        }
    }
}

/// Slots of a guard's counters.
const COUNTER_SLOTS: usize = 16;

/// A guard's counters for the threads of one slot, alone on a cache line:
/// two threads reading through one guard count in their own slots instead
/// of passing one line back and forth on every read.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Counters {
    /// Reads are `diff_reads + avoided`: every read takes one of the two
    /// ways, counted before its storage read (one counter less to bump per
    /// read).
    diff_reads: AtomicU64,
    avoided: AtomicU64,
    false_positives: AtomicU64,
    /// Of `avoided + false_positives` (reads of keys without a change) and
    /// of `false_positives`, how many were reported to the table's drift
    /// monitor ([`Guard::report`]).
    reported_trials: AtomicU64,
    reported_false_positives: AtomicU64,
}

/// Reads of keys without a change that a slot gathers before it reports
/// them to the table's drift monitor in one go: the monitor's counters are
/// the table's, shared by every reading thread, and counting each read
/// there passed their cache line between the threads on every read (the
/// bench's two reading threads: `Guard::read` 0.81-0.84x raw sled gets with
/// a report per read, 0.86-0.87x without).
const REPORT_EVERY: u64 = 64;

/// The counter slot of the calling thread (threads take slots in turn).
fn counter_slot() -> usize {
    use std::cell::Cell;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    SLOT.with(|s| {
        if s.get() == usize::MAX {
            s.set(NEXT.fetch_add(1, Ordering::Relaxed) as usize % COUNTER_SLOTS);
        }
        s.get()
    })
}

impl<S: DiffStorage> Guard<S> {
    /// A guard over `storage` whose changed keys are tracked in `table`.
    /// Completes an interrupted merge: if the differential file is empty but
    /// the filter still holds keys, the filter is cleared.
    ///
    /// Where the storage lists its changed keys ([`DiffStorage::diff_keys`]),
    /// every one the filter lacks is inserted (durably) before the guard
    /// answers a read.
    pub fn open(storage: S, table: Table) -> Result<Self, GuardError<S::Error>> {
        if storage.diff_is_empty().map_err(GuardError::Storage)? {
            if table.live_keys() > 0 {
                table.clear()?;
            }
        } else if let Some(keys) = storage.diff_keys().map_err(GuardError::Storage)? {
            let mut batch = WriteBatch::new();
            for key in keys.iter().filter(|k| !table.contains(k)) {
                batch.insert(key);
            }
            if !batch.is_empty() {
                table.apply(&batch, Durability::Durable)?;
            }
        }
        Ok(Guard {
            storage,
            table,
            writers: RwLock::new(()),
            filter_inserts: Mutex::new(()),
            counters: Box::default(),
        })
    }

    /// Reads the current value of `key`: its change if the differential file
    /// has one, else the base record.
    ///
    /// A read of a key without a change is reported to the table's drift
    /// monitor ([`Table::report_lookup`]: a "maybe" the differential file
    /// did not confirm is a false positive), in groups of 64 per thread
    /// slot; [`stats`](Guard::stats) and dropping the guard report the rest.
    pub fn read(&self, key: &[u8]) -> Result<Option<S::Value>, GuardError<S::Error>> {
        let c = self.counters();
        if self.table.contains(key) {
            c.diff_reads.fetch_add(1, Ordering::Relaxed);
            match self.storage.read_diff(key).map_err(GuardError::Storage)? {
                Some(Change::Put(v)) => return Ok(Some(v.into())),
                Some(Change::Delete) => return Ok(None),
                None => {
                    c.false_positives.fetch_add(1, Ordering::Relaxed);
                }
            }
        } else {
            c.avoided.fetch_add(1, Ordering::Relaxed);
        }
        self.report(c, REPORT_EVERY);
        self.storage.read_base(key).map_err(GuardError::Storage)
    }

    /// Reports to the table's drift monitor the reads of keys without a
    /// change that slot `c` counted and did not report yet, if there are at
    /// least `at_least` (and at least one). Two threads of one slot may
    /// race: the one whose compare-exchange moves the reported count on
    /// reports those trials, and the false positives each takes from the
    /// swap add up to all of them.
    fn report(&self, c: &Counters, at_least: u64) {
        let trials = c.avoided.load(Ordering::Relaxed) + c.false_positives.load(Ordering::Relaxed);
        let done = c.reported_trials.load(Ordering::Relaxed);
        let new = trials.saturating_sub(done);
        if new == 0 || new < at_least {
            return;
        }
        if c.reported_trials
            .compare_exchange(done, trials, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            let fp = c.false_positives.load(Ordering::Relaxed);
            let fp_new = fp.saturating_sub(c.reported_false_positives.swap(fp, Ordering::Relaxed));
            self.table.report_absent_many(fp_new.min(new), new);
        }
    }

    /// Reads the current values of `keys` in one trip per storage: the
    /// filter answers for all of them at once ([`Table::contains_many`]),
    /// the "maybe" keys are read from the differential file together, and
    /// the keys without a change from the base together. The answers are
    /// those of [`read`](Guard::read) for each key, in order, and the
    /// statistics count them the same way.
    ///
    /// # Examples
    /// ```
    /// use filterstore::{Change, FilterStore, Guard, SledDiffStorage, TableSpec};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = tempfile::tempdir()?;
    /// let store = FilterStore::open(dir.path())?;
    /// let storage = SledDiffStorage::open(&store, "accounts")?;
    /// storage.load_base([(b"alice".to_vec(), b"10".to_vec()), (b"bob".to_vec(), b"20".to_vec())])?;
    /// let table = store.open_or_create_table("accounts-changed", TableSpec::new(1_000, 0.01))?;
    /// let guard = Guard::open(storage, table)?;
    /// guard.write(&[(b"bob".to_vec(), Change::Put(b"25".to_vec()))])?;
    /// let got = guard.read_many(&[&b"alice"[..], b"bob", b"carol"])?;
    /// let got: Vec<Option<&[u8]>> = got.iter().map(|v| v.as_deref()).collect();
    /// assert_eq!(got, [Some(&b"10"[..]), Some(&b"25"[..]), None]);
    /// assert_eq!(guard.stats().reads, 3);
    /// # Ok(()) }
    /// ```
    pub fn read_many<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
    ) -> Result<Vec<Option<S::Value>>, GuardError<S::Error>> {
        let c = self.counters();
        let maybe = self.table.contains_many(keys);
        let mut out: Vec<Option<Option<S::Value>>> =
            std::iter::repeat_with(|| None).take(keys.len()).collect();
        let asked: Vec<usize> = (0..keys.len()).filter(|&i| maybe[i]).collect();
        let diff_keys: Vec<&[u8]> = asked.iter().map(|&i| keys[i].as_ref()).collect();
        let avoided = keys.len() - asked.len();
        c.diff_reads
            .fetch_add(asked.len() as u64, Ordering::Relaxed);
        c.avoided.fetch_add(avoided as u64, Ordering::Relaxed);
        let changes = self
            .storage
            .read_diff_many(&diff_keys)
            .map_err(GuardError::Storage)?;
        for (&i, change) in asked.iter().zip(changes) {
            match change {
                Some(Change::Put(v)) => out[i] = Some(Some(v.into())),
                Some(Change::Delete) => out[i] = Some(None),
                None => {
                    c.false_positives.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        self.report(c, REPORT_EVERY);
        let base: Vec<usize> = (0..keys.len()).filter(|&i| out[i].is_none()).collect();
        let base_keys: Vec<&[u8]> = base.iter().map(|&i| keys[i].as_ref()).collect();
        let values = self
            .storage
            .read_base_many(&base_keys)
            .map_err(GuardError::Storage)?;
        for (&i, v) in base.iter().zip(values) {
            out[i] = Some(v);
        }
        Ok(out.into_iter().map(Option::flatten).collect())
    }

    /// Records changes: filter inserts made durable first, then the changes
    /// committed to the differential file. Writes from several threads
    /// take turns for their filter inserts only: their differential-file
    /// commits run side by side (a key found in the filter was put there by
    /// an insert that was durable before the turn passed on, so no commit
    /// is ever readable before its key's filter bits are durable).
    pub fn write(&self, changes: &[(Vec<u8>, Change)]) -> Result<(), GuardError<S::Error>> {
        self.write_with(changes, Durability::Durable)
    }

    /// [`write`](Guard::write), the changes committed at `durability`
    /// ([`DiffStorage::write_diff_with`]: with [`SledDiffStorage`], a
    /// [`Durability::Buffered`] change is readable at once and durable at
    /// the next durable write or [`flush`](Guard::flush), and a crash before
    /// that loses it; the other levels are durable when this returns). The
    /// filter inserts are durable whatever the level: a change that
    /// survives a crash is never hidden by a filter that lost its key, and
    /// a lost buffered change leaves only a false positive.
    pub fn write_with(
        &self,
        changes: &[(Vec<u8>, Change)],
        durability: Durability,
    ) -> Result<(), GuardError<S::Error>> {
        let _w = self.writers.read();
        {
            let _turn = self.filter_inserts.lock();
            let mut batch = WriteBatch::new();
            for (key, _) in changes {
                if !self.table.contains(key) {
                    batch.insert(key);
                }
            }
            if !batch.is_empty() {
                self.table.apply(&batch, Durability::Durable)?;
            }
        }
        self.storage
            .write_diff_with(changes, durability)
            .map_err(GuardError::Storage)
    }

    /// Makes every change written so far durable
    /// ([`DiffStorage::flush_diff`]: the buffered ones).
    pub fn flush(&self) -> Result<(), GuardError<S::Error>> {
        self.storage.flush_diff().map_err(GuardError::Storage)
    }

    /// Merges the differential file into the base, then clears the filter.
    /// Returns the number of changes merged.
    pub fn merge(&self) -> Result<u64, GuardError<S::Error>> {
        let _w = self.writers.write();
        let n = self.storage.merge().map_err(GuardError::Storage)?;
        self.table.clear()?;
        Ok(n)
    }

    /// What the guard did since it was opened. Reports to the table's
    /// drift monitor every read it has not reported yet ([`read`](Guard::read)).
    pub fn stats(&self) -> GuardStats {
        for c in self.counters.iter() {
            self.report(c, 1);
        }
        let sum = |f: fn(&Counters) -> &AtomicU64| {
            self.counters
                .iter()
                .map(|c| f(c).load(Ordering::Relaxed))
                .sum()
        };
        GuardStats {
            reads: sum(|c| &c.diff_reads) + sum(|c| &c.avoided),
            diff_reads: sum(|c| &c.diff_reads),
            diff_reads_avoided: sum(|c| &c.avoided),
            false_positives: sum(|c| &c.false_positives),
        }
    }

    /// The calling thread's counters.
    fn counters(&self) -> &Counters {
        &self.counters[counter_slot()]
    }

    /// The table holding the changed keys.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// The host's storage.
    pub fn storage(&self) -> &S {
        &self.storage
    }
}
