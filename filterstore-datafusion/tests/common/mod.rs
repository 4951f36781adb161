//! Helpers shared by the integration tests (and, through `#[path]`, the benchmark).

pub mod cache;
pub mod data;
pub mod procs;
pub mod tpcds;
pub mod tpch;
