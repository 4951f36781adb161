//! The `filterstore` command-line tool: a thin layer over the `filterstore`
//! library's public API. See `filterstore --help`.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
