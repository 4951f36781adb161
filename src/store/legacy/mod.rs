//! The sled-era wing of the store: everything of store formats 1 and 2,
//! which kept the catalog and the tables in sled 0.34.7, and sled itself,
//! which formats 3 and later keep for one thing only, the guard's storage in
//! `<store>/guard/` ([`guard_db`]). The live path of today's format
//! (catalog, page files, logs) is the rest of `store/`: of this wing, only the open
//! (`open/mod.rs`, `open/marker.rs`: recognising, copying and migrating an old store;
//! the guard's database handle) and the guard's storage
//! ([`SledDiffStorage`](crate::SledDiffStorage), over [`engine`]) use
//! anything, and nothing here imports the open.
//!
//! * [`engine`]: sled behind its bounds (segment size, call sizes, the
//!   worker that runs its flushes), and [`blobkeep`], the second names that
//!   keep sled's blob files through a power cut;
//! * [`guard_db`]: the guard's database, opened on first use;
//! * [`sled_dir`]: a store directory of format 1 or 2 — recognised without
//!   opening sled, copied privately for a read-only open, its sled files
//!   removed once migrated;
//! * [`generation`] and [`migrate`]: reading a table generation of format 1
//!   or 2, and the migration to format 3 (then
//!   `store/open/migrate.rs` takes it on from there).

mod blobkeep;
pub(crate) mod engine;
mod generation;
pub(crate) mod guard_db;
pub(crate) mod migrate;
pub(crate) mod sled_dir;
