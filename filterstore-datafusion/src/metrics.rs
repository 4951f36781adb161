//! The plan that ran, with the workers' metrics: for `EXPLAIN ANALYZE`-like
//! reports of a query that ran through `collect`.

use datafusion::error::Result;
use datafusion::physical_plan::ExecutionPlan;
use std::sync::Arc;

/// The plan that ran, with the workers' metrics brought home: below the
/// runtime filters' scoping node ([`crate::BloomQueryExec`]), through
/// datafusion-distributed's metrics rewrite for a distributed plan. Call
/// after the plan ran.
pub async fn executed_plan(plan: &Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    let mut plan = Arc::clone(plan);
    if let Some(q) = plan.downcast_ref::<crate::runtime::BloomQueryExec>() {
        plan = Arc::clone(q.input());
    }
    if plan.is::<datafusion_distributed::DistributedExec>() {
        use datafusion_distributed::{
            rewrite_distributed_plan_with_metrics, DistributedMetricsFormat,
        };
        plan = rewrite_distributed_plan_with_metrics(plan, DistributedMetricsFormat::Aggregated)
            .await?;
    }
    Ok(plan)
}
