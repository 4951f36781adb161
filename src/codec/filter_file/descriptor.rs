//! The filter descriptor (FORMAT.md § 5): the fixed 48-byte header of every
//! serialized filter, and the identifiers it holds.

use crate::codec::frame::{self, FrameKind};
use crate::codec::reader::ByteReader;
use crate::error::{CodecError, ParamError};
use crate::filter::counting::COUNTER_BLOCK_BYTES;
use crate::filter::hash::{HashAlgo, HashSpec};
use crate::filter::params::{FilterParams, Layout};

/// Size of [`DescriptorV1`] in bytes. With the 24-byte frame header in front,
/// the payload starts at byte 72 of a file: 8-byte aligned, so a memory-mapped
/// file could be read as words.
pub(crate) const DESCRIPTOR_LEN: usize = 48;

/// What each position of the payload holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CounterWidth {
    /// One bit per position: a bit filter. Id 0.
    Bit,
    /// A 4-bit saturating counter per position: a counting filter. Id 4.
    Four,
}

impl CounterWidth {
    /// The stable id stored in the descriptor: the counter width in bits, 0
    /// for a plain bit filter.
    pub fn id(self) -> u8 {
        match self {
            CounterWidth::Bit => 0,
            CounterWidth::Four => 4,
        }
    }

    /// Inverse of [`CounterWidth::id`].
    pub fn from_id(id: u8) -> Option<Self> {
        match id {
            0 => Some(CounterWidth::Bit),
            4 => Some(CounterWidth::Four),
            _ => None,
        }
    }

    /// The frame kind of an exported file with this width.
    pub fn file_kind(self) -> FrameKind {
        match self {
            CounterWidth::Bit => FrameKind::BitFilter,
            CounterWidth::Four => FrameKind::CountingFilter,
        }
    }
}

/// How the payload is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Codec {
    /// The array as stored in memory: bit filters as little-endian `u64`
    /// words, counting filters as packed nibbles. Id 0.
    Raw,
    /// The bit array entropy-coded by the exchange's coder (two-lane
    /// rANS over bytes, model from the exact count of one bits). Id 1. Used by
    /// exchange messages only; filter files are always raw.
    Rans,
}

impl Codec {
    /// The stable id stored in the descriptor.
    pub fn id(self) -> u8 {
        match self {
            Codec::Raw => 0,
            Codec::Rans => 1,
        }
    }

    /// Inverse of [`Codec::id`].
    pub fn from_id(id: u8) -> Option<Self> {
        match id {
            0 => Some(Codec::Raw),
            1 => Some(Codec::Rans),
            _ => None,
        }
    }

    /// Lower-case name for messages and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Raw => "raw",
            Codec::Rans => "rans",
        }
    }
}

/// The fixed-size, self-describing header of any serialized filter: everything
/// needed to hash keys the same way again and to check the payload's length.
/// Exported files use it today; snapshots and exchange messages can reuse it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DescriptorV1 {
    /// Layout, `m`, `k`, hash algorithm and seed.
    pub params: FilterParams,
    /// Keys the writer counted into the filter (live keys for a counting
    /// filter). Informational: a reader never relies on it for correctness.
    pub n: u64,
    /// Bit or counting filter.
    pub counter_width: CounterWidth,
    /// Payload encoding.
    pub codec: Codec,
    /// Bytes of payload that follow the descriptor.
    pub payload_len: u64,
}

impl DescriptorV1 {
    /// A descriptor for a raw payload, its length derived from the parameters.
    pub fn raw(params: FilterParams, n: u64, counter_width: CounterWidth) -> Self {
        DescriptorV1 {
            params,
            n,
            counter_width,
            codec: Codec::Raw,
            payload_len: raw_payload_len(&params, counter_width),
        }
    }

    /// The descriptor's bytes (layout in `docs/FORMAT.md`, § Filter descriptor).
    pub fn to_bytes(&self) -> [u8; DESCRIPTOR_LEN] {
        let p = &self.params;
        let mut b = [0u8; DESCRIPTOR_LEN];
        b[0] = p.layout().id();
        b[1] = p.hash().algo.id();
        b[2] = self.counter_width.id();
        b[3] = self.codec.id();
        b[4..8].copy_from_slice(&p.k().to_le_bytes());
        b[8..16].copy_from_slice(&p.hash().seed.to_le_bytes());
        b[16..24].copy_from_slice(&p.m().to_le_bytes());
        b[24..32].copy_from_slice(&self.n.to_le_bytes());
        b[32..40].copy_from_slice(&self.payload_len.to_le_bytes());
        // 40..48 reserved, zero.
        b
    }

    /// Reads and fully validates a descriptor. For [`Codec::Raw`] the declared
    /// payload length must equal the one the parameters imply; whether that
    /// many bytes follow is the caller's check (`ByteReader::take`).
    pub(crate) fn read(r: &mut ByteReader<'_>) -> Result<Self, CodecError> {
        let layout_id = r.u8()?;
        let hash_id = r.u8()?;
        let width_id = r.u8()?;
        let codec_id = r.u8()?;
        let k = r.u32()?;
        let seed = r.u64()?;
        let m = r.u64()?;
        let n = r.u64()?;
        let payload_len = r.u64()?;
        r.reserved::<8>()?;

        let layout = Layout::from_id(layout_id).ok_or(CodecError::UnknownId {
            what: "layout",
            found: layout_id.into(),
            supported: "1 (standard), 2 (blocked), 3 (split-block)",
        })?;
        let algo = HashAlgo::from_id(hash_id).ok_or(CodecError::UnknownId {
            what: "hash algorithm",
            found: hash_id.into(),
            supported: "1 (xxh3-128), 2 (xxh64), 3 (xxh3-64), 4 (xxh3-64-sectorized)",
        })?;
        let counter_width = CounterWidth::from_id(width_id).ok_or(CodecError::UnknownId {
            what: "counter width",
            found: width_id.into(),
            supported: "0 (bit filter), 4 (4-bit counting filter)",
        })?;
        let codec = Codec::from_id(codec_id).ok_or(CodecError::UnknownId {
            what: "codec",
            found: codec_id.into(),
            supported: "0 (raw), 1 (rans)",
        })?;
        let params =
            FilterParams::new(layout, m, k, HashSpec { algo, seed }).map_err(param_error)?;
        let expected = raw_payload_len(&params, counter_width);
        match codec {
            Codec::Raw if payload_len != expected => Err(CodecError::InvalidField {
                field: "payload length",
                reason: format!(
                    "{payload_len} bytes declared, a raw {} of m = {m} bits needs {expected}",
                    counter_width.file_kind().name()
                ),
            }),
            _ => Ok(DescriptorV1 {
                params,
                n,
                counter_width,
                codec,
                payload_len,
            }),
        }
    }
}

/// The lowest format version whose readers interpret a filter of
/// parameters `p` (`docs/FORMAT.md` § 13): 6 when it hashes with XXH3-64
/// sectorized (hash id 4, new in version 6), 4 when it hashes with XXH3-64
/// (hash id 3, new in version 4), 2 when it names the split-block layout
/// (and with it the XXH64 hash), both new in version 2; 1 otherwise.
/// Every frame that names a filter's parameters (file, message, catalog
/// record, superblock) is written with at least this version.
pub(crate) fn params_version(p: &FilterParams) -> u16 {
    match (p.layout(), p.hash().algo) {
        (_, HashAlgo::Xxh3_64Sectorized) => frame::VERSION_6,
        (_, HashAlgo::Xxh3_64) => frame::VERSION_4,
        (Layout::SplitBlock, _) => frame::VERSION_2,
        (Layout::Standard | Layout::Blocked, _) => frame::VERSION_1,
    }
}

/// What a frame older than [`params_version`] cannot name: the hash
/// algorithm (XXH3-64 sectorized, version 6; XXH3-64, version 4) or else
/// the layout (split-block, version 2). A refusal of a frame of
/// `frame_version`, if any.
pub(crate) fn check_params_version(p: &FilterParams, frame_version: u16) -> Result<(), CodecError> {
    let needed = params_version(p);
    if frame_version >= needed {
        return Ok(());
    }
    let (field, what) = match p.hash().algo {
        HashAlgo::Xxh3_64 | HashAlgo::Xxh3_64Sectorized => (
            "hash algorithm",
            format!("the {} hash", p.hash().algo.name()),
        ),
        _ => ("layout", format!("the {} layout", p.layout())),
    };
    Err(CodecError::InvalidField {
        field,
        reason: format!(
            "{what} is new in format version {needed}; a frame of version {frame_version} cannot name it"
        ),
    })
}

impl DescriptorV1 {
    /// The lowest format version whose readers interpret this descriptor:
    /// 2 for the split-block layout (hashed with XXH64), 4 for the XXH3-64
    /// hash, 6 for the XXH3-64 sectorized hash, else 1 (`docs/FORMAT.md`
    /// § 13). Writers frame the filter with it.
    pub fn format_version(&self) -> u16 {
        params_version(&self.params)
    }

    /// Refuses a descriptor that names what a newer version than its
    /// frame's added (a version-1 frame cannot hold layout 3, nor one
    /// before version 4 hash 3, nor one before version 6 hash 4).
    pub(crate) fn check_frame_version(&self, frame_version: u16) -> Result<(), CodecError> {
        check_params_version(&self.params, frame_version)
    }
}

/// Maps a refusal of [`FilterParams::new`] to the header field at fault.
fn param_error(e: ParamError) -> CodecError {
    let field = match e {
        ParamError::KOutOfRange { .. } => "k",
        ParamError::SplitBlockShape { k, .. } if k != crate::filter::geometry::SPLIT_K => "k",
        ParamError::SectorizedK { .. } => "k",
        ParamError::HashNotForLayout { .. } => "hash algorithm",
        _ => "m",
    };
    CodecError::InvalidField {
        field,
        reason: e.to_string(),
    }
}

/// Bytes of a raw payload: `num_words · 8` for a bit filter, 256 per 512-bit
/// block for a counting filter. Computed in `u64`; `m ≤ 2^40` keeps it exact.
pub(super) fn raw_payload_len(params: &FilterParams, width: CounterWidth) -> u64 {
    match width {
        CounterWidth::Bit => params.bit_bytes(),
        CounterWidth::Four => params.num_blocks() * COUNTER_BLOCK_BYTES as u64,
    }
}
