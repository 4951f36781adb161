//! [`SbbfArrowWriter`]: a filterstore filter as a Parquet column's Bloom
//! filter, written with arrow-rs's `ArrowWriter` (what and why: its documentation).
//! The columns and their filters are in `column`, the file's tail (the
//! footer rewritten to point at the filters) in `tail`.

mod column;
mod tail;

pub use column::{ColumnSbbf, SbbfGranularity};

use crate::error::{BloomUdfError, Result};
use crate::keys;
use column::{
    first_missing, refuse, row_group_sbbf, target, without_own_filters, Hash, Kind, Target,
};
use datafusion::arrow::array::{Array, RecordBatch};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::DataFusionError;
use datafusion::parquet::arrow::{ArrowSchemaConverter, ArrowWriter};
use datafusion::parquet::errors::ParquetError;
use datafusion::parquet::file::metadata::ParquetMetaData;
use datafusion::parquet::file::properties::WriterProperties;
use std::io::Write;
use tail::{encode_footer, footer_start, with_filters, Counted, Placed, Tail};

/// arrow-rs's [`ArrowWriter`] that stores filterstore filters as the Bloom
/// filters of one or more columns: one filter per column for the whole file,
/// or one per row group ([`SbbfGranularity`]).
///
/// **Granularity: which row groups a reader skips.** A reader probes a row
/// group's filter for the key and skips the row group when the filter says
/// absent.
/// - *Per file* ([`ColumnSbbf::new`]): every row group points at the one
///   filter of the whole column. An absent key skips every row group (bar a
///   false positive); a present key skips none, not even the row groups
///   without it. The file grows by one filter.
/// - *Per row group* ([`ColumnSbbf::per_row_group`]): each row group's
///   filter holds that row group's values only, so a present key skips the
///   row groups that lack it, bar about `fpp` of them. The file grows by a
///   filter per row group, sized for that row group's distinct values:
///   1,360 bytes (bitset and header) per row group of 1,000 distinct keys at
///   `fpp` 1%, where arrow-rs's own filter at 1% takes 2,064
///   (`tests/sql/sbbf_row_groups.rs`: there DataFusion pruned 1,965 of the
///   1,984 row groups lacking 64 present keys, and 0 with a filter per file).
///
/// **Why a writer, not a rewrite of a finished file.** A Parquet reader
/// that finds a Bloom filter trusts it: a value the filter lacks makes it
/// skip the row group, and the rows holding that value vanish from the
/// answer. A filter that did not come from the column's own values (a
/// store's table filter, a filter built elsewhere) can only be trusted if
/// someone checks it against every value. [`SbbfArrowWriter`] sees every
/// batch on its way to `ArrowWriter`, so it checks each non-null value of
/// each filtered column with arrow-rs's own [`Sbbf::check`](datafusion::parquet::bloom_filter::Sbbf::check) (the call
/// readers make) and refuses a batch holding a value the filter lacks,
/// before any byte of it is written. Attaching a filter to a finished file
/// would have to read and decode the whole column again to give that
/// guarantee, or go without it; and it would copy the file (or rewrite its
/// tail in place, which a crash turns into a file no reader opens).
///
/// A per-row-group filter is built by the writer, not given: it hashes each
/// non-null value as readers do (XXH64, seed 0, of the plain encoding) into
/// the set of the row group in progress, following `ArrowWriter`'s row
/// groups however they end (rows, bytes, [`SbbfArrowWriter::flush`]), and
/// when the row group ends writes a split-block filter of that set sized for
/// its count, so it holds every value of its row group.
///
/// **What is written.** Everything `ArrowWriter` writes, in its order, with
/// each row group followed by its per-row-group filters; after the last row
/// group, once per per-file column, its filter (Thrift header and bitset,
/// as arrow-rs writes an `Sbbf`); then the page indexes and the footer
/// `ArrowWriter` wrote, the footer with each filtered column chunk's
/// `bloom_filter_offset` and `bloom_filter_length` pointing at its filter
/// (for a per-file column, every row group at the one copy). arrow-rs's own
/// filter for a filtered column is switched off (it would be written and
/// never referenced); the other columns keep the writer properties'
/// settings.
///
/// **Which columns.** A top-level column whose Parquet filter hashes the
/// bytes this crate's keys hash ([`crate::int_key`]): `Int64` and `UInt64`
/// (`INT64`, 8 bytes little-endian), strings and binaries, views included
/// (`BYTE_ARRAY`, the raw bytes) and `FixedSizeBinary` (`FIXED_LEN_BYTE_ARRAY`).
/// The narrower integers are refused: Parquet stores them as `INT32` and its
/// readers probe 4-byte values, where the keys are widened to 8 bytes, so
/// every lookup would miss. The filter must be split-block (as
/// [`super::export_bit_filter`] requires) and at most
/// [`BITSET_MAX_LENGTH`](datafusion::parquet::bloom_filter::BITSET_MAX_LENGTH) (128 MiB) of bitset, the most arrow-rs writes and
/// parquet-java reads.
///
/// **Memory.** One copy of each per-file filter (its `Sbbf`, held until the
/// footer is written); for each per-row-group column, the distinct hashes of
/// the row group in progress (a hash set of 8-byte hashes) and, while a
/// row group closes, its filter; and at close the tail of the file from the
/// last row group on (the page indexes and the footer; with
/// `BloomFilterPosition::End`, also the other columns' filters, which
/// arrow-rs holds until then anyway).
///
/// **Errors.** [`SbbfArrowWriter::write`] refuses a batch that does not
/// match or holds a value a per-file filter lacks with nothing written; the
/// writer takes further batches. An error from `ArrowWriter` itself, or from
/// [`SbbfArrowWriter::close`], leaves an incomplete file, as with
/// `ArrowWriter`: discard it.
///
/// ```
/// use datafusion::arrow::array::{Int64Array, RecordBatch};
/// use datafusion::arrow::datatypes::{DataType, Field, Schema};
/// use datafusion::parquet::bloom_filter::Sbbf;
/// use filterstore::{BitFilter, FilterParams, HashSpec, Layout};
/// use filterstore_datafusion::int_key;
/// use filterstore_datafusion::sbbf::{ColumnSbbf, SbbfArrowWriter};
/// use std::sync::Arc;
///
/// // A split-block filter of the keys, hashed as `keys` says (an Int64
/// // value is its 8 bytes, little-endian: Parquet's INT64).
/// let ids: Vec<i64> = (0..1_000).map(|i| i * 7).collect();
/// let p = FilterParams::for_capacity(1_000, 0.01, Layout::SplitBlock, HashSpec::xxh64())?;
/// let filter = BitFilter::new(p)?;
/// for &id in &ids {
///     filter.insert(&int_key(id as u64));
/// }
///
/// let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
/// let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(ids))])?;
/// let mut file = Vec::new();
/// let mut writer = SbbfArrowWriter::try_new(
///     &mut file,
///     schema,
///     None,
///     vec![ColumnSbbf::new("id", &filter)?],
/// )?;
/// writer.write(&batch)?;
/// let metadata = writer.close()?;
///
/// // The column chunk points at the filter, which answers as ours does.
/// let chunk = metadata.row_group(0).column(0);
/// let at = chunk.bloom_filter_offset().unwrap() as usize;
/// let len = chunk.bloom_filter_length().unwrap() as usize;
/// let sbbf = Sbbf::from_bytes(&file[at..at + len])?;
/// assert!(sbbf.check(&7_i64) && sbbf.check(&6_993_i64));
/// assert_eq!(sbbf.check(&8_i64), filter.contains(&int_key(8)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// One filter per row group, built from the values:
///
/// ```
/// use datafusion::arrow::array::{Int64Array, RecordBatch};
/// use datafusion::arrow::datatypes::{DataType, Field, Schema};
/// use datafusion::parquet::bloom_filter::Sbbf;
/// use datafusion::parquet::file::properties::WriterProperties;
/// use filterstore_datafusion::sbbf::{ColumnSbbf, SbbfArrowWriter};
/// use std::sync::Arc;
///
/// let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
/// let props = WriterProperties::builder().set_max_row_group_row_count(Some(1_000)).build();
/// let filters = vec![ColumnSbbf::per_row_group("id", 0.01)?];
/// let mut file = Vec::new();
/// let mut writer = SbbfArrowWriter::try_new(&mut file, schema.clone(), Some(props), filters)?;
/// let ids = Int64Array::from_iter_values(0..2_000); // two row groups
/// writer.write(&RecordBatch::try_new(schema, vec![Arc::new(ids)])?)?;
/// let metadata = writer.close()?;
///
/// let filter = |rg: usize| {
///     let chunk = metadata.row_group(rg).column(0);
///     let at = chunk.bloom_filter_offset().unwrap() as usize;
///     let len = chunk.bloom_filter_length().unwrap() as usize;
///     Sbbf::from_bytes(&file[at..at + len])
/// };
/// let (first, second) = (filter(0)?, filter(1)?);
/// assert!(first.check(&7_i64) && second.check(&1_007_i64));
/// // Each holds its own row group's keys: of the other's, about 1% pass.
/// let passing = (1_000..2_000_i64).filter(|k| first.check(k)).count();
/// assert!(passing < 40, "{passing}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SbbfArrowWriter<W: Write + Send> {
    writer: ArrowWriter<Tail<W>>,
    targets: Vec<Target>,
    columns: usize,
    write_path_in_schema: bool,
    /// The row-group filters written so far.
    placed: Vec<Placed>,
    /// How many row groups have their row-group filters written.
    filtered_groups: usize,
}

impl<W: Write + Send> SbbfArrowWriter<W> {
    /// A writer of `schema` to `out`, with `props` as [`ArrowWriter::try_new`]
    /// takes them, storing each of `filters` as its column's Bloom filter.
    /// Refused, before anything is written to `out`, when a column is absent,
    /// nested, named twice or of a type the filter cannot serve (see
    /// "Which columns" in [`SbbfArrowWriter`]).
    pub fn try_new(
        out: W,
        schema: SchemaRef,
        props: Option<WriterProperties>,
        filters: Vec<ColumnSbbf>,
    ) -> Result<Self> {
        let props = props.unwrap_or_default();
        let descr = ArrowSchemaConverter::new()
            .with_coerce_types(props.coerce_types())
            .convert(&schema)?;
        let mut targets: Vec<Target> = Vec::with_capacity(filters.len());
        for f in filters {
            if targets.iter().any(|t| t.name == f.column()) {
                return Err(refuse(f.column(), "two filters name it".into()));
            }
            targets.push(target(&schema, &descr, f)?);
        }
        let props = without_own_filters(props, &descr, &targets);
        let write_path_in_schema = props.write_path_in_schema();
        let columns = schema.fields().len();
        Ok(Self {
            writer: ArrowWriter::try_new(Tail::new(out), schema, Some(props))?,
            targets,
            columns,
            write_path_in_schema,
            placed: Vec::new(),
            filtered_groups: 0,
        })
    }

    /// Checks every non-null value of each per-file column against its
    /// filter, then writes `batch` as [`ArrowWriter::write`] does, the values
    /// of each per-row-group column going to the filters of their row groups
    /// (the filters of the row groups it ends are written). A batch
    /// holding a value a per-file filter lacks is refused with
    /// [`BloomUdfError::KeyNotInFilter`], and one whose filtered columns
    /// are not of the schema's types with [`BloomUdfError::ParquetColumn`]:
    /// nothing of it is written, and the writer takes further batches.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_columns() != self.columns {
            return Err(BloomUdfError::BadArgument {
                function: "SbbfArrowWriter::write",
                reason: format!(
                    "the batch has {} columns, the writer's schema {}",
                    batch.num_columns(),
                    self.columns
                ),
            }
            .into());
        }
        for t in &self.targets {
            let column = batch.column(t.field);
            if column.data_type() != &t.data_type {
                return Err(refuse(
                    &t.name,
                    format!(
                        "the batch's column is {}, the writer's schema says {}",
                        column.data_type(),
                        t.data_type
                    ),
                ));
            }
            if let Kind::File(sbbf) = &t.kind
                && let Some(row) = first_missing(sbbf, column)?
            {
                return Err(BloomUdfError::KeyNotInFilter {
                    column: t.name.clone(),
                    row,
                }
                .into());
            }
        }
        let groups = self.writer.flushed_row_groups().len();
        let open = self.writer.in_progress_rows();
        self.writer.write(batch)?;
        self.follow(batch, groups, open)
    }

    /// Closes the row group in progress ([`ArrowWriter::flush`]) and writes
    /// its row-group filters.
    pub fn flush(&mut self) -> Result<()> {
        self.writer.flush()?;
        self.close_flushed()
    }

    /// Bytes written to the output so far ([`ArrowWriter::bytes_written`]).
    pub fn bytes_written(&self) -> usize {
        self.writer.bytes_written()
    }

    /// Writes the last row group, the filters and the footer, and returns
    /// the file's metadata (with the filters' offsets).
    pub fn close(self) -> Result<ParquetMetaData> {
        Ok(self.finish()?.1)
    }

    /// As [`Self::close`], and returns the output (to sync a file, say).
    pub fn into_inner(self) -> Result<W> {
        Ok(self.finish()?.0)
    }

    /// Hashes the rows of `batch`, just written, into the row groups they
    /// went to: `ArrowWriter` fills the row group in progress (`open` rows
    /// of the `groups` flushed before) in row order, flushes it when full
    /// (by rows or bytes) and goes on with the next, so the row groups it
    /// flushed and the rows now in progress say where each row went. A
    /// count that does not add up is an error: a filter missing rows of its
    /// row group would make readers skip them.
    fn follow(&mut self, batch: &RecordBatch, groups: usize, open: usize) -> Result<()> {
        if !self
            .targets
            .iter()
            .any(|t| matches!(t.kind, Kind::RowGroup { .. }))
        {
            self.filtered_groups = self.writer.flushed_row_groups().len();
            return Ok(());
        }
        let flushed: Vec<usize> = self.writer.flushed_row_groups()[groups..]
            .iter()
            .map(|g| usize::try_from(g.num_rows()).unwrap_or(usize::MAX))
            .collect();
        let (mut start, mut open) = (0, open);
        for rows in flushed {
            let len = rows
                .checked_sub(open)
                .filter(|len| start + len <= batch.num_rows())
                .ok_or_else(|| lost_rows(rows, open))?;
            self.hash_rows(batch, start, len)?;
            self.close_group()?;
            start += len;
            open = 0;
        }
        let rest = batch.num_rows() - start;
        if self.writer.in_progress_rows() != open + rest {
            return Err(lost_rows(self.writer.in_progress_rows(), open + rest));
        }
        self.hash_rows(batch, start, rest)
    }

    /// Adds rows `start..start + len` of `batch` to the hashes of the row
    /// group in progress.
    fn hash_rows(&mut self, batch: &RecordBatch, start: usize, len: usize) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        for t in &mut self.targets {
            if let Kind::RowGroup { hashes, .. } = &mut t.kind {
                let column = batch.column(t.field).slice(start, len);
                let mut v = Hash {
                    hashes,
                    nulls: column.logical_nulls(),
                };
                keys::visit("SbbfArrowWriter::write", &column, &mut v)?;
            }
        }
        Ok(())
    }

    /// Writes the row-group filters of every row group flushed and not yet
    /// given its filters (after [`ArrowWriter::flush`], at most one).
    fn close_flushed(&mut self) -> Result<()> {
        while self.filtered_groups < self.writer.flushed_row_groups().len() {
            self.close_group()?;
        }
        Ok(())
    }

    /// Writes the filter of each row-group target for the row group
    /// `filtered_groups` (flushed, its rows hashed), through the writer so
    /// that its byte count (the offsets it records) stays true.
    fn close_group(&mut self) -> Result<()> {
        let group = self.filtered_groups;
        for t in &mut self.targets {
            if let Kind::RowGroup { fpp, hashes } = &mut t.kind {
                let sbbf = row_group_sbbf(hashes, *fpp)?;
                hashes.clear();
                let at = self.writer.bytes_written();
                sbbf.write(Counted(&mut self.writer))?;
                self.placed.push(Placed {
                    group: Some(group),
                    leaf: t.leaf,
                    at,
                    len: self.writer.bytes_written() - at,
                });
            }
        }
        self.filtered_groups += 1;
        Ok(())
    }

    fn finish(mut self) -> Result<(W, ParquetMetaData)> {
        self.flush()?;
        // Each whole-file filter once, after the last row group, through the
        // writer. A file without row groups has no column chunk to point at
        // one.
        let mut placed = std::mem::take(&mut self.placed);
        if !self.writer.flushed_row_groups().is_empty() {
            for t in &self.targets {
                if let Kind::File(sbbf) = &t.kind {
                    let at = self.writer.bytes_written();
                    sbbf.write(Counted(&mut self.writer))?;
                    placed.push(Placed {
                        group: None,
                        leaf: t.leaf,
                        at,
                        len: self.writer.bytes_written() - at,
                    });
                }
            }
        }
        // From here on ArrowWriter writes the file's tail; keep it back, to
        // write it with the footer changed.
        self.writer.sync()?;
        self.writer.inner_mut().hold();
        let metadata = with_filters(self.writer.finish()?, &placed)?;
        let tail = self.writer.inner_mut().take_held();
        let footer = encode_footer(&metadata, self.write_path_in_schema)?;
        let mut out = self.writer.inner_mut().take_out()?;
        out.write_all(&tail[..footer_start(&tail)?])?;
        out.write_all(&footer)?;
        out.flush()?;
        Ok((out, metadata))
    }
}

/// `ArrowWriter` split a batch in a way the row counts do not explain.
fn lost_rows(rows: usize, expected: usize) -> DataFusionError {
    ParquetError::General(format!(
        "SbbfArrowWriter lost track of the rows of its row groups ({rows} against {expected}): the file's row-group filters would not match their rows; discard it"
    ))
    .into()
}
