//! The catalog operations of a store: creating, opening, listing and
//! dropping tables, and flushing them all.

use super::budget;
use super::catalog::{validate_name, TableMeta};
use super::error::StoreError;
use super::open::FilterStore;
use super::regen;
use super::table::{Generation, Table, TableInner};
use crate::filter::hash::HashSpec;
use crate::filter::params::{FilterParams, Layout};
use std::collections::HashMap;
use std::sync::{Arc, Weak};

impl FilterStore {
    /// Creates a table sized by `spec`. Its catalog record is durable when
    /// this returns. Its bit filter is allocated (under the memory budget)
    /// and its files written before the record: a create that fails leaves
    /// no table, and nothing that the next open does not collect.
    ///
    /// # Examples
    /// ```
    /// use filterstore::{FilterStore, TableSpec};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = tempfile::tempdir()?;
    /// let store = FilterStore::open(dir.path())?;
    /// let t = store.create_table("orders", TableSpec::new(1_000_000, 0.01).seed(7))?;
    /// let p = t.params();
    /// // 9.6 bits per key at 1% (standard layout), a little more for the
    /// // blocked one (the default), in 512-bit blocks.
    /// let bits_per_key = p.m() as f64 / 1e6;
    /// assert!(bits_per_key > 9.5 && bits_per_key < 12.5, "{bits_per_key}");
    /// assert_eq!(p.m() % 512, 0);
    /// assert_eq!(p.hash().seed, 7);
    /// assert_eq!((t.generation(), t.expected_keys(), t.live_keys()), (1, 1_000_000, 0));
    /// assert!(store.create_table("orders", TableSpec::new(10, 0.01)).is_err()); // exists
    /// # Ok(()) }
    /// ```
    pub fn create_table(&self, name: &str, spec: TableSpec) -> Result<Table, StoreError> {
        validate_name(name)?;
        self.inner.shared.check_writable()?;
        let mut catalog = self.inner.shared.catalog.lock();
        self.create_locked(&mut catalog, name, spec)
    }

    /// [`create_table`](FilterStore::create_table) under the catalog lock,
    /// the name validated.
    fn create_locked(
        &self,
        catalog: &mut super::catalog::Catalog,
        name: &str,
        spec: TableSpec,
    ) -> Result<Table, StoreError> {
        let hash = match (spec.layout, spec.seed) {
            // XXH64 with the seed given, refused by `for_capacity` unless 0.
            (Layout::SplitBlock, seed) => HashSpec {
                seed: seed.unwrap_or(0),
                ..HashSpec::xxh64()
            },
            (_, Some(seed)) => HashSpec::xxh3(seed),
            (layout, None) => HashSpec::default_for(layout),
        };
        let params =
            FilterParams::for_capacity(spec.expected_keys, spec.target_fp, spec.layout, hash)?;
        if catalog.contains(name) {
            return Err(StoreError::TableExists(name.to_string()));
        }
        self.check_filter_memory(name, &params)?;
        let meta = TableMeta::new_table(
            catalog.header().next_table_id,
            name,
            &params,
            spec.expected_keys,
            spec.target_fp,
        );
        let (bits, memory) = budget::bit_filter(name, params)?;
        let gen = Generation::create(&self.inner.shared, meta.clone(), bits, memory)?;
        self.commit_new_table(catalog, gen)
    }

    /// Refuses a new table whose bit filter exceeds the configured limit for
    /// one table, before anything is allocated or written.
    pub(crate) fn check_filter_memory(
        &self,
        name: &str,
        params: &FilterParams,
    ) -> Result<(), StoreError> {
        match self.inner.config().filter_bytes_limit() {
            Some(limit) if params.bit_bytes() > limit => Err(StoreError::TooLarge {
                table: name.to_string(),
                bytes: params.bit_bytes(),
                limit,
            }),
            _ => Ok(()),
        }
    }

    /// Commits a new table's catalog record (the header's next id moved past
    /// it): its generation `gen`, files written and memory held, comes into
    /// force. On an error that changed nothing its files are deleted (or
    /// collected at the next open); on one whose outcome is unknown they are
    /// kept (the catalog on disk may name them) and the store stops writing.
    pub(crate) fn commit_new_table(
        &self,
        catalog: &mut super::catalog::Catalog,
        gen: Generation,
    ) -> Result<Table, StoreError> {
        let meta = gen.meta.clone();
        let committed = self.inner.shared.commit_catalog(catalog, |e| {
            let mut h = e.header();
            h.next_table_id = h.next_table_id.max(meta.id + 1);
            e.set_header(h);
            e.put(meta.clone());
        });
        if let Err(e) = committed {
            gen.mark_dropped();
            drop(gen);
            if !e.is_outcome_unknown() {
                super::disk::remove_files(&self.inner.shared.dir, meta.id, meta.generation);
            }
            return Err(e);
        }
        let inner = Arc::new(TableInner::new(
            &self.inner.shared,
            meta.clone(),
            gen,
            regen::run_hook,
        ));
        self.inner
            .tables
            .lock()
            .insert(meta.name.clone(), Arc::downgrade(&inner));
        Ok(Table::new(inner))
    }

    /// Loads a table's in-memory state and registers it as open.
    fn load_table(
        &self,
        tables: &mut HashMap<String, Weak<TableInner>>,
        meta: TableMeta,
    ) -> Result<Table, StoreError> {
        let name = meta.name.clone();
        let inner = Arc::new(TableInner::load(&self.inner.shared, meta, regen::run_hook)?);
        tables.insert(name, Arc::downgrade(&inner));
        Ok(Table::new(inner))
    }

    /// Opens an existing table. All handles of one table share one in-memory
    /// state; the first open derives its bit filter from disk.
    pub fn open_table(&self, name: &str) -> Result<Table, StoreError> {
        validate_name(name)?;
        let catalog = self.inner.shared.catalog.lock();
        let meta = catalog
            .get(name)?
            .ok_or_else(|| StoreError::NoSuchTable(name.to_string()))?;
        let mut tables = self.inner.tables.lock();
        if let Some(inner) = tables.get(name).and_then(Weak::upgrade) {
            return Ok(Table::new(inner));
        }
        self.load_table(&mut tables, meta)
    }

    /// The names of all tables, sorted.
    pub fn list_tables(&self) -> Result<Vec<String>, StoreError> {
        Ok(self
            .inner
            .shared
            .catalog
            .lock()
            .records()?
            .into_iter()
            .map(|m| m.name)
            .collect())
    }

    /// Opens table `name`, creating it sized by `spec` if it does not exist
    /// (one step, under the catalog lock: two threads calling this at once
    /// get the same table). An existing table keeps its own parameters;
    /// `spec` is then ignored.
    ///
    /// # Examples
    /// ```
    /// use filterstore::{FilterStore, TableSpec};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = tempfile::tempdir()?;
    /// let store = FilterStore::open(dir.path())?;
    /// let a = store.open_or_create_table("users", TableSpec::new(1_000, 0.01))?;
    /// a.insert(b"alice")?;
    /// // The second call opens the same table: the spec is ignored.
    /// let b = store.open_or_create_table("users", TableSpec::new(5, 0.5))?;
    /// assert_eq!(b.expected_keys(), 1_000);
    /// assert!(b.contains(b"alice"));
    /// assert_eq!(store.list_tables()?, ["users"]);
    /// # Ok(()) }
    /// ```
    pub fn open_or_create_table(&self, name: &str, spec: TableSpec) -> Result<Table, StoreError> {
        validate_name(name)?;
        let mut catalog = self.inner.shared.catalog.lock();
        match catalog.get(name)? {
            Some(meta) => {
                let mut tables = self.inner.tables.lock();
                if let Some(inner) = tables.get(name).and_then(Weak::upgrade) {
                    return Ok(Table::new(inner));
                }
                self.load_table(&mut tables, meta)
            }
            None => {
                self.inner.shared.check_writable()?;
                self.create_locked(&mut catalog, name, spec)
            }
        }
    }

    /// Drops a table and all of its data. Handles still open afterwards answer
    /// lookups from their last state and refuse writes with
    /// [`StoreError::TableDropped`]. Durable when this returns.
    pub fn drop_table(&self, name: &str) -> Result<(), StoreError> {
        validate_name(name)?;
        self.inner.shared.check_writable()?;
        let mut catalog = self.inner.shared.catalog.lock();
        // A table whose catalog record is damaged can still be dropped: its
        // files, which the record no longer tells, are collected at the next
        // open.
        let meta = match catalog.get(name) {
            Ok(Some(meta)) => Some(meta),
            Ok(None) => return Err(StoreError::NoSuchTable(name.to_string())),
            Err(StoreError::Corrupt { .. }) => None,
            Err(e) => return Err(e),
        };
        // The catalog write is the commit point: once it is durable the
        // table is gone, and its files are garbage even if a crash stops the
        // deletion below (they are collected at the next open). If its
        // outcome is unknown the table is gone from this process (the store
        // stopped writing) but its files stay: the catalog on disk may still
        // name them.
        let committed = self
            .inner
            .shared
            .commit_catalog(&mut catalog, |e| e.remove(name));
        if matches!(&committed, Err(e) if !e.is_outcome_unknown()) {
            return committed;
        }
        {
            let mut tables = self.inner.tables.lock();
            if let Some(inner) = tables.remove(name).and_then(|w| w.upgrade()) {
                inner.mark_dropped();
            }
        }
        if let (Ok(()), Some(meta)) = (&committed, meta) {
            super::disk::remove_files(&self.inner.shared.dir, meta.id, meta.generation);
        }
        committed
    }

    /// Makes every write applied so far, to every open table, durable
    /// against power loss too.
    pub fn flush(&self) -> Result<(), StoreError> {
        let open: Vec<Arc<TableInner>> = self
            .inner
            .tables
            .lock()
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        for t in open {
            t.flush()?;
        }
        Ok(())
    }
}

/// How to size a new table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TableSpec {
    expected_keys: u64,
    target_fp: f64,
    layout: Layout,
    seed: Option<u64>,
}

impl TableSpec {
    /// A table for `expected_keys` keys at false-positive rate `target_fp`,
    /// blocked layout, random seed.
    pub fn new(expected_keys: u64, target_fp: f64) -> Self {
        TableSpec {
            expected_keys,
            target_fp,
            layout: Layout::Blocked,
            seed: None,
        }
    }

    /// Chooses the layout ([`Layout::Blocked`] by default). A table of the
    /// split-block layout ([`Layout::SplitBlock`], Parquet's SBBF) hashes
    /// with XXH64 seed 0 and takes no seed: its bits can be exported as an
    /// SBBF and read by any Parquet reader, at the price of positions anyone
    /// can compute ([`HashSpec::xxh64`] says what that means for keys an
    /// adversary chooses). A table changes layout only by a rebuild from its
    /// keys ([`Table::change_layout`]).
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// Fixes the hash seed (a random one by default, so that nobody who does
    /// not know it can craft colliding keys). The split-block layout has no
    /// seed: creating such a table with one is refused.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }
}
