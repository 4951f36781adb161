//! Helpers shared by the integration tests (and, through `#[path]`, the benchmark).

pub mod cache;
pub mod cluster;
pub mod data;
pub mod metrics;
pub mod netns;
pub mod procs;
pub mod scans;
pub mod star;
pub mod tpcds;
pub mod tpch;
