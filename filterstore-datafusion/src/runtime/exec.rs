//! `BloomFilterExec`: drops the rows whose join key the runtime filter says
//! cannot be on the join's build side.
//!
//! The node sits below the probe side's network shuffle and keeps its
//! input's schema, partitioning and order; it only removes rows. A row
//! passes when the filter answers "maybe" for its key (the key expressions
//! are the join's own, moved down onto this node's input), or when a key
//! column is null and the join matches nulls. A Bloom filter has no false
//! negatives, so the join's answer cannot change.
//!
//! The filter is built while the query runs ([`super::tap`]); each task of
//! this node's stage fetches it once from the coordinator
//! ([`super::rendezvous`]: in its process, or through its rendezvous
//! service from a worker process). A task reads its input from its first
//! poll: rows that come before the filter wait in a bounded buffer
//! ([`ProbePolicy::buffer_bytes`], in the task's memory pool) and are
//! checked when it comes ([`super::feed`]). At most [`ProbePolicy::wait`]
//! from the first poll, or sooner when the buffer is full, rows pass
//! unfiltered until the filter arrives (a late filter still applies to the
//! rows after it). "Pass every row" (a failed or cancelled build, a filter not worth
//! shipping, a query that ended) ends every wait at once. A filter that drops fewer than [`ProbePolicy::min_drop`]
//! of the first [`ProbePolicy::check_window`] rows it checks stops being
//! checked. A batch whose keys fail to evaluate passes whole (the
//! expressions moved below operators that may have kept such rows from
//! them) and is counted.
//!
//! Metrics: `rows_in`, `output_rows`, `rows_unfiltered` (passed before the
//! filter, or without one), `rows_unchecked` (after checking stopped),
//! `key_error_rows`, `rows_buffered` (read before the filter came),
//! `wait_time` (waiting with no input left to read), `message_bytes`, and
//! per-partition flags `deadline_missed`, `buffer_full`, `pass_all`,
//! `stopped_checking`.

use super::feed::Feed;
use super::probe::{
    receive, Probe, ProbeMetrics, ProbePolicy, ProbeRun, Runs, Source, State, NAME,
};
use super::rendezvous::{self, FilterId};
use super::scope::ScopeCell;
use crate::node::one_child_plan;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::execution_plan::CardinalityEffect;
use datafusion::physical_plan::metrics::{BaselineMetrics, ExecutionPlanMetricsSet, MetricBuilder};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, Statistics, StatisticsArgs,
};
use filterstore::FilterParams;
use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, OnceLock};

/// The runtime filter of one join on one probe place.
#[derive(Debug, Clone)]
pub struct BloomFilterExec {
    input: Arc<dyn ExecutionPlan>,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    nulls_pass: bool,
    label: String,
    filter: FilterId,
    point: usize,
    params: FilterParams,
    policy: ProbePolicy,
    rendezvous: Option<String>,
    scope: Arc<ScopeCell>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
    runs: Arc<Runs>,
}

/// What one probe place needs besides its input and keys.
#[derive(Clone, Debug)]
pub struct ProbeSpec {
    /// The filter's id.
    pub filter: FilterId,
    /// Which of the filter's probe places this is.
    pub point: usize,
    /// The filter's shape (a message of another shape is refused).
    pub params: FilterParams,
    /// Whether rows with a null key pass.
    pub nulls_pass: bool,
    /// The join, as plans show it.
    pub label: String,
    /// Waiting and checking.
    pub policy: ProbePolicy,
    /// The coordinator's rendezvous address, for probe tasks in worker
    /// processes (`None`: the coordinator's process).
    pub rendezvous: Option<String>,
    /// The plan's execution scope.
    pub scope: Arc<ScopeCell>,
}

impl BloomFilterExec {
    /// Filters `input` on `keys` (expressions over its schema, one per
    /// join-key column) by the runtime filter `spec` names.
    pub fn try_new(
        input: Arc<dyn ExecutionPlan>,
        keys: Vec<Arc<dyn PhysicalExpr>>,
        spec: ProbeSpec,
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
            input,
            keys,
            nulls_pass: spec.nulls_pass,
            label: spec.label,
            filter: spec.filter,
            point: spec.point,
            params: spec.params,
            policy: spec.policy,
            rendezvous: spec.rendezvous,
            scope: spec.scope,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
            runs: Arc::default(),
        })
    }

    /// The key expressions, over the input's schema.
    pub fn keys(&self) -> &[Arc<dyn PhysicalExpr>] {
        &self.keys
    }

    /// Whether rows with a null key pass.
    pub fn nulls_pass(&self) -> bool {
        self.nulls_pass
    }

    /// The join this filter serves, as plans show it.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The filter's id.
    pub fn filter_id(&self) -> FilterId {
        self.filter
    }

    /// Which of the filter's probe places this is.
    pub fn point(&self) -> usize {
        self.point
    }

    /// The filter's shape.
    pub fn params(&self) -> &FilterParams {
        &self.params
    }

    /// Waiting and checking.
    pub fn policy(&self) -> &ProbePolicy {
        &self.policy
    }

    /// The coordinator's rendezvous address, if probe tasks fetch from
    /// other processes.
    pub fn rendezvous(&self) -> Option<&str> {
        self.rendezvous.as_deref()
    }

    /// The execution scope the node runs in now.
    pub fn scope(&self) -> rendezvous::Scope {
        self.scope.get()
    }

    /// The execution's scope and token now (for the codec).
    pub(crate) fn run_key(&self) -> rendezvous::RunKey {
        self.scope.key()
    }

    /// The input.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }

    fn run(&self, ctx: &Arc<TaskContext>) -> Arc<ProbeRun> {
        let mut runs = self.runs.0.lock();
        runs.retain(|(c, _)| c.strong_count() > 0);
        if let Some((_, r)) = runs
            .iter()
            .find(|(c, _)| std::ptr::eq(c.as_ptr(), Arc::as_ptr(ctx)))
        {
            return Arc::clone(r);
        }
        let bytes = MetricBuilder::new(&self.metrics).global_counter("message_bytes");
        let source = Source {
            id: self.filter,
            key: self.scope.key(),
            rendezvous: self.rendezvous.clone(),
        };
        let arrival = receive(source, self.params, bytes);
        let run = Arc::new(ProbeRun {
            arrival,
            first_poll: OnceLock::new(),
            wait: self.policy.wait,
        });
        runs.push((Arc::downgrade(ctx), Arc::clone(&run)));
        run
    }
}

impl DisplayAs for BloomFilterExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let keys: Vec<String> = self.keys.iter().map(|k| k.to_string()).collect();
        write!(
            f,
            "{NAME}: {}, keys=[{}], m={}, k={}, wait={}ms, nulls={}",
            self.label,
            keys.join(", "),
            self.params.m(),
            self.params.k(),
            self.policy.wait.as_millis(),
            if self.nulls_pass { "pass" } else { "drop" }
        )
    }
}

impl ExecutionPlan for BloomFilterExec {
    one_child_plan!(own_properties(NAME));
    one_child_plan!(key_expressions);
    one_child_plan!(fresh_children(NAME));

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let run = self.run(&context);
        let input = self.input.execute(partition, Arc::clone(&context))?;
        let m = MetricBuilder::new(&self.metrics);
        let probe = Probe {
            #[cfg(feature = "test-hooks")]
            filter_id: self.filter,
            keys: self.keys.clone(),
            nulls_pass: self.nulls_pass,
            policy: self.policy,
            state: State::Waiting,
            acked: None,
            checked: 0,
            dropped: 0,
            metrics: ProbeMetrics {
                baseline: BaselineMetrics::new(&self.metrics, partition),
                rows_in: m.clone().counter("rows_in", partition),
                unfiltered: m.clone().counter("rows_unfiltered", partition),
                unchecked: m.clone().counter("rows_unchecked", partition),
                key_errors: m.clone().counter("key_error_rows", partition),
                wait: m.clone().subset_time("wait_time", partition),
                deadline_missed: m.clone().counter("deadline_missed", partition),
                pass_all: m.clone().counter("pass_all", partition),
                stopped: m.clone().counter("stopped_checking", partition),
            },
        };
        let reservation =
            MemoryConsumer::new(format!("{NAME}[{partition}]")).register(context.memory_pool());
        let feed = Feed {
            input,
            run,
            probe,
            held: VecDeque::new(),
            reservation,
            input_done: false,
            rows_buffered: m.clone().counter("rows_buffered", partition),
            buffer_full: m.counter("buffer_full", partition),
        };
        let schema = self.schema();
        let stream = futures::stream::unfold(feed, |mut feed| async move {
            let next = feed.next_batch().await?;
            Some((next, feed))
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
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
