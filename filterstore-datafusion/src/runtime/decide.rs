//! Which join side gets a runtime filter, and why.
//!
//! A hash join reads its build side (the left child) whole before it reads
//! the probe side, so a filter is made of the build side's keys and applied
//! to the probe side (the right child); where none is placed, one the other
//! way may be ([`super::reverse`]). The probe side may be
//! filtered only where dropping one of its rows whose key is not on the
//! build side can never change the join's output:
//!
//! | join type | probe (right) side filtered | why |
//! |---|---|---|
//! | `Inner`, `LeftSemi`, `RightSemi` | yes | a right row without a partner is never output |
//! | `Left` (outer) | yes | unmatched right rows are never output; left rows are kept whatever the right side holds |
//! | `LeftAnti`, `LeftMark` | yes | a left row's outcome depends only on the right rows that match it, and those all pass |
//! | `Right`, `RightAnti`, `RightMark`, `Full` | never | the right side's rows are kept (or marked) whether or not they match |
//! | null-aware (`NOT IN`) | never | one null on the right changes every left row's outcome |
//!
//! A broadcast (`CollectLeft`) join is never filtered (DataFusion's own
//! dynamic filter prunes its probe side exactly, in-process), nor is a
//! sort-merge join (both sides are read at once). Keys are the join's `on`
//! expressions, coercions included; a key type without an encoding, or a
//! key expression that may fail on rows the join never sees (a division
//! moved below a filter), is skipped. With `NullEqualsNull`, rows with a
//! null key pass.
//!
//! Statistics then skip what cannot pay: a probe side known to be small,
//! and a build side that keeps (nearly) every key of its table when the
//! probe key's values lie within that table's (a foreign key: nearly every
//! probe row would pass). Everything else is placed and decided at run
//! time (the built filter against the probe key's distinct values, and
//! what the filter drops, [`super::probe::ProbePolicy`]).

use super::config::RuntimeFilterConfig;
use super::lineage::{keeps_every_key, reach, Keys, Point};
use super::report::SkipReason;
use super::stats::{range_size, within, Stats};
use crate::rowkey;
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{JoinSide, NullEquality};
use datafusion::error::Result;
use datafusion::logical_expr::{JoinType, Operator};
use datafusion::physical_expr::expressions::{
    BinaryExpr, CastExpr, Column, Literal, NegativeExpr, TryCastExpr,
};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::ExecutionPlan;
use std::sync::Arc;

/// A probe side to filter.
pub(super) struct ProbePlan {
    /// Where the filter goes on the probe side.
    pub points: Vec<Point>,
    /// The build side's key expressions (the tap's).
    pub build_keys: Keys,
    /// Rows the probe side sends into its shuffle(s), if statistics tell.
    pub probe_rows: Option<u64>,
    /// Rows of the build side, if statistics tell.
    pub build_rows: Option<u64>,
    /// Rows of the table the build key comes from, if statistics tell.
    pub build_source_rows: Option<u64>,
    /// Share of the probe rows expected to pass, where statistics tell.
    pub pass: Option<f64>,
    /// An upper bound of the probe key's distinct values.
    pub probe_distinct: Option<f64>,
    /// Whether rows with a null key pass (`NullEqualsNull`).
    pub nulls_pass: bool,
    /// The build side keeps every key of its table, and statistics cannot
    /// tell whether the probe key's values lie within them (a composite
    /// key, or no bounds): likely a foreign key, which the filter would pass
    /// whole. The rule then prefers a reverse filter where one is allowed.
    pub whole_build: bool,
}

/// Whether `side` of a join of this type may be filtered by the other
/// side's keys: the table above for the probe (right) side, and the one in
/// [`super::reverse`] for the build (left) side.
pub(super) fn side_allowed(
    join: &HashJoinExec,
    side: JoinSide,
) -> std::result::Result<(), SkipReason> {
    use JoinType::*;
    if join.null_aware {
        return Err(SkipReason::JoinType("null-aware join (NOT IN)".into()));
    }
    let t = join.join_type();
    let allowed = match side {
        JoinSide::Left => matches!(
            t,
            Inner | LeftSemi | RightSemi | Right | RightAnti | RightMark
        ),
        _ => matches!(t, Inner | Left | LeftSemi | RightSemi | LeftAnti | LeftMark),
    };
    if allowed {
        Ok(())
    } else {
        Err(SkipReason::JoinType(format!(
            "a {t} join keeps this side's rows"
        )))
    }
}

/// Where a filter goes on a join side: the places, the side's keys, and
/// the other side's keys.
pub(super) type Places = (Vec<Point>, Keys, Keys);

/// The places for a filter on `side` of `join` (of the other side's keys),
/// when the join type allows one: the keys encode alike, their lineage
/// reaches below a shuffle on that side, and no key there may fail.
pub(super) fn places(
    join: &HashJoinExec,
    side: JoinSide,
) -> Result<std::result::Result<Places, SkipReason>> {
    if *join.partition_mode() == PartitionMode::CollectLeft {
        return Ok(Err(SkipReason::Broadcast));
    }
    if let Err(r) = side_allowed(join, side) {
        return Ok(Err(r));
    }
    let (left_keys, right_keys): (Keys, Keys) = join
        .on()
        .iter()
        .map(|(l, r)| (Arc::clone(l), Arc::clone(r)))
        .unzip();
    let ((filtered, keys), (other, other_keys)) = match side {
        JoinSide::Left => ((join.left(), left_keys), (join.right(), right_keys)),
        _ => ((join.right(), right_keys), (join.left(), left_keys)),
    };
    if let Err(r) = key_types(&keys, filtered, &other_keys, other) {
        return Ok(Err(r));
    }
    let found = reach(filtered, keys.clone())?;
    let points: Vec<Point> = found.points.into_iter().filter(|p| p.depth > 0).collect();
    if points.is_empty() {
        return Ok(Err(SkipReason::NoShuffle(found.stops)));
    }
    if let Some(e) = points.iter().find_map(|p| fallible_point(filtered, p)) {
        return Ok(Err(SkipReason::FallibleKey(e)));
    }
    Ok(Ok((points, keys, other_keys)))
}

/// The decision for the probe side of `join` (see the module documentation).
pub(super) fn decide(
    join: &HashJoinExec,
    cfg: &RuntimeFilterConfig,
    stats: &Stats,
) -> Result<std::result::Result<ProbePlan, SkipReason>> {
    let (points, probe_keys, build_keys) = match places(join, JoinSide::Right)? {
        Ok(found) => found,
        Err(r) => return Ok(Err(r)),
    };
    let probe = join.right();
    let plan = with_statistics(join, (points, build_keys, probe_keys), stats, cfg.fp)?;
    if !cfg.force {
        let small = plan.probe_rows.filter(|&r| r < cfg.min_filtered_rows);
        if let Some(rows) = small.filter(|_| !plan.points.iter().any(|p| feeds_build(probe, p))) {
            return Ok(Err(SkipReason::SmallSide { rows }));
        }
        if let Some(pass) = plan.pass.filter(|&p| p > cfg.max_pass_fraction) {
            return Ok(Err(SkipReason::NotSelective { pass }));
        }
    }
    Ok(Ok(plan))
}

/// The first part of a key at `point` (below `root`) that may fail on a
/// row ([`fallible`]).
pub(super) fn fallible_point(root: &Arc<dyn ExecutionPlan>, point: &Point) -> Option<String> {
    let node = super::stats::node_at(root, &point.path)?;
    let schema = node.schema();
    point.keys.iter().find_map(|k| fallible(k, &schema))
}

/// The probe plan with what statistics tell of both sides: rows, the probe
/// key's distinct values, and the pass share of a foreign key.
fn with_statistics(
    join: &HashJoinExec,
    (points, build_keys, probe_keys): (Vec<Point>, Keys, Keys),
    stats: &Stats,
    fp: f64,
) -> Result<ProbePlan> {
    let (build, probe) = (join.left(), join.right());
    let probe_rows = stats.points_rows(probe, &points);
    let build_rows = stats.rows(build);
    let probe_range = stats.key_range(probe, &probe_keys)?;
    let probe_distinct = probe_range
        .as_ref()
        .and_then(range_size)
        .map(|d| probe_rows.map_or(d, |r| d.min(r as f64)));
    let build_source_rows = stats.source_rows(build, &build_keys)?;
    let build_range = stats.key_range(build, &build_keys)?;
    let whole = keeps_every_key(build, &build_keys)?;
    let whole_build = whole && (probe_range.is_none() || build_range.is_none());
    let pass = if whole {
        foreign_key_pass(
            (build_rows, build_source_rows),
            (probe_range.as_ref(), build_range.as_ref()),
            fp,
        )
    } else {
        None
    };
    Ok(ProbePlan {
        points,
        build_keys,
        whole_build,
        probe_rows,
        build_rows,
        build_source_rows,
        pass,
        probe_distinct,
        nulls_pass: join.null_equality() == NullEquality::NullEqualsNull,
    })
}

/// Whether the rows at `point` go into the build side of a hash join below
/// this one: filtering them shrinks that join's hash table, and the filter
/// that join's own tap builds (TPC-H q21: the nation filter cuts the
/// suppliers that build the lineitem filter from 10,000 keys to 400). Such
/// a place pays however few rows it has.
fn feeds_build(root: &Arc<dyn ExecutionPlan>, point: &Point) -> bool {
    let mut node = Arc::clone(root);
    for &i in &point.path {
        if i == 0 && node.is::<HashJoinExec>() {
            return true;
        }
        let Some(next) = node.children().get(i).map(|c| Arc::clone(c)) else {
            return false;
        };
        node = next;
    }
    false
}

/// The share of probe rows expected to pass when the probe key is a
/// foreign key into the build key's table: the build side's rows over that
/// table's, plus false positives among the rest. Only where statistics
/// support the assumption: the probe key's range lies within the build
/// table's key range. Otherwise `None` (decided at run time).
fn foreign_key_pass(
    (build_rows, source_rows): (Option<u64>, Option<u64>),
    (probe_range, build_range): (Option<&Range>, Option<&Range>),
    fp: f64,
) -> Option<f64> {
    let (rows, source) = (build_rows?, source_rows?);
    let (probe, build) = (probe_range?, build_range?);
    if source == 0 || !within(probe, build) {
        return None;
    }
    let share = (rows as f64 / source as f64).min(1.0);
    Some(share + fp * (1.0 - share))
}

/// A key's (min, max) from statistics.
type Range = (
    datafusion::common::ScalarValue,
    datafusion::common::ScalarValue,
);

/// Whether the key columns encode alike on both sides.
pub(super) fn key_types(
    a: &Keys,
    a_plan: &Arc<dyn ExecutionPlan>,
    b: &Keys,
    b_plan: &Arc<dyn ExecutionPlan>,
) -> std::result::Result<(), SkipReason> {
    let (sa, sb) = (a_plan.schema(), b_plan.schema());
    for (x, y) in a.iter().zip(b) {
        let (tx, ty) = match (x.data_type(&sa), y.data_type(&sb)) {
            (Ok(tx), Ok(ty)) => (tx, ty),
            _ => return Err(SkipReason::KeyType("a key's type is unknown".into())),
        };
        if let Some(r) = rowkey::unsupported(&tx).or_else(|| rowkey::unsupported(&ty)) {
            return Err(SkipReason::KeyType(r));
        }
        if !rowkey::same_encoding(&tx, &ty) {
            return Err(SkipReason::KeyType(format!(
                "{tx} and {ty} encode differently"
            )));
        }
    }
    Ok(())
}

/// The first part of `key` (over `schema`) that may fail on a row: a
/// division or remainder (by zero), a cast that can fail (a narrowing or a
/// parse), anything but columns, literals, safe casts and `+ - *`. `None`
/// when the expression cannot fail.
pub(super) fn fallible(key: &Arc<dyn PhysicalExpr>, schema: &Schema) -> Option<String> {
    let mut found = None;
    let _ = key.apply(|e| {
        let safe = e.is::<Column>()
            || e.is::<Literal>()
            || e.is::<TryCastExpr>()
            || e.is::<NegativeExpr>()
            || e.downcast_ref::<BinaryExpr>().is_some_and(|b| {
                matches!(
                    b.op(),
                    Operator::Plus | Operator::Minus | Operator::Multiply
                )
            })
            || e.downcast_ref::<CastExpr>().is_some_and(|c| {
                c.cast_options().safe
                    || c.expr()
                        .data_type(schema)
                        .is_ok_and(|from| lossless(&from, c.cast_type()))
            });
        if safe {
            return Ok(TreeNodeRecursion::Continue);
        }
        found = Some(e.to_string());
        Ok(TreeNodeRecursion::Stop)
    });
    found
}

/// Whether every value of `from` casts to `to` without an error.
fn lossless(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    if from == to || matches!(to, Utf8 | LargeUtf8 | Utf8View) {
        return true;
    }
    let rank = |t: &DataType| -> Option<(bool, u8)> {
        Some(match t {
            Int8 => (true, 1),
            Int16 => (true, 2),
            Int32 => (true, 4),
            Int64 => (true, 8),
            UInt8 => (false, 1),
            UInt16 => (false, 2),
            UInt32 => (false, 4),
            UInt64 => (false, 8),
            _ => return None,
        })
    };
    match (rank(from), rank(to)) {
        // Signed to signed, unsigned to either, always to a wider type.
        (Some((fs, fw)), Some((ts, tw))) => (fs == ts && tw >= fw) || (!fs && ts && tw > fw),
        (Some(_), None) => matches!(to, Float32 | Float64),
        _ => matches!((from, to), (Float32, Float64) | (Date32, Date64)),
    }
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
