//! What the rule decided, per join side, and why: the report `EXPLAIN`
//! prints and [`super::last_report`] returns.

use datafusion::common::JoinSide;
use std::fmt;

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
    /// A key type without an encoding, or sides that encode differently.
    KeyType(String),
    /// The key's lineage reaches no network shuffle below the join.
    NoShuffle(Vec<String>),
    /// A row count the decision needs is unknown.
    NoStatistics(String),
    /// The side sends too few rows into its shuffle to matter.
    SmallSide {
        /// Estimated rows.
        rows: u64,
    },
    /// The creation side is too large to compute twice.
    LargeCreation {
        /// Estimated rows.
        rows: u64,
    },
    /// The creation side cannot be run again with the same keys (a limit,
    /// a window, a volatile or order-sensitive function), or never ends.
    CreationSide(String),
    /// Building or placing the filter failed; the side is left as it was.
    Failed(String),
    /// The join runs inside a union whose children have their own task
    /// counts (datafusion-distributed's `ChildrenIsolatorUnionExec`).
    IsolatedUnion,
    /// The filter would keep most rows.
    NotSelective {
        /// Estimated fraction of the side's rows that pass.
        pass: f64,
        /// Whether the estimate is from the built filter (else statistics).
        built: bool,
    },
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            SkipReason::SingleNode => {
                write!(f, "single-node plan (DataFusion's dynamic filter is exact)")
            }
            SkipReason::Broadcast => write!(f, "broadcast join (no shuffle on the probe side)"),
            SkipReason::JoinType(t) => write!(f, "{t}"),
            SkipReason::KeyType(t) => write!(f, "key type: {t}"),
            SkipReason::NoShuffle(stops) => {
                write!(f, "no network shuffle below the join on this side")?;
                if !stops.is_empty() {
                    write!(f, " (key lineage: {})", stops.join("; "))?;
                }
                Ok(())
            }
            SkipReason::NoStatistics(what) => write!(f, "no statistics: {what}"),
            SkipReason::SmallSide { rows } => write!(f, "side too small ({rows} rows)"),
            SkipReason::LargeCreation { rows } => {
                write!(f, "creation side too large to compute twice ({rows} rows)")
            }
            SkipReason::CreationSide(why) => write!(f, "creation side: {why}"),
            SkipReason::Failed(why) => write!(f, "failed, left as planned: {why}"),
            SkipReason::IsolatedUnion => write!(f, "inside an isolated union"),
            SkipReason::NotSelective { pass, built } => write!(
                f,
                "not selective: {:.1}% of rows would pass ({})",
                pass * 100.0,
                if *built { "built filter" } else { "statistics" }
            ),
        }
    }
}

/// What the rule did for one join side.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// A filter was placed.
    Applied {
        /// Bytes of the message carried in each task's plan.
        message_bytes: usize,
        /// Distinct keys estimated from the filter.
        keys: f64,
        /// The filter's false-positive rate, from its fill.
        fp: f64,
        /// Estimated fraction of the side's rows that pass.
        pass: f64,
        /// Places the filter went (one per branch of the key's lineage).
        points: usize,
        /// Rows the side was estimated to send into its shuffle.
        side_rows: u64,
        /// Wall time of running the creation side, in milliseconds.
        creation_ms: f64,
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
    /// Applied or skipped.
    pub verdict: Verdict,
}

impl fmt::Display for JoinDecision {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let side = if self.side == JoinSide::Left {
            "left"
        } else {
            "right"
        };
        match &self.verdict {
            Verdict::Applied {
                message_bytes,
                keys,
                fp,
                pass,
                points,
                side_rows,
                creation_ms,
            } => write!(
                f,
                "{}, {side} side: applied ({message_bytes} B message, ~{keys:.0} keys, fp {:.2}%, ~{:.1}% of ~{side_rows} rows pass, {points} place(s), creation side {creation_ms:.1} ms)",
                self.join,
                fp * 100.0,
                pass * 100.0
            ),
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
    pub fn applied(&self) -> usize {
        self.decisions
            .iter()
            .filter(|d| matches!(d.verdict, Verdict::Applied { .. }))
            .count()
    }
}

impl fmt::Display for RuntimeFilterReport {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        writeln!(f, "BloomRuntimeFilters: {} applied", self.applied())?;
        for d in &self.decisions {
            writeln!(f, "  {d}")?;
        }
        Ok(())
    }
}
