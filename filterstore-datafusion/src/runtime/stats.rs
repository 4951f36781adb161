//! What DataFusion's statistics say of a join side: row counts and the
//! range of a key's values. Planning reads statistics only; it never runs
//! anything. One [`Stats`] per planning memoizes the statistics of each
//! node (DataFusion's `StatisticsContext` cache, keyed by the node's
//! address), so a subtree asked about by several joins is computed once.

use super::lineage::{step, Keys, Point, Step};
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
use datafusion::physical_plan::{ExecutionPlan, Statistics};
use std::sync::Arc;

/// Statistics memoized per node (see the module documentation). The cache
/// is keyed by node address, so every node asked about is kept alive for
/// as long as the cache: an address is never reused for another node while
/// its entry lives.
#[derive(Default)]
pub(super) struct Stats {
    ctx: StatisticsContext,
    keep: std::cell::RefCell<Vec<Arc<dyn ExecutionPlan>>>,
}

impl Stats {
    fn of(&self, plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<Statistics>> {
        self.keep.borrow_mut().push(Arc::clone(plan));
        self.ctx.compute(plan.as_ref(), &StatisticsArgs::new()).ok()
    }

    /// Estimated rows `plan` produces.
    pub(super) fn rows(&self, plan: &Arc<dyn ExecutionPlan>) -> Option<u64> {
        self.of(plan)?.num_rows.get_value().map(|n| *n as u64)
    }

    /// Estimated rows reaching the places, summed; `None` when one is unknown.
    pub(super) fn points_rows(
        &self,
        root: &Arc<dyn ExecutionPlan>,
        points: &[Point],
    ) -> Option<u64> {
        points
            .iter()
            .map(|p| node_at(root, &p.path).and_then(|n| self.rows(&n)))
            .sum()
    }

    /// Rows of what produces the key (a scan, typically), the smallest if
    /// several branches produce it.
    pub(super) fn source_rows(
        &self,
        node: &Arc<dyn ExecutionPlan>,
        keys: &Keys,
    ) -> Result<Option<u64>> {
        let mut best: Option<u64> = None;
        for (n, _) in sources(node, keys)? {
            if let Some(r) = self.rows(&n) {
                best = Some(best.map_or(r, |b| b.min(r)));
            }
        }
        Ok(best)
    }

    /// The range of a one-column key's values where it is produced, as
    /// (min, max), when statistics give both on its only branch.
    pub(super) fn key_range(
        &self,
        node: &Arc<dyn ExecutionPlan>,
        keys: &Keys,
    ) -> Result<Option<(ScalarValue, ScalarValue)>> {
        let found = sources(node, keys)?;
        let [(source, keys)] = found.as_slice() else {
            return Ok(None);
        };
        let [key] = keys.as_slice() else {
            return Ok(None);
        };
        let Some(col) = key.downcast_ref::<Column>() else {
            return Ok(None);
        };
        let Some(stats) = self.of(source) else {
            return Ok(None);
        };
        let Some(c) = stats.column_statistics.get(col.index()) else {
            return Ok(None);
        };
        match (c.min_value.get_value(), c.max_value.get_value()) {
            (Some(lo), Some(hi)) if !lo.is_null() && !hi.is_null() => {
                Ok(Some((lo.clone(), hi.clone())))
            }
            _ => Ok(None),
        }
    }
}

/// The node at `path` (child indexes) below `root`.
pub(super) fn node_at(
    root: &Arc<dyn ExecutionPlan>,
    path: &[usize],
) -> Option<Arc<dyn ExecutionPlan>> {
    let mut node = Arc::clone(root);
    for &i in path {
        let next = Arc::clone(node.children().get(i)?);
        node = next;
    }
    Some(node)
}

/// Where a key's lineage ends: the producing node and the key over its
/// output, on each branch.
fn sources(
    node: &Arc<dyn ExecutionPlan>,
    keys: &Keys,
) -> Result<Vec<(Arc<dyn ExecutionPlan>, Keys)>> {
    match step(node, keys)? {
        Step::Stop(_) => Ok(vec![(Arc::clone(node), keys.clone())]),
        Step::Into(children) => {
            let kids = node.children();
            let mut out = Vec::new();
            for (i, k) in children {
                if let Some(child) = kids.get(i) {
                    out.extend(sources(child, &k)?);
                }
            }
            Ok(out)
        }
    }
}

/// Whether range `inner` lies within `outer` (both of one type).
pub(super) fn within(
    inner: &(ScalarValue, ScalarValue),
    outer: &(ScalarValue, ScalarValue),
) -> bool {
    let ge = |a: &ScalarValue, b: &ScalarValue| a.partial_cmp(b).is_some_and(|o| o.is_ge());
    ge(&inner.0, &outer.0) && ge(&outer.1, &inner.1)
}

/// An upper bound of the distinct values of an integer range.
pub(super) fn range_size(range: &(ScalarValue, ScalarValue)) -> Option<f64> {
    let as_i128 = |v: &ScalarValue| -> Option<i128> {
        let v = v
            .cast_to(&datafusion::arrow::datatypes::DataType::Int64)
            .ok()?;
        match v {
            ScalarValue::Int64(Some(x)) => Some(i128::from(x)),
            _ => None,
        }
    };
    let (lo, hi) = (as_i128(&range.0)?, as_i128(&range.1)?);
    (hi >= lo).then(|| (hi - lo + 1) as f64)
}
