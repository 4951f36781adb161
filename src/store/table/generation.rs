//! One table generation: its parameters, bit filter, files and writer,
//! opened from disk or built by a regeneration, and retired by the next.

use super::fold::scan_chunks;
use super::replay::{replay_log, short_of_claim};
use super::state::{Journal, Writer};
use crate::filter::bloom::BitFilter;
use crate::filter::counting::{nibble, COUNTER_BLOCK_BYTES};
use crate::filter::params::FilterParams;
use crate::store::budget::{self, Reservation};
use crate::store::catalog::TableMeta;
use crate::store::disk::chunks::store_block_words;
use crate::store::disk::chunks::{self as pages, CHUNK_BLOCKS};
use crate::store::disk::log::{LogFile, LogSync};
use crate::store::disk::log_read;
use crate::store::disk::pagefile::{Owner, PageFile};
use crate::store::disk::table_files;
use crate::store::disk::{create_files, io_err, page_err};
use crate::store::error::StoreError;
use crate::store::shared::Shared;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

/// One generation of a table: its parameters, bit filter, files and write
/// path. A regeneration builds a new one beside it and swaps it in
/// ([`TableInner::gen`](super::TableInner)); the old one is then
/// *retired*: writes that find it retired retry on the new one.
///
/// Its methods live in four files of `store/table/`: here, loading,
/// creating and filling it, reading its counters, retiring it;
/// `writer.rs`, the write path (checks, the log record, the fold, the
/// flush); `bulk.rs`, a bulk load's counters written straight into its
/// pages; `background.rs`, a fold in the background and taking its result
/// in.
pub(crate) struct Generation {
    pub(crate) meta: TableMeta,
    pub(crate) params: FilterParams,
    pub(crate) bits: BitFilter,
    /// The budget reservation of `bits`.
    _memory: Reservation,
    pub(crate) shared: Arc<Shared>,
    pub(crate) writer: Mutex<Writer>,
    /// Syncs the log outside the writer lock (group commit).
    pub(super) log_sync: Arc<LogSync>,
    pub(super) live: AtomicI64,
    pub(super) pending: AtomicU64,
    pub(super) dropped: AtomicBool,
    /// Replaced by a newer generation (set under the writer lock).
    pub(crate) retired: AtomicBool,
    /// Why the generation lost acknowledged writes, if its open found that
    /// it did ([`Generation::load`]): its lookups answer "maybe", its writes
    /// are refused.
    pub(crate) damaged: Option<String>,
}

/// Puts the counters of chunk `idx` into the buffer (see
/// [`Generation::fill`]).
pub(crate) type ChunkSource<'a> = dyn FnMut(u64, &mut Vec<u8>) -> Result<(), StoreError> + 'a;

/// The owner check of a table generation's page file.
pub(crate) fn owner(meta: &TableMeta) -> Owner {
    Owner {
        table_id: meta.id,
        generation: meta.generation,
    }
}

/// Writes `chunks` (chunk index, counters; all-zero chunks skipped) into the
/// other slots of `pages` and commits them as one fold with `live` live
/// keys, the log to start at record `folded_seq`. Returns the saturated
/// counters written.
pub(crate) fn commit_chunks(
    pages: &mut PageFile,
    shared: &Shared,
    mut chunks: impl FnMut(
        &mut dyn FnMut(u64, &[u8]) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>,
    folded_seq: u64,
    live: i64,
) -> Result<u64, StoreError> {
    use crate::store::disk::pagefile::CommitError;
    let mut saturated = 0;
    let mut fold = pages.begin_fold();
    chunks(&mut |idx, counters| {
        saturated += nibble::count_saturated(counters);
        if counters.iter().all(|&b| b == 0) {
            return Ok(());
        }
        fold.write_chunk(idx, counters)
            .map_err(io_err("writing counter pages"))
    })?;
    match fold.commit(folded_seq, live, 0) {
        Ok(()) => Ok(saturated),
        Err(CommitError::Before(e)) => Err(io_err("syncing counter pages")(e)),
        Err(CommitError::After(e)) => {
            Err(shared.failed_with(io_err("committing counter pages")(e)))
        }
    }
}

/// Opens the page file and the log of generation `meta` (for writing
/// unless the store is read-only).
fn open_files(
    shared: &Shared,
    meta: &TableMeta,
    params: FilterParams,
) -> Result<(PageFile, File), StoreError> {
    let name = &meta.name;
    let write = !shared.read_only;
    let (pages_path, log_path) = table_files(&shared.dir, meta.id, meta.generation);
    let pages = match PageFile::open(&pages_path, params, owner(meta), write) {
        Err(crate::store::disk::pagefile::PageError::Io(e))
            if e.kind() == std::io::ErrorKind::NotFound =>
        {
            return Err(missing(name, "page file", e))
        }
        other => other.map_err(page_err(name, "opening a table"))?,
    };
    let log_file = File::options()
        .read(true)
        .write(write)
        .open(&log_path)
        .map_err(|e| missing(name, "log", e))?;
    Ok((pages, log_file))
}

/// The log is written back from the start of the page that holds its first
/// byte not known durable: the records before it in that page were durable,
/// but the page was written again since (appends share it), and a write
/// that failed may leave any part of it unknown on the disk.
const PAGE: u64 = 4096;

/// Makes durable what a writing open read and will build on, before the
/// table takes a write: in the same boot, a failed sync (of this process or
/// of the one before) may have left pages that the page cache shows and
/// the disk never got (see [`rewrite`](crate::store::disk::io::rewrite));
/// a write appended after them and synced would be lost with them at a
/// power cut (the log would have a hole, a superblock would expect a log
/// that a cut took). In this order:
///
/// 1. the superblock in force ([`PageFile::make_durable`]): the log's cut
///    below depends on which records it folded;
/// 2. the log: cut back to its prefix of whole records in sequence (see
///    [`log`](crate::store::disk::log)) and its records from the last one
///    known durable on ([`log_read::Scanned::durable_bytes`]) written back,
///    then synced (`fsync`, for the size too).
///
/// Returns the number below which every record of the log is now durable.
/// An error changed nothing the files say: the open fails, and an open
/// that succeeds later does all of it again.
fn make_durable(
    pages: &PageFile,
    log_file: &File,
    s: &log_read::Scanned,
) -> Result<u64, StoreError> {
    use crate::store::disk::io;
    pages
        .make_durable()
        .map_err(io_err("syncing a table's superblock at open"))?;
    let len = log_file
        .metadata()
        .map_err(io_err("opening a table"))?
        .len();
    let from = s.durable_bytes - s.durable_bytes % PAGE;
    if len == s.end && from >= s.end {
        return Ok(s.next_seq);
    }
    (|| {
        // Shorter than the superblock's `log_start` (a cut took the size of
        // records a fold in the background had folded): the log starts
        // there all the same.
        if len != s.end {
            log_file.set_len(s.end)?;
        }
        io::rewrite(log_file, from, s.end)?;
        io::sync_all(log_file)
    })()
    .map_err(io_err("syncing a table's log at open"))?;
    Ok(s.next_seq)
}

/// A table file named by the catalog that is not there.
fn missing(table: &str, what: &'static str, e: std::io::Error) -> StoreError {
    if e.kind() == std::io::ErrorKind::NotFound {
        StoreError::corrupt(
            format!("{what} of table {table:?}"),
            crate::error::CodecError::InvalidField {
                field: what,
                reason: "the file is missing".into(),
            },
        )
    } else {
        StoreError::Io {
            op: "opening a table",
            source: e,
        }
    }
}

/// Derives `bits` from the chunks of `pages` with the sorted log
/// `entries` applied; returns the saturated counters a writing store counts
/// (what its chunks hold: a fold adds what the log saturates when it applies
/// it) or, when `write` is false, the absolute ones (a read-only store never
/// folds).
fn derive_bits(
    pages: &PageFile,
    params: &FilterParams,
    name: &str,
    entries: &[pages::Entry],
    bits: &BitFilter,
    write: bool,
) -> Result<u64, StoreError> {
    let mut absolute_saturated = 0;
    let disk_saturated = scan_chunks(pages, params, name, entries, |idx, c| {
        absolute_saturated += nibble::count_saturated(c);
        for (i, block) in c.chunks_exact(COUNTER_BLOCK_BYTES).enumerate() {
            store_block_words(bits, idx * CHUNK_BLOCKS + i as u64, block);
        }
    })?;
    Ok(if write {
        disk_saturated
    } else {
        absolute_saturated
    })
}

/// One bit per block: the blocks the log `entries` touch.
fn dirty_blocks(params: &FilterParams, entries: &[pages::Entry]) -> Vec<u64> {
    let mut dirty = vec![0u64; params.num_blocks().div_ceil(64) as usize];
    for e in entries {
        let b = pages::entry_block(params.layout(), e);
        dirty[(b / 64) as usize] |= 1 << (b % 64);
    }
    dirty
}

impl Generation {
    /// Opens generation `meta.generation` of a table: reads its superblock,
    /// replays its log, derives the bit filter from the chunks and the log.
    /// A writing open then makes what it read durable ([`make_durable`]:
    /// the superblock in force, the log cut back to its prefix of whole
    /// records and the records not known durable written back, synced),
    /// unless what lies past the prefix says that records the log had made
    /// durable are lost, or belong to another log
    /// ([`log_read::check_tail`]), or the prefix ends before the record
    /// the superblock in force says the log was durable up to (a log cut
    /// short: [`short_of_claim`]): then nothing is written (every later
    /// open must find the same evidence), and the generation is
    /// *damaged*: its bit filter has every bit set, so that every lookup
    /// answers "maybe" (never a false negative for a key whose record was
    /// lost), and it refuses writes until a regeneration replaces it
    /// ([`StoreError::NeedsRegeneration`]).
    pub(crate) fn load(shared: &Arc<Shared>, meta: TableMeta) -> Result<Generation, StoreError> {
        let params = meta.params()?;
        let name = meta.name.clone();
        let write = !shared.read_only;
        let binding = shared.binding(&meta);
        let (pages, log_file) = open_files(shared, &meta, params)?;
        let sb = pages.superblock().clone();
        let mut replayed = replay_log(&log_file, binding, &params, &sb, &name)?;
        let damaged = log_read::check_tail(&log_file, &replayed.scanned, binding)
            .map_err(|e| StoreError::corrupt(format!("log of table {name:?}"), e))?
            .or_else(|| short_of_claim(&sb, &replayed.scanned));
        let s = replayed.scanned;
        // What a reader or a damaged generation (which never appends) takes
        // as durable: what the records say, or the page file holds.
        let mut durable = sb.folded_seq.max(s.claimed);
        if write && damaged.is_none() {
            durable = make_durable(&pages, &log_file, &s)?;
        }
        let (bits, memory) = budget::bit_filter(&name, params)?;
        pages::sort_entries(&mut replayed.entries);
        let saturated = derive_bits(&pages, &params, &name, &replayed.entries, &bits, write)?;
        if damaged.is_some() {
            bits.set_all();
        }
        let writer = Writer {
            buffer: Vec::new(),
            log_ops: s.ops,
            dirty: dirty_blocks(&params, &replayed.entries),
            materialized: HashMap::new(),
            live: sb.live_keys + replayed.delta,
            folded_live: sb.live_keys,
            saturated,
            journal: Journal::default(),
            pages,
            log: LogFile::new(log_file, binding, (s.end, s.next_seq), durable),
            background: None,
            fold_here: false,
        };
        let mut g = Generation::assemble(shared, meta, params, bits, memory, writer);
        g.damaged = damaged;
        Ok(g)
    }

    /// Creates the files of a new, empty generation `meta` (the page file
    /// with superblock 0, an empty log, both synced with their directory)
    /// and the generation over them, whose bit filter `bits` (all zeros) is
    /// held under `memory`. Nothing names the files until the caller's
    /// catalog commit; a crash before it leaves garbage for the next open.
    pub(crate) fn create(
        shared: &Arc<Shared>,
        meta: TableMeta,
        bits: BitFilter,
        memory: Reservation,
    ) -> Result<Generation, StoreError> {
        let params = meta.params()?;
        let (pages, log) = create_files(&shared.dir, owner(&meta), params)?;
        let writer = Writer::empty(params, pages, log, 0, 0);
        Ok(Generation::assemble(
            shared, meta, params, bits, memory, writer,
        ))
    }

    /// Fills a generation just created (all zeros, nothing named it yet)
    /// with counters: `next_chunk(idx, buf)` puts chunk `idx`'s counters
    /// (`blocks_in_chunk · 256` bytes) into `buf`, for every chunk in order;
    /// they are written into the page file and committed as one fold with
    /// `live` live keys, and the bits are derived from them.
    pub(crate) fn fill(
        &self,
        live: i64,
        next_chunk: &mut ChunkSource<'_>,
    ) -> Result<(), StoreError> {
        let mut w = self.writer.lock();
        let params = self.params;
        let mut buf = Vec::new();
        let saturated = commit_chunks(
            &mut w.pages,
            &self.shared,
            |write| {
                for idx in 0..pages::chunk_count(&params) {
                    buf.clear();
                    next_chunk(idx, &mut buf)?;
                    for (i, block) in buf.chunks_exact(COUNTER_BLOCK_BYTES).enumerate() {
                        store_block_words(&self.bits, idx * CHUNK_BLOCKS + i as u64, block);
                    }
                    write(idx, &buf)?;
                }
                Ok(())
            },
            0,
            live,
        )?;
        w.live = live;
        w.folded_live = live;
        w.saturated = saturated;
        self.live.store(live, Ordering::Relaxed);
        Ok(())
    }

    /// A generation from its parts, neither dropped nor retired.
    pub(crate) fn assemble(
        shared: &Arc<Shared>,
        meta: TableMeta,
        params: FilterParams,
        bits: BitFilter,
        memory: Reservation,
        writer: Writer,
    ) -> Generation {
        Generation {
            meta,
            params,
            bits,
            _memory: memory,
            shared: Arc::clone(shared),
            log_sync: Arc::clone(writer.log.sync()),
            live: AtomicI64::new(writer.live),
            pending: AtomicU64::new(writer.log_ops),
            writer: Mutex::new(writer),
            dropped: AtomicBool::new(false),
            retired: AtomicBool::new(false),
            damaged: None,
        }
    }

    /// Folds the log unless the store is read-only (whose log stays as it
    /// is: readers apply it in memory). A damaged generation refuses.
    pub(crate) fn fold_if_writable(&self, w: &mut Writer) -> Result<(), StoreError> {
        self.check_sound()?;
        if self.shared.read_only {
            return Ok(());
        }
        self.fold(w)
    }

    /// Refuses what needs exact counters or writes to the files of a
    /// damaged generation ([`Generation::load`]).
    pub(crate) fn check_sound(&self) -> Result<(), StoreError> {
        match &self.damaged {
            None => Ok(()),
            Some(reason) => Err(StoreError::NeedsRegeneration {
                table: self.meta.name.clone(),
                reason: reason.clone(),
            }),
        }
    }

    /// The absolute counters (`m/2` bytes, reserved under the memory budget
    /// for `why`): the chunks with the log file's records applied (none
    /// after a fold). The buffer is not included: callers fold first, or
    /// are read-only and have none.
    pub(crate) fn read_counters_with_log(
        &self,
        w: &Writer,
        why: &str,
    ) -> Result<(Vec<u8>, Reservation), StoreError> {
        self.check_sound()?;
        let name = &self.meta.name;
        let mut replayed = replay_log(
            w.log.file(),
            w.log.binding(),
            &self.params,
            w.pages.superblock(),
            name,
        )?;
        pages::sort_entries(&mut replayed.entries);
        let total = crate::filter::counting::counter_bytes(&self.params);
        let (mut counters, memory) = budget::zeroed(
            || format!("the counters of table {name:?} for {why}"),
            total,
        )?;
        let chunk_bytes = (pages::CHUNK_COUNTERS / 2) as usize;
        scan_chunks(&w.pages, &self.params, name, &replayed.entries, |idx, c| {
            let at = idx as usize * chunk_bytes;
            counters[at..at + c.len()].copy_from_slice(c);
        })?;
        Ok((counters, memory))
    }

    /// Calls `put` with the absolute counters of every chunk in order (all
    /// zeros for chunks never written): the chunks with the log file's
    /// records applied (none after a fold). One chunk in memory at a time,
    /// plus the log's entries (a read-only store's unfolded log).
    pub(crate) fn stream_counters(
        &self,
        w: &Writer,
        put: &mut dyn FnMut(&[u8]) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.check_sound()?;
        let name = &self.meta.name;
        let mut replayed = replay_log(
            w.log.file(),
            w.log.binding(),
            &self.params,
            w.pages.superblock(),
            name,
        )?;
        pages::sort_entries(&mut replayed.entries);
        let mut runs = pages::by_chunk(self.params.layout(), &replayed.entries).peekable();
        let mut buf = Vec::new();
        for idx in 0..pages::chunk_count(&self.params) {
            w.pages
                .read_chunk(idx, &mut buf)
                .map_err(page_err(name, "reading counter pages"))?;
            if let Some((_, run)) = runs.next_if(|(c, _)| *c == idx) {
                pages::apply_entries(&self.params, &mut buf, idx, run);
            }
            put(&buf)?;
        }
        Ok(())
    }

    /// Retires this generation for a newer one; `w` is its writer, locked.
    /// Its buffered operations were journaled into the new generation, so
    /// they are discarded (and never written into the old files, which are
    /// about to be deleted).
    pub(crate) fn retire(&self, w: &mut Writer) {
        self.settle_fold(w, true);
        w.buffer.clear();
        w.journal.stop();
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

    /// Marks the table dropped; afterwards no write touches its files.
    pub(crate) fn mark_dropped(&self) {
        let mut w = self.writer.lock();
        self.settle_fold(&mut w, true);
        self.dropped.store(true, Ordering::Release);
    }
}

impl Drop for Generation {
    /// Appends buffered writes to the log (no sync): they survive the
    /// process, not a power cut. Durability is promised only by a flush or
    /// a durable apply. Then, unless nothing may be written, says how far
    /// the log was durable where a truncation of the log cannot erase it:
    /// the page file's superblock, if records were synced since the one in
    /// force was written ([`PageFile::claim_durable`]: a commit that changes
    /// nothing else; a cut in it leaves the copy in force, which claims
    /// less); and seals the log ([`LogFile::seal`]: a record that says the
    /// same, so that a record synced last that rots is not taken for a
    /// torn tail).
    fn drop(&mut self) {
        {
            // A fold in the background stops at its next chunk; what it
            // committed is taken in (its log bytes freed).
            let mut w = self.writer.lock();
            self.settle_fold(&mut w, true);
        }
        let _ = self.write_pending();
        if self.shared.check_writable().is_ok()
            && self.damaged.is_none()
            && !self.dropped.load(Ordering::Acquire)
        {
            let w = self.writer.get_mut();
            // Read before the superblock is written: every record it
            // counts was synced before.
            let synced = w.log.sync().synced_seq();
            let _ = w.pages.claim_durable(synced);
            let _ = w.log.seal();
        }
    }
}
