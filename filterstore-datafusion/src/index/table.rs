//! [`IndexedParquetTable`]: the table provider, its construction and its
//! scan (refreshes are in `refresh.rs`).

use super::exec::{IndexedScanExec, OnExecute, ScanSummary};
use super::files::FileMap;
use super::identity::{index_prefix, index_seed};
use super::options::IndexOptions;
use super::predicate::{and, equalities_all_indexed, indexable, key_sets, KeySets};
use super::store::{self, StoreAccess};
use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::{plan_err, project_schema, DataFusionError, Result};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::file_format::FileFormat;
use datafusion::datasource::listing::{ListingTableUrl, PartitionedFile};
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder};
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::object_store::{ObjectMeta, ObjectStore};
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::ExecutionPlan;
use filterstore::HashSpec;
use futures::TryStreamExt;
use parking_lot::{Mutex, RwLock};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A table over a directory (or object-store prefix) of Parquet files whose
/// reads a filterstore index guards: the filterstore store inside DataFusion.
///
/// A lakehouse lookup (`WHERE id = 42`) over N files costs DataFusion's
/// `ListingTable` a LIST, then per file a footer read and, with Parquet's
/// own Bloom filters on, a filter read: 2N requests or more, 10–50 ms each
/// on an object store. An [`IndexedParquetTable`] keeps a Bloom filter per
/// data file and indexed column in a filterstore store on local disk (Delta
/// Lake's Bloom filter index and Hudi's bloom index keep theirs beside the
/// data); a lookup hashes its key once, probes every file's filter in
/// memory, and hands DataFusion's Parquet scan only the files that may hold
/// it. The rest of the predicate reaches the scan as usual, so Parquet's own
/// pruning still applies to the files read.
///
/// # What it answers
/// `col = literal`, `literal = col` and `col IN (literals)` on an indexed
/// column, alone or inside `AND` (and `OR`s of them on one column), through
/// casts that keep the key (an integer widened to a type that holds every
/// value, another string or binary type, a dictionary's values). The index
/// never decides a row: the scan applies every filter again
/// (`TableProviderFilterPushDown::Inexact`).
///
/// # Never a false negative
/// A file is skipped only when it is listed with exactly the size,
/// modification time, ETag and version its filters were built from, and the
/// filter of a constrained column, built with the index's hash, holds none
/// of the wanted keys. A file that is new, rewritten in place, not indexed,
/// whose filter is missing, damaged, over the memory budget, being built,
/// or whose store cannot be opened, is read; `EXPLAIN` says how many files
/// were read for each reason, and a log line says once why the index cannot
/// do all it should (store unavailable or read-only, filters unusable).
/// Every scan lists the files, as a `ListingTable` without its list-files
/// cache does, so a rewrite is seen by the next scan. Files modified within
/// [`IndexOptions::settle`] of a refresh's listing wait for a later one.
///
/// # Kept current
/// [`IndexedParquetTable::refresh`] indexes new and rewritten files
/// (reading only the indexed columns, a batch of rows at a time) and drops
/// the filters of files gone. A scan that lists files the index does not
/// hold starts, when it runs (not when it is planned: `EXPLAIN` starts
/// nothing), one refresh in the background (one at a time; off with
/// [`IndexOptions::refresh_on_scan`]): those files are read until its next
/// batch commits (512 files by default). Filters are sealed filters of the
/// store (bits only: data files are immutable, so no counting filter is
/// kept), committed in batches, each one pack file and one catalog commit:
/// after a kill or a power cut each file is indexed in the version its
/// filter names, or not at all.
///
/// # The rate per file
/// With N files at rate p a lookup reads about N·p files that do not hold
/// its key. A file indexed while N files are listed gets p =
/// `false_files / (2·C)`, C the power of two at or above 2N (at least
/// 1,024): the files indexed at one capacity add at most `false_files / 4`,
/// and when the table has grown so that the sum of the rates of its files
/// passes `false_files` (0.1 by default), the refresh rebuilds the files of
/// the highest rates first. At 10,000 files, p = 0.1 / 65,536, about 1.5 in
/// a million: 36.9 bits per key in the blocked layout.
///
/// # Memory and disk
/// Every filter of the table is held in memory under the store's memory
/// budget (`StoreConfig::memory_budget`); a filter over it is not loaded,
/// and its file is read. On disk a file costs its bits (`m / 8` bytes)
/// plus 76 bytes of frame in a pack file, and a catalog record of about
/// 300 bytes plus its path (name, parameters, and the tag holding the
/// file's identity).
///
/// # Requests
/// A lookup lists the files (one LIST), then reads each file the index
/// kept: its footer (one GET: DataFusion fetches the last 512 KiB) unless
/// the session's metadata cache holds it, and its data. The scan reads
/// neither the page index ([`IndexOptions::page_index`]) nor, when every
/// column it compares with `=` or `IN` is indexed, Parquet's own Bloom
/// filters: each costs requests, and the index has answered what they
/// could.
#[derive(Debug, Clone)]
pub struct IndexedParquetTable {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) url: ListingTableUrl,
    pub(crate) store_url: ObjectStoreUrl,
    pub(crate) object_store: Arc<dyn ObjectStore>,
    pub(crate) schema: SchemaRef,
    pub(crate) options: IndexOptions,
    /// The indexed columns: name and type in the table's schema.
    pub(crate) columns: Vec<(String, DataType)>,
    pub(crate) prefix: String,
    pub(crate) hash: HashSpec,
    pub(crate) access: Arc<StoreAccess>,
    pub(crate) files: RwLock<FileMap>,
    /// One refresh at a time.
    pub(crate) refresh_lock: tokio::sync::Mutex<()>,
    /// A refresh started by a scan is running.
    pub(crate) refreshing: AtomicBool,
    pub(crate) ignore_subdirectory: bool,
    /// Said once: why the index cannot do all it should.
    pub(crate) warned: AtomicBool,
    /// What loading the index from its store found unusable.
    pub(crate) load_problem: Option<String>,
    /// The last refresh a scan started: its outcome.
    pub(crate) last_background: Mutex<Option<std::result::Result<super::RefreshReport, String>>>,
}

impl IndexedParquetTable {
    /// The table of the Parquet files under `location` (a directory or an
    /// object-store prefix, ending with `/`, whose store `state` has
    /// registered), indexed as `options` says. The schema is
    /// [`IndexOptions::schema`], or inferred from the first file listed. The filters already in the store are loaded;
    /// files they do not cover are read until [`refresh`](Self::refresh)
    /// (or a scan's refresh) indexes them.
    pub async fn try_new(
        state: &dyn Session,
        location: &str,
        options: IndexOptions,
    ) -> Result<IndexedParquetTable> {
        options.check()?;
        let url = ListingTableUrl::parse(location)?;
        if !url.is_collection() {
            return plan_err!("an indexed table's location must be a directory or prefix ending with '/', not {location:?}");
        }
        let object_store = state.runtime_env().object_store(&url)?;
        let ignore_subdirectory = state
            .config_options()
            .execution
            .listing_table_ignore_subdirectory;
        let schema = match &options.schema {
            Some(s) => Arc::clone(s),
            None => infer_schema(state, &object_store, &url, &options, ignore_subdirectory).await?,
        };
        let columns = indexed_columns(&schema, &options.columns)?;
        let access = store::open(&options.store_dir);
        let prefix = index_prefix(url.as_str());
        let mut loaded = match access.store() {
            Some(s) => store::load(s, &prefix, &options.columns),
            None => store::Loaded::default(),
        };
        let load_problem = loaded.first_problem.take().map(|first| {
            format!("{} of its filters cannot be used, the first: {first}; their files are read until a refresh rebuilds them", loaded.unusable)
        });
        Ok(IndexedParquetTable {
            inner: Arc::new(Inner {
                store_url: url.object_store(),
                hash: HashSpec::xxh3(index_seed(url.as_str())),
                url,
                object_store,
                schema,
                options,
                columns,
                prefix,
                access,
                files: RwLock::new(loaded.files),
                refresh_lock: tokio::sync::Mutex::new(()),
                refreshing: AtomicBool::new(false),
                ignore_subdirectory,
                warned: AtomicBool::new(false),
                load_problem,
                last_background: Mutex::new(None),
            }),
        })
    }

    /// Files the index holds current filters of.
    pub fn indexed_files(&self) -> usize {
        self.inner.files.read().files.len()
    }

    /// Bytes of filters held in memory (each under the store's budget).
    pub fn filter_bytes(&self) -> u64 {
        self.inner
            .files
            .read()
            .files
            .values()
            .flat_map(|f| f.filters.iter().flatten())
            .map(|f| f.info().bit_bytes())
            .sum()
    }

    /// Why the index cannot do all it should (its store unavailable or
    /// read-only, filters it could not load), if so.
    pub fn limitation(&self) -> Option<String> {
        let i = &self.inner;
        match (i.access.limitation(), &i.load_problem) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (Some(a), None) => Some(a.to_string()),
            (None, Some(b)) => Some(b.clone()),
            (None, None) => None,
        }
    }

    /// Which files of `listed` a scan with `filters` reads, and why.
    fn plan_files(
        &self,
        listed: Vec<ObjectMeta>,
        filters: &[Expr],
    ) -> (Vec<ObjectMeta>, ScanSummary, bool) {
        let i = &self.inner;
        let sets: KeySets = filters
            .iter()
            .fold(KeySets::new(), |acc, f| and(acc, key_sets(f, &i.columns)));
        let listed_count = listed.len();
        let files = i.files.read();
        let stale =
            files.files.len() != listed.iter().filter(|m| files.current(m).is_some()).count();
        let probe = files.probe(listed, &sets, i.hash);
        drop(files);
        let mut summary = ScanSummary {
            listed: listed_count,
            skipped: probe.skipped,
            columns: sets.keys().map(|&c| i.columns[c].0.clone()).collect(),
            limitation: self.limitation(),
            ..ScanSummary::default()
        };
        let mut changed = stale;
        let read = probe
            .read
            .into_iter()
            .map(|(meta, reason)| {
                summary.count(reason);
                changed |= matches!(
                    reason,
                    super::files::ReadReason::Unindexed | super::files::ReadReason::Changed
                );
                meta
            })
            .collect();
        (read, summary, changed)
    }

    /// Says once, as a log line, why the index cannot do all it should.
    fn warn_once(&self) {
        if let Some(why) = self.limitation()
            && !self.inner.warned.swap(true, Ordering::Relaxed)
        {
            log::warn!("indexed table at {}: {why}", self.inner.url);
        }
    }
}

/// The schema of the first file listed under `url`.
async fn infer_schema(
    state: &dyn Session,
    store: &Arc<dyn ObjectStore>,
    url: &ListingTableUrl,
    options: &IndexOptions,
    ignore_subdirectory: bool,
) -> Result<SchemaRef> {
    let listed = list(store, url, &options.file_extension, ignore_subdirectory).await?;
    let Some(first) = listed.first() else {
        return plan_err!(
            "no {} file under {} to take the schema from; give it with IndexOptions::schema",
            options.file_extension,
            url
        );
    };
    let format = ParquetFormat::default().with_options(state.table_options().parquet.clone());
    format
        .infer_schema(state, store, std::slice::from_ref(first))
        .await
}

/// The indexed columns, checked against `schema`.
fn indexed_columns(schema: &SchemaRef, names: &[String]) -> Result<Vec<(String, DataType)>> {
    names
        .iter()
        .map(|name| {
            let field = schema
                .field_with_name(name)
                .map_err(|_| DataFusionError::Plan(format!("cannot index column {name:?}: the table has no such column")))?;
            if !indexable(field.data_type()) {
                return plan_err!(
                    "cannot index column {name:?} of type {}: integers, strings, binaries and dictionaries of them can be",
                    field.data_type()
                );
            }
            Ok((name.clone(), field.data_type().clone()))
        })
        .collect()
}

/// The data files under `url`, as `ListingTable` lists them (by extension,
/// subdirectories as the session says), sorted by path.
pub(crate) async fn list(
    store: &Arc<dyn ObjectStore>,
    url: &ListingTableUrl,
    extension: &str,
    ignore_subdirectory: bool,
) -> Result<Vec<ObjectMeta>> {
    let mut out: Vec<ObjectMeta> = store
        .list(Some(url.prefix()))
        .try_filter(|m| {
            let keep = m.location.as_ref().ends_with(extension)
                && url.contains(&m.location, ignore_subdirectory);
            futures::future::ready(keep)
        })
        .try_collect()
        .await?;
    out.sort_by(|a, b| a.location.cmp(&b.location));
    Ok(out)
}

#[async_trait]
impl TableProvider for IndexedParquetTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.inner.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        // The index only prunes files: every filter is applied again.
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let i = &self.inner;
        self.warn_once();
        let listed = list(
            &i.object_store,
            &i.url,
            &i.options.file_extension,
            i.ignore_subdirectory,
        )
        .await?;
        let (read, summary, changed) = self.plan_files(listed, filters);
        let on_execute = changed.then(|| {
            let table = self.clone();
            OnExecute(Arc::new(move || table.refresh_in_background()))
        });
        if read.is_empty() {
            let schema = project_schema(&i.schema, projection)?;
            let empty = Arc::new(EmptyExec::new(schema));
            return Ok(Arc::new(IndexedScanExec::new(empty, summary, on_execute)));
        }
        let groups = file_groups(read, state.config().target_partitions());
        let mut parquet = state.table_options().parquet.clone();
        parquet.global.enable_page_index &= i.options.page_index;
        parquet.global.bloom_filter_on_read &= !equalities_all_indexed(filters, &i.columns);
        let format = ParquetFormat::default().with_options(parquet);
        let source = format.file_source(datafusion::datasource::table_schema::TableSchema::from(
            Arc::clone(&i.schema),
        ));
        let config = FileScanConfigBuilder::new(i.store_url.clone(), source)
            .with_file_groups(groups)
            .with_projection_indices(projection.cloned())?
            .with_limit(limit)
            .build();
        let plan = format.create_physical_plan(state, config).await?;
        Ok(Arc::new(IndexedScanExec::new(plan, summary, on_execute)))
    }
}

/// `files` in at most `partitions` groups of consecutive files, as even in
/// count as can be.
fn file_groups(files: Vec<ObjectMeta>, partitions: usize) -> Vec<FileGroup> {
    let n = partitions.max(1).min(files.len());
    let per = files.len().div_ceil(n);
    let mut groups = Vec::with_capacity(n);
    let mut files = files
        .into_iter()
        .map(PartitionedFile::new_from_meta)
        .peekable();
    while files.peek().is_some() {
        groups.push(FileGroup::new(files.by_ref().take(per).collect()));
    }
    groups
}
