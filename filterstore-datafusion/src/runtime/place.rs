//! The rewrite: a tap above the join's build input, a filter node at each
//! place on the probe side, and the filter's shape.

use super::config::RuntimeFilterConfig;
use super::exec::{BloomFilterExec, ProbeSpec};
use super::lineage::{Keys, Point};
use super::rendezvous::Slot;
use super::scan::{self, ScanSpec};
use super::scope::ScopeCell;
use super::tap::BloomTapExec;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_plan::{ChildrenPropertiesMode, ExecutionPlan, ReplaceChildrenOptions};
use filterstore::{FilterParams, HashSpec, Layout, MESSAGE_OVERHEAD};
use std::sync::Arc;

/// The seed of every runtime filter's XXH3 (any fixed value: a filter lives
/// for one query).
const SEED: u64 = 0x6673_7472_2d72_7466;

/// Keys a filter is sized for when statistics do not count the build side.
pub(super) const UNKNOWN_BUILD_KEYS: u64 = 1 << 20;

/// The filter's shape: sized for `keys`, an upper bound of the build side's
/// distinct keys ([`capacity`]), at the target rate, within the byte budget.
/// Every task of the join's stage builds its partial with it, so partials
/// merge by OR.
///
/// The bits per key are the standard layout's `log2(1/fp) / ln 2` plus 4%
/// (the blocked layout needs about 3% more at 1%: 9.90 against 9.59 bits
/// per key): `FilterParams::for_capacity`'s exact search over the blocked
/// layout's Poisson mixture costs ~0.4 ms, most of the rule's time per join,
/// for a filter that lives one query.
pub(super) fn plan_params(cfg: &RuntimeFilterConfig, keys: u64) -> Result<FilterParams> {
    let hash = HashSpec::xxh3(SEED);
    let n = keys.max(1);
    let err = |e: filterstore::ParamError| DataFusionError::External(Box::new(e));
    let fp = cfg.fp.clamp(1e-9, 0.5);
    let bits_per_key = ((1.0 / fp).log2() / std::f64::consts::LN_2 * 1.04).clamp(1.0, 1024.0);
    let sized =
        FilterParams::with_bits_per_key(n, bits_per_key, Layout::Blocked, hash).map_err(err)?;
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

/// Headroom over the build side's estimated rows: DataFusion estimates a
/// predicate it cannot read at 20% selectivity, so a filter sized for the
/// estimate alone is too full whenever the truth is higher.
pub(super) const HEADROOM: u64 = 4;

/// The keys to size a filter for: [`HEADROOM`] times the build side's
/// estimated rows, but never more than the rows of the table the build key
/// comes from (no build side holds more distinct keys); one of the two when
/// the other is unknown, else [`UNKNOWN_BUILD_KEYS`]. A filter larger than
/// its keys costs little on the wire (it is entropy-coded) and has fewer
/// false positives; one smaller than its keys passes every row.
pub(super) fn capacity(source_rows: Option<u64>, build_rows: Option<u64>) -> u64 {
    let padded = build_rows.map(|r| r.saturating_mul(HEADROOM).max(1024));
    match (source_rows, padded) {
        (Some(s), Some(b)) => s.min(b),
        (s, b) => s.or(b).unwrap_or(UNKNOWN_BUILD_KEYS),
    }
}

/// `build` under a tap that feeds `slot`'s filter.
pub(super) fn tap(
    build: &Arc<dyn ExecutionPlan>,
    keys: Keys,
    slot: &Slot,
    (cfg, scope): (&RuntimeFilterConfig, &Arc<ScopeCell>),
    label: &str,
) -> Result<Arc<dyn ExecutionPlan>> {
    Ok(Arc::new(BloomTapExec::try_new(
        Arc::clone(build),
        keys,
        *slot.params(),
        slot.id(),
        (cfg.rendezvous.clone(), Arc::clone(scope)),
        label.to_string(),
    )?))
}

/// `root` with a [`BloomFilterExec`] above the node at each point (each
/// numbered, for plans and reports), and with `scans`, the filter's
/// predicate in the Parquet scans each point's key reaches in its stage
/// ([`scan::into_scans`]); the plan and the scans reached.
pub(super) fn probe(
    root: &Arc<dyn ExecutionPlan>,
    points: &[(usize, Point)],
    spec: &ProbeSpec,
    scans: bool,
) -> Result<(Arc<dyn ExecutionPlan>, usize)> {
    let mut reached = 0;
    let kids = root.children();
    let mut node = Arc::clone(root);
    if points.iter().any(|(_, p)| !p.path.is_empty()) {
        let mut children = Vec::with_capacity(kids.len());
        for (i, c) in kids.iter().enumerate() {
            let below: Vec<(usize, Point)> = points
                .iter()
                .filter(|(_, p)| p.path.first() == Some(&i))
                .map(|(n, p)| {
                    let q = Point {
                        path: p.path[1..].to_vec(),
                        keys: p.keys.clone(),
                        depth: p.depth,
                    };
                    (*n, q)
                })
                .collect();
            children.push(if below.is_empty() {
                Arc::clone(c)
            } else {
                let (c, n) = probe(c, &below, spec, scans)?;
                reached += n;
                c
            });
        }
        let opts = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep);
        node = node.replace_children(children, opts)?;
    }
    for (n, p) in points.iter().filter(|(_, p)| p.path.is_empty()) {
        let spec = ProbeSpec {
            point: *n,
            ..spec.clone()
        };
        if scans {
            let to = ScanSpec {
                filter: spec.filter,
                nulls_pass: spec.nulls_pass,
                scope: &spec.scope,
            };
            let (below, n) = scan::into_scans(&node, &p.keys, &to)?;
            node = below;
            reached += n;
        }
        node = Arc::new(BloomFilterExec::try_new(node, p.keys.clone(), spec)?);
    }
    Ok((node, reached))
}
