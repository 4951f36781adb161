//! `BloomScanExec`: a Parquet scan that takes runtime filters as its
//! predicate when it runs.
//!
//! The rule puts it directly above a Parquet scan that a filter's probe key
//! reaches ([`super::scan_place::into_scans`]). Its child is the scan as planned,
//! so that the plan crosses to workers as DataFusion encodes it (DataFusion
//! 55's composed codec carries no custom expression). When it executes, it
//! pushes one dynamic filter per runtime filter ([`super::scan::watch`])
//! into a copy of that scan (`DataSource::try_pushdown_filters`, once per
//! execution scope: a plan run again gets fresh dynamic filters, never the
//! last run's) and runs the copy. The copy shares the scan's metrics
//! (`DataSourceExec::with_data_source` keeps its metrics set), so the scan
//! below this node reports what was read and pruned. Rows, order and
//! partitioning are the scan's.
//!
//! **Each partition waits for the filters before the scan opens a file**,
//! at most [`BloomScanExec::wait`] from the task's first poll
//! (`RuntimeFilterConfig::scan_wait`). A file opened before its filter
//! came was read whole in the TPC-DS runs (DataFusion pruned none of its
//! row groups when the filter came: docs/DATAFUSION.md), so on a fact
//! table clustered by the key most rows were read only to be dropped
//! above; opened after, its files and row groups outside the build keys'
//! bounds are skipped. The filters' build sides are usually a dimension's
//! scan, done in a few milliseconds; where they take longer, the partition
//! waits no longer than the budget and then reads as before. Metrics:
//! `wait_time` (the partitions' time waiting) and `wait_expired` (the
//! partitions whose budget ran out before every filter came).

use super::rendezvous::Scope;
pub(crate) use super::scan::ScanFilterSpec;
use super::scan::{sparse, watch, with_predicates, NAME as PREDICATE};
use super::scope::ScopeCell;
use crate::node::{self, one_child_plan};
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::expressions::DynamicFilterPhysicalExpr;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan};
use futures::TryStreamExt;
use parking_lot::Mutex;
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::watch as signal;

/// Name of the node in plans.
pub(super) const NAME: &str = "BloomScanExec";

/// A Parquet scan with runtime filters (see the module documentation).
#[derive(Debug)]
pub struct BloomScanExec {
    input: Arc<dyn ExecutionPlan>,
    filters: Vec<ScanFilterSpec>,
    scope: Arc<ScopeCell>,
    /// The longest each partition waits for the filters before the scan
    /// opens a file (zero: it opens at once).
    wait: Duration,
    /// The scan with the filters in its predicate, for the execution
    /// scope it was made in.
    scan: Mutex<Option<Watched>>,
    metrics: ExecutionPlanMetricsSet,
}

/// One execution's scan and its dynamic filters. The scan holds copies of
/// them (DataFusion maps their columns to the file's); the copies share
/// their state with these, which [`super::scan`] updates, and which must
/// live as long as the scan for the update to reach it.
#[derive(Debug)]
struct Watched {
    scans: Scans,
    _filters: Vec<Arc<DynamicFilterPhysicalExpr>>,
}

/// What a partition of one execution waits on before its scan opens a
/// file: each filter's signal ([`super::scan::Watch`]), until the task's
/// first poll (shared by its partitions, as a probe task's deadline is)
/// plus the wait.
#[derive(Clone, Debug)]
struct Opening {
    done: Vec<signal::Receiver<bool>>,
    first_poll: Arc<OnceLock<Instant>>,
}

impl Opening {
    /// Waits until every filter is done or `wait` after the task's first
    /// poll; whether the wait ran out first.
    async fn wait(self, wait: Duration) -> bool {
        let deadline = *self.first_poll.get_or_init(Instant::now) + wait;
        let all = futures::future::join_all(self.done.into_iter().map(|mut rx| async move {
            // An error is a signal dropped unsent: nothing more will come,
            // so the scan stops waiting.
            let _ = rx.wait_for(|done| *done).await;
        }));
        tokio::time::timeout_at(deadline.into(), all).await.is_err()
    }
}

impl BloomScanExec {
    /// `input` (a Parquet scan) with `filters`, of the plan whose executions
    /// `scope` names; each partition waits up to `wait` for them before
    /// the scan opens a file.
    pub(crate) fn new(
        input: Arc<dyn ExecutionPlan>,
        filters: Vec<ScanFilterSpec>,
        scope: Arc<ScopeCell>,
        wait: Duration,
    ) -> BloomScanExec {
        BloomScanExec {
            input,
            filters,
            scope,
            wait,
            scan: Mutex::new(None),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// This node with one filter more, waited for up to `wait` (the
    /// node waits the longer of its filters' budgets).
    pub(crate) fn with_filter(&self, f: ScanFilterSpec, wait: Duration) -> BloomScanExec {
        let mut filters = self.filters.clone();
        filters.push(f);
        BloomScanExec::new(
            Arc::clone(&self.input),
            filters,
            Arc::clone(&self.scope),
            self.wait.max(wait),
        )
    }

    /// The longest each partition waits for the filters before the scan
    /// opens a file.
    pub(crate) fn wait(&self) -> Duration {
        self.wait
    }

    /// The filters.
    pub(crate) fn filters(&self) -> &[ScanFilterSpec] {
        &self.filters
    }

    /// The execution's scope and token now (for the codec).
    pub(crate) fn run_key(&self) -> super::rendezvous::RunKey {
        self.scope.key()
    }

    /// The scan with this execution's dynamic filters, made once per
    /// execution scope (the partitions of a task share it), and what its
    /// partitions wait on before they open it.
    fn scan(&self) -> Result<Scans> {
        let scope = self.scope.get();
        let mut cached = self.scan.lock();
        if let Some(w) = cached.as_ref()
            && w.scans.scope == scope
        {
            return Ok(w.scans.clone());
        }
        let (filters, done): (Vec<_>, Vec<_>) = self
            .filters
            .iter()
            .map(|f| {
                let w = watch(f, scope);
                (w.target, w.done)
            })
            .unzip();
        let predicates: Vec<Arc<dyn PhysicalExpr>> = filters
            .iter()
            .map(|f| Arc::clone(f) as Arc<dyn PhysicalExpr>)
            .collect();
        // Where the reader may drop rows nowhere, that copy is the plain
        // scan: made once.
        let (rows, reader) = with_predicates(&self.input, &predicates, true)?;
        let scan = match reader {
            true => with_predicates(&self.input, &predicates, false)?.0,
            false => Arc::clone(&rows),
        };
        let scans = Scans {
            scope,
            scan,
            rows: reader.then_some(rows),
            opening: Opening {
                done,
                first_poll: Arc::default(),
            },
        };
        *cached = Some(Watched {
            scans: scans.clone(),
            _filters: filters,
        });
        Ok(scans)
    }
}

/// What one partition of an execution may run ([`BloomScanExec::scan`]).
#[derive(Clone, Debug)]
struct Scans {
    scope: Scope,
    scan: Arc<dyn ExecutionPlan>,
    /// The same scan with the Parquet reader dropping rows, where the
    /// reader may ([`super::scan::with_predicates`]).
    rows: Option<Arc<dyn ExecutionPlan>>,
    opening: Opening,
}

impl Scans {
    /// The scan to open once the partition has waited: the one whose
    /// reader drops rows where it exists and a filter of `specs` has come
    /// sparse ([`sparse`]), else the plain one (the filter node above
    /// drops the rows).
    fn pick(self, specs: &[ScanFilterSpec], reader: &Count) -> Arc<dyn ExecutionPlan> {
        match self.rows {
            Some(rows) if specs.iter().any(|f| sparse(f.filter, self.scope)) => {
                reader.add(1);
                rows
            }
            _ => self.scan,
        }
    }
}

impl DisplayAs for BloomScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let filters: Vec<String> = self
            .filters
            .iter()
            .map(|s| {
                let keys: Vec<String> = s.keys.iter().map(|k| k.to_string()).collect();
                format!("{PREDICATE}({})", keys.join(", "))
            })
            .collect();
        write!(f, "{NAME}: {}", filters.join(", "))?;
        if !self.wait.is_zero() {
            write!(f, ", wait={}ms", self.wait.as_millis())?;
        }
        Ok(())
    }
}

impl ExecutionPlan for BloomScanExec {
    one_child_plan!(input_properties(NAME));
    one_child_plan!(input_statistics);

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let input = node::only_child(NAME, children)?;
        Ok(Arc::new(BloomScanExec::new(
            input,
            self.filters.clone(),
            Arc::clone(&self.scope),
            self.wait,
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    /// The scan's stream, opened once every filter has come (or its run
    /// passes every row) or `wait` after the task's first poll, whichever
    /// is first (module docs).
    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let scans = self.scan()?;
        let reader = MetricBuilder::new(&self.metrics).counter("reader_filtered", partition);
        let specs = self.filters.clone();
        if self.wait.is_zero() {
            return scans.pick(&specs, &reader).execute(partition, context);
        }
        let waited = MetricBuilder::new(&self.metrics).subset_time("wait_time", partition);
        let expired = MetricBuilder::new(&self.metrics).counter("wait_expired", partition);
        let wait = self.wait;
        let schema = scans.scan.schema();
        let opened = async move {
            let timer = waited.timer();
            if scans.opening.clone().wait(wait).await {
                expired.add(1);
            }
            timer.done();
            scans.pick(&specs, &reader).execute(partition, context)
        };
        let stream = futures::stream::once(opened).try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

#[cfg(test)]
mod tests;
