//! Runtime filters in the Parquet scan: a DataFusion dynamic filter handed
//! to the scan through its filter-pushdown API, `true` until the runtime
//! filter arrives, then "each key within the build keys' bounds, and in the
//! filter".
//!
//! The rule ([`into_scans`]) follows each probe place's key down its stage
//! by lineage ([`super::lineage::step`]: through projections, filters,
//! repartitions and the kept side of joins, never across a shuffle) to
//! every Parquet scan it reaches, and puts a [`BloomScanExec`] above it.
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
//! - a file already open stops early once its statistics fall outside, and
//!   its row groups not yet read are pruned by theirs (DataFusion's
//!   row-group pruner re-reads a dynamic filter at each row-group boundary):
//!   a probe task reads its input from its first poll ([`super::feed`]), so
//!   most files are open before the filter comes;
//! - where the scan drops rows itself (`datafusion.execution.parquet.
//!   pushdown_filters = true`, off by default; the rule does not set it),
//!   [`ScanFilter`] checks each row's key against the Bloom filter before
//!   the scan decodes the other columns.
//!
//! Before the filter, and when the run passes every row ([`passed`]), the
//! predicate is `true`: it can only ever remove rows the filter node would
//! remove, those whose key the build side does not hold.

use super::bounds::KeyBounds;
use super::lineage::{self, Keys, Step};
use super::rendezvous::{FilterId, Scope};
use super::scan_node::{BloomScanExec, ScanFilterSpec};
use super::scope::ScopeCell;
use crate::cache::DecodedFilter;
use crate::rowkey::{contains_rows, KeyColumns};
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::config::ConfigOptions;
use datafusion::datasource::physical_plan::{FileScanConfig, ParquetSource};
use datafusion::datasource::source::{DataSource, DataSourceExec};
use datafusion::error::Result;
use datafusion::logical_expr::{ColumnarValue, Operator};
use datafusion::physical_expr::expressions::{lit, BinaryExpr, DynamicFilterPhysicalExpr};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::{ChildrenPropertiesMode, ExecutionPlan, ReplaceChildrenOptions};
use datafusion_distributed::DistributedLeafExec;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, LazyLock, Weak};
use std::time::Duration;

/// Name of the predicate in plans.
pub(super) const NAME: &str = "BloomScanFilter";

/// What arrived for one filter's execution in this process.
#[derive(Debug)]
pub(super) struct ScanArrival {
    pub(super) filter: Arc<DecodedFilter>,
    bounds: Option<KeyBounds>,
}

/// A scan's dynamic filter waiting for its runtime filter, and what it
/// filters on.
struct Watcher {
    target: Weak<DynamicFilterPhysicalExpr>,
    spec: ScanFilterSpec,
}

#[derive(Default)]
struct Registry {
    arrived: HashMap<(FilterId, Scope), Weak<ScanArrival>>,
    waiting: HashMap<(FilterId, Scope), Vec<Watcher>>,
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
    }
    a
}

/// Filter `id`'s run of `scope` passes every row in this process: the
/// scans waiting for it stop waiting (their predicate stays `true`). A scan
/// that starts later waits for nothing that comes, which costs it one
/// atomic load per batch.
pub(super) fn passed(id: FilterId, scope: Scope) {
    let mut r = REGISTRY.lock();
    let waiting = r.waiting.remove(&(id, scope));
    for w in waiting.unwrap_or_default() {
        if let Some(target) = w.target.upgrade() {
            target.mark_complete();
        }
    }
}

/// A dynamic filter for `spec`'s runtime filter in execution `scope`:
/// `true` until the filter arrives in this process, then the bounds and
/// the filter ([`set`]); set at once if it has arrived already.
pub(super) fn watch(spec: &ScanFilterSpec, scope: Scope) -> Arc<DynamicFilterPhysicalExpr> {
    let target = Arc::new(DynamicFilterPhysicalExpr::new(spec.keys.clone(), lit(true)));
    let key = (spec.filter, scope);
    let mut r = REGISTRY.lock();
    if let Some(a) = r.arrived.get(&key).and_then(Weak::upgrade) {
        set(&target, &a, spec);
        return target;
    }
    // Waiters of runs that ended without a filter, their scans dropped.
    r.waiting
        .retain(|_, ws| ws.iter().any(|w| w.target.strong_count() > 0));
    r.waiting.entry(key).or_default().push(Watcher {
        target: Arc::downgrade(&target),
        spec: spec.clone(),
    });
    target
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

/// Whether each row's key may be on the build side: the Bloom filter's
/// answer (what the scan evaluates where it drops rows itself).
#[derive(Debug)]
pub(crate) struct ScanFilter {
    filter: Arc<DecodedFilter>,
    keys: Keys,
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

/// What [`into_scans`] needs of the filter.
pub(super) struct ScanSpec<'a> {
    pub(super) filter: FilterId,
    pub(super) nulls_pass: bool,
    pub(super) scope: &'a Arc<ScopeCell>,
    /// How long the scan waits for the filter before it opens a file.
    pub(super) wait: Duration,
}

/// `node` (keys `keys` over its output) with the filter handed to every
/// Parquet scan its key reaches within its stage (each under a
/// [`BloomScanExec`]), and how many.
pub(super) fn into_scans(
    node: &Arc<dyn ExecutionPlan>,
    keys: &Keys,
    spec: &ScanSpec<'_>,
) -> Result<(Arc<dyn ExecutionPlan>, usize)> {
    let filter = |schema: &Schema| -> Result<ScanFilterSpec> {
        let types = keys
            .iter()
            .map(|k| k.data_type(schema))
            .collect::<Result<Vec<_>>>()?;
        Ok(ScanFilterSpec {
            filter: spec.filter,
            keys: keys.clone(),
            types,
            nulls_pass: spec.nulls_pass,
        })
    };
    if let Some(s) = node.downcast_ref::<BloomScanExec>() {
        let more = s.with_filter(filter(&node.schema())?, spec.wait);
        return Ok((Arc::new(more), 1));
    }
    if is_parquet_scan(node) {
        let f = filter(&node.schema())?;
        let scope = Arc::clone(spec.scope);
        let wrapped = BloomScanExec::new(Arc::clone(node), vec![f], scope, spec.wait);
        return Ok((Arc::new(wrapped), 1));
    }
    if lineage::is_boundary(node) {
        return Ok((Arc::clone(node), 0));
    }
    let Step::Into(into) = lineage::step(node, keys)? else {
        return Ok((Arc::clone(node), 0));
    };
    let mut children: Vec<Arc<dyn ExecutionPlan>> =
        node.children().into_iter().map(Arc::clone).collect();
    let mut reached = 0;
    for (i, k) in into {
        let Some(child) = children.get(i) else {
            continue;
        };
        let (new, n) = into_scans(child, &k, spec)?;
        children[i] = new;
        reached += n;
    }
    if reached == 0 {
        return Ok((Arc::clone(node), 0));
    }
    let opts = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep);
    Ok((Arc::clone(node).replace_children(children, opts)?, reached))
}

/// Whether `node` is a Parquet scan: a `DataSourceExec` of a
/// `ParquetSource`, or datafusion-distributed's leaf of such scans (one per
/// task).
fn is_parquet_scan(node: &Arc<dyn ExecutionPlan>) -> bool {
    let parquet = |p: &Arc<dyn ExecutionPlan>| {
        p.downcast_ref::<DataSourceExec>()
            .is_some_and(|s| s.downcast_to_file_source::<ParquetSource>().is_some())
    };
    match node.downcast_ref::<DistributedLeafExec>() {
        Some(leaf) => parquet(leaf.original()) && leaf.variants().iter().all(parquet),
        None => parquet(node),
    }
}

/// `node` (a Parquet scan, see [`is_parquet_scan`]) with `predicates` in
/// its predicate; unchanged where the scan refuses them.
pub(super) fn with_predicates(
    node: &Arc<dyn ExecutionPlan>,
    predicates: &[Arc<dyn PhysicalExpr>],
) -> Result<Arc<dyn ExecutionPlan>> {
    if let Some(leaf) = node.downcast_ref::<DistributedLeafExec>() {
        let original = with_predicates(leaf.original(), predicates)?;
        let variants = leaf
            .variants()
            .iter()
            .map(|v| with_predicates(v, predicates))
            .collect::<Result<Vec<_>>>()?;
        return Ok(Arc::new(DistributedLeafExec::try_new(original, variants)?));
    }
    let Some(scan) = node.downcast_ref::<DataSourceExec>() else {
        return Ok(Arc::clone(node));
    };
    let Some(config) = scan.data_source().downcast_ref::<FileScanConfig>() else {
        return Ok(Arc::clone(node));
    };
    // The session's own Parquet settings are the scan's (its table options):
    // the default configuration adds no pushdown of its own.
    let pushed = config.try_pushdown_filters(predicates.to_vec(), &ConfigOptions::default())?;
    Ok(match pushed.updated_node {
        Some(source) => Arc::new(scan.clone().with_data_source(source)),
        None => Arc::clone(node),
    })
}
