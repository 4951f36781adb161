//! Indexing one data file: its indexed columns read from the object store
//! in batches (a batch at a time in memory, beside the filters), each
//! non-null value hashed as the key encoding says (`keys.rs`) into a bit
//! filter per column sized for the file's row count at the rate the table's
//! size gives it (`files::fp_for_new_file`).

use super::identity::FileIdentity;
use crate::keys;
use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::parquet::{
    DefaultParquetFileReaderFactory, ParquetFileReaderFactory,
};
use datafusion::error::{DataFusionError, Result};
use datafusion::object_store::{ObjectMeta, ObjectStore};
use datafusion::parquet::arrow::async_reader::{AsyncFileReader, ParquetRecordBatchStreamBuilder};
use datafusion::parquet::arrow::ProjectionMask;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use filterstore::{BitFilter, FilterParams, HashSpec, Layout};
use futures::TryStreamExt;
use std::sync::Arc;

/// The filters of one file, built from the version `identity` names.
#[derive(Debug)]
pub(crate) struct BuiltFile {
    pub(crate) identity: FileIdentity,
    /// Per indexed column: its filter and the keys it holds.
    pub(crate) filters: Vec<(BitFilter, u64)>,
    /// The rate each filter was sized for.
    pub(crate) fp: f64,
}

/// What the build of a file needs besides the file.
#[derive(Clone, Debug)]
pub(crate) struct BuildSpec {
    pub(crate) columns: Vec<String>,
    pub(crate) hash: HashSpec,
    pub(crate) fp: f64,
    pub(crate) batch_rows: usize,
}

/// Reads the indexed columns of the file `meta` names and builds its
/// filters. The identity is `meta`'s, taken before the read (see
/// `identity.rs`).
pub(crate) async fn build_file(
    store: Arc<dyn ObjectStore>,
    meta: ObjectMeta,
    spec: &BuildSpec,
) -> Result<BuiltFile> {
    let identity = FileIdentity::of(&meta);
    // DataFusion's own reader of a file of an object store (the one its
    // Parquet scan uses), one request for the footer when it fits 64 KiB.
    let reader: Box<dyn AsyncFileReader> = DefaultParquetFileReaderFactory::new(store)
        .create_reader(
            0,
            PartitionedFile::new_from_meta(meta),
            Some(64 * 1024),
            &ExecutionPlanMetricsSet::new(),
        )?;
    let builder = ParquetRecordBatchStreamBuilder::new(reader).await?;
    let rows = u64::try_from(builder.metadata().file_metadata().num_rows()).unwrap_or(0);
    let file_schema = builder.schema().clone();
    // The file's position of each indexed column; a column the file lacks
    // reads as nulls in the table, so its filter holds no key.
    let positions: Vec<Option<usize>> = spec
        .columns
        .iter()
        .map(|c| file_schema.index_of(c).ok())
        .collect();
    let roots: Vec<usize> = positions.iter().flatten().copied().collect();
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots.iter().copied());
    let params = FilterParams::for_capacity(rows.max(1), spec.fp, Layout::Blocked, spec.hash)
        .map_err(|e| DataFusionError::External(Box::new(e)))?;
    let mut filters: Vec<(BitFilter, u64)> = Vec::with_capacity(spec.columns.len());
    for _ in &spec.columns {
        let f = BitFilter::new(params).map_err(|e| DataFusionError::External(Box::new(e)))?;
        filters.push((f, 0));
    }
    let mut stream = builder
        .with_projection(mask)
        .with_batch_size(spec.batch_rows)
        .build()?;
    while let Some(batch) = stream.try_next().await? {
        for (c, pos) in positions.iter().enumerate() {
            let Some(pos) = pos else { continue };
            let Ok(i) = batch.schema().index_of(file_schema.field(*pos).name()) else {
                continue;
            };
            let (filter, keys) = &mut filters[c];
            insert_column(filter, keys, batch.column(i), spec.hash)?;
        }
    }
    Ok(BuiltFile {
        identity,
        filters,
        fp: spec.fp,
    })
}

/// Inserts every non-null value of `array` into `filter`, counting them.
fn insert_column(
    filter: &mut BitFilter,
    keys: &mut u64,
    array: &ArrayRef,
    hash: HashSpec,
) -> Result<()> {
    let values = match array.data_type() {
        DataType::Dictionary(_, value) => cast(array, value)?,
        _ => Arc::clone(array),
    };
    let mut hashes = Vec::with_capacity(values.len());
    keys::for_each_hash("index", &values, hash, |h| hashes.push(h))?;
    *keys += hashes.len() as u64;
    filter.insert_hashes_mut(&hashes);
    Ok(())
}
