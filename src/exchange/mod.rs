//! Semi-join exchange: build a filter of one site's join keys, ship it (plain
//! or entropy-coded, whole or as a delta), probe the other site's rows with it,
//! refine the result at the origin, and estimate set and join sizes.

pub mod entropy;
pub mod estimate;
pub mod message;
pub mod optimize;
pub mod semijoin;

pub use estimate::{
    estimate_join_size, estimate_join_size_from_filters, BuildStats, JoinSizeEstimate,
};
pub use semijoin::{probe, RefineStats, Refiner};
