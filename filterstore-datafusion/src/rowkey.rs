//! Join keys of one or more columns, of every type DataFusion joins on, as
//! the one byte string a filter hashes.
//!
//! A runtime filter is built from the build side's key expressions and
//! probed with the probe side's, each evaluated exactly as the join
//! evaluates them (its own casts included), so both sides produce values of
//! the same type, and a key the join would match must produce the same bytes
//! on both sides. The encoding is therefore chosen per type to agree with
//! DataFusion's join equality, never with a looser one:
//!
//! | Arrow type | bytes of one column |
//! |---|---|
//! | integers of any width and sign, `Date32/64`, `Time32/64`, `Timestamp`, `Duration`, `Boolean` | the value widened to 64 bits (sign- or zero-extended), 8 bytes little-endian |
//! | `Float16/32/64` | the IEEE bits, 2/4/8 bytes little-endian, with `-0.0` written as `+0.0`: DataFusion 55's hash join hashes and compares floats that way (`hash_float_value` and `JoinKeyComparator` normalise the zero, then compare by `total_cmp`: `-0.0 = 0.0`, a NaN equals a NaN of the same bits) |
//! | `Decimal32/64/128/256` | the unscaled integer widened to 128 bits (256 for `Decimal256`), little-endian |
//! | strings and binaries (`Utf8`, `LargeUtf8`, `Utf8View`, `Binary`, `LargeBinary`, `BinaryView`, `FixedSizeBinary`) | the bytes |
//! | `Dictionary(_, V)` | the value's bytes as `V` (dictionaries compare by value) |
//!
//! A single-column key is exactly those bytes (the same bytes as
//! [`crate::keys`] and Parquet's plain encoding for `INT64` and byte arrays).
//! A composite key is the concatenation of its columns' bytes in join-key
//! order, each variable-length column preceded by its length as 4 bytes
//! little-endian, so that no two different tuples share a byte string
//! (`("ab", "c")` and `("a", "bc")` differ).
//!
//! Widening maps equal values of different widths to equal bytes, so a key
//! whose two sides differ only in integer width (or string encoding, or
//! dictionary packing) still meets itself; a `UInt64` above 2^63 shares its
//! bytes with a negative `Int64`, a false positive, never a false negative.
//!
//! A row with a null in any key column has no key ([`RowKeys::key`] returns
//! `None`); the caller decides whether it passes (a null-safe join) or not.

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Date64Type, Decimal128Type, Decimal256Type, Decimal32Type, Decimal64Type,
    DurationMicrosecondType, DurationMillisecondType, DurationNanosecondType, DurationSecondType,
    Float16Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type,
    Time32MillisecondType, Time32SecondType, Time64MicrosecondType, Time64NanosecondType, TimeUnit,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use datafusion::error::{DataFusionError, Result};
use std::sync::Arc;

/// Why keys of `data_type` cannot be encoded, or `None` when they can.
pub(crate) fn unsupported(data_type: &DataType) -> Option<String> {
    use DataType::*;
    match data_type {
        Int8
        | Int16
        | Int32
        | Int64
        | UInt8
        | UInt16
        | UInt32
        | UInt64
        | Boolean
        | Date32
        | Date64
        | Time32(_)
        | Time64(_)
        | Timestamp(_, _)
        | Duration(_)
        | Float16
        | Float32
        | Float64
        | Decimal32(_, _)
        | Decimal64(_, _)
        | Decimal128(_, _)
        | Decimal256(_, _)
        | Utf8
        | LargeUtf8
        | Utf8View
        | Binary
        | LargeBinary
        | BinaryView
        | FixedSizeBinary(_) => None,
        Dictionary(_, value) => unsupported(value),
        other => Some(format!("keys of type {other} have no encoding")),
    }
}

/// Whether two key columns of these types, equal by the join, always give
/// equal bytes (the same type, or types [`unsupported`] encodes alike).
pub(crate) fn same_encoding(a: &DataType, b: &DataType) -> bool {
    family(a).is_some() && family(a) == family(b)
}

/// Types that share an encoding share a family; `None` when unsupported.
fn family(data_type: &DataType) -> Option<String> {
    use DataType::*;
    if unsupported(data_type).is_some() {
        return None;
    }
    Some(match data_type {
        Dictionary(_, value) => return family(value),
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 => "int".into(),
        Utf8 | LargeUtf8 | Utf8View | Binary | LargeBinary | BinaryView | FixedSizeBinary(_) => {
            "bytes".into()
        }
        // Every other type only meets its own type (the join's coercion made
        // both sides equal): a date is not an integer, a scale is part of a
        // decimal's value.
        other => other.to_string(),
    })
}

/// One key column, read row by row.
enum Col<'a> {
    /// Widened to 64 bits.
    Int(Box<dyn Fn(usize) -> u64 + 'a>),
    /// Bits of a float: 2, 4 or 8 bytes.
    Float(Box<dyn Fn(usize) -> u64 + 'a>, usize),
    /// A decimal widened to 128 bits.
    Wide(Box<dyn Fn(usize) -> i128 + 'a>),
    /// A `Decimal256`: 32 bytes.
    Wide256(Box<dyn Fn(usize) -> [u8; 32] + 'a>),
    /// Bytes of a string or binary.
    Bytes(Box<dyn Fn(usize) -> &'a [u8] + 'a>),
}

fn prim<'a, T, F, R>(a: &'a ArrayRef, f: F) -> Box<dyn Fn(usize) -> R + 'a>
where
    T: datafusion::arrow::datatypes::ArrowPrimitiveType,
    F: Fn(T::Native) -> R + 'a,
{
    let values = a.as_primitive::<T>().values();
    Box::new(move |i| f(values[i]))
}

impl<'a> Col<'a> {
    fn new(a: &'a ArrayRef) -> Result<Col<'a>> {
        Self::integer(a)
            .or_else(|| Self::temporal(a))
            .or_else(|| Self::numeric(a))
            .or_else(|| Self::bytes(a))
            .ok_or_else(|| unsupported_error(a.data_type()))
    }

    /// An integer or boolean column, widened to 64 bits; `None` for another type.
    fn integer(a: &'a ArrayRef) -> Option<Col<'a>> {
        use DataType as D;
        Some(match a.data_type() {
            D::Int8 => Col::Int(prim::<Int8Type, _, _>(a, |v| v as i64 as u64)),
            D::Int16 => Col::Int(prim::<Int16Type, _, _>(a, |v| v as i64 as u64)),
            D::Int32 => Col::Int(prim::<Int32Type, _, _>(a, |v| v as i64 as u64)),
            D::Int64 => Col::Int(prim::<Int64Type, _, _>(a, |v| v as u64)),
            D::UInt8 => Col::Int(prim::<UInt8Type, _, _>(a, u64::from)),
            D::UInt16 => Col::Int(prim::<UInt16Type, _, _>(a, u64::from)),
            D::UInt32 => Col::Int(prim::<UInt32Type, _, _>(a, u64::from)),
            D::UInt64 => Col::Int(prim::<UInt64Type, _, _>(a, |v| v)),
            D::Boolean => {
                let b = a.as_boolean();
                Col::Int(Box::new(move |i| u64::from(b.value(i))))
            }
            _ => return None,
        })
    }

    /// A date, time, timestamp or duration column, as its integer; `None` for another type.
    fn temporal(a: &'a ArrayRef) -> Option<Col<'a>> {
        use DataType as D;
        Some(match a.data_type() {
            D::Date32 => Col::Int(prim::<Date32Type, _, _>(a, |v| v as i64 as u64)),
            D::Date64 => Col::Int(prim::<Date64Type, _, _>(a, |v| v as u64)),
            D::Time32(TimeUnit::Second) => {
                Col::Int(prim::<Time32SecondType, _, _>(a, |v| v as i64 as u64))
            }
            D::Time32(_) => Col::Int(prim::<Time32MillisecondType, _, _>(a, |v| v as i64 as u64)),
            D::Time64(TimeUnit::Microsecond) => {
                Col::Int(prim::<Time64MicrosecondType, _, _>(a, |v| v as u64))
            }
            D::Time64(_) => Col::Int(prim::<Time64NanosecondType, _, _>(a, |v| v as u64)),
            D::Timestamp(unit, _) => Col::Int(match unit {
                TimeUnit::Second => prim::<TimestampSecondType, _, _>(a, |v| v as u64),
                TimeUnit::Millisecond => prim::<TimestampMillisecondType, _, _>(a, |v| v as u64),
                TimeUnit::Microsecond => prim::<TimestampMicrosecondType, _, _>(a, |v| v as u64),
                TimeUnit::Nanosecond => prim::<TimestampNanosecondType, _, _>(a, |v| v as u64),
            }),
            D::Duration(unit) => Col::Int(match unit {
                TimeUnit::Second => prim::<DurationSecondType, _, _>(a, |v| v as u64),
                TimeUnit::Millisecond => prim::<DurationMillisecondType, _, _>(a, |v| v as u64),
                TimeUnit::Microsecond => prim::<DurationMicrosecondType, _, _>(a, |v| v as u64),
                TimeUnit::Nanosecond => prim::<DurationNanosecondType, _, _>(a, |v| v as u64),
            }),
            _ => return None,
        })
    }

    /// A float (its bits, negative zero as zero) or decimal column; `None` for another type.
    fn numeric(a: &'a ArrayRef) -> Option<Col<'a>> {
        use DataType as D;
        Some(match a.data_type() {
            D::Float16 => Col::Float(
                prim::<Float16Type, _, _>(a, |v| zero(u64::from(v.to_bits()), 16)),
                2,
            ),
            D::Float32 => Col::Float(
                prim::<Float32Type, _, _>(a, |v| zero(u64::from(v.to_bits()), 32)),
                4,
            ),
            D::Float64 => Col::Float(prim::<Float64Type, _, _>(a, |v| zero(v.to_bits(), 64)), 8),
            D::Decimal32(_, _) => Col::Wide(prim::<Decimal32Type, _, _>(a, i128::from)),
            D::Decimal64(_, _) => Col::Wide(prim::<Decimal64Type, _, _>(a, i128::from)),
            D::Decimal128(_, _) => Col::Wide(prim::<Decimal128Type, _, _>(a, |v| v)),
            D::Decimal256(_, _) => {
                Col::Wide256(prim::<Decimal256Type, _, _>(a, |v| v.to_le_bytes()))
            }
            _ => return None,
        })
    }

    /// A string or binary column, as its bytes; `None` for another type.
    fn bytes(a: &'a ArrayRef) -> Option<Col<'a>> {
        use DataType as D;
        Some(match a.data_type() {
            D::Utf8 => {
                let s = a.as_string::<i32>();
                Col::Bytes(Box::new(move |i| s.value(i).as_bytes()))
            }
            D::LargeUtf8 => {
                let s = a.as_string::<i64>();
                Col::Bytes(Box::new(move |i| s.value(i).as_bytes()))
            }
            D::Utf8View => {
                let s = a.as_string_view();
                Col::Bytes(Box::new(move |i| s.value(i).as_bytes()))
            }
            D::Binary => {
                let s = a.as_binary::<i32>();
                Col::Bytes(Box::new(move |i| s.value(i)))
            }
            D::LargeBinary => {
                let s = a.as_binary::<i64>();
                Col::Bytes(Box::new(move |i| s.value(i)))
            }
            D::BinaryView => {
                let s = a.as_binary_view();
                Col::Bytes(Box::new(move |i| s.value(i)))
            }
            D::FixedSizeBinary(_) => {
                let s = a.as_fixed_size_binary();
                Col::Bytes(Box::new(move |i| s.value(i)))
            }
            _ => return None,
        })
    }

    /// Appends row `i`'s bytes; `prefixed` adds a variable-length column's
    /// length first (composite keys).
    fn write(&self, i: usize, prefixed: bool, out: &mut Vec<u8>) {
        match self {
            Col::Int(get) => out.extend_from_slice(&get(i).to_le_bytes()),
            Col::Float(get, width) => out.extend_from_slice(&get(i).to_le_bytes()[..*width]),
            Col::Wide(get) => out.extend_from_slice(&get(i).to_le_bytes()),
            Col::Wide256(get) => out.extend_from_slice(&get(i)),
            Col::Bytes(get) => {
                let b = get(i);
                if prefixed {
                    // A key column longer than 4 GiB cannot reach a join.
                    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
                }
                out.extend_from_slice(b);
            }
        }
    }
}

/// A float's bits of `width` with `-0.0` made `+0.0` (only the sign bit set
/// means negative zero), as DataFusion's join hashes and compares it.
fn zero(bits: u64, width: u32) -> u64 {
    if bits == 1 << (width - 1) {
        0
    } else {
        bits
    }
}

fn unsupported_error(data_type: &DataType) -> DataFusionError {
    DataFusionError::NotImplemented(format!(
        "bloom runtime filter: keys of type {data_type} have no encoding"
    ))
}

/// The key columns of one batch, with dictionaries unpacked to their values.
pub(crate) struct KeyColumns {
    arrays: Vec<ArrayRef>,
    nulls: Option<NullBuffer>,
    len: usize,
}

impl KeyColumns {
    /// The key of each row of `columns` (all of one length, at least one).
    pub(crate) fn new(columns: &[ArrayRef]) -> Result<KeyColumns> {
        let len = columns.first().map_or(0, |c| c.len());
        let mut arrays = Vec::with_capacity(columns.len());
        let mut nulls: Option<NullBuffer> = None;
        for c in columns {
            if c.len() != len {
                return Err(DataFusionError::Internal(
                    "bloom runtime filter: key columns differ in length".into(),
                ));
            }
            let a = match c.data_type() {
                DataType::Dictionary(_, value) => cast(c, value)?,
                _ => Arc::clone(c),
            };
            nulls = NullBuffer::union(nulls.as_ref(), a.logical_nulls().as_ref());
            arrays.push(a);
        }
        Ok(KeyColumns { arrays, nulls, len })
    }

    /// Rows in the batch.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// A reader of the rows' keys.
    pub(crate) fn rows(&self) -> Result<RowKeys<'_>> {
        let cols = self
            .arrays
            .iter()
            .map(Col::new)
            .collect::<Result<Vec<_>>>()?;
        Ok(RowKeys {
            prefixed: cols.len() > 1,
            cols,
            nulls: self.nulls.as_ref(),
        })
    }
}

/// Reads the key of each row into a caller's buffer.
pub(crate) struct RowKeys<'a> {
    cols: Vec<Col<'a>>,
    nulls: Option<&'a NullBuffer>,
    prefixed: bool,
}

impl RowKeys<'_> {
    /// Row `i`'s key bytes, appended to a cleared `buf`; `None` when a key
    /// column is null in that row.
    pub(crate) fn key<'b>(&self, i: usize, buf: &'b mut Vec<u8>) -> Option<&'b [u8]> {
        if self.nulls.is_some_and(|n| n.is_null(i)) {
            return None;
        }
        buf.clear();
        for c in &self.cols {
            c.write(i, self.prefixed, buf);
        }
        Some(buf)
    }
}

/// Keys checked per batched lookup: enough for the core's prefetching
/// pipeline to overlap its cache misses.
const CHUNK: usize = 256;

/// Keys as 8-byte values, and the row of each.
type IntKeys = (Vec<[u8; 8]>, Vec<u32>);

/// The keys of a one-column key of 64-bit encoding (integers, dates,
/// times, timestamps, durations, booleans: most join keys), as 8-byte
/// values, with the row of each (null keys have none). `None` for any other
/// key, which takes the general path. The bytes are exactly those
/// [`RowKeys::key`] writes for such a column.
fn int_keys(columns: &KeyColumns) -> Result<Option<IntKeys>> {
    let [a] = columns.arrays.as_slice() else {
        return Ok(None);
    };
    let col = Col::new(a)?;
    let Col::Int(get) = col else {
        return Ok(None);
    };
    let n = columns.len;
    let mut keys = Vec::with_capacity(n);
    let mut rows = Vec::with_capacity(n);
    for i in 0..n {
        if columns.nulls.as_ref().is_some_and(|b| b.is_null(i)) {
            continue;
        }
        keys.push(get(i).to_le_bytes());
        rows.push(i as u32);
    }
    Ok(Some((keys, rows)))
}

/// Whether each row may join, by `filter`'s answer for its key; a row with a
/// null key answers `nulls_pass`. Never null itself.
pub(crate) fn contains_rows(
    filter: &impl filterstore::BloomRead,
    columns: &KeyColumns,
    nulls_pass: bool,
) -> Result<BooleanArray> {
    if let Some((keys, rows)) = int_keys(columns)? {
        let mut out = vec![nulls_pass; columns.len()];
        let mut hits = vec![false; keys.len()];
        filter.contains_many_into(&keys, &mut hits);
        for (&row, hit) in rows.iter().zip(hits) {
            out[row as usize] = hit;
        }
        return Ok(BooleanArray::from(out));
    }
    let rows = columns.rows()?;
    let mut out = Vec::with_capacity(columns.len());
    let mut arena: Vec<u8> = Vec::with_capacity(CHUNK * 16);
    let mut ends: Vec<usize> = Vec::with_capacity(CHUNK);
    let mut which: Vec<usize> = Vec::with_capacity(CHUNK);
    let mut buf = Vec::with_capacity(64);
    let mut hits = [false; CHUNK];
    let mut start = 0;
    while start < columns.len() {
        let end = (start + CHUNK).min(columns.len());
        arena.clear();
        ends.clear();
        which.clear();
        out.resize(end, nulls_pass);
        for i in start..end {
            if let Some(key) = rows.key(i, &mut buf) {
                arena.extend_from_slice(key);
                ends.push(arena.len());
                which.push(i);
            }
        }
        let keys: Vec<&[u8]> = ends
            .iter()
            .scan(0, |from, &to| {
                let k = &arena[*from..to];
                *from = to;
                Some(k)
            })
            .collect();
        filter.contains_many_into(&keys, &mut hits[..keys.len()]);
        for (j, &i) in which.iter().enumerate() {
            out[i] = hits[j];
        }
        start = end;
    }
    Ok(BooleanArray::from(out))
}

/// Inserts every non-null key of the batch into `filter`; returns the rows
/// inserted (nulls skipped).
pub(crate) fn insert_rows(filter: &filterstore::BitFilter, columns: &KeyColumns) -> Result<u64> {
    if let Some((keys, _)) = int_keys(columns)? {
        filter.insert_many(&keys);
        return Ok(keys.len() as u64);
    }
    let rows = columns.rows()?;
    let mut buf = Vec::with_capacity(64);
    let mut inserted = 0;
    for i in 0..columns.len() {
        if let Some(key) = rows.key(i, &mut buf) {
            filter.insert(key);
            inserted += 1;
        }
    }
    Ok(inserted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{
        DictionaryArray, Float32Array, Float64Array, Int32Array, Int64Array, StringArray,
        StringViewArray,
    };
    use datafusion::arrow::datatypes::Int8Type;

    fn keys(cols: &[ArrayRef]) -> Vec<Option<Vec<u8>>> {
        let k = KeyColumns::new(cols).unwrap();
        let rows = k.rows().unwrap();
        let mut buf = Vec::new();
        (0..k.len())
            .map(|i| rows.key(i, &mut buf).map(<[u8]>::to_vec))
            .collect()
    }

    #[test]
    fn negative_zero_is_zero_and_nan_is_its_bits() {
        // DataFusion's join: -0.0 = 0.0 (normalised), NaN = NaN of equal bits.
        let f: ArrayRef = Arc::new(Float64Array::from(vec![0.0, -0.0, f64::NAN, 1.5]));
        let k = keys(&[f]);
        assert_eq!(k[0], k[1]);
        assert_ne!(k[0], k[3]);
        assert_eq!(
            k[2],
            keys(&[Arc::new(Float64Array::from(vec![f64::NAN])) as ArrayRef])[0]
        );
        let g: ArrayRef = Arc::new(Float32Array::from(vec![0.0f32, -0.0]));
        let k = keys(&[g]);
        assert_eq!(k[0], k[1]);
    }

    #[test]
    fn widths_encodings_and_dictionaries_meet() {
        let a: ArrayRef = Arc::new(Int32Array::from(vec![7, -3]));
        let b: ArrayRef = Arc::new(Int64Array::from(vec![7, -3]));
        assert_eq!(keys(&[a]), keys(&[b]));
        let s: ArrayRef = Arc::new(StringArray::from(vec!["x", "yy"]));
        let v: ArrayRef = Arc::new(StringViewArray::from(vec!["x", "yy"]));
        let d: ArrayRef = Arc::new(DictionaryArray::<Int8Type>::from_iter(["x", "yy"]));
        assert_eq!(keys(&[Arc::clone(&s)]), keys(&[v]));
        assert_eq!(keys(&[s]), keys(&[d]));
        assert!(same_encoding(&DataType::Int32, &DataType::UInt64));
        assert!(!same_encoding(&DataType::Int32, &DataType::Date32));
    }

    #[test]
    fn the_integer_fast_path_answers_as_the_general_path() {
        use filterstore::{BitFilter, FilterParams, HashSpec, Layout};
        let params =
            FilterParams::for_capacity(1000, 0.01, Layout::Blocked, HashSpec::xxh3(1)).unwrap();
        let (fast, slow) = (
            BitFilter::new(params).unwrap(),
            BitFilter::new(params).unwrap(),
        );
        let ints: ArrayRef = Arc::new(Int32Array::from(
            (0..600)
                .map(|i| (i % 7 != 0).then_some(i * 3 - 500))
                .collect::<Vec<_>>(),
        ));
        let cols = KeyColumns::new(&[Arc::clone(&ints)]).unwrap();
        assert!(int_keys(&cols).unwrap().is_some());
        assert_eq!(insert_rows(&fast, &cols).unwrap(), 514);
        let rows = cols.rows().unwrap();
        let mut buf = Vec::new();
        for i in 0..cols.len() {
            if let Some(k) = rows.key(i, &mut buf) {
                slow.insert(k);
            }
        }
        assert_eq!(fast.to_words(), slow.to_words());
        let probe: ArrayRef = Arc::new(Int64Array::from(
            (0..2000)
                .map(|i| (i % 11 != 0).then_some(i - 700))
                .collect::<Vec<_>>(),
        ));
        let pcols = KeyColumns::new(&[probe]).unwrap();
        for nulls_pass in [false, true] {
            let got = contains_rows(&fast, &pcols, nulls_pass).unwrap();
            let prows = pcols.rows().unwrap();
            for i in 0..pcols.len() {
                let want = match prows.key(i, &mut buf) {
                    Some(k) => slow.contains(k),
                    None => nulls_pass,
                };
                assert_eq!(got.value(i), want, "row {i}");
            }
        }
    }

    #[test]
    fn composite_keys_are_unambiguous_and_nulls_have_no_key() {
        let a: ArrayRef = Arc::new(StringArray::from(vec![Some("ab"), Some("a"), None]));
        let b: ArrayRef = Arc::new(StringArray::from(vec![Some("c"), Some("bc"), Some("c")]));
        let k = keys(&[a, b]);
        assert_ne!(k[0], k[1]);
        assert_eq!(k[2], None);
    }
}
