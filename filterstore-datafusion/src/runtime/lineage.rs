//! Where a join key comes from: its lineage, followed by column index.
//!
//! A key expression of a join is an expression over one child's schema,
//! whose columns are indexes into that schema. Names prove nothing (a
//! self-join has two `f_dkey`, a window result may be renamed to a key's
//! name), so the walk below maps indexes, operator by operator, from the
//! join down to where the key's values are produced, and stops wherever an
//! operator does not pass each row's key value through unchanged:
//!
//! | operator | the key passes when | into |
//! |---|---|---|
//! | network boundary (`NetworkShuffleExec`, `…Coalesce…`, `…Broadcast…`), `RepartitionExec`, `CoalesceBatchesExec`, `CoalescePartitionsExec`, `BroadcastExec`, `BloomFilterExec`, `BloomTapExec`, `SortExec` / `SortPreservingMergeExec` without a fetch | always (rows move or reorder, values do not change) | its child |
//! | `ProjectionExec` | each referenced column's expression is a column, a literal, a cast or arithmetic of those (no function: a UDF may be volatile or costly) | its child, columns replaced by their expressions |
//! | `FilterExec` | always (it only drops rows; its own projection is mapped) | its child |
//! | `AggregateExec` | the key reads only grouping columns, without grouping sets or a limit (dropping a group's input rows drops the group, nothing else) | its child, as the grouping expressions |
//! | `HashJoinExec` | the key reads one side only, and that side's rows are kept row for row (inner; the preserved side of an outer join; the output side of a semi, anti or mark join) | that side; for an inner join whose `on` pairs the key's columns with the other side's, both sides |
//! | anything else (windows, unions, limits, unnest, other joins, scans) | never | the filter goes above it |
//!
//! Filtering rows below such an operator by a predicate on the key is
//! equivalent to filtering the rows above it by the same predicate: every
//! row above derives from rows below with the same key value. That is what
//! makes the placement exact.

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::JoinSide;
use datafusion::error::Result;
use datafusion::logical_expr::JoinType;
use datafusion::physical_expr::expressions::{
    BinaryExpr, CastExpr, Column, Literal, NegativeExpr, TryCastExpr,
};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::utils::build_join_schema;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_distributed::{BroadcastExec, NetworkBoundaryExt};
use std::sync::Arc;

use super::exec::BloomFilterExec;
use super::tap::BloomTapExec;

/// Key expressions over some node's output schema.
pub(super) type Keys = Vec<Arc<dyn PhysicalExpr>>;

/// One step of the walk.
pub(super) enum Step {
    /// The key passes into these children (index, key over that child).
    Into(Vec<(usize, Keys)>),
    /// The key stops here; the reason names the operator.
    Stop(String),
}

/// Whether `node` moves rows between tasks (a stage boundary).
pub(super) fn is_boundary(node: &Arc<dyn ExecutionPlan>) -> bool {
    node.as_ref().is_network_boundary()
}

/// Maps `keys` (over `node`'s output) one operator down.
pub(super) fn step(node: &Arc<dyn ExecutionPlan>, keys: &Keys) -> Result<Step> {
    let children = node.children();
    if node.fetch().is_some() {
        // Rows dropped below a limit change which rows it keeps.
        return Ok(Step::Stop(format!("{} has a limit", node.name())));
    }
    let same = |_: ()| Step::Into(vec![(0, keys.clone())]);
    if children.len() == 1 && passes_rows(node) {
        return Ok(same(()));
    }
    if let Some(p) = node.downcast_ref::<ProjectionExec>() {
        let exprs: Vec<_> = p.expr().iter().map(|e| Arc::clone(&e.expr)).collect();
        return Ok(match substitute(keys, &exprs)? {
            Some(k) => Step::Into(vec![(0, k)]),
            None => Step::Stop("a projection computes the key with a function".into()),
        });
    }
    if let Some(f) = node.downcast_ref::<FilterExec>() {
        let keys = match f.projection() {
            None => Some(keys.clone()),
            Some(proj) => {
                let schema = f.input().schema();
                let cols: Vec<Arc<dyn PhysicalExpr>> = proj
                    .iter()
                    .map(|&i| Arc::new(Column::new(schema.field(i).name(), i)) as _)
                    .collect();
                substitute(keys, &cols)?
            }
        };
        return Ok(match keys {
            Some(k) => Step::Into(vec![(0, k)]),
            None => Step::Stop("a filter's projection is not columns".into()),
        });
    }
    if let Some(a) = node.downcast_ref::<AggregateExec>() {
        return aggregate(a, keys);
    }
    if let Some(j) = node.downcast_ref::<HashJoinExec>() {
        return join(j, keys);
    }
    if children.is_empty() {
        return Ok(Step::Stop(format!("{} produces the key", node.name())));
    }
    Ok(Step::Stop(format!(
        "{} does not pass keys row for row",
        node.name()
    )))
}

/// Whether `node` produces every distinct value of `keys` that its source
/// table holds: the key's lineage runs from `node` to a scan without a
/// predicate through operators that drop no row (moves, batches, sorts,
/// projections) or that keep every distinct key (an aggregate grouping by
/// it). `false` through a filter, a join, a runtime filter, a limit, or
/// anything the lineage stops at short of a scan. Then a filter of these
/// keys holds all of the table's keys: a foreign key into that table passes
/// it whole.
pub(super) fn keeps_every_key(node: &Arc<dyn ExecutionPlan>, keys: &Keys) -> Result<bool> {
    match step(node, keys)? {
        Step::Stop(_) => {
            let line = datafusion::physical_plan::displayable(node.as_ref())
                .one_line()
                .to_string();
            Ok(node.children().is_empty() && !line.contains("predicate="))
        }
        Step::Into(children) => {
            let drops_rows = node.is::<FilterExec>()
                || node.is::<HashJoinExec>()
                || node.is::<BloomFilterExec>();
            if drops_rows {
                return Ok(false);
            }
            let kids = node.children();
            for (i, k) in children {
                match kids.get(i) {
                    Some(child) if keeps_every_key(child, &k)? => {}
                    _ => return Ok(false),
                }
            }
            Ok(true)
        }
    }
}

/// Operators that move, batch or reorder rows without changing any value.
fn passes_rows(node: &Arc<dyn ExecutionPlan>) -> bool {
    if is_boundary(node) {
        return true;
    }
    if let Some(s) = node.downcast_ref::<SortExec>() {
        return s.fetch().is_none();
    }
    if let Some(s) = node.downcast_ref::<SortPreservingMergeExec>() {
        return s.fetch().is_none();
    }
    if let Some(c) = node.downcast_ref::<CoalescePartitionsExec>() {
        return c.fetch().is_none();
    }
    // CoalesceBatchesExec is deprecated in DataFusion 55 but may still come
    // from other planners: matched by name, not type.
    let batches = node.name() == "CoalesceBatchesExec";
    (batches
        || node.is::<RepartitionExec>()
        || node.is::<BroadcastExec>()
        || node.is::<BloomFilterExec>()
        || node.is::<BloomTapExec>())
        && node.fetch().is_none()
}

/// Replaces each column `i` of `keys` by `exprs[i]`; `None` when a key would
/// then contain anything but columns, literals, casts and arithmetic.
fn substitute(keys: &Keys, exprs: &[Arc<dyn PhysicalExpr>]) -> Result<Option<Keys>> {
    let mut out = Vec::with_capacity(keys.len());
    for k in keys {
        let mapped = Arc::clone(k)
            .transform_up(|e| {
                let Some(c) = e.downcast_ref::<Column>() else {
                    return Ok(Transformed::no(e));
                };
                match exprs.get(c.index()) {
                    Some(x) => Ok(Transformed::yes(Arc::clone(x))),
                    None => Err(datafusion::error::DataFusionError::Internal(format!(
                        "key column {c} outside its input"
                    ))),
                }
            })?
            .data;
        if !plain(&mapped)? {
            return Ok(None);
        }
        out.push(mapped);
    }
    Ok(Some(out))
}

/// Whether an expression is built only of columns, literals, casts and
/// arithmetic: deterministic and cheap to evaluate again below.
fn plain(e: &Arc<dyn PhysicalExpr>) -> Result<bool> {
    let mut ok = true;
    e.apply(|n| {
        let fine = n.is::<Column>()
            || n.is::<Literal>()
            || n.is::<CastExpr>()
            || n.is::<TryCastExpr>()
            || n.is::<NegativeExpr>()
            || n.is::<BinaryExpr>();
        if !fine {
            ok = false;
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(ok)
}

/// Column indexes an expression reads.
fn columns(e: &Arc<dyn PhysicalExpr>) -> Vec<usize> {
    let mut out = Vec::new();
    let _ = e.apply(|n| {
        if let Some(c) = n.downcast_ref::<Column>() {
            out.push(c.index());
        }
        Ok(TreeNodeRecursion::Continue)
    });
    out
}

fn aggregate(a: &AggregateExec, keys: &Keys) -> Result<Step> {
    let group = a.group_expr();
    if !group.is_single() || a.limit_options().is_some() {
        return Ok(Step::Stop(
            "an aggregate with grouping sets or a limit".into(),
        ));
    }
    let n = group.expr().len();
    if keys.iter().flat_map(columns).any(|i| i >= n) {
        return Ok(Step::Stop(
            "the key is an aggregate's result, not a grouping key".into(),
        ));
    }
    let exprs: Vec<_> = group.expr().iter().map(|(e, _)| Arc::clone(e)).collect();
    Ok(match substitute(keys, &exprs)? {
        Some(k) => Step::Into(vec![(0, k)]),
        None => Step::Stop("an aggregate groups by a function of the key".into()),
    })
}

/// Whether a join keeps the rows of `side` row for row: a predicate on that
/// side's columns may then move below the join.
fn keeps_rows(join_type: JoinType, side: JoinSide) -> bool {
    use JoinType::*;
    match side {
        JoinSide::Left => matches!(join_type, Inner | Left | LeftSemi | LeftAnti | LeftMark),
        JoinSide::Right => matches!(join_type, Inner | Right | RightSemi | RightAnti | RightMark),
        JoinSide::None => false,
    }
}

fn join(j: &HashJoinExec, keys: &Keys) -> Result<Step> {
    let (left, right) = (j.left().schema(), j.right().schema());
    let (_, indices) = build_join_schema(&left, &right, j.join_type());
    let output: Vec<usize> = match &j.projection {
        Some(p) => p.iter().copied().collect(),
        None => (0..indices.len()).collect(),
    };
    let mut side = None;
    let mut child_exprs: Vec<Arc<dyn PhysicalExpr>> = Vec::with_capacity(output.len());
    for &o in &output {
        let Some(ci) = indices.get(o) else {
            return Ok(Step::Stop("a join column outside its schema".into()));
        };
        let schema: &SchemaRef = if ci.side == JoinSide::Left {
            &left
        } else {
            &right
        };
        let name = schema.fields().get(ci.index).map_or("?", |f| f.name());
        child_exprs.push(Arc::new(Column::new(name, ci.index)));
    }
    for k in keys {
        for c in columns(k) {
            let Some(ci) = output.get(c).and_then(|&o| indices.get(o)) else {
                return Ok(Step::Stop("a join column outside its schema".into()));
            };
            match side {
                None => side = Some(ci.side),
                Some(s) if s == ci.side => {}
                Some(_) => {
                    return Ok(Step::Stop(
                        "the key reads both sides of a join below".into(),
                    ))
                }
            }
        }
    }
    let Some(side) = side else {
        return Ok(Step::Stop("the key reads no column".into()));
    };
    if !keeps_rows(*j.join_type(), side) {
        return Ok(Step::Stop(format!(
            "a {} join below may add null rows on the key's side",
            j.join_type()
        )));
    }
    let Some(mapped) = substitute(keys, &child_exprs)? else {
        return Ok(Step::Stop("a join column is not a column".into()));
    };
    let child = if side == JoinSide::Left { 0 } else { 1 };
    let mut into = vec![(child, mapped.clone())];
    if *j.join_type() == JoinType::Inner
        && let Some(other) = same_key_other_side(j, side, &mapped)
    {
        into.push((1 - child, other));
    }
    Ok(Step::Into(into))
}

/// For an inner join whose `on` pairs each key column (a plain column of
/// `side`) with an expression of the other side: the key over the other
/// side. Every output row then has equal values on both, so filtering both
/// sides by the key is exact.
fn same_key_other_side(j: &HashJoinExec, side: JoinSide, keys: &Keys) -> Option<Keys> {
    keys.iter()
        .map(|k| {
            let c = k.downcast_ref::<Column>()?;
            j.on().iter().find_map(|(l, r)| {
                let (mine, other) = if side == JoinSide::Left {
                    (l, r)
                } else {
                    (r, l)
                };
                let m = mine.downcast_ref::<Column>()?;
                (m.index() == c.index()).then(|| Arc::clone(other))
            })
        })
        .collect()
}

/// A place for a filter: above the node at `path` (child indexes from the
/// join's child), on the key `keys` (over that node's output), below
/// `depth` network boundaries.
#[derive(Clone)]
pub(super) struct Point {
    /// Child indexes from the join's child to the node.
    pub path: Vec<usize>,
    /// The key over the node's output.
    pub keys: Keys,
    /// Network boundaries between the join and the node.
    pub depth: usize,
}

/// Where the key of one join side can be filtered, and where its lineage
/// stopped.
pub(super) struct Reach {
    /// Every place to filter; together they cut every row of the side whose
    /// key is not in the filter, below as many shuffles as possible.
    pub points: Vec<Point>,
    /// Why the walk stopped on each branch.
    pub stops: Vec<String>,
}

/// Follows `keys` from `root` (a join's child) down its lineage and chooses,
/// on each branch, the highest place in the deepest stage the key reaches:
/// below every shuffle the key crosses, and above the operators of that
/// stage that only drop rows (so they run first, and the filter sees fewer
/// rows). A place directly below a network boundary (a stage's root, whose
/// type the boundary requires) is never chosen.
pub(super) fn reach(root: &Arc<dyn ExecutionPlan>, keys: Keys) -> Result<Reach> {
    let mut stops = Vec::new();
    let points = walk(root, Vec::new(), keys, 0, false, &mut stops)?;
    Ok(Reach { points, stops })
}

fn walk(
    node: &Arc<dyn ExecutionPlan>,
    path: Vec<usize>,
    keys: Keys,
    depth: usize,
    below_boundary: bool,
    stops: &mut Vec<String>,
) -> Result<Vec<Point>> {
    let eligible = !below_boundary;
    let children = match step(node, &keys)? {
        Step::Stop(reason) => {
            stops.push(reason);
            return Ok(if eligible {
                vec![Point { path, keys, depth }]
            } else {
                Vec::new()
            });
        }
        Step::Into(children) => children,
    };
    let boundary = is_boundary(node);
    let kids = node.children();
    let mut below = Vec::new();
    for (i, k) in children {
        let Some(child) = kids.get(i) else { continue };
        let mut p = path.clone();
        p.push(i);
        below.extend(walk(
            child,
            p,
            k,
            depth + usize::from(boundary),
            boundary,
            stops,
        )?);
    }
    if below.iter().any(|p| p.depth > depth) {
        below.retain(|p| p.depth > depth);
        return Ok(below);
    }
    if eligible {
        return Ok(vec![Point { path, keys, depth }]);
    }
    Ok(below)
}
