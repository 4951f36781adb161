//! Reading a table generation's log: its records one by one, the prefix
//! of whole records in sequence that recovery takes ([`scan_from`]), and
//! what lies past it ([`check_tail`]). The record layout and why recovery
//! is a prefix: [`log`](super::log).

use super::io::{le_u64, read_up_to};
use super::log::{decode_body, head, Binding, LogOp, RecordHead, MAX_BODY};
use crate::codec::frame::{self, Kind};
use crate::error::CodecError;
use std::fs::File;
use std::io;

/// A whole record read by [`read_record`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record {
    pub head: RecordHead,
    /// Bytes of its frame.
    pub total: u64,
}

impl Record {
    /// Its body, in the buffer [`read_record`] filled.
    fn body(self, buf: &[u8]) -> &[u8] {
        &buf[frame::HEADER_LEN..self.total as usize - frame::TRAILER_LEN]
    }
}

/// Reads the record whose frame starts at byte `at` into `buf`: `None`
/// unless a whole frame of kind `LogRecord` is there, of a plausible length
/// (at least the binding's header, at most the largest record), whose CRC
/// holds.
pub(crate) fn read_record(
    file: &File,
    at: u64,
    binding: Binding,
    buf: &mut Vec<u8>,
) -> Result<Option<Record>, CodecError> {
    let mut head_bytes = [0u8; frame::HEADER_LEN];
    let got = read_up_to(file, &mut head_bytes, at).map_err(io_codec)?;
    if got < head_bytes.len()
        || head_bytes[..4] != frame::MAGIC
        || head_bytes[8] != Kind::LogRecord.id()
    {
        return Ok(None);
    }
    let len = le_u64(&head_bytes, 12);
    if len > MAX_BODY || len < binding.header() as u64 {
        return Ok(None);
    }
    let total = frame::OVERHEAD as u64 + len;
    buf.resize(total as usize, 0);
    if read_up_to(file, buf, at).map_err(io_codec)? < buf.len() {
        return Ok(None);
    }
    let Ok(fr) = frame::decode_kind(buf, Kind::LogRecord) else {
        return Ok(None);
    };
    Ok(Some(Record {
        head: head(fr.body, binding),
        total,
    }))
}

/// What [`scan_from`] found.
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
    /// The highest `synced_below` of the records taken (0 in format 3).
    pub claimed: u64,
    /// Bytes at the start of the prefix known durable: where the last
    /// record taken that says every record before it was durable (its
    /// `synced_below` is its own number) starts, or 0. The records from
    /// there on may be in the page cache only (a sync that covered them
    /// failed, or none did), however they read.
    pub durable_bytes: u64,
}

/// Where [`scan_from`] starts and stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    /// The byte where the first record starts (the superblock's
    /// `log_start`).
    pub at: u64,
    /// The number that record must carry (the superblock's `folded_seq`).
    pub first_seq: u64,
    /// The scan stops before the record with this number, if it gets there
    /// (`u64::MAX`: at the end of the prefix).
    pub until_seq: u64,
}

/// Reads the log's records in order from byte 0, starting at sequence number
/// `first_seq`, calling `f` with every operation, until the prefix of whole
/// records of this log (`binding`) in sequence ends (module docs) or, before
/// a record that would pass it, `limit` operations were read. A record whose
/// frame is whole but whose body is not a valid record is corruption, not a
/// tear: an error.
#[cfg(test)]
pub(crate) fn scan(
    file: &File,
    binding: Binding,
    first_seq: u64,
    limit: u64,
    f: impl FnMut(LogOp),
) -> Result<Scanned, CodecError> {
    let span = Span {
        at: 0,
        first_seq,
        until_seq: u64::MAX,
    };
    scan_from(file, binding, span, limit, f)
}

/// Reads the log's records in order from byte `span.at`, starting at sequence
/// number `span.first_seq`, calling `f` with every operation, until the prefix
/// of whole records of this log (`binding`) in sequence ends (module docs),
/// record `span.until_seq` is next, or the next record would take the
/// operations read past `limit` (`stopped`; never before the first record).
/// A record whose frame is whole but whose body is not a valid record is
/// corruption, not a tear: an error.
pub(crate) fn scan_from(
    file: &File,
    binding: Binding,
    span: Span,
    limit: u64,
    mut f: impl FnMut(LogOp),
) -> Result<Scanned, CodecError> {
    let mut s = Scanned {
        end: span.at,
        next_seq: span.first_seq,
        ops: 0,
        stopped: false,
        claimed: 0,
        durable_bytes: span.at,
    };
    let mut buf = Vec::new();
    while s.next_seq < span.until_seq {
        let Some(rec) = read_record(file, s.end, binding, &mut buf)? else {
            break;
        };
        if rec.head.seq != s.next_seq || !binding.owns(&rec.head) {
            break;
        }
        if s.ops > 0 && s.ops + rec.head.count > limit {
            s.stopped = true;
            break;
        }
        decode_body(rec.body(&buf), binding, &mut f)?;
        if binding != Binding::Unbound && rec.head.synced_below == rec.head.seq {
            s.durable_bytes = s.end;
        }
        s.ops += rec.head.count;
        s.next_seq += 1;
        s.end += rec.total;
        s.claimed = s.claimed.max(rec.head.synced_below);
    }
    Ok(s)
}

/// The number of the record at byte `at`, if a whole record of this log is
/// there.
pub(crate) fn first_seq(file: &File, at: u64, binding: Binding) -> Result<Option<u64>, CodecError> {
    Ok(read_record(file, at, binding, &mut Vec::new())?
        .filter(|r| binding.owns(&r.head))
        .map(|r| r.head.seq))
}

/// Bytes of the log read per step when looking past the prefix.
const TAIL_WINDOW: usize = 1 << 16;

/// Looks past the prefix that [`scan_from`] took for what says that the log lost
/// records it had made durable (store format 4; nothing in format 3): a
/// whole record of this log whose `synced_below` passes the end of the
/// prefix (records it says were durable are missing from it: a synced
/// record that rotted, or was overwritten), or a whole record of another
/// table or generation (a file copied or spliced in). Either is damage,
/// not a torn tail: the caller must not cut it away. Returns what was
/// found. Every byte after the prefix is a candidate start of a frame (a
/// damaged record's length cannot be trusted to find the next one): the
/// rest of the file is read once, in windows, plus each whole record found.
///
/// What this cannot see: a record that rots after the last sync that
/// covered it when no record appended after that sync survives (the log
/// then ends, as a torn tail would, before it), and a log cut short at a
/// record boundary. A clean close appends a record that covers the first
/// ([`LogFile::seal`]), and the
/// page file's superblock says how far the log was durable when it was
/// written (`Superblock::durable_seq`, by every fold and a clean close):
/// a prefix that ends before that is damage too
/// (`store::table::replay::short_of_claim`).
///
/// [`LogFile::seal`]: super::log::LogFile::seal
pub(crate) fn check_tail(
    file: &File,
    scanned: &Scanned,
    binding: Binding,
) -> Result<Option<String>, CodecError> {
    if binding == Binding::Unbound {
        return Ok(None);
    }
    let len = file.metadata().map_err(io_codec)?.len();
    let mut window = vec![0u8; TAIL_WINDOW];
    let mut record = Vec::new();
    let mut at = scanned.end;
    while at < len {
        let got = read_up_to(file, &mut window, at).map_err(io_codec)?;
        // Frames that start in this window; the last bytes start the next.
        let starts = got.saturating_sub(frame::MAGIC.len() - 1);
        for i in 0..starts {
            if window[i..i + frame::MAGIC.len()] != frame::MAGIC {
                continue;
            }
            let pos = at + i as u64;
            let Some(rec) = read_record(file, pos, binding, &mut record)? else {
                continue;
            };
            if !binding.owns(&rec.head) {
                let (id, generation) = rec.head.owner.unwrap_or_default();
                return Ok(Some(format!(
                    "byte {pos} of its log holds a record of table {id} generation {generation}"
                )));
            }
            if rec.head.synced_below > scanned.next_seq {
                return Ok(Some(format!(
                    "record {} at byte {pos} of its log says that records below {} were \
                     durable, but the log's whole records end before record {} (byte {})",
                    rec.head.seq, rec.head.synced_below, scanned.next_seq, scanned.end
                )));
            }
        }
        if got < TAIL_WINDOW {
            break;
        }
        at += starts as u64;
    }
    Ok(None)
}

fn io_codec(e: io::Error) -> CodecError {
    CodecError::InvalidField {
        field: "log file",
        reason: format!("could not be read: {e}"),
    }
}
