//! filterstore's Bloom filters inside Apache DataFusion 55 and
//! datafusion-distributed 4.
//!
//! - [`contains`]: `bloom_contains(filter, key)`, a scalar UDF that crosses
//!   to workers by name;
//! - [`agg`]: `bloom_agg(key [, fp [, expected_n]])`, the filter message of a
//!   column, under a byte budget;
//! - [`estimate`]: set and join sizes from two filters, in SQL;
//! - [`prefilter`]: the distributed semi-join, applied only where rows cross
//!   a network shuffle;
//! - [`sbbf`]: Parquet split-block Bloom filter interop;
//! - [`cluster`]: an in-memory cluster for tests, examples and benchmarks.
//!
//! Keys are hashed as [`keys`] documents (Parquet plain encoding, integers
//! widened to 64 bits), so any producer can build a compatible filter.
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
pub mod prefilter;
pub mod sbbf;
pub mod star;

pub use agg::{bloom_agg_udaf, is_pass_all, pass_all_message, BloomAgg};
pub use contains::{bloom_contains_udf, BloomContains};
pub use error::BloomUdfError;
pub use estimate::{estimate_udfs, BloomEstimate, EstimateKind};
pub use prefilter::{
    semi_join_prefilter, BloomPrefilterPlanner, Decision, Prefilter, PrefilterPlan, SkipReason,
};

use datafusion::execution::SessionStateBuilder;
use datafusion::logical_expr::{AggregateUDF, ScalarUDF};
use datafusion::prelude::SessionContext;
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
    /// `with_default_features`). Every worker needs them: a worker without
    /// them fails a query that uses them.
    fn with_bloom_functions(self) -> Self;
    /// Wraps the current query planner with [`BloomPrefilterPlanner`]. Call it
    /// before datafusion-distributed's `with_distributed_planner`, so the
    /// rewritten plan is the one distributed. Coordinator only.
    fn with_bloom_prefilter_planner(self) -> Self;
}

impl BloomStateBuilderExt for SessionStateBuilder {
    fn with_bloom_functions(mut self) -> Self {
        self.scalar_functions()
            .get_or_insert_with(Vec::new)
            .extend(scalar_udfs());
        self.aggregate_functions()
            .get_or_insert_with(Vec::new)
            .extend(aggregate_udfs());
        self
    }

    fn with_bloom_prefilter_planner(mut self) -> Self {
        let prev = self.query_planner().take();
        self.with_query_planner(Arc::new(BloomPrefilterPlanner { prev }))
    }
}
