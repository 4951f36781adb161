//! The SQL functions and the Parquet interop, in one test binary (each test
//! binary links all of DataFusion: fewer binaries, a faster build).

mod agg_estimate;
mod contains_exact;
mod duckdb;
mod index;
mod message_errors;
mod sbbf;
mod sbbf_row_groups;
mod sbbf_write;
mod sbbf_write_file;
