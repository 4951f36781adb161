//! The key encoding: how an Arrow value becomes the bytes a filter hashes.
//!
//! One rule for every producer, so that a filter built anywhere (this crate's
//! `bloom_agg`, the core's `build_message`, another language) answers for
//! keys read anywhere else:
//!
//! | Arrow type | bytes hashed |
//! |---|---|
//! | `Int8` … `Int64` | the value sign-extended to 64 bits, 8 bytes little-endian |
//! | `UInt8` … `UInt64` | the value zero-extended to 64 bits, 8 bytes little-endian |
//! | `Utf8`, `LargeUtf8`, `Utf8View` | the UTF-8 bytes, no length, no terminator |
//! | `Binary`, `LargeBinary`, `BinaryView`, `FixedSizeBinary` | the raw bytes |
//!
//! These are the bytes of Parquet's plain encoding of an `INT64` value and of
//! a `BYTE_ARRAY` / `FIXED_LEN_BYTE_ARRAY` value without its length prefix
//! (what Parquet's own Bloom filters hash). Integers are widened to 64 bits
//! rather than kept at their own width because SQL joins compare values, not
//! widths: `Int32` 7 on the build side must find `Int64` 7 on the probe side,
//! or the filter would drop rows that join. The price is that `UInt64`
//! values ≥ 2^63 share their bytes with negative `Int64` values: a false
//! positive across signedness, never a false negative. A string and a binary
//! with the same bytes also share a key.
//!
//! Nulls are never hashed: `bloom_contains` answers null for a null key and
//! `bloom_agg` skips null keys, as a join on a null key matches nothing.
//!
//! A lookup of an array walks it in chunks of [`CHUNK`] keys held on the
//! stack, so evaluating a batch allocates nothing but its output;
//! `for_each_hash` (building) goes key by key.

use crate::error::{BloomUdfError, Result};
use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, BooleanBufferBuilder};
use datafusion::arrow::datatypes::{
    DataType, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt64Type,
    UInt8Type,
};
use filterstore::{BloomRead, HashSpec, KeyHash};

/// Keys looked up per batched call: enough for the core's prefetching
/// pipeline (16 keys in flight) to overlap its misses, small enough for the
/// keys and answers to stay on the stack (2 KiB for integers).
pub(crate) const CHUNK: usize = 256;

/// The 8 bytes an integer key hashes as: the value widened to 64 bits
/// (sign-extended for signed types, zero-extended for unsigned), little-endian.
/// Strings and binaries hash as their raw bytes. Use it to build a filter
/// outside SQL that `bloom_contains` and Parquet readers answer for.
///
/// ```
/// use filterstore::{BitFilter, FilterParams, HashSpec, Layout};
/// use filterstore_datafusion::int_key;
///
/// let params = FilterParams::for_capacity(100, 0.01, Layout::Blocked, HashSpec::xxh3(1))?;
/// let f = BitFilter::new(params)?;
/// f.insert(&int_key(-7_i32 as i64 as u64)); // an Int32 -7, widened
/// assert!(f.contains(&int_key(-7_i64 as u64))); // found as an Int64 -7
/// # Ok::<(), filterstore::ParamError>(())
/// ```
#[inline(always)]
pub fn int_key(widened: u64) -> [u8; 8] {
    widened.to_le_bytes()
}

/// Whether `data_type` has a documented encoding.
pub(crate) fn is_supported(data_type: &DataType) -> bool {
    use DataType::*;
    matches!(
        data_type,
        Int8 | Int16
            | Int32
            | Int64
            | UInt8
            | UInt16
            | UInt32
            | UInt64
            | Utf8
            | LargeUtf8
            | Utf8View
            | Binary
            | LargeBinary
            | BinaryView
            | FixedSizeBinary(_)
    )
}

/// Receives a key column as either widened integers or byte strings. The
/// accessors take a row index and are only called for rows `< len`.
pub(crate) trait KeyVisitor {
    /// An integer column: `get(i)` is row `i` widened to 64 bits.
    fn ints(&mut self, len: usize, get: impl Fn(usize) -> u64);
    /// A byte-string column: `get(i)` is row `i`'s bytes.
    fn bytes<'a>(&mut self, len: usize, get: impl Fn(usize) -> &'a [u8]);
}

/// Dispatches `array` to `visitor` by type; refuses types without an encoding.
pub(crate) fn visit(
    function: &'static str,
    array: &ArrayRef,
    visitor: &mut impl KeyVisitor,
) -> Result<()> {
    if visit_int_column(array, visitor) || visit_bytes_column(array, visitor) {
        return Ok(());
    }
    Err(BloomUdfError::UnsupportedKeyType {
        function,
        data_type: array.data_type().clone(),
    }
    .into())
}

/// Gives an integer column to `visitor`, widened to 64 bits (signed ones
/// sign-extended); `false` if `array` is not one.
fn visit_int_column(array: &ArrayRef, visitor: &mut impl KeyVisitor) -> bool {
    match array.data_type() {
        DataType::Int8 => visit_ints(visitor, array.as_primitive::<Int8Type>().values(), |v| {
            v as i64 as u64
        }),
        DataType::Int16 => visit_ints(visitor, array.as_primitive::<Int16Type>().values(), |v| {
            v as i64 as u64
        }),
        DataType::Int32 => visit_ints(visitor, array.as_primitive::<Int32Type>().values(), |v| {
            v as i64 as u64
        }),
        DataType::Int64 => visit_ints(visitor, array.as_primitive::<Int64Type>().values(), |v| {
            v as u64
        }),
        DataType::UInt8 => visit_ints(
            visitor,
            array.as_primitive::<UInt8Type>().values(),
            u64::from,
        ),
        DataType::UInt16 => visit_ints(
            visitor,
            array.as_primitive::<UInt16Type>().values(),
            u64::from,
        ),
        DataType::UInt32 => visit_ints(
            visitor,
            array.as_primitive::<UInt32Type>().values(),
            u64::from,
        ),
        DataType::UInt64 => visit_ints(visitor, array.as_primitive::<UInt64Type>().values(), |v| v),
        _ => return false,
    }
    true
}

/// Gives a string or binary column to `visitor` as byte strings; `false`
/// if `array` is not one.
fn visit_bytes_column(array: &ArrayRef, visitor: &mut impl KeyVisitor) -> bool {
    let len = array.len();
    match array.data_type() {
        DataType::Utf8 => {
            let a = array.as_string::<i32>();
            visitor.bytes(len, |i| a.value(i).as_bytes())
        }
        DataType::LargeUtf8 => {
            let a = array.as_string::<i64>();
            visitor.bytes(len, |i| a.value(i).as_bytes())
        }
        DataType::Utf8View => {
            let a = array.as_string_view();
            visitor.bytes(len, |i| a.value(i).as_bytes())
        }
        DataType::Binary => {
            let a = array.as_binary::<i32>();
            visitor.bytes(len, |i| a.value(i))
        }
        DataType::LargeBinary => {
            let a = array.as_binary::<i64>();
            visitor.bytes(len, |i| a.value(i))
        }
        DataType::BinaryView => {
            let a = array.as_binary_view();
            visitor.bytes(len, |i| a.value(i))
        }
        DataType::FixedSizeBinary(_) => {
            let a = array.as_fixed_size_binary();
            visitor.bytes(len, |i| a.value(i))
        }
        _ => return false,
    }
    true
}

fn visit_ints<T: Copy>(visitor: &mut impl KeyVisitor, values: &[T], widen: impl Fn(T) -> u64) {
    visitor.ints(values.len(), |i| widen(values[i]))
}

/// Answers `filter.contains(key)` for every row of a key column; null keys
/// give null. Batched through the core's prefetching lookup, with the keys of
/// each chunk on the stack.
pub(crate) fn contains_array(filter: &impl BloomRead, keys: &ArrayRef) -> Result<BooleanArray> {
    let mut v = ContainsVisitor {
        filter,
        out: BooleanBufferBuilder::new(keys.len()),
    };
    visit("bloom_contains", keys, &mut v)?;
    Ok(BooleanArray::new(v.out.finish(), keys.nulls().cloned()))
}

struct ContainsVisitor<'f, F> {
    filter: &'f F,
    out: BooleanBufferBuilder,
}

impl<F: BloomRead> KeyVisitor for ContainsVisitor<'_, F> {
    fn ints(&mut self, len: usize, get: impl Fn(usize) -> u64) {
        let mut keys = [[0u8; 8]; CHUNK];
        let mut hits = [false; CHUNK];
        for start in (0..len).step_by(CHUNK) {
            let n = CHUNK.min(len - start);
            for (j, key) in keys[..n].iter_mut().enumerate() {
                *key = int_key(get(start + j));
            }
            self.filter.contains_many_into(&keys[..n], &mut hits[..n]);
            for hit in &hits[..n] {
                self.out.append(*hit);
            }
        }
    }

    fn bytes<'a>(&mut self, len: usize, get: impl Fn(usize) -> &'a [u8]) {
        let mut keys: [&[u8]; CHUNK] = [&[]; CHUNK];
        let mut hits = [false; CHUNK];
        for start in (0..len).step_by(CHUNK) {
            let n = CHUNK.min(len - start);
            for (j, key) in keys[..n].iter_mut().enumerate() {
                *key = get(start + j);
            }
            self.filter.contains_many_into(&keys[..n], &mut hits[..n]);
            for hit in &hits[..n] {
                self.out.append(*hit);
            }
        }
    }
}

/// Calls `f` with the hash of every non-null key of a column.
pub(crate) fn for_each_hash(
    function: &'static str,
    keys: &ArrayRef,
    spec: HashSpec,
    f: impl FnMut(KeyHash),
) -> Result<()> {
    let mut v = HashVisitor {
        spec,
        nulls: keys.logical_nulls(),
        f,
    };
    visit(function, keys, &mut v)
}

struct HashVisitor<F> {
    spec: HashSpec,
    nulls: Option<datafusion::arrow::buffer::NullBuffer>,
    f: F,
}

impl<F: FnMut(KeyHash)> HashVisitor<F> {
    #[inline]
    fn valid(&self, i: usize) -> bool {
        self.nulls.as_ref().is_none_or(|n| n.is_valid(i))
    }
}

impl<F: FnMut(KeyHash)> KeyVisitor for HashVisitor<F> {
    fn ints(&mut self, len: usize, get: impl Fn(usize) -> u64) {
        for i in 0..len {
            if self.valid(i) {
                (self.f)(self.spec.hash(&int_key(get(i))));
            }
        }
    }

    fn bytes<'a>(&mut self, len: usize, get: impl Fn(usize) -> &'a [u8]) {
        for i in 0..len {
            if self.valid(i) {
                (self.f)(self.spec.hash(get(i)));
            }
        }
    }
}
