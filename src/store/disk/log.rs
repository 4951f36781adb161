//! The log of a table generation: an append-only file of checksummed
//! records, each holding whole batches of key hashes (17 bytes per
//! operation: the op code and the 128-bit hash), numbered in sequence.
//! Reading it: [`log_read`](super::log_read).
//!
//! # Recovery is a prefix, by construction
//! A record is one frame (`docs/FORMAT.md` §2, kind `LogRecord`, body §10)
//! whose body starts with its sequence number and (store format 4) the
//! table id and generation it belongs to. Reading the log after a crash
//! starts at the byte the page file's superblock names (`log_start`: 0
//! unless a fold ran in the background, `docs/FORMAT.md` § 10) and takes
//! records while each one is whole (its frame's
//! CRC holds), belongs to this log, and carries the next sequence number
//! expected (the first one is the page file's `folded_seq`); the first
//! record that is not ends the log. So what is recovered is always a prefix
//! of what was appended: a record torn by a power cut, a hole where the
//! operating system had not written a page back, or a record left from
//! before the log was emptied (its number is smaller) ends it, and nothing
//! after such a gap is applied. A record becomes durable when an
//! `fdatasync` of the file returns after it was written
//! ([`LogSync::sync_to`]); that sync covers every record before it too, so
//! every durable record is inside the prefix — unless a durable record is
//! damaged later (it rots, a file is copied over it). The records after it
//! would then be dropped with it, as a torn tail is, though they were
//! acknowledged. So each record also says how far the log was durable when
//! it was appended (`synced_below`): a whole record found past the prefix
//! that says records of the gap were durable, or a record of another table
//! or generation, is damage, and the table is not opened as if it were a
//! tail ([`check_tail`](super::log_read::check_tail)).
//!
//! A writing open cuts the file back to the prefix (and syncs that) before
//! it appends, unless the tail is damage: a record left beyond it from
//! before the crash could otherwise line up with a new one and be taken for
//! its successor. It also writes back and syncs the records of the prefix
//! not known durable (from the last one whose `synced_below` is its own
//! number): after a failed sync the page cache may show records the disk
//! never got, and a record appended after them would be lost with them
//! (`Generation::load`).
//!
//! After a fold has made every record durable in the page file (its
//! superblock names the next sequence number), the file is emptied
//! ([`LogFile::reset`]); that need not be synced, since a record left from
//! before carries a smaller number than the first one expected. A fold in
//! the background folds a prefix of the records while appends go on: its
//! superblock names where the rest starts, and the folded bytes are punched
//! out ([`sys::punch_prefix`](super::sys::punch_prefix)) instead.

use super::io::{le_u32, le_u64, write_all_at};
use crate::codec::frame::{self, Kind};
use crate::codec::reader::ByteReader;
use crate::error::CodecError;
use crate::filter::hash::KeyHash;
use parking_lot::Mutex;
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub(crate) use super::log_sync::LogSync;
use std::sync::Arc;

/// Bytes per operation in a record.
const OP_BYTES: usize = 17;
/// Bytes of a record body before the operations in a store of format 4:
/// count, reserved, sequence, table id, generation, synced below.
const HEADER: usize = 40;
/// The same in a store of format 3: count, reserved, sequence.
const HEADER_V3: usize = 16;
/// The most operations one record (hence one batch) may carry: 1,048,576
/// (17 MiB). Larger batches are refused with a typed error.
pub const MAX_RECORD_OPS: usize = 1 << 20;
/// The longest record body a reader accepts.
pub(super) const MAX_BODY: u64 = (HEADER + MAX_RECORD_OPS * OP_BYTES) as u64;

/// One logged operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LogOp {
    /// `true` for an insert, `false` for a remove.
    pub insert: bool,
    /// The key's hash under the table generation's hash spec.
    pub hash: KeyHash,
}

/// Whose records a log holds, and so the layout of their bodies
/// (`docs/FORMAT.md` §10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Binding {
    /// Store format 4: every record names the table and the generation it
    /// belongs to (a record of another log is refused, never applied), and
    /// the number below which every record of the log was durable when it
    /// was appended (how a lost record that was synced is told from a torn
    /// tail: [`check_tail`]).
    ///
    /// [`check_tail`]: super::log_read::check_tail
    Bound { table_id: u64, generation: u64 },
    /// Store format 3: records name neither. Read by a read-only open of a
    /// store of that format and by its migration, which also empties the
    /// log through it (`migrations/steps/v3_to_v4.rs`).
    Unbound,
}

impl Binding {
    /// Bytes of a record body before its operations.
    pub(super) fn header(self) -> usize {
        match self {
            Binding::Bound { .. } => HEADER,
            Binding::Unbound => HEADER_V3,
        }
    }

    /// Whether a record whose body starts with `head` belongs to this log.
    pub(super) fn owns(self, head: &RecordHead) -> bool {
        match self {
            Binding::Bound {
                table_id,
                generation,
            } => head.owner == Some((table_id, generation)),
            Binding::Unbound => true,
        }
    }
}

/// The fields of a record body before its operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecordHead {
    /// Operations in the record.
    pub count: u64,
    /// Its sequence number.
    pub seq: u64,
    /// The table id and generation it names (store format 4).
    pub owner: Option<(u64, u64)>,
    /// Every record numbered below this was durable when this one was
    /// appended (store format 4; 0 in format 3).
    pub synced_below: u64,
}

/// Encodes record `seq` holding `ops`, of a log bound by `binding` whose
/// records below `synced_below` are durable.
#[cfg(test)]
pub(crate) fn encode(seq: u64, binding: Binding, synced_below: u64, ops: &[LogOp]) -> Vec<u8> {
    encode_parts(seq, binding, synced_below, ops, &[])
}

/// Encodes record `seq` holding the operations of `first`, then of `then`.
fn encode_parts(
    seq: u64,
    binding: Binding,
    synced_below: u64,
    first: &[LogOp],
    then: &[LogOp],
) -> Vec<u8> {
    let count = first.len() + then.len();
    let mut body = Vec::with_capacity(binding.header() + count * OP_BYTES);
    body.extend_from_slice(&(count as u32).to_le_bytes());
    body.extend_from_slice(&[0u8; 4]);
    body.extend_from_slice(&seq.to_le_bytes());
    if let Binding::Bound {
        table_id,
        generation,
    } = binding
    {
        body.extend_from_slice(&table_id.to_le_bytes());
        body.extend_from_slice(&generation.to_le_bytes());
        body.extend_from_slice(&synced_below.to_le_bytes());
    }
    for op in first.iter().chain(then) {
        body.push(if op.insert { 1 } else { 2 });
        body.extend_from_slice(&op.hash.h1.to_le_bytes());
        body.extend_from_slice(&op.hash.h2.to_le_bytes());
    }
    frame::encode(Kind::LogRecord, 0, &body)
}

/// The fields before the operations of `body` (at least the binding's
/// header long).
pub(super) fn head(body: &[u8], binding: Binding) -> RecordHead {
    let bound = matches!(binding, Binding::Bound { .. });
    RecordHead {
        count: u64::from(le_u32(body, 0)),
        seq: le_u64(body, 8),
        owner: bound.then(|| (le_u64(body, 16), le_u64(body, 24))),
        synced_below: if bound { le_u64(body, 32) } else { 0 },
    }
}

/// Decodes a record's body (its frame already checked), calling `f` with
/// each operation in order; returns its sequence number and op count. The
/// count is checked against the bytes present before anything is done.
pub(crate) fn decode_body(
    body: &[u8],
    binding: Binding,
    mut f: impl FnMut(LogOp),
) -> Result<(u64, usize), CodecError> {
    let header = binding.header();
    if body.len() < header {
        return Err(CodecError::Truncated {
            needed: header as u64,
            found: body.len() as u64,
        });
    }
    let mut r = ByteReader::new(body);
    let count = r.u32()? as usize;
    r.reserved::<4>()?;
    let seq = r.u64()?;
    if header == HEADER {
        // Table id, generation, synced below: read by `head`.
        r.take(24)?;
    }
    let expected = header as u64 + count as u64 * OP_BYTES as u64;
    if expected != body.len() as u64 {
        return Err(CodecError::InvalidField {
            field: "log op_count",
            reason: format!("{count} ops need {expected} bytes, body has {}", body.len()),
        });
    }
    decode_ops(&mut r, count, &mut f)?;
    r.finish()?;
    Ok((seq, count))
}

/// Reads `count` operations (17 bytes each) from `r`, calling `f` with
/// each, then checks that nothing is left: the operations of a log record
/// of every store format (§10, §11). The bytes of all of them are taken
/// at once and each operation is read from its 17-byte slice, `f` called
/// directly (a fold reads every logged operation twice: field by field
/// through the reader and a `dyn` call per operation, this was 9 ns per
/// operation, a quarter of a fold's CPU besides its I/O).
pub(crate) fn decode_ops(
    r: &mut ByteReader<'_>,
    count: usize,
    mut f: impl FnMut(LogOp),
) -> Result<(), CodecError> {
    let bytes = r.take(count as u64 * OP_BYTES as u64)?;
    for op in bytes.chunks_exact(OP_BYTES) {
        let insert = match op[0] {
            1 => true,
            2 => false,
            code => {
                return Err(CodecError::InvalidField {
                    field: "log op code",
                    reason: format!("{code}, expected 1 (insert) or 2 (remove)"),
                })
            }
        };
        let word = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&op[at..at + 8]);
            u64::from_le_bytes(w)
        };
        f(LogOp {
            insert,
            hash: KeyHash {
                h1: word(1),
                h2: word(9),
            },
        });
    }
    Ok(())
}

/// The log of a table generation, appended to under the table's writer
/// lock.
#[derive(Debug)]
pub(crate) struct LogFile {
    file: Arc<File>,
    binding: Binding,
    /// Bytes of records in the file (where the next one goes).
    end: u64,
    /// Position of byte 0 of the file (module docs of [`LogSync`]).
    base: u64,
    /// Sequence number of the next record.
    next_seq: u64,
    /// The `synced_below` of the last record in the file.
    last_claim: u64,
    sync: Arc<LogSync>,
}

impl LogFile {
    /// The log in `file` of the generation `binding` names, whose records in
    /// sequence end at byte `end` with record `next_seq` next; everything up
    /// to `end` counts as written and synced for [`LogSync::sync_to`] (the
    /// caller synced it: a writing open writes back and syncs what it read,
    /// a new log is empty; a reader or a damaged table never appends), and records below
    /// `durable` are known durable (after that sync, all of them; for a
    /// reader, those the page file holds, below its `folded_seq`, and those
    /// a record read says were durable when it was appended:
    /// [`Scanned::claimed`](super::log_read::Scanned::claimed)).
    pub(crate) fn new(
        file: File,
        binding: Binding,
        (end, next_seq): (u64, u64),
        durable: u64,
    ) -> LogFile {
        let file = Arc::new(file);
        LogFile {
            sync: Arc::new(LogSync {
                file: Arc::clone(&file),
                written: AtomicU64::new(end),
                written_seq: AtomicU64::new(next_seq),
                synced: AtomicU64::new(end),
                synced_seq: AtomicU64::new(durable),
                lock: Mutex::new(()),
                failed: AtomicBool::new(false),
            }),
            file,
            binding,
            end,
            base: 0,
            next_seq,
            last_claim: durable,
        }
    }

    /// Appends record `ops` (not synced); returns the position after it.
    #[cfg(test)]
    pub(crate) fn append(&mut self, ops: &[LogOp]) -> io::Result<u64> {
        self.append_parts(ops, &[])
    }

    /// Appends one record holding the operations of `first`, then of
    /// `then` (not synced); returns the position after it. On an error
    /// nothing was appended: the next record goes where this one would have
    /// (over whatever part of it reached the file, which is cut back as far
    /// as the disk lets it), and the record's number is not used. The
    /// record says how far the log is durable now: a later reader that
    /// finds it after a gap knows whether the gap held durable records.
    pub(crate) fn append_parts(&mut self, first: &[LogOp], then: &[LogOp]) -> io::Result<u64> {
        let claim = self.sync.synced_seq.load(Ordering::Acquire);
        let record = encode_parts(self.next_seq, self.binding, claim, first, then);
        if let Err(e) = write_all_at(&self.file, &record, self.end) {
            let _ = self.file.set_len(self.end);
            return Err(e);
        }
        self.end += record.len() as u64;
        self.next_seq += 1;
        self.last_claim = claim;
        let pos = self.base + self.end;
        self.sync.written.store(pos, Ordering::Release);
        self.sync
            .written_seq
            .store(self.next_seq, Ordering::Release);
        Ok(pos)
    }

    /// Appends an empty record (not synced) if the log was made durable
    /// past what its last record says: on a clean close, so that a record
    /// synced last, which rots while the store is closed, is found missing
    /// instead of taken for a torn tail ([`check_tail`]). Format 4 only.
    ///
    /// [`check_tail`]: super::log_read::check_tail
    pub(crate) fn seal(&mut self) -> io::Result<()> {
        if self.binding == Binding::Unbound
            || self.sync.synced_seq.load(Ordering::Acquire) <= self.last_claim
        {
            return Ok(());
        }
        self.append_parts(&[], &[]).map(drop)
    }

    /// Empties the log after a fold made all its records durable in the
    /// page file (every position so far counts as durable), and starts it
    /// again with an empty record numbered as the superblock's first
    /// expected one: a log that starts with a record numbered *above* what
    /// the superblock in force expects is the sign of a newer superblock
    /// lost to damage ([`first_seq`]), not of a cut (not synced: a cut may
    /// leave the file empty, or as it was).
    ///
    /// [`first_seq`]: super::log_read::first_seq
    pub(crate) fn reset(&mut self) -> io::Result<()> {
        self.base += self.end;
        self.end = 0;
        self.sync.synced.fetch_max(self.base, Ordering::AcqRel);
        self.sync.written.fetch_max(self.base, Ordering::AcqRel);
        self.sync
            .synced_seq
            .fetch_max(self.next_seq, Ordering::AcqRel);
        self.file.set_len(0)?;
        self.append_parts(&[], &[]).map(drop)
    }

    /// Starts writing back the bytes from `from` to the end of the records
    /// without waiting ([`start_writeback`](super::sys::start_writeback)):
    /// a durable apply's `fdatasync` after it then waits for less.
    pub(crate) fn start_writeback(&self, from: u64) {
        super::sys::start_writeback(&self.file, from, self.end.saturating_sub(from));
    }

    /// The byte of the file where the next record goes.
    pub(crate) fn end(&self) -> u64 {
        self.end
    }

    /// The sequence number of the next record.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The file, for reading its records.
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// Whose records the log holds.
    pub(crate) fn binding(&self) -> Binding {
        self.binding
    }

    /// The durability bookkeeping, for syncing outside the writer lock.
    pub(crate) fn sync(&self) -> &Arc<LogSync> {
        &self.sync
    }
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
