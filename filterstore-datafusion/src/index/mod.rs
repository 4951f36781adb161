//! Indexed Parquet tables: the filterstore store inside DataFusion, guarding
//! the file reads of a table over Parquet files on any object store.
//!
//! A lakehouse lookup (`WHERE id = 42`) over N files costs DataFusion's
//! `ListingTable` a LIST, then per file a footer read and, with Parquet's
//! own Bloom filters on, a filter read: 2N requests or more, 10–50 ms each
//! on an object store. An [`IndexedParquetTable`] keeps a Bloom filter per
//! data file and indexed column in a filterstore store on local disk (Delta
//! Lake's Bloom filter index and Hudi's bloom index keep theirs beside the
//! data); a lookup hashes its key once, probes every file's filter in
//! memory, and hands DataFusion's Parquet scan only the files that may hold
//! it. The rest of the predicate reaches the scan as usual, so Parquet's own
//! pruning still applies to the files read.
//!
//! # What it answers
//! `col = literal`, `literal = col` and `col IN (literals)` on an indexed
//! column, alone or inside `AND` (and `OR`s of them on one column), through
//! casts that keep the key ([`predicate`](self) module docs). The index
//! never decides a row: the scan applies every filter again
//! (`TableProviderFilterPushDown::Inexact`).
//!
//! # Never a false negative
//! A file is skipped only when it is listed with exactly the size,
//! modification time, ETag and version its filters were built from, and the
//! filter of a constrained column, built with the index's hash, holds none
//! of the wanted keys. A file that is new, rewritten in place, not indexed,
//! whose filter is missing, damaged, over the memory budget, being built,
//! or whose store cannot be opened, is read; `EXPLAIN` says how many files
//! were read for each reason, and a log line says once why the index cannot
//! do all it should (store unavailable or read-only, filters unusable).
//! Every scan lists the files, as `ListingTable` does, so a rewrite is seen
//! by the next scan.
//!
//! # Kept current
//! [`IndexedParquetTable::refresh`] indexes new and rewritten files
//! (reading only the indexed columns, a batch of rows at a time) and drops
//! the filters of files gone. A scan that lists files the index does not
//! hold starts, when it runs (not when it is planned: `EXPLAIN` starts
//! nothing), one refresh in the background (one at a time; off with
//! [`IndexOptions::refresh_on_scan`]): those files are read until its next
//! batch commits (512 files by default). Filters are sealed filters of the
//! store (bits only: data files are immutable, so no counting filter is
//! kept), committed in batches, each one pack file and one catalog commit:
//! after a kill or a power cut each file is indexed in the version its
//! filter names, or not at all.
//!
//! # The rate per file
//! With N files at rate p a lookup reads about N·p files that do not hold
//! its key. A file indexed while N files are listed gets p =
//! `false_files / (2·C)`, C the power of two at or above 2N (at least
//! 1,024): the files indexed at one capacity add at most `false_files / 4`,
//! and when the table has grown so that the sum of the rates of its files
//! passes `false_files` (0.1 by default), the refresh rebuilds the files of
//! the highest rates first. At 10,000 files, p = 0.1 / 65,536, about 1.5 in
//! a million: 36.9 bits per key in the blocked layout.
//!
//! # Memory and disk
//! Every filter of the table is held in memory under the store's memory
//! budget (`StoreConfig::memory_budget`); a filter over it is not loaded,
//! and its file is read. On disk a file costs its bits (`m / 8` bytes)
//! plus 76 bytes of frame in a pack file, and a catalog record of about
//! 150 bytes plus its path.

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
