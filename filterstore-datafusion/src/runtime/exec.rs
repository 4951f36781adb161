//! `BloomFilterExec`: drops the rows whose join key a runtime filter says
//! cannot be on the other side of the join.
//!
//! The node keeps its input's schema, partitioning and order; it only
//! removes rows. A row passes when the filter answers "maybe" for its key
//! (the key expressions are the join's own, rewritten onto this node's
//! input), or when a key column is null and the join matches nulls
//! (`nulls_pass`). It never drops a row whose key is in the filter: a Bloom
//! filter has no false negatives, so the join's answer cannot change.
//!
//! The filter message travels inside the node (and so inside each task's
//! plan, through [`super::codec::BloomCodec`]); each process decodes it once
//! ([`crate::cache`]). Metrics: `rows_in`, `output_rows`, `message_bytes`.

use crate::cache;
use crate::rowkey::{contains_rows, KeyColumns};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::filter_record_batch;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::execution_plan::CardinalityEffect;
use datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{ChildStats, StatisticsArgs};
use datafusion::physical_plan::{
    ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties,
    ReplaceChildrenOptions, Statistics,
};
use futures::StreamExt;
use std::fmt;
use std::sync::Arc;

/// Name of the node in plans and metrics.
pub const NAME: &str = "BloomFilterExec";

/// A runtime Bloom filter on one side of a join, placed below that side's
/// network shuffle.
#[derive(Debug, Clone)]
pub struct BloomFilterExec {
    input: Arc<dyn ExecutionPlan>,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    message: Arc<Vec<u8>>,
    message_id: u128,
    nulls_pass: bool,
    label: String,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl BloomFilterExec {
    /// Filters `input` by `message` on the key `keys` (expressions over
    /// `input`'s schema, one per join-key column). `label` names the join in
    /// plans (`EXPLAIN`) and reports.
    pub fn try_new(
        input: Arc<dyn ExecutionPlan>,
        keys: Vec<Arc<dyn PhysicalExpr>>,
        message: Arc<Vec<u8>>,
        nulls_pass: bool,
        label: String,
    ) -> Result<Self> {
        if keys.is_empty() {
            return Err(DataFusionError::Plan(format!(
                "{NAME} needs at least one key expression"
            )));
        }
        let schema = input.schema();
        for k in &keys {
            let t = k.data_type(&schema)?;
            if let Some(reason) = crate::rowkey::unsupported(&t) {
                return Err(DataFusionError::Plan(format!("{NAME}: {reason}")));
            }
        }
        let properties = Arc::clone(input.properties());
        Ok(BloomFilterExec {
            message_id: xxhash_rust::xxh3::xxh3_128(&message),
            input,
            keys,
            message,
            nulls_pass,
            label,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }

    /// The key expressions, over the input's schema.
    pub fn keys(&self) -> &[Arc<dyn PhysicalExpr>] {
        &self.keys
    }

    /// The filter message.
    pub fn message(&self) -> &Arc<Vec<u8>> {
        &self.message
    }

    /// Whether rows with a null key pass.
    pub fn nulls_pass(&self) -> bool {
        self.nulls_pass
    }

    /// The join this filter serves, as plans show it.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The input.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }
}

impl DisplayAs for BloomFilterExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let keys: Vec<String> = self.keys.iter().map(|k| k.to_string()).collect();
        write!(
            f,
            "{NAME}: {}, keys=[{}], message={} B, nulls={}",
            self.label,
            keys.join(", "),
            self.message.len(),
            if self.nulls_pass { "pass" } else { "drop" }
        )
    }
}

impl ExecutionPlan for BloomFilterExec {
    fn name(&self) -> &str {
        NAME
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        for k in &self.keys {
            if f(k)? == TreeNodeRecursion::Stop {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
        options: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 {
            return Err(DataFusionError::Internal(format!(
                "{NAME} takes one child, got {}",
                children.len()
            )));
        }
        let input = children.swap_remove(0);
        let properties = match options.children_properties {
            ChildrenPropertiesMode::Keep => Arc::clone(&self.properties),
            ChildrenPropertiesMode::Recompute => Arc::clone(input.properties()),
        };
        Ok(Arc::new(BloomFilterExec {
            input,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
            ..self.as_ref().clone()
        }))
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.replace_children(
            children,
            ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
        )
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        // A filter this process cannot hold (its cache budget is smaller
        // than the message) passes every row: the filter only ever saves
        // work, it never decides an answer.
        let decoded = cache::decoded_keyed(NAME, self.message_id, &self.message).ok();
        let input = self.input.execute(partition, context)?;
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let rows_in = MetricBuilder::new(&self.metrics).counter("rows_in", partition);
        let passed_unchecked =
            MetricBuilder::new(&self.metrics).counter("rows_passed_unchecked", partition);
        MetricBuilder::new(&self.metrics)
            .counter("message_bytes", partition)
            .add(if partition == 0 {
                self.message.len()
            } else {
                0
            });
        let probe = Probe {
            keys: self.keys.clone(),
            nulls_pass: self.nulls_pass,
            rows_in,
            passed_unchecked,
            baseline,
        };
        let schema = self.schema();
        let stream =
            input.map(move |batch| probe.filter(batch?, decoded.as_ref().map(|d| &d.filter)));
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn child_stats_requests(&self, partition: Option<usize>) -> Vec<ChildStats> {
        vec![ChildStats::At(partition)]
    }

    fn statistics_from_inputs(
        &self,
        input_stats: &[Arc<Statistics>],
        _args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        let stats = input_stats
            .first()
            .map(|s| s.as_ref().clone().to_inexact())
            .unwrap_or_else(|| Statistics::new_unknown(&self.schema()));
        Ok(Arc::new(stats))
    }

    fn cardinality_effect(&self) -> CardinalityEffect {
        CardinalityEffect::LowerEqual
    }
}

/// What each partition's stream needs to filter a batch.
struct Probe {
    keys: Vec<Arc<dyn PhysicalExpr>>,
    nulls_pass: bool,
    rows_in: Count,
    passed_unchecked: Count,
    baseline: BaselineMetrics,
}

impl Probe {
    /// The rows of `batch` that may join. A batch whose keys cannot be
    /// evaluated here passes whole: the key expressions were moved below
    /// operators that may have kept such rows from ever reaching them (a
    /// cast that fails on a row a join below would have dropped), and the
    /// plan without the filter must still be the answer.
    fn filter(
        &self,
        batch: RecordBatch,
        filter: Option<&filterstore::BitFilter>,
    ) -> Result<RecordBatch> {
        let _timer = self.baseline.elapsed_compute().timer();
        self.rows_in.add(batch.num_rows());
        let keep = filter.and_then(|f| self.keep(&batch, f).ok());
        let Some(keep) = keep else {
            self.passed_unchecked.add(batch.num_rows());
            self.baseline.record_output(batch.num_rows());
            return Ok(batch);
        };
        let out = filter_record_batch(&batch, &keep)?;
        self.baseline.record_output(out.num_rows());
        Ok(out)
    }

    fn keep(
        &self,
        batch: &RecordBatch,
        filter: &filterstore::BitFilter,
    ) -> Result<datafusion::arrow::array::BooleanArray> {
        let columns = self
            .keys
            .iter()
            .map(|k| k.evaluate(batch)?.into_array(batch.num_rows()))
            .collect::<Result<Vec<_>>>()?;
        let keys = KeyColumns::new(&columns)?;
        contains_rows(filter, &keys, self.nulls_pass)
    }
}
