//! One table generation: the in-memory bit filter, the write path (log,
//! buffer, fold) and the derivation of the bits from disk on open.
//!
//! # State, and the invariant that keeps lookups exact
//! The *absolute* counters of the table are the counter chunks on disk with
//! every logged (and buffered) operation applied in log order. Each 512-counter
//! block is in one of three states:
//!
//! * **clean** — the chunk on disk is the truth;
//! * **dirty** — operations are pending in the log, and only inserts (a remove
//!   on a dirty block first folds the log, so a dirty block never has a
//!   pending remove); one bit per block in `Writer::dirty`;
//! * **materialized** — its absolute counters are held in memory
//!   (`Writer::materialized`, bounded), because a remove needed them; later
//!   operations on it are applied there too.
//!
//! The bit filter always equals "absolute counter ≠ 0", position by position:
//! an insert into a clean or dirty block sets its bits (a counter going up
//! never turns a bit off), and every change to a materialized block rewrites
//! the block's eight words from its counters. So a lookup needs neither I/O
//! nor a lock, and a key whose insert has returned stays visible until it is
//! removed.
//!
//! # Costs (measured by `cargo bench --bench store`)
//! An insert costs hashing, setting `k` bits, and 17 bytes appended to the
//! in-memory buffer; every [`StoreConfig::buffer_ops`] operations (or at a
//! durable apply, or a flush) the buffer becomes one sled insert. A remove
//! needs its block's counters: a cached copy, or one sled read of its chunk
//! (and, if the block is dirty, a fold first). A fold costs one read and one
//! write of each touched 16 KiB chunk and removes the folded log records, all in
//! one atomic sled batch.

use super::batch::{Durability, WriteBatch};
use super::catalog::{TableMeta, STORE_FORMAT_VERSION};
use super::config::StoreConfig;
use super::error::StoreError;
use super::keys::{CHUNK_PREFIX, LOG_PREFIX, STATE_KEY};
use super::pages::{self, CHUNK_BLOCKS, MAX_PASS_OPS};
use super::wal::{self, LogOp, MAX_RECORD_OPS};
use super::StoreInner;
use crate::codec::frame::Kind;
use crate::codec::meta;
use crate::filter::bloom::{BitFilter, BloomRead};
use crate::filter::counting::{counter_bytes, nibble, CountingFilter, COUNTER_BLOCK_BYTES};
use crate::filter::drift::ObservedFp;
use crate::filter::hash::positions;
use crate::filter::params::{FilterParams, Layout, BLOCK_BITS, WORDS_PER_BLOCK};
use arc_swap::ArcSwap;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

/// The most logged operations one fold pass takes (then it starts another
/// pass). One pass sorts at most this plus one record's operations, which
/// stays below the 23-bit operation index of the position entries.
pub(crate) const MAX_FOLD_OPS: u64 = MAX_PASS_OPS / 2;
const _: () = assert!(MAX_FOLD_OPS + MAX_RECORD_OPS as u64 <= MAX_PASS_OPS);

/// What a fold leaves behind, in one record per table generation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct GenerationState {
    /// Inserts minus removes folded into the counter chunks.
    pub(crate) live_keys: i64,
    /// Sequence number of the next log record.
    pub(crate) next_seq: u64,
}

impl GenerationState {
    fn read(tree: &sled::Tree, table: &str) -> Result<GenerationState, StoreError> {
        match tree
            .get(STATE_KEY)
            .map_err(|e| StoreError::sled("reading table state", e))?
        {
            None => Ok(GenerationState::default()),
            Some(v) => meta::decode(&v, Kind::TableState)
                .map(|(s, _)| s)
                .map_err(|e| StoreError::corrupt(format!("state record of table {table:?}"), e)),
        }
    }

    pub(crate) fn encode(&self, table: &str) -> Result<Vec<u8>, StoreError> {
        meta::encode(Kind::TableState, self)
            .map_err(|e| StoreError::corrupt(format!("state record of table {table:?}"), e))
    }
}

/// Statistics of one table, as printed by `filterstore stats`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TableStats {
    /// Table name.
    pub name: String,
    /// `"blocked"` or `"standard"`.
    pub layout: &'static str,
    /// Bits (and counters).
    pub m_bits: u64,
    /// Hash functions.
    pub k: u32,
    /// Hash algorithm name.
    pub hash: &'static str,
    /// Hash seed.
    pub seed: u64,
    /// Inserts minus removes (never negative).
    pub live_keys: u64,
    /// Keys the table was sized for.
    pub expected_keys: u64,
    /// False-positive rate the table was sized for.
    pub target_fp: f64,
    /// False-positive rate implied by the bits set now.
    pub estimated_fp: f64,
    /// Fraction of bits set.
    pub fill_ratio: f64,
    /// Counters stuck at 15 (each can only cause false positives).
    pub saturated_counters: u64,
    /// Generation of the table's data.
    pub generation: u64,
    /// Store format version.
    pub format_version: u32,
    /// Bytes of the in-memory bit filter.
    pub bit_bytes: u64,
    /// Bytes of the on-disk counting filter.
    pub counter_bytes: u64,
}

/// Mutable state of the write path, behind the table's writer lock.
pub(crate) struct Writer {
    /// Operations applied in memory and not yet written to sled.
    buffer: Vec<LogOp>,
    /// Operations in log records not yet folded.
    log_ops: u64,
    /// Sequence number of the next log record.
    next_seq: u64,
    /// One bit per block: pending inserts not reflected in `materialized`.
    dirty: Vec<u64>,
    /// Absolute counters of blocks that removes needed (256 bytes each).
    materialized: HashMap<u64, Box<[u8]>>,
    /// Inserts minus removes, everything included.
    live: i64,
    /// Inserts minus removes folded into the chunks.
    folded_live: i64,
    /// Saturated counters in the chunks (exact after a fold or an open).
    saturated: u64,
    /// While a regeneration runs: every operation staged since it started
    /// (see [`super::regen`]).
    pub(crate) journal: Option<Vec<LogOp>>,
}

impl Writer {
    #[inline]
    fn is_dirty(&self, block: u64) -> bool {
        self.dirty[(block / 64) as usize] & (1 << (block % 64)) != 0
    }
    #[inline]
    fn set_dirty(&mut self, block: u64) {
        self.dirty[(block / 64) as usize] |= 1 << (block % 64);
    }
}

/// One generation of a table: its parameters, bit filter, sled tree and
/// write path. A regeneration builds a new one beside it and swaps it in
/// ([`TableInner::gen`]); the old one is then *retired*: writes that find it
/// retired retry on the new one.
pub(crate) struct Generation {
    pub(crate) meta: TableMeta,
    pub(crate) params: FilterParams,
    pub(crate) bits: BitFilter,
    pub(crate) tree: sled::Tree,
    db: sled::Db,
    config: StoreConfig,
    pub(crate) writer: Mutex<Writer>,
    live: AtomicI64,
    pending: AtomicU64,
    dropped: AtomicBool,
    /// Replaced by a newer generation (set under the writer lock).
    pub(crate) retired: AtomicBool,
}

/// A handle to one table. Cheap to clone; `Send + Sync`: share it between
/// threads. Lookups read only the in-memory bit filter (no lock, no I/O);
/// writes to one table are serialised by a lock that lookups never take.
///
/// Ordering rule for the host database (see the [durability
/// contract](super#durability-contract)): make a key's insert durable
/// ([`flush`](Table::flush), or [`Durability::Durable`]) **before** committing
/// the record it protects, and commit a record's deletion **before** calling
/// [`remove`](Table::remove). Then a crash leaves only false positives.
#[derive(Clone)]
pub struct Table {
    pub(crate) inner: Arc<TableInner>,
    pub(crate) name: Arc<str>,
}

impl Table {
    pub(crate) fn new(inner: Arc<TableInner>) -> Table {
        let name = Arc::from(inner.meta.lock().name.as_str());
        Table { inner, name }
    }
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("name", &self.name)
            .field("params", &self.params())
            .finish()
    }
}

pub(crate) fn sled_err(op: &'static str) -> impl Fn(sled::Error) -> StoreError {
    move |e| StoreError::sled(op, e)
}

/// Sorted, deduplicated blocks of a key's positions, through `f`.
#[inline]
fn for_each_block(p: &FilterParams, op: &LogOp, mut f: impl FnMut(u64)) {
    match p.layout() {
        Layout::Blocked => f(crate::filter::hash::map_to_range(
            op.hash.h1,
            p.num_blocks(),
        )),
        Layout::Standard => {
            let mut last = u64::MAX;
            for &pos in positions(p.layout(), p.m(), p.k(), op.hash).as_slice() {
                let b = pos / BLOCK_BITS;
                if b != last {
                    f(b);
                    last = b;
                }
            }
        }
    }
}

/// What [`scan_absolute`] learnt from the log.
struct Derived {
    /// Blocks with logged operations (sorted, distinct).
    dirty_blocks: Vec<u64>,
    /// Logged operations.
    log_ops: u64,
    /// Logged inserts minus removes.
    live_delta: i64,
    /// One past the last record's sequence number (0 without records).
    next_seq: u64,
    /// Saturated counters in the chunks on disk (the log not applied: a fold
    /// counts the saturations the log adds when it applies them).
    disk_saturated: u64,
}

/// A prefix of the log, read by [`read_log`].
struct LogRead {
    ops: u64,
    delta: i64,
    next_seq: u64,
    /// Whether the whole log was read (not stopped by the limit).
    complete: bool,
}

/// Reads log records in order, turning their operations into position
/// entries, until the end or until `limit` operations have been read (whole
/// records only).
fn read_log(
    tree: &sled::Tree,
    params: &FilterParams,
    table: &str,
    limit: u64,
    entries: &mut Vec<pages::Entry>,
    keys: &mut Vec<sled::IVec>,
) -> Result<LogRead, StoreError> {
    let mut r = LogRead {
        ops: 0,
        delta: 0,
        next_seq: 0,
        complete: true,
    };
    for item in tree.scan_prefix([LOG_PREFIX]) {
        if r.ops >= limit {
            r.complete = false;
            break;
        }
        let (k, v) = item.map_err(sled_err("reading the log"))?;
        let seq = wal::seq_of(&k)
            .map_err(|e| StoreError::corrupt(format!("log key of table {table:?}"), e))?;
        r.next_seq = seq + 1;
        wal::decode(&v, |op| {
            pages::push_entries(params, r.ops, op, entries);
            r.ops += 1;
            r.delta += if op.insert { 1 } else { -1 };
        })
        .map_err(|e| StoreError::corrupt(format!("log record {seq} of table {table:?}"), e))?;
        keys.push(k);
    }
    Ok(r)
}

/// Folds the whole log of a generation into its chunks, in passes of at most
/// [`MAX_FOLD_OPS`] operations, each one atomic sled batch (chunks written,
/// records removed, state updated). A crash between passes leaves a shorter
/// log and chunks that reflect exactly the removed records.
fn fold_log(
    tree: &sled::Tree,
    params: &FilterParams,
    table: &str,
    state: &mut GenerationState,
    saturated: &mut u64,
) -> Result<(), StoreError> {
    let mut entries = Vec::new();
    let mut keys = Vec::new();
    loop {
        entries.clear();
        keys.clear();
        let log = read_log(tree, params, table, MAX_FOLD_OPS, &mut entries, &mut keys)?;
        if keys.is_empty() {
            return Ok(());
        }
        pages::sort_entries(&mut entries);
        let mut batch = sled::Batch::default();
        let mut sat = 0u64;
        for (chunk, run) in pages::by_chunk(params.layout(), &entries) {
            let mut counters = read_chunk(tree, params, table, chunk)?;
            sat += pages::apply_entries(params, &mut counters, chunk, run);
            batch.insert(
                &pages::chunk_key(chunk),
                pages::encode_chunk(chunk, &counters),
            );
        }
        for k in &keys {
            batch.remove(k);
        }
        let new_state = GenerationState {
            live_keys: state.live_keys + log.delta,
            next_seq: state.next_seq.max(log.next_seq),
        };
        batch.insert(STATE_KEY, new_state.encode(table)?);
        tree.apply_batch(batch)
            .map_err(sled_err("writing folded counter pages"))?;
        *state = new_state;
        *saturated += sat;
        if log.complete {
            return Ok(());
        }
    }
}

/// The absolute on-disk counters of chunk `idx` (zeros if never written).
fn read_chunk(
    tree: &sled::Tree,
    params: &FilterParams,
    table: &str,
    idx: u64,
) -> Result<Vec<u8>, StoreError> {
    match tree
        .get(pages::chunk_key(idx))
        .map_err(sled_err("reading a counter page"))?
    {
        Some(v) => pages::decode_chunk(&v, idx, params)
            .map(<[u8]>::to_vec)
            .map_err(|e| StoreError::corrupt(format!("counter page {idx} of table {table:?}"), e)),
        None => Ok(vec![
            0u8;
            pages::blocks_in_chunk(params, idx) as usize
                * COUNTER_BLOCK_BYTES
        ]),
    }
}

/// Scans every chunk of a generation merged with its log, calling
/// `f(chunk, absolute counters)` in chunk order for every chunk that is on
/// disk or touched by the log. Cost: one pass over `m/2` bytes of counters
/// plus the log — independent of how many operations the table has seen.
/// Returns `None`, having called `f` for nothing, when the log is longer than
/// one fold pass (it must be folded first, to bound memory).
fn scan_absolute(
    tree: &sled::Tree,
    params: &FilterParams,
    table: &str,
    mut f: impl FnMut(u64, &[u8]),
) -> Result<Option<Derived>, StoreError> {
    let mut entries = Vec::new();
    let mut keys = Vec::new();
    let log = read_log(tree, params, table, MAX_FOLD_OPS, &mut entries, &mut keys)?;
    drop(keys);
    if !log.complete {
        return Ok(None);
    }
    pages::sort_entries(&mut entries);
    let mut runs = pages::by_chunk(params.layout(), &entries).peekable();
    let mut disk_saturated = 0;
    let mut buf = Vec::with_capacity(CHUNK_BLOCKS as usize * COUNTER_BLOCK_BYTES);
    let zero_chunk =
        |idx: u64, run: &[pages::Entry], buf: &mut Vec<u8>, f: &mut dyn FnMut(u64, &[u8])| {
            buf.clear();
            buf.resize(
                pages::blocks_in_chunk(params, idx) as usize * COUNTER_BLOCK_BYTES,
                0,
            );
            pages::apply_entries(params, buf, idx, run);
            f(idx, buf);
        };
    for item in tree.scan_prefix([CHUNK_PREFIX]) {
        let (k, v) = item.map_err(sled_err("reading counter pages"))?;
        let what = || format!("counter page {:?} of table {table:?}", &k[..]);
        let idx = pages::chunk_of_key(&k).map_err(|e| StoreError::corrupt(what(), e))?;
        let counters =
            pages::decode_chunk(&v, idx, params).map_err(|e| StoreError::corrupt(what(), e))?;
        disk_saturated += nibble::count_saturated(counters);
        while let Some((c, run)) = runs.next_if(|(c, _)| *c < idx) {
            zero_chunk(c, run, &mut buf, &mut f);
        }
        match runs.next_if(|(c, _)| *c == idx) {
            Some((_, run)) => {
                buf.clear();
                buf.extend_from_slice(counters);
                pages::apply_entries(params, &mut buf, idx, run);
                f(idx, &buf);
            }
            None => f(idx, counters),
        }
    }
    for (c, run) in runs {
        zero_chunk(c, run, &mut buf, &mut f);
    }
    let mut dirty_blocks: Vec<u64> = entries
        .iter()
        .map(|e| pages::entry_block(params.layout(), e))
        .collect();
    dirty_blocks.dedup();
    Ok(Some(Derived {
        dirty_blocks,
        log_ops: log.ops,
        live_delta: log.delta,
        next_seq: log.next_seq,
        disk_saturated,
    }))
}

/// Writes the eight words of block `b` from its 256 bytes of counters.
#[inline]
pub(crate) fn store_block_words(bits: &BitFilter, b: u64, counters: &[u8]) {
    let first = b as usize * WORDS_PER_BLOCK;
    for (w, c) in counters.chunks_exact(32).enumerate() {
        bits.store_word(first + w, pages::nonzero_word(c));
    }
}

impl Generation {
    /// Opens generation `meta.generation` of a table: derives the bit filter
    /// from the chunks and the log (see [`scan_absolute`]).
    pub(crate) fn load(
        db: &sled::Db,
        meta: TableMeta,
        config: StoreConfig,
    ) -> Result<Generation, StoreError> {
        let params = meta.params()?;
        let name = meta.name.clone();
        let tree = db
            .open_tree(meta.tree_name(meta.generation))
            .map_err(sled_err("opening a table"))?;
        let mut state = GenerationState::read(&tree, &name)?;
        let bits = BitFilter::new(params).map_err(|_| StoreError::OutOfMemory {
            table: name.clone(),
            bytes: params.bit_bytes(),
        })?;
        let derive = || {
            scan_absolute(&tree, &params, &name, |idx, counters| {
                for (i, block) in counters.chunks_exact(COUNTER_BLOCK_BYTES).enumerate() {
                    store_block_words(&bits, idx * CHUNK_BLOCKS + i as u64, block);
                }
            })
        };
        let derived = match derive()? {
            Some(d) => d,
            None => {
                // A log longer than one fold pass (left by failed folds) is
                // folded first, so that open's memory stays bounded.
                let mut ignored = 0;
                fold_log(&tree, &params, &name, &mut state, &mut ignored)?;
                derive()?.ok_or_else(|| StoreError::Storage {
                    op: "opening a table",
                    detail: "the log is still longer than one fold pass after folding".into(),
                })?
            }
        };
        let mut dirty = vec![0u64; params.num_blocks().div_ceil(64) as usize];
        for b in derived.dirty_blocks {
            dirty[(b / 64) as usize] |= 1 << (b % 64);
        }
        let live = state.live_keys + derived.live_delta;
        let writer = Writer {
            buffer: Vec::new(),
            log_ops: derived.log_ops,
            next_seq: state.next_seq.max(derived.next_seq),
            dirty,
            materialized: HashMap::new(),
            live,
            folded_live: state.live_keys,
            saturated: derived.disk_saturated,
            journal: None,
        };
        Ok(Generation::assemble(
            db,
            meta,
            config,
            params,
            bits,
            tree,
            writer,
            derived.log_ops,
        ))
    }

    /// A generation from its parts, neither dropped nor retired.
    #[allow(clippy::too_many_arguments)]
    fn assemble(
        db: &sled::Db,
        meta: TableMeta,
        config: StoreConfig,
        params: FilterParams,
        bits: BitFilter,
        tree: sled::Tree,
        writer: Writer,
        pending: u64,
    ) -> Generation {
        Generation {
            meta,
            params,
            bits,
            tree,
            db: db.clone(),
            config,
            live: AtomicI64::new(writer.live),
            writer: Mutex::new(writer),
            pending: AtomicU64::new(pending),
            dropped: AtomicBool::new(false),
            retired: AtomicBool::new(false),
        }
    }

    /// A generation whose tree holds exactly `bits`' counters, folded (no
    /// log): what a regeneration builds.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn built(
        db: &sled::Db,
        meta: TableMeta,
        config: StoreConfig,
        params: FilterParams,
        bits: BitFilter,
        tree: sled::Tree,
        live: i64,
        saturated: u64,
    ) -> Generation {
        let writer = Writer {
            buffer: Vec::new(),
            log_ops: 0,
            next_seq: 0,
            dirty: vec![0u64; params.num_blocks().div_ceil(64) as usize],
            materialized: HashMap::new(),
            live,
            folded_live: live,
            saturated,
            journal: None,
        };
        Generation::assemble(db, meta, config, params, bits, tree, writer, 0)
    }

    /// Retires this generation for a newer one; `w` is its writer, locked.
    /// Its buffered operations were journaled into the new generation, so
    /// they are discarded (and never written into the old tree, which is
    /// about to be deleted).
    pub(crate) fn retire(&self, w: &mut Writer) {
        w.buffer.clear();
        w.journal = None;
        self.retired.store(true, Ordering::Release);
        self.dropped.store(true, Ordering::Release);
    }

    /// Inserts minus removes, from the locked writer.
    pub(crate) fn live_keys_locked(&self, w: &Writer) -> u64 {
        w.live.max(0) as u64
    }

    pub(crate) fn check_live(&self) -> Result<(), StoreError> {
        if self.dropped.load(Ordering::Acquire) {
            return Err(StoreError::TableDropped(self.meta.name.clone()));
        }
        Ok(())
    }

    /// Marks the table dropped; afterwards no write touches its tree.
    pub(crate) fn mark_dropped(&self) {
        let _w = self.writer.lock();
        self.dropped.store(true, Ordering::Release);
    }

    /// The 256 bytes of absolute counters of clean block `b`, from disk,
    /// through `chunks`, which keeps the chunks read by one batch (a batch of
    /// removes often hits several blocks of one 16 KiB chunk).
    fn read_block(
        &self,
        b: u64,
        chunks: &mut HashMap<u64, Vec<u8>>,
    ) -> Result<Box<[u8]>, StoreError> {
        let chunk = b / CHUNK_BLOCKS;
        let counters = match chunks.entry(chunk) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(read_chunk(
                &self.tree,
                &self.params,
                &self.meta.name,
                chunk,
            )?),
        };
        let at = (b % CHUNK_BLOCKS) as usize * COUNTER_BLOCK_BYTES;
        Ok(counters[at..at + COUNTER_BLOCK_BYTES].into())
    }

    /// Applies `ops` in memory (bits, dirty map, materialized blocks, buffer),
    /// or refuses them all, changing nothing, if a remove finds a zero counter.
    fn stage(&self, w: &mut Writer, ops: &[LogOp]) -> Result<(), StoreError> {
        let p = &self.params;
        let has_remove = ops.iter().any(|o| !o.insert);
        // Blocks whose absolute counters this batch must work on: those of
        // removes, and materialized ones (kept exact).
        let mut scratch: HashMap<u64, Box<[u8]>> = HashMap::new();
        if has_remove {
            let mut needs_fold = false;
            for op in ops.iter().filter(|o| !o.insert) {
                for_each_block(p, op, |b| needs_fold |= w.is_dirty(b));
            }
            if needs_fold {
                self.fold(w)?;
            }
            let mut chunks = HashMap::new();
            for op in ops.iter().filter(|o| !o.insert) {
                let mut err = None;
                for_each_block(p, op, |b| {
                    if err.is_some() || scratch.contains_key(&b) {
                        return;
                    }
                    let block = match w.materialized.get(&b) {
                        Some(c) => Ok(c.clone()),
                        None => self.read_block(b, &mut chunks),
                    };
                    match block {
                        Ok(c) => {
                            scratch.insert(b, c);
                        }
                        Err(e) => err = Some(e),
                    }
                });
                if let Some(e) = err {
                    return Err(e);
                }
            }
        }
        if !w.materialized.is_empty() {
            for op in ops.iter().filter(|o| o.insert) {
                for_each_block(p, op, |b| {
                    if let (std::collections::hash_map::Entry::Vacant(slot), Some(c)) =
                        (scratch.entry(b), w.materialized.get(&b))
                    {
                        slot.insert(c.clone());
                    }
                });
            }
        }
        if !scratch.is_empty() {
            for (index, op) in ops.iter().enumerate() {
                let pos = positions(p.layout(), p.m(), p.k(), op.hash);
                if op.insert {
                    for &q in pos.as_slice() {
                        if let Some(c) = scratch.get_mut(&(q / BLOCK_BITS)) {
                            nibble::inc(c, (q % BLOCK_BITS) as usize);
                        }
                    }
                } else {
                    // Every block of a remove was loaded above.
                    let present = pos.as_slice().iter().all(|&q| {
                        scratch
                            .get(&(q / BLOCK_BITS))
                            .is_some_and(|c| nibble::get(c, (q % BLOCK_BITS) as usize) > 0)
                    });
                    if !present {
                        return Err(StoreError::NotPresent {
                            table: self.meta.name.clone(),
                            index,
                        });
                    }
                    for &q in pos.as_slice() {
                        if let Some(c) = scratch.get_mut(&(q / BLOCK_BITS)) {
                            nibble::dec(c, (q % BLOCK_BITS) as usize);
                        }
                    }
                }
            }
        }
        // Validated: from here on nothing fails. Commit to memory.
        w.buffer.extend_from_slice(ops);
        if let Some(journal) = &mut w.journal {
            journal.extend_from_slice(ops);
        }
        let mut delta = 0i64;
        for op in ops {
            if op.insert {
                delta += 1;
                if scratch.is_empty() {
                    for_each_block(p, op, |b| w.set_dirty(b));
                    self.bits.insert_hash(op.hash);
                } else {
                    for &q in positions(p.layout(), p.m(), p.k(), op.hash).as_slice() {
                        let b = q / BLOCK_BITS;
                        if !scratch.contains_key(&b) {
                            w.set_dirty(b);
                            self.bits.set_bit(q);
                        }
                    }
                }
            } else {
                delta -= 1;
            }
        }
        for (b, c) in scratch {
            store_block_words(&self.bits, b, &c);
            w.materialized.insert(b, c);
        }
        w.live += delta;
        self.live.store(w.live, Ordering::Relaxed);
        Ok(())
    }

    /// Writes the buffer as one log record (not flushed).
    fn write_buffer(&self, w: &mut Writer) -> Result<(), StoreError> {
        if w.buffer.is_empty() {
            return Ok(());
        }
        let record = wal::encode(&w.buffer);
        self.tree
            .insert(wal::log_key(w.next_seq), record)
            .map_err(sled_err("writing the log"))?;
        w.next_seq += 1;
        w.log_ops += w.buffer.len() as u64;
        w.buffer.clear();
        self.pending.store(w.log_ops, Ordering::Relaxed);
        Ok(())
    }

    /// Folds the buffer and the log into the counter chunks; afterwards every
    /// block is clean.
    pub(crate) fn fold(&self, w: &mut Writer) -> Result<(), StoreError> {
        self.write_buffer(w)?;
        if w.log_ops > 0 {
            let mut state = GenerationState {
                live_keys: w.folded_live,
                next_seq: w.next_seq,
            };
            let result = fold_log(
                &self.tree,
                &self.params,
                &self.meta.name,
                &mut state,
                &mut w.saturated,
            );
            // Passes that completed before an error are on disk: keep the
            // state they wrote. (The dirty map and log count stay as they
            // were; they are conservative until the next successful fold.)
            w.folded_live = state.live_keys;
            result?;
            w.log_ops = 0;
            self.pending.store(0, Ordering::Relaxed);
            w.dirty.fill(0);
        }
        w.materialized.clear();
        Ok(())
    }

    /// Applies `ops`; `Ok(false)`, having done nothing, when this generation
    /// was retired by a regeneration (the caller retries on the new one).
    fn apply_ops(&self, ops: &[LogOp], durability: Durability) -> Result<bool, StoreError> {
        {
            let mut w = self.writer.lock();
            if self.retired.load(Ordering::Acquire) {
                return Ok(false);
            }
            self.check_live()?;
            if !ops.is_empty() {
                // A batch never straddles two log records: write what is
                // buffered first if this batch would overflow it.
                if w.buffer.len() + ops.len() > self.config.buffer_ops {
                    self.write_buffer(&mut w)?;
                }
                self.stage(&mut w, ops)?;
            }
            if durability == Durability::Durable || w.buffer.len() >= self.config.buffer_ops {
                self.write_buffer(&mut w)?;
            }
            if w.log_ops >= self.config.fold_threshold_ops(&self.params)
                || w.materialized.len() > self.config.materialized_blocks
            {
                self.fold(&mut w)?;
            }
        }
        if durability == Durability::Durable {
            self.db.flush().map_err(sled_err("flushing"))?;
        }
        Ok(true)
    }

    /// Writes the buffer to sled (without flushing); used by the store-wide flush.
    pub(crate) fn write_pending(&self) -> Result<(), StoreError> {
        let mut w = self.writer.lock();
        if self.dropped.load(Ordering::Acquire) {
            return Ok(());
        }
        self.write_buffer(&mut w)
    }
}

impl Drop for Generation {
    /// Hands buffered writes to sled, which writes them within its flush
    /// interval. Durability is still only promised by `flush`.
    fn drop(&mut self) {
        let _ = self.write_pending();
    }
}

/// The shared state of one open table: the generation in force, swapped
/// atomically by a regeneration ([`arc_swap::ArcSwap`]: a lookup loads the
/// pointer without a lock and never waits), and what outlives generations.
pub(crate) struct TableInner {
    /// The generation in force.
    pub(crate) gen: ArcSwap<Generation>,
    /// The table's catalog record in force (`set` changes the target and the
    /// expected size without building a new generation).
    pub(crate) meta: Mutex<TableMeta>,
    /// The store (catalog, its lock, the health callback).
    pub(crate) store: Arc<StoreInner>,
    /// Feedback of the host about lookups of absent keys.
    pub(crate) observed: ObservedFp,
    /// One regeneration at a time per table.
    pub(crate) regen_lock: Mutex<()>,
    /// Writes and feedback reports since the last automatic health check.
    pub(crate) since_check: AtomicU64,
}

impl TableInner {
    /// Opens a table in its generation in force.
    pub(crate) fn load(store: &Arc<StoreInner>, meta: TableMeta) -> Result<TableInner, StoreError> {
        let gen = Generation::load(&store.db, meta.clone(), store.config)?;
        Ok(TableInner {
            gen: ArcSwap::from_pointee(gen),
            meta: Mutex::new(meta),
            store: Arc::clone(store),
            observed: ObservedFp::new(OBSERVED_WINDOW),
            regen_lock: Mutex::new(()),
            since_check: AtomicU64::new(0),
        })
    }

    /// Marks the table dropped; afterwards no write touches its trees. Called
    /// under the catalog lock, as every generation swap is, so the generation
    /// marked is the last one.
    pub(crate) fn mark_dropped(&self) {
        self.gen.load().mark_dropped();
    }

    /// Writes the buffer of the generation in force to sled (without flushing).
    pub(crate) fn write_pending(&self) -> Result<(), StoreError> {
        self.gen.load().write_pending()
    }

    fn apply_ops(
        self: &Arc<Self>,
        ops: &[LogOp],
        durability: Durability,
    ) -> Result<(), StoreError> {
        if ops.len() > MAX_RECORD_OPS {
            return Err(StoreError::BatchTooLarge {
                len: ops.len(),
                max: MAX_RECORD_OPS,
            });
        }
        // A generation is retired at most once per regeneration, so this
        // loop turns at most once per concurrent regeneration.
        while !self.gen.load_full().apply_ops(ops, durability)? {}
        self.count_for_check(ops.len() as u64);
        Ok(())
    }

    /// Counts writes and reports towards the next automatic health check,
    /// and runs it (outside any lock) when the interval is crossed.
    pub(crate) fn count_for_check(self: &Arc<Self>, n: u64) {
        // An atomic, not the hook's mutex: every write of every table passes here.
        if !self.store.has_regen_hook.load(Ordering::Relaxed) {
            return;
        }
        let before = self.since_check.fetch_add(n, Ordering::Relaxed);
        let interval = self.check_interval();
        if before + n >= interval
            && self
                .since_check
                .compare_exchange(before + n, 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            // A failed assessment (an I/O error) is not the writer's error:
            // the next interval tries again.
            let _ = super::regen::run_hook(self);
        }
    }

    /// Operations between automatic health checks: a check reads the whole
    /// bit filter (`m/8` bytes) and folds the log, so it is spread over at
    /// least an eighth of the capacity (and at least 4,096 operations):
    /// amortised, a few bytes read per write.
    fn check_interval(&self) -> u64 {
        (self.meta.lock().expected_keys / 8).max(4096)
    }
}

/// Trials per epoch of the observed false-positive window (see
/// [`ObservedFp`]): at a 1% target, 65,536 trials expect 655 false positives
/// (σ ≈ 25), enough to tell 1.25% from 1% by 10σ.
pub const OBSERVED_WINDOW: u64 = 1 << 16;

/// A read-only view of the bit filter of the generation in force: keeps it
/// alive (a regeneration may swap it out meanwhile).
struct BloomGuard(Arc<Generation>);

impl std::ops::Deref for BloomGuard {
    type Target = BitFilter;
    fn deref(&self) -> &BitFilter {
        &self.0.bits
    }
}

impl Table {
    /// The generation in force (a lock-free pointer load).
    #[inline]
    pub(crate) fn current(&self) -> arc_swap::Guard<Arc<Generation>> {
        self.inner.gen.load()
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The filter's parameters (layout, m, k, hash and seed) of the
    /// generation in force.
    pub fn params(&self) -> FilterParams {
        self.current().params
    }

    /// The table's catalog record in force.
    pub fn meta(&self) -> TableMeta {
        self.inner.meta.lock().clone()
    }

    /// The live bit filter of the generation in force, read-only: every
    /// [`BloomRead`] query and estimator without a lock or I/O.
    pub fn bloom(&self) -> impl std::ops::Deref<Target = impl BloomRead + Send + Sync> {
        BloomGuard(self.inner.gen.load_full())
    }

    /// Whether `key` may be in the table; `false` means definitely absent.
    /// Reads only memory: no lock, no I/O.
    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        self.current().bits.contains(key)
    }

    /// Batched [`contains`](Table::contains): overlaps the memory accesses of
    /// up to 16 keys.
    pub fn contains_many<K: AsRef<[u8]>>(&self, keys: &[K]) -> Vec<bool> {
        self.current().bits.contains_many(keys)
    }

    /// Inserts `key`: visible to lookups when this returns, durable after the
    /// next [`flush`](Table::flush).
    pub fn insert(&self, key: &[u8]) -> Result<(), StoreError> {
        // The hash does not depend on the generation: a regeneration keeps
        // the seed (see `regen`).
        let op = LogOp {
            insert: true,
            hash: self.params().hash().hash(key),
        };
        self.inner.apply_ops(&[op], Durability::Buffered)
    }

    /// Removes one occurrence of `key`, durable after the next
    /// [`flush`](Table::flush). Refused with [`StoreError::NotPresent`],
    /// changing nothing, if one of its counters is zero (it was never
    /// inserted). A host must remove only keys it inserted: a remove of a
    /// never-inserted key whose counters are all non-zero (a false positive)
    /// cannot be detected and would take counts from other keys.
    pub fn remove(&self, key: &[u8]) -> Result<(), StoreError> {
        let op = LogOp {
            insert: false,
            hash: self.params().hash().hash(key),
        };
        self.inner.apply_ops(&[op], Durability::Buffered)
    }

    /// Applies `batch` atomically: all of its operations, in order, or none
    /// (a refused remove refuses the batch). Visible when this returns;
    /// durable when it returns if `durability` is [`Durability::Durable`].
    pub fn apply(&self, batch: &WriteBatch, durability: Durability) -> Result<(), StoreError> {
        let spec = self.params().hash();
        let ops: Vec<LogOp> = batch
            .iter()
            .map(|(insert, key)| LogOp {
                insert,
                hash: spec.hash(key),
            })
            .collect();
        self.inner.apply_ops(&ops, durability)
    }

    /// Makes every write applied so far (to any table of the store) durable.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.inner.write_pending()?;
        self.inner.store.db.flush().map_err(sled_err("flushing"))?;
        Ok(())
    }

    /// Inserts minus removes, never negative. No lock.
    pub fn live_keys(&self) -> u64 {
        self.current().live.load(Ordering::Relaxed).max(0) as u64
    }

    /// Logged operations not yet folded into the counter pages. No lock.
    pub fn pending_log_ops(&self) -> u64 {
        self.current().pending.load(Ordering::Relaxed)
    }

    /// Folds the log into the counter pages now (it is otherwise folded when
    /// it reaches [`StoreConfig::fold_threshold`] operations). Does not flush.
    pub fn fold(&self) -> Result<(), StoreError> {
        let g = self.inner.gen.load_full();
        let mut w = g.writer.lock();
        g.check_live()?;
        g.fold(&mut w)
    }

    /// Statistics. Folds the log first, so that the count of saturated
    /// counters is exact; the estimates read the whole bit filter (`m/8` bytes).
    pub fn stats(&self) -> Result<TableStats, StoreError> {
        let g = self.inner.gen.load_full();
        let saturated = {
            let mut w = g.writer.lock();
            g.check_live()?;
            g.fold(&mut w)?;
            w.saturated
        };
        let p = &g.params;
        let m = self.meta();
        let bits = &g.bits;
        Ok(TableStats {
            name: m.name.clone(),
            layout: p.layout().name(),
            m_bits: p.m(),
            k: p.k(),
            hash: p.hash().algo.name(),
            seed: p.hash().seed,
            live_keys: g.live.load(Ordering::Relaxed).max(0) as u64,
            expected_keys: m.expected_keys,
            target_fp: m.target_fp,
            estimated_fp: bits.estimated_fp(),
            fill_ratio: bits.fill_ratio(),
            saturated_counters: saturated,
            generation: g.meta.generation,
            format_version: STORE_FORMAT_VERSION,
            bit_bytes: p.bit_bytes(),
            counter_bytes: counter_bytes(p) as u64,
        })
    }

    /// A copy of the table's counting filter (`m/2` bytes in memory, read from
    /// the counter pages after a fold): for export and for checks. The store
    /// itself never holds it.
    pub fn counting_snapshot(&self) -> Result<CountingFilter, StoreError> {
        let g = self.inner.gen.load_full();
        let _w = {
            let mut w = g.writer.lock();
            g.check_live()?;
            g.fold(&mut w)?;
            w
        };
        let p = g.params;
        let mut bytes = Vec::new();
        let total = counter_bytes(&p);
        bytes
            .try_reserve_exact(total)
            .map_err(|_| StoreError::OutOfMemory {
                table: g.meta.name.clone(),
                bytes: total as u64,
            })?;
        bytes.resize(total, 0);
        let chunk_bytes = CHUNK_BLOCKS as usize * COUNTER_BLOCK_BYTES;
        // The log is empty after the fold, so the scan is never refused.
        scan_absolute(&g.tree, &p, &g.meta.name, |idx, c| {
            let at = idx as usize * chunk_bytes;
            bytes[at..at + c.len()].copy_from_slice(c);
        })?;
        CountingFilter::from_bytes(p, bytes).map_err(|e| {
            StoreError::corrupt(
                format!("counters of table {:?}", g.meta.name),
                crate::error::CodecError::InvalidField {
                    field: "counters",
                    reason: e.to_string(),
                },
            )
        })
    }
}
