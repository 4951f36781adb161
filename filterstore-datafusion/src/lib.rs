//! filterstore's Bloom filters inside Apache DataFusion 55 and
//! datafusion-distributed 4.
//!
//! - [`contains`]: `bloom_contains(filter, key)`, a scalar UDF that crosses
//!   to workers by name;
//! - [`agg`]: `bloom_agg(key [, fp [, expected_n]])`, the filter message of a
//!   column, under a byte budget;
//! - [`estimate`]: set and join sizes from two filters, in SQL;
//! - [`runtime`]: runtime Bloom filters that the planner places by itself on
//!   distributed hash joins, wherever they pay and never changing an answer;
//! - [`sbbf`]: Parquet split-block Bloom filter interop;
//! - [`cluster`]: an in-memory cluster for tests, examples and benchmarks.
//!
//! Keys are hashed as [`keys`] documents (Parquet plain encoding, integers
//! widened to 64 bits), so any producer can build a compatible filter;
//! [`rowkey`] extends that encoding to composite keys and every type
//! DataFusion joins on.
//! Decoded filters live in one process-wide cache ([`cache`]).
#![deny(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod agg;
pub mod cache;
pub mod cluster;
pub mod contains;
pub mod error;
pub mod estimate;
pub mod keys;
pub mod metrics;
pub mod rowkey;
pub mod runtime;
pub mod sbbf;
pub mod serve;
pub mod star;

pub use agg::{bloom_agg_udaf, is_pass_all, pass_all_message, BloomAgg};
pub use contains::{bloom_contains_udf, BloomContains};
pub use error::BloomUdfError;
pub use estimate::{estimate_udfs, BloomEstimate, EstimateKind};
pub use runtime::{
    last_report, BloomFilterExec, BloomQueryExec, BloomRuntimeFilterPlanner,
    BloomRuntimeFilterRule, BloomTapExec, FilterHandle, FilterOutcome, JoinDecision,
    RendezvousServer, RuntimeFilterConfig, RuntimeFilterReport, SkipReason, Verdict,
};

use datafusion::execution::SessionStateBuilder;
use datafusion::logical_expr::{AggregateUDF, ScalarUDF};
use datafusion::prelude::SessionContext;
use datafusion_distributed::{DistributedExt, SessionStateBuilderExt};
use std::sync::Arc;

/// Every scalar function of this crate.
pub fn scalar_udfs() -> Vec<Arc<ScalarUDF>> {
    let mut v = vec![bloom_contains_udf()];
    v.extend(estimate_udfs());
    v
}

/// Every aggregate function of this crate.
pub fn aggregate_udfs() -> Vec<Arc<AggregateUDF>> {
    vec![bloom_agg_udaf()]
}

/// Registers every function of this crate on a session.
pub fn register_functions(ctx: &SessionContext) {
    for f in scalar_udfs() {
        ctx.register_udf(f.as_ref().clone());
    }
    for f in aggregate_udfs() {
        ctx.register_udaf(f.as_ref().clone());
    }
}

/// Session setup, for the coordinator and for every worker.
pub trait BloomStateBuilderExt {
    /// Adds this crate's functions to those already configured (call after
    /// `with_default_features`), and the codec that carries runtime filters
    /// to workers. Every worker needs both: a worker without them fails a
    /// query that uses them.
    fn with_bloom_functions(self) -> Self;
    /// The coordinator's one call for runtime filters: this crate's
    /// functions and codec, datafusion-distributed's planner (if not there
    /// yet; a second one is harmless), and [`BloomRuntimeFilterPlanner`]
    /// around it, so every query planned on the session gets filters where
    /// they pay. Workers only need [`Self::with_bloom_functions`].
    fn with_bloom_runtime_filters(self, config: RuntimeFilterConfig) -> Self;
}

impl BloomStateBuilderExt for SessionStateBuilder {
    fn with_bloom_functions(mut self) -> Self {
        self.scalar_functions()
            .get_or_insert_with(Vec::new)
            .extend(scalar_udfs());
        self.aggregate_functions()
            .get_or_insert_with(Vec::new)
            .extend(aggregate_udfs());
        self.with_distributed_user_codec(runtime::BloomCodec)
    }

    fn with_bloom_runtime_filters(self, config: RuntimeFilterConfig) -> Self {
        let mut b = self.with_bloom_functions().with_distributed_planner();
        let last = Arc::new(runtime::planner::LastReport::default());
        let cfg = b.config().get_or_insert_default();
        cfg.set_extension(Arc::clone(&last));
        let inner = b.query_planner().take();
        b.with_query_planner(Arc::new(BloomRuntimeFilterPlanner::new(
            inner, config, last,
        )))
    }
}
