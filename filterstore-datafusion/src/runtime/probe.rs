//! A probe task's filter and one partition's filtering: the state behind
//! [`super::exec::BloomFilterExec`].
//!
//! One [`ProbeRun`] per task fetches the filter once ([`receive`]) and
//! holds the deadline shared by the task's partitions; one [`Probe`] per
//! partition checks, passes or stops checking batch by batch once its wait
//! has ended ([`super::feed`] reads the input meanwhile), and counts what it
//! did in the node's metrics.

use super::rendezvous::{self, fits_plan, Delivery, FilterId};
use super::scan::{self, ScanArrival};
use crate::cache;
use crate::rowkey::{contains_rows, KeyColumns};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::filter_record_batch;
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::metrics::{BaselineMetrics, Count, Time};
use filterstore::{BitFilter, BloomRead, FilterParams};
use futures::future::{BoxFuture, Shared};
use futures::FutureExt;
use parking_lot::Mutex;
use std::fmt;
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

/// Name of the node in plans and metrics.
pub(super) const NAME: &str = "BloomFilterExec";

/// How a probe task waits for its filter and when it stops checking it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProbePolicy {
    /// The longest a task waits for its filter, from its first poll.
    pub wait: Duration,
    /// Rows checked before the filter's worth is judged.
    pub check_window: u64,
    /// A filter that drops less than this share of the rows it checked in
    /// its first window stops being checked.
    pub min_drop: f64,
    /// Keep checking whatever the filter drops (tests, measurements).
    pub force: bool,
    /// The most bytes of rows a probe partition holds while its filter has
    /// not come (reserved in the task's memory pool); past it they pass
    /// unfiltered. 0: rows never wait.
    pub buffer_bytes: u64,
}

/// One run per task, keyed by the task's `TaskContext` (see the tap).
#[derive(Debug, Default)]
pub(super) struct Runs(pub(super) Mutex<Vec<(Weak<TaskContext>, Arc<ProbeRun>)>>);

/// What arrived for a task: the filter, or why every row passes.
#[derive(Clone)]
pub(super) enum Arrival {
    /// The filter (with its bounds), registered for the task's Parquet
    /// scans ([`super::scan`]) while the task holds its arrival, and its
    /// acknowledgement, under way.
    Filter(Arc<ScanArrival>, Acked),
    PassAll,
}

impl fmt::Debug for Arrival {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arrival::Filter(a, _) => f.debug_tuple("Filter").field(a).finish(),
            Arrival::PassAll => f.write_str("PassAll"),
        }
    }
}

type ArrivalFuture = Shared<BoxFuture<'static, Arrival>>;

/// A probe task's acknowledgement of its filter: done once the
/// coordinator has counted it (or its attempt ended). Each partition that
/// used the filter awaits it before its stream ends, so the count is in
/// before the query ends, without a round trip before the first row.
pub(super) type Acked = Shared<BoxFuture<'static, ()>>;

/// What a task's partitions share.
pub(super) struct ProbeRun {
    pub(super) arrival: ArrivalFuture,
    pub(super) first_poll: OnceLock<Instant>,
    pub(super) wait: Duration,
}

impl fmt::Debug for ProbeRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProbeRun")
            .field("wait", &self.wait)
            .finish()
    }
}

impl ProbeRun {
    pub(super) fn deadline(&self) -> Instant {
        *self.first_poll.get_or_init(Instant::now) + self.wait
    }
}

/// Where a task's filter comes from.
pub(super) struct Source {
    pub(super) id: FilterId,
    pub(super) key: rendezvous::RunKey,
    pub(super) rendezvous: Option<String>,
}

/// The task's filter, fetched once (why a filter did not come is the
/// coordinator's to report, in the filter's outcome).
///
/// The fetch starts now, when the task starts, on the rendezvous's own
/// thread ([`rendezvous::spawn`]), and so does what follows it: the filter
/// is decoded and set into the task's scans ([`scan::arrived`]) as soon as
/// it comes, whether or not a partition of the task is being polled then.
/// A scan that opens a file or starts a row group after that prunes by the
/// filter's bounds. Before, the fetch was sent at the task's first poll
/// and its answer read at a later one: in TPC-DS q52 on three worker
/// processes a filter decided 9 ms into the query reached its scans at
/// 73–93 ms, after their first poll at 51 ms.
pub(super) fn receive(source: Source, params: FilterParams, bytes: Count) -> ArrivalFuture {
    let (id, scope) = (source.id, source.key.scope);
    let arriving = rendezvous::spawn(arrive(source, params, bytes));
    async move {
        arriving.await.unwrap_or_else(|_| {
            // Not run, or ended early: the task passes every row.
            scan::passed(id, scope);
            Arrival::PassAll
        })
    }
    .boxed()
    .shared()
}

/// Fetches, decodes and acknowledges the task's filter, and sets it into
/// the task's scans.
async fn arrive(source: Source, params: FilterParams, bytes: Count) -> Arrival {
    let scope = source.key.scope;
    let delivery = match &source.rendezvous {
        Some(url) => rendezvous::fetch_remote(url, source.id, source.key).await,
        None => match rendezvous::subscribe(source.id, source.key.scope) {
            Some(rx) => rendezvous::delivery(rx).await,
            None => Delivery::PassAll("no such filter in this process".into()),
        },
    };
    match delivery {
        Delivery::Message(m, bounds) => {
            bytes.add(m.len());
            let decoded = decode(&m, &params);
            let acked = acknowledge(&source, decoded.is_ok());
            match decoded {
                Ok(f) => {
                    let bounds = bounds.map(|b| b.as_ref().clone());
                    Arrival::Filter(scan::arrived(source.id, scope, f, bounds), acked)
                }
                Err(_) => {
                    // Rare: counted before any partition ends.
                    acked.await;
                    scan::passed(source.id, scope);
                    Arrival::PassAll
                }
            }
        }
        Delivery::PassAll(_) => {
            scan::passed(source.id, scope);
            Arrival::PassAll
        }
    }
}

/// Tells the filter's run that this task received it and could, or could
/// not, read it. In the coordinator's process this is done on return; from
/// a worker process it is one round trip, sent now and awaited by the
/// task's partitions only when their input has ended ([`Acked`]): the task
/// filters meanwhile.
fn acknowledge(source: &Source, readable: bool) -> Acked {
    match &source.rendezvous {
        Some(url) => {
            let (url, id, key) = (url.clone(), source.id, source.key);
            let sent = tokio::spawn(async move {
                rendezvous::acknowledge_remote(&url, id, key, readable).await;
            });
            sent.map(|_| ()).boxed().shared()
        }
        None => {
            rendezvous::acknowledge_local(source.id, source.key.scope, readable);
            futures::future::ready(()).boxed().shared()
        }
    }
}

/// The message's filter, if it has the planned shape or that shape halved
/// ([`fits_plan`]). Decoded once per process ([`crate::cache`]) whatever
/// the number of tasks it serves.
pub(super) fn decode(
    message: &[u8],
    params: &FilterParams,
) -> std::result::Result<Arc<cache::DecodedFilter>, String> {
    let key = xxhash_rust::xxh3::xxh3_128(message);
    let decoded = cache::decoded_keyed(NAME, key, message).map_err(|e| e.to_string())?;
    if !fits_plan(decoded.filter.params(), params) {
        return Err("a filter of another shape than planned".into());
    }
    Ok(decoded)
}

/// Where a partition stands with its filter.
pub(super) enum State {
    /// Not yet waited.
    Waiting,
    /// Waited to the deadline; rows pass until the filter arrives.
    Late,
    /// Checking rows against the filter.
    Checking(Arc<cache::DecodedFilter>),
    /// Passing every row (no filter, or one not worth checking).
    Passing,
}

pub(super) struct ProbeMetrics {
    pub(super) baseline: BaselineMetrics,
    pub(super) rows_in: Count,
    pub(super) unfiltered: Count,
    pub(super) unchecked: Count,
    pub(super) key_errors: Count,
    pub(super) wait: Time,
    pub(super) deadline_missed: Count,
    pub(super) pass_all: Count,
    pub(super) stopped: Count,
}

/// One partition's filtering.
pub(super) struct Probe {
    /// For the test seams only ([`super::hooks`], [`waiting_probes`]).
    #[cfg(feature = "test-hooks")]
    pub(super) filter_id: FilterId,
    pub(super) keys: Vec<Arc<dyn PhysicalExpr>>,
    pub(super) nulls_pass: bool,
    pub(super) policy: ProbePolicy,
    pub(super) state: State,
    /// The task's acknowledgement of the filter this partition took, to
    /// await before its stream ends.
    pub(super) acked: Option<Acked>,
    pub(super) checked: u64,
    pub(super) dropped: u64,
    pub(super) metrics: ProbeMetrics,
}

impl Probe {
    /// Whether the filter has not come and no wait for it has ended.
    pub(super) fn is_waiting(&self) -> bool {
        matches!(self.state, State::Waiting)
    }

    /// The deadline passed before the filter: rows pass until it comes.
    pub(super) fn miss_deadline(&mut self) {
        self.metrics.deadline_missed.add(1);
        self.state = State::Late;
    }

    /// Rows pass until the filter comes (a full buffer).
    pub(super) fn pass_until_arrival(&mut self) {
        self.state = State::Late;
    }

    /// After the deadline: take the filter if it has arrived since.
    pub(super) fn poll_late(&mut self, run: &ProbeRun) {
        if !matches!(self.state, State::Late) {
            return;
        }
        if let Some(a) = run.arrival.clone().now_or_never() {
            self.arrive(a);
        }
    }

    pub(super) fn arrive(&mut self, a: Arrival) {
        self.state = match a {
            Arrival::Filter(a, acked) => {
                self.acked = Some(acked);
                State::Checking(Arc::clone(&a.filter))
            }
            Arrival::PassAll => {
                self.metrics.pass_all.add(1);
                State::Passing
            }
        };
    }

    /// The rows of `batch` that may join.
    pub(super) fn filter(&mut self, batch: RecordBatch) -> RecordBatch {
        let n = batch.num_rows();
        self.metrics.rows_in.add(n);
        let time = self.metrics.baseline.elapsed_compute().clone();
        let _timer = time.timer();
        let filter = match &self.state {
            State::Checking(f) => Some(Arc::clone(f)),
            _ => None,
        };
        let passing = matches!(self.state, State::Passing);
        let out = match (filter, passing) {
            (Some(f), _) => self.check(batch, &f.filter),
            (None, true) => {
                self.metrics.unchecked.add(n);
                batch
            }
            (None, false) => {
                self.metrics.unfiltered.add(n);
                batch
            }
        };
        self.metrics.baseline.record_output(out.num_rows());
        out
    }

    fn check(&mut self, batch: RecordBatch, filter: &BitFilter) -> RecordBatch {
        let n = batch.num_rows();
        let kept = self
            .keep(&batch, filter)
            .and_then(|keep| Ok(filter_record_batch(&batch, &keep)?));
        let out = match kept {
            Ok(out) => out,
            Err(_) => {
                self.metrics.key_errors.add(n);
                return batch;
            }
        };
        self.checked += n as u64;
        self.dropped += (n - out.num_rows()) as u64;
        let window = self.policy.check_window.max(1);
        if !self.policy.force
            && self.checked >= window
            && (self.dropped as f64) < self.policy.min_drop * self.checked as f64
        {
            self.metrics.stopped.add(1);
            self.state = State::Passing;
        }
        out
    }

    fn keep(
        &self,
        batch: &RecordBatch,
        filter: &BitFilter,
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

/// Probe partitions of this process waiting for their filter now, by
/// filter (for the tests of cancellation; with the `test-hooks` feature).
#[cfg(feature = "test-hooks")]
static WAITING: std::sync::LazyLock<Mutex<std::collections::HashMap<FilterId, usize>>> =
    std::sync::LazyLock::new(|| Mutex::new(std::collections::HashMap::new()));

/// Probe partitions of this process waiting for filter `id` now (for the
/// tests of cancellation; not a stable API).
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub fn waiting_probes(id: FilterId) -> usize {
    WAITING.lock().get(&id).copied().unwrap_or(0)
}

/// Counts a waiting partition while it lives (a dropped wait counts out).
#[cfg(feature = "test-hooks")]
pub(super) struct Waiting(FilterId);

#[cfg(feature = "test-hooks")]
impl Waiting {
    pub(super) fn enter(id: FilterId) -> Waiting {
        *WAITING.lock().entry(id).or_insert(0) += 1;
        Waiting(id)
    }
}

#[cfg(feature = "test-hooks")]
impl Drop for Waiting {
    fn drop(&mut self) {
        let mut w = WAITING.lock();
        if let Some(n) = w.get_mut(&self.0) {
            *n -= 1;
            if *n == 0 {
                w.remove(&self.0);
            }
        }
    }
}
