//! Reading execution metrics back from a (distributed) plan: rows and bytes
//! that crossed a shuffle, plan bytes sent to workers.

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
        if select(node.as_ref()) {
            if let Some(m) = node.metrics() {
                total += m.sum_by_name(name).map_or(0, |v| v.as_usize());
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(total)
}
