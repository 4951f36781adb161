//! The persistent store: a directory of the store's own files — a catalog
//! of tables, and per table a page file holding its counting filter and a
//! log of key hashes — each table's bit filter kept in memory.
//!
//! ```no_run
//! use filterstore::{Durability, FilterStore, TableSpec, WriteBatch};
//! # fn main() -> Result<(), filterstore::StoreError> {
//! let store = FilterStore::open("./filterstore.db")?;
//! let orders = store.create_table("orders", TableSpec::new(1_000_000, 0.01))?;
//! let mut batch = WriteBatch::new();
//! batch.insert(b"order:1").insert(b"order:2");
//! orders.apply(&batch, Durability::Durable)?; // durable when it returns
//! // ... only now commit the two order records in the host database.
//! assert!(orders.contains(b"order:1"));
//! # Ok(()) }
//! ```
//!
//! # Durability contract
//! * Every write is **visible** to lookups when the call returns. How long
//!   it survives is the caller's choice ([`Durability`]):
//!   - [`Durability::Buffered`]: in the table's memory until its buffer
//!     fills, a flush, or the table is dropped;
//!   - [`Durability::ProcessCrashSafe`]: written to the log file (one
//!     `pwrite`) when the call returns, so it survives the process being
//!     killed, not a power cut — for a host whose own write-ahead log makes
//!     it durable and can replay it;
//!   - [`Durability::Durable`] (power-cut-safe): the log `fdatasync`ed when
//!     the call returns; concurrent durable applies of a table share one
//!     sync. [`Table::flush`] and [`FilterStore::flush`] make everything
//!     applied before them power-cut-safe. `cargo bench --bench store`
//!     measures what each level costs.
//! * A batch is atomic: after a crash it is wholly present or wholly absent.
//! * The host database keeps two ordering rules; then a crash can only leave
//!   extra keys in a filter (false positives), never missing ones:
//!   1. make a key's **filter insert durable before committing the record**
//!      it protects;
//!   2. **commit a record's deletion before removing its key** from the
//!      filter.
//! * A write that returns an error changed nothing, unless the error is
//!   [`StoreError::OutcomeUnknown`]: then it passed its point of no return
//!   (a durable batch's log sync, a catalog commit's directory sync), the
//!   store stopped writing, and the host must not commit what it covered
//!   nor repeat its removes blind. The full statement is on [`StoreError`].
//! * A crash at any moment (kill -9, `tests/crash/kill.rs`, 200 kills) or a
//!   power cut (`tests/crash/power_cut.rs`: a filesystem that keeps, of what
//!   was not synced, a random page-by-page subset, torn last page included)
//!   leaves a store that opens without error and answers "maybe" for every
//!   key whose insert was durable.
//! * A full or failing disk is a prompt error, never a hang: every call
//!   runs the system calls on the caller's thread and returns their error,
//!   except a fold started at the fold threshold, which runs on a thread of
//!   its own (`table::background`) and whose failure a later write reports.
//!   After a failed sync (whose pages the kernel may have dropped: the
//!   failure is sticky, nothing reports durable after it) or a commit whose
//!   outcome is unknown the store stops writing ([`StoreError::Degraded`];
//!   lookups keep answering) until it is reopened, and nothing durable is
//!   lost (`tests/crash/disk_full.rs`, on a real 20 MB tmpfs;
//!   `tests/store_failpoints.rs`, every write path under injected errors).
//! * A table whose log lost records it had acknowledged (a synced record
//!   damaged, found by the records after it; a record of another table's
//!   log) answers "maybe" for every key and refuses writes
//!   ([`StoreError::NeedsRegeneration`]) until it is regenerated.
//!
//! # Files
//! `docs/FORMAT.md` specifies every byte: the catalog file (§8, §9), and per
//! table generation its page file and its log (§10, §11). See
//! [`disk`] for the files and the order in which they are synced.
//!
//! # Write path: a log of key hashes, folded into counter pages
//! Updating a key's counters in place would cost a page read and write per
//! key. Instead a batch is appended to an in-memory buffer (17 bytes per key:
//! the 128-bit hash and an op code), the buffer is appended to the log as
//! **one** record per batch group, and the log is *folded* into the counter
//! pages when it reaches [`StoreConfig::fold_threshold`] operations: sorted
//! by block, each touched 16 KiB chunk read, updated and written once into
//! the chunk's other slot, and the fold committed by one superblock write
//! (see [`table`]'s fold). A durable batch of 1,000 keys is then one
//! `pwrite` of 17 KB plus one `fdatasync`. Removes need the current counters
//! of the key's block (to refuse a key that was never inserted, and to clear
//! bits whose counter reaches zero); those blocks are read and kept in
//! memory until the next fold (see [`table`] for the invariant that keeps the
//! bits exact).
//!
//! # No hop, no global lock
//! Every table operation runs on the caller's thread: a lookup reads memory
//! only; a write takes its table's writer lock, and its system calls are
//! its own (a background fold's run on the fold's own thread). Nothing queues behind another table or another store. sled
//! 0.34.7 is used only for the guard's base ([`SledDiffStorage`]), opened
//! on first use (`guard_db.rs`); `src/sled_engine/` bounds what remains of
//! it (see there, and the argument from sled's code for why its reads run
//! on the caller's thread).
//! Store format 2 kept everything in sled behind one process-wide worker
//! thread; the power-cut test showed that sled 0.34.7 loses durable keys
//! under it (a blob file whose name was not synced, skipped by sled's
//! recovery while later records were applied), and the hop cost most of the
//! store's speed. Opening a store of format 1 or 2 migrates it
//! (`open/migrate/from_sled.rs`, then the steps of `open/migrate/`): the
//! sled era's code lives with the migrations, and recognising an old
//! store's directory with the open (`open/sled_dir.rs`).
//!
//! [`SledDiffStorage`]: crate::SledDiffStorage
//!
//! # Memory
//! The bit filters of the open tables, plus bounded buffers described in
//! [`StoreConfig`]; the counting filter is not held in memory. Every large
//! allocation is made under one process-wide memory budget ([`budget`]):
//! over it, a typed one-line error and nothing allocated or written.
//!
//! # Generations, health and regeneration
//! A table's data lives in the files of its generation in force (named by
//! its catalog record). [`Table::regenerate`] builds generation + 1 from a
//! key source beside it, online, and makes it the one in force with one
//! catalog write; [`Table::clear`] does so from an empty source. In memory,
//! a table handle reaches its generation through an atomic pointer, so
//! lookups never wait for the swap. [`Table::health`] reports drift
//! (estimated and observed false-positive rate, saturated counters, load);
//! see [`regen`] for the consistency the key source must have and the crash
//! argument.
//!
//! # Lock order
//! Every site that holds two of the store's locks takes them in this order
//! (a lock may be skipped, never taken out of order):
//!
//! 1. a [`Guard`](crate::Guard)'s writer lock (guarded writes and merges);
//! 2. a table's regeneration lock (`TableInner::regen_lock`: one
//!    regeneration at a time per table);
//! 3. the catalog (`Shared::catalog`: create, import, drop,
//!    `set_params`, a regeneration's commit);
//! 4. the open-tables map (`StoreInner::tables`);
//! 5. a generation's writer lock (`Generation::writer`: every write, fold
//!    and flush of the table's buffer).
//!
//! Leaves, never held while another lock is taken: a table's catalog record
//! in memory (`TableInner::meta`), the drift policy and the health callback
//! (`Shared::policy`, `Shared::regen_hook`; the callback is cloned
//! and called with no lock held), a log's sync lock (taken with no other
//! lock held). Lookups take no lock at all. The sites: `create_table` and
//! `import` (3 → 4), `drop_table` (3 → 4 → 5), `open_table` (4), `flush`
//! (4, released, then 5 per table), `regenerate` (2 → 5, released; later
//! 2 → 3 → 5 for the swap), `change_layout` (2 → 3 → 5, held from before
//! the key source is called to the swap: `regen::relayout`).
//!
//! # Open
//! Opening a table reads its superblock, replays its log (at most one fold
//! threshold plus one batch), and scans its counter chunks once (`m/2`
//! bytes), deriving each bit word from 64 counters: the cost grows with `m`,
//! not with the number of operations the table has seen. No snapshot of the
//! bits is persisted: the counters are the single source of truth.

pub(crate) mod batch;
pub(crate) mod budget;
pub(crate) mod catalog;
mod cgroup;
pub(crate) mod config;
pub(crate) mod disk;
pub(crate) mod error;
pub(crate) mod guard_db;
mod import;
mod open;
pub(crate) mod regen;
mod sealed;
mod shared;
pub(crate) mod table;
mod tables;

pub use batch::{Durability, WriteBatch};
pub use catalog::{MAX_NAME_LEN, MAX_SEALED_TAG, STORE_FORMAT_VERSION};
pub use config::{
    StoreConfig, DEFAULT_BUFFER_OPS, DEFAULT_CACHE_CAPACITY, DEFAULT_FILTER_MEMORY_SHARE,
    DEFAULT_FOLD_MEMORY, DEFAULT_IO_TIMEOUT, DEFAULT_MATERIALIZED_BLOCKS,
};
pub use disk::log::MAX_RECORD_OPS;
pub use error::{NameError, StoreError};
pub use import::ExportKind;
pub use open::FilterStore;
pub use open::MARKER_FILE;
pub use regen::{HealthReport, RegenOptions, RegenReport, DEFAULT_HEADROOM};
pub use sealed::{NewSealed, SealedBatch, SealedFilter, SealedInfo};
pub use table::{Table, TableBloom, TableReader, TableStats};
pub use tables::TableSpec;
