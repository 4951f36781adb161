//! A page file's superblock ([`Superblock`]): what is in force in it, its
//! two copies' bytes (`docs/FORMAT.md` § 11), and who the file belongs to
//! ([`Owner`]). Writing and choosing the copies: [`pagefile`](super::pagefile).

use super::chunks::chunk_count;
use crate::codec::frame::{self, Kind};
use crate::codec::reader::ByteReader;
use crate::error::CodecError;
use crate::filter::params::FilterParams;

/// Bytes of the superblock body before the slot map.
const SB_FIXED: usize = 72;

/// The alignment of superblock copies.
const SB_ALIGN: u64 = 4096;

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
    /// Every log record numbered below this was durable when the copy was
    /// written (synced, or in the chunks: never below `folded_seq`); a log
    /// whose whole records end before it lost durable records. Frame
    /// version 5 (`docs/FORMAT.md` § 11); an older copy reads as
    /// `folded_seq` (no claim past the chunks).
    pub durable_seq: u64,
    /// The slot of each chunk.
    pub slots: Vec<Slot>,
}

/// Bytes reserved for one superblock copy.
pub(super) fn sb_bytes(params: &FilterParams) -> u64 {
    let map = chunk_count(params).div_ceil(4);
    (frame::OVERHEAD as u64 + SB_FIXED as u64 + map).next_multiple_of(SB_ALIGN)
}

/// The lowest frame version a superblock of a table of `p` may have been
/// written with: that of its parameters (`docs/FORMAT.md` § 13: 2 for the
/// split-block layout and its XXH64 hash, 4 for the XXH3-64 hash, 6 for the
/// XXH3-64 sectorized hash, else 1). Every superblock is written as version
/// 5 (`log_start` at byte 64 and `durable_seq` at byte 72, § 11) when that
/// fits in its copy's space, else as version 3 (no `durable_seq`), or 4
/// for a table whose parameters need it; a table hashed with XXH3-64
/// sectorized writes version 6 in both cases (its fields those of version 5
/// or 3: [`carries_durable_seq`]).
fn frame_version(p: &FilterParams) -> u16 {
    crate::codec::filter_file::params_version(p)
}

/// Whether a superblock copy of frame version `version` for a table of `p`
/// holds `durable_seq` (`docs/FORMAT.md` § 11): version 5 always; version
/// 6 (written only for the XXH3-64 sectorized hash) when its copy has
/// room for it ([`has_durable_seq`]), as a writer of version 5 decides.
fn carries_durable_seq(version: u16, p: &FilterParams) -> bool {
    version == frame::VERSION_5 || (version >= frame::VERSION_6 && has_durable_seq(p))
}

fn corrupt(field: &'static str, reason: String) -> CodecError {
    CodecError::InvalidField { field, reason }
}

impl Superblock {
    pub(super) fn encode(&self, owner: Owner, p: &FilterParams) -> Vec<u8> {
        let with_durable = has_durable_seq(p);
        let mut body = Vec::with_capacity(SB_FIXED + 8 + self.slots.len().div_ceil(4));
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
        if with_durable {
            body.extend_from_slice(&self.durable_seq.max(self.folded_seq).to_le_bytes());
        }
        let mut map = vec![0u8; self.slots.len().div_ceil(4)];
        for (c, s) in self.slots.iter().enumerate() {
            map[c / 4] |= (*s as u8) << (2 * (c % 4));
        }
        body.extend_from_slice(&map);
        let version = if with_durable {
            frame_version(p).max(frame::VERSION_5)
        } else {
            frame_version(p).max(frame::VERSION_3)
        };
        frame::encode_versioned(Kind::TableState, 0, &body, version, version)
    }

    /// Decodes a superblock copy (`bytes` may run past the frame), checking
    /// it against the table it must belong to.
    pub(super) fn decode(
        bytes: &[u8],
        owner: Owner,
        p: &FilterParams,
    ) -> Result<Superblock, CodecError> {
        let len = frame_len(bytes)?;
        let f = frame::decode_kind(&bytes[..len], Kind::TableState)?;
        if f.version < frame_version(p) {
            return Err(corrupt(
                "page file version",
                format!(
                    "a superblock of version {} names the {} layout, hash {}",
                    f.version,
                    p.layout(),
                    p.hash().algo.name()
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
        let durable_seq = if carries_durable_seq(f.version, p) {
            r.u64()?
        } else {
            folded_seq
        };
        if durable_seq < folded_seq {
            return Err(corrupt(
                "superblock durable_seq",
                format!("{durable_seq}, below folded_seq {folded_seq}"),
            ));
        }
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
            durable_seq,
            slots,
        })
    }
}

/// Whether a superblock of a table of `p` carries `durable_seq` (frame
/// version 5): when its 8 bytes fit in the space of a copy, which the
/// layout of versions 1 to 4 sized (`sb_bytes`); they do not for chunk
/// counts whose slot map ends within 8 bytes of a 4,096 boundary.
pub(super) fn has_durable_seq(p: &FilterParams) -> bool {
    let map = chunk_count(p).div_ceil(4);
    frame::OVERHEAD as u64 + SB_FIXED as u64 + 8 + map <= sb_bytes(p)
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
pub(super) fn frame_len(bytes: &[u8]) -> Result<usize, CodecError> {
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
