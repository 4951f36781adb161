//! What the rule decided, per join side, and what became of each filter at
//! execution: the report `EXPLAIN` and `EXPLAIN ANALYZE` print and
//! [`super::last_report`] returns.

use super::rendezvous::{FilterId, FilterOutcome, Slot};
use datafusion::common::JoinSide;
use std::fmt;
use std::sync::Arc;

/// Why a join side got no filter.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum SkipReason {
    /// The plan is not distributed: DataFusion's dynamic filter is exact.
    SingleNode,
    /// A broadcast (`CollectLeft`) join: its probe side crosses no shuffle.
    Broadcast,
    /// The join type keeps this side's rows (outer, anti, mark, full), or
    /// the join is null-aware.
    JoinType(String),
    /// The build side, with no filter of the probe side's keys: the probe
    /// side has a filter of this side's keys (the two would wait for each
    /// other), or reverse filters are off
    /// (`RuntimeFilterConfig::reverse_filters`).
    BuildSide,
    /// The build side keeps every key of its table, and statistics cannot
    /// tell whether the probe key lies within them (likely a foreign key,
    /// which the filter would pass whole): a filter of the probe side's keys
    /// is placed on the build side instead.
    WholeBuildSide,
    /// The probe side is estimated at many times the build side's rows: its
    /// keys would cover the build side's, read ahead past the bound.
    LargeProbeSide {
        /// Estimated rows of the probe side.
        rows: u64,
        /// Estimated rows of the build side.
        build_rows: u64,
    },
    /// A sort-merge join reads both sides at once: no side is complete
    /// before the other is read.
    SortMerge,
    /// A key type without an encoding, or sides that encode differently.
    KeyType(String),
    /// A key expression that may fail on rows the join never sees.
    FallibleKey(String),
    /// The key's lineage reaches no network shuffle below the join.
    NoShuffle(Vec<String>),
    /// The side sends too few rows into its shuffle to matter.
    SmallSide {
        /// Estimated rows.
        rows: u64,
    },
    /// Statistics say the filter would keep most rows.
    NotSelective {
        /// Estimated fraction of the side's rows that would pass.
        pass: f64,
    },
    /// The join runs inside a union whose children have their own task
    /// counts (datafusion-distributed's `ChildrenIsolatorUnionExec`).
    IsolatedUnion,
    /// Placing the filter failed; the side is left as it was.
    Failed(String),
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            SkipReason::SingleNode => {
                write!(f, "single-node plan (DataFusion's dynamic filter is exact)")
            }
            SkipReason::Broadcast => write!(f, "broadcast join (no shuffle on the probe side)"),
            SkipReason::JoinType(t) => write!(f, "{t}"),
            SkipReason::BuildSide => write!(
                f,
                "build side (the probe side has a filter of its keys, or reverse filters are off)"
            ),
            SkipReason::WholeBuildSide => write!(
                f,
                "the build side holds every key of its table (likely a foreign key): filtered the other way"
            ),
            SkipReason::LargeProbeSide { rows, build_rows } => write!(
                f,
                "the probe side (~{rows} rows) is far larger than this side (~{build_rows})"
            ),
            SkipReason::SortMerge => write!(
                f,
                "sort-merge join (both sides are read at once; none is complete first)"
            ),
            SkipReason::KeyType(t) => write!(f, "key type: {t}"),
            SkipReason::FallibleKey(e) => {
                write!(f, "the key {e} may fail on rows the join never sees")
            }
            SkipReason::NoShuffle(stops) => {
                write!(f, "no network shuffle below the join on this side")?;
                if !stops.is_empty() {
                    write!(f, " (key lineage: {})", stops.join("; "))?;
                }
                Ok(())
            }
            SkipReason::SmallSide { rows } => write!(f, "side too small ({rows} rows)"),
            SkipReason::NotSelective { pass } => write!(
                f,
                "not selective: ~{:.0}% of rows would pass (statistics)",
                pass * 100.0
            ),
            SkipReason::IsolatedUnion => write!(f, "inside an isolated union"),
            SkipReason::Failed(why) => write!(f, "failed, left as planned: {why}"),
        }
    }
}

/// A placed filter, and a way to its outcome once the query ran.
#[derive(Clone, Debug)]
pub struct FilterHandle(Arc<Slot>);

impl FilterHandle {
    pub(crate) fn new(slot: Arc<Slot>) -> Self {
        FilterHandle(slot)
    }

    /// The filter's id.
    pub fn id(&self) -> FilterId {
        self.0.id()
    }

    /// What became of the filter, once its build side ended (`None` before
    /// the query ran, or while it runs).
    pub fn outcome(&self) -> Option<FilterOutcome> {
        self.0.outcome()
    }

    /// Posts and fetches the coordinator refused for this filter, over its
    /// executions: without the execution's token, for no live execution,
    /// larger than the filter, damaged, or from a task that had already
    /// posted. None of them changed an outcome.
    pub fn refused_posts(&self) -> u64 {
        self.0.refused_posts()
    }
}

impl PartialEq for FilterHandle {
    fn eq(&self, other: &Self) -> bool {
        self.id() == other.id()
    }
}

/// What the rule did for one join side.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// A filter was placed: a tap on the join's build input and one filter
    /// node per place on this side; it is built when the query runs.
    Placed {
        /// Places on this side (one per branch of the key's lineage).
        points: usize,
        /// Parquet scans below those places that got the filter as their
        /// predicate (`scan_filters`).
        scans: usize,
        /// Rows this side was estimated to send into its shuffle.
        probe_rows: Option<u64>,
        /// Rows of the side the keys come from, as estimated: the build
        /// side, or the probe side for a filter on the build side (a
        /// reverse filter, whose tap reads the probe side ahead).
        build_rows: Option<u64>,
        /// Estimated share of this side's rows that pass, where statistics tell.
        pass: Option<f64>,
        /// Bits of the filter.
        m: u64,
        /// Bits set per key.
        k: u32,
        /// The filter, for its outcome.
        filter: FilterHandle,
    },
    /// No filter, and why.
    Skipped(SkipReason),
}

/// The decision for one side of one join.
#[derive(Clone, Debug, PartialEq)]
pub struct JoinDecision {
    /// The join, as plans show it (number in plan order, type, keys).
    pub join: String,
    /// Which side would be filtered.
    pub side: JoinSide,
    /// Placed or skipped.
    pub verdict: Verdict,
}

fn opt<T: fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "?".into(), |v| v.to_string())
}

impl fmt::Display for JoinDecision {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let side = if self.side == JoinSide::Left {
            "left"
        } else {
            "right"
        };
        match &self.verdict {
            Verdict::Placed {
                points,
                scans,
                probe_rows,
                build_rows,
                pass,
                m,
                k,
                filter,
            } => {
                write!(
                    f,
                    "{}, {side} side: placed ({points} place(s), {scans} scan(s), m={m}, k={k}, ~{} probe rows, ~{} build rows, pass {})",
                    self.join,
                    opt(*probe_rows),
                    opt(*build_rows),
                    pass.map_or_else(|| "decided at run time".into(), |p| format!("~{:.1}%", p * 100.0)),
                )?;
                if let Some(o) = filter.outcome() {
                    write!(f, "; run: {o}")?;
                }
                Ok(())
            }
            Verdict::Skipped(r) => write!(f, "{}, {side} side: skipped: {r}", self.join),
        }
    }
}

/// Every decision of one planning.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RuntimeFilterReport {
    /// Per join side, in plan order (children first).
    pub decisions: Vec<JoinDecision>,
}

impl RuntimeFilterReport {
    /// Filters placed.
    pub fn placed(&self) -> usize {
        self.filters().count()
    }

    /// Filters built and shipped when the query ran (0 before it ran).
    pub fn built(&self) -> usize {
        self.filters()
            .filter(|f| f.outcome().is_some_and(|o| o.is_built()))
            .count()
    }

    /// Posts and fetches refused for the placed filters (see
    /// [`FilterHandle::refused_posts`]).
    pub fn refused_posts(&self) -> u64 {
        self.filters().map(FilterHandle::refused_posts).sum()
    }

    /// The placed filters.
    pub fn filters(&self) -> impl Iterator<Item = &FilterHandle> {
        self.decisions.iter().filter_map(|d| match &d.verdict {
            Verdict::Placed { filter, .. } => Some(filter),
            Verdict::Skipped(_) => None,
        })
    }
}

impl fmt::Display for RuntimeFilterReport {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        writeln!(f, "BloomRuntimeFilters: {} placed", self.placed())?;
        for d in &self.decisions {
            writeln!(f, "  {d}")?;
        }
        Ok(())
    }
}
