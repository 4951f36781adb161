//! The command line: the `filterstore` tool's arguments and commands, as
//! clap parses them (`--help` shows these doc comments).

use clap::{Parser, Subcommand, ValueEnum};
use filterstore::Layout;
use std::path::PathBuf;

/// Default budget of `inspect`, `probe` and `estimate` for a decoded
/// message: 256 MiB (2^31 bits), a filter for about 200 million keys at 1%.
const DEFAULT_MAX_FILTER_MIB: u64 = 256;

/// The most keys `plot` puts in a filter: its largest point (24 bits per
/// key) is then a 30 MB filter, and the 46 points insert for about a
/// minute on this project's 2-core machine.
const MAX_PLOT_KEYS: u64 = 10_000_000;

/// The most absent keys `plot` probes per point (46 points of 10^8 lookups
/// are a few minutes).
const MAX_PLOT_PROBES: u64 = 100_000_000;

/// An on-disk store of Bloom filters, one per table.
#[derive(Parser, Debug)]
#[command(name = "filterstore", version, about, long_about = None)]
pub struct Cli {
    /// Database directory [default: ./filterstore.db]
    #[arg(long, global = true, env = "FILTERSTORE_DB", value_name = "DIR")]
    pub db: Option<PathBuf>,
    /// The memory this process may take for filters, counters and their
    /// buffers, in bytes [default: 3/4 of what the process's cgroups leave it
    /// (v2 memory.max or v1 memory.limit_in_bytes) or of MemAvailable,
    /// whichever is less]. Over it a command fails with one line, having
    /// allocated and written nothing.
    #[arg(
        long,
        global = true,
        env = "FILTERSTORE_MEMORY_BUDGET",
        value_name = "BYTES"
    )]
    pub memory_budget: Option<u64>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LayoutArg {
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
pub enum Command {
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
    #[command(group(
        clap::ArgGroup::new("change")
            .args(["fp", "expected"])
            .required(true)
            .multiple(true)
    ))]
    Set {
        /// Table name.
        table: String,
        /// New target false-positive rate.
        #[arg(long, value_name = "RATE")]
        fp: Option<f64>,
        /// New expected number of keys.
        #[arg(long, value_name = "N")]
        expected: Option<u64>,
    },
    /// The end-to-end tour: tables, guarded reads, a semi-join, drift and
    /// regeneration, and the crash-safety promise; in a temporary database
    /// (not FILTERSTORE_DB's), or in --db DIR if DIR does not exist yet.
    Demo,
    /// Write an SVG plot of false-positive rate against bits per key (model
    /// and measurement, both layouts).
    Plot {
        /// Output file (standard output when absent or `-`, unless it is a
        /// terminal). The README's chart is `-o docs/fp_vs_bits_per_key.svg`.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Keys per filter, at most 10,000,000 (a 30 MB filter per point).
        #[arg(long, default_value_t = 100_000,
              value_parser = clap::value_parser!(u64).range(1..=MAX_PLOT_KEYS))]
        keys: u64,
        /// Absent keys probed per point, at most 100,000,000.
        #[arg(long, default_value_t = 2_000_000,
              value_parser = clap::value_parser!(u64).range(1..=MAX_PLOT_PROBES))]
        probes: u64,
    },
    /// Used by `demo`: writes durable batches until killed (not for users).
    #[command(hide = true)]
    DemoChild,
}
