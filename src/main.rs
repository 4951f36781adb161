//! The `filterstore` command-line tool: a thin layer over
//! [`filterstore::store`]. See `filterstore --help`.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
