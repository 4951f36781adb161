//! Runtime Bloom filters that DataFusion plans by itself and builds while
//! the query runs.
//!
//! Installed on the coordinator with one call
//! ([`crate::BloomStateBuilderExt::with_bloom_runtime_filters`]); plain SQL
//! then gets a filter on a hash join's probe side wherever the decision
//! table allows it and statistics do not rule it out ([`decide`]).
//! Planning only places nodes ([`rule`], [`place`]): a tap
//! ([`BloomTapExec`]) on the join's build input and a [`BloomFilterExec`]
//! below each shuffle the probe key crosses ([`lineage`], by column index,
//! never by name). At execution the taps build the filter from the rows the
//! join reads anyway, the coordinator merges the tasks' partials and ships
//! the filter once per probe task ([`rendezvous`]), and each probe task
//! waits for it at most a deadline, then drops the rows that cannot join.
//!
//! The rule never changes a query's answer: it only drops rows whose key
//! the filter does not hold, on sides where such a row cannot produce output
//! (a Bloom filter has no false negatives), after the join's own coercion of
//! the key, with null keys passing where the join matches nulls; a filter
//! that is late, lost, failed or not worth it means rows pass. Everything
//! it cannot prove is skipped with a reason ([`SkipReason`]), visible in
//! `EXPLAIN` and in [`RuntimeFilterReport`].

mod analyze;
mod bounds;
mod codec;
mod config;
mod decide;
mod exec;
mod feed;
#[cfg(feature = "test-hooks")]
pub mod hooks;
mod lineage;
mod place;
mod planner;
mod probe;
mod read_ahead;
mod rendezvous;
mod report;
mod reverse;
mod rule;
mod scan;
mod scan_node;
mod scan_place;
mod scope;
mod stats;
mod tap;

pub use codec::BloomCodec;
pub use config::RuntimeFilterConfig;
pub use exec::BloomFilterExec;
pub use planner::{last_report, BloomRuntimeFilterPlanner, LastReport};
pub use probe::ProbePolicy;
pub(crate) use rendezvous::incoming_nodelay;
pub use rendezvous::FilterOutcome;
pub use rendezvous::{RendezvousServer, RendezvousStats};
pub use report::{FilterHandle, JoinDecision, RuntimeFilterReport, SkipReason, Verdict};
pub use rule::BloomRuntimeFilterRule;
pub use scan_node::BloomScanExec;
pub use scope::BloomQueryExec;
pub use tap::BloomTapExec;

#[cfg(feature = "test-hooks")]
pub use probe::waiting_probes;
