//! The log fold: reading a generation's log records, folding them into its
//! counter chunks, and scanning the chunks merged with the log (which derives
//! the bit filter on open).

use super::super::error::StoreError;
use super::super::keys::{CHUNK_PREFIX, LOG_PREFIX, STATE_KEY};
use super::super::pages::{self, CHUNK_BLOCKS, MAX_PASS_OPS};
use super::super::wal::{self, MAX_RECORD_OPS};
use super::generation::sled_err;
use crate::codec::frame::Kind;
use crate::codec::meta;
use crate::filter::counting::{nibble, COUNTER_BLOCK_BYTES};
use crate::filter::params::FilterParams;
use serde::{Deserialize, Serialize};

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
    pub(super) fn read(tree: &sled::Tree, table: &str) -> Result<GenerationState, StoreError> {
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
            .map_err(|e| StoreError::encode(format!("state record of table {table:?}"), e))
    }
}

/// What [`scan_absolute`] learnt from the log.
pub(super) struct Derived {
    /// Blocks with logged operations (sorted, distinct).
    pub(super) dirty_blocks: Vec<u64>,
    /// Logged operations.
    pub(super) log_ops: u64,
    /// Logged inserts minus removes.
    pub(super) live_delta: i64,
    /// One past the last record's sequence number (0 without records).
    pub(super) next_seq: u64,
    /// Saturated counters in the chunks on disk (the log not applied: a fold
    /// counts the saturations the log adds when it applies them).
    pub(super) disk_saturated: u64,
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
pub(super) fn fold_log(
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
pub(super) fn read_chunk(
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
pub(super) fn scan_absolute(
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
