//! The page file of a table generation: its counting filter, as chunks of
//! 64 counter blocks, each kept in two slots, and a superblock, kept in two
//! copies, that says which slot of each chunk holds its counters.
//!
//! # Why two of everything
//! A fold rewrites the chunks its log records touch. Overwriting a chunk in
//! place would leave, after a power cut in the middle of the write, a page
//! that is neither the old counters nor the new (a torn page), and the old
//! ones could not be recovered: the log records that led to them were folded
//! long ago. So a chunk is never overwritten while the superblock in force
//! names it: a fold writes each new chunk into the chunk's *other* slot,
//! `fdatasync`s the file, then writes a new superblock into the superblock
//! copy not in force (numbered one higher, naming the new slots and the
//! first log record not folded) and `fdatasync`s again. That superblock is
//! the fold's commit point: a cut before it is whole leaves the old one in
//! force (its copy was not touched) with every chunk it names intact and the
//! log that the fold read still there; a cut after it leaves the new one,
//! whose chunks were synced before it was written. Opening picks the valid
//! copy with the higher fold number.
//!
//! A superblock also says how far the table's log was durable
//! (`durable_seq`): every fold claims the log records whose sync returned
//! before its superblock is written ([`Fold::commit_claiming`]), and a
//! clean close commits one more copy that changes only that claim
//! ([`PageFile::claim_durable`]: no chunk written, so a cut in it leaves the
//! copy in force). A log that ends before the claim in force lost durable
//! records (`docs/FORMAT.md` § 10, § 11).
//!
//! The superblock's fields and bytes: [`superblock`](super::superblock).
//! The bytes: `docs/FORMAT.md` §10. A chunk that no superblock names is all
//! zeros and was never written, so creating a table writes only its
//! superblock (the file is sparse).

use super::chunks::{blocks_in_chunk, chunk_count, CHUNK_BLOCKS};
use super::io::{read_exact_at, sync_dir, write_all_at};
use super::superblock::{frame_len, has_durable_seq, sb_bytes};
pub(crate) use super::superblock::{Owner, Slot, Superblock};
pub(crate) use super::CommitError;
use crate::codec::frame::{self, Kind};
use crate::codec::reader::ByteReader;
use crate::error::CodecError;
use crate::filter::counting::COUNTER_BLOCK_BYTES;
use crate::filter::params::FilterParams;
use std::fs::File;
use std::io;
use std::path::Path;

/// Bytes of a chunk slot's body before the counters.
const SLOT_HEADER: usize = 24;
/// The alignment of chunk slots.
const SLOT_ALIGN: u64 = 64;

/// A table generation's page file (module docs).
#[derive(Debug)]
pub(crate) struct PageFile {
    file: File,
    params: FilterParams,
    owner: Owner,
    /// The superblock in force.
    sb: Superblock,
}

/// Byte offset of superblock copy `copy` (0 or 1).
fn sb_offset(copy: u64, params: &FilterParams) -> u64 {
    copy * sb_bytes(params)
}

/// Bytes between two slots.
fn slot_stride(params: &FilterParams) -> u64 {
    let blocks = params.num_blocks().min(CHUNK_BLOCKS);
    (frame::OVERHEAD as u64 + SLOT_HEADER as u64 + blocks * COUNTER_BLOCK_BYTES as u64)
        .next_multiple_of(SLOT_ALIGN)
}

/// Byte offset of `slot` of chunk `idx`.
fn slot_offset(params: &FilterParams, idx: u64, slot: Slot) -> u64 {
    let which = match slot {
        Slot::Second => 1,
        Slot::None | Slot::First => 0,
    };
    2 * sb_bytes(params) + (2 * idx + which) * slot_stride(params)
}

/// The file's full size (sparse where nothing was written).
fn file_bytes(params: &FilterParams) -> u64 {
    slot_offset(params, chunk_count(params), Slot::First)
}

fn corrupt(field: &'static str, reason: String) -> CodecError {
    CodecError::InvalidField { field, reason }
}

/// Encodes chunk `idx` as written by fold `fold`.
fn encode_slot(idx: u64, fold: u64, counters: &[u8]) -> Vec<u8> {
    let blocks = (counters.len() / COUNTER_BLOCK_BYTES) as u32;
    let mut body = Vec::with_capacity(SLOT_HEADER + counters.len());
    body.extend_from_slice(&idx.to_le_bytes());
    body.extend_from_slice(&fold.to_le_bytes());
    body.extend_from_slice(&blocks.to_le_bytes());
    body.extend_from_slice(&[0u8; 4]);
    body.extend_from_slice(counters);
    frame::encode(Kind::CounterPage, 0, &body)
}

/// Decodes the counters of chunk `idx` from its slot's bytes; `fold` is the
/// superblock's fold number (no slot in force was written after it).
fn decode_slot<'a>(
    bytes: &'a [u8],
    idx: u64,
    fold: u64,
    p: &FilterParams,
) -> Result<&'a [u8], CodecError> {
    let len = frame_len(bytes)?;
    let body = frame::decode_kind(&bytes[..len], Kind::CounterPage)?.body;
    let mut r = ByteReader::new(body);
    let (stored, written_by) = (r.u64()?, r.u64()?);
    let blocks = u64::from(r.u32()?);
    r.reserved::<4>()?;
    if stored != idx {
        return Err(corrupt(
            "chunk index",
            format!("{stored} stored in a slot of chunk {idx}"),
        ));
    }
    if written_by > fold {
        return Err(corrupt(
            "chunk fold number",
            format!("written by fold {written_by}, after the fold in force ({fold})"),
        ));
    }
    if blocks != blocks_in_chunk(p, idx) {
        return Err(corrupt(
            "chunk block count",
            format!(
                "chunk {idx} holds {blocks} blocks, expected {}",
                blocks_in_chunk(p, idx)
            ),
        ));
    }
    let counters = r.take(blocks * COUNTER_BLOCK_BYTES as u64)?;
    r.finish()?;
    Ok(counters)
}

/// An error of a page file: I/O, or bytes that fail their checks.
#[derive(Debug)]
pub(crate) enum PageError {
    Io(io::Error),
    Corrupt(String, CodecError),
}

impl From<io::Error> for PageError {
    fn from(e: io::Error) -> Self {
        PageError::Io(e)
    }
}

impl PageFile {
    /// Creates the page file of a new generation at `path` (replacing a
    /// leftover of a crashed earlier attempt): its size set, superblock copy
    /// 0 written (fold 0, every chunk zero, `live_keys` 0, log from
    /// `first_seq`), synced, and its directory synced.
    pub(crate) fn create(
        path: &Path,
        params: FilterParams,
        owner: Owner,
        first_seq: u64,
    ) -> io::Result<PageFile> {
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        file.set_len(file_bytes(&params))?;
        let sb = Superblock {
            fold: 0,
            folded_seq: first_seq,
            live_keys: 0,
            log_start: 0,
            durable_seq: first_seq,
            slots: vec![Slot::None; chunk_count(&params) as usize],
        };
        write_all_at(&file, &sb.encode(owner, &params), sb_offset(0, &params))?;
        super::io::sync_all(&file)?;
        if let Some(dir) = path.parent() {
            sync_dir(dir)?;
        }
        Ok(PageFile {
            file,
            params,
            owner,
            sb,
        })
    }

    /// Opens the page file at `path` (read-only unless `write`), taking the
    /// valid superblock copy with the higher fold number.
    pub(crate) fn open(
        path: &Path,
        params: FilterParams,
        owner: Owner,
        write: bool,
    ) -> Result<PageFile, PageError> {
        let file = File::options().read(true).write(write).open(path)?;
        let len = file.metadata()?.len();
        if len != file_bytes(&params) {
            return Err(PageError::Corrupt(
                "page file".into(),
                corrupt(
                    "page file size",
                    format!("{len} bytes, the table's file has {}", file_bytes(&params)),
                ),
            ));
        }
        let size = sb_bytes(&params) as usize;
        let mut best: Option<Superblock> = None;
        let mut errors = Vec::new();
        for copy in 0..2 {
            let mut buf = vec![0u8; size];
            read_exact_at(&file, &mut buf, sb_offset(copy, &params))?;
            match Superblock::decode(&buf, owner, &params) {
                Ok(sb) if sb.fold % 2 == copy && best.as_ref().is_none_or(|b| sb.fold > b.fold) => {
                    best = Some(sb)
                }
                Ok(sb) => errors.push(format!("copy {copy} holds fold {}", sb.fold)),
                Err(e) => errors.push(format!("copy {copy}: {e}")),
            }
        }
        let sb = best.ok_or_else(|| {
            PageError::Corrupt(
                "page file superblock".into(),
                corrupt(
                    "superblock",
                    format!("no valid copy ({})", errors.join("; ")),
                ),
            )
        })?;
        Ok(PageFile {
            file,
            params,
            owner,
            sb,
        })
    }

    /// The superblock in force.
    pub(crate) fn superblock(&self) -> &Superblock {
        &self.sb
    }

    /// A second handle on the same file and superblock, for a fold in the
    /// background (`store::table::background`): it writes only slots the
    /// superblock in force does not name, and its commit is adopted by
    /// this handle ([`adopt`](PageFile::adopt)) before this one writes.
    pub(crate) fn try_clone(&self) -> io::Result<PageFile> {
        Ok(PageFile {
            file: self.file.try_clone()?,
            params: self.params,
            owner: self.owner,
            sb: self.sb.clone(),
        })
    }

    /// Takes `sb`, committed through a clone of this handle whose fold
    /// started from this handle's superblock, as the one in force.
    pub(crate) fn adopt(&mut self, sb: Superblock) {
        debug_assert_eq!(sb.fold, self.sb.fold + 1);
        self.sb = sb;
    }

    /// Makes the superblock in force durable as it was read: writes its
    /// copy back ([`rewrite`](super::io::rewrite)) and syncs the file. A
    /// writing open does this before anything else touches the table
    /// (`Generation::load`): the copy it read may be one whose sync failed
    /// (the page cache keeps it), and a fold after the open writes into the
    /// slots that copy does not name, which the copy still on disk may name.
    /// The chunks it names need nothing: a fold syncs the chunks it wrote
    /// before its superblock names them ([`Fold::commit`]), and the others
    /// were named by the superblock before.
    pub(crate) fn make_durable(&self) -> io::Result<()> {
        let at = sb_offset(self.sb.fold % 2, &self.params);
        super::io::rewrite(&self.file, at, at + sb_bytes(&self.params))?;
        super::io::sync_data(&self.file)
    }

    /// The counters of chunk `idx` (`blocks_in_chunk · 256` bytes) into
    /// `out` (cleared first).
    pub(crate) fn read_chunk(&self, idx: u64, out: &mut Vec<u8>) -> Result<(), PageError> {
        let len = blocks_in_chunk(&self.params, idx) as usize * COUNTER_BLOCK_BYTES;
        out.clear();
        let slot = self.sb.slots[idx as usize];
        if slot == Slot::None {
            out.resize(len, 0);
            return Ok(());
        }
        let mut buf = vec![0u8; frame::OVERHEAD + SLOT_HEADER + len];
        read_exact_at(&self.file, &mut buf, slot_offset(&self.params, idx, slot))?;
        let counters = decode_slot(&buf, idx, self.sb.fold, &self.params)
            .map_err(|e| PageError::Corrupt(format!("counter page {idx}"), e))?;
        out.extend_from_slice(counters);
        Ok(())
    }

    /// Commits a superblock that changes nothing but its claim: every log
    /// record below `seq` is durable (the caller read `seq` after the sync
    /// that made them so returned). A fold that writes no chunk, so a cut
    /// in it leaves the copy in force as it is. Nothing is written when the
    /// claim would not grow, or the superblock has no room for it
    /// ([`has_durable_seq`]).
    pub(crate) fn claim_durable(&mut self, seq: u64) -> Result<(), CommitError> {
        if seq <= self.sb.durable_seq || !has_durable_seq(&self.params) {
            return Ok(());
        }
        let (folded_seq, live_keys, log_start) =
            (self.sb.folded_seq, self.sb.live_keys, self.sb.log_start);
        let mut fold = self.begin_fold();
        fold.claim_durable(seq);
        fold.commit(folded_seq, live_keys, log_start)
    }

    /// Starts the next fold: chunks written through it go to their other
    /// slot, and nothing is in force until [`Fold::commit`].
    pub(crate) fn begin_fold(&mut self) -> Fold<'_> {
        let next = Superblock {
            fold: self.sb.fold + 1,
            ..self.sb.clone()
        };
        Fold { file: self, next }
    }
}

/// A fold under way ([`PageFile::begin_fold`]).
pub(crate) struct Fold<'a> {
    file: &'a mut PageFile,
    next: Superblock,
}

impl Fold<'_> {
    /// Writes the new counters of chunk `idx` into its other slot (once per
    /// chunk and fold).
    pub(crate) fn write_chunk(&mut self, idx: u64, counters: &[u8]) -> io::Result<()> {
        let p = &self.file.params;
        debug_assert_eq!(
            counters.len() as u64,
            blocks_in_chunk(p, idx) * COUNTER_BLOCK_BYTES as u64
        );
        let in_force = self.file.sb.slots[idx as usize];
        let target = in_force.other();
        let bytes = encode_slot(idx, self.next.fold, counters);
        write_all_at(&self.file.file, &bytes, slot_offset(p, idx, target))?;
        self.next.slots[idx as usize] = target;
        Ok(())
    }

    /// The counters of chunk `idx` as this fold will leave them: the ones in
    /// force (a chunk is written once per fold).
    pub(crate) fn read_chunk(&self, idx: u64, out: &mut Vec<u8>) -> Result<(), PageError> {
        self.file.read_chunk(idx, out)
    }

    /// Has the fold's superblock say that every log record below `seq`
    /// was durable (it says at least `folded_seq`): the caller read `seq`
    /// after the log's sync that made them durable had returned.
    pub(crate) fn claim_durable(&mut self, seq: u64) {
        self.next.durable_seq = seq;
    }

    /// Commits the fold with `folded_seq`, `live_keys` and the log's first
    /// record at byte `log_start`: syncs the chunks,
    /// writes the superblock copy not in force, syncs it. An error before
    /// the superblock write leaves the old one in force and the file usable
    /// ([`CommitError::Before`]); an error from the superblock write on
    /// leaves unknown which copy the disk holds ([`CommitError::After`]):
    /// nothing may be written to the file any more.
    pub(crate) fn commit(
        self,
        folded_seq: u64,
        live_keys: i64,
        log_start: u64,
    ) -> Result<(), CommitError> {
        self.commit_claiming(folded_seq, live_keys, log_start, || 0)
    }

    /// [`commit`](Fold::commit), the superblock also claiming that every
    /// log record below `durable()` was durable: read after the chunks'
    /// sync returned, right before the superblock is written, so that it
    /// counts every log sync that returned while the fold ran (and none
    /// that had not: a cut after the superblock finds them all).
    pub(crate) fn commit_claiming(
        mut self,
        folded_seq: u64,
        live_keys: i64,
        log_start: u64,
        durable: impl FnOnce() -> u64,
    ) -> Result<(), CommitError> {
        self.next.folded_seq = folded_seq;
        self.next.live_keys = live_keys;
        self.next.log_start = log_start;
        let f = &mut *self.file;
        super::io::sync_data(&f.file).map_err(CommitError::Before)?;
        let claim = self.next.durable_seq.max(durable()).max(folded_seq);
        self.next.durable_seq = claim;
        let bytes = self.next.encode(f.owner, &f.params);
        write_all_at(&f.file, &bytes, sb_offset(self.next.fold % 2, &f.params))
            .and_then(|()| super::io::sync_data(&f.file))
            .map_err(CommitError::After)?;
        f.sb = self.next;
        Ok(())
    }
}

#[cfg(test)]
#[path = "pagefile_tests.rs"]
mod tests;
