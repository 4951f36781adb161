//! The filter layer (`src/filter`): false-positive statistics and the sizing
//! math against theory, property tests, the SIMD probe against the scalar
//! one, the split-block layout against Parquet's SBBF, and the hash's golden
//! values. One test binary for the layer (issue 29: every binary costs a link);
//! each module was a test binary of its own (`core_*`, `golden_hash`), and
//! keeps its tests' names under its module (`filter::simd::...` was
//! `core_simd::...`).

mod fp_stats;
mod golden_hash;
mod props;
/// Needs the probes exposed by `__internals`.
#[cfg(feature = "test-internals")]
mod simd;
mod split_block;
mod theory;
/// A test body under a time limit (`simd`'s threads).
#[cfg(feature = "test-internals")]
#[path = "../common/timeout.rs"]
mod timeout;
