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
use filterstore::BloomRead;
use std::io::{self, Write};

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
    sbbf: Sbbf,
}

impl ColumnSbbf {
    /// Copies `filter`'s bits as the SBBF of `column`. Refused (before a
    /// word of it is read) unless the filter is split-block and its bitset
    /// is at most [`BITSET_MAX_LENGTH`] bytes.
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
            sbbf: export_bit_filter(filter)?,
        })
    }

    /// The column the filter is for.
    pub fn column(&self) -> &str {
        &self.column
    }
}

/// A filtered column: where it is in the batches and in the Parquet schema.
struct Target {
    name: String,
    field: usize,
    leaf: usize,
    data_type: DataType,
    sbbf: Sbbf,
}

/// arrow-rs's [`ArrowWriter`] that stores a filterstore filter as the Bloom
/// filter of one or more columns.
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
/// **What is written.** Everything `ArrowWriter` writes, byte for byte, up
/// to the end of the last row group; then, once per filtered column, the
/// filter (Thrift header and bitset, as arrow-rs writes an `Sbbf`); then
/// the page indexes and the footer `ArrowWriter` wrote, the footer with each
/// filtered column chunk's `bloom_filter_offset` and `bloom_filter_length`
/// pointing at that one copy. Every row group of the file shares it: the
/// file grows by the filter once, not once per row group, and a reader
/// skips a row group when the value is absent from the whole column, so the
/// filter prunes whole files (all their row groups), not single row groups
/// within one. arrow-rs's own filter for a filtered column is switched off
/// (it would be written and never referenced); the other columns keep the
/// writer properties' settings.
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
/// **Memory.** One copy of each filter (its `Sbbf`, held until the footer is
/// written), and at close the tail of the file from the last row group on
/// (the page indexes and the footer; with `BloomFilterPosition::End`, also
/// the other columns' filters, which arrow-rs holds until then anyway).
///
/// **Errors.** [`SbbfArrowWriter::write`] refuses a batch that does not
/// match or holds a value a filter lacks with nothing written; the writer
/// takes further batches. An error from `ArrowWriter` itself, or from
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
pub struct SbbfArrowWriter<W: Write + Send> {
    writer: ArrowWriter<Tail<W>>,
    targets: Vec<Target>,
    columns: usize,
    write_path_in_schema: bool,
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
        })
    }

    /// Checks every non-null value of each filtered column against its
    /// filter, then writes `batch` as [`ArrowWriter::write`] does. A batch
    /// holding a value a filter lacks is refused with
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
            if let Some(row) = first_missing(&t.sbbf, column)? {
                return Err(BloomUdfError::KeyNotInFilter {
                    column: t.name.clone(),
                    row,
                }
                .into());
            }
        }
        Ok(self.writer.write(batch)?)
    }

    /// Closes the row group in progress ([`ArrowWriter::flush`]).
    pub fn flush(&mut self) -> Result<()> {
        Ok(self.writer.flush()?)
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

    fn finish(mut self) -> Result<(W, ParquetMetaData)> {
        self.writer.flush()?;
        // Each filter once, after the last row group, through the writer so
        // that its byte count (the offsets it records) stays true. A file
        // without row groups has no column chunk to point at one.
        let mut placed = Vec::with_capacity(self.targets.len());
        if !self.writer.flushed_row_groups().is_empty() {
            for t in &self.targets {
                let at = self.writer.bytes_written();
                t.sbbf.write(Counted(&mut self.writer))?;
                placed.push((t.leaf, at, self.writer.bytes_written() - at));
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
    Ok(Target {
        name: f.column,
        field,
        leaf,
        data_type,
        sbbf: f.sbbf,
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

/// `metadata` with every row group's chunk of each placed column pointing
/// at its filter: `(leaf, offset, length)`.
fn with_filters(
    metadata: ParquetMetaData,
    placed: &[(usize, usize, usize)],
) -> Result<ParquetMetaData> {
    let mut b = metadata.into_builder();
    let mut groups = b.take_row_groups();
    for group in &mut groups {
        for &(leaf, at, len) in placed {
            let chunk = group
                .columns_mut()
                .get_mut(leaf)
                .ok_or_else(|| ParquetError::General(format!("no column chunk {leaf}")))?;
            let offset = i64::try_from(at)
                .map_err(|_| ParquetError::General(format!("filter offset {at}")))?;
            let length = i32::try_from(len)
                .map_err(|_| ParquetError::General(format!("filter length {len}")))?;
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
