//! The build keys' bounds: the least and the greatest key of each key
//! column, carried beside the filter so that a Parquet scan can prune row
//! groups, pages and files by their statistics ([`super::scan`]).
//!
//! Each tap task gathers its keys' bounds while it inserts them
//! ([`BoundsAcc`]), the coordinator widens the tasks' bounds into one
//! ([`KeyBounds::widen`]), and the unit a probe task receives carries them
//! (docs/FORMAT.md § 16, frame kind 3). Bounds are kept only for types whose
//! order is the one `<=` and `>=` compare by and whose equality is the
//! join's: integers, dates, decimals and strings. A float key (where NaN and
//! -0.0 order unlike they join) gets no bounds, and neither does any column
//! of a task that could not gather them: a bound that does not hold every
//! build key would drop rows that join, so where in doubt there is none.

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::functions_aggregate::min_max::{MaxAccumulator, MinAccumulator};
use datafusion::logical_expr::{Accumulator, Operator};
use datafusion::physical_expr::expressions::{lit, BinaryExpr, IsNullExpr};
use datafusion::physical_expr::PhysicalExpr;
use datafusion_proto::protobuf;
use prost::Message;
use std::cmp::Ordering;
use std::sync::Arc;

/// The most bytes the encoded bounds of one filter may take; larger bounds
/// (very long string keys) are not sent, and the scan prunes by the filter
/// alone.
pub(super) const MAX_BOUNDS_BYTES: usize = 16 << 10;

/// One key column's bounds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ColumnBounds {
    /// No build row had a non-null key in this column.
    Empty,
    /// Every non-null key lies within `min..=max`.
    Range(ScalarValue, ScalarValue),
    /// Not known (a type without bounds, or a task without them).
    Unknown,
}

/// The bounds of every key column of one filter.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct KeyBounds(pub(crate) Vec<ColumnBounds>);

/// Whether keys of type `t` get bounds (see the module documentation).
pub(super) fn has_bounds(t: &DataType) -> bool {
    use DataType::*;
    matches!(
        t,
        Int8 | Int16
            | Int32
            | Int64
            | UInt8
            | UInt16
            | UInt32
            | UInt64
            | Date32
            | Date64
            | Decimal128(_, _)
            | Decimal256(_, _)
            | Utf8
            | LargeUtf8
            | Utf8View
    )
}

/// `a` and `b` ordered, when both are non-null values of one type.
fn order(a: &ScalarValue, b: &ScalarValue) -> Option<Ordering> {
    if a.is_null() || b.is_null() || a.data_type() != b.data_type() {
        return None;
    }
    a.partial_cmp(b)
}

impl ColumnBounds {
    /// The bounds holding both `self`'s keys and `other`'s.
    fn widen(&self, other: &ColumnBounds) -> ColumnBounds {
        use ColumnBounds::*;
        match (self, other) {
            (Unknown, _) | (_, Unknown) => Unknown,
            (Empty, b) | (b, Empty) => b.clone(),
            (Range(a0, a1), Range(b0, b1)) => match (order(a0, b0), order(a1, b1)) {
                (Some(lo), Some(hi)) => Range(
                    if lo.is_le() { a0 } else { b0 }.clone(),
                    if hi.is_ge() { a1 } else { b1 }.clone(),
                ),
                _ => Unknown,
            },
        }
    }

    /// A range whose ends are non-null values of a type with bounds, the
    /// least first; anything else is unknown.
    fn checked(self) -> ColumnBounds {
        match &self {
            ColumnBounds::Range(lo, hi)
                if has_bounds(&lo.data_type()) && order(lo, hi).is_some_and(Ordering::is_le) =>
            {
                self
            }
            ColumnBounds::Range(..) => ColumnBounds::Unknown,
            _ => self,
        }
    }
}

impl KeyBounds {
    /// Bounds of `n` columns, none known.
    pub(crate) fn unknown(n: usize) -> KeyBounds {
        KeyBounds(vec![ColumnBounds::Unknown; n])
    }

    /// Whether any column is known (else the bounds prune nothing).
    pub(crate) fn any_known(&self) -> bool {
        self.0.iter().any(|c| !matches!(c, ColumnBounds::Unknown))
    }

    /// `self` widened to hold `other`'s keys too (bounds of another column
    /// count become unknown).
    pub(crate) fn widen(&mut self, other: &KeyBounds) {
        if self.0.len() != other.0.len() {
            *self = KeyBounds::unknown(self.0.len());
            return;
        }
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a = a.widen(b);
        }
    }

    /// The bytes of docs/FORMAT.md § 16 ("bounds"); `None` when over
    /// [`MAX_BOUNDS_BYTES`] or a value cannot be encoded.
    pub(crate) fn encode(&self) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        out.extend_from_slice(&u16::try_from(self.0.len()).ok()?.to_le_bytes());
        for c in &self.0 {
            match c {
                ColumnBounds::Empty => out.push(0),
                ColumnBounds::Unknown => out.push(2),
                ColumnBounds::Range(lo, hi) => {
                    out.push(1);
                    for v in [lo, hi] {
                        let bytes = protobuf::ScalarValue::try_from(v).ok()?.encode_to_vec();
                        out.extend_from_slice(&u32::try_from(bytes.len()).ok()?.to_le_bytes());
                        out.extend_from_slice(&bytes);
                    }
                }
            }
            if out.len() > MAX_BOUNDS_BYTES {
                return None;
            }
        }
        Some(out)
    }

    /// The bounds `bytes` encode. A range that is not one (ends of other
    /// types, the greater first, a type without bounds) decodes as unknown.
    pub(crate) fn decode(bytes: &[u8]) -> Result<KeyBounds, String> {
        if bytes.len() > MAX_BOUNDS_BYTES {
            return Err(format!("bounds of {} bytes", bytes.len()));
        }
        let mut r = bytes;
        let mut take = |n: usize| -> Result<&[u8], String> {
            if n > r.len() {
                return Err(format!(
                    "bounds truncated: {n} bytes needed, {} left",
                    r.len()
                ));
            }
            let (head, rest) = r.split_at(n);
            r = rest;
            Ok(head)
        };
        let n = u16::from_le_bytes([take(1)?[0], take(1)?[0]]) as usize;
        // Each column takes at least its tag byte.
        if n > bytes.len() {
            return Err(format!("{n} bounds columns in {} bytes", bytes.len()));
        }
        let mut cols = Vec::with_capacity(n);
        for _ in 0..n {
            let c = match take(1)?[0] {
                0 => ColumnBounds::Empty,
                2 => ColumnBounds::Unknown,
                1 => {
                    let mut ends = Vec::with_capacity(2);
                    for _ in 0..2 {
                        let len = take(4)?;
                        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
                        let proto = protobuf::ScalarValue::decode(take(len)?)
                            .map_err(|e| format!("a bound: {e}"))?;
                        ends.push(
                            ScalarValue::try_from(&proto).map_err(|e| format!("a bound: {e}"))?,
                        );
                    }
                    let hi = ends.pop().unwrap_or(ScalarValue::Null);
                    let lo = ends.pop().unwrap_or(ScalarValue::Null);
                    ColumnBounds::Range(lo, hi).checked()
                }
                t => return Err(format!("bounds column tag {t}")),
            };
            cols.push(c);
        }
        if !r.is_empty() {
            return Err(format!("{} trailing bytes after the bounds", r.len()));
        }
        Ok(KeyBounds(cols))
    }

    /// The predicate "each key within its column's bounds" over `keys`
    /// (one per key column, as the bounds, of `types`);
    /// `nulls_pass`: a row with a null key satisfies it. `None` when no
    /// column's bounds apply (unknown, or a key of another type).
    pub(crate) fn predicate(
        &self,
        keys: &[Arc<dyn PhysicalExpr>],
        types: &[DataType],
        nulls_pass: bool,
    ) -> Option<Arc<dyn PhysicalExpr>> {
        if keys.len() != self.0.len() || types.len() != keys.len() {
            return None;
        }
        let mut terms: Vec<Arc<dyn PhysicalExpr>> = Vec::new();
        for ((k, t), b) in keys.iter().zip(types).zip(&self.0) {
            let term: Arc<dyn PhysicalExpr> = match b {
                ColumnBounds::Unknown => continue,
                ColumnBounds::Empty => lit(false),
                ColumnBounds::Range(lo, hi) => {
                    if *t != lo.data_type() {
                        continue;
                    }
                    let ge = binary(Arc::clone(k), Operator::GtEq, lit(lo.clone()));
                    let le = binary(Arc::clone(k), Operator::LtEq, lit(hi.clone()));
                    binary(ge, Operator::And, le)
                }
            };
            terms.push(term);
        }
        let all = terms
            .into_iter()
            .reduce(|a, b| binary(a, Operator::And, b))?;
        if !nulls_pass {
            return Some(all);
        }
        // A row whose key has a null column may join: it passes.
        let any_null = keys
            .iter()
            .map(|k| Arc::new(IsNullExpr::new(Arc::clone(k))) as Arc<dyn PhysicalExpr>)
            .reduce(|a, b| binary(a, Operator::Or, b))?;
        Some(binary(any_null, Operator::Or, all))
    }
}

fn binary(
    l: Arc<dyn PhysicalExpr>,
    op: Operator,
    r: Arc<dyn PhysicalExpr>,
) -> Arc<dyn PhysicalExpr> {
    Arc::new(BinaryExpr::new(l, op, r))
}

/// One partition's bounds, gathered batch by batch.
pub(super) struct BoundsAcc(Vec<Option<(MinAccumulator, MaxAccumulator)>>);

impl std::fmt::Debug for BoundsAcc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BoundsAcc({} columns)", self.0.len())
    }
}

impl BoundsAcc {
    /// Bounds of keys of these types (a type without bounds stays unknown).
    pub(super) fn new(types: &[DataType]) -> BoundsAcc {
        let acc = |t: &DataType| {
            if !has_bounds(t) {
                return None;
            }
            Some((
                MinAccumulator::try_new(t).ok()?,
                MaxAccumulator::try_new(t).ok()?,
            ))
        };
        BoundsAcc(types.iter().map(acc).collect())
    }

    /// Takes one batch's key columns; a column that fails loses its bounds.
    pub(super) fn update(&mut self, columns: &[ArrayRef]) {
        for (slot, col) in self.0.iter_mut().zip(columns) {
            if let Some((lo, hi)) = slot {
                let col = [Arc::clone(col)];
                if lo.update_batch(&col).is_err() || hi.update_batch(&col).is_err() {
                    *slot = None;
                }
            }
        }
    }

    /// The bounds of every key taken.
    pub(super) fn finish(&mut self) -> KeyBounds {
        let col = |slot: &mut Option<(MinAccumulator, MaxAccumulator)>| {
            let Some((lo, hi)) = slot else {
                return ColumnBounds::Unknown;
            };
            match (lo.evaluate(), hi.evaluate()) {
                (Ok(lo), Ok(hi)) if lo.is_null() && hi.is_null() => ColumnBounds::Empty,
                (Ok(lo), Ok(hi)) => ColumnBounds::Range(lo, hi).checked(),
                _ => ColumnBounds::Unknown,
            }
        };
        KeyBounds(self.0.iter_mut().map(col).collect())
    }
}

#[cfg(test)]
mod tests;
