//! `BloomTapExec`: a runtime filter's keys, taken from the join's build
//! input as the join reads it.
//!
//! The tap sits directly above a hash join's build child, in the join's
//! stage. Every batch passes through unchanged; its keys (the join's own
//! build-side key expressions, so the join's coercions apply) go into one
//! filter per task, of the shape the rule planned, shared by the task's
//! partitions. When every partition of the task has ended, the task posts
//! its filter to the coordinator ([`super::rendezvous`]): directly in the
//! coordinator's process, through the rendezvous service from a worker
//! process. A partition that fails or is dropped before its end posts a
//! failure instead, and the probe side then passes every row: keys the tap
//! never saw are never missing from a filter that is used.
//!
//! Beside the filter, each partition gathers the bounds of the keys it
//! saw ([`super::bounds`]); the task posts them widened into one.
//!
//! A task halves its partial before it posts it ([`fit_partial`]) while
//! the merged filter would keep its target rate if every task held as many
//! keys as this one: a filter is planned from estimates that run high, and
//! every bit of a partial is encoded, sent, decoded and OR-ed. The
//! coordinator spreads a halved partial over the merged filter's size
//! (`BitFilter::union_with_halved`), so a task that holds more keys than the
//! others loses none of them. A task in the coordinator's process halves
//! its partial as one in a worker process does (it only skips the
//! encoding), so that both merge the same bits and ship the same filter.
//!
//! The tap of a reverse filter (the probe side's keys, for the build side,
//! [`super::reverse`]) sits above the probe child and reads it ahead of the
//! join ([`super::read_ahead`]), up to a bound: past it the filter is
//! abandoned.
//!
//! The tap reads nothing the join does not read, and runs nothing twice.

use super::bounds::{BoundsAcc, KeyBounds};
use super::read_ahead::ReadAhead;
use super::rendezvous::{self, FilterId, PartialBody, Post, RunKey, Scope};
use super::scope::ScopeCell;
use crate::node::one_child_plan;
use crate::rowkey::{insert_rows, KeyColumns};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::execution_plan::CardinalityEffect;
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder, Time};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use datafusion_distributed::DistributedTaskContext;
use filterstore::{encode_message, BitFilter, BloomRead, CodecChoice, FilterParams};
use futures::{Stream, StreamExt};
use parking_lot::Mutex;
use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

/// Name of the node in plans and metrics.
pub(super) const NAME: &str = "BloomTapExec";

/// The tap of one runtime filter (see the module documentation).
#[derive(Debug, Clone)]
pub struct BloomTapExec {
    input: Arc<dyn ExecutionPlan>,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    params: FilterParams,
    /// The rate a partial posted from another process is halved to
    /// ([`fit_partial`]); `None`: it posts at its planned size.
    fit: Option<f64>,
    /// Bytes each partition reads ahead of the join (a reverse filter's
    /// tap); 0: none.
    ahead: u64,
    filter: FilterId,
    rendezvous: Option<String>,
    scope: Arc<ScopeCell>,
    label: String,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
    runs: Arc<Runs>,
}

/// One run per task: the partitions of a task share its filter. Keyed by
/// the task's `TaskContext` (one per task on a worker, one per execution on
/// the coordinator), held weakly.
#[derive(Debug, Default)]
struct Runs(Mutex<Vec<(Weak<TaskContext>, Arc<TapRun>)>>);

impl BloomTapExec {
    /// A tap of `keys` (expressions over `input`'s schema) into filter
    /// `filter` of shape `params`, whose partials posted from another
    /// process are halved to rate `fit` (see the module documentation); `rendezvous` is
    /// the coordinator's address for taps in worker processes (`None`: the
    /// coordinator's process), and `scope` the plan's execution scope.
    pub fn try_new(
        input: Arc<dyn ExecutionPlan>,
        keys: Vec<Arc<dyn PhysicalExpr>>,
        (params, fit): (FilterParams, Option<f64>),
        filter: FilterId,
        (rendezvous, scope): (Option<String>, Arc<ScopeCell>),
        label: String,
    ) -> Result<Self> {
        if keys.is_empty() {
            return Err(DataFusionError::Plan(format!("{NAME} needs a key")));
        }
        let properties = Arc::clone(input.properties());
        Ok(BloomTapExec {
            input,
            keys,
            params,
            fit,
            ahead: 0,
            filter,
            rendezvous,
            scope,
            label,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
            runs: Arc::default(),
        })
    }

    /// The tap with each partition reading its input ahead of the join, up
    /// to `bytes` (0: not ahead).
    pub fn with_read_ahead(mut self, bytes: u64) -> Self {
        self.ahead = bytes;
        self
    }

    /// Bytes each partition reads ahead of the join (0: none).
    pub fn read_ahead(&self) -> u64 {
        self.ahead
    }

    /// The key expressions, over the input's schema.
    pub fn keys(&self) -> &[Arc<dyn PhysicalExpr>] {
        &self.keys
    }

    /// The filter's shape.
    pub fn params(&self) -> &FilterParams {
        &self.params
    }

    /// The rate partials posted from another process are halved to.
    pub fn fit_fp(&self) -> Option<f64> {
        self.fit
    }

    /// The filter this tap feeds.
    pub fn filter_id(&self) -> FilterId {
        self.filter
    }

    /// The coordinator's rendezvous address, if the taps post from other
    /// processes.
    pub fn rendezvous(&self) -> Option<&str> {
        self.rendezvous.as_deref()
    }

    /// The join this filter serves, as plans show it.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The execution scope the node runs in now.
    pub fn scope(&self) -> Scope {
        self.scope.get()
    }

    /// The execution's scope and token now (for the codec).
    pub(crate) fn run_key(&self) -> RunKey {
        self.scope.key()
    }

    fn run(&self, ctx: &Arc<TaskContext>) -> Result<Arc<TapRun>> {
        let mut runs = self.runs.0.lock();
        runs.retain(|(c, _)| c.strong_count() > 0);
        if let Some((_, r)) = runs
            .iter()
            .find(|(c, _)| std::ptr::eq(c.as_ptr(), Arc::as_ptr(ctx)))
        {
            return Ok(Arc::clone(r));
        }
        let task = DistributedTaskContext::from_ctx(ctx);
        let filter = BitFilter::new(self.params)
            .map_err(|e| DataFusionError::Execution(format!("{NAME}: {e}")))?;
        let run = Arc::new(TapRun {
            filter: Arc::new(filter),
            partitions: self.properties.partitioning.partition_count(),
            ended: AtomicUsize::new(0),
            posted: AtomicBool::new(false),
            rows: AtomicU64::new(0),
            bounds: Mutex::new(None),
            task: task.task_index,
            tasks: task.task_count,
            id: self.filter,
            key: self.scope.key(),
            rendezvous: self.rendezvous.clone(),
            fit: self.fit,
            partial_bytes: MetricBuilder::new(&self.metrics).global_counter("partial_bytes"),
            halvings: MetricBuilder::new(&self.metrics).global_counter("partial_halvings"),
        });
        runs.push((Arc::downgrade(ctx), Arc::clone(&run)));
        Ok(run)
    }
}

/// What a task's partitions share.
#[derive(Debug)]
struct TapRun {
    filter: Arc<BitFilter>,
    partitions: usize,
    ended: AtomicUsize,
    posted: AtomicBool,
    rows: AtomicU64,
    /// The bounds of the keys of the partitions that ended.
    bounds: Mutex<Option<KeyBounds>>,
    task: usize,
    tasks: usize,
    id: FilterId,
    key: RunKey,
    rendezvous: Option<String>,
    fit: Option<f64>,
    partial_bytes: Count,
    halvings: Count,
}

impl TapRun {
    /// One partition reached its end, its keys within `bounds`: the last
    /// one posts the filter.
    fn partition_ended(&self, bounds: KeyBounds) {
        {
            let mut mine = self.bounds.lock();
            match mine.as_mut() {
                Some(m) => m.widen(&bounds),
                None => *mine = Some(bounds),
            }
        }
        if self.ended.fetch_add(1, Ordering::AcqRel) + 1 == self.partitions {
            let body = PartialBody::Filter(Arc::clone(&self.filter));
            self.post(body);
        }
    }

    /// The task's keys are incomplete: post the failure (once).
    fn fail(&self, why: String) {
        self.post(PartialBody::Failed(why));
    }

    fn post(&self, body: PartialBody) {
        if self.posted.swap(true, Ordering::AcqRel) {
            return;
        }
        #[cfg(feature = "test-hooks")]
        let Some(body) = self.injected(body) else {
            return;
        };
        self.send(body);
    }

    /// What the tests injected into this filter ([`super::hooks`]): the
    /// body to send now, or `None` when it is dropped or sent later.
    #[cfg(feature = "test-hooks")]
    fn injected(&self, body: PartialBody) -> Option<PartialBody> {
        use super::hooks::{self, TapFault};
        let faults = hooks::of(self.id);
        let body = match (faults.tap, body) {
            (TapFault::Fail, _) => PartialBody::Failed("injected failure".into()),
            (TapFault::Never, _) => return None,
            (TapFault::None, body) => body,
        };
        if faults.post_delay.is_zero() {
            return Some(body);
        }
        self.post_later(body, faults.post_delay);
        None
    }

    fn send(&self, body: PartialBody) {
        let body = self.fitted(body);
        let post = Post {
            task: self.task,
            tasks: self.tasks,
            rows: self.rows.load(Ordering::Acquire),
            bounds: self.bounds.lock().clone(),
            body,
        };
        let Some(url) = &self.rendezvous else {
            // The coordinator's process: the merge happens here, now.
            rendezvous::post_local(self.id, self.key.scope, post);
            return;
        };
        let Some(frame) = self.remote_frame(post) else {
            return;
        };
        self.partial_bytes.add(frame.len());
        let url = url.clone();
        let run = (self.id, self.key);
        // Without a runtime (a plan executed outside tokio) nothing can be
        // sent; undelivered, the probe side passes every row at its
        // deadline either way.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = rendezvous::post_remote(&url, run, frame).await;
            });
        }
    }

    /// [`Self::send`] after `delay` (a test hook: a build side slower than
    /// the probe side's deadline).
    #[cfg(feature = "test-hooks")]
    fn post_later(&self, body: PartialBody, delay: std::time::Duration) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let run = TapRun {
            filter: Arc::clone(&self.filter),
            partitions: self.partitions,
            ended: AtomicUsize::new(0),
            posted: AtomicBool::new(false),
            rows: AtomicU64::new(self.rows.load(Ordering::Acquire)),
            bounds: Mutex::new(self.bounds.lock().clone()),
            task: self.task,
            tasks: self.tasks,
            id: self.id,
            key: self.key,
            rendezvous: self.rendezvous.clone(),
            fit: self.fit,
            partial_bytes: self.partial_bytes.clone(),
            halvings: self.halvings.clone(),
        };
        rt.spawn(async move {
            tokio::time::sleep(delay).await;
            run.posted.store(true, Ordering::Release);
            run.send(body);
        });
    }

    /// `body` with its filter halved by [`fit_partial`] where the tap
    /// fits its partials: `PartialBody::Halved` with the partial's distinct
    /// keys estimated at its planned size, where the estimate is sharpest
    /// (the coordinator judges halved partials by it).
    fn fitted(&self, body: PartialBody) -> PartialBody {
        let PartialBody::Filter(f) = body else {
            return body;
        };
        match self.fit.map(|fp| fit_partial(&f, self.tasks, fp)) {
            // Halved, so not saturated: its estimate is finite.
            Some((Some(half), halvings)) => {
                self.halvings.add(halvings as usize);
                let keys = f.estimate_len().round() as u64;
                PartialBody::Halved {
                    filter: Arc::new(half),
                    keys,
                }
            }
            _ => PartialBody::Filter(f),
        }
    }

    /// The post as a frame for another process (the filter as a message
    /// whose key count is the partial's distinct keys at its planned size).
    fn remote_frame(&self, post: Post) -> Option<Vec<u8>> {
        let (f, n) = match post.body {
            PartialBody::Filter(ref f) => {
                let keys = f.estimate_len();
                let n = if keys.is_finite() {
                    keys.round() as u64
                } else {
                    post.rows
                };
                (Arc::clone(f), n)
            }
            PartialBody::Halved { ref filter, keys } => (Arc::clone(filter), keys),
            _ => return rendezvous::encode_post(self.id, self.key, &post),
        };
        let body = match encode_message(f.as_ref(), n, 0, CodecChoice::Auto) {
            Ok(m) => PartialBody::Message(m),
            Err(e) => PartialBody::Failed(format!("encoding the partial: {e}")),
        };
        rendezvous::encode_post(self.id, self.key, &Post { body, ..post })
    }
}

/// `filter`, one task's partial of `tasks`, halved while the merged filter
/// would stay within rate `target` if every task held as many distinct keys
/// as this one (estimated from its fill), and the layout halves; `None`
/// when it is not halved, and the halvings made.
///
/// Why no task's keys are lost, whatever the skew: halving is exact (every
/// key stays), and the coordinator ORs each partial into a filter of the
/// planned size, a halved one spread over it (`union_with_halved`). A task
/// that holds fewer keys than the others halves further; spread, its part
/// keeps the rate it had halved, under `target`, and adds a load of at most
/// `1/tasks` of the target's to the merged filter.
pub(super) fn fit_partial(
    filter: &BitFilter,
    tasks: usize,
    target: f64,
) -> (Option<BitFilter>, u32) {
    let merged_keys = filter.estimate_len() * tasks.max(1) as f64;
    // A saturated filter estimates infinite keys: never halved.
    let merged_keys = if merged_keys.is_finite() {
        merged_keys.ceil() as u64
    } else {
        u64::MAX
    };
    let (mut out, mut halvings): (Option<BitFilter>, u32) = (None, 0);
    loop {
        let cur = out.as_ref().unwrap_or(filter);
        let p = cur.params();
        let Ok(half) = FilterParams::new(p.layout(), p.m() / 2, p.k(), p.hash()) else {
            break;
        };
        if half.expected_fp(merged_keys) > target {
            break;
        }
        let Ok(h) = cur.halve() else {
            break;
        };
        out = Some(h);
        halvings += 1;
    }
    (out, halvings)
}

impl DisplayAs for BloomTapExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let keys: Vec<String> = self.keys.iter().map(|k| k.to_string()).collect();
        write!(
            f,
            "{NAME}: {}, keys=[{}], m={}, k={}",
            self.label,
            keys.join(", "),
            self.params.m(),
            self.params.k()
        )?;
        if self.ahead > 0 {
            write!(f, ", read_ahead={}", self.ahead)?;
        }
        Ok(())
    }
}

impl ExecutionPlan for BloomTapExec {
    one_child_plan!(own_properties(NAME));
    one_child_plan!(key_expressions);
    one_child_plan!(fresh_children(NAME));

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let run = self.run(&context)?;
        let input = self.input.execute(partition, Arc::clone(&context))?;
        let schema = self.input.schema();
        let types = self
            .keys
            .iter()
            .map(|k| k.data_type(&schema))
            .collect::<Result<Vec<_>>>()?;
        let tapped: SendableRecordBatchStream = Box::pin(TapStream {
            schema: input.schema(),
            input,
            run: Arc::clone(&run),
            keys: self.keys.clone(),
            bounds: BoundsAcc::new(&types),
            ended: false,
            rows: MetricBuilder::new(&self.metrics).counter("build_rows", partition),
            time: MetricBuilder::new(&self.metrics).elapsed_compute(partition),
        });
        if self.ahead == 0 {
            return Ok(tapped);
        }
        let full = MetricBuilder::new(&self.metrics).counter("read_ahead_full", partition);
        let on_full = move || {
            full.add(1);
            run.fail("the probe side outgrew its read-ahead".into());
        };
        let pool = context.memory_pool();
        let reservation = MemoryConsumer::new(format!("{NAME}[{partition}]")).register(pool);
        match ReadAhead::start(tapped, reservation, self.ahead, on_full) {
            Ok(ahead) => Ok(Box::pin(ahead)),
            // No runtime to read ahead on: the filter would come after the
            // build side, and is abandoned at once (the stream's own run).
            Err(tapped) => {
                self.run(&context)?
                    .fail("no runtime to read the probe side ahead on".into());
                Ok(tapped)
            }
        }
    }

    one_child_plan!(input_statistics);

    fn cardinality_effect(&self) -> CardinalityEffect {
        CardinalityEffect::Equal
    }
}

/// One partition of the build input, passing through.
struct TapStream {
    schema: SchemaRef,
    input: SendableRecordBatchStream,
    run: Arc<TapRun>,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    bounds: BoundsAcc,
    ended: bool,
    rows: Count,
    time: Time,
}

impl TapStream {
    fn insert(&mut self, batch: &RecordBatch) -> Result<u64> {
        let _timer = self.time.timer();
        let columns = self
            .keys
            .iter()
            .map(|k| k.evaluate(batch)?.into_array(batch.num_rows()))
            .collect::<Result<Vec<_>>>()?;
        self.bounds.update(&columns);
        insert_rows(&self.run.filter, &KeyColumns::new(&columns)?)
    }
}

impl Stream for TapStream {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        let item = futures::ready!(self.input.poll_next_unpin(cx));
        match &item {
            // A run that posted (a failure) takes no more keys.
            Some(Ok(_)) if self.run.posted.load(Ordering::Acquire) => {}
            Some(Ok(batch)) => match self.insert(batch) {
                Ok(n) => {
                    self.rows.add(n as usize);
                    self.run.rows.fetch_add(n, Ordering::AcqRel);
                }
                // The join evaluates the same expressions on the same rows
                // and reports the error itself; the filter is only lost.
                Err(e) => self.run.fail(format!("a build key failed: {e}")),
            },
            Some(Err(e)) => self.run.fail(format!("the build input failed: {e}")),
            None => {
                self.ended = true;
                let bounds = self.bounds.finish();
                self.run.partition_ended(bounds);
            }
        }
        Poll::Ready(item)
    }
}

impl RecordBatchStream for TapStream {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }
}

impl Drop for TapStream {
    fn drop(&mut self) {
        if !self.ended {
            self.run
                .fail("a build partition was dropped before its end".into());
        }
    }
}
