//! The log fold: reading a generation's log records, folding them into its
//! counter chunks, and scanning the chunks merged with the log (which derives
//! the bit filter on open).

use super::super::engine;
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

/// `folded_below` of a state whose fold finished its chunks (and counted its
/// keys into `live_keys`).
pub(crate) const FOLDED_ALL: u64 = u64::MAX;

/// What a fold leaves behind, in one record per table generation
/// (`docs/FORMAT.md` §11). A fold writes one counter page per sled call (see
/// [`engine`](super::super::engine)), so while it runs, and after a crash in
/// the middle, the record says how far it got: log records numbered below
/// `folded_through` are already applied to every chunk below
/// `folded_below`, and, when `folded_below` is [`FOLDED_ALL`], to every
/// chunk and to `live_keys` (the records only wait to be removed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GenerationState {
    /// Inserts minus removes folded into the counter chunks.
    pub(crate) live_keys: i64,
    /// Sequence number of the next log record.
    pub(crate) next_seq: u64,
    /// Log records numbered below this are (partly) folded already.
    pub(crate) folded_through: u64,
    /// Chunks below this hold the records numbered below `folded_through`.
    pub(crate) folded_below: u64,
}

impl Default for GenerationState {
    fn default() -> Self {
        GenerationState {
            live_keys: 0,
            next_seq: 0,
            folded_through: 0,
            folded_below: FOLDED_ALL,
        }
    }
}

/// The record of a settled generation (no fold under way): format v1's shape.
#[derive(Serialize, Deserialize)]
struct SettledRecord {
    live_keys: i64,
    next_seq: u64,
}

/// The record while a fold is under way (format v2).
#[derive(Serialize, Deserialize)]
struct FoldingRecord {
    live_keys: i64,
    next_seq: u64,
    folded_through: u64,
    folded_below: u64,
}

impl GenerationState {
    /// A state `(live_keys, next_seq)` with no fold under way.
    pub(crate) fn settled(live_keys: i64, next_seq: u64) -> GenerationState {
        GenerationState {
            live_keys,
            next_seq,
            ..GenerationState::default()
        }
    }

    fn is_settled(&self) -> bool {
        self.folded_through == 0 && self.folded_below == FOLDED_ALL
    }

    pub(crate) fn read(tree: &engine::Tree, table: &str) -> Result<GenerationState, StoreError> {
        let Some(v) = tree
            .get(STATE_KEY)
            .map_err(|e| StoreError::sled("reading table state", e))?
        else {
            return Ok(GenerationState::default());
        };
        if let Ok((s, _)) = meta::decode::<SettledRecord>(&v, Kind::TableState) {
            return Ok(GenerationState::settled(s.live_keys, s.next_seq));
        }
        let (s, _) = meta::decode::<FoldingRecord>(&v, Kind::TableState)
            .map_err(|e| StoreError::corrupt(format!("state record of table {table:?}"), e))?;
        Ok(GenerationState {
            live_keys: s.live_keys,
            next_seq: s.next_seq,
            folded_through: s.folded_through,
            folded_below: s.folded_below,
        })
    }

    pub(crate) fn encode(&self, table: &str) -> Result<Vec<u8>, StoreError> {
        let encoded = if self.is_settled() {
            let record = SettledRecord {
                live_keys: self.live_keys,
                next_seq: self.next_seq,
            };
            meta::encode(Kind::TableState, &record)
        } else {
            let record = FoldingRecord {
                live_keys: self.live_keys,
                next_seq: self.next_seq,
                folded_through: self.folded_through,
                folded_below: self.folded_below,
            };
            meta::encode(Kind::TableState, &record)
        };
        encoded.map_err(|e| StoreError::encode(format!("state record of table {table:?}"), e))
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
    /// Keys of records a finished fold already holds (only their removal
    /// was interrupted): never applied again.
    stale: Vec<engine::IVec>,
}

/// Reads log records in order, turning their operations into position
/// entries, until the end or until `limit` operations have been read (whole
/// records only). Under `state`'s fold marks: records wholly folded are only
/// listed in `stale`; a fold that stopped among its chunks is resumed by
/// reading exactly its records, whose entries for the chunks it finished are
/// dropped.
fn read_log(
    tree: &engine::Tree,
    params: &FilterParams,
    table: &str,
    state: &GenerationState,
    limit: u64,
    entries: &mut Vec<pages::Entry>,
    keys: &mut Vec<engine::IVec>,
) -> Result<LogRead, StoreError> {
    let mut r = LogRead {
        ops: 0,
        delta: 0,
        next_seq: 0,
        complete: true,
        stale: Vec::new(),
    };
    let resuming = state.folded_below != FOLDED_ALL;
    for item in tree.scan_prefix([LOG_PREFIX]) {
        let (k, v) = item.map_err(sled_err("reading the log"))?;
        let seq = wal::seq_of(&k)
            .map_err(|e| StoreError::corrupt(format!("log key of table {table:?}"), e))?;
        if seq < state.folded_through && !resuming {
            r.next_seq = seq + 1;
            r.stale.push(k);
            continue;
        }
        if r.ops >= limit || (resuming && seq >= state.folded_through) {
            r.complete = false;
            break;
        }
        r.next_seq = seq + 1;
        wal::decode(&v, |op| {
            pages::push_entries(params, r.ops, op, entries);
            r.ops += 1;
            r.delta += if op.insert { 1 } else { -1 };
        })
        .map_err(|e| StoreError::corrupt(format!("log record {seq} of table {table:?}"), e))?;
        keys.push(k);
    }
    if resuming {
        let layout = params.layout();
        entries.retain(|e| pages::entry_chunk(layout, e) >= state.folded_below);
    }
    Ok(r)
}

/// Folds the whole log of a generation into its chunks, in passes of at most
/// [`MAX_FOLD_OPS`] operations. A pass writes each touched chunk in its own
/// sled call together with the state record marking the pass's progress,
/// then the state with the pass's keys counted, then removes the pass's
/// records and settles the state. A crash anywhere leaves chunks and marks
/// that say exactly which records each chunk holds ([`GenerationState`]);
/// the next fold resumes where it stopped.
pub(super) fn fold_log(
    tree: &engine::Tree,
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
        let log = read_log(
            tree,
            params,
            table,
            state,
            MAX_FOLD_OPS,
            &mut entries,
            &mut keys,
        )?;
        remove_records(tree, &log.stale)?;
        if keys.is_empty() {
            return settle(tree, table, state);
        }
        let through = if state.folded_below == FOLDED_ALL {
            log.next_seq
        } else {
            state.folded_through
        };
        pages::sort_entries(&mut entries);
        let pass = Pass {
            tree,
            params,
            table,
            through,
        };
        pass.write_pages(&entries, state, saturated)?;
        let folded = GenerationState {
            live_keys: state.live_keys + log.delta,
            next_seq: state.next_seq.max(log.next_seq),
            folded_through: through,
            folded_below: FOLDED_ALL,
        };
        crash_point()?;
        tree.insert(STATE_KEY, folded.encode(table)?)
            .map_err(sled_err("writing table state"))?;
        *state = folded;
        remove_records(tree, &keys)?;
        settle(tree, table, state)?;
        if log.complete {
            return Ok(());
        }
    }
}

#[cfg(test)]
thread_local! {
    /// Tests: the number of fold writes to let through before failing the
    /// next one (a crash between two sled calls, as far as the disk sees).
    pub(super) static WRITES_BEFORE_CRASH: std::cell::Cell<Option<u32>> =
        const { std::cell::Cell::new(None) };
}

/// Fails when a test's write budget ([`WRITES_BEFORE_CRASH`]) is spent.
fn crash_point() -> Result<(), StoreError> {
    #[cfg(test)]
    if let Some(n) = WRITES_BEFORE_CRASH.get() {
        if n == 0 {
            return Err(StoreError::storage("folding", "simulated crash".into()));
        }
        WRITES_BEFORE_CRASH.set(Some(n - 1));
    }
    Ok(())
}

/// One fold pass: its tree and the records it folds (numbered below
/// `through`).
struct Pass<'a> {
    tree: &'a engine::Tree,
    params: &'a FilterParams,
    table: &'a str,
    through: u64,
}

impl Pass<'_> {
    /// Writes each page the sorted `entries` touch, in one sled call with
    /// the state marking it done.
    fn write_pages(
        &self,
        entries: &[pages::Entry],
        state: &mut GenerationState,
        saturated: &mut u64,
    ) -> Result<(), StoreError> {
        let (tree, params, table) = (self.tree, self.params, self.table);
        for (chunk, run) in pages::by_chunk(params.layout(), entries) {
            let mut counters = read_chunk(tree, params, table, chunk)?;
            *saturated += pages::apply_entries(params, &mut counters, chunk, run);
            let mark = GenerationState {
                folded_through: self.through,
                folded_below: chunk + 1,
                ..*state
            };
            let mut batch = engine::Batch::default();
            batch.insert(
                pages::chunk_key(chunk),
                pages::encode_chunk(chunk, &counters),
            );
            batch.insert(STATE_KEY, mark.encode(table)?);
            crash_point()?;
            tree.apply_batch(batch)
                .map_err(sled_err("writing folded counter pages"))?;
            *state = mark;
        }
        Ok(())
    }
}

/// Removes folded log records, one sled call each.
fn remove_records(tree: &engine::Tree, keys: &[engine::IVec]) -> Result<(), StoreError> {
    for k in keys {
        crash_point()?;
        tree.remove(k)
            .map_err(sled_err("removing folded log records"))?;
    }
    Ok(())
}

/// Writes the settled form of a state whose folded records are all removed.
fn settle(tree: &engine::Tree, table: &str, state: &mut GenerationState) -> Result<(), StoreError> {
    if state.folded_below != FOLDED_ALL || state.folded_through == 0 {
        return Ok(());
    }
    let settled = GenerationState::settled(state.live_keys, state.next_seq);
    crash_point()?;
    tree.insert(STATE_KEY, settled.encode(table)?)
        .map_err(sled_err("writing table state"))?;
    *state = settled;
    Ok(())
}

/// The absolute on-disk counters of chunk `idx` (zeros if never written).
pub(super) fn read_chunk(
    tree: &engine::Tree,
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
    tree: &engine::Tree,
    params: &FilterParams,
    table: &str,
    state: &GenerationState,
    mut f: impl FnMut(u64, &[u8]),
) -> Result<Option<Derived>, StoreError> {
    let mut entries = Vec::new();
    let mut keys = Vec::new();
    let log = read_log(
        tree,
        params,
        table,
        state,
        MAX_FOLD_OPS,
        &mut entries,
        &mut keys,
    )?;
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
