//! The `filterstore` command-line tool.
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "filterstore",
    version,
    about = "An embeddable, on-disk store of Bloom filters"
)]
struct Cli {
    /// Database directory.
    #[arg(long, env = "FILTERSTORE_DB", global = true)]
    db: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// End-to-end tour: builds filters, measures them, and explains the figures.
    Demo,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo => filterstore::demo::run(cli.db),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
