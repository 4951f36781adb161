//! The differential-file guard (`src/guard`, feature `store`): reads, merges
//! and `read_many`, its storage under concurrent traffic, and the migration
//! that carries its storage into store format 3. One test binary (issue 29);
//! each module was a binary of its own (`guard`, `store_guard_*`,
//! `store_migrate_guard`).

#[path = "../common/mod.rs"]
mod common;

mod api;
mod log;
mod many;
mod migrate;
mod stress;
