//! `bloom_contains(filter BINARY, key) -> BOOLEAN`: whether `key` may be in
//! the set the filter message describes.
//!
//! A scalar UDF, not a custom `PhysicalExpr`: a UDF crosses to
//! datafusion-distributed's workers by name with its literal arguments and
//! needs no codec, where a `PhysicalExpr` needs `try_encode_expr`, which
//! datafusion-distributed's composed codec drops (apache/datafusion #24829).
//! A worker without the UDF registered fails the query ("... not provided for
//! scalar function bloom_contains"), loudly.
//!
//! The message is decoded once per process ([`crate::cache`]); each batch
//! then costs one 128-bit hash of the message (~0.1 µs per KB) plus one
//! lookup per key. Null keys give null; a corrupt, unknown or over-budget
//! message fails the query.

use crate::cache;
use crate::error::{BloomUdfError, Result};
use crate::keys;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray};
use datafusion::arrow::compute::concat;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use std::sync::Arc;

/// The SQL name.
pub(crate) const NAME: &str = "bloom_contains";

/// The `bloom_contains` scalar function.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct BloomContains {
    signature: Signature,
}

impl Default for BloomContains {
    fn default() -> Self {
        BloomContains {
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

/// `bloom_contains` as a registrable UDF: `bloom_contains(filter, key)` is
/// false only for a key the filter message cannot hold, null for a null key.
///
/// ```
/// use datafusion::prelude::SessionContext;
/// use filterstore_datafusion::{bloom_agg_udaf, bloom_contains_udf};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # tokio::runtime::Runtime::new()?.block_on(async {
/// let ctx = SessionContext::new();
/// ctx.register_udf(bloom_contains_udf().as_ref().clone());
/// ctx.register_udaf(bloom_agg_udaf().as_ref().clone());
/// let out = ctx
///     .sql("WITH f AS (SELECT bloom_agg(value) AS m FROM generate_series(1, 100)) \
///           SELECT count(*) FROM generate_series(1, 1000), f WHERE bloom_contains(f.m, value)")
///     .await?
///     .collect()
///     .await?;
/// let kept = datafusion::arrow::array::AsArray::as_primitive::<
///     datafusion::arrow::datatypes::Int64Type,
/// >(out[0].column(0))
/// .value(0);
/// assert!(kept >= 100); // every key of the filter, and a few false positives
/// assert!(kept < 150);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })
/// # }
/// ```
pub fn bloom_contains_udf() -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::new_from_impl(BloomContains::default()))
}

/// Whether `t` can carry a filter message.
pub(crate) fn is_binary(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::Null
    )
}

/// The bytes of a binary scalar; `None` for null.
pub(crate) fn scalar_bytes<'a>(
    function: &'static str,
    v: &'a ScalarValue,
) -> Result<Option<&'a [u8]>> {
    match v {
        ScalarValue::Binary(b) | ScalarValue::LargeBinary(b) | ScalarValue::BinaryView(b) => {
            Ok(b.as_deref())
        }
        ScalarValue::Null => Ok(None),
        other => Err(BloomUdfError::BadArgument {
            function,
            reason: format!("the filter must be BINARY, found {}", other.data_type()),
        }
        .into()),
    }
}

/// Row `i` of a binary array; `None` for null.
pub(crate) fn array_bytes(a: &ArrayRef, i: usize) -> Option<&[u8]> {
    if a.is_null(i) {
        return None;
    }
    match a.data_type() {
        DataType::Binary => Some(a.as_binary::<i32>().value(i)),
        DataType::LargeBinary => Some(a.as_binary::<i64>().value(i)),
        DataType::BinaryView => Some(a.as_binary_view().value(i)),
        _ => None,
    }
}

impl ScalarUDFImpl for BloomContains {
    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        let bad = |reason: String| BloomUdfError::BadArgument {
            function: NAME,
            reason,
        };
        if !is_binary(&arg_types[0]) {
            return Err(bad(format!("the filter must be BINARY, found {}", arg_types[0])).into());
        }
        if !keys::is_supported(&arg_types[1]) && arg_types[1] != DataType::Null {
            return Err(BloomUdfError::UnsupportedKeyType {
                function: NAME,
                data_type: arg_types[1].clone(),
            }
            .into());
        }
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let [filter, key] =
            <[ColumnarValue; 2]>::try_from(args.args).map_err(|_| BloomUdfError::BadArgument {
                function: NAME,
                reason: "takes two arguments: (filter, key)".into(),
            })?;
        let scalar_key = matches!(key, ColumnarValue::Scalar(_));
        let keys = key.into_array(if scalar_key { 1 } else { rows })?;
        let answers = match filter {
            ColumnarValue::Scalar(v) => match scalar_bytes(NAME, &v)? {
                None => BooleanArray::new_null(keys.len()),
                Some(bytes) => contains_one_message(bytes, &keys)?,
            },
            ColumnarValue::Array(messages) => contains_per_row(&messages, &keys)?,
        };
        if scalar_key {
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(
                &answers, 0,
            )?));
        }
        Ok(ColumnarValue::Array(Arc::new(answers)))
    }
}

fn contains_one_message(bytes: &[u8], keys: &ArrayRef) -> Result<BooleanArray> {
    if keys.data_type() == &DataType::Null {
        return Ok(BooleanArray::new_null(keys.len()));
    }
    let decoded = cache::decoded(NAME, bytes)?;
    keys::contains_array(&decoded.filter, keys)
}

/// A filter per row (e.g. after a join with the aggregate's result): rows
/// are grouped into runs of the same message, each run answered at once.
fn contains_per_row(messages: &ArrayRef, keys: &ArrayRef) -> Result<BooleanArray> {
    if messages.len() != keys.len() {
        return Err(BloomUdfError::BadArgument {
            function: NAME,
            reason: "filter and key columns differ in length".into(),
        }
        .into());
    }
    let mut parts: Vec<ArrayRef> = Vec::new();
    let mut start = 0;
    while start < keys.len() {
        let msg = array_bytes(messages, start);
        let mut end = start + 1;
        while end < keys.len() && array_bytes(messages, end) == msg {
            end += 1;
        }
        let slice = keys.slice(start, end - start);
        let part = match msg {
            None => BooleanArray::new_null(slice.len()),
            Some(bytes) => contains_one_message(bytes, &slice)?,
        };
        parts.push(Arc::new(part));
        start = end;
    }
    if parts.is_empty() {
        return Ok(BooleanArray::new_null(0));
    }
    let refs: Vec<&dyn Array> = parts.iter().map(|p| p.as_ref()).collect();
    Ok(concat(&refs)?.as_boolean().clone())
}
