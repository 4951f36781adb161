//! Tuning knobs of a [`FilterStore`](super::FilterStore). Every default is
//! chosen for the figures in the module docs of [`store`](super); every knob
//! bounds some memory, and the bounds are stated here.

/// Configuration of a store. Build it with [`StoreConfig::default`] and the
/// builder methods.
///
/// Memory of an open store = the bit filters of the open tables
/// (`m/8` bytes each) + [`cache_capacity`](StoreConfig::cache_capacity) (sled's
/// page cache, once the guard's storage is used) + per table at most `buffer_ops·17` bytes of unwritten log +
/// `materialized_blocks·256` bytes of counter blocks held for removes + a
/// dirty bitmap of `m/4096` bytes. A fold of the log (and the open of a table
/// with an unfolded log) temporarily needs 16 bytes per logged operation in
/// the blocked layout, `16·k` in the standard layout: at most
/// [`DEFAULT_FOLD_MEMORY`] with the default fold threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreConfig {
    pub(crate) cache_capacity: u64,
    pub(crate) fold_threshold: Option<u64>,
    pub(crate) buffer_ops: usize,
    pub(crate) materialized_blocks: usize,
    pub(crate) flush_every_ms: Option<u64>,
    pub(crate) max_filter_bytes: Option<u64>,
    pub(crate) io_timeout: std::time::Duration,
    pub(crate) memory_budget: Option<u64>,
    pub(crate) background_folds: bool,
}

/// How long one call into the storage engine (sled: the guard's storage, a
/// migration from format 1 or 2) may take before the store gives up on it
/// ([`StoreConfig::io_timeout`]): 10 seconds.
pub const DEFAULT_IO_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Default sled page-cache size: 64 MiB. sled's own default is 1 GiB, far more
/// than a store of filters needs: since store format 3 sled holds only the
/// guard's storage (and, in formats 1 and 2, the counter pages were read
/// only by removes, folds and opens, in sequential scans a cache does not
/// help).
pub const DEFAULT_CACHE_CAPACITY: u64 = 64 << 20;
/// Fold memory that sets the default fold threshold: 16 MiB, i.e. 1,048,576
/// logged operations in the blocked layout (16 bytes each; 17 MiB of log
/// records) and `1,048,576 / k` in the standard layout.
///
/// The threshold trades write cost against open cost. A fold rewrites each
/// counter chunk it touches, up to the whole counting filter (`m/2` bytes):
/// at 1M operations a 10M-key table (48 MiB of counters) is rewritten for
/// about 48 bytes per key, ≈ 0.25 µs per key on the 2-core machine of
/// `cargo bench --bench store`. The unfolded log is
/// replayed when the table is opened, and the replay's memory (16 bytes per
/// operation) shows in the RSS after open. Measured on a 10M-key table in
/// store format 2 (the log then in sled, whose copy of the records added to
/// the RSS; a shared 2-core machine): at 2M operations durable batches of
/// 1,000 ran at 13.4× sled's single inserts but the reopen with a full log
/// took 0.95 s and 99.7 MiB; at 1M, see the bench.
pub const DEFAULT_FOLD_MEMORY: u64 = 16 << 20;
/// Default number of operations of non-durable writes gathered in memory
/// before they are written as one log record: 4,096 (68 KiB).
pub const DEFAULT_BUFFER_OPS: usize = 4096;
/// Default number of 256-byte counter blocks kept in memory for removes
/// between folds: 16,384 (4 MiB).
pub const DEFAULT_MATERIALIZED_BLOCKS: usize = 16_384;

/// Share of physical memory one table's bit filter may take by default: a
/// quarter. A larger filter is almost always a mistyped `expected` (10^10 keys at
/// 1% is a 12 GB filter), and allocating it would push the host into swap or
/// the out-of-memory killer; a host that means it raises the limit.
pub const DEFAULT_FILTER_MEMORY_SHARE: f64 = 0.25;

/// The machine's physical memory in bytes (`MemTotal` of `/proc/meminfo`),
/// where it can be read.
fn physical_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            cache_capacity: DEFAULT_CACHE_CAPACITY,
            fold_threshold: None,
            buffer_ops: DEFAULT_BUFFER_OPS,
            materialized_blocks: DEFAULT_MATERIALIZED_BLOCKS,
            flush_every_ms: None,
            max_filter_bytes: None,
            io_timeout: DEFAULT_IO_TIMEOUT,
            memory_budget: None,
            background_folds: true,
        }
    }
}

impl StoreConfig {
    /// Bytes of sled's page cache ([`DEFAULT_CACHE_CAPACITY`] by default),
    /// passed to sled's `Config::cache_capacity`: the cache of the guard's
    /// storage (and of a migration from format 1 or 2); the tables' own
    /// files do not pass through it. sled evicts cached tree
    /// pages beyond this bound, but it counts the pages' *serialized* size,
    /// not the memory they take, and its own structures come on top (sled
    /// issues #986 and #1410 report the same). Measured on a 2-core machine
    /// in store format 2, when the counters were in sled: after opening a 10M-key table (a scan of its 48 MiB of counters), the RSS was 66 MiB
    /// with a cache capacity of 1, 8, 32 or 64 MiB alike — about the bit
    /// filter plus the data scanned. So this knob bounds the steady state of
    /// a long-running store, not the memory of one scan.
    pub fn cache_capacity(mut self, bytes: u64) -> Self {
        self.cache_capacity = bytes;
        self
    }

    /// Logged operations after which the log is folded into the counter pages
    /// (at least 1, at most 4,194,304; by default set from
    /// [`DEFAULT_FOLD_MEMORY`]). A larger value amortises the fold over more
    /// keys (a fold rewrites every counter chunk it touches, up to the whole
    /// counting filter, `m/2` bytes) at the cost of fold memory and of open
    /// time (the unfolded log is replayed).
    pub fn fold_threshold(mut self, ops: u64) -> Self {
        self.fold_threshold = Some(ops.clamp(1, super::disk::chunks::MAX_FOLD_OPS));
        self
    }

    /// Whether a table's fold runs on a thread of its own while writes go on
    /// (default `true`; `docs/FORMAT.md` § 11, `store::table::background`):
    /// the batch that reaches [`fold_threshold`](StoreConfig::fold_threshold)
    /// starts it and returns; a later write takes its result in. Writes wait
    /// for it only when the log reaches twice the threshold, or when they
    /// need the counters it is writing (a remove on a block with pending
    /// inserts, a bulk load, a regeneration). With `false` every fold runs
    /// on the thread of the write that reaches the threshold, before that
    /// write.
    pub fn background_folds(mut self, on: bool) -> Self {
        self.background_folds = on;
        self
    }

    /// Operations of non-durable writes gathered in memory before they are
    /// appended to the table's log as one record ([`DEFAULT_BUFFER_OPS`]; at
    /// least 1).
    pub fn buffer_ops(mut self, ops: usize) -> Self {
        self.buffer_ops = ops.clamp(1, super::disk::log::MAX_RECORD_OPS);
        self
    }

    /// Counter blocks (256 bytes each) held in memory for removes between
    /// folds ([`DEFAULT_MATERIALIZED_BLOCKS`]); when exceeded, the log is
    /// folded and the blocks are released.
    pub fn materialized_blocks(mut self, blocks: usize) -> Self {
        self.materialized_blocks = blocks.max(1);
        self
    }

    /// Ignored: kept so that existing callers still build. A table's writes
    /// are durable when its log is synced: at a durable apply, a flush or a
    /// fold (see [`Durability`](super::Durability)); the guard's storage
    /// flushes every write that reaches sled at once, with sled's background
    /// flusher always off, because it is one of the threads that could
    /// close sled 0.34.7's writer deadlock (`sled_engine`, "The
    /// bounds").
    #[deprecated(
        note = "ignored: a table's writes are durable when its log is synced (Durability, flush)"
    )]
    pub fn flush_every_ms(mut self, ms: Option<u64>) -> Self {
        self.flush_every_ms = ms;
        self
    }

    /// The largest bit filter a new table may have, in bytes: a create or an
    /// import asking for more is refused with [`StoreError::TooLarge`]
    /// before anything is allocated or written. `None` (the default) means
    /// [`DEFAULT_FILTER_MEMORY_SHARE`] of the machine's physical memory (no
    /// limit where that cannot be read); `Some(u64::MAX)` lifts the limit.
    ///
    /// [`StoreError::TooLarge`]: super::StoreError::TooLarge
    pub fn max_filter_bytes(mut self, bytes: Option<u64>) -> Self {
        self.max_filter_bytes = bytes;
        self
    }

    /// How long one call into the storage engine (sled: the guard's storage,
    /// a migration from format 1 or 2) may take
    /// ([`DEFAULT_IO_TIMEOUT`]; at least 1 ms); the store's own files are
    /// read and written on the caller's thread, their errors returned as
    /// they come. sled 0.34.7 can wait forever
    /// on a full or failing disk; when a call takes longer than this, the
    /// call returns [`StoreError::Io`](super::StoreError::Io) of kind
    /// `TimedOut`, and that sled database is marked failed: its later
    /// writes fail at once (the tables keep working), and its handles are
    /// leaked rather than dropped (`sled_engine`, "Deadlines").
    /// Raise it for disks that legitimately stall longer (one call is at
    /// most eight guard items and their flush, or the open of the database).
    pub fn io_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.io_timeout = timeout.max(std::time::Duration::from_millis(1));
        self
    }

    /// The memory budget of the **whole process** (every store in it), in
    /// bytes: a store opened with `Some(bytes)` sets it. Every large
    /// allocation — a table's bit filter for as long as the table is open, a
    /// regeneration's new counters and bits, a bulk load's or a counting
    /// snapshot's counters, an import's or an export's buffers — is reserved
    /// under it first, and refused with
    /// [`StoreError::OverBudget`](super::StoreError::OverBudget) (nothing
    /// allocated or written) when the reservations in force would pass it.
    /// `None` (the default) leaves the budget as it is: unless set, 3/4 of
    /// what the process's cgroups leave it (v2 `memory.max`, v1
    /// `memory.limit_in_bytes`, less what others in them use) or of
    /// `MemAvailable`, whichever is less.
    pub fn memory_budget(mut self, bytes: Option<u64>) -> Self {
        self.memory_budget = bytes;
        self
    }

    /// The limit [`max_filter_bytes`](StoreConfig::max_filter_bytes) sets,
    /// resolved: `None` when there is none.
    pub(crate) fn filter_bytes_limit(&self) -> Option<u64> {
        self.max_filter_bytes
            .or_else(|| physical_memory().map(|m| (m as f64 * DEFAULT_FILTER_MEMORY_SHARE) as u64))
    }

    /// The configured size of sled's page cache, in bytes.
    pub fn cache_capacity_bytes(&self) -> u64 {
        self.cache_capacity
    }

    /// The fold threshold, in logged operations, for a table with `params`:
    /// as configured, else enough operations that a fold's memory is
    /// [`DEFAULT_FOLD_MEMORY`] or the size of the table's counters, whichever
    /// is larger (at most 4,194,304). A fold rewrites every chunk its
    /// operations touch, and a large table's operations touch all of them:
    /// folding after as many operations as its counters have bytes / 16
    /// keeps the pages a fold rewrites near one byte per logged byte,
    /// whatever the table's size (a 10M-key table, 48 MiB of counters,
    /// folds every 3M operations). The unfolded log is replayed when the
    /// table is opened: its memory, 16 bytes per operation (blocked layout,
    /// `16·k` standard), is at most that of the counters.
    pub fn fold_threshold_ops(&self, params: &crate::filter::params::FilterParams) -> u64 {
        self.fold_threshold.unwrap_or_else(|| {
            let per_op = match params.layout() {
                crate::filter::params::Layout::Blocked => 16,
                crate::filter::params::Layout::Standard
                | crate::filter::params::Layout::SplitBlock => 16 * params.k() as u64,
            };
            let counters = crate::filter::counting::counter_bytes(params) as u64;
            (DEFAULT_FOLD_MEMORY.max(counters) / per_op).clamp(1, super::disk::chunks::MAX_FOLD_OPS)
        })
    }
}
