//! filterstore's Bloom filters inside Apache DataFusion 55 and
//! datafusion-distributed 4.
//!
//! - **Runtime filters** that the planner places by itself on distributed
//!   hash joins and that are built while the query runs, from the rows the
//!   join reads anyway: one call on the coordinator
//!   ([`BloomStateBuilderExt::with_bloom_runtime_filters`]), one on every
//!   worker ([`BloomStateBuilderExt::with_bloom_functions`]); the decisions
//!   and what became of each filter in [`last_report`]. Worker processes:
//!   [`serve_worker`] (and the `filterstore-worker` binary), a coordinator
//!   over them: [`remote_cluster`].
//! - **SQL functions** ([`register_functions`]): `bloom_contains(filter,
//!   key)`, `bloom_agg(key [, fp [, expected_n]])` (the filter message of a
//!   column, under a byte budget), and set and join sizes from two filters
//!   (`bloom_estimate_count`, `bloom_estimate_intersection`,
//!   `bloom_estimate_join_size`).
//! - **Parquet split-block Bloom filters** ([`sbbf`]): a filterstore filter of
//!   the split-block layout and arrow-rs's `Sbbf`, both ways.
//!
//! Keys are hashed as the README's "Key encoding" says (Parquet plain
//! encoding, integers widened to 64 bits, composite keys as one byte string),
//! so any producer can build a compatible filter. Decoded filters live in one
//! process-wide cache ([`set_cache_budget`], [`cache_stats`]).
//!
//! ```
//! use datafusion::prelude::SessionContext;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # tokio::runtime::Runtime::new()?.block_on(async {
//! let ctx = SessionContext::new();
//! filterstore_datafusion::register_functions(&ctx);
//! ctx.sql("CREATE TABLE dim AS SELECT * FROM (VALUES (1), (2), (3)) AS t(k)")
//!     .await?
//!     .collect()
//!     .await?;
//! // The filter message of a column, then which keys it may hold.
//! let out = ctx
//!     .sql("SELECT bloom_contains((SELECT bloom_agg(k) FROM dim), v) AS maybe \
//!           FROM (VALUES (2), (40)) AS p(v) ORDER BY v")
//!     .await?
//!     .collect()
//!     .await?;
//! let maybe = datafusion::arrow::array::AsArray::as_boolean(out[0].column(0));
//! assert!(maybe.value(0)); // 2 is in `dim`: never a false negative
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })
//! # }
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs)]
#![warn(unreachable_pub)]
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

/// The README's Rust examples, run as doc tests (its first one must compile and run).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod agg;
mod cache;
mod contains;
mod error;
mod estimate;
mod index;
mod keys;
mod metrics;
mod node;
mod rowkey;
mod runtime;
pub mod sbbf;
mod serve;
mod session;

pub use agg::{bloom_agg_udaf, is_pass_all, pass_all_message, BloomAgg, AGG_HASH};
pub use cache::{cache_stats, clear_cache, set_cache_budget, CacheStats, DEFAULT_CACHE_BUDGET};
pub use contains::{bloom_contains_udf, BloomContains};
pub use error::BloomUdfError;
pub use estimate::{estimate_udfs, BloomEstimate, EstimateKind};
pub use index::{
    register_indexed_table_factory, IndexOptions, IndexedParquetTable, IndexedScanExec,
    IndexedTableFactory, RefreshReport, ScanSummary, INDEXED_PARQUET,
};
pub use keys::int_key;
pub use metrics::executed_plan;
pub use runtime::{
    last_report, BloomCodec, BloomFilterExec, BloomQueryExec, BloomRuntimeFilterPlanner,
    BloomRuntimeFilterRule, BloomScanExec, BloomTapExec, FilterHandle, FilterOutcome, JoinDecision,
    LastReport, ProbePolicy, RendezvousServer, RendezvousStats, RuntimeFilterConfig,
    RuntimeFilterReport, SkipReason, Verdict,
};
pub use serve::{bloom_worker, remote_cluster, serve_worker, RemoteCluster, StaticWorkers};
pub use session::{aggregate_udfs, register_functions, scalar_udfs, BloomStateBuilderExt};

/// Test seams: fault injection into one query's runtime filters and a
/// count of waiting probe tasks (`tests/runtime/waits.rs`). Not a stable
/// API; compiled only with the `test-hooks` feature, so a build without it
/// has none of them (no atomic load per post or per probe batch).
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub mod __private {
    pub use crate::runtime::hooks;
    pub use crate::runtime::waiting_probes;
}
