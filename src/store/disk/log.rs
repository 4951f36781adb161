//! The log of a table generation: an append-only file of checksummed
//! records, each holding whole batches of key hashes (17 bytes per
//! operation: the op code and the 128-bit hash), numbered in sequence.
//!
//! # Recovery is a prefix, by construction
//! A record is one frame (`docs/FORMAT.md` §2, kind `LogRecord`, body §10)
//! whose body starts with its sequence number. Reading the log after a
//! crash starts at byte 0 and takes records while each one is whole (its
//! frame's CRC holds) and carries the next sequence number expected (the
//! first one is the page file's `folded_seq`); the first record that is not
//! ends the log. So what is recovered is always a prefix of what was
//! appended: a record torn by a power cut, a hole where the operating
//! system had not written a page back, or a record left from before the
//! log was emptied (its number is smaller) ends it, and nothing after such a
//! gap is applied. A record becomes durable when an `fdatasync` of the file
//! returns after it was written ([`LogFile::sync_to`]); that sync covers
//! every record before it too, so every durable record is inside the
//! prefix.
//!
//! A writing open cuts the file back to the prefix (and syncs that) before
//! it appends: a record left beyond it from before the crash could
//! otherwise line up with a new one and be taken for its successor.
//!
//! After a fold has made every record durable in the page file (its
//! superblock names the next sequence number), the file is emptied
//! ([`LogFile::reset`]); that need not be synced, since a record left from
//! before carries a smaller number than the first one expected.

use super::io::{le_u32, le_u64, read_up_to, write_all_at};
use crate::codec::frame::{self, Kind};
use crate::codec::reader::ByteReader;
use crate::error::CodecError;
use crate::filter::hash::KeyHash;
use parking_lot::Mutex;
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes per operation in a record.
const OP_BYTES: usize = 17;
/// Bytes of a record body before the operations: count, reserved, sequence.
const HEADER: usize = 16;
/// The most operations one record (hence one batch) may carry: 1,048,576
/// (17 MiB). Larger batches are refused with a typed error.
pub const MAX_RECORD_OPS: usize = 1 << 20;
/// The longest record body a reader accepts.
const MAX_BODY: u64 = (HEADER + MAX_RECORD_OPS * OP_BYTES) as u64;

/// One logged operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LogOp {
    /// `true` for an insert, `false` for a remove.
    pub insert: bool,
    /// The key's hash under the table generation's hash spec.
    pub hash: KeyHash,
}

/// Encodes record `seq` holding `ops`.
#[cfg(test)]
pub(crate) fn encode(seq: u64, ops: &[LogOp]) -> Vec<u8> {
    encode_parts(seq, ops, &[])
}

/// Encodes record `seq` holding the operations of `first`, then of `then`.
fn encode_parts(seq: u64, first: &[LogOp], then: &[LogOp]) -> Vec<u8> {
    let count = first.len() + then.len();
    let mut body = Vec::with_capacity(HEADER + count * OP_BYTES);
    body.extend_from_slice(&(count as u32).to_le_bytes());
    body.extend_from_slice(&[0u8; 4]);
    body.extend_from_slice(&seq.to_le_bytes());
    for op in first.iter().chain(then) {
        body.push(if op.insert { 1 } else { 2 });
        body.extend_from_slice(&op.hash.h1.to_le_bytes());
        body.extend_from_slice(&op.hash.h2.to_le_bytes());
    }
    frame::encode(Kind::LogRecord, 0, &body)
}

/// Decodes a record's body (its frame already checked), calling `f` with
/// each operation in order; returns its sequence number and op count. The
/// count is checked against the bytes present before anything is done.
pub(crate) fn decode_body(
    body: &[u8],
    mut f: impl FnMut(LogOp),
) -> Result<(u64, usize), CodecError> {
    if body.len() < HEADER {
        return Err(CodecError::Truncated {
            needed: HEADER as u64,
            found: body.len() as u64,
        });
    }
    let mut r = ByteReader::new(body);
    let count = r.u32()? as usize;
    r.reserved::<4>()?;
    let seq = r.u64()?;
    let expected = HEADER as u64 + count as u64 * OP_BYTES as u64;
    if expected != body.len() as u64 {
        return Err(CodecError::InvalidField {
            field: "log op_count",
            reason: format!("{count} ops need {expected} bytes, body has {}", body.len()),
        });
    }
    decode_ops(&mut r, count, &mut f)?;
    Ok((seq, count))
}

/// Reads `count` operations (17 bytes each) from `r`, calling `f` with
/// each, then checks that nothing is left: the operations of a log record
/// of every store format (§10, §11).
pub(crate) fn decode_ops(
    r: &mut ByteReader<'_>,
    count: usize,
    f: &mut dyn FnMut(LogOp),
) -> Result<(), CodecError> {
    for _ in 0..count {
        let insert = match r.u8()? {
            1 => true,
            2 => false,
            code => {
                return Err(CodecError::InvalidField {
                    field: "log op code",
                    reason: format!("{code}, expected 1 (insert) or 2 (remove)"),
                })
            }
        };
        let (h1, h2) = (r.u64()?, r.u64()?);
        f(LogOp {
            insert,
            hash: KeyHash { h1, h2 },
        });
    }
    r.finish()
}

/// What [`scan`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Scanned {
    /// Bytes of the prefix of whole records in sequence.
    pub end: u64,
    /// The number of the record after the last one taken.
    pub next_seq: u64,
    /// Operations in the records taken.
    pub ops: u64,
    /// Whether the scan stopped at `limit` operations, not at the end.
    pub stopped: bool,
}

/// Reads the log's records in order from byte 0, starting at sequence number
/// `first_seq`, calling `f` with every operation, until the prefix of whole
/// records in sequence ends (module docs) or, before a record that would
/// pass it, `limit` operations were read. A record whose frame is whole but
/// whose body is not a valid record is corruption, not a tear: an error.
pub(crate) fn scan(
    file: &File,
    first_seq: u64,
    limit: u64,
    mut f: impl FnMut(LogOp),
) -> Result<Scanned, CodecError> {
    let mut s = Scanned {
        end: 0,
        next_seq: first_seq,
        ops: 0,
        stopped: false,
    };
    let mut head = [0u8; frame::HEADER_LEN];
    let mut buf = Vec::new();
    loop {
        let got = read_up_to(file, &mut head, s.end).map_err(io_codec)?;
        if got < head.len() || head[..4] != frame::MAGIC || head[8] != Kind::LogRecord.id() {
            return Ok(s);
        }
        let len = le_u64(&head, 12);
        if len > MAX_BODY || len < HEADER as u64 {
            return Ok(s);
        }
        // The count is in the first bytes of the body: a record that would
        // pass the limit is not read.
        let total = frame::OVERHEAD as u64 + len;
        buf.resize(total as usize, 0);
        let got = read_up_to(file, &mut buf, s.end).map_err(io_codec)?;
        if got < buf.len() {
            return Ok(s);
        }
        let Ok(fr) = frame::decode_kind(&buf, Kind::LogRecord) else {
            return Ok(s);
        };
        let count = u64::from(le_u32(fr.body, 0));
        let seq = le_u64(fr.body, 8);
        if seq != s.next_seq {
            return Ok(s);
        }
        if s.ops > 0 && s.ops + count > limit {
            s.stopped = true;
            return Ok(s);
        }
        decode_body(fr.body, &mut f)?;
        s.ops += count;
        s.next_seq += 1;
        s.end += total;
    }
}

/// The number of the record at byte 0, if a whole record is there.
pub(crate) fn first_seq(file: &File) -> Result<Option<u64>, CodecError> {
    let mut head = [0u8; frame::HEADER_LEN];
    if read_up_to(file, &mut head, 0).map_err(io_codec)? < head.len()
        || head[..4] != frame::MAGIC
        || head[8] != Kind::LogRecord.id()
    {
        return Ok(None);
    }
    let len = le_u64(&head, 12);
    if !(HEADER as u64..=MAX_BODY).contains(&len) {
        return Ok(None);
    }
    let mut buf = vec![0u8; frame::OVERHEAD + len as usize];
    if read_up_to(file, &mut buf, 0).map_err(io_codec)? < buf.len() {
        return Ok(None);
    }
    Ok(frame::decode_kind(&buf, Kind::LogRecord)
        .ok()
        .map(|f| le_u64(f.body, 8)))
}

fn io_codec(e: io::Error) -> CodecError {
    CodecError::InvalidField {
        field: "log file",
        reason: format!("could not be read: {e}"),
    }
}

/// Durability bookkeeping of one log, shared with the callers that sync it
/// outside the table's writer lock. Positions count every byte ever
/// appended to this log, across [`LogFile::reset`]s.
#[derive(Debug)]
pub(crate) struct LogSync {
    file: Arc<File>,
    /// Position up to which every record is written.
    written: AtomicU64,
    /// Position up to which every record is durable.
    synced: AtomicU64,
    /// One `fdatasync` at a time: a caller that waited finds its record
    /// synced by the one before it (group commit).
    lock: Mutex<()>,
    /// A sync failed: set under `lock`, never cleared (see [`LogSync::sync_to`]).
    failed: AtomicBool,
}

impl LogSync {
    /// Makes every record up to position `pos` durable: returns at once if
    /// it is, else syncs the file (once for every caller waiting).
    ///
    /// **A failure is sticky.** Linux reports a failed writeback to one
    /// `fdatasync` and may drop the pages it could not write; a later
    /// `fdatasync` then returns 0 without having written them ("fsyncgate";
    /// the kernel's errseq reports each error once per open file). So after
    /// one sync of this log failed, every position it had not made durable
    /// stays not durable: each later call for one fails too, among them a
    /// caller that was waiting for the failed sync (it would otherwise sync
    /// again, get 0, and report its record durable). Positions synced before
    /// the failure stay durable. Only reopening the store (which reads what
    /// the disk holds) starts a log afresh.
    pub(crate) fn sync_to(&self, pos: u64) -> io::Result<()> {
        if self.synced.load(Ordering::Acquire) >= pos {
            return Ok(());
        }
        let _one = self.lock.lock();
        if self.synced.load(Ordering::Acquire) >= pos {
            return Ok(());
        }
        if self.failed.load(Ordering::Acquire) {
            return Err(io::Error::other(
                "an earlier fdatasync of this log failed: the kernel may have dropped the pages \
                 it could not write, so no later sync can prove them durable",
            ));
        }
        let target = self.written.load(Ordering::Acquire);
        if let Err(e) = super::io::sync_data(&self.file) {
            self.failed.store(true, Ordering::Release);
            return Err(e);
        }
        self.synced.fetch_max(target, Ordering::AcqRel);
        Ok(())
    }

    /// Position up to which records are written.
    pub(crate) fn written(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }
}

/// The log of a table generation, appended to under the table's writer
/// lock.
#[derive(Debug)]
pub(crate) struct LogFile {
    file: Arc<File>,
    /// Bytes of records in the file (where the next one goes).
    end: u64,
    /// Position of byte 0 of the file (module docs of [`LogSync`]).
    base: u64,
    /// Sequence number of the next record.
    next_seq: u64,
    sync: Arc<LogSync>,
}

impl LogFile {
    /// The log in `file`, whose records in sequence end at byte `end` with
    /// record `next_seq` next; everything up to `end` counts as durable
    /// (the caller read it from disk, or synced it).
    pub(crate) fn new(file: File, end: u64, next_seq: u64) -> LogFile {
        let file = Arc::new(file);
        LogFile {
            sync: Arc::new(LogSync {
                file: Arc::clone(&file),
                written: AtomicU64::new(end),
                synced: AtomicU64::new(end),
                lock: Mutex::new(()),
                failed: AtomicBool::new(false),
            }),
            file,
            end,
            base: 0,
            next_seq,
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
    /// as the disk lets it), and the record's number is not used.
    pub(crate) fn append_parts(&mut self, first: &[LogOp], then: &[LogOp]) -> io::Result<u64> {
        let record = encode_parts(self.next_seq, first, then);
        if let Err(e) = write_all_at(&self.file, &record, self.end) {
            let _ = self.file.set_len(self.end);
            return Err(e);
        }
        self.end += record.len() as u64;
        self.next_seq += 1;
        let pos = self.base + self.end;
        self.sync.written.store(pos, Ordering::Release);
        Ok(pos)
    }

    /// Empties the log after a fold made all its records durable in the
    /// page file (every position so far counts as durable), and starts it
    /// again with an empty record numbered as the superblock's first
    /// expected one: a log that starts with a record numbered *above* what
    /// the superblock in force expects is the sign of a newer superblock
    /// lost to damage ([`first_seq`]), not of a cut (not synced: a cut may
    /// leave the file empty, or as it was).
    pub(crate) fn reset(&mut self) -> io::Result<()> {
        self.base += self.end;
        self.end = 0;
        self.sync.synced.fetch_max(self.base, Ordering::AcqRel);
        self.sync.written.fetch_max(self.base, Ordering::AcqRel);
        self.file.set_len(0)?;
        self.append_parts(&[], &[]).map(drop)
    }

    /// The sequence number of the next record.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The file, for reading its records.
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// The durability bookkeeping, for syncing outside the writer lock.
    pub(crate) fn sync(&self) -> &Arc<LogSync> {
        &self.sync
    }
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
