//! Runtime filters in the Parquet scan: a predicate handed to the scan
//! through DataFusion's filter-pushdown API, `true` until the filter
//! arrives and "each key within the build keys' bounds" after.
//!
//! The rule ([`into_scans`]) follows each probe place's key down its stage
//! by lineage ([`super::lineage::step`]: through projections, filters,
//! repartitions and the kept side of joins, never across a shuffle) to
//! every Parquet `DataSourceExec` it reaches, and pushes a [`ScanFilter`]
//! into it (`DataSource::try_pushdown_filters`, which maps the key's
//! columns from the scan's output to its table schema). The
//! [`super::exec::BloomFilterExec`] above stays: it drops the rows.
//!
//! When a probe task's filter arrives ([`super::probe::receive`]) it is
//! registered here by filter and execution scope ([`arrived`]). From then
//! on the scan's predicate is dynamic in DataFusion's sense:
//! - [`ScanFilter`]'s `snapshot` is the bounds predicate
//!   ([`super::bounds::KeyBounds::predicate`]); the Parquet opener
//!   snapshots the predicate of each file it opens, so files, row groups
//!   and pages whose statistics lie outside the bounds are not read;
//! - where the scan drops rows itself (`datafusion.execution.parquet.
//!   pushdown_filters = true`, off by default; the rule does not set it),
//!   its `evaluate` checks each row's key against the Bloom filter before
//!   the scan decodes the other columns.
//!
//! Files opened before the filter arrives are read whole: a probe task
//! reads its input from its first poll ([`super::feed`]). Before the filter
//! and after "pass every row" the predicate is `true`, so it can only ever
//! remove rows the filter node would remove: those whose key the build
//! side does not hold.

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
use datafusion::common::ScalarValue;
use datafusion::datasource::physical_plan::{FileScanConfig, ParquetSource};
use datafusion::datasource::source::{DataSource, DataSourceExec};
use datafusion::error::Result;
use datafusion::logical_expr::ColumnarValue;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::{ChildrenPropertiesMode, ExecutionPlan, ReplaceChildrenOptions};
use datafusion_distributed::DistributedLeafExec;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, LazyLock, Weak};

/// Name of the predicate in plans.
pub(super) const NAME: &str = "BloomScanFilter";

/// What arrived for one filter's execution in this process.
#[derive(Debug)]
pub(super) struct ScanArrival {
    pub(super) filter: Arc<DecodedFilter>,
    bounds: Option<KeyBounds>,
}

type Arrivals = HashMap<(FilterId, Scope), Weak<ScanArrival>>;

static ARRIVED: LazyLock<Mutex<Arrivals>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// Registers filter `id`'s arrival for execution `scope` in this process,
/// for as long as the returned `Arc` (held by the probe task) lives. Every
/// probe task of one execution receives the same filter and bounds: a task
/// finding one registered shares it, so the registration lasts while any
/// of them runs.
pub(super) fn arrived(
    id: FilterId,
    scope: Scope,
    filter: Arc<DecodedFilter>,
    bounds: Option<KeyBounds>,
) -> Arc<ScanArrival> {
    let mut map = ARRIVED.lock();
    map.retain(|_, w| w.strong_count() > 0);
    if let Some(live) = map.get(&(id, scope)).and_then(Weak::upgrade) {
        return live;
    }
    let a = Arc::new(ScanArrival { filter, bounds });
    map.insert((id, scope), Arc::downgrade(&a));
    a
}

fn lookup(id: FilterId, scope: Scope) -> Option<Arc<ScanArrival>> {
    ARRIVED.lock().get(&(id, scope)).and_then(Weak::upgrade)
}

/// The scan's runtime-filter predicate (see the module documentation).
#[derive(Debug)]
pub(crate) struct ScanFilter {
    filter: FilterId,
    keys: Keys,
    types: Vec<DataType>,
    nulls_pass: bool,
    scope: Arc<ScopeCell>,
}

impl ScanFilter {
    /// The predicate of filter `filter` on `keys` (one per key column, of
    /// `types` as planned).
    pub(super) fn new(
        filter: FilterId,
        (keys, types): (Keys, Vec<DataType>),
        nulls_pass: bool,
        scope: Arc<ScopeCell>,
    ) -> ScanFilter {
        ScanFilter {
            filter,
            keys,
            types,
            nulls_pass,
            scope,
        }
    }

    fn arrival(&self) -> Option<Arc<ScanArrival>> {
        lookup(self.filter, self.scope.get())
    }
}

impl fmt::Display for ScanFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<String> = self.keys.iter().map(|k| k.to_string()).collect();
        write!(f, "{NAME}({})", keys.join(", "))
    }
}

impl PartialEq for ScanFilter {
    fn eq(&self, other: &Self) -> bool {
        self.filter == other.filter
            && self.nulls_pass == other.nulls_pass
            && self.keys == other.keys
            && self.types == other.types
    }
}

impl Eq for ScanFilter {}

impl Hash for ScanFilter {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.filter.hash(state);
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
        let Some(a) = self.arrival() else {
            return Ok(ColumnarValue::Scalar(ScalarValue::Boolean(Some(true))));
        };
        let n = batch.num_rows();
        let columns = self
            .keys
            .iter()
            .map(|k| k.evaluate(batch)?.into_array(n))
            .collect::<Result<Vec<_>>>()?;
        let keep = contains_rows(
            &a.filter.filter,
            &KeyColumns::new(&columns)?,
            self.nulls_pass,
        )?;
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
            filter: self.filter,
            keys: children,
            types: self.types.clone(),
            nulls_pass: self.nulls_pass,
            scope: Arc::clone(&self.scope),
        }))
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }

    /// The bounds predicate once the filter has arrived (what pruning by
    /// statistics reads); `None` (this node, which prunes nothing) before.
    fn snapshot(&self) -> Result<Option<Arc<dyn PhysicalExpr>>> {
        let Some(a) = self.arrival() else {
            return Ok(None);
        };
        let Some(bounds) = &a.bounds else {
            return Ok(None);
        };
        Ok(bounds.predicate(&self.keys, &self.types, self.nulls_pass))
    }

    fn snapshot_generation(&self) -> u64 {
        // Never 0: the predicate is dynamic until its filter arrives.
        if self.arrival().is_some() {
            2
        } else {
            1
        }
    }
}

/// What [`into_scans`] needs of the filter.
pub(super) struct ScanSpec<'a> {
    pub(super) filter: FilterId,
    pub(super) nulls_pass: bool,
    pub(super) scope: &'a Arc<ScopeCell>,
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
        let more = s.with_filter(filter(&node.schema())?);
        return Ok((Arc::new(more), 1));
    }
    if is_parquet_scan(node) {
        let f = filter(&node.schema())?;
        let wrapped = BloomScanExec::new(Arc::clone(node), vec![f], Arc::clone(spec.scope));
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
