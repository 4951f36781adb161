//! The public handle of a table ([`Table`]: its lookups, writes and
//! statistics) and its statistics ([`TableStats`]); the shared state every
//! handle reaches is [`TableInner`].

use super::bloom::TableBloom;
use super::generation::Generation;
use super::inner::TableInner;
use crate::filter::bloom::BloomRead;
use crate::filter::counting::{counter_bytes, CountingFilter};
use crate::filter::hash::HashAlgo;
use crate::filter::params::{FilterParams, Layout};
use crate::store::batch::{Durability, WriteBatch};
use crate::store::catalog::TableMeta;
use crate::store::disk::log::LogOp;
use crate::store::error::StoreError;
use serde::Serialize;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Serializes [`TableStats`]' enums by name, as the CLI's JSON always had.
mod by_name {
    use super::{HashAlgo, Layout};
    use serde::Serializer;

    pub(super) fn layout<S: Serializer>(l: &Layout, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(l.name())
    }

    pub(super) fn hash<S: Serializer>(h: &HashAlgo, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(h.name())
    }
}

/// Statistics of one table ([`Table::stats`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TableStats {
    /// Table name.
    pub name: String,
    /// The layout (serialized as its [name](Layout::name)).
    #[serde(serialize_with = "by_name::layout")]
    pub layout: Layout,
    /// Bits (and counters).
    pub m_bits: u64,
    /// Hash functions.
    pub k: u32,
    /// The hash algorithm (serialized as its [name](HashAlgo::name)).
    #[serde(serialize_with = "by_name::hash")]
    pub hash: HashAlgo,
    /// Hash seed.
    pub seed: u64,
    /// Inserts minus removes (never negative).
    pub live_keys: u64,
    /// Keys the table was sized for.
    pub expected_keys: u64,
    /// False-positive rate the table was sized for.
    pub target_fp: f64,
    /// False-positive rate implied by the bits set now.
    pub estimated_fp: f64,
    /// Fraction of bits set.
    pub fill_ratio: f64,
    /// Counters stuck at 15 (each can only cause false positives).
    pub saturated_counters: u64,
    /// Generation of the table's data.
    pub generation: u64,
    /// Store format version of the store's files ([`STORE_FORMAT_VERSION`](crate::STORE_FORMAT_VERSION),
    /// or an older one a read-only open reads as it is).
    pub format_version: u32,
    /// Bytes of the in-memory bit filter.
    pub bit_bytes: u64,
    /// Bytes of the on-disk counting filter.
    pub counter_bytes: u64,
}

/// A handle to one table. Cheap to clone; `Send + Sync`: share it between
/// threads. Lookups read only the in-memory bit filter (no lock, no I/O);
/// writes to one table are serialised by a lock that lookups never take.
///
/// Ordering rule for the host database (see the [durability
/// contract](crate#durability-contract)): make a key's insert durable
/// ([`flush`](Table::flush), or [`Durability::Durable`]) **before** committing
/// the record it protects, and commit a record's deletion **before** calling
/// [`remove`](Table::remove). Then a crash leaves only false positives.
///
/// # Where its methods live
/// One `impl Table` per concern, each beside the code it drives:
/// * `store/table/handle.rs`: identity and parameters, lookups
///   ([`contains`](Table::contains)), writes ([`insert`](Table::insert),
///   [`remove`](Table::remove), [`apply`](Table::apply),
///   [`bulk_load`](Table::bulk_load)), [`flush`](Table::flush),
///   [`fold`](Table::fold), [`stats`](Table::stats),
///   [`counting_snapshot`](Table::counting_snapshot), [`bloom`](Table::bloom);
/// * `store/table/reader.rs`: [`reader`](Table::reader);
/// * `store/import/mod.rs`: [`export`](Table::export),
///   [`export_to`](Table::export_to);
/// * `store/regen/mod.rs`: [`regenerate`](Table::regenerate),
///   [`clear`](Table::clear); `store/regen/relayout.rs`:
///   [`change_layout`](Table::change_layout); `store/regen/swap.rs`: the
///   commit and swap they share (crate-internal);
/// * `store/regen/health.rs`: [`health`](Table::health),
///   [`health_with`](Table::health_with),
///   [`needs_regeneration`](Table::needs_regeneration),
///   [`report_lookup`](Table::report_lookup),
///   [`observed_fp`](Table::observed_fp), [`set_params`](Table::set_params).
///
/// The state every handle of a table shares is `TableInner`
/// (`store/table/inner.rs`); a generation's write path is `Generation`'s
/// (`store/table/generation.rs`, `writer.rs`, `bulk.rs`).
#[derive(Clone)]
pub struct Table {
    pub(crate) inner: Arc<TableInner>,
    pub(crate) name: Arc<str>,
}

impl Table {
    pub(crate) fn new(inner: Arc<TableInner>) -> Table {
        let name = Arc::from(inner.meta.lock().name.as_str());
        Table { inner, name }
    }
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("name", &self.name)
            .field("params", &self.params())
            .finish()
    }
}

impl Table {
    /// The generation in force (a lock-free pointer load).
    #[inline]
    pub(crate) fn current(&self) -> arc_swap::Guard<Arc<Generation>> {
        self.inner.gen.load()
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The filter's parameters (layout, m, k, hash and seed) of the
    /// generation in force.
    pub fn params(&self) -> FilterParams {
        self.current().params
    }

    /// The table's catalog record in force.
    pub(crate) fn meta(&self) -> TableMeta {
        self.inner.meta.lock().clone()
    }

    /// The generation in force (1 when created; each regeneration adds one).
    pub fn generation(&self) -> u64 {
        self.current().meta.generation
    }

    /// The number of keys the table is sized for: as created, as last set by
    /// [`set_params`](Table::set_params), or as a regeneration sized it.
    pub fn expected_keys(&self) -> u64 {
        self.inner.meta.lock().expected_keys
    }

    /// The false-positive rate the table is sized for (or was set to by
    /// [`set_params`](Table::set_params)).
    pub fn target_fp(&self) -> f64 {
        self.inner.meta.lock().target_fp
    }

    /// The live bit filter of the generation in force, read-only: every
    /// [`BloomRead`] query and estimator without a lock or I/O. The handle
    /// keeps that generation's filter (see [`TableBloom`]).
    pub fn bloom(&self) -> TableBloom {
        TableBloom(self.inner.gen.load_full())
    }

    /// Whether `key` may be in the table; `false` means definitely absent.
    /// Reads only memory: no lock, no I/O.
    ///
    /// # Examples
    /// ```
    /// use filterstore::{Durability, FilterStore, TableSpec, WriteBatch};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = tempfile::tempdir()?;
    /// let store = FilterStore::open(dir.path())?;
    /// let t = store.create_table("t", TableSpec::new(10_000, 0.01))?;
    /// for i in 0..1_000u32 {
    ///     t.insert(&i.to_le_bytes())?;
    /// }
    /// // No false negative, and about 1% false positives among absent keys.
    /// assert!((0..1_000u32).all(|i| t.contains(&i.to_le_bytes())));
    /// let fp = (1_000..101_000u32).filter(|i| t.contains(&i.to_le_bytes())).count();
    /// assert!(fp < 1_000, "{fp} false positives in 100,000"); // sized for 10,000 keys
    /// # Ok(()) }
    /// ```
    ///
    /// Each call protects the generation it reads with two atomic
    /// read-modify-writes; a thread that looks up many keys one at a time
    /// does better with a [`Table::reader`].
    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        self.current().bits.contains(key)
    }

    /// Batched [`contains`](Table::contains): overlaps the memory accesses of
    /// up to 16 keys.
    pub fn contains_many<K: AsRef<[u8]>>(&self, keys: &[K]) -> Vec<bool> {
        self.current().bits.contains_many(keys)
    }

    /// Inserts `key`: visible to lookups when this returns, durable after the
    /// next [`flush`](Table::flush).
    ///
    /// # Examples
    /// ```
    /// use filterstore::{Durability, FilterStore, TableSpec, WriteBatch};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = tempfile::tempdir()?;
    /// let store = FilterStore::open(dir.path())?;
    /// let t = store.create_table("t", TableSpec::new(10_000, 0.01))?;
    /// t.insert(b"k1")?;
    /// t.insert(b"k1")?; // a multiset: two inserts need two removes
    /// assert!(t.contains(b"k1"));
    /// assert_eq!(t.live_keys(), 2);
    /// t.flush()?; // durable from here on
    /// # Ok(()) }
    /// ```
    pub fn insert(&self, key: &[u8]) -> Result<(), StoreError> {
        // Hashed for the generation the write lands in (a regeneration
        // keeps the hash; a layout change does not: `apply_ops`).
        let op = |p: &FilterParams| {
            [LogOp {
                insert: true,
                hash: p.hash().hash(key),
            }]
        };
        self.inner.apply_ops(op, Durability::Buffered)
    }

    /// Removes one occurrence of `key`, durable after the next
    /// [`flush`](Table::flush). Refused with [`StoreError::NotPresent`],
    /// changing nothing, if one of its counters is zero (it was never
    /// inserted). A host must remove only keys it inserted: a remove of a
    /// never-inserted key whose counters are all non-zero (a false positive)
    /// cannot be detected and would take counts from other keys.
    ///
    /// # Examples
    /// ```
    /// use filterstore::{Durability, FilterStore, TableSpec, WriteBatch};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = tempfile::tempdir()?;
    /// let store = FilterStore::open(dir.path())?;
    /// let t = store.create_table("t", TableSpec::new(10_000, 0.01))?;
    /// use filterstore::StoreError;
    /// t.insert(b"k1")?;
    /// t.remove(b"k1")?;
    /// assert!(!t.contains(b"k1"));
    /// assert_eq!(t.live_keys(), 0);
    /// // A key that was never inserted is refused, and nothing changes.
    /// assert!(matches!(
    ///     t.remove(b"never"),
    ///     Err(StoreError::NotPresent { index: None, .. })
    /// ));
    /// # Ok(()) }
    /// ```
    pub fn remove(&self, key: &[u8]) -> Result<(), StoreError> {
        let op = |p: &FilterParams| {
            [LogOp {
                insert: false,
                hash: p.hash().hash(key),
            }]
        };
        match self.inner.apply_ops(op, Durability::Buffered) {
            Err(StoreError::NotPresent { table, .. }) => {
                Err(StoreError::NotPresent { table, index: None })
            }
            other => other,
        }
    }

    /// Applies `batch` atomically: all of its operations, in order, or none
    /// (a refused remove refuses the batch). Visible when this returns;
    /// durable when it returns if `durability` is [`Durability::Durable`].
    ///
    /// An error means that nothing of the batch was applied (repeat it if
    /// you like), except [`StoreError::OutcomeUnknown`]: the batch is
    /// applied and logged but its sync failed, so it may or may not survive
    /// a crash; do not commit what its inserts protect, and never repeat its
    /// removes (see [`StoreError`], "What an error of a write means").
    ///
    /// # Examples
    /// ```
    /// use filterstore::{Durability, FilterStore, TableSpec, WriteBatch};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = tempfile::tempdir()?;
    /// let store = FilterStore::open(dir.path())?;
    /// let t = store.create_table("t", TableSpec::new(10_000, 0.01))?;
    /// use filterstore::StoreError;
    /// let mut batch = WriteBatch::new();
    /// batch.insert(b"a").insert(b"b").insert(b"c");
    /// t.apply(&batch, Durability::Durable)?; // one log record, one flush
    /// assert_eq!(t.live_keys(), 3);
    /// // A batch with a bad remove is refused whole: "d" is not inserted.
    /// let mut bad = WriteBatch::new();
    /// bad.insert(b"d").remove(b"never");
    /// assert!(matches!(
    ///     t.apply(&bad, Durability::Buffered),
    ///     Err(StoreError::NotPresent { index: Some(1), .. })
    /// ));
    /// assert!(!t.contains(b"d"));
    /// assert_eq!(t.live_keys(), 3);
    /// # Ok(()) }
    /// ```
    pub fn apply(&self, batch: &WriteBatch, durability: Durability) -> Result<(), StoreError> {
        let ops = |p: &FilterParams| -> Vec<LogOp> {
            let spec = p.hash();
            batch
                .iter()
                .map(|(insert, key)| LogOp {
                    insert,
                    hash: spec.hash(key),
                })
                .collect()
        };
        self.inner.apply_ops(ops, durability)
    }

    /// Inserts many keys at once, straight into the counter pages: folds the
    /// log, reads the counting filter once (`m/2` bytes), adds every key in
    /// memory and writes each touched 16 KiB page once. Returns how many keys
    /// it inserted. For loads of many keys (more than one per page of the
    /// table, `m / 32768`); for fewer, [`apply`](Table::apply) costs less.
    ///
    /// Every key is visible as soon as it is added and **durable when this
    /// returns**. Unlike a [`WriteBatch`], the load is **not atomic**: after a
    /// crash in the middle some of its keys may be present and others not —
    /// harmless under the host's rule 1 (records are committed only after
    /// the load returned), and never a lost key once it returned. While a
    /// regeneration runs, the keys take the ordinary write path instead.
    ///
    /// # Examples
    /// ```
    /// use filterstore::{FilterStore, TableSpec};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = tempfile::tempdir()?;
    /// let store = FilterStore::open(dir.path())?;
    /// let t = store.create_table("t", TableSpec::new(100_000, 0.01))?;
    /// let n = t.bulk_load((0..100_000u32).map(|i| i.to_le_bytes()))?;
    /// assert_eq!((n, t.live_keys()), (100_000, 100_000));
    /// assert!(t.contains(&7u32.to_le_bytes()));
    /// # Ok(()) }
    /// ```
    pub fn bulk_load<I>(&self, keys: I) -> Result<u64, StoreError>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        let mut keys = keys.into_iter();
        loop {
            let g = self.inner.gen.load_full();
            if let Some(n) = g.bulk_insert(&mut keys)? {
                self.inner.count_for_check(n);
                return Ok(n);
            }
            if !g.retired.load(Ordering::Acquire) {
                return self.load_by_batches(&mut keys);
            }
        }
    }

    /// [`bulk_load`](Table::bulk_load) through the write path.
    fn load_by_batches(
        &self,
        keys: &mut dyn Iterator<Item = impl AsRef<[u8]>>,
    ) -> Result<u64, StoreError> {
        const STEP: usize = 1 << 16;
        let mut batch = WriteBatch::new();
        let mut n = 0;
        loop {
            batch.clear();
            for k in keys.take(STEP) {
                batch.insert(k.as_ref());
            }
            if batch.is_empty() {
                break;
            }
            self.apply(&batch, Durability::Buffered)?;
            n += batch.len() as u64;
        }
        self.flush()?;
        Ok(n)
    }

    /// Makes every write applied so far to this table durable, against
    /// power loss too (one `fdatasync` of its log, shared with concurrent
    /// flushes and durable applies). `Ok` is never returned after a sync of
    /// the store failed ([`StoreError::Degraded`], or
    /// [`StoreError::OutcomeUnknown`] when this call's sync fails): the
    /// kernel may have dropped pages that a later sync would not write.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.inner.flush()
    }

    /// Inserts minus removes, never negative. No lock.
    pub fn live_keys(&self) -> u64 {
        self.current().live.load(Ordering::Relaxed).max(0) as u64
    }

    /// Logged operations not yet folded into the counter pages. No lock.
    pub fn pending_log_ops(&self) -> u64 {
        self.current().pending.load(Ordering::Relaxed)
    }

    /// Folds the log into the counter pages now (it is otherwise folded when
    /// it reaches [`StoreConfig::fold_threshold`](crate::StoreConfig::fold_threshold) operations). Does not flush.
    pub fn fold(&self) -> Result<(), StoreError> {
        let g = self.inner.gen.load_full();
        let mut w = g.writer.lock();
        g.check_live()?;
        g.fold(&mut w)
    }

    /// Statistics. Folds the log first, so that the count of saturated
    /// counters is exact; the estimates read the whole bit filter (`m/8` bytes).
    ///
    /// # Examples
    /// ```
    /// use filterstore::{FilterStore, HashAlgo, Layout, TableSpec};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = tempfile::tempdir()?;
    /// let store = FilterStore::open(dir.path())?;
    /// let t = store.create_table("t", TableSpec::new(10_000, 0.01))?;
    /// for i in 0..10_000u32 {
    ///     t.insert(&i.to_le_bytes())?;
    /// }
    /// let s = t.stats()?;
    /// assert_eq!((s.layout, s.hash), (Layout::Blocked, HashAlgo::Xxh3_128));
    /// assert_eq!((s.live_keys, s.expected_keys, s.generation), (10_000, 10_000, 1));
    /// assert_eq!(s.bit_bytes, s.m_bits / 8); // in memory
    /// assert_eq!(s.counter_bytes, s.m_bits / 2); // on disk, 4 bits per counter
    /// // Full to its capacity: the estimate is near the 1% target.
    /// assert!(s.estimated_fp > 0.005 && s.estimated_fp < 0.02, "{}", s.estimated_fp);
    /// assert_eq!(s.saturated_counters, 0);
    /// # Ok(()) }
    /// ```
    pub fn stats(&self) -> Result<TableStats, StoreError> {
        let g = self.inner.gen.load_full();
        let saturated = {
            let mut w = g.writer.lock();
            g.check_live()?;
            // A damaged generation is not folded: its log is evidence.
            if g.damaged.is_none() {
                g.fold_if_writable(&mut w)?;
            }
            w.saturated
        };
        let p = &g.params;
        let m = self.meta();
        let bits = &g.bits;
        Ok(TableStats {
            name: m.name.clone(),
            layout: p.layout(),
            m_bits: p.m(),
            k: p.k(),
            hash: p.hash().algo,
            seed: p.hash().seed,
            live_keys: g.live.load(Ordering::Relaxed).max(0) as u64,
            expected_keys: m.expected_keys,
            target_fp: m.target_fp,
            estimated_fp: bits.estimated_fp(),
            fill_ratio: bits.fill_ratio(),
            saturated_counters: saturated,
            generation: g.meta.generation,
            format_version: self.inner.shared.format(),
            bit_bytes: p.bit_bytes(),
            counter_bytes: counter_bytes(p) as u64,
        })
    }

    /// A copy of the table's counting filter (`m/2` bytes in memory, read from
    /// the counter pages after a fold): for export and for checks. The store
    /// itself never holds it.
    pub fn counting_snapshot(&self) -> Result<CountingFilter, StoreError> {
        let g = self.inner.gen.load_full();
        let (bytes, _memory) = {
            let mut w = g.writer.lock();
            g.check_live()?;
            g.fold_if_writable(&mut w)?;
            g.read_counters_with_log(&w, "a counting snapshot")?
        };
        let p = g.params;
        CountingFilter::from_bytes(p, bytes).map_err(|e| {
            StoreError::corrupt(
                format!("counters of table {:?}", g.meta.name),
                crate::error::CodecError::InvalidField {
                    field: "counters",
                    reason: e.to_string(),
                },
            )
        })
    }
}
