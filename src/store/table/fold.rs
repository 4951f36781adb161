//! The log fold: reading a generation's log, folding it into the counter
//! chunks of its page file, and scanning the chunks merged with the log
//! (which derives the bit filter on open).
//!
//! # A fold, and a cut in the middle of one
//! Under the table's writer lock, a fold reads every record of the log
//! (their operations become position entries, sorted by chunk), reads each
//! chunk they touch, applies them in log order, and writes the new chunk
//! into the chunk's other slot; then it commits: `fdatasync` of the page
//! file, the new superblock (naming the new slots, the next log record and
//! the live keys) into the copy not in force, `fdatasync` again
//! ([`disk::pagefile`](crate::store::disk::pagefile)). Only then is the log
//! emptied. A cut anywhere before the second sync returns leaves the old
//! superblock in force, every chunk it names untouched, and the whole log:
//! the table reopens as it was before the fold. A cut after it leaves the
//! new superblock, whose first expected log record is past every record the
//! fold read: those are never applied twice, whether or not the emptying of
//! the log reached the disk.
//!
//! A fold started by a write that reaches the fold threshold runs the same
//! steps on a thread of its own, over the records the log held when it
//! started, and commits a superblock that names where the next record
//! starts instead of emptying the log
//! ([`background`](super::background)).

use super::state::Writer;
use crate::filter::counting::nibble;
use crate::filter::params::FilterParams;
use crate::store::disk::chunks::{self as pages, MAX_PASS_OPS};
use crate::store::disk::log::{self, Binding, LogSync};
use crate::store::disk::log_read::{self, Span};
use crate::store::disk::pagefile::{CommitError, Fold, PageFile};
use crate::store::disk::{io_err, page_err};
use crate::store::error::StoreError;
use crate::store::shared::Shared;
use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};

/// What a fold changed.
pub(super) struct Folded {
    /// Inserts minus removes it folded.
    pub(super) delta: i64,
    /// Counters it saturated.
    pub(super) saturated: u64,
}

/// The records of a log that a fold reads: numbers `span.first_seq` up to
/// `span.until_seq` (not included), from byte `span.at` to byte `end`,
/// holding `ops` operations (what the writer appended: the fold checks that
/// it reads exactly that).
pub(super) struct Stretch<'a> {
    pub(super) file: &'a File,
    pub(super) binding: Binding,
    pub(super) span: Span,
    pub(super) end: u64,
    pub(super) ops: u64,
    /// The log's durability bookkeeping: the fold's superblock claims the
    /// records it says are durable ([`Fold::claim_durable`]).
    pub(super) sync: &'a LogSync,
}

/// The span of the whole log of the writer `w`: from the superblock's first
/// record to the last appended.
pub(super) fn whole_span(w: &Writer) -> Span {
    let sb = w.pages.superblock();
    Span {
        at: sb.log_start,
        first_seq: sb.folded_seq,
        until_seq: w.log.next_seq(),
    }
}

/// Folds the whole log of the generation whose writer is `w` (module docs).
/// An error before the commit changes nothing; an error of the commit whose
/// outcome is unknown stops the store's writes.
pub(super) fn fold_log(
    w: &mut Writer,
    params: &FilterParams,
    table: &str,
    shared: &Shared,
) -> Result<Folded, StoreError> {
    let stretch = Stretch {
        span: whole_span(w),
        end: w.log.end(),
        ops: w.log_ops,
        file: w.log.file(),
        binding: w.log.binding(),
        sync: w.log.sync(),
    };
    let folded = fold_stretch(&mut w.pages, &stretch, params, table, shared, 0, None)?;
    // Committed. A failure to empty the file leaves records that the
    // superblock's first expected number already skips.
    let _ = w.log.reset();
    Ok(folded)
}

/// Folds the records of `stretch` into the chunks of `pages` and commits
/// them, the log's next record (`stretch.span.until_seq`) to be read from
/// byte `log_start` on. An error before the commit changes nothing the
/// superblock in force names; an error of the commit whose outcome is
/// unknown stops the store's writes. A fold in the background stops, with
/// nothing committed, once `cancel` is set.
///
/// The log is read twice: once to count each chunk's entries, once to put
/// every entry in its chunk's place ([`pages::ByChunk`]: a counting sort,
/// stable, so each unit keeps the log's order); then each touched chunk is
/// read, updated and written once. Memory: the entries (16 bytes per
/// logged operation in the blocked layout, `16·k` in the others) and 8
/// bytes per chunk.
pub(super) fn fold_stretch(
    pages: &mut PageFile,
    stretch: &Stretch<'_>,
    params: &FilterParams,
    table: &str,
    shared: &Shared,
    log_start: u64,
    cancel: Option<&AtomicBool>,
) -> Result<Folded, StoreError> {
    let _memory = crate::store::budget::reserve(
        || format!("the fold of table {table:?}"),
        entry_bytes(params, stretch.ops).saturating_add(pages::ByChunk::memory(params)),
    )?;
    let mut grouped = pages::ByChunk::new(params);
    scan_log(stretch, table, shared, |op| grouped.count(op))?;
    grouped
        .start_placing()
        .map_err(|_| StoreError::OutOfMemory {
            table: table.to_string(),
            bytes: entry_bytes(params, stretch.ops),
        })?;
    let (mut n, mut delta) = (0u64, 0i64);
    let next_seq = scan_log(stretch, table, shared, |op| {
        grouped.place(n, op);
        n += 1;
        delta += if op.insert { 1 } else { -1 };
    })?;
    let Some(entries) = grouped.finish() else {
        return Err(shared.failed_with(StoreError::storage(
            "folding",
            format!("the log of table {table:?} changed while it was read"),
        )));
    };
    let live = pages.superblock().live_keys + delta;
    let mut saturated = 0;
    let mut fold = pages.begin_fold();
    let mut buf = Vec::new();
    for (chunk, run) in pages::by_chunk(params.layout(), &entries) {
        if cancel.is_some_and(|c| c.load(Ordering::Acquire)) {
            return Err(StoreError::storage("folding", "cancelled".into()));
        }
        fold.read_chunk(chunk, &mut buf)
            .map_err(page_err(table, "reading a counter page"))?;
        saturated += pages::apply_entries(params, &mut buf, chunk, run);
        crash_point()?;
        fold.write_chunk(chunk, &buf)
            .map_err(io_err("writing folded counter pages"))?;
    }
    commit(fold, (next_seq, live, log_start), stretch.sync, shared)?;
    Ok(Folded { delta, saturated })
}

/// Reads every record of `stretch`, calling `f` with each operation; checks
/// that the records the writer appended are all there.
fn scan_log(
    stretch: &Stretch<'_>,
    table: &str,
    shared: &Shared,
    f: impl FnMut(log::LogOp),
) -> Result<u64, StoreError> {
    let span = stretch.span;
    let scanned = log_read::scan_from(stretch.file, stretch.binding, span, MAX_PASS_OPS, f)
        .map_err(|e| StoreError::corrupt(format!("log of table {table:?}"), e))?;
    if scanned.next_seq != span.until_seq || scanned.end != stretch.end || scanned.stopped {
        // The records this writer appended are not all there: the file
        // changed under the store.
        return Err(shared.failed_with(StoreError::storage(
            "folding",
            format!(
                "the log of table {table:?} holds records {}..{} of {}..{}",
                span.first_seq, scanned.next_seq, span.first_seq, span.until_seq
            ),
        )));
    }
    Ok(scanned.next_seq)
}

/// Commits a fold whose chunks are written: the log's records up to
/// `next_seq` are then in the pages, with `live` live keys, and the log's
/// next record starts at byte `log_start`. The superblock also claims the
/// log's records that `sync` says are durable, read right before it is
/// written ([`Fold::commit_claiming`]): only records whose sync returned,
/// all of them in the log past `log_start` (a cut leaves them there).
fn commit(
    fold: Fold<'_>,
    (next_seq, live, log_start): (u64, i64, u64),
    sync: &LogSync,
    shared: &Shared,
) -> Result<(), StoreError> {
    crash_point()?;
    match fold.commit_claiming(next_seq, live, log_start, || sync.synced_seq()) {
        Ok(()) => Ok(()),
        Err(CommitError::Before(e)) => Err(io_err("syncing folded counter pages")(e)),
        Err(CommitError::After(e)) => Err(shared.failed_with(io_err("committing a fold")(e))),
    }
}

/// Bytes of position entries that `ops` logged operations take in a fold
/// or an open (`pages` module docs): 16 per operation in the blocked
/// layout, `16·k` in the standard layout.
pub(super) fn entry_bytes(params: &FilterParams, ops: u64) -> u64 {
    let per_op = match params.layout() {
        crate::filter::params::Layout::Blocked => 16,
        _ => 16 * u64::from(params.k()),
    };
    ops.saturating_mul(per_op)
}

#[cfg(test)]
thread_local! {
    /// Tests: the number of fold steps to let through before failing the
    /// next one (a crash between two writes, as far as the disk sees).
    pub(super) static WRITES_BEFORE_CRASH: std::cell::Cell<Option<u32>> =
        const { std::cell::Cell::new(None) };
}

/// Fails when a test's write budget (`WRITES_BEFORE_CRASH`, in test builds
/// only) is spent; outside tests, never fails.
pub(super) fn crash_point() -> Result<(), StoreError> {
    #[cfg(test)]
    if let Some(n) = WRITES_BEFORE_CRASH.get() {
        if n == 0 {
            return Err(StoreError::storage("folding", "simulated crash".into()));
        }
        WRITES_BEFORE_CRASH.set(Some(n - 1));
    }
    Ok(())
}

/// Calls `f(chunk, absolute counters)` in chunk order for every chunk that
/// was ever written or that the sorted log `entries` touch (the others are
/// all zeros): one pass over the page file, `m/2` bytes at most. Returns
/// the saturated counters of the chunks as written (the log not applied: a
/// fold counts what the log adds when it applies it).
pub(super) fn scan_chunks(
    pages_file: &PageFile,
    params: &FilterParams,
    table: &str,
    entries: &[pages::Entry],
    mut f: impl FnMut(u64, &[u8]),
) -> Result<u64, StoreError> {
    let mut runs = pages::by_chunk(params.layout(), entries).peekable();
    let mut disk_saturated = 0;
    let mut buf = Vec::new();
    let slots = pages_file.superblock().slots.clone();
    for (idx, slot) in slots.iter().enumerate() {
        let idx = idx as u64;
        let run = runs.next_if(|(c, _)| *c == idx).map(|(_, r)| r);
        if *slot == crate::store::disk::pagefile::Slot::None && run.is_none() {
            continue;
        }
        pages_file
            .read_chunk(idx, &mut buf)
            .map_err(page_err(table, "reading counter pages"))?;
        disk_saturated += nibble::count_saturated(&buf);
        if let Some(run) = run {
            pages::apply_entries(params, &mut buf, idx, run);
        }
        f(idx, &buf);
    }
    Ok(disk_saturated)
}
