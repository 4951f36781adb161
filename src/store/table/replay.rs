//! Reading a generation's log at open (and for a counting export): its
//! records from where the superblock in force says it starts, turned into
//! position entries, and what says that the log lost records it had made
//! durable, beyond what [`log_read::check_tail`] finds past its prefix: a
//! newer superblock copy damaged ([`check_newer_copy`]), or a log that ends
//! before the superblock's `durable_seq` ([`short_of_claim`]).

use crate::filter::params::FilterParams;
use crate::store::budget::{self, Reservation};
use crate::store::disk::chunks::{self as pages, MAX_PASS_OPS};
use crate::store::disk::io_err;
use crate::store::disk::log::Binding;
use crate::store::disk::log_read;
use crate::store::disk::pagefile::Superblock;
use crate::store::error::StoreError;
use std::fs::File;

/// What an open learnt from the log.
pub(super) struct Replayed {
    /// The budget reservation of `entries`.
    pub(super) _memory: Reservation,
    pub(super) entries: Vec<pages::Entry>,
    pub(super) delta: i64,
    pub(super) scanned: log_read::Scanned,
}

/// Refuses a log whose superblock in force `sb` finds no record where the
/// log should start while a record of this log numbered above `folded_seq`
/// starts at `log_start` or at byte 0: a newer superblock copy committed a
/// fold and emptied the log (a fold on the writer's thread restarts it at
/// byte 0 whatever the copy before said), and that copy was damaged since,
/// bringing back this one (`docs/FORMAT.md` § 11). Opening on it would lose
/// the records the damaged copy had folded.
fn check_newer_copy(
    file: &File,
    binding: Binding,
    sb: &Superblock,
    table: &str,
) -> Result<(), StoreError> {
    let corrupt = |e| StoreError::corrupt(format!("log of table {table:?}"), e);
    for at in [sb.log_start, 0] {
        let Some(seq) = log_read::first_seq(file, at, binding).map_err(corrupt)? else {
            continue;
        };
        if seq > sb.folded_seq {
            return Err(StoreError::corrupt(
                format!("page file superblock of table {table:?}"),
                crate::error::CodecError::InvalidField {
                    field: "superblock",
                    reason: format!(
                        "the copy in force expects log record {} at byte {}, the log holds \
                         record {seq} at byte {at}: a newer copy was damaged",
                        sb.folded_seq, sb.log_start
                    ),
                },
            ));
        }
    }
    Ok(())
}

/// Reads the log (bound by `binding`) of a generation whose page file's
/// superblock `sb` expects record `sb.folded_seq` first, at byte
/// `sb.log_start`, turning its operations into position entries (unsorted).
pub(super) fn replay_log(
    file: &File,
    binding: Binding,
    params: &FilterParams,
    sb: &Superblock,
    table: &str,
) -> Result<Replayed, StoreError> {
    let (at, first_seq) = (sb.log_start, sb.folded_seq);
    let corrupt = |e| StoreError::corrupt(format!("log of table {table:?}"), e);
    // At most one operation per 17 bytes of log: the entries' memory,
    // reserved under the budget before the file is read.
    let len = file
        .metadata()
        .map_err(io_err("reading a table's log"))?
        .len();
    let memory = budget::reserve(
        || format!("the log replay of table {table:?}"),
        super::fold::entry_bytes(params, len.saturating_sub(at) / 17),
    )?;
    let mut entries = Vec::new();
    let mut delta = 0i64;
    let mut n = 0u64;
    let span = log_read::Span {
        at,
        first_seq,
        until_seq: u64::MAX,
    };
    let scanned = log_read::scan_from(file, binding, span, MAX_PASS_OPS, |op| {
        pages::push_entries(params, n, op, &mut entries);
        n += 1;
        delta += if op.insert { 1 } else { -1 };
    })
    .map_err(corrupt)?;
    if scanned.ops == 0 && scanned.end == at {
        check_newer_copy(file, binding, sb, table)?;
    }
    if scanned.stopped {
        // Every fold empties the log, and a log reaches at most one fold
        // threshold plus one batch (both bounded by MAX_PASS_OPS / 2).
        return Err(StoreError::corrupt(
            format!("log of table {table:?}"),
            crate::error::CodecError::InvalidField {
                field: "log length",
                reason: format!("more than {MAX_PASS_OPS} operations"),
            },
        ));
    }
    Ok(Replayed {
        _memory: memory,
        entries,
        delta,
        scanned,
    })
}

/// Why the log of a generation whose superblock in force is `sb` lost
/// records the superblock says were durable, if it did: its whole records
/// in sequence (`s`) end before `sb.durable_seq` (`docs/FORMAT.md` § 11).
/// The log was cut short (truncated, emptied) or a durable record in it
/// was damaged, with no record after it left to say so
/// ([`log_read::check_tail`]). A log cut by a power cut never is: the
/// superblock claims only records whose sync had returned before it was
/// written, and nothing shortens a log below them but a writing open that
/// found the claim kept.
pub(super) fn short_of_claim(sb: &Superblock, s: &log_read::Scanned) -> Option<String> {
    (!s.stopped && s.next_seq < sb.durable_seq).then(|| {
        format!(
            "its page file says that log records below {} were durable, but the log's \
             whole records end before record {} (byte {})",
            sb.durable_seq, s.next_seq, s.end
        )
    })
}
