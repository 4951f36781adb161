//! The tests that re-run this binary as a child process and kill it, cut
//! its power or fill its disk (feature `store`; `harness = false`): a kill -9
//! during writes ([`kill`]), during regenerations ([`regen_kill`]) and
//! across a migration from every old fixture ([`migrate_kill`]), a full
//! disk and a read-only directory ([`disk_full`]), power cuts on a FUSE
//! filesystem ([`power_cut`], Linux). Each was a binary of its own
//! (`store_crash`, `store_regen_crash`, `store_disk_full`, `store_powercut`);
//! one binary links once (issue 29).
//!
//! `main` is the child when the parent set one of the modules' variables
//! (each parent sets only its own, for its child only), else it runs every
//! test in turn, one at a time, each under its module's time limit, named
//! `module::test`; an argument selects the tests whose name contains it, as
//! libtest's filter does, and `--list` lists them.

#[path = "../common/mod.rs"]
mod common;
#[cfg(target_os = "linux")]
mod powercut;

mod disk_full;
mod kill;
mod migrate_kill;
#[cfg(target_os = "linux")]
mod power_cut;
mod regen_kill;

use std::time::Duration;

/// A module's tests: name, body, time limit.
type Tests = &'static [(&'static str, fn(), Duration)];

fn main() {
    #[cfg(target_os = "linux")]
    let power_cut_child = power_cut::child_mode();
    #[cfg(not(target_os = "linux"))]
    let power_cut_child = false;
    if power_cut_child
        || kill::child_mode()
        || regen_kill::child_mode()
        || disk_full::child_mode()
        || migrate_kill::child_mode()
    {
        return;
    }
    let mut modules: Vec<(&str, Tests)> = vec![
        ("kill", kill::TESTS),
        ("regen_kill", regen_kill::TESTS),
        ("disk_full", disk_full::TESTS),
        ("migrate_kill", migrate_kill::TESTS),
    ];
    #[cfg(target_os = "linux")]
    modules.push(("power_cut", power_cut::TESTS));
    let tests: Vec<(String, fn(), Duration)> = modules
        .into_iter()
        .flat_map(|(module, tests)| {
            tests
                .iter()
                .map(move |&(name, body, limit)| (format!("{module}::{name}"), body, limit))
        })
        .collect();
    common::run_main(&tests);
}
