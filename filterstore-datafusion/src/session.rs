//! Session setup: this crate's functions, its codec and its planner on a
//! DataFusion session, for the coordinator and for every worker.

use crate::agg::bloom_agg_udaf;
use crate::contains::bloom_contains_udf;
use crate::estimate::estimate_udfs;
use crate::runtime::{self, BloomRuntimeFilterPlanner, RuntimeFilterConfig};
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
///
/// A worker's session (what [`crate::bloom_worker`] gives each query), and a
/// coordinator's with runtime filters; [`crate::remote_cluster`] runs both
/// on real workers.
///
/// ```
/// use datafusion::execution::SessionStateBuilder;
/// use datafusion::prelude::SessionContext;
/// use filterstore_datafusion::{last_report, BloomStateBuilderExt, RuntimeFilterConfig};
///
/// let worker = SessionStateBuilder::new().with_default_features().with_bloom_functions();
/// assert!(worker.build().scalar_functions().contains_key("bloom_contains"));
///
/// let coordinator = SessionStateBuilder::new()
///     .with_default_features()
///     .with_bloom_runtime_filters(RuntimeFilterConfig::default());
/// let ctx = SessionContext::from(coordinator.build());
/// assert!(last_report(&ctx).is_none()); // nothing planned yet
/// ```
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
        let last = Arc::new(runtime::LastReport::default());
        let cfg = b.config().get_or_insert_default();
        cfg.set_extension(Arc::clone(&last));
        let inner = b.query_planner().take();
        b.with_query_planner(Arc::new(BloomRuntimeFilterPlanner::new(
            inner, config, last,
        )))
    }
}
