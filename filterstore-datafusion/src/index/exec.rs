//! `IndexedScanExec`: the scan of an indexed table, as DataFusion's
//! Parquet scan of the files the index did not skip, under a node that
//! says (in `EXPLAIN`) how many files the index skipped and why the others
//! are read, and counts them in its metrics (`EXPLAIN ANALYZE`).
//!
//! The node passes its input's rows, order and partitioning through
//! untouched, and is transparent to DataFusion's optimizers as
//! `CooperativeExec` is: filters, limits, projections and sorts are pushed
//! through it into the Parquet scan, whose own pruning (statistics, page
//! index, Parquet's Bloom filters) then applies to the files that remain.

use super::files::ReadReason;
use crate::node::one_child_plan;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::config::ConfigOptions;
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::execution_plan::CardinalityEffect;
use datafusion::physical_plan::filter_pushdown::{
    ChildPushdownResult, FilterDescription, FilterPushdownPhase, FilterPushdownPropagation,
};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, ReplaceChildrenOptions,
};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const NAME: &str = "IndexedScanExec";

/// What the index decided for one scan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanSummary {
    /// Files listed.
    pub listed: usize,
    /// Files the index skipped.
    pub skipped: usize,
    /// Files read, by reason.
    pub read: BTreeMap<&'static str, usize>,
    /// The indexed columns the filters constrained.
    pub columns: Vec<String>,
    /// Why the index could not do all it should (its store unavailable,
    /// read-only), if so.
    pub limitation: Option<String>,
}

impl ScanSummary {
    pub(crate) fn count(&mut self, reason: ReadReason) {
        let name = match reason {
            ReadReason::Unindexed => "unindexed",
            ReadReason::Changed => "changed",
            ReadReason::Maybe => "maybe",
            ReadReason::NoFilter => "no_filter",
            ReadReason::NoLookup => "no_lookup",
        };
        *self.read.entry(name).or_default() += 1;
    }

    /// Files read.
    pub fn files_read(&self) -> usize {
        self.read.values().sum()
    }
}

/// What a scan does when it first runs (not when it is planned: planning
/// never starts work): a refresh of the index in the background when the
/// scan found files it does not know.
#[derive(Clone)]
pub(crate) struct OnExecute(pub(crate) Arc<dyn Fn() + Send + Sync>);

impl fmt::Debug for OnExecute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OnExecute")
    }
}

/// The scan of an indexed table (module docs).
#[derive(Debug, Clone)]
pub struct IndexedScanExec {
    input: Arc<dyn ExecutionPlan>,
    summary: Arc<ScanSummary>,
    metrics: ExecutionPlanMetricsSet,
    properties: Arc<PlanProperties>,
    on_execute: Option<(OnExecute, Arc<AtomicBool>)>,
}

impl IndexedScanExec {
    pub(crate) fn new(
        input: Arc<dyn ExecutionPlan>,
        summary: ScanSummary,
        on_execute: Option<OnExecute>,
    ) -> IndexedScanExec {
        let metrics = ExecutionPlanMetricsSet::new();
        let count = |name: &'static str, n: usize| {
            MetricBuilder::new(&metrics).global_counter(name).add(n);
        };
        count("files_listed", summary.listed);
        count("files_skipped_by_index", summary.skipped);
        for (reason, n) in &summary.read {
            count(read_metric(reason), *n);
        }
        IndexedScanExec {
            properties: Arc::clone(input.properties()),
            input,
            summary: Arc::new(summary),
            metrics,
            on_execute: on_execute.map(|f| (f, Arc::new(AtomicBool::new(false)))),
        }
    }

    /// What the index decided.
    pub fn summary(&self) -> &ScanSummary {
        &self.summary
    }

    /// The Parquet scan below.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }

    fn with_input(&self, input: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
        Arc::new(IndexedScanExec {
            properties: Arc::clone(input.properties()),
            input,
            ..self.clone()
        })
    }
}

fn read_metric(reason: &str) -> &'static str {
    match reason {
        "unindexed" => "files_read_unindexed",
        "changed" => "files_read_changed",
        "maybe" => "files_read_maybe",
        "no_lookup" => "files_read_no_lookup",
        _ => "files_read_no_filter",
    }
}

impl DisplayAs for IndexedScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let s = &self.summary;
        write!(
            f,
            "{NAME}: files={}, skipped_by_index={}, read={}",
            s.listed,
            s.skipped,
            s.files_read()
        )?;
        if !s.read.is_empty() {
            let why: Vec<String> = s.read.iter().map(|(r, n)| format!("{r}={n}")).collect();
            write!(f, " ({})", why.join(", "))?;
        }
        write!(f, ", columns=[{}]", s.columns.join(", "))?;
        if let Some(why) = &s.limitation {
            write!(f, ", index: {why}")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for IndexedScanExec {
    one_child_plan!(own_properties(NAME));

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
        options: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let (input, properties) =
            crate::node::one_child(NAME, children, &options, &self.properties)?;
        Ok(Arc::new(IndexedScanExec {
            input,
            properties,
            ..self.as_ref().clone()
        }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        if let Some((f, fired)) = &self.on_execute
            && !fired.swap(true, Ordering::AcqRel)
        {
            (f.0)();
        }
        self.input.execute(partition, context)
    }

    one_child_plan!(input_statistics);

    fn supports_limit_pushdown(&self) -> bool {
        true
    }

    fn with_fetch(&self, limit: Option<usize>) -> Option<Arc<dyn ExecutionPlan>> {
        self.input
            .with_fetch(limit)
            .map(|input| self.with_input(input))
    }

    fn fetch(&self) -> Option<usize> {
        self.input.fetch()
    }

    fn cardinality_effect(&self) -> CardinalityEffect {
        CardinalityEffect::Equal
    }

    fn try_swapping_with_projection(
        &self,
        projection: &ProjectionExec,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        Ok(self
            .input
            .try_swapping_with_projection(projection)?
            .map(|input| self.with_input(input)))
    }

    fn gather_filters_for_pushdown(
        &self,
        _phase: FilterPushdownPhase,
        parent_filters: Vec<Arc<dyn PhysicalExpr>>,
        _config: &ConfigOptions,
    ) -> Result<FilterDescription> {
        FilterDescription::from_children(parent_filters, &self.children())
    }

    fn handle_child_pushdown_result(
        &self,
        _phase: FilterPushdownPhase,
        child_pushdown_result: ChildPushdownResult,
        _config: &ConfigOptions,
    ) -> Result<FilterPushdownPropagation<Arc<dyn ExecutionPlan>>> {
        Ok(FilterPushdownPropagation::if_all(child_pushdown_result))
    }
}
