//! Command-line parsing and the commands. Every command is a few calls into
//! the library; every error becomes one line on standard error and a non-zero
//! exit status.

mod demo;
mod files;
mod insert;
mod keys;
mod output;
mod plot;

use clap::{Parser, Subcommand, ValueEnum};
use filterstore::Layout;
use filterstore::{
    Durability, FilterStore, RegenOptions, StoreConfig, StoreError, TableSpec, WriteBatch,
};
use keys::KeyReader;
use output::Out;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Default budget of `inspect`, `probe` and `estimate` for a decoded
/// message: 256 MiB (2^31 bits), a filter for about 200 million keys at 1%.
const DEFAULT_MAX_FILTER_MIB: u64 = 256;

/// A budget in MiB as a number of bits (saturating: an absurd budget is
/// still only a budget, and the decoder has its own hard cap).
fn mib_to_bits(mib: u64) -> u64 {
    mib.saturating_mul(8 << 20)
}

/// Default database directory.
const DEFAULT_DB: &str = "./filterstore.db";

/// An on-disk store of Bloom filters, one per table.
#[derive(Parser, Debug)]
#[command(name = "filterstore", version, about, long_about = None)]
struct Cli {
    /// Database directory [default: ./filterstore.db]
    #[arg(long, global = true, env = "FILTERSTORE_DB", value_name = "DIR")]
    db: Option<PathBuf>,
    /// The memory this process may take for filters, counters and their
    /// buffers, in bytes [default: 3/4 of the cgroup's memory.max, else of
    /// MemAvailable]. Over it a command fails with one line, having
    /// allocated and written nothing.
    #[arg(
        long,
        global = true,
        env = "FILTERSTORE_MEMORY_BUDGET",
        value_name = "BYTES"
    )]
    memory_budget: Option<u64>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LayoutArg {
    /// All positions of a key in one 512-bit block (one cache line).
    Blocked,
    /// Positions anywhere in the filter.
    Standard,
    /// Parquet's split-block Bloom filter, bit for bit (XXH64 seed 0, eight
    /// bits in a 256-bit block; no seed).
    SplitBlock,
}

impl From<LayoutArg> for Layout {
    fn from(l: LayoutArg) -> Layout {
        match l {
            LayoutArg::Blocked => Layout::Blocked,
            LayoutArg::Standard => Layout::Standard,
            LayoutArg::SplitBlock => Layout::SplitBlock,
        }
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Create a table sized for N keys at a false-positive rate.
    Create {
        /// Table name (A-Z a-z 0-9 _ - ., at most 128 bytes).
        table: String,
        /// Number of keys the table is sized for.
        #[arg(long, value_name = "N")]
        expected: u64,
        /// Target false-positive rate (Cassandra's `bloom_filter_fp_chance`
        /// default).
        #[arg(long, value_name = "RATE", default_value_t = 0.01)]
        fp: f64,
        /// Filter layout.
        #[arg(long, value_enum, default_value_t = LayoutArg::Blocked)]
        layout: LayoutArg,
        /// Hash seed (random by default; the split-block layout has none).
        #[arg(long)]
        seed: Option<u64>,
        /// Allow a bit filter larger than a quarter of this machine's memory.
        #[arg(long)]
        allow_large: bool,
    },
    /// Insert keys, one per line; exit status 0 means every key is durable.
    Insert {
        /// Table name.
        table: String,
        /// File of keys; standard input when absent or `-`.
        file: Option<PathBuf>,
    },
    /// Remove keys, one per line; exit status 0 means every removal is durable.
    Remove {
        /// Table name.
        table: String,
        /// File of keys; standard input when absent or `-`.
        file: Option<PathBuf>,
    },
    /// Print `key<TAB>maybe` or `key<TAB>absent` for each key (a backslash,
    /// TAB or CR in a key is printed as `\\`, `\t`, `\r`).
    Query {
        /// Table name.
        table: String,
        /// File of keys; standard input when absent or `-`.
        file: Option<PathBuf>,
        /// Print only the totals.
        #[arg(long)]
        count: bool,
    },
    /// Show statistics of one table, or of all tables.
    Stats {
        /// Table name (all tables when absent).
        table: Option<String>,
        /// One JSON object per table (an array when no table is named).
        #[arg(long)]
        json: bool,
    },
    /// List the tables.
    List,
    /// Drop a table and all of its data.
    Drop {
        /// Table name.
        table: String,
    },
    /// Write a table's filter to a file (the bit filter by default).
    Export {
        /// Table name.
        table: String,
        /// Output file (standard output when absent or `-`).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// The counting filter (4-bit counters) instead of the bit filter.
        #[arg(long)]
        counting: bool,
        /// An exchange message (entropy-coded when that is smaller).
        #[arg(long)]
        compressed: bool,
        /// With --compressed: the largest message accepted, in bytes.
        #[arg(long, value_name = "BYTES")]
        budget: Option<u64>,
        /// With --compressed: the table's keys, one per line, to build a
        /// filter sized for transmission instead of sending the table's own.
        #[arg(long, value_name = "FILE")]
        keys: Option<PathBuf>,
    },
    /// Create a table from an exported counting filter (`export --counting`).
    Import {
        /// Name of the new table.
        table: String,
        /// A counting filter file.
        file: PathBuf,
    },
    /// Print every header field of a filter file or exchange message and
    /// verify its checksum; non-zero exit status on any defect.
    Inspect {
        /// The file.
        file: PathBuf,
        /// JSON output.
        #[arg(long)]
        json: bool,
        /// Largest filter a message may expand to, in MiB: a coded message
        /// describing more is refused before anything is allocated.
        #[arg(long, value_name = "MIB", default_value_t = DEFAULT_MAX_FILTER_MIB)]
        max_filter_mib: u64,
    },
    /// Print the keys (one per line) that may be in a filter file or message.
    Probe {
        /// A filter file or full exchange message.
        filter: PathBuf,
        /// File of keys; standard input when absent or `-`.
        keys: Option<PathBuf>,
        /// Largest filter a message may expand to, in MiB: a coded message
        /// describing more is refused before anything is allocated.
        #[arg(long, value_name = "MIB", default_value_t = DEFAULT_MAX_FILTER_MIB)]
        max_filter_mib: u64,
    },
    /// Estimate the set sizes of two filters and of their union and intersection.
    Estimate {
        /// First filter file or full exchange message.
        file_a: PathBuf,
        /// Second one (same m, k, layout and hash).
        file_b: PathBuf,
        /// JSON output.
        #[arg(long)]
        json: bool,
        /// Largest filter a message may expand to, in MiB: a coded message
        /// describing more is refused before anything is allocated.
        #[arg(long, value_name = "MIB", default_value_t = DEFAULT_MAX_FILTER_MIB)]
        max_filter_mib: u64,
    },
    /// Rebuild a table's filter from FILE, which holds every key of the
    /// table (one per line), sized for the keys it holds.
    Regenerate {
        /// Table name.
        table: String,
        /// File of every key of the table; standard input when `-`.
        file: PathBuf,
        /// Capacity as a multiple of the table's live keys.
        #[arg(long, default_value_t = filterstore::DEFAULT_HEADROOM)]
        headroom: f64,
    },
    /// Change a table's target false-positive rate or expected size; the
    /// table is then marked for regeneration.
    Set {
        /// Table name.
        table: String,
        /// New target false-positive rate.
        #[arg(long, value_name = "RATE", required_unless_present = "expected")]
        fp: Option<f64>,
        /// New expected number of keys.
        #[arg(long, value_name = "N")]
        expected: Option<u64>,
    },
    /// The end-to-end tour: tables, guarded reads, a semi-join, drift and
    /// regeneration, and the crash-safety promise.
    Demo,
    /// Write an SVG plot of false-positive rate against bits per key (model
    /// and measurement, both layouts).
    Plot {
        /// Output file.
        #[arg(short, long, default_value = "docs/fp_vs_bits_per_key.svg")]
        output: PathBuf,
        /// Keys per filter.
        #[arg(long, default_value_t = 100_000)]
        keys: u64,
        /// Absent keys probed per point.
        #[arg(long, default_value_t = 2_000_000)]
        probes: u64,
    },
    /// Used by `demo`: writes durable batches until killed (not for users).
    #[command(hide = true)]
    DemoChild,
}

/// A command's failure: one line for standard error.
struct Failure(String);

impl<E: std::fmt::Display + 'static> From<E> for Failure {
    fn from(e: E) -> Failure {
        let store = (&e as &dyn std::any::Any).downcast_ref::<StoreError>();
        Failure(store.and_then(cli_hint).unwrap_or_else(|| e.to_string()))
    }
}

/// The library's errors speak to any host; the tool adds its own commands.
fn cli_hint(e: &StoreError) -> Option<String> {
    match e {
        StoreError::NoSuchTable(_) => Some(format!("{e}; list the tables with `filterstore list`")),
        StoreError::TooLarge { table, bytes, limit } => Some(format!(
            "the bit filter of table {table:?} would take {bytes} bytes, over the limit of {limit} bytes (a quarter of this machine's memory); size it for fewer keys or a higher --fp, or pass --allow-large"
        )),
        StoreError::Corrupt { what, source } => Some(format!(
            "corrupt {what}: {source}; rebuild the table from its keys (`filterstore drop`, `create`, then `insert` every key, or `import` an exported counting filter), or restore the database from a backup"
        )),
        _ => None,
    }
}

type Outcome = Result<(), Failure>;

/// Runs the tool; the exit status is 0 on success, 1 on failure, 2 on a
/// command-line error.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
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

/// clap's multi-line message as one line: the lines before the usage, joined
/// (so a list of missing arguments is not cut off).
fn one_line(rendered: &str) -> String {
    let parts: Vec<&str> = rendered
        .lines()
        .take_while(|l| !l.starts_with("Usage:"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
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
            let curves = plot::measure_curves(keys, probes, 24);
            std::fs::write(&output, plot::render_svg(&curves, keys, probes))
                .map_err(|e| Failure(format!("writing {}: {e}", output.display())))?;
            println!("wrote {}", output.display());
            Ok(())
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

/// `--memory-budget` (`u64::MAX`: not given).
static MEMORY_BUDGET: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(u64::MAX);

/// The configuration every command opens its store with: the default, with
/// `--memory-budget` when given.
fn config() -> StoreConfig {
    let b = MEMORY_BUDGET.load(std::sync::atomic::Ordering::Relaxed);
    StoreConfig::default().memory_budget((b != u64::MAX).then_some(b))
}

/// Opens (or creates) the store in `dir` for a command that makes a table.
fn open_or_create(dir: &Path) -> Result<FilterStore, Failure> {
    Ok(FilterStore::open_with(dir, config())?)
}

/// Opens a store that must already exist (only `create` makes a new one, so
/// that a mistyped `--db` does not leave an empty database behind).
fn open_existing(dir: &Path) -> Result<FilterStore, Failure> {
    if !dir.exists() {
        return Err(Failure(format!(
            "no database at {}; create a table first with `filterstore create`, or set --db / FILTERSTORE_DB",
            dir.display()
        )));
    }
    Ok(FilterStore::open_with(dir, config())?)
}

/// Opens an existing store for a command that only reads it: read-only, so
/// that nothing in `dir` is created or modified, and a directory that is not
/// a filterstore database is refused untouched.
fn open_read_only(dir: &Path) -> Result<FilterStore, Failure> {
    if !dir.exists() {
        return open_existing(dir);
    }
    Ok(FilterStore::open_snapshot_with(dir, config())?)
}

fn create(dir: &Path, table: &str, spec: TableSpec, allow_large: bool, out: &mut Out) -> Outcome {
    let mut config = config();
    if allow_large {
        config = config.max_filter_bytes(Some(u64::MAX));
    }
    let store = FilterStore::open_with(dir, config)?;
    let t = store.create_table(table, spec)?;
    let p = t.params();
    out.line(&format!(
        "created table {table}: {} layout, m = {} bits ({} KiB in memory, {} KiB of counters on disk), k = {}, seed {:#018x}",
        p.layout(),
        p.m(),
        p.bit_bytes().div_ceil(1024),
        (filterstore::counter_bytes(&p) as u64).div_ceil(1024),
        p.k(),
        p.hash().seed
    ))
}

fn remove(dir: &Path, table: &str, file: Option<&Path>, out: &mut Out) -> Outcome {
    let store = open_existing(dir)?;
    let t = store.open_table(table)?;
    let mut reader = KeyReader::open(file)?;
    let mut batch = WriteBatch::with_capacity(keys::BATCH_KEYS, keys::BATCH_KEYS * 32);
    let mut lines = Vec::with_capacity(keys::BATCH_KEYS);
    let mut total = 0u64;
    loop {
        batch.clear();
        lines.clear();
        if reader.next_batch(|k, line| {
            batch.remove(k);
            lines.push(line);
        })? == 0
        {
            break;
        }
        match t.apply(&batch, Durability::Buffered) {
            Ok(()) => total += batch.len() as u64,
            Err(StoreError::NotPresent {
                index: Some(index), ..
            }) => {
                // Apply the keys before the refused one, so that the outcome
                // is simply "every line before N", and make them durable.
                let mut prefix = WriteBatch::new();
                for (_, k) in batch.iter().take(index) {
                    prefix.remove(k);
                }
                t.apply(&prefix, Durability::Durable)?;
                reader.finish();
                let line = lines.get(index).copied().unwrap_or(0);
                return Err(Failure(format!(
                    "line {line}: key is not in table {table}; the {} keys before it were removed (durable), nothing after it",
                    total + index as u64
                )));
            }
            Err(e) => return Err(e.into()),
        }
    }
    t.flush()?;
    reader.finish();
    out.line(&format!("removed {total} keys from {table} (durable)"))
}

fn query(dir: &Path, table: &str, file: Option<&Path>, count: bool, out: &mut Out) -> Outcome {
    let store = open_read_only(dir)?;
    let t = store.open_table(table)?;
    let mut reader = KeyReader::open(file)?;
    let mut keys: Vec<Vec<u8>> = Vec::with_capacity(keys::BATCH_KEYS);
    let (mut maybe, mut absent) = (0u64, 0u64);
    loop {
        keys.clear();
        if reader.next_batch(|k, _| keys.push(k.to_vec()))? == 0 {
            break;
        }
        for (k, hit) in keys.iter().zip(t.contains_many(&keys)) {
            if hit {
                maybe += 1;
            } else {
                absent += 1;
            }
            if !count {
                out.key_answer(k, hit)?;
            }
        }
    }
    reader.finish();
    if count {
        out.line(&format!(
            "keys\t{}\nmaybe\t{maybe}\nabsent\t{absent}",
            maybe + absent
        ))?;
    }
    Ok(())
}

fn regenerate(dir: &Path, table: &str, file: &Path, headroom: f64, out: &mut Out) -> Outcome {
    if !(headroom.is_finite() && headroom >= 1.0) {
        return Err(Failure(format!(
            "--headroom {headroom} is invalid; give a number of at least 1"
        )));
    }
    let store = open_existing(dir)?;
    let t = store.open_table(table)?;
    // Opened before the rebuild starts, read by it: the file is the host's
    // snapshot of the table's keys.
    let mut reader = KeyReader::open(Some(file))?;
    let mut batch: std::collections::VecDeque<Vec<u8>> = Default::default();
    let mut failed = false;
    let keys = std::iter::from_fn(|| {
        if batch.is_empty() && !failed {
            if let Err(e) = reader.next_batch(|k, _| batch.push_back(k.to_vec())) {
                failed = true;
                return Some(Err(std::io::Error::other(e)));
            }
        }
        batch.pop_front().map(Ok)
    });
    let report = t.regenerate(
        || keys,
        &RegenOptions {
            headroom,
            capacity: None,
        },
    );
    reader.finish();
    let r = report?;
    t.flush()?;
    out.line(&format!(
        "regenerated {table}: generation {} -> {}, {} keys read, sized for {}, m = {} bits, k = {}",
        r.old_generation, r.new_generation, r.keys_read, r.capacity, r.m_bits, r.k
    ))?;
    if r.source_disagrees() {
        out.line(&format!(
            "note: the key file held {} keys, the table counted {} live keys: keys it lacked are in \
             the filter now; if the file is older than the table, keys removed since are back \
             (false positives until a regeneration from a current file)",
            r.keys_read, r.live_keys_before
        ))?;
    }
    Ok(())
}
