//! The query planner that applies [`BloomRuntimeFilterRule`] to the plan
//! datafusion-distributed returns, and shows its decisions in `EXPLAIN`.
//!
//! It wraps the session's planner (datafusion-distributed's, which
//! [`crate::BloomStateBuilderExt::with_bloom_runtime_filters`] installs
//! first), so the rule sees the final stages and their shuffles: a rule in
//! DataFusion's physical optimizer would run before distribution, where no
//! shuffle exists yet.
//!
//! `EXPLAIN` (and `EXPLAIN VERBOSE`) of a query shows the distributed plan
//! the query would run, taps and filters included, followed by one line per
//! join side with the decision and its reason; it runs nothing.
//! `EXPLAIN ANALYZE` runs the plan; each `BloomFilterExec` shows its
//! metrics (rows in and out, rows passed unfiltered or unchecked, the time
//! it waited, the message bytes, and whether it missed its deadline, got
//! "pass every row" or stopped checking), each `BloomTapExec` its build
//! rows, and a last row (`plan_type` "Runtime filters") gives the decisions
//! with what became of each filter (built from how many tasks, its keys,
//! fp and message size, and when it was ready; or why every row passed).

use super::analyze::BloomReportExec;
use super::config::RuntimeFilterConfig;
use super::report::RuntimeFilterReport;
use super::rule::BloomRuntimeFilterRule;
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::display::{PlanType, StringifiedPlan};
use datafusion::error::Result;
use datafusion::execution::context::QueryPlanner;
use datafusion::logical_expr::{Explain, LogicalPlan};
use datafusion::physical_plan::analyze::AnalyzeExec;
use datafusion::physical_plan::explain::ExplainExec;
use datafusion::physical_plan::{
    displayable, ChildrenPropertiesMode, ExecutionPlan, ReplaceChildrenOptions,
};
use datafusion::physical_planner::{DefaultPhysicalPlanner, PhysicalPlanner};
use datafusion::prelude::SessionContext;
use parking_lot::Mutex;
use std::sync::Arc;

/// Wraps a query planner with the runtime-filter rule.
#[derive(Debug)]
pub struct BloomRuntimeFilterPlanner {
    inner: Option<Arc<dyn QueryPlanner + Send + Sync>>,
    rule: BloomRuntimeFilterRule,
    last: Arc<LastReport>,
}

/// The report of the latest planning, kept in the session's config.
#[derive(Debug, Default)]
pub struct LastReport(Mutex<Option<RuntimeFilterReport>>);

/// The decisions of the latest query planned on `ctx` (its `EXPLAIN` shows
/// the same), or `None` when the session has no runtime filters. An example
/// that reads one: [`crate::remote_cluster`].
///
/// ```
/// use datafusion::prelude::SessionContext;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # tokio::runtime::Runtime::new()?.block_on(async {
/// let plain = SessionContext::new();
/// plain.sql("SELECT 1").await?.collect().await?;
/// assert!(filterstore_datafusion::last_report(&plain).is_none()); // no runtime filters here
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })
/// # }
/// ```
pub fn last_report(ctx: &SessionContext) -> Option<RuntimeFilterReport> {
    let state = ctx.state();
    let last = state.config().get_extension::<LastReport>()?;
    last.0.lock().clone()
}

impl BloomRuntimeFilterPlanner {
    /// The rule over `inner` (DataFusion's default planner when `None`);
    /// `last` is where reports go (the session's [`LastReport`]).
    pub fn new(
        inner: Option<Arc<dyn QueryPlanner + Send + Sync>>,
        config: RuntimeFilterConfig,
        last: Arc<LastReport>,
    ) -> Self {
        BloomRuntimeFilterPlanner {
            inner,
            rule: BloomRuntimeFilterRule::new(config),
            last,
        }
    }

    async fn inner_plan(
        &self,
        logical: &LogicalPlan,
        session: &dyn Session,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        match &self.inner {
            Some(inner) => inner.create_physical_plan(logical, session).await,
            None => {
                DefaultPhysicalPlanner::default()
                    .create_physical_plan(logical, session)
                    .await
            }
        }
    }

    async fn plan_with_rule(
        &self,
        logical: &LogicalPlan,
        session: &dyn Session,
    ) -> Result<(Arc<dyn ExecutionPlan>, RuntimeFilterReport)> {
        let plan = self.inner_plan(logical, session).await?;
        // EXPLAIN ANALYZE: the rule applies to the analyzed input.
        if let Some(input) = analyzed_input(&plan) {
            let placed = self.rule.place(input)?;
            let opts = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute);
            let plan = plan.replace_children(vec![Arc::clone(&placed.plan)], opts)?;
            // The scoping node above the analyze node: datafusion-distributed's
            // analyze renders the workers' metrics only of a DistributedExec
            // directly below it.
            let plan = BloomReportExec::wrap(plan, placed.report.clone());
            return Ok(placed.scoped(plan));
        }
        self.rule.optimize(plan)
    }

    async fn explain(
        &self,
        explain: &Explain,
        session: &dyn Session,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let (plan, report) = self.plan_with_rule(&explain.plan, session).await?;
        let mut plans: Vec<StringifiedPlan> = explain
            .stringified_plans
            .iter()
            .filter(|p| explain.verbose || p.plan_type == PlanType::FinalLogicalPlan)
            .cloned()
            .collect();
        let text = format!(
            "{}{}",
            displayable(plan.as_ref()).indent(explain.verbose),
            report
        );
        plans.push(StringifiedPlan::new(PlanType::FinalPhysicalPlan, text));
        *self.last.0.lock() = Some(report);
        Ok(Arc::new(ExplainExec::new(
            explain.schema.inner().clone(),
            plans,
            explain.verbose,
        )))
    }
}

/// The plan under an `AnalyzeExec` (or datafusion-distributed's), if any.
fn analyzed_input(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ExecutionPlan>> {
    let analyze = plan.is::<AnalyzeExec>() || plan.name() == "DistributedAnalyzeExec";
    if !analyze {
        return None;
    }
    plan.children().first().map(|c| Arc::clone(c))
}

#[async_trait]
impl QueryPlanner for BloomRuntimeFilterPlanner {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session: &dyn Session,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if let LogicalPlan::Explain(explain) = logical_plan {
            return self.explain(explain, session).await;
        }
        let (plan, report) = self.plan_with_rule(logical_plan, session).await?;
        *self.last.0.lock() = Some(report);
        Ok(plan)
    }
}
