//! Which keys a scan's filters allow in each indexed column: the part of a
//! predicate the index can answer. `col = literal`, `literal = col` and
//! `col IN (literals)` give a column's keys; `AND` intersects what both
//! sides allow (a column constrained on one side only keeps that side's
//! keys), `OR` unites the keys of a column both sides constrain and forgets
//! the rest. Anything else constrains nothing, so the file is scanned.
//!
//! A key is the bytes the column's filters hash (`keys.rs`): integers
//! widened to 64 bits, strings and binaries as their bytes. A comparison
//! reaches the index through a cast only where the cast keeps those bytes
//! (a wider integer of a signedness that holds every value, another string
//! or binary type, a dictionary's values): `CAST(int32_col AS BIGINT) =
//! 5_000_000_000` allows key 5,000,000,000, which no `Int32` row has, and
//! every file is rightly skipped. A `NULL` literal matches no row; it is
//! dropped from an `IN` list, and `col = NULL` constrains nothing (the
//! engine answers it without rows anyway).

use crate::keys::int_key;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::TreeNode;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use std::collections::{BTreeMap, BTreeSet};

/// The keys each constrained column (by its position among the indexed
/// columns) may hold in a row that satisfies the filters. An empty set: no
/// row can.
pub(crate) type KeySets = BTreeMap<usize, BTreeSet<Vec<u8>>>;

/// How a key of a type is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    /// Integers, widened to 64 bits.
    Int,
    /// Strings and binaries, as their bytes.
    Bytes,
}

fn family(t: &DataType) -> Option<Family> {
    use DataType::*;
    match t {
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 => Some(Family::Int),
        Utf8 | LargeUtf8 | Utf8View | Binary | LargeBinary | BinaryView | FixedSizeBinary(_) => {
            Some(Family::Bytes)
        }
        Dictionary(_, v) => family(v),
        _ => None,
    }
}

/// Whether `t` can be indexed (its keys have an encoding).
pub(crate) fn indexable(t: &DataType) -> bool {
    family(t).is_some()
}

/// (bits, signed) of an integer type.
fn int_shape(t: &DataType) -> Option<(u8, bool)> {
    use DataType::*;
    Some(match t {
        Int8 => (8, true),
        Int16 => (16, true),
        Int32 => (32, true),
        Int64 => (64, true),
        UInt8 => (8, false),
        UInt16 => (16, false),
        UInt32 => (32, false),
        UInt64 => (64, false),
        _ => return None,
    })
}

/// Whether casting a value of `from` to `to` keeps its key's bytes.
fn cast_keeps_keys(from: &DataType, to: &DataType) -> bool {
    match (from, to) {
        (DataType::Dictionary(_, v), _) => cast_keeps_keys(v, to),
        (_, DataType::Dictionary(_, v)) => cast_keeps_keys(from, v),
        _ => match (int_shape(from), int_shape(to)) {
            (Some((fb, fs)), Some((tb, ts))) => match (fs, ts) {
                (true, true) | (false, false) => tb >= fb,
                (false, true) => tb > fb,
                (true, false) => false,
            },
            (None, None) => {
                family(from) == Some(Family::Bytes) && family(to) == Some(Family::Bytes)
            }
            _ => false,
        },
    }
}

/// The indexed column `expr` reads (through casts that keep keys), by
/// position, with the type it is compared as.
fn key_column(expr: &Expr, columns: &[(String, DataType)]) -> Option<(usize, DataType)> {
    match expr {
        Expr::Column(c) => columns
            .iter()
            .position(|(name, _)| *name == c.name)
            .map(|i| (i, columns[i].1.clone())),
        Expr::Cast(c) => {
            let (i, from) = key_column(&c.expr, columns)?;
            let to = c.field.data_type();
            cast_keeps_keys(&from, to).then(|| (i, to.clone()))
        }
        Expr::TryCast(c) => {
            let (i, from) = key_column(&c.expr, columns)?;
            let to = c.field.data_type();
            cast_keeps_keys(&from, to).then(|| (i, to.clone()))
        }
        _ => None,
    }
}

/// The key of literal `v` compared with a value of type `t`; `None` for a
/// null, or a literal of another encoding.
pub(crate) fn literal_key(v: &ScalarValue, t: &DataType) -> Option<Vec<u8>> {
    use ScalarValue::*;
    if v.is_null() {
        return None;
    }
    let want = family(t)?;
    let int = |x: u64| (want == Family::Int).then(|| int_key(x).to_vec());
    let bytes = |b: &[u8]| (want == Family::Bytes).then(|| b.to_vec());
    match v {
        Int8(Some(x)) => int(*x as i64 as u64),
        Int16(Some(x)) => int(*x as i64 as u64),
        Int32(Some(x)) => int(*x as i64 as u64),
        Int64(Some(x)) => int(*x as u64),
        UInt8(Some(x)) => int(u64::from(*x)),
        UInt16(Some(x)) => int(u64::from(*x)),
        UInt32(Some(x)) => int(u64::from(*x)),
        UInt64(Some(x)) => int(*x),
        Utf8(Some(s)) | LargeUtf8(Some(s)) | Utf8View(Some(s)) => bytes(s.as_bytes()),
        Binary(Some(b)) | LargeBinary(Some(b)) | BinaryView(Some(b)) => bytes(b),
        FixedSizeBinary(_, Some(b)) => bytes(b),
        Dictionary(_, inner) => literal_key(inner, t),
        _ => None,
    }
}

/// Whether `expr` is a literal no row satisfies: `NULL` or `false`.
fn never(expr: &Expr) -> bool {
    matches!(literal(expr), Some(v) if v.is_null() || *v == ScalarValue::Boolean(Some(false)))
}

fn literal(expr: &Expr) -> Option<&ScalarValue> {
    match expr {
        Expr::Literal(v, _) => Some(v),
        _ => None,
    }
}

/// What `expr` allows of the indexed `columns` (name and type).
pub(crate) fn key_sets(expr: &Expr, columns: &[(String, DataType)]) -> KeySets {
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
            Operator::And => and(key_sets(left, columns), key_sets(right, columns)),
            // `NULL OR p` and `false OR p` hold exactly where `p` does (the
            // engine writes `x IN (NULL, 5)` as `NULL OR x = 5`).
            Operator::Or if never(left) => key_sets(right, columns),
            Operator::Or if never(right) => key_sets(left, columns),
            Operator::Or => or(key_sets(left, columns), key_sets(right, columns)),
            Operator::Eq => equality(left, right, columns)
                .or_else(|| equality(right, left, columns))
                .into_iter()
                .collect(),
            _ => KeySets::new(),
        },
        Expr::InList(l) if !l.negated => {
            let Some((i, t)) = key_column(&l.expr, columns) else {
                return KeySets::new();
            };
            let mut keys = BTreeSet::new();
            for e in &l.list {
                match literal(e) {
                    Some(v) if v.is_null() => {}
                    Some(v) => match literal_key(v, &t) {
                        Some(k) => {
                            keys.insert(k);
                        }
                        None => return KeySets::new(),
                    },
                    None => return KeySets::new(),
                }
            }
            if keys.is_empty() {
                return KeySets::new();
            }
            KeySets::from([(i, keys)])
        }
        _ => KeySets::new(),
    }
}

/// `col = literal`: the column and its one key.
fn equality(
    col: &Expr,
    lit: &Expr,
    columns: &[(String, DataType)],
) -> Option<(usize, BTreeSet<Vec<u8>>)> {
    let (i, t) = key_column(col, columns)?;
    let key = literal_key(literal(lit)?, &t)?;
    Some((i, BTreeSet::from([key])))
}

/// Whether every column that `filters` compare with `=` or `IN` (the
/// comparisons Parquet's own Bloom filters answer) is an indexed one: then
/// the index has answered all a Bloom filter of the files could, and
/// reading theirs would cost a request per file for nothing.
pub(crate) fn equalities_all_indexed(filters: &[Expr], columns: &[(String, DataType)]) -> bool {
    let mut all = true;
    for f in filters {
        let _ = f.apply(|e| {
            let compared: Vec<&Expr> = match e {
                Expr::BinaryExpr(BinaryExpr {
                    left,
                    op: Operator::Eq,
                    right,
                }) => vec![left, right],
                Expr::InList(l) => vec![&l.expr],
                _ => vec![],
            };
            for side in compared {
                let names = side.column_refs();
                if names
                    .iter()
                    .any(|c| !columns.iter().any(|(n, _)| *n == c.name))
                {
                    all = false;
                }
            }
            Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
        });
    }
    all
}

/// Both must hold: a column constrained by both may hold what both allow.
pub(crate) fn and(mut a: KeySets, b: KeySets) -> KeySets {
    for (i, keys) in b {
        match a.get_mut(&i) {
            Some(have) => have.retain(|k| keys.contains(k)),
            None => {
                a.insert(i, keys);
            }
        }
    }
    a
}

/// Either holds: only a column both constrain stays constrained.
fn or(a: KeySets, mut b: KeySets) -> KeySets {
    a.into_iter()
        .filter_map(|(i, mut keys)| {
            let other = b.remove(&i)?;
            keys.extend(other);
            Some((i, keys))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::logical_expr::{cast, col, lit, try_cast};

    fn columns() -> Vec<(String, DataType)> {
        vec![
            ("id".into(), DataType::Int32),
            (
                "name".into(),
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            ),
            ("u".into(), DataType::UInt64),
        ]
    }

    fn sets(e: Expr) -> Vec<(usize, Vec<Vec<u8>>)> {
        key_sets(&e, &columns())
            .into_iter()
            .map(|(i, k)| (i, k.into_iter().collect()))
            .collect()
    }

    fn int(x: i64) -> Vec<u8> {
        int_key(x as u64).to_vec()
    }

    #[test]
    fn equalities_and_in_lists_give_keys_through_and_and_or() {
        assert_eq!(sets(col("id").eq(lit(5i32))), [(0, vec![int(5)])]);
        assert_eq!(sets(lit(-5i64).eq(col("id"))), [(0, vec![int(-5)])]);
        assert_eq!(
            sets(col("id").in_list(vec![lit(1i32), lit(2i32)], false)),
            [(0, vec![int(1), int(2)])]
        );
        assert!(sets(col("id").in_list(vec![lit(1i32)], true)).is_empty());
        assert_eq!(
            sets(col("id").eq(lit(1i32)).or(col("id").eq(lit(2i32)))),
            [(0, vec![int(1), int(2)])]
        );
        // An OR over two columns constrains neither.
        assert!(sets(col("id").eq(lit(1i32)).or(col("u").eq(lit(2u64)))).is_empty());
        // An AND keeps both, and intersects a column constrained twice.
        let both = col("id").eq(lit(1i32)).and(col("name").eq(lit("x")));
        assert_eq!(sets(both), [(0, vec![int(1)]), (1, vec![b"x".to_vec()])]);
        let never = col("id").eq(lit(1i32)).and(col("id").eq(lit(2i32)));
        assert_eq!(sets(never), [(0, vec![])]);
        // Other comparisons constrain nothing.
        assert!(sets(col("id").gt(lit(1i32))).is_empty());
    }

    #[test]
    fn bloom_filters_are_needed_only_for_equalities_on_unindexed_columns() {
        let cols = columns();
        let on = |e: Expr| equalities_all_indexed(&[e], &cols);
        assert!(on(col("id").eq(lit(1i32)).and(col("v").gt(lit(0.5)))));
        assert!(on(col("name").in_list(vec![lit("a")], false)));
        assert!(!on(col("id").eq(lit(1i32)).and(col("grp").eq(lit("g")))));
        assert!(!on(col("grp")
            .in_list(vec![lit("a")], false)
            .or(col("id").eq(lit(2i32)))));
    }

    #[test]
    fn nulls_casts_and_dictionaries_keep_the_bytes_or_constrain_nothing() {
        assert!(sets(col("id").eq(lit(ScalarValue::Int32(None)))).is_empty());
        assert_eq!(
            sets(col("id").in_list(vec![lit(ScalarValue::Int32(None)), lit(3i32)], false)),
            [(0, vec![int(3)])]
        );
        assert!(sets(col("id").in_list(vec![lit(ScalarValue::Int32(None))], false)).is_empty());
        // The engine's form of `id IN (NULL, 3)`.
        let null_or = lit(ScalarValue::Boolean(None)).or(col("id").eq(lit(3i32)));
        assert_eq!(sets(null_or), [(0, vec![int(3)])]);
        let false_or = col("id").eq(lit(3i32)).or(lit(false));
        assert_eq!(sets(false_or), [(0, vec![int(3)])]);
        assert!(sets(lit(true).or(col("id").eq(lit(3i32)))).is_empty());
        // Widening casts keep the key; narrowing and sign-changing ones do not.
        let big = 5_000_000_000i64;
        assert_eq!(
            sets(cast(col("id"), DataType::Int64).eq(lit(big))),
            [(0, vec![int(big)])]
        );
        assert!(sets(cast(col("id"), DataType::Int16).eq(lit(5i16))).is_empty());
        assert!(sets(cast(col("u"), DataType::Int64).eq(lit(5i64))).is_empty());
        assert!(sets(try_cast(col("id"), DataType::UInt64).eq(lit(5u64))).is_empty());
        // A string against a dictionary of strings, either way round.
        let dict =
            ScalarValue::Dictionary(Box::new(DataType::Int32), Box::new(ScalarValue::from("a")));
        assert_eq!(sets(col("name").eq(lit(dict))), [(1, vec![b"a".to_vec()])]);
        assert_eq!(
            sets(cast(col("name"), DataType::Utf8).eq(lit("b"))),
            [(1, vec![b"b".to_vec()])]
        );
        // Another encoding: a string literal against an integer column.
        assert!(sets(col("id").eq(lit("5"))).is_empty());
        assert!(sets(cast(col("name"), DataType::Int64).eq(lit(5i64))).is_empty());
    }
}
