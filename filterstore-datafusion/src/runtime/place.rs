//! The numbers a decision needs (row counts from DataFusion's statistics,
//! the filter's shape) and the rewrite that puts the filter in place.

use super::exec::BloomFilterExec;
use super::lineage::{step, Keys, Point, Step};
use super::report::SkipReason;
use super::RuntimeFilterConfig;
use crate::rowkey;
use datafusion::error::Result;
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
use datafusion::physical_plan::{ChildrenPropertiesMode, ExecutionPlan, ReplaceChildrenOptions};
use filterstore::{FilterParams, HashSpec, Layout, MESSAGE_OVERHEAD};
use std::sync::Arc;

/// The seed of every runtime filter's XXH3 (any fixed value: a filter lives
/// for one query).
const SEED: u64 = 0x6673_7472_2d72_7466;

/// Estimated rows `plan` produces, from DataFusion's statistics.
pub fn rows(plan: &Arc<dyn ExecutionPlan>) -> Option<u64> {
    let stats = StatisticsContext::new()
        .compute(plan.as_ref(), &StatisticsArgs::new())
        .ok()?;
    stats.num_rows.get_value().map(|n| *n as u64)
}

/// Rows of what produces the key: the node where the key's lineage stops
/// on each branch (a scan, typically), the smallest if several.
pub fn source_rows(node: &Arc<dyn ExecutionPlan>, keys: &Keys) -> Result<Option<u64>> {
    match step(node, keys)? {
        Step::Stop(_) => Ok(rows(node)),
        Step::Into(children) => {
            let kids = node.children();
            let mut best: Option<u64> = None;
            for (i, k) in children {
                if let Some(child) = kids.get(i) {
                    if let Some(r) = source_rows(child, &k)? {
                        best = Some(best.map_or(r, |b| b.min(r)));
                    }
                }
            }
            Ok(best)
        }
    }
}

/// The filter's shape: sized for the creation side's estimated rows (an
/// upper bound of its distinct keys) at the target rate, within the byte
/// budget.
pub fn plan_params(cfg: &RuntimeFilterConfig, creation_rows: u64) -> Result<FilterParams> {
    let hash = HashSpec::xxh3(SEED);
    let n = creation_rows.max(1);
    let err =
        |e: filterstore::ParamError| datafusion::error::DataFusionError::External(Box::new(e));
    let sized = FilterParams::for_capacity(n, cfg.fp, Layout::Blocked, hash).map_err(err)?;
    let budget_bits = cfg
        .max_filter_bytes
        .saturating_sub(MESSAGE_OVERHEAD as u64)
        .saturating_mul(8)
        .max(filterstore::BLOCK_BITS);
    if sized.m() <= budget_bits {
        return Ok(sized);
    }
    let m = budget_bits - budget_bits % filterstore::BLOCK_BITS;
    let k = filterstore::optimal_k(m, n, Layout::Blocked).clamp(1, 16);
    FilterParams::new(Layout::Blocked, m, k, hash).map_err(err)
}

/// Whether the key columns encode alike on both sides.
pub fn key_types(
    a: &Keys,
    a_plan: &Arc<dyn ExecutionPlan>,
    b: &Keys,
    b_plan: &Arc<dyn ExecutionPlan>,
) -> std::result::Result<(), SkipReason> {
    let (sa, sb) = (a_plan.schema(), b_plan.schema());
    for (x, y) in a.iter().zip(b) {
        let (tx, ty) = match (x.data_type(&sa), y.data_type(&sb)) {
            (Ok(tx), Ok(ty)) => (tx, ty),
            _ => return Err(SkipReason::KeyType("a key's type is unknown".into())),
        };
        if let Some(r) = rowkey::unsupported(&tx).or_else(|| rowkey::unsupported(&ty)) {
            return Err(SkipReason::KeyType(r));
        }
        if !rowkey::same_encoding(&tx, &ty) {
            return Err(SkipReason::KeyType(format!(
                "{tx} and {ty} encode differently"
            )));
        }
    }
    Ok(())
}

/// Estimated rows reaching the places, summed; `None` when one is unknown.
pub fn points_rows(root: &Arc<dyn ExecutionPlan>, points: &[Point]) -> Option<u64> {
    points
        .iter()
        .map(|p| node_at(root, &p.path).and_then(|n| rows(&n)))
        .sum()
}

fn node_at(root: &Arc<dyn ExecutionPlan>, path: &[usize]) -> Option<Arc<dyn ExecutionPlan>> {
    let mut node = Arc::clone(root);
    for &i in path {
        let next = Arc::clone(node.children().get(i)?);
        node = next;
    }
    Some(node)
}

/// `root` with a [`BloomFilterExec`] above the node at each point.
pub fn place(
    root: &Arc<dyn ExecutionPlan>,
    points: &[Point],
    message: &Arc<Vec<u8>>,
    nulls_pass: bool,
    name: &str,
) -> Result<Arc<dyn ExecutionPlan>> {
    let here: Vec<&Point> = points.iter().filter(|p| p.path.is_empty()).collect();
    let kids = root.children();
    let mut node = Arc::clone(root);
    if points.iter().any(|p| !p.path.is_empty()) {
        let mut children = Vec::with_capacity(kids.len());
        for (i, c) in kids.iter().enumerate() {
            let below: Vec<Point> = points
                .iter()
                .filter(|p| p.path.first() == Some(&i))
                .map(|p| Point {
                    path: p.path[1..].to_vec(),
                    keys: p.keys.clone(),
                    depth: p.depth,
                })
                .collect();
            children.push(if below.is_empty() {
                Arc::clone(c)
            } else {
                place(c, &below, message, nulls_pass, name)?
            });
        }
        let opts = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep);
        node = node.replace_children(children, opts)?;
    }
    for p in here {
        node = Arc::new(BloomFilterExec::try_new(
            node,
            p.keys.clone(),
            Arc::clone(message),
            nulls_pass,
            name.to_string(),
        )?);
    }
    Ok(node)
}
