//! Runtime Bloom filters that DataFusion plans by itself.
//!
//! Installed on the coordinator with one call
//! ([`crate::BloomStateBuilderExt::with_bloom_runtime_filters`]); plain SQL
//! then gets a filter on a join side wherever it pays, with no hand-written
//! query: [`BloomRuntimeFilterRule`] visits every hash join of the final,
//! distributed plan and decides per side ([`rule`] has the decision table),
//! the creation side is cut from the join's own other side and run once
//! ([`build`]), and a [`BloomFilterExec`] drops the rows that cannot join
//! below that side's network shuffle ([`lineage`] says where, by column
//! index, never by name).
//!
//! The rule never changes a query's answer: it only drops rows whose key the
//! filter does not hold, on sides where such a row cannot produce output (a
//! Bloom filter has no false negatives), after the join's own coercion of
//! the key (the filter evaluates the join's key expressions, moved down
//! through the operators between), and with null keys passing where the join
//! matches nulls. Everything it cannot prove is skipped with a reason
//! ([`SkipReason`]), visible in `EXPLAIN` and in [`RuntimeFilterReport`].

pub mod analyze;
pub mod build;
pub mod codec;
pub mod exec;
pub mod lineage;
pub mod place;
pub mod planner;
pub mod report;
pub mod rule;

pub use build::BloomBuildExec;
pub use codec::BloomCodec;
pub use exec::BloomFilterExec;
pub use planner::{last_report, BloomRuntimeFilterPlanner};
pub use report::{JoinDecision, RuntimeFilterReport, SkipReason, Verdict};
pub use rule::BloomRuntimeFilterRule;

/// When a runtime filter pays, and how it is sized.
///
/// The defaults follow Spark's `InjectRuntimeFilter` in spirit (a large
/// application side, a small creation side, a selective filter), in rows
/// rather than bytes because DataFusion's statistics count rows reliably.
#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeFilterConfig {
    /// Target false-positive rate of each filter. Default 1%.
    pub fp: f64,
    /// At most this many bytes per filter message. Past it a filter is sized
    /// for the budget and its rate rises; the decision is then re-taken on
    /// the rate reached. Default 4 MiB.
    pub max_filter_bytes: u64,
    /// Only filter a side estimated to send at least this many rows into its
    /// shuffle. Default 100,000.
    pub min_filtered_rows: u64,
    /// Only build from a creation side estimated at most this many rows (it
    /// is computed once more for the filter). Default 10,000,000.
    pub max_creation_rows: u64,
    /// Skip when the filter is expected to keep more than this fraction of
    /// the side's rows, before building (from statistics) and after (from
    /// the filter's own key count and fill). Default 0.6.
    pub max_pass_fraction: f64,
    /// Apply wherever the rule may, whatever the statistics say (for tests
    /// and measurements; never changes an answer either).
    pub force: bool,
}

impl Default for RuntimeFilterConfig {
    fn default() -> Self {
        RuntimeFilterConfig {
            fp: 0.01,
            max_filter_bytes: 4 << 20,
            min_filtered_rows: 100_000,
            max_creation_rows: 10_000_000,
            max_pass_fraction: 0.6,
            force: false,
        }
    }
}
