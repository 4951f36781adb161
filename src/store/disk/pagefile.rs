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
//! The bytes: `docs/FORMAT.md` §10. A chunk that no superblock names is all
//! zeros and was never written, so creating a table writes only its
//! superblock (the file is sparse).

use super::chunks::{blocks_in_chunk, chunk_count, CHUNK_BLOCKS};
use super::io::{read_exact_at, sync_dir, write_all_at};
pub(crate) use super::CommitError;
use crate::codec::frame::{self, Kind};
use crate::codec::reader::ByteReader;
use crate::error::CodecError;
use crate::filter::counting::COUNTER_BLOCK_BYTES;
use crate::filter::params::FilterParams;
use std::fs::File;
use std::io;
use std::path::Path;

/// Bytes of the superblock body before the slot map.
const SB_FIXED: usize = 72;
/// Bytes of a chunk slot's body before the counters.
const SLOT_HEADER: usize = 24;
/// The alignment of superblock copies.
const SB_ALIGN: u64 = 4096;
/// The alignment of chunk slots.
const SLOT_ALIGN: u64 = 64;

/// Which slot of a chunk holds its counters (two bits per chunk in the
/// superblock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    /// Never written: all zeros.
    None = 0,
    First = 1,
    Second = 2,
}

impl Slot {
    fn from_bits(b: u8) -> Option<Slot> {
        match b {
            0 => Some(Slot::None),
            1 => Some(Slot::First),
            2 => Some(Slot::Second),
            _ => None,
        }
    }

    /// The slot a new version of the chunk goes to.
    pub(crate) fn other(self) -> Slot {
        match self {
            Slot::None | Slot::Second => Slot::First,
            Slot::First => Slot::Second,
        }
    }
}

/// Who a page file belongs to: checked against every superblock read, so a
/// file cannot be taken for another table's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Owner {
    pub table_id: u64,
    pub generation: u64,
}

/// The superblock: what is in force.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Superblock {
    /// Folds committed so far (the copy in force is `fold % 2`).
    pub fold: u64,
    /// The number of the first log record not folded into the chunks.
    pub folded_seq: u64,
    /// Inserts minus removes folded into the chunks.
    pub live_keys: i64,
    /// The byte of the log file where record `folded_seq` starts (0 in a
    /// superblock of frame version 1 or 2, which has no such field; a fold
    /// in the background leaves the records after the ones it folded where
    /// they are: `docs/FORMAT.md` § 11).
    pub log_start: u64,
    /// The slot of each chunk.
    pub slots: Vec<Slot>,
}

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

/// Bytes reserved for one superblock copy.
fn sb_bytes(params: &FilterParams) -> u64 {
    let map = chunk_count(params).div_ceil(4);
    (frame::OVERHEAD as u64 + SB_FIXED as u64 + map).next_multiple_of(SB_ALIGN)
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

/// The lowest frame version a superblock of a table of `p` may have been
/// written with: that of its parameters (`docs/FORMAT.md` § 13: 2 for the
/// split-block layout and its XXH64 hash, 4 for the XXH3-64 hash, else 1).
/// Every superblock is written as version 3 (its field at byte 64 is
/// `log_start`, § 11), or 4 for a table whose parameters need it.
fn frame_version(p: &FilterParams) -> u16 {
    crate::codec::filter_file::params_version(p)
}

fn corrupt(field: &'static str, reason: String) -> CodecError {
    CodecError::InvalidField { field, reason }
}

impl Superblock {
    fn encode(&self, owner: Owner, p: &FilterParams) -> Vec<u8> {
        let mut body = Vec::with_capacity(SB_FIXED + self.slots.len().div_ceil(4));
        body.extend_from_slice(&owner.table_id.to_le_bytes());
        body.extend_from_slice(&owner.generation.to_le_bytes());
        body.extend_from_slice(&p.m().to_le_bytes());
        body.extend_from_slice(&p.k().to_le_bytes());
        body.push(p.layout().id());
        body.push(p.hash().algo.id());
        body.extend_from_slice(&[0u8; 2]);
        body.extend_from_slice(&p.hash().seed.to_le_bytes());
        body.extend_from_slice(&self.fold.to_le_bytes());
        body.extend_from_slice(&self.folded_seq.to_le_bytes());
        body.extend_from_slice(&self.live_keys.to_le_bytes());
        body.extend_from_slice(&self.log_start.to_le_bytes());
        let mut map = vec![0u8; self.slots.len().div_ceil(4)];
        for (c, s) in self.slots.iter().enumerate() {
            map[c / 4] |= (*s as u8) << (2 * (c % 4));
        }
        body.extend_from_slice(&map);
        let version = frame_version(p).max(frame::VERSION_3);
        frame::encode_versioned(Kind::TableState, 0, &body, version, version)
    }

    /// Decodes a superblock copy (`bytes` may run past the frame), checking
    /// it against the table it must belong to.
    fn decode(bytes: &[u8], owner: Owner, p: &FilterParams) -> Result<Superblock, CodecError> {
        let len = frame_len(bytes)?;
        let f = frame::decode_kind(&bytes[..len], Kind::TableState)?;
        if f.version < frame_version(p) {
            return Err(corrupt(
                "page file version",
                format!(
                    "a superblock of version {} names the {} layout",
                    f.version,
                    p.layout()
                ),
            ));
        }
        let mut r = ByteReader::new(f.body);
        check_identity(&mut r, owner, p)?;
        let (fold, folded_seq) = (r.u64()?, r.u64()?);
        let live_keys = r.u64()? as i64;
        // Version 3 keeps `log_start` where versions 1 and 2 kept the chunk
        // count (which the table's parameters give).
        let (log_start, chunks) = if f.version >= frame::VERSION_3 {
            (r.u64()?, chunk_count(p))
        } else {
            (0, r.u64()?)
        };
        if chunks != chunk_count(p) {
            return Err(corrupt(
                "page file chunk count",
                format!("{chunks}, the table has {}", chunk_count(p)),
            ));
        }
        let map = r.take(chunks.div_ceil(4))?;
        r.finish()?;
        let slots = decode_slot_map(map, chunks)?;
        Ok(Superblock {
            fold,
            folded_seq,
            live_keys,
            log_start,
            slots,
        })
    }
}

/// Reads a superblock body's first 40 bytes (§ 11: table id, generation,
/// `m`, `k`, layout, hash, seed) and refuses a superblock of another table,
/// generation or filter.
fn check_identity(
    r: &mut ByteReader<'_>,
    owner: Owner,
    p: &FilterParams,
) -> Result<(), CodecError> {
    let (id, generation, m, k) = (r.u64()?, r.u64()?, r.u64()?, r.u32()?);
    let (layout, algo) = (r.u8()?, r.u8()?);
    r.reserved::<2>()?;
    let seed = r.u64()?;
    if (id, generation) != (owner.table_id, owner.generation) {
        return Err(corrupt(
            "page file owner",
            format!("table {id} generation {generation}, expected {owner:?}"),
        ));
    }
    if (m, k, layout, algo, seed)
        != (
            p.m(),
            p.k(),
            p.layout().id(),
            p.hash().algo.id(),
            p.hash().seed,
        )
    {
        return Err(corrupt(
            "page file parameters",
            format!(
                "m {m} k {k} layout {layout} hash {algo} seed {seed:#x} differ from the table's"
            ),
        ));
    }
    Ok(())
}

/// The slot of each of `chunks` chunks, 2 bits each in `map` (§ 11).
fn decode_slot_map(map: &[u8], chunks: u64) -> Result<Vec<Slot>, CodecError> {
    (0..chunks as usize)
        .map(|c| {
            let bits = (map[c / 4] >> (2 * (c % 4))) & 3;
            Slot::from_bits(bits)
                .ok_or_else(|| corrupt("slot map", format!("chunk {c} names slot {bits}")))
        })
        .collect()
}

/// The length of the frame that `bytes` starts with, checked to fit.
fn frame_len(bytes: &[u8]) -> Result<usize, CodecError> {
    if bytes.len() < frame::HEADER_LEN {
        return Err(CodecError::Truncated {
            needed: frame::HEADER_LEN as u64,
            found: bytes.len() as u64,
        });
    }
    let body = super::io::le_u64(bytes, 12);
    let total = body.saturating_add(frame::OVERHEAD as u64);
    if total > bytes.len() as u64 {
        return Err(CodecError::Truncated {
            needed: total,
            found: bytes.len() as u64,
        });
    }
    Ok(total as usize)
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

    /// Commits the fold with `folded_seq`, `live_keys` and the log's first
    /// record at byte `log_start`: syncs the chunks,
    /// writes the superblock copy not in force, syncs it. An error before
    /// the superblock write leaves the old one in force and the file usable
    /// ([`CommitError::Before`]); an error from the superblock write on
    /// leaves unknown which copy the disk holds ([`CommitError::After`]):
    /// nothing may be written to the file any more.
    pub(crate) fn commit(
        mut self,
        folded_seq: u64,
        live_keys: i64,
        log_start: u64,
    ) -> Result<(), CommitError> {
        self.next.folded_seq = folded_seq;
        self.next.live_keys = live_keys;
        self.next.log_start = log_start;
        let f = &mut *self.file;
        super::io::sync_data(&f.file).map_err(CommitError::Before)?;
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
