//! The columns [`super::SbbfArrowWriter`] stores filters for: which
//! filter each gets ([`ColumnSbbf`], [`SbbfGranularity`]), the checks that
//! a column can take one, and the hashing of its values.

use super::super::{export_bit_filter, sbbf_bytes};
use crate::error::{BloomUdfError, Result};
use crate::keys::{self, KeyVisitor};
use datafusion::arrow::array::{Array, ArrayRef};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::error::DataFusionError;
use datafusion::parquet::basic::Type as PhysicalType;
use datafusion::parquet::bloom_filter::{Sbbf, BITSET_MAX_LENGTH};
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::parquet::schema::types::SchemaDescriptor;
use filterstore::{BitFilter, BloomRead, FilterParams, HashSpec, KeyHash, Layout};
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

/// How many Bloom filters [`SbbfArrowWriter`](super::SbbfArrowWriter) writes for a column, and so
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
/// named `column` (see [`SbbfArrowWriter`](super::SbbfArrowWriter)).
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
pub(super) struct Target {
    pub(super) name: String,
    pub(super) field: usize,
    pub(super) leaf: usize,
    pub(super) data_type: DataType,
    pub(super) kind: Kind,
}

/// A target's filter: the caller's, or the distinct hashes of the row
/// group in progress, which become its filter when it ends.
pub(super) enum Kind {
    File(Sbbf),
    RowGroup { fpp: f64, hashes: Hashes },
}

/// XXH64 hashes, which need no hashing again.
pub(super) type Hashes = HashSet<u64, BuildHasherDefault<PassThrough>>;

/// A [`Hasher`] that keeps the `u64` it is given (an XXH64 hash already).
#[derive(Default)]
pub(super) struct PassThrough(u64);

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

/// A split-block filter of `hashes` (XXH64 of a row group's values), sized
/// for their number at `fpp`, within [`BITSET_MAX_LENGTH`] bytes.
pub(super) fn row_group_sbbf(hashes: &Hashes, fpp: f64) -> Result<Sbbf> {
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

pub(super) fn refuse(column: &str, reason: String) -> DataFusionError {
    BloomUdfError::ParquetColumn {
        column: column.to_string(),
        reason,
    }
    .into()
}

/// Where `f`'s column is, once checked to take the filter.
pub(super) fn target(schema: &Schema, descr: &SchemaDescriptor, f: ColumnSbbf) -> Result<Target> {
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
pub(super) fn without_own_filters(
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
pub(super) fn first_missing(sbbf: &Sbbf, column: &ArrayRef) -> Result<Option<usize>> {
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
pub(super) struct Hash<'h> {
    pub(super) hashes: &'h mut Hashes,
    pub(super) nulls: Option<NullBuffer>,
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
