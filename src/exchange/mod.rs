//! Semi-join exchange: build a filter of one site's join keys, ship it (plain
//! or entropy-coded, whole or as a delta), probe the other site's rows with it,
//! refine the result at the origin, and estimate set and join sizes.

#[cfg_attr(not(feature = "test-internals"), allow(unreachable_pub))]
pub mod entropy;
pub(crate) mod estimate;
pub(crate) mod message;
pub(crate) mod optimize;
pub(crate) mod semijoin;

pub use estimate::{
    estimate_join_size, estimate_join_size_from_filters, BuildStats, JoinSizeEstimate,
};
pub use semijoin::{probe, RefineStats, Refiner};
