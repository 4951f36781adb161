//! The `filterstore` command-line tool: a thin layer over
//! [`filterstore::store`]. See `filterstore --help`.

mod cli;

// The demo and plot modules moved here unedited; they name library items by
// `crate::` paths (fixed in the next commit).
use filterstore::{exchange, guard, params, store, BitFilter, BloomRead, HashSpec, Layout};

fn main() -> std::process::ExitCode {
    cli::main()
}
