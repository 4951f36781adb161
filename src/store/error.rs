//! Errors of the store: one enum for every store operation, and one for table
//! names. Every variant says what was found and what the caller can do.

use crate::error::{CodecError, ParamError};
use std::path::PathBuf;
use thiserror::Error;

/// Why a table name was refused. Names are 1 to [`MAX_NAME_LEN`] bytes of
/// `A–Z a–z 0–9 _ - .`, and do not start with `.` or `-` (so that they can be
/// used as file names and command-line arguments without quoting).
///
/// [`MAX_NAME_LEN`]: super::MAX_NAME_LEN
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum NameError {
    /// The name is empty.
    #[error("table name is empty")]
    Empty,
    /// The name is longer than allowed.
    #[error("table name is {len} bytes long; the limit is {max}")]
    TooLong {
        /// Length of the name in bytes.
        len: usize,
        /// The largest length accepted.
        max: usize,
    },
    /// The name holds a byte outside `A–Z a–z 0–9 _ - .`.
    #[error("table name has byte {byte:#04x} at offset {at}; use only A-Z a-z 0-9 _ - .")]
    InvalidByte {
        /// The offending byte.
        byte: u8,
        /// Its offset in the name.
        at: usize,
    },
    /// The name starts with `.` or `-`.
    #[error("table name must not start with '.' or '-'")]
    BadFirstByte,
}

/// Errors of [`FilterStore`](super::FilterStore) and [`Table`](super::Table)
/// operations.
///
/// # What an error of a write means
/// **Nothing changed**, in memory or on disk, and nothing of the call runs
/// later (every table call runs on the caller's thread): the host may repeat
/// the call. Every step of a write that can fail runs before its point of no
/// return — a batch reaches memory only after its log record was appended,
/// a catalog change only with its rename.
///
/// **Except [`StoreError::OutcomeUnknown`]** ([`StoreError::is_outcome_unknown`]):
/// the write passed its point of no return and a step after it failed — the
/// `fdatasync` of a durable batch already applied and logged, the directory
/// sync after the catalog's rename. The write may or may not survive a
/// crash. The store stops writing ([`StoreError::Degraded`] for every later
/// write; no flush reports durable any more), lookups keep answering, and no
/// file either outcome needs is deleted. The host commits no record whose
/// filter insert the call covered (an insert that is not durable must not
/// protect a record), reopens the store to go on (it recovers a state with
/// or without the call's writes), and never repeats a remove of the call
/// blind: a remove counted twice takes counts from other keys, a false
/// negative; a repeated insert only adds a false positive.
///
/// Where the store cannot know what it lost, it degrades rather than guess:
/// a failed sync is never followed by "durable" (the kernel may have dropped
/// the pages; the failure is sticky), and a table whose log lost records it
/// had acknowledged answers "maybe" for every key
/// ([`StoreError::NeedsRegeneration`]). One write is not atomic:
/// [`Table::bulk_load`](super::Table::bulk_load), whose error may leave some of
/// its keys in the table (inserts only: false positives at worst).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StoreError {
    /// An I/O error from the operating system (disk full, permission denied,
    /// file too large, ...).
    #[error("I/O error while {op}: {source}; check free space and permissions of the database directory")]
    Io {
        /// What the store was doing.
        op: &'static str,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// Another process holds the database open: the store's `LOCK` file,
    /// locked exclusively by a writer and shared by read-only opens (for a
    /// read-only open of a format 1 or 2 store, sled's lock of its `db`).
    #[error("database {path:?} is locked by another process; close it first")]
    Locked {
        /// The database directory.
        path: PathBuf,
    },
    /// A [`FilterStore`](super::FilterStore) of this process already has the
    /// database open. A store is cheap to clone and `Send + Sync`: share
    /// that handle instead of opening the directory again.
    #[error("database {path:?} is already open in this process; share its FilterStore handle (clone it) instead of opening it again")]
    AlreadyOpen {
        /// The database directory.
        path: PathBuf,
    },
    /// A storage failure other than plain I/O: the storage engine (sled,
    /// for the guard's storage and a migration from format 1 or 2) reported
    /// corruption of its own files, an unsupported operation or an earlier
    /// failure that made it refuse further writes; or the store found its
    /// own files disagree (a fold or a regeneration's commit that cannot
    /// proceed). Reopen the store.
    #[error("storage engine error while {op}: {source}; reopen the store (it recovers to the last durable state)")]
    Storage {
        /// What the store was doing.
        op: &'static str,
        /// The engine's error (its type is not part of the API: the engine
        /// is an implementation detail of the store).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The directory is not a filterstore database: it has no marker
    /// ([`MARKER_FILE`](super::MARKER_FILE)) and is not empty, or holds a
    /// sled database that is not ours. Nothing in it was written.
    #[error("{path:?} is not a filterstore database; choose another directory")]
    NotAFilterStore {
        /// The database directory.
        path: PathBuf,
    },
    /// The path exists but is not a directory.
    #[error("{path:?} exists and is not a directory; choose a directory path for the database")]
    NotADirectory {
        /// The path given.
        path: PathBuf,
    },
    /// The store was written by a newer filterstore.
    #[error("store format version {found} is newer than this build supports ({supported}); upgrade filterstore")]
    UnsupportedFormat {
        /// Version found in the catalog.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// The store was written by an older format version and this build has no
    /// migration step from it.
    #[error("store format version {from} has no migration step to version {to} in this build; open it with the filterstore release that wrote it and export the tables")]
    NoMigration {
        /// The version without a step.
        from: u32,
        /// The version this build writes.
        to: u32,
    },
    /// A store of an older format holds something the migration to this
    /// build's format cannot carry over; the store is left as it was.
    #[error("the store at {path:?} cannot be migrated to this release's store format: {reason}; it was left as it was: open it with the filterstore release that wrote it")]
    MigrationRefused {
        /// The store's directory.
        path: PathBuf,
        /// What stops the migration.
        reason: String,
    },
    /// A persisted record failed its checks (checksum, framing, field values).
    /// A table's filter can always be rebuilt from the table's keys.
    #[error("corrupt {what}: {source}; rebuild the table from its keys (drop it, create it again and insert every key, or import an exported counting filter), or restore the database from a backup")]
    Corrupt {
        /// Which record.
        what: String,
        /// What was wrong with it.
        #[source]
        source: CodecError,
    },
    /// The table name is not valid.
    #[error("invalid table name {name:?}: {source}")]
    InvalidName {
        /// The name given (lossily printed).
        name: String,
        /// Why it was refused.
        #[source]
        source: NameError,
    },
    /// A table of this name already exists.
    #[error("table {0:?} already exists; drop it first or choose another name")]
    TableExists(String),
    /// No table of this name exists.
    #[error("no table named {0:?}")]
    NoSuchTable(String),
    /// The table was dropped after this handle was opened; writes are refused.
    #[error("table {0:?} was dropped; open or create it again")]
    TableDropped(String),
    /// The table's parameters are invalid.
    #[error("invalid table parameters: {0}")]
    Params(#[from] ParamError),
    /// A remove was refused because one of the key's counters is zero: the key
    /// was never inserted (or was already removed). The whole batch was
    /// refused and nothing changed.
    #[error("{}", not_present_text(table, *index))]
    NotPresent {
        /// The table.
        table: String,
        /// Index of the refused operation within its batch; `None` for a
        /// single [`Table::remove`](super::Table::remove).
        index: Option<usize>,
    },
    /// A new table's bit filter would exceed the store's memory limit
    /// ([`StoreConfig::max_filter_bytes`](super::StoreConfig::max_filter_bytes));
    /// nothing was allocated or written.
    #[error("the bit filter of table {table:?} would take {bytes} bytes, over the limit of {limit} bytes for one table (a quarter of the machine's memory unless configured); size the table for fewer keys or a higher rate, or raise StoreConfig::max_filter_bytes")]
    TooLarge {
        /// The table.
        table: String,
        /// Bytes its bit filter would take.
        bytes: u64,
        /// The limit in force.
        limit: u64,
    },
    /// The bit filter of a table could not be allocated.
    #[error("not enough memory for the {bytes}-byte bit filter of table {table:?}")]
    OutOfMemory {
        /// The table.
        table: String,
        /// Bytes needed.
        bytes: u64,
    },
    /// The key source of a regeneration failed; the regeneration was
    /// abandoned and the table's previous filter stays in force, unchanged.
    #[error("the key source of table {table:?} failed: {source}; the table keeps its previous filter, retry the regeneration")]
    KeySource {
        /// The table.
        table: String,
        /// The source's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A record could not be encoded (a value the format cannot represent);
    /// nothing was written.
    #[error("cannot encode {what}: {source}; nothing was written")]
    Encode {
        /// Which record.
        what: String,
        /// Why.
        #[source]
        source: CodecError,
    },
    /// The bytes given to [`FilterStore::import`](super::FilterStore::import)
    /// are not a valid filter file (FORMAT.md §3-7).
    #[error("not a valid filter file: {0}")]
    BadFilterFile(#[source] CodecError),
    /// [`FilterStore::import`](super::FilterStore::import) was given a bit
    /// filter: a table needs counters to check and apply removes, and a bit
    /// filter does not say how many keys set each bit.
    #[error("a bit filter cannot become a table: a table needs counters to check and apply removes, and a bit filter does not say how many keys set each bit; import a counting filter (Table::export with ExportKind::Counting)")]
    NotCounting,
    /// A large allocation (a bit filter, a regeneration's or a bulk load's
    /// counters, an export's buffers) would pass the process's memory
    /// budget; nothing was allocated, written or entered in the catalog.
    #[error("{what} needs {bytes} bytes, over the process's memory budget of {budget} bytes ({source_of_budget}; {in_use} bytes already in use); raise it with --memory-budget or StoreConfig::memory_budget, or size the table for fewer keys or a higher rate")]
    OverBudget {
        /// What needed the memory.
        what: String,
        /// Bytes asked for.
        bytes: u64,
        /// The budget in force.
        budget: u64,
        /// Bytes reserved by others when it was refused.
        in_use: u64,
        /// Where the budget comes from.
        source_of_budget: &'static str,
    },
    /// The store was opened read-only ([`FilterStore::open_snapshot`](super::FilterStore::open_snapshot));
    /// writes are refused.
    #[error("the store at {path:?} is open read-only; open it with FilterStore::open to write")]
    ReadOnly {
        /// The store directory.
        path: PathBuf,
    },
    /// An earlier failure of the store's files (a failed sync, or a commit
    /// whose outcome is unknown) stopped every write of this store: this
    /// call changed nothing. Lookups keep answering from memory, no flush
    /// reports durable any more, and reopening the store recovers its last
    /// durable state.
    #[error("the store at {path:?} stopped writing after an earlier failure ({reason}); this call changed nothing; lookups keep working; reopen the store (it recovers to its last durable state)")]
    Degraded {
        /// The store directory.
        path: PathBuf,
        /// The first failure.
        reason: String,
    },
    /// A write failed after its point of no return, so whether it took
    /// effect is unknown: a sync of the log failed after the batch was
    /// applied and logged (the kernel may have dropped its pages), or the
    /// directory sync after the catalog's rename failed (the rename may or
    /// may not survive a power cut). The store stopped writing (later writes
    /// get [`StoreError::Degraded`]); lookups keep answering, and reopening
    /// it recovers a state with or without the call's writes, every key made
    /// durable before it included. Do not commit records whose filter
    /// inserts the call covered; never repeat its removes blind: a remove
    /// counted twice takes counts from other keys (false negatives), while
    /// an insert repeated only adds a false positive.
    #[error("the outcome of {op} in the store at {path:?} is unknown ({source}); the store stopped writing and lookups keep answering; do not commit records whose filter inserts this call covered, reopen the store (it recovers with or without this call's writes), and never repeat a remove of this call blind: a remove counted twice makes false negatives, a repeated insert only a false positive")]
    OutcomeUnknown {
        /// What the store was doing.
        op: &'static str,
        /// The store directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The table's open found that its log lost writes it had acknowledged
    /// as durable (a synced record damaged, with records after it that say
    /// so), or holds records of another table or generation: it cannot know
    /// which keys it lacks. Its filter answers "maybe" for every key (no
    /// false negative), and it refuses writes and exact-counter reads
    /// (counting exports) until [`Table::regenerate`](super::Table::regenerate)
    /// (or [`Table::clear`](super::Table::clear), or a drop and a re-create)
    /// rebuilds it from the table's keys; [`Table::health`](super::Table::health)
    /// reports it. Nothing changed.
    #[error("table {table:?} lost writes it had acknowledged ({reason}); it answers \"maybe\" for every key and refuses this until it is rebuilt: regenerate it from the table's keys (Table::regenerate, filterstore regenerate), or drop and re-create it")]
    NeedsRegeneration {
        /// The table.
        table: String,
        /// What its open found.
        reason: String,
    },
    /// A sealed filter whose bytes cannot be read (its pack missing or
    /// damaged, its frame or parameters wrong): its user must take it as
    /// "maybe" for every key.
    #[error("sealed filter {name:?} cannot be read ({reason}); take it as \"maybe\" for every key, and commit it again from what it describes")]
    SealedUnreadable {
        /// The filter's name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A batch of sealed filters that cannot be committed as it is (a name
    /// twice, a tag over its limit): nothing was written.
    #[error("invalid batch of sealed filters: {0}; nothing was written")]
    InvalidSealedBatch(String),
    /// A batch holds more operations than one log record may carry.
    #[error("batch of {len} operations exceeds the limit of {max}; split it")]
    BatchTooLarge {
        /// Operations in the batch.
        len: usize,
        /// The limit.
        max: usize,
    },
}

fn not_present_text(table: &str, index: Option<usize>) -> String {
    match index {
        Some(i) => format!("operation {i} of the batch removes a key that is not in table {table:?}; the batch was refused and nothing changed"),
        None => format!("the key to remove is not in table {table:?}; nothing changed"),
    }
}

impl StoreError {
    /// Whether this error says the outcome of the call is unknown
    /// ([`StoreError::OutcomeUnknown`]): the call's writes may or may not
    /// have taken effect. Every other error of a write means that the call
    /// changed nothing.
    pub fn is_outcome_unknown(&self) -> bool {
        matches!(self, StoreError::OutcomeUnknown { .. })
    }

    /// Maps a sled error, naming the operation that failed; the sled error
    /// stays reachable as the [`source`](std::error::Error::source).
    pub(crate) fn sled(op: &'static str, e: sled::Error) -> StoreError {
        match e {
            sled::Error::Io(source) => StoreError::Io { op, source },
            other => StoreError::Storage {
                op,
                source: Box::new(other),
            },
        }
    }

    /// A storage failure the store itself detected (not the engine's).
    pub(crate) fn storage(op: &'static str, detail: String) -> StoreError {
        StoreError::Storage {
            op,
            source: detail.into(),
        }
    }

    /// A record that could not be encoded.
    pub(crate) fn encode(what: impl Into<String>, source: CodecError) -> StoreError {
        StoreError::Encode {
            what: what.into(),
            source,
        }
    }

    /// A corrupt record.
    pub(crate) fn corrupt(what: impl Into<String>, source: CodecError) -> StoreError {
        StoreError::Corrupt {
            what: what.into(),
            source,
        }
    }
}

/// An error of a catalog commit made while opening a store (a new store's
/// first catalog, a migration's switch): the open fails, so there is no
/// store to stop; whether the commit reached the disk or not, opening again
/// finds a consistent store.
pub(crate) fn at_open(e: StoreError) -> StoreError {
    match e {
        StoreError::OutcomeUnknown { op, source, .. } => StoreError::Io { op, source },
        other => other,
    }
}
