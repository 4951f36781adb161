//! What the two runtime-filter nodes (`BloomTapExec`, `BloomFilterExec`)
//! share as one-child plan nodes over key expressions.

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::{
    ChildrenPropertiesMode, ExecutionPlan, PlanProperties, ReplaceChildrenOptions,
};
use std::sync::Arc;

/// Visits `keys` in order until `f` says stop.
pub(crate) fn apply_keys(
    keys: &[Arc<dyn PhysicalExpr>],
    f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
) -> Result<TreeNodeRecursion> {
    for k in keys {
        if f(k)? == TreeNodeRecursion::Stop {
            return Ok(TreeNodeRecursion::Stop);
        }
    }
    Ok(TreeNodeRecursion::Continue)
}

/// The one new child of node `name`, and the properties the node keeps over
/// it: its own (`Keep`, the child changed only by nodes that keep their
/// input's), or the child's (`Recompute`; both nodes pass rows through in
/// order).
pub(crate) fn one_child(
    name: &str,
    mut children: Vec<Arc<dyn ExecutionPlan>>,
    options: &ReplaceChildrenOptions,
    own: &Arc<PlanProperties>,
) -> Result<(Arc<dyn ExecutionPlan>, Arc<PlanProperties>)> {
    if children.len() != 1 {
        return Err(DataFusionError::Internal(format!(
            "{name} takes one child, got {}",
            children.len()
        )));
    }
    let input = children.swap_remove(0);
    let properties = match options.children_properties {
        ChildrenPropertiesMode::Keep => Arc::clone(own),
        ChildrenPropertiesMode::Recompute => Arc::clone(input.properties()),
    };
    Ok((input, properties))
}
