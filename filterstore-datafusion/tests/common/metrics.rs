//! Reading execution metrics back from a (distributed) plan: rows and bytes
//! that crossed a shuffle, plan bytes sent to workers (tests, benches and
//! examples).

#![allow(dead_code)]

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::error::Result;
use datafusion::physical_plan::ExecutionPlan;
use std::sync::Arc;

/// Sum of the metric `name` over every node of `plan` for which `select`
/// holds (0 when absent). Call after the plan ran; for a distributed plan,
/// on the plan returned by datafusion-distributed's
/// `rewrite_distributed_plan_with_metrics`, which brings workers' metrics home.
pub fn sum_metric(
    plan: &Arc<dyn ExecutionPlan>,
    name: &str,
    select: impl Fn(&dyn ExecutionPlan) -> bool,
) -> Result<usize> {
    let mut total = 0;
    plan.apply(|node| {
        if select(node.as_ref())
            && let Some(m) = node.metrics()
        {
            // Not `MetricsSet::sum_by_name`, which skips the built-in
            // metrics (`output_rows`) and custom ones (`bytes_transferred`).
            total += m
                .iter()
                .filter(|v| v.value().name() == name)
                .map(|v| v.value().as_usize())
                .sum::<usize>();
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(total)
}

/// A node's one-line display, e.g. `BloomFilterExec: join #1 ...`.
/// Selectors match on it rather than downcast: the plan that
/// datafusion-distributed's metrics rewrite returns wraps nodes in its own
/// type, which displays as the node it wraps.
pub fn one_line(node: &dyn ExecutionPlan) -> String {
    datafusion::physical_plan::displayable(node)
        .one_line()
        .to_string()
}

/// Whether `node` is a runtime filter (`BloomFilterExec`).
pub fn is_bloom_filter(node: &dyn ExecutionPlan) -> bool {
    one_line(node).starts_with("BloomFilterExec")
}

/// Whether `node` is a runtime filter's tap (`BloomTapExec`).
pub fn is_tap(node: &dyn ExecutionPlan) -> bool {
    one_line(node).starts_with("BloomTapExec")
}

/// Whether `node` is a network shuffle whose rows carry column `column`.
pub fn is_shuffle_of(node: &dyn ExecutionPlan, column: &str) -> bool {
    one_line(node).contains("NetworkShuffleExec") && node.schema().index_of(column).is_ok()
}
pub use filterstore_datafusion::executed_plan;
