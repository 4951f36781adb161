//! The rule's half of the runtime filters in the Parquet scan: each probe
//! place's key followed down its stage by lineage ([`super::lineage::step`]:
//! through projections, filters, repartitions and the kept side of joins,
//! never across a shuffle) to every Parquet scan it reaches, with a
//! [`BloomScanExec`] put above it. What that node does when it runs, and
//! how the filter reaches the scan: [`super::scan`].

use super::lineage::{self, Keys, Step};
use super::rendezvous::FilterId;
use super::scan::ScanFilterSpec;
use super::scan_node::BloomScanExec;
use super::scope::ScopeCell;
use datafusion::arrow::datatypes::Schema;
use datafusion::datasource::physical_plan::ParquetSource;
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::Result;
use datafusion::physical_plan::{ChildrenPropertiesMode, ExecutionPlan, ReplaceChildrenOptions};
use datafusion_distributed::DistributedLeafExec;
use std::sync::Arc;
use std::time::Duration;

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
pub(super) fn is_parquet_scan(node: &Arc<dyn ExecutionPlan>) -> bool {
    let parquet = |p: &Arc<dyn ExecutionPlan>| {
        p.downcast_ref::<DataSourceExec>()
            .is_some_and(|s| s.downcast_to_file_source::<ParquetSource>().is_some())
    };
    match node.downcast_ref::<DistributedLeafExec>() {
        Some(leaf) => parquet(leaf.original()) && leaf.variants().iter().all(parquet),
        None => parquet(node),
    }
}
