//! The rewrite: a tap above the join's build input, a filter node at each
//! place on the probe side, and the filter's shape.

use super::config::RuntimeFilterConfig;
use super::exec::{BloomFilterExec, ProbeSpec};
use super::lineage::{Keys, Point};
use super::rendezvous::Slot;
use super::scan_place::{self, ScanSpec};
use super::scope::ScopeCell;
use super::tap::BloomTapExec;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_plan::{ChildrenPropertiesMode, ExecutionPlan, ReplaceChildrenOptions};
use filterstore::{FilterParams, HashSpec, Layout, BLOCK_BITS, MESSAGE_OVERHEAD};
use std::sync::Arc;
use std::time::Duration;

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
///
/// The block count is rounded to [`foldable`] (at most 1/16 more, or less
/// when the budget caps it), so that the merged filter can be halved to
/// the keys it holds before it ships (`SlotPolicy::fit_fp`).
///
/// A filter the budget caps takes the `k` best for `likely` keys (the
/// build side's estimate without headroom), not for `keys`: sized for
/// `keys` it would often get `k = 1`, whose rate is its fill, so that a
/// filter holding far fewer keys than planned could not be halved to them
/// (TPC-H q12: 8.1M bits planned for 4.8M keys, 29K built). Where the
/// build side does fill a capped filter, its rate is over
/// `RuntimeFilterConfig::max_fp` with either `k`, and it passes every row.
pub(super) fn plan_params(
    cfg: &RuntimeFilterConfig,
    keys: u64,
    likely: u64,
) -> Result<FilterParams> {
    let hash = HashSpec::xxh3(SEED);
    let n = keys.max(1);
    let err = |e: filterstore::ParamError| DataFusionError::External(Box::new(e));
    let fp = cfg.fp.clamp(1e-9, 0.5);
    let bits_per_key = ((1.0 / fp).log2() / std::f64::consts::LN_2 * 1.04).clamp(1.0, 1024.0);
    let sized =
        FilterParams::with_bits_per_key(n, bits_per_key, Layout::Blocked, hash).map_err(err)?;
    let budget_blocks = cfg
        .max_filter_bytes
        .saturating_sub(MESSAGE_OVERHEAD as u64)
        .saturating_mul(8)
        .max(BLOCK_BITS)
        / BLOCK_BITS;
    let blocks = foldable(sized.m().div_ceil(BLOCK_BITS), true);
    if blocks <= budget_blocks {
        return FilterParams::new(Layout::Blocked, blocks * BLOCK_BITS, sized.k(), hash)
            .map_err(err);
    }
    let m = foldable(budget_blocks, false) * BLOCK_BITS;
    let k = filterstore::optimal_k(m, likely.clamp(1, n), Layout::Blocked).clamp(1, 16);
    FilterParams::new(Layout::Blocked, m, k, hash).map_err(err)
}

/// Significant bits a planned block count keeps ([`foldable`]).
const FOLDABLE_BITS: u32 = 5;

/// `blocks` rounded up (`up`) or down to a count `c·2^j` with `c` of at most
/// [`FOLDABLE_BITS`] bits, so that the filter halves `j` times (an even
/// block count halves exactly: `BitFilter::halve`). Rounding changes the
/// count by less than `2^j ≤ blocks / 16`; counts under 32 are unchanged.
pub(super) fn foldable(blocks: u64, up: bool) -> u64 {
    let len = u64::BITS - blocks.leading_zeros();
    let Some(shift) = len.checked_sub(FOLDABLE_BITS).filter(|&s| s > 0) else {
        return blocks;
    };
    let unit = 1u64 << shift;
    let down = blocks & !(unit - 1);
    if up && down != blocks {
        down.checked_add(unit).unwrap_or(down)
    } else {
        down
    }
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
    likely_keys(source_rows, padded)
}

/// The keys a build side likely holds: its estimated rows, never more than
/// the rows of the table the build key comes from; one of the two when the
/// other is unknown, else [`UNKNOWN_BUILD_KEYS`].
pub(super) fn likely_keys(source_rows: Option<u64>, build_rows: Option<u64>) -> u64 {
    match (source_rows, build_rows) {
        (Some(s), Some(b)) => s.min(b),
        (s, b) => s.or(b).unwrap_or(UNKNOWN_BUILD_KEYS),
    }
}

/// `build` under a tap that feeds `slot`'s filter, reading `ahead` bytes
/// ahead of the join (0: none; a reverse filter's tap).
pub(super) fn tap(
    build: &Arc<dyn ExecutionPlan>,
    keys: Keys,
    slot: &Slot,
    (cfg, scope): (&RuntimeFilterConfig, &Arc<ScopeCell>),
    (label, ahead): (&str, u64),
) -> Result<Arc<dyn ExecutionPlan>> {
    let tap = BloomTapExec::try_new(
        Arc::clone(build),
        keys,
        (*slot.params(), cfg.partial_fit()),
        slot.id(),
        (cfg.rendezvous.clone(), Arc::clone(scope)),
        label.to_string(),
    )?;
    Ok(Arc::new(tap.with_read_ahead(ahead)))
}

/// `root` with a [`BloomFilterExec`] above the node at each point (each
/// numbered, for plans and reports), and with `scans`, the filter's
/// predicate in the Parquet scans each point's key reaches in its stage
/// ([`scan_place::into_scans`], each waiting up to `scans` for the filter before
/// it opens a file; `None`: no scan); the plan and the scans reached.
pub(super) fn probe(
    root: &Arc<dyn ExecutionPlan>,
    points: &[(usize, Point)],
    spec: &ProbeSpec,
    scans: Option<Duration>,
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
        if let Some(wait) = scans {
            let to = ScanSpec {
                filter: spec.filter,
                nulls_pass: spec.nulls_pass,
                scope: &spec.scope,
                wait,
            };
            let (below, n) = scan_place::into_scans(&node, &p.keys, &to)?;
            node = below;
            reached += n;
        }
        node = Arc::new(BloomFilterExec::try_new(node, p.keys.clone(), spec)?);
    }
    Ok((node, reached))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planned_block_counts_halve_down_to_five_bits() {
        assert_eq!(foldable(0, true), 0);
        assert_eq!(foldable(31, true), 31);
        assert_eq!(foldable(33, true), 34);
        assert_eq!(foldable(33, false), 32);
        assert_eq!(foldable(1000, true), 1024); // 1 · 2^10
        assert_eq!(foldable(1000, false), 992); // 31 · 2^5
        assert_eq!(foldable(u64::MAX, true), !((1u64 << 59) - 1));
        for blocks in 1..5000u64 {
            for up in [true, false] {
                let f = foldable(blocks, up);
                let odd = f >> f.trailing_zeros();
                assert!(odd < 64, "{blocks} -> {f}");
                let slack = blocks / 16 + 1;
                assert!(if up {
                    f >= blocks && f - blocks < slack
                } else {
                    f <= blocks && blocks - f < slack
                });
            }
        }
    }

    #[test]
    fn planned_filters_stay_within_the_budget_and_halve() {
        for (budget, keys) in [
            (1u64 << 20, 5_000_000u64),
            (1 << 20, 30_000),
            (4 << 20, 1_000),
            (1, 10),
        ] {
            let cfg = RuntimeFilterConfig {
                max_filter_bytes: budget,
                ..RuntimeFilterConfig::default()
            };
            let p = plan_params(&cfg, keys, keys / 4).unwrap();
            let bytes = p.m() / 8 + MESSAGE_OVERHEAD as u64;
            assert!(
                bytes <= budget.max(BLOCK_BITS / 8 + MESSAGE_OVERHEAD as u64),
                "{budget} {keys}: {p:?}"
            );
            let odd = p.num_blocks() >> p.num_blocks().trailing_zeros();
            assert!(odd < 64, "{p:?}");
        }
    }
}
