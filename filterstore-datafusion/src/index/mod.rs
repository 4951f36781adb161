//! Indexed Parquet tables: the filterstore store inside DataFusion,
//! guarding the file reads of a table over Parquet files on any object
//! store. The design, the guarantees and the costs are documented on
//! [`IndexedParquetTable`] (`table.rs`), the face of this module. Where
//! things live: `table.rs` the provider and its scan, `refresh.rs` keeping
//! the index current, `build.rs` indexing one file, `files.rs` the index in
//! memory and the probe, `predicate.rs` the keys a scan's filters allow,
//! `identity.rs` a file's identity and its filters' names and tags,
//! `store.rs` the store, `exec.rs` the plan node, `options.rs` and
//! `factory.rs` the set-up from Rust and from SQL.

mod build;
mod exec;
mod factory;
mod files;
mod identity;
mod options;
mod predicate;
mod refresh;
mod store;
mod table;

pub use exec::{IndexedScanExec, ScanSummary};
pub use factory::{register_indexed_table_factory, IndexedTableFactory, INDEXED_PARQUET};
pub use options::IndexOptions;
pub use refresh::RefreshReport;
pub use table::IndexedParquetTable;
