//! Command-line parsing and the commands. Every command is a few calls into
//! the library; every error becomes one line on standard error and a non-zero
//! exit status.

mod args;
mod demo;
mod failure;
mod files;
mod insert;
mod keys;
mod open;
mod output;
mod plot;
mod tables;
mod target;

use args::{Cli, Command};
use failure::{Failure, Outcome};
use filterstore::TableSpec;
use open::{open_existing, open_read_only, MEMORY_BUDGET};
use output::Out;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tables::{create, query, regenerate, remove};

/// A budget in MiB as a number of bits (saturating: an absurd budget is
/// still only a budget, and the decoder has its own hard cap).
fn mib_to_bits(mib: u64) -> u64 {
    mib.saturating_mul(8 << 20)
}

/// Default database directory.
const DEFAULT_DB: &str = "./filterstore.db";

/// Runs the tool; the exit status is 0 on success, 1 on failure, 2 on a
/// command-line error.
pub fn main() -> ExitCode {
    let cli = match parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                // Help and version go to stdout with status 0.
                return match e.print() {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(_) => ExitCode::FAILURE,
                };
            }
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                // clap's answer to a bare `filterstore` is the whole help;
                // the tool says what is missing instead, on one line.
                eprintln!(
                    "filterstore: error: no command given; the commands are {} (see filterstore --help)",
                    command_names()
                );
                return ExitCode::from(2);
            }
            eprintln!(
                "filterstore: {} (see filterstore --help)",
                one_line(&e.to_string())
            );
            return ExitCode::from(2);
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(msg)) => {
            eprintln!("filterstore: error: {}", msg.replace('\n', " "));
            ExitCode::FAILURE
        }
    }
}

/// The command line. `FILTERSTORE_DB` names the user's database for the
/// everyday commands; `demo`, which makes and drops tables of its own, runs
/// in a temporary database unless `--db` itself names one.
fn parse() -> Result<Cli, clap::Error> {
    use clap::parser::ValueSource;
    use clap::{CommandFactory, FromArgMatches};
    let mut command = Cli::command();
    let matches = command.try_get_matches_from_mut(std::env::args_os())?;
    let mut cli = Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut command))?;
    if matches!(cli.command, Command::Demo)
        && matches.value_source("db") == Some(ValueSource::EnvVariable)
    {
        cli.db = None;
    }
    Ok(cli)
}

/// The commands a user may type, in the order of `--help`.
fn command_names() -> String {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let names: Vec<&str> = cmd
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name())
        .collect();
    names.join(", ")
}

/// clap's multi-line message as one line: the lines before the usage, joined
/// (so a list of missing arguments is not cut off), without clap's own
/// pointer to `--help` (the tool adds one).
fn one_line(rendered: &str) -> String {
    let parts: Vec<&str> = rendered
        .lines()
        .take_while(|l| !l.starts_with("Usage:"))
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
        .collect();
    if parts.is_empty() {
        return "invalid arguments".to_string();
    }
    parts.join(" ")
}

fn run(cli: Cli) -> Outcome {
    MEMORY_BUDGET.store(
        cli.memory_budget.unwrap_or(u64::MAX),
        std::sync::atomic::Ordering::Relaxed,
    );
    let dir = match (&cli.command, cli.db) {
        (Command::Demo | Command::DemoChild | Command::Plot { .. }, db) => {
            return run_tool(cli.command, db)
        }
        (_, db) => db.unwrap_or_else(|| PathBuf::from(DEFAULT_DB)),
    };
    let mut out = Out::stdout();
    match cli.command {
        cmd @ (Command::Inspect { .. } | Command::Probe { .. } | Command::Estimate { .. }) => {
            run_file_command(cmd, &mut out)?
        }
        cmd @ (Command::Export { .. } | Command::Import { .. }) => {
            run_transfer_command(&dir, cmd, &mut out)?
        }
        cmd => run_table_command(&dir, cmd, &mut out)?,
    }
    out.finish()
}

/// `demo`, its crash child and `plot`: commands that do not open `--db` the
/// usual way and print as they go.
fn run_tool(command: Command, db: Option<PathBuf>) -> Outcome {
    match command {
        Command::Demo => demo::run(db).map_err(|e| Failure(e.to_string())),
        Command::DemoChild => {
            let dir = db.ok_or_else(|| Failure("demo-child needs --db".into()))?;
            demo::crash_child(&dir).map_err(|e| Failure(e.to_string()))
        }
        Command::Plot {
            output,
            keys,
            probes,
        } => {
            // Measured only once the target is known to be acceptable.
            let mut out = Out::stdout();
            target::write_output(
                output.as_deref(),
                "the plot",
                "an SVG image",
                &mut out,
                &mut |w| {
                    let curves = plot::measure_curves(keys, probes, 24);
                    w.write_all(plot::render_svg(&curves, keys, probes).as_bytes())
                        .map_err(|e| Failure(format!("cannot write the plot: {e}")))
                },
            )?;
            out.finish()
        }
        _ => Ok(()),
    }
}

/// `inspect`, `probe` and `estimate`: files only, no database.
fn run_file_command(command: Command, out: &mut Out) -> Outcome {
    match command {
        Command::Inspect {
            file,
            json,
            max_filter_mib,
        } => files::inspect(&file, json, mib_to_bits(max_filter_mib), out),
        Command::Probe {
            filter,
            keys,
            max_filter_mib,
        } => files::probe(&filter, keys.as_deref(), mib_to_bits(max_filter_mib), out),
        Command::Estimate {
            file_a,
            file_b,
            json,
            max_filter_mib,
        } => files::estimate(&file_a, &file_b, json, mib_to_bits(max_filter_mib), out),
        _ => Ok(()),
    }
}

/// `export` and `import`: between a table and a file.
fn run_transfer_command(dir: &Path, command: Command, out: &mut Out) -> Outcome {
    match command {
        Command::Export {
            table,
            output,
            counting,
            compressed,
            budget,
            keys,
        } => {
            let opts = files::ExportOptions {
                counting,
                compressed,
                budget,
                keys: keys.as_deref(),
            };
            files::export(dir, &table, output.as_deref(), &opts, out)
        }
        Command::Import { table, file } => files::import(dir, &table, &file, out),
        _ => Ok(()),
    }
}

/// The commands on the tables of the database in `dir`.
fn run_table_command(dir: &Path, command: Command, out: &mut Out) -> Outcome {
    match command {
        Command::Create {
            table,
            expected,
            fp,
            layout,
            seed,
            allow_large,
        } => {
            let mut spec = TableSpec::new(expected, fp).layout(layout.into());
            if let Some(s) = seed {
                spec = spec.seed(s);
            }
            create(dir, &table, spec, allow_large, out)
        }
        Command::Insert { table, file } => insert::insert(dir, &table, file.as_deref(), out),
        Command::Remove { table, file } => remove(dir, &table, file.as_deref(), out),
        Command::Query { table, file, count } => query(dir, &table, file.as_deref(), count, out),
        Command::Stats { table, json } => output::stats(&open_read_only(dir)?, table, json, out),
        Command::List => open_read_only(dir)?
            .list_tables()?
            .iter()
            .try_for_each(|name| out.line(name)),
        Command::Drop { table } => {
            open_existing(dir)?.drop_table(&table)?;
            out.line(&format!("dropped table {table}"))
        }
        Command::Regenerate {
            table,
            file,
            headroom,
        } => regenerate(dir, &table, &file, headroom, out),
        Command::Set {
            table,
            fp,
            expected,
        } => {
            let t = open_existing(dir)?.open_table(&table)?;
            t.set_params(expected, fp)?;
            out.line(&format!(
                "table {table}: target fp {}, expected {} keys; marked for regeneration",
                t.target_fp(),
                t.expected_keys()
            ))
        }
        _ => Ok(()),
    }
}
