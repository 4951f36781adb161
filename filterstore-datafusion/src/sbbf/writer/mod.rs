//! [`SbbfArrowWriter`]: a filterstore filter as a Parquet column's Bloom
//! filter, written with arrow-rs's `ArrowWriter` (what and why: its documentation).

use super::{export_bit_filter, sbbf_bytes};
use crate::error::{BloomUdfError, Result};
use crate::keys::{self, KeyVisitor};
use datafusion::arrow::array::{Array, ArrayRef, RecordBatch};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::error::DataFusionError;
use datafusion::parquet::arrow::{ArrowSchemaConverter, ArrowWriter};
use datafusion::parquet::basic::Type as PhysicalType;
use datafusion::parquet::bloom_filter::{Sbbf, BITSET_MAX_LENGTH};
use datafusion::parquet::errors::ParquetError;
use datafusion::parquet::file::metadata::{ParquetMetaData, ParquetMetaDataWriter};
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::parquet::schema::types::SchemaDescriptor;
use filterstore::{BitFilter, BloomRead, FilterParams, HashSpec, KeyHash, Layout};
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, Write};

/// How many Bloom filters [`SbbfArrowWriter`] writes for a column, and so
/// which row groups a reader can skip with them.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum SbbfGranularity {
    /// One filter for the whole file, a filter you built
    /// ([`ColumnSbbf::new`]), written once and shared by every row group. A
    /// key the file lacks skips every row group (bar a false positive); a
    /// key the file holds skips none, not even the row groups without it.
    PerFile,
    /// One filter per row group ([`ColumnSbbf::per_row_group`]), built by the
    /// writer from that row group's own values and sized for its distinct
    /// values at false-positive rate `fpp`. A key skips every row group that
    /// lacks it, bar about `fpp` of them (false positives), at the cost of a
    /// filter per row group in the file.
    PerRowGroup {
        /// The false-positive rate each row group's filter is sized for.
        fpp: f64,
    },
}

/// A split-block filter bound for the Bloom filter of the Parquet column
/// named `column` (see [`SbbfArrowWriter`]).
///
/// ```
/// use filterstore::{BitFilter, FilterParams, HashSpec, Layout};
/// use filterstore_datafusion::sbbf::ColumnSbbf;
///
/// let split = FilterParams::for_capacity(1_000, 0.01, Layout::SplitBlock, HashSpec::xxh64())?;
/// assert!(ColumnSbbf::new("id", &BitFilter::new(split)?).is_ok());
/// // A blocked filter's bits are not an SBBF's.
/// let blocked = FilterParams::for_capacity(1_000, 0.01, Layout::Blocked, HashSpec::xxh3(7))?;
/// assert!(ColumnSbbf::new("id", &BitFilter::new(blocked)?).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct ColumnSbbf {
    column: String,
    source: Source,
}

/// Where a column's filters come from.
#[derive(Debug, Clone)]
enum Source {
    /// The caller's filter, for the whole file.
    File(Sbbf),
    /// Built by the writer, one per row group.
    RowGroup { fpp: f64 },
}

impl ColumnSbbf {
    /// Copies `filter`'s bits as the SBBF of `column`, one filter for the
    /// whole file ([`SbbfGranularity::PerFile`]). Refused (before a word of
    /// it is read) unless the filter is split-block and its bitset is at
    /// most [`BITSET_MAX_LENGTH`] bytes.
    pub fn new(column: impl Into<String>, filter: &impl BloomRead) -> Result<Self> {
        let column = column.into();
        let len = sbbf_bytes(filter.params())?;
        if len > BITSET_MAX_LENGTH {
            return Err(BloomUdfError::Sbbf(format!(
                "the filter for column `{column}` has a bitset of {len} bytes; Parquet readers take at most {BITSET_MAX_LENGTH} (128 MiB) and parquet-java ignores a larger one: build it with fewer bits"
            ))
            .into());
        }
        Ok(Self {
            column,
            source: Source::File(export_bit_filter(filter)?),
        })
    }

    /// One filter per row group of `column` ([`SbbfGranularity::PerRowGroup`]):
    /// the writer hashes each non-null value of the column as a Parquet
    /// reader does (XXH64, seed 0, of its plain encoding: the bytes
    /// [`crate::int_key`] gives) and, when the row group ends, writes a
    /// split-block filter of that row group's distinct hashes, sized for
    /// their number at false-positive rate `fpp` (at most
    /// [`BITSET_MAX_LENGTH`] bytes; a row group with more distinct values
    /// than that holds at `fpp` gets the largest filter and a higher rate).
    /// Refused unless `0 < fpp < 1`.
    ///
    /// ```
    /// use filterstore_datafusion::sbbf::{ColumnSbbf, SbbfGranularity};
    ///
    /// let c = ColumnSbbf::per_row_group("id", 0.01)?;
    /// assert_eq!(c.granularity(), SbbfGranularity::PerRowGroup { fpp: 0.01 });
    /// assert!(ColumnSbbf::per_row_group("id", 1.0).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn per_row_group(column: impl Into<String>, fpp: f64) -> Result<Self> {
        let column = column.into();
        if !(fpp.is_finite() && fpp > 0.0 && fpp < 1.0) {
            return Err(BloomUdfError::Sbbf(format!(
                "the false-positive rate of column `{column}`'s row-group filters must be above 0 and below 1, not {fpp}"
            ))
            .into());
        }
        Ok(Self {
            column,
            source: Source::RowGroup { fpp },
        })
    }

    /// The column the filter is for.
    pub fn column(&self) -> &str {
        &self.column
    }

    /// One filter for the file, or one per row group.
    pub fn granularity(&self) -> SbbfGranularity {
        match self.source {
            Source::File(_) => SbbfGranularity::PerFile,
            Source::RowGroup { fpp } => SbbfGranularity::PerRowGroup { fpp },
        }
    }
}

/// A filtered column: where it is in the batches and in the Parquet schema.
struct Target {
    name: String,
    field: usize,
    leaf: usize,
    data_type: DataType,
    kind: Kind,
}

/// A target's filter: the caller's, or the distinct hashes of the row
/// group in progress, which become its filter when it ends.
enum Kind {
    File(Sbbf),
    RowGroup { fpp: f64, hashes: Hashes },
}

/// XXH64 hashes, which need no hashing again.
type Hashes = HashSet<u64, BuildHasherDefault<PassThrough>>;

/// A [`Hasher`] that keeps the `u64` it is given (an XXH64 hash already).
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, h: u64) {
        self.0 = h;
    }
}

/// A filter written to the file: at byte `at`, `len` bytes, for column
/// chunk `leaf` of row group `group`, or of every row group when `None`.
struct Placed {
    group: Option<usize>,
    leaf: usize,
    at: usize,
    len: usize,
}

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
/// each filtered column with arrow-rs's own [`Sbbf::check`] (the call
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
/// [`BITSET_MAX_LENGTH`] (128 MiB) of bitset, the most arrow-rs writes and
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
            if targets.iter().any(|t| t.name == f.column) {
                return Err(refuse(&f.column, "two filters name it".into()));
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

/// A split-block filter of `hashes` (XXH64 of a row group's values), sized
/// for their number at `fpp`, within [`BITSET_MAX_LENGTH`] bytes.
fn row_group_sbbf(hashes: &Hashes, fpp: f64) -> Result<Sbbf> {
    let sbbf_err = |e: filterstore::ParamError| BloomUdfError::Sbbf(e.to_string());
    let n = (hashes.len() as u64).max(1);
    let params = match FilterParams::for_capacity(n, fpp, Layout::SplitBlock, HashSpec::xxh64()) {
        Ok(p) if p.m() / 8 <= BITSET_MAX_LENGTH as u64 => p,
        _ => FilterParams::new(
            Layout::SplitBlock,
            8 * BITSET_MAX_LENGTH as u64,
            8,
            HashSpec::xxh64(),
        )
        .map_err(sbbf_err)?,
    };
    let mut filter = BitFilter::new(params).map_err(sbbf_err)?;
    for &h in hashes {
        filter.insert_hash_mut(KeyHash { h1: h, h2: 0 });
    }
    export_bit_filter(&filter)
}

fn refuse(column: &str, reason: String) -> DataFusionError {
    BloomUdfError::ParquetColumn {
        column: column.to_string(),
        reason,
    }
    .into()
}

/// Where `f`'s column is, once checked to take the filter.
fn target(schema: &Schema, descr: &SchemaDescriptor, f: ColumnSbbf) -> Result<Target> {
    let field = schema
        .index_of(&f.column)
        .map_err(|_| refuse(&f.column, "the schema has no such top-level column".into()))?;
    let data_type = schema.field(field).data_type().clone();
    let physical = match &data_type {
        DataType::Int64 | DataType::UInt64 => PhysicalType::INT64,
        DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView => PhysicalType::BYTE_ARRAY,
        DataType::FixedSizeBinary(_) => PhysicalType::FIXED_LEN_BYTE_ARRAY,
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32 => {
            return Err(refuse(&f.column, format!(
                "a {data_type} column is stored as Parquet INT32, whose Bloom filter readers probe with 4-byte values, while filterstore's keys widen integers to 8 bytes: every lookup would miss; write the column as Int64, or let arrow-rs build its filter"
            )))
        }
        other => {
            return Err(refuse(&f.column, format!(
                "a {other} column has no key encoding that its Parquet Bloom filter shares (Int64, UInt64, strings, binaries and fixed-size binaries have)"
            )))
        }
    };
    let leaf = descr
        .columns()
        .iter()
        .position(|c| c.path().parts() == std::slice::from_ref(&f.column))
        .ok_or_else(|| refuse(&f.column, "no Parquet leaf column has its name".into()))?;
    let stored = descr.column(leaf).physical_type();
    if stored != physical {
        return Err(refuse(
            &f.column,
            format!("a {data_type} column stored as Parquet {stored}, not {physical}"),
        ));
    }
    let kind = match f.source {
        Source::File(sbbf) => Kind::File(sbbf),
        Source::RowGroup { fpp } => Kind::RowGroup {
            fpp,
            hashes: Hashes::default(),
        },
    };
    Ok(Target {
        name: f.column,
        field,
        leaf,
        data_type,
        kind,
    })
}

/// `props` with arrow-rs's own filter off for every target column, and the
/// other columns' filters as they were. arrow-rs's per-column "off" does
/// not override a default "on", so when the default is on it is turned off
/// and every other column gets its former setting explicitly.
fn without_own_filters(
    props: WriterProperties,
    descr: &SchemaDescriptor,
    targets: &[Target],
) -> WriterProperties {
    let own = |leaf: usize| props.bloom_filter_properties(descr.column(leaf).path());
    if targets.iter().all(|t| own(t.leaf).is_none()) {
        return props;
    }
    let kept: Vec<_> = (0..descr.num_columns())
        .filter(|&leaf| targets.iter().all(|t| t.leaf != leaf))
        .filter_map(|leaf| Some((descr.column(leaf).path().clone(), own(leaf)?.clone())))
        .collect();
    let mut b = props.into_builder().set_bloom_filter_enabled(false);
    for (path, p) in kept {
        b = b.set_column_bloom_filter_properties(path, p);
    }
    for t in targets {
        b = b.set_column_bloom_filter_enabled(descr.column(t.leaf).path().clone(), false);
    }
    b.build()
}

/// The first valid row of `column` that `sbbf` lacks, with the bytes
/// [`crate::keys`] hashes (the plain encoding the column is stored with).
fn first_missing(sbbf: &Sbbf, column: &ArrayRef) -> Result<Option<usize>> {
    let mut v = FirstMissing {
        sbbf,
        nulls: column.logical_nulls(),
        row: None,
    };
    keys::visit("SbbfArrowWriter::write", column, &mut v)?;
    Ok(v.row)
}

struct FirstMissing<'s> {
    sbbf: &'s Sbbf,
    nulls: Option<NullBuffer>,
    row: Option<usize>,
}

impl FirstMissing<'_> {
    fn find(&mut self, len: usize, has: impl Fn(usize) -> bool) {
        let nulls = self.nulls.as_ref();
        self.row = (0..len).find(|&i| nulls.is_none_or(|n| n.is_valid(i)) && !has(i));
    }
}

/// Adds the XXH64 hash (seed 0) of each valid row's key bytes to `hashes`:
/// what [`Sbbf::insert`] would hash, and a reader's [`Sbbf::check`] too.
struct Hash<'h> {
    hashes: &'h mut Hashes,
    nulls: Option<NullBuffer>,
}

impl Hash<'_> {
    fn add(&mut self, len: usize, hash: impl Fn(usize) -> u64) {
        let nulls = self.nulls.as_ref();
        self.hashes.extend(
            (0..len)
                .filter(|&i| nulls.is_none_or(|n| n.is_valid(i)))
                .map(hash),
        );
    }
}

impl KeyVisitor for Hash<'_> {
    fn ints(&mut self, len: usize, get: impl Fn(usize) -> u64) {
        let spec = HashSpec::xxh64();
        self.add(len, |i| spec.hash(&keys::int_key(get(i))).h1);
    }
    fn bytes<'a>(&mut self, len: usize, get: impl Fn(usize) -> &'a [u8]) {
        let spec = HashSpec::xxh64();
        self.add(len, |i| spec.hash(get(i)).h1);
    }
}

impl KeyVisitor for FirstMissing<'_> {
    fn ints(&mut self, len: usize, get: impl Fn(usize) -> u64) {
        let sbbf = self.sbbf;
        self.find(len, |i| sbbf.check(&keys::int_key(get(i))[..]));
    }
    fn bytes<'a>(&mut self, len: usize, get: impl Fn(usize) -> &'a [u8]) {
        let sbbf = self.sbbf;
        self.find(len, |i| sbbf.check(get(i)));
    }
}

/// `metadata` with each placed filter's column chunk (of its row group, or
/// of every row group) pointing at it.
fn with_filters(metadata: ParquetMetaData, placed: &[Placed]) -> Result<ParquetMetaData> {
    let mut b = metadata.into_builder();
    let mut groups = b.take_row_groups();
    for p in placed {
        let (at, len) = (p.at, p.len);
        let offset =
            i64::try_from(at).map_err(|_| ParquetError::General(format!("filter offset {at}")))?;
        let length = i32::try_from(len)
            .map_err(|_| ParquetError::General(format!("filter length {len}")))?;
        let range = match p.group {
            Some(g) if g < groups.len() => g..g + 1,
            Some(g) => return Err(ParquetError::General(format!("no row group {g}")).into()),
            None => 0..groups.len(),
        };
        for group in &mut groups[range] {
            let chunk = group
                .columns_mut()
                .get_mut(p.leaf)
                .ok_or_else(|| ParquetError::General(format!("no column chunk {}", p.leaf)))?;
            *chunk = chunk
                .clone()
                .into_builder()
                .set_bloom_filter_offset(Some(offset))
                .set_bloom_filter_length(Some(length))
                .build()?;
        }
    }
    Ok(b.set_row_groups(groups).build())
}

/// The footer of `metadata` (Thrift `FileMetaData`, its length, `PAR1`),
/// its page indexes left where `ArrowWriter` wrote them.
fn encode_footer(metadata: &ParquetMetaData, write_path_in_schema: bool) -> Result<Vec<u8>> {
    let bare = metadata
        .clone()
        .into_builder()
        .set_column_index(None)
        .set_offset_index(None)
        .build();
    let mut footer = Vec::new();
    ParquetMetaDataWriter::new(&mut footer, &bare)
        .with_write_path_in_schema(write_path_in_schema)
        .finish()?;
    Ok(footer)
}

/// Where the footer (`FileMetaData`, its length, `PAR1`) starts in `tail`,
/// the bytes `ArrowWriter` wrote at close.
fn footer_start(tail: &[u8]) -> Result<usize> {
    let n = tail.len();
    let start = match tail {
        [.., a, b, c, d, b'P', b'A', b'R', b'1'] => {
            let len = u32::from_le_bytes([*a, *b, *c, *d]) as usize;
            n.checked_sub(8).and_then(|end| end.checked_sub(len))
        }
        _ => None,
    };
    start.ok_or_else(|| {
        ParquetError::General(format!(
            "ArrowWriter's {n}-byte file tail does not end in a Parquet footer"
        ))
        .into()
    })
}

/// [`Write`] through an [`ArrowWriter`], which counts the bytes.
struct Counted<'a, W: Write + Send>(&'a mut ArrowWriter<Tail<W>>);

impl<W: Write + Send> Write for Counted<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write_all(buf)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The output, passed through until [`Tail::hold`], then kept back.
struct Tail<W> {
    out: Option<W>,
    held: Option<Vec<u8>>,
}

impl<W: Write> Tail<W> {
    fn new(out: W) -> Self {
        Self {
            out: Some(out),
            held: None,
        }
    }

    fn hold(&mut self) {
        self.held = Some(Vec::new());
    }

    fn take_held(&mut self) -> Vec<u8> {
        self.held.take().unwrap_or_default()
    }

    fn take_out(&mut self) -> io::Result<W> {
        self.out.take().ok_or_else(gone)
    }
}

fn gone() -> io::Error {
    io::Error::other("the Parquet output was already handed back")
}

impl<W: Write> Write for Tail<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.held {
            Some(held) => {
                held.try_reserve(buf.len()).map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::OutOfMemory,
                        "no memory to hold the Parquet file's tail",
                    )
                })?;
                held.extend_from_slice(buf);
                Ok(buf.len())
            }
            None => self.out.as_mut().ok_or_else(gone)?.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match (&self.held, &mut self.out) {
            (Some(_), _) => Ok(()),
            (None, Some(out)) => out.flush(),
            (None, None) => Err(gone()),
        }
    }
}
