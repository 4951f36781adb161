//! Runtime filters in the Parquet scan: a DataFusion dynamic filter handed
//! to the scan through its filter-pushdown API, `true` until the runtime
//! filter arrives, then "each key within the build keys' bounds, and in the
//! filter".
//!
//! The rule ([`super::scan_place::into_scans`]) follows each probe place's
//! key down its stage by lineage (through projections, filters,
//! repartitions and the kept side of joins, never across a shuffle) to
//! every Parquet scan it reaches, and puts a `BloomScanExec` above it.
//! When that node runs, it pushes one `DynamicFilterPhysicalExpr` per
//! filter into the scan ([`with_predicates`]: `DataSource::
//! try_pushdown_filters`, which maps the key's columns from the scan's
//! output to its table schema), registered here by filter and execution
//! scope ([`watch`]). The [`super::exec::BloomFilterExec`] above stays: it
//! drops the rows.
//!
//! When a probe task's filter arrives ([`super::probe::receive`]) it is
//! registered here ([`arrived`]) and set into every dynamic filter waiting
//! for it, which is then complete. DataFusion's Parquet scan reads a
//! dynamic filter at each point where it can use it:
//! - a file it opens is skipped when its statistics lie outside the bounds,
//!   and so are its row groups and pages;
//! - a file already open stops early once its statistics fall outside
//!   (DataFusion's pruner of an open file's row groups pruned none in the
//!   TPC-DS runs: docs/DATAFUSION.md), so the scan waits for its filters
//!   before it opens a file, within a budget (`BloomScanExec`'s
//!   `scan_wait`, from [`watch`]'s signal);
//! - where the scan drops rows itself, [`ScanFilter`] checks each row's key
//!   against the Bloom filter before the scan decodes the other columns:
//!   in every scan where the session sets `datafusion.execution.parquet.
//!   pushdown_filters` (off by default), and otherwise where a filter has
//!   come [`sparse`] to a scan with no predicate of its own that reads a
//!   column besides the keys ([`with_predicates`]; its partitions choose
//!   once they have waited, `BloomScanExec`'s `reader_filtered` counts
//!   them). Only for these scans: the rule never sets the session's option.
//!
//! Before the filter, and when the run passes every row ([`passed`]), the
//! predicate is `true`: it can only ever remove rows the filter node would
//! remove, those whose key the build side does not hold.

use super::bounds::{ColumnBounds, KeyBounds};
use super::rendezvous::{FilterId, Scope};
use crate::cache::DecodedFilter;
use crate::rowkey::{contains_rows, KeyColumns};
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::config::ConfigOptions;
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::source::{DataSource, DataSourceExec};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, Operator};
use datafusion::physical_expr::expressions::{lit, BinaryExpr, DynamicFilterPhysicalExpr};
use datafusion::physical_expr::split_conjunction;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_distributed::DistributedLeafExec;
use filterstore::BloomRead;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, LazyLock, Weak};
use tokio::sync::watch as signal;

/// Name of the predicate in plans.
pub(super) const NAME: &str = "BloomScanFilter";

/// What arrived for one filter's execution in this process.
#[derive(Debug)]
pub(super) struct ScanArrival {
    pub(super) filter: Arc<DecodedFilter>,
    bounds: Option<KeyBounds>,
}

/// A scan's dynamic filter waiting for its runtime filter, what it
/// filters on, and the signal its scan waits on before it opens a file.
struct Watcher {
    target: Weak<DynamicFilterPhysicalExpr>,
    spec: ScanFilterSpec,
    done: signal::Sender<bool>,
}

/// How many runs that passed every row this process remembers, so that a
/// scan watching one of them after the fact does not wait for it.
const PASSED_KEPT: usize = 1024;

#[derive(Default)]
struct Registry {
    arrived: HashMap<(FilterId, Scope), Weak<ScanArrival>>,
    waiting: HashMap<(FilterId, Scope), Vec<Watcher>>,
    /// The latest runs that passed every row, oldest first.
    passed: VecDeque<(FilterId, Scope)>,
}

/// A scan's dynamic filter for one runtime filter, and whether it is done:
/// set to the filter, or left `true` because its run passes every row.
/// The signal is this module's own, not `DynamicFilterPhysicalExpr::
/// wait_complete` (which checks the state, then subscribes: a completion
/// between the two, sent while nothing else listened, would be missed).
pub(super) struct Watch {
    pub(super) target: Arc<DynamicFilterPhysicalExpr>,
    pub(super) done: signal::Receiver<bool>,
}

impl Watch {
    /// `target`, done already: nothing is left to wait for.
    fn done(target: Arc<DynamicFilterPhysicalExpr>) -> Watch {
        let (_, done) = signal::channel(true);
        Watch { target, done }
    }
}

static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(Mutex::default);

/// Registers filter `id`'s arrival for execution `scope` in this process,
/// for as long as the returned `Arc` (held by the probe task) lives, and
/// sets it into every scan of this process waiting for it. Every probe
/// task of one execution receives the same filter and bounds: a task
/// finding one registered shares it.
pub(super) fn arrived(
    id: FilterId,
    scope: Scope,
    filter: Arc<DecodedFilter>,
    bounds: Option<KeyBounds>,
) -> Arc<ScanArrival> {
    let mut r = REGISTRY.lock();
    r.arrived.retain(|_, w| w.strong_count() > 0);
    let a = match r.arrived.get(&(id, scope)).and_then(Weak::upgrade) {
        Some(live) => live,
        None => {
            let a = Arc::new(ScanArrival { filter, bounds });
            r.arrived.insert((id, scope), Arc::downgrade(&a));
            a
        }
    };
    for w in r.waiting.remove(&(id, scope)).unwrap_or_default() {
        if let Some(target) = w.target.upgrade() {
            set(&target, &a, &w.spec);
        }
        w.done.send_replace(true);
    }
    a
}

/// Filter `id`'s run of `scope` passes every row in this process: the
/// scans waiting for it stop waiting (their predicate stays `true`), and
/// so does a scan that watches it later (the last [`PASSED_KEPT`] runs are
/// remembered; one older waits out its budget, and reads as it would
/// have).
pub(super) fn passed(id: FilterId, scope: Scope) {
    let mut r = REGISTRY.lock();
    if !r.passed.contains(&(id, scope)) {
        if r.passed.len() == PASSED_KEPT {
            r.passed.pop_front();
        }
        r.passed.push_back((id, scope));
    }
    let waiting = r.waiting.remove(&(id, scope));
    for w in waiting.unwrap_or_default() {
        if let Some(target) = w.target.upgrade() {
            target.mark_complete();
        }
        w.done.send_replace(true);
    }
}

/// A dynamic filter for `spec`'s runtime filter in execution `scope`:
/// `true` until the filter arrives in this process, then the bounds and
/// the filter ([`set`]); set at once if it has arrived already, and done
/// at once if its run passed every row.
pub(super) fn watch(spec: &ScanFilterSpec, scope: Scope) -> Watch {
    let target = Arc::new(DynamicFilterPhysicalExpr::new(spec.keys.clone(), lit(true)));
    let key = (spec.filter, scope);
    let mut r = REGISTRY.lock();
    if let Some(a) = r.arrived.get(&key).and_then(Weak::upgrade) {
        set(&target, &a, spec);
        return Watch::done(target);
    }
    if r.passed.contains(&key) {
        target.mark_complete();
        return Watch::done(target);
    }
    // Waiters of runs that ended without a filter, their scans dropped.
    r.waiting
        .retain(|_, ws| ws.iter().any(|w| w.target.strong_count() > 0));
    let (tx, done) = signal::channel(false);
    r.waiting.entry(key).or_default().push(Watcher {
        target: Arc::downgrade(&target),
        spec: spec.clone(),
        done: tx,
    });
    Watch { target, done }
}

/// Sets `target` to "each key within the bounds, and in the filter", and
/// marks it complete.
fn set(target: &DynamicFilterPhysicalExpr, a: &ScanArrival, spec: &ScanFilterSpec) {
    let contains: Arc<dyn PhysicalExpr> = Arc::new(ScanFilter {
        filter: Arc::clone(&a.filter),
        keys: spec.keys.clone(),
        nulls_pass: spec.nulls_pass,
    });
    let bounds = a
        .bounds
        .as_ref()
        .and_then(|b| b.predicate(&spec.keys, &spec.types, spec.nulls_pass));
    let expr = match bounds {
        Some(b) => Arc::new(BinaryExpr::new(b, Operator::And, contains)),
        None => contains,
    };
    // `update` fails only for an expression over other columns than the
    // filter's keys, which these are not; the filter then stays `true`.
    let _ = target.update(expr);
    target.mark_complete();
}

/// One filter of a `BloomScanExec`.
#[derive(Clone, Debug)]
pub(crate) struct ScanFilterSpec {
    /// The filter's id.
    pub(crate) filter: FilterId,
    /// The key expressions, over the scan's output.
    pub(crate) keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Their types as planned.
    pub(crate) types: Vec<DataType>,
    /// Whether rows with a null key pass.
    pub(crate) nulls_pass: bool,
}

/// Whether each row's key may be on the build side: the Bloom filter's
/// answer (what the scan evaluates where it drops rows itself).
#[derive(Debug)]
pub(crate) struct ScanFilter {
    filter: Arc<DecodedFilter>,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    nulls_pass: bool,
}

impl fmt::Display for ScanFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<String> = self.keys.iter().map(|k| k.to_string()).collect();
        write!(f, "{NAME}({})", keys.join(", "))
    }
}

impl PartialEq for ScanFilter {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.filter, &other.filter)
            && self.nulls_pass == other.nulls_pass
            && self.keys == other.keys
    }
}

impl Eq for ScanFilter {}

impl Hash for ScanFilter {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.filter).hash(state);
        self.nulls_pass.hash(state);
        self.keys.hash(state);
    }
}

impl PhysicalExpr for ScanFilter {
    fn data_type(&self, _input_schema: &Schema) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn nullable(&self, _input_schema: &Schema) -> Result<bool> {
        Ok(false)
    }

    fn evaluate(&self, batch: &RecordBatch) -> Result<ColumnarValue> {
        let n = batch.num_rows();
        let columns = self
            .keys
            .iter()
            .map(|k| k.evaluate(batch)?.into_array(n))
            .collect::<Result<Vec<_>>>()?;
        let keys = KeyColumns::new(&columns)?;
        let keep = contains_rows(&self.filter.filter, &keys, self.nulls_pass)?;
        Ok(ColumnarValue::Array(Arc::new(keep)))
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        self.keys.iter().collect()
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        Ok(Arc::new(ScanFilter {
            filter: Arc::clone(&self.filter),
            keys: children,
            nulls_pass: self.nulls_pass,
        }))
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// `node` (a Parquet scan, see [`super::scan_place::is_parquet_scan`]) with `predicates` in
/// its predicate, unchanged where the scan refuses them; with `reader`,
/// the Parquet reader drops the rows they rule out where it may
/// ([`reader_may_drop_rows`]), and whether it does anywhere.
pub(super) fn with_predicates(
    node: &Arc<dyn ExecutionPlan>,
    predicates: &[Arc<dyn PhysicalExpr>],
    reader: bool,
) -> Result<(Arc<dyn ExecutionPlan>, bool)> {
    if let Some(leaf) = node.downcast_ref::<DistributedLeafExec>() {
        let (original, mut drops) = with_predicates(leaf.original(), predicates, reader)?;
        let mut variants = Vec::with_capacity(leaf.variants().len());
        for v in leaf.variants() {
            let (v, d) = with_predicates(v, predicates, reader)?;
            drops |= d;
            variants.push(v);
        }
        let leaf = DistributedLeafExec::try_new(original, variants)?;
        return Ok((Arc::new(leaf), drops));
    }
    let Some(scan) = node.downcast_ref::<DataSourceExec>() else {
        return Ok((Arc::clone(node), false));
    };
    let Some(config) = scan.data_source().downcast_ref::<FileScanConfig>() else {
        return Ok((Arc::clone(node), false));
    };
    // The session's own Parquet settings are the scan's (its table options):
    // the default configuration adds no pushdown of its own.
    let mut options = ConfigOptions::default();
    let drops = reader && reader_may_drop_rows(config, &scan.schema(), predicates);
    options.execution.parquet.pushdown_filters = drops;
    let pushed = config.try_pushdown_filters(predicates.to_vec(), &options)?;
    Ok(match pushed.updated_node {
        Some(source) => (Arc::new(scan.clone().with_data_source(source)), drops),
        None => (Arc::clone(node), false),
    })
}

/// Whether the Parquet reader of this scan may drop the rows the filters
/// rule out before it decodes the scan's other columns: where the scan has
/// no predicate of its own (or only DataFusion's dynamic filters: the
/// reader's switch covers a scan's whole predicate, and a query's own
/// predicate evaluated row by row in the reader made TPC-H slower,
/// `docs/BENCHMARKS.md`), and outputs a column that no filter reads, ours
/// or DataFusion's dynamic ones (else the filter node above drops the rows
/// as cheaply: the keys are decoded either way; TPC-DS q10's `store_sales`
/// scan, whose dates a dynamic filter of DataFusion's reads, ran 0.09×
/// slower with the reader dropping its rows).
fn reader_may_drop_rows(
    config: &FileScanConfig,
    output: &Schema,
    predicates: &[Arc<dyn PhysicalExpr>],
) -> bool {
    let own = config.file_source.filter();
    let own: Vec<Arc<dyn PhysicalExpr>> = own
        .iter()
        .flat_map(|p| split_conjunction(p).into_iter().cloned())
        .collect();
    if !own
        .iter()
        .all(|c| c.downcast_ref::<DynamicFilterPhysicalExpr>().is_some())
    {
        return false;
    }
    // Columns by name: the scan's own predicate reads the table's schema,
    // `predicates` the scan's output.
    let keys: std::collections::HashSet<String> = predicates
        .iter()
        .chain(&own)
        .flat_map(collect_columns)
        .map(|c| c.name().to_string())
        .collect();
    output.fields().iter().any(|f| !keys.contains(f.name()))
}

/// The most build keys per value within their bounds for which a filter is
/// [`sparse`].
const SPARSE_KEYS_PER_VALUE: f64 = 0.01;

/// Whether filter `id`'s run of `scope` has come to this process sparse:
/// one integer key column whose build keys are at most one in a hundred
/// values within their bounds (TPC-H q17's 204 part keys of 1 to 200,000),
/// so that a probe side spread over those values keeps few rows, scattered.
/// Only then does the scan's reader drop the rows itself: where the filter
/// kept more (TPC-H q9's 10,664 part keys, TPC-DS q10's customers), the
/// reader's row selection cost more than the columns it did not decode
/// (`docs/BENCHMARKS.md`).
pub(super) fn sparse(id: FilterId, scope: Scope) -> bool {
    let arrival = REGISTRY
        .lock()
        .arrived
        .get(&(id, scope))
        .and_then(Weak::upgrade);
    let Some(a) = arrival else {
        return false;
    };
    let Some(KeyBounds(columns)) = &a.bounds else {
        return false;
    };
    let [ColumnBounds::Range(min, max)] = columns.as_slice() else {
        return false;
    };
    let Some(span) = min
        .data_type()
        .is_integer()
        .then(|| min.distance(max))
        .flatten()
    else {
        return false;
    };
    a.filter.filter.estimate_len() <= SPARSE_KEYS_PER_VALUE * (span as f64 + 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::Field;
    use datafusion::physical_expr::expressions::col;

    fn spec(filter: FilterId) -> ScanFilterSpec {
        let schema = Schema::new(vec![Field::new("a", DataType::Int64, false)]);
        ScanFilterSpec {
            filter,
            keys: vec![col("a", &schema).unwrap()],
            types: vec![DataType::Int64],
            nulls_pass: false,
        }
    }

    /// A run that passed every row before its scan watched it: the scan
    /// does not wait for it (it waited out its whole budget before).
    #[test]
    fn a_scan_watching_a_run_that_already_passed_is_done_at_once() {
        let (id, scope) = (0xface_0001, 77);
        passed(id, scope);
        let w = watch(&spec(id), scope);
        assert!(*w.done.borrow());
    }

    /// A scan watching first is told when its run passes every row, and
    /// a scan of another run is not.
    #[test]
    fn a_waiting_scan_is_told_when_its_run_passes() {
        let (id, scope) = (0xface_0002, 78);
        let w = watch(&spec(id), scope);
        let other = watch(&spec(id), scope + 1);
        assert!(!*w.done.borrow());
        passed(id, scope);
        assert!(*w.done.borrow());
        assert!(!*other.done.borrow());
    }

    /// The runs remembered as passed are bounded.
    #[test]
    fn the_passed_runs_remembered_are_bounded() {
        for scope in 0..(PASSED_KEPT as u64 + 10) {
            passed(0xface_0003, 1_000_000 + scope);
        }
        assert!(REGISTRY.lock().passed.len() <= PASSED_KEPT);
    }
}
