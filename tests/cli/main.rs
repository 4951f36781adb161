//! The `filterstore` command-line tool (feature `cli`), run as a separate
//! process: its commands, files, export targets, read-only commands,
//! regeneration, split-block tables, and its memory budget in a real memory
//! cgroup. One test binary (issue 29); each module was a binary of its own
//! (`cli_*`, `store_cgroup`).

mod cli_common;
#[path = "../store_fixture_common/mod.rs"]
mod store_fixture_common;

mod cgroup;
mod commands;
/// Named pipes, character devices and file modes.
#[cfg(unix)]
mod export_target;
mod files;
mod readonly;
mod regen;
mod split_block;
