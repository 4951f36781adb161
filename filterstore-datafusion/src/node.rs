//! What this crate's one-child plan nodes share: the runtime filter's tap
//! (`BloomTapExec`), probe (`BloomFilterExec`) and scan node
//! (`BloomScanExec`), the indexed scan (`IndexedScanExec`), and the two
//! nodes that only wrap a plan on the coordinator (`BloomQueryExec`,
//! `BloomReportExec`).
//!
//! The helpers are functions where a node needs one step, and
//! [`one_child_plan!`] writes the `ExecutionPlan` methods the nodes write
//! alike, inside each node's own `impl ExecutionPlan` block.

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

/// The only child in `children` of node `name`, or an internal error when
/// there is not exactly one.
pub(crate) fn only_child(
    name: &str,
    mut children: Vec<Arc<dyn ExecutionPlan>>,
) -> Result<Arc<dyn ExecutionPlan>> {
    if children.len() != 1 {
        return Err(DataFusionError::Internal(format!(
            "{name} takes one child, got {}",
            children.len()
        )));
    }
    Ok(children.swap_remove(0))
}

/// The one new child of node `name`, and the properties the node keeps over
/// it: its own (`Keep`, the child changed only by nodes that keep their
/// input's), or the child's (`Recompute`; the nodes pass rows through in
/// order).
pub(crate) fn one_child(
    name: &str,
    children: Vec<Arc<dyn ExecutionPlan>>,
    options: &ReplaceChildrenOptions,
    own: &Arc<PlanProperties>,
) -> Result<(Arc<dyn ExecutionPlan>, Arc<PlanProperties>)> {
    let input = only_child(name, children)?;
    let properties = match options.children_properties {
        ChildrenPropertiesMode::Keep => Arc::clone(own),
        ChildrenPropertiesMode::Recompute => Arc::clone(input.properties()),
    };
    Ok((input, properties))
}

/// `ExecutionPlan` methods that this crate's one-child nodes write alike,
/// expanded inside a node's `impl ExecutionPlan` block. The node's child is
/// its field `input`; each arm names what else it reads.
///
/// - `own_properties(NAME)`: a node with its own `properties` and `metrics`
///   fields that passes its input's rows through in order: `name`,
///   `properties`, `children`, `maintains_input_order` (kept),
///   `benefits_from_input_partitioning` (no), `with_new_children` (its
///   `replace_children`, the properties recomputed from the new child),
///   `metrics`, and `child_stats_requests` (the same partition).
/// - `input_properties(NAME)`: a node that is its input as far as planning
///   sees (its input's properties, no expressions of its own): `name`,
///   `properties`, `children`, `apply_expressions`, and
///   `child_stats_requests` (the same partition; without it DataFusion
///   hands `statistics_from_inputs` unknown statistics).
/// - `key_expressions`: `apply_expressions` over the field `keys`.
/// - `fresh_children`: `replace_children` that builds the node again on the
///   new child, with fresh `metrics` and `runs` (the runtime filter's tap
///   and probe).
/// - `input_statistics`: `statistics_from_inputs` that passes the input's
///   statistics on as they are.
macro_rules! one_child_plan {
    (own_properties($name:expr)) => {
        fn name(&self) -> &str {
            $name
        }

        fn properties(&self) -> &::std::sync::Arc<::datafusion::physical_plan::PlanProperties> {
            &self.properties
        }

        fn children(
            &self,
        ) -> ::std::vec::Vec<&::std::sync::Arc<dyn ::datafusion::physical_plan::ExecutionPlan>> {
            vec![&self.input]
        }

        fn maintains_input_order(&self) -> ::std::vec::Vec<bool> {
            vec![true]
        }

        fn benefits_from_input_partitioning(&self) -> ::std::vec::Vec<bool> {
            vec![false]
        }

        fn with_new_children(
            self: ::std::sync::Arc<Self>,
            children: ::std::vec::Vec<
                ::std::sync::Arc<dyn ::datafusion::physical_plan::ExecutionPlan>,
            >,
        ) -> ::datafusion::error::Result<
            ::std::sync::Arc<dyn ::datafusion::physical_plan::ExecutionPlan>,
        > {
            self.replace_children(
                children,
                ::datafusion::physical_plan::ReplaceChildrenOptions::new(
                    ::datafusion::physical_plan::ChildrenPropertiesMode::Recompute,
                ),
            )
        }

        fn metrics(
            &self,
        ) -> ::std::option::Option<::datafusion::physical_plan::metrics::MetricsSet> {
            Some(self.metrics.clone_inner())
        }

        fn child_stats_requests(
            &self,
            partition: ::std::option::Option<usize>,
        ) -> ::std::vec::Vec<::datafusion::physical_plan::ChildStats> {
            vec![::datafusion::physical_plan::ChildStats::At(partition)]
        }
    };
    (input_properties($name:expr)) => {
        fn name(&self) -> &str {
            $name
        }

        fn properties(&self) -> &::std::sync::Arc<::datafusion::physical_plan::PlanProperties> {
            self.input.properties()
        }

        fn children(
            &self,
        ) -> ::std::vec::Vec<&::std::sync::Arc<dyn ::datafusion::physical_plan::ExecutionPlan>> {
            vec![&self.input]
        }

        fn apply_expressions(
            &self,
            _f: &mut dyn FnMut(
                &::std::sync::Arc<dyn ::datafusion::physical_expr::PhysicalExpr>,
            ) -> ::datafusion::error::Result<
                ::datafusion::common::tree_node::TreeNodeRecursion,
            >,
        ) -> ::datafusion::error::Result<::datafusion::common::tree_node::TreeNodeRecursion> {
            // No expressions of its own.
            Ok(::datafusion::common::tree_node::TreeNodeRecursion::Continue)
        }

        fn child_stats_requests(
            &self,
            partition: ::std::option::Option<usize>,
        ) -> ::std::vec::Vec<::datafusion::physical_plan::ChildStats> {
            vec![::datafusion::physical_plan::ChildStats::At(partition)]
        }
    };
    (key_expressions) => {
        fn apply_expressions(
            &self,
            f: &mut dyn FnMut(
                &::std::sync::Arc<dyn ::datafusion::physical_expr::PhysicalExpr>,
            ) -> ::datafusion::error::Result<
                ::datafusion::common::tree_node::TreeNodeRecursion,
            >,
        ) -> ::datafusion::error::Result<::datafusion::common::tree_node::TreeNodeRecursion> {
            $crate::node::apply_keys(&self.keys, f)
        }
    };
    (fresh_children($name:expr)) => {
        fn replace_children(
            self: ::std::sync::Arc<Self>,
            children: ::std::vec::Vec<
                ::std::sync::Arc<dyn ::datafusion::physical_plan::ExecutionPlan>,
            >,
            options: ::datafusion::physical_plan::ReplaceChildrenOptions,
        ) -> ::datafusion::error::Result<
            ::std::sync::Arc<dyn ::datafusion::physical_plan::ExecutionPlan>,
        > {
            let (input, properties) =
                $crate::node::one_child($name, children, &options, &self.properties)?;
            Ok(::std::sync::Arc::new(Self {
                input,
                properties,
                metrics: ::datafusion::physical_plan::metrics::ExecutionPlanMetricsSet::new(),
                runs: ::std::default::Default::default(),
                ..self.as_ref().clone()
            }))
        }
    };
    (input_statistics) => {
        fn statistics_from_inputs(
            &self,
            input_stats: &[::std::sync::Arc<::datafusion::physical_plan::Statistics>],
            _args: &::datafusion::physical_plan::StatisticsArgs,
        ) -> ::datafusion::error::Result<::std::sync::Arc<::datafusion::physical_plan::Statistics>>
        {
            Ok(input_stats.first().cloned().unwrap_or_else(|| {
                ::std::sync::Arc::new(::datafusion::physical_plan::Statistics::new_unknown(
                    &self.schema(),
                ))
            }))
        }
    };
}
pub(crate) use one_child_plan;
