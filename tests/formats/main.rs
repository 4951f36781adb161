//! The bytes the crate writes and reads (docs/FORMAT.md): the committed filter
//! and message fixtures, golden bytes of the metadata encoding, corruption of
//! real files, and the fuzz corpus replayed through the fuzz targets' checks.
//! One test binary (issue 29); each module was a binary of its own
//! (`format_*`, `fuzz_corpus_replay`).

mod corruption;
mod doc_numbers;
mod fixtures;
#[path = "../format_common/mod.rs"]
mod format_common;
mod messages;

/// The raw encoders of `__internals`, and the store (the metadata records,
/// the fuzz target of the store's operations).
#[cfg(all(feature = "store", feature = "test-internals"))]
#[path = "../common/mod.rs"]
mod common;
#[cfg(all(feature = "store", feature = "test-internals"))]
mod fuzz_corpus_replay;
#[cfg(all(feature = "store", feature = "test-internals"))]
mod golden;
