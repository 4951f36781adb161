//! The persistent store (`src/store`, feature `store`): the catalog and API,
//! bulk loads, concurrency, corruption of the store's files and of the
//! fixtures, migrations, imports, a model test, readers, regeneration,
//! reopening after failed syncs, split-block tables, and a host that embeds
//! the crate. One test binary (issue 29); each module was a binary of its own
//! (`store_*`, `split_block_store`, `host_embedding`).
//!
//! Not here: the crash, power-cut and disk-full tests, `tests/crash/`
//! (`harness = false`: the binary re-runs itself in a child mode selected by
//! its `main`). Binaries of their own, because they change the whole
//! process: `store_failpoints.rs` (sled's failpoints are process-wide: armed
//! beside other tests they would fail those tests' sled writes) and
//! `store_budget.rs` (the memory budget is the process's: the small one it
//! sets refused a table of
//! `import::honest_files_import_whatever_their_layout_load_and_removes`
//! when both ran here).

#[path = "../common/mod.rs"]
mod common;
#[path = "../store_fixture_common/mod.rs"]
mod store_fixture_common;

mod api;
mod bulk;
mod concurrency;
mod corruption;
mod corruption_files;
mod fixture;
mod fixture_guard;
mod fixture_v5;
mod fixture_v6;
mod fixture_v8;
mod golden;
mod host_embedding;
mod import;
mod model;
mod reader;
mod regen;
/// Needs the fault seam of `__internals`.
#[cfg(feature = "test-internals")]
mod reopen;
mod split_block;
mod split_block_files;
mod xxh3_64;
