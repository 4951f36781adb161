//! Write batches: a sequence of inserts and removes applied atomically.

/// What survives of a batch when [`Table::apply`](super::Table::apply)
/// returns: every level makes it visible at once; they differ in what it
/// survives. `cargo bench --bench store` measures what each costs
/// (`RESULT store.buffered_batch_vs_raw_sled`,
/// `RESULT store.durable_batch_vs_fsync_bound`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Visible at once; durable after the next [`flush`](super::Table::flush).
    /// Until then the batch may sit in the table's in-memory buffer (up to
    /// [`StoreConfig::buffer_ops`](super::StoreConfig::buffer_ops) operations,
    /// appended to the log when full, at a flush, or when the last handle of
    /// the table is dropped): a crash can lose it.
    Buffered,
    /// **Process-crash-safe**: the batch (with any buffered writes before
    /// it) is appended to the table's log file as one record before `apply`
    /// returns — one `pwrite`, no sync. It survives the process being
    /// killed (the operating system has the bytes), not a power cut or a
    /// kernel crash. For a host that keeps its own write-ahead log and can
    /// replay its filter writes after a power cut; a later
    /// [`flush`](super::Table::flush) or `Durable` apply makes it
    /// power-cut-safe too.
    ProcessCrashSafe,
    /// **Power-cut-safe**: as `ProcessCrashSafe`, then the log is
    /// `fdatasync`ed before `apply` returns. Concurrent durable batches of
    /// a table share one sync (group commit).
    Durable,
}

/// One operation of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BatchOp {
    pub insert: bool,
    pub start: usize,
    pub end: usize,
}

/// Inserts and removes to apply to one table, in order, all or nothing.
///
/// Keys are copied into one buffer, so building a batch costs one copy per
/// key and no allocation per key. A batch may be applied to any table (it is
/// hashed with that table's seed when applied) and applied again.
///
/// # Examples
/// ```
/// use filterstore::{Durability, FilterStore, TableSpec, WriteBatch};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut batch = WriteBatch::with_capacity(2, 16);
/// batch.insert(b"order:1").insert(b"order:2").remove(b"order:1");
/// assert_eq!(batch.len(), 3);
/// let ops: Vec<(bool, &[u8])> = batch.iter().collect();
/// assert_eq!(ops[2], (false, &b"order:1"[..]));
///
/// let dir = tempfile::tempdir()?;
/// let store = FilterStore::open(dir.path())?;
/// let t = store.create_table("orders", TableSpec::new(1_000, 0.01))?;
/// t.apply(&batch, Durability::Durable)?; // in order: order:1 in, order:2 in, order:1 out
/// assert_eq!(t.live_keys(), 1);
/// assert!(t.contains(b"order:2"));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
pub struct WriteBatch {
    pub(crate) bytes: Vec<u8>,
    pub(crate) ops: Vec<BatchOp>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        WriteBatch::default()
    }

    /// An empty batch with room for `ops` operations of `key_bytes` bytes in all.
    pub fn with_capacity(ops: usize, key_bytes: usize) -> Self {
        WriteBatch {
            bytes: Vec::with_capacity(key_bytes),
            ops: Vec::with_capacity(ops),
        }
    }

    fn push(&mut self, insert: bool, key: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(key);
        self.ops.push(BatchOp {
            insert,
            start,
            end: self.bytes.len(),
        });
    }

    /// Adds an insert of `key`.
    pub fn insert(&mut self, key: &[u8]) -> &mut Self {
        self.push(true, key);
        self
    }

    /// Adds a remove of `key`. When the batch is applied, a remove of a key
    /// whose counters include a zero (never inserted) refuses the whole batch.
    pub fn remove(&mut self, key: &[u8]) -> &mut Self {
        self.push(false, key);
        self
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch has no operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Removes every operation, keeping the memory.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ops.clear();
    }

    /// The operations: `(is_insert, key)`.
    pub fn iter(&self) -> impl Iterator<Item = (bool, &[u8])> {
        self.ops
            .iter()
            .map(|op| (op.insert, &self.bytes[op.start..op.end]))
    }
}
