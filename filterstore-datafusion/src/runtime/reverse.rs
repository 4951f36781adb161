//! Filters the other way: the probe side's keys, applied to the build side.
//!
//! A hash join reads its build side (the left child) whole before it polls
//! its probe side, and DataFusion picks the side it estimates smaller as the
//! build side. Its estimates of a side that went through joins and
//! predicates it cannot read are guesses, and a build side may hold far
//! more rows than the probe side (TPC-H q21: 3.79M `lineitem` rows build a
//! `NOT EXISTS` whose probe side is 73,000 rows). A filter of the build
//! side's keys cannot shrink that side; a filter of the probe side's keys
//! can, where dropping a build row whose key is not on the probe side never
//! changes the join's output:
//!
//! | join type | build (left) side filtered | why |
//! |---|---|---|
//! | `Inner`, `LeftSemi`, `RightSemi` | yes | a left row without a partner is never output |
//! | `Right` (outer), `RightAnti`, `RightMark` | yes | a right row's outcome depends only on the left rows that match it, and those all pass |
//! | `Left`, `LeftAnti`, `LeftMark`, `Full` | never | the left side's rows are kept (or marked) whether or not they match |
//!
//! The rule tries this only where it places no filter of the build side's
//! keys (a filter each way would wait for the other): where none is
//! allowed or pays, and where the build side keeps every key of its table
//! and statistics cannot tell whether the probe key lies within them (a
//! composite foreign key, TPC-H q9's `partsupp`), which a filter of the
//! build side's keys would pass whole. The tap sits above the
//! probe child and reads it ahead of the join, up to a bound
//! ([`super::read_ahead`]); the build side's places wait for the filter as a
//! probe side's do. A probe side larger than the bound abandons its filter:
//! the build side's rows then pass, and the join reads as it would have.
//!
//! Statistics skip a build side known to send too few rows into its shuffle
//! to matter, and a probe side estimated at many times the build side's
//! rows (its keys would cover the build side's, and it would be read ahead
//! past its bound). The rest is decided at run time, as forward filters are.

use super::config::RuntimeFilterConfig;
use super::decide::{places, ProbePlan};
use super::report::SkipReason;
use super::stats::{range_size, Stats};
use datafusion::common::{JoinSide, NullEquality};
use datafusion::error::Result;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};

/// A probe side estimated at more than this many times the build side's
/// rows gets no reverse filter.
const MAX_PROBE_RATIO: u64 = 4;

/// The decision for a filter of `join`'s probe side keys on its build side
/// (see the module documentation): the plan's "probe" fields describe the
/// build side, which the filter probes, and its "build" fields the probe
/// side, which the tap reads.
pub(super) fn decide_reverse(
    join: &HashJoinExec,
    cfg: &RuntimeFilterConfig,
    stats: &Stats,
) -> Result<std::result::Result<ProbePlan, SkipReason>> {
    if !cfg.reverse_filters || cfg.read_ahead_bytes == 0 {
        let broadcast = *join.partition_mode() == PartitionMode::CollectLeft;
        let reason = if broadcast {
            SkipReason::Broadcast
        } else {
            SkipReason::BuildSide
        };
        return Ok(Err(reason));
    }
    let (points, filtered_keys, tapped_keys) = match places(join, JoinSide::Left)? {
        Ok(found) => found,
        Err(r) => return Ok(Err(r)),
    };
    let (filtered, tapped) = (join.left(), join.right());
    let filtered_rows = stats.points_rows(filtered, &points);
    let tapped_rows = stats.rows(tapped);
    if !cfg.force {
        if let Some(rows) = filtered_rows.filter(|&r| r < cfg.min_filtered_rows) {
            return Ok(Err(SkipReason::SmallSide { rows }));
        }
        if let (Some(f), Some(t)) = (filtered_rows, tapped_rows)
            && t > f.saturating_mul(MAX_PROBE_RATIO)
        {
            let (rows, build_rows) = (t, f);
            return Ok(Err(SkipReason::LargeProbeSide { rows, build_rows }));
        }
    }
    let range = stats.key_range(filtered, &filtered_keys)?;
    let distinct = range
        .as_ref()
        .and_then(range_size)
        .map(|d| filtered_rows.map_or(d, |r| d.min(r as f64)));
    Ok(Ok(ProbePlan {
        points,
        build_rows: tapped_rows,
        build_source_rows: stats.source_rows(tapped, &tapped_keys)?,
        build_keys: tapped_keys,
        probe_rows: filtered_rows,
        pass: None,
        probe_distinct: distinct,
        nulls_pass: join.null_equality() == NullEquality::NullEqualsNull,
        whole_build: false,
    }))
}
