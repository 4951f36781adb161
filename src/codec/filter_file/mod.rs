//! Exported filter files (`.fsf`): a [`DescriptorV1`] followed by the filter's
//! raw little-endian payload, inside a [`frame`] of kind
//! [`Kind::BitFilter`] or [`Kind::CountingFilter`]. The byte layout is
//! specified in `docs/FORMAT.md` (§ Filter descriptor, § Filter files) and
//! pinned by golden tests; this file implements it.
//!
//! # Decoding is zero-copy and allocation-free
//! [`decode_filter`] checks the frame (magic, versions, kind, reserved bytes,
//! length, CRC32), then every descriptor field (ids against the supported
//! sets, `m`/`k` through [`FilterParams::new`], the payload length the
//! parameters imply against the one declared and the bytes present), then that
//! the padding past `m` is zero, and only then hands out views that borrow the
//! input: a [`FilterView`] for a bit filter, a [`CounterView`] for a counting
//! filter. A 1 GiB file is therefore verified and queried without a second
//! gigabyte; [`DecodedFilter::to_bit_filter`] copies when an owned, mutable
//! filter is wanted.
//!
//! Every failure is a typed [`CodecError`]. A filter that cannot be decoded
//! must be treated as "maybe" for every key, never as "absent".

use super::frame::{self, Kind};
use super::reader::ByteReader;
use crate::error::{CodecError, ParamError};
use crate::filter::bloom::{BitFilter, BloomRead, FilterView};
use crate::filter::counting::{nibble, CountingFilter, COUNTER_BLOCK_BYTES};
use crate::filter::hash::{positions, HashAlgo, HashSpec};
use crate::filter::params::{FilterParams, Layout, BLOCK_BITS};
use serde::Serialize;

/// File name extension of exported filter files ("filterstore filter").
pub const FILE_EXTENSION: &str = "fsf";

/// Size of [`DescriptorV1`] in bytes. With the 24-byte frame header in front,
/// the payload starts at byte 72 of a file: 8-byte aligned, so a memory-mapped
/// file could be read as words.
pub const DESCRIPTOR_LEN: usize = 48;

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
    pub fn file_kind(self) -> Kind {
        match self {
            CounterWidth::Bit => Kind::BitFilter,
            CounterWidth::Four => Kind::CountingFilter,
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
    /// The bit array entropy-coded by [`crate::exchange::entropy`] (two-lane
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
    /// many bytes follow is the caller's check ([`ByteReader::take`]).
    pub fn read(r: &mut ByteReader<'_>) -> Result<Self, CodecError> {
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
            supported: "1 (standard), 2 (blocked)",
        })?;
        let algo = HashAlgo::from_id(hash_id).ok_or(CodecError::UnknownId {
            what: "hash algorithm",
            found: hash_id.into(),
            supported: "1 (xxh3-128)",
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

/// Maps a refusal of [`FilterParams::new`] to the header field at fault.
fn param_error(e: ParamError) -> CodecError {
    let field = match e {
        ParamError::KOutOfRange { .. } => "k",
        _ => "m",
    };
    CodecError::InvalidField {
        field,
        reason: e.to_string(),
    }
}

/// Bytes of a raw payload: `num_words · 8` for a bit filter, 256 per 512-bit
/// block for a counting filter. Computed in `u64`; `m ≤ 2^40` keeps it exact.
pub fn raw_payload_len(params: &FilterParams, width: CounterWidth) -> u64 {
    match width {
        CounterWidth::Bit => params.bit_bytes(),
        CounterWidth::Four => params.num_blocks() * COUNTER_BLOCK_BYTES as u64,
    }
}

/// Encodes a bit filter as an exported file; `n` is the writer's key count.
pub fn encode_bit_filter(f: &BitFilter, n: u64) -> Vec<u8> {
    let params = *f.params();
    let d = DescriptorV1::raw(params, n, CounterWidth::Bit);
    encode_file(&d, |out| {
        for i in 0..params.num_words() {
            out.extend_from_slice(&f.word(i).to_le_bytes());
        }
    })
}

/// Encodes a counting filter as an exported file; `n` is the number of live keys.
pub fn encode_counting_filter(f: &CountingFilter, n: u64) -> Vec<u8> {
    let d = DescriptorV1::raw(*f.params(), n, CounterWidth::Four);
    encode_file(&d, |out| out.extend_from_slice(f.as_bytes()))
}

fn encode_file(d: &DescriptorV1, write_payload: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    // The payload length is bounded by 2^40 / 2 bytes: it fits in `usize` on the
    // 64-bit targets the crate supports.
    let body_len = DESCRIPTOR_LEN + d.payload_len as usize;
    frame::encode_with(d.counter_width.file_kind(), 0, body_len, |out| {
        out.extend_from_slice(&d.to_bytes());
        write_payload(out);
    })
}

/// A read-only counting filter over borrowed packed counters (the payload of
/// a decoded file, or a counter page read from disk). As a [`BloomRead`] it is
/// the bit filter the counters imply — bit `i` set exactly when counter `i` is
/// non-zero — so every query and estimator works on it without a copy.
#[derive(Clone, Copy, Debug)]
pub struct CounterView<'a> {
    params: FilterParams,
    bytes: &'a [u8],
}

impl<'a> CounterView<'a> {
    /// A view of `bytes`, which must hold exactly the counters of `params`.
    pub fn new(params: FilterParams, bytes: &'a [u8]) -> Result<Self, CodecError> {
        let expected = raw_payload_len(&params, CounterWidth::Four);
        if bytes.len() as u64 != expected {
            return Err(CodecError::InvalidField {
                field: "counters",
                reason: format!("{} bytes, parameters need {expected}", bytes.len()),
            });
        }
        Ok(CounterView { params, bytes })
    }

    /// The packed counters.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Counter at position `pos`.
    ///
    /// # Panics
    /// If `pos` is not below the padded number of positions (a caller bug;
    /// every position derived from a key with these parameters is below `m`).
    pub fn counter(&self, pos: u64) -> u8 {
        nibble::get(self.bytes, pos as usize)
    }

    /// Number of saturated (sticky) counters.
    pub fn saturated(&self) -> u64 {
        nibble::count_saturated(self.bytes)
    }

    /// The smallest of `key`'s counters: an upper bound on how many times the
    /// key is present (inserts minus removes; 15 means 15 or more), and 0
    /// exactly when it is definitely absent.
    pub fn min_count(&self, key: &[u8]) -> u8 {
        let p = self.params;
        positions(p.layout(), p.m(), p.k(), p.hash().hash(key))
            .as_slice()
            .iter()
            .map(|&i| self.counter(i))
            .min()
            .unwrap_or(0)
    }

    /// An owned counting filter with the same counters.
    pub fn to_counting_filter(&self) -> Result<CountingFilter, ParamError> {
        let mut counters = Vec::new();
        counters
            .try_reserve_exact(self.bytes.len())
            .map_err(|_| ParamError::AllocationFailed {
                bytes: self.bytes.len() as u64,
            })?;
        counters.extend_from_slice(self.bytes);
        CountingFilter::from_bytes(self.params, counters).map_err(|_| {
            // Unreachable: `new` checked the length against the same rule.
            ParamError::AllocationFailed {
                bytes: self.bytes.len() as u64,
            }
        })
    }
}

impl BloomRead for CounterView<'_> {
    fn params(&self) -> &FilterParams {
        &self.params
    }
    #[inline]
    fn word(&self, i: usize) -> u64 {
        // 64 counters of 4 bits per word of bits.
        self.bytes
            .get(i * 32..i * 32 + 32)
            .map_or(0, nibble::nonzero_word)
    }
}

/// The payload of a decoded filter file, borrowed from the input.
#[derive(Clone, Copy, Debug)]
pub enum FilterBody<'a> {
    /// A bit filter.
    Bits(FilterView<'a>),
    /// A counting filter.
    Counters(CounterView<'a>),
}

/// A decoded, fully validated filter file, borrowing its payload.
#[derive(Clone, Copy, Debug)]
pub struct DecodedFilter<'a> {
    /// The format version the file was written with.
    pub version: u16,
    /// The oldest reader version the writer allowed.
    pub min_reader: u16,
    /// The descriptor.
    pub descriptor: DescriptorV1,
    /// The payload.
    pub body: FilterBody<'a>,
}

impl<'a> DecodedFilter<'a> {
    /// The filter's parameters.
    pub fn params(&self) -> &FilterParams {
        &self.descriptor.params
    }

    /// The writer's key count.
    pub fn n(&self) -> u64 {
        self.descriptor.n
    }

    /// [`Kind::BitFilter`] or [`Kind::CountingFilter`].
    pub fn kind(&self) -> Kind {
        self.descriptor.counter_width.file_kind()
    }

    /// Whether `key` may be in the set. `false` means definitely absent.
    pub fn contains(&self, key: &[u8]) -> bool {
        match &self.body {
            FilterBody::Bits(v) => v.contains(key),
            FilterBody::Counters(c) => BloomRead::contains(c, key),
        }
    }

    /// The counters, if this is a counting filter.
    pub fn counters(&self) -> Option<CounterView<'a>> {
        match self.body {
            FilterBody::Bits(_) => None,
            FilterBody::Counters(c) => Some(c),
        }
    }

    /// An owned bit filter with the same answers (for a counting filter, bit
    /// `i` is set exactly when counter `i` is non-zero).
    pub fn to_bit_filter(&self) -> Result<BitFilter, ParamError> {
        match &self.body {
            FilterBody::Bits(v) => v.to_owned_filter(),
            FilterBody::Counters(c) => {
                let f = BitFilter::new(c.params)?;
                for i in 0..c.params.num_words() {
                    f.store_word(i, c.word(i));
                }
                Ok(f)
            }
        }
    }
}

/// Decodes and fully validates an exported filter file. See the module docs
/// for the order of checks; nothing is allocated.
pub fn decode_filter(bytes: &[u8]) -> Result<DecodedFilter<'_>, CodecError> {
    let f = frame::decode(bytes)?;
    let expected_width = match f.kind {
        Kind::BitFilter => CounterWidth::Bit,
        Kind::CountingFilter => CounterWidth::Four,
        other => {
            return Err(CodecError::WrongKind {
                expected: "bit-filter or counting-filter",
                found: other.name(),
            })
        }
    };
    if f.flags != 0 {
        return Err(CodecError::InvalidField {
            field: "flags",
            reason: format!(
                "{:#04x}: no flags are defined for {} files",
                f.flags,
                f.kind.name()
            ),
        });
    }
    let mut r = ByteReader::new(f.body);
    let descriptor = DescriptorV1::read(&mut r)?;
    if descriptor.codec != Codec::Raw {
        return Err(CodecError::UnknownId {
            what: "codec",
            found: descriptor.codec.id().into(),
            supported: "0 (raw) in filter files; compressed filters travel as exchange messages",
        });
    }
    if descriptor.counter_width != expected_width {
        return Err(CodecError::InvalidField {
            field: "counter width",
            reason: format!(
                "{} bits in a {} file, which needs {}",
                descriptor.counter_width.id(),
                f.kind.name(),
                expected_width.id()
            ),
        });
    }
    let payload = r.take(descriptor.payload_len)?;
    r.finish()?;
    let params = descriptor.params;
    check_padding(&params, expected_width, payload)?;
    let body = match expected_width {
        CounterWidth::Bit => FilterBody::Bits(FilterView::new(params, payload).map_err(|e| {
            CodecError::InvalidField {
                field: "payload",
                reason: e.to_string(),
            }
        })?),
        CounterWidth::Four => FilterBody::Counters(CounterView::new(params, payload)?),
    };
    Ok(DecodedFilter {
        version: f.version,
        min_reader: f.min_reader,
        descriptor,
        body,
    })
}

/// Refuses a payload with anything set past position `m`. Writers never set
/// the padding (both layouts pad storage to whole 512-bit blocks), so a set
/// padding bit means corruption the CRC did not see or a foreign writer; and a
/// canonical payload makes decode → encode the identity, which the fuzz
/// targets check.
fn check_padding(p: &FilterParams, width: CounterWidth, payload: &[u8]) -> Result<(), CodecError> {
    // Bits per position in the payload, and the first bit past the last position.
    let bits_per = match width {
        CounterWidth::Bit => 1,
        CounterWidth::Four => 4,
    };
    let first = p.m() * bits_per;
    let first_byte = (first / 8) as usize;
    let partial = (first % 8) as u32;
    let mut tail = payload.get(first_byte..).unwrap_or(&[]);
    if partial != 0 {
        if let Some((&b, rest)) = tail.split_first() {
            if b >> partial != 0 {
                return Err(padding_error(p, first_byte));
            }
            tail = rest;
        }
    }
    match tail.iter().position(|&b| b != 0) {
        None => Ok(()),
        Some(i) => Err(padding_error(p, first_byte + i + (partial != 0) as usize)),
    }
}

fn padding_error(p: &FilterParams, byte: usize) -> CodecError {
    CodecError::InvalidField {
        field: "padding",
        reason: format!(
            "payload byte {byte} holds positions past m = {} (storage is padded to {}-bit blocks) and must be zero",
            p.m(),
            BLOCK_BITS
        ),
    }
}

/// Every header field of a filter file, plus what its payload implies, for
/// `filterstore inspect` (text through `Display`, JSON through `Serialize`).
/// Produced only for a file that passed every check of [`decode_filter`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Inspection {
    /// Total file size in bytes.
    pub file_len: u64,
    /// Format version the file was written with.
    pub format_version: u16,
    /// Oldest reader version that may read it.
    pub min_reader_version: u16,
    /// Frame kind name.
    pub kind: &'static str,
    /// Frame kind id.
    pub kind_id: u8,
    /// Frame flags (always 0 in format version 1).
    pub flags: u8,
    /// Frame body length in bytes (descriptor + payload).
    pub body_len: u64,
    /// The CRC32 stored in the file, verified against the contents.
    pub crc32: u32,
    /// Layout name.
    pub layout: &'static str,
    /// Layout id.
    pub layout_id: u8,
    /// Hash algorithm name.
    pub hash: &'static str,
    /// Hash algorithm id.
    pub hash_id: u8,
    /// Hash seed.
    pub seed: u64,
    /// Filter size in bits (positions).
    pub m: u64,
    /// Hash functions per key.
    pub k: u32,
    /// The writer's key count.
    pub n: u64,
    /// Bits per position (0 = bit filter, 4 = counting filter).
    pub counter_width: u8,
    /// Codec name.
    pub codec: &'static str,
    /// Codec id.
    pub codec_id: u8,
    /// Payload length in bytes.
    pub payload_len: u64,
    /// `m / n`, if `n > 0`.
    pub bits_per_key: Option<f64>,
    /// The layout model's false-positive rate after `n` keys.
    pub model_fp: f64,
    /// Positions set (non-zero counters for a counting filter).
    pub bits_set: u64,
    /// `bits_set / m`.
    pub fill_ratio: f64,
    /// The false-positive rate the current fill implies.
    pub estimated_fp: f64,
    /// Distinct keys estimated from the zero positions.
    pub estimated_keys: f64,
    /// Saturated (sticky) counters, for a counting filter.
    pub saturated_counters: Option<u64>,
}

/// Decodes `bytes` with every check of [`decode_filter`] and reports every
/// header field and what the payload implies.
pub fn inspect(bytes: &[u8]) -> Result<Inspection, CodecError> {
    let d = decode_filter(bytes)?;
    let p = *d.params();
    let crc = bytes
        .len()
        .checked_sub(frame::TRAILER_LEN)
        .and_then(|at| bytes.get(at..))
        .map_or(0, |b| {
            let mut a = [0u8; 4];
            a.copy_from_slice(b);
            u32::from_le_bytes(a)
        });
    let (bits_set, estimated_fp, estimated_keys) = match &d.body {
        FilterBody::Bits(v) => (v.count_ones(), v.estimated_fp(), v.estimate_len()),
        FilterBody::Counters(c) => (c.count_ones(), c.estimated_fp(), c.estimate_len()),
    };
    let n = d.n();
    Ok(Inspection {
        file_len: bytes.len() as u64,
        format_version: d.version,
        min_reader_version: d.min_reader,
        kind: d.kind().name(),
        kind_id: d.kind().id(),
        flags: 0,
        body_len: (DESCRIPTOR_LEN as u64) + d.descriptor.payload_len,
        crc32: crc,
        layout: p.layout().name(),
        layout_id: p.layout().id(),
        hash: p.hash().algo.name(),
        hash_id: p.hash().algo.id(),
        seed: p.hash().seed,
        m: p.m(),
        k: p.k(),
        n,
        counter_width: d.descriptor.counter_width.id(),
        codec: d.descriptor.codec.name(),
        codec_id: d.descriptor.codec.id(),
        payload_len: d.descriptor.payload_len,
        bits_per_key: (n > 0).then(|| p.m() as f64 / n as f64),
        model_fp: p.expected_fp(n),
        bits_set,
        fill_ratio: bits_set as f64 / p.m() as f64,
        estimated_fp,
        estimated_keys,
        saturated_counters: d.counters().map(|c| c.saturated()),
    })
}

impl std::fmt::Display for Inspection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "file length        {} bytes", self.file_len)?;
        writeln!(
            f,
            "format version     {} (readable by version {} and newer)",
            self.format_version, self.min_reader_version
        )?;
        writeln!(f, "kind               {} ({})", self.kind, self.kind_id)?;
        writeln!(f, "flags              {:#04x}", self.flags)?;
        writeln!(f, "body length        {} bytes", self.body_len)?;
        writeln!(f, "crc32              {:#010x} (verified)", self.crc32)?;
        writeln!(f, "layout             {} ({})", self.layout, self.layout_id)?;
        writeln!(f, "hash               {} ({})", self.hash, self.hash_id)?;
        writeln!(f, "seed               {:#018x}", self.seed)?;
        writeln!(f, "m                  {} bits", self.m)?;
        writeln!(f, "k                  {}", self.k)?;
        writeln!(f, "n                  {}", self.n)?;
        writeln!(f, "counter width      {} bits", self.counter_width)?;
        writeln!(f, "codec              {} ({})", self.codec, self.codec_id)?;
        writeln!(f, "payload length     {} bytes", self.payload_len)?;
        match self.bits_per_key {
            Some(b) => writeln!(f, "bits per key       {b:.2}")?,
            None => writeln!(f, "bits per key       - (n = 0)")?,
        }
        writeln!(f, "model FP at n      {:.4}%", self.model_fp * 100.0)?;
        writeln!(
            f,
            "positions set      {} ({:.2}%)",
            self.bits_set,
            self.fill_ratio * 100.0
        )?;
        writeln!(f, "estimated FP now   {:.4}%", self.estimated_fp * 100.0)?;
        write!(f, "estimated keys     {:.0}", self.estimated_keys)?;
        if let Some(s) = self.saturated_counters {
            write!(f, "\nsaturated counters {s}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(layout: Layout) -> FilterParams {
        FilterParams::new(layout, 1024, 3, HashSpec::xxh3(0x0102_0304_0506_0708)).unwrap()
    }

    /// The descriptor's bytes, written out by hand from `docs/FORMAT.md`.
    #[test]
    fn golden_descriptor_bytes() {
        let d = DescriptorV1::raw(params(Layout::Blocked), 300, CounterWidth::Four);
        assert_eq!(
            d.to_bytes(),
            [
                2, 1, 4, 0, // layout, hash, counter width, codec
                3, 0, 0, 0, // k
                8, 7, 6, 5, 4, 3, 2, 1, // seed
                0, 4, 0, 0, 0, 0, 0, 0, // m = 1024
                44, 1, 0, 0, 0, 0, 0, 0, // n = 300
                0, 2, 0, 0, 0, 0, 0, 0, // payload: 2 blocks · 256 bytes
                0, 0, 0, 0, 0, 0, 0, 0, // reserved
            ]
        );
        let bytes = d.to_bytes();
        let mut r = ByteReader::new(&bytes);
        assert_eq!(DescriptorV1::read(&mut r).unwrap(), d);
        assert_eq!(r.remaining(), 0);
    }

    /// A whole bit-filter file with one key, byte for byte. The CRC was
    /// computed independently with Python's `zlib.crc32` over bytes 0..200.
    #[test]
    fn golden_bit_filter_file() {
        let f = BitFilter::new(params(Layout::Standard)).unwrap();
        f.insert(b"golden");
        let bytes = encode_bit_filter(&f, 1);
        assert_eq!(bytes.len(), 24 + 48 + 128 + 4);
        assert_eq!(
            &bytes[..24],
            &[
                b'F', b'S', b'T', b'R', 1, 0, 1, 0, 1, 0, 0, 0, 176, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                0
            ]
        );
        assert_eq!(
            bytes[24..72],
            DescriptorV1::raw(f.params().to_owned(), 1, CounterWidth::Bit).to_bytes()
        );
        assert_eq!(&bytes[72..200], &f.to_le_bytes()[..]);
        let set: Vec<usize> = (0..1024).filter(|&i| f.bit(i as u64)).collect();
        assert_eq!(set, GOLDEN_BITS);
        assert_eq!(&bytes[200..], &GOLDEN_CRC.to_le_bytes());
    }
    /// A file of `kind` around a hand-made descriptor and payload, with a
    /// valid frame and CRC, so that the descriptor checks are what is tested.
    fn forged(kind: Kind, descriptor: [u8; DESCRIPTOR_LEN], payload: &[u8]) -> Vec<u8> {
        let mut body = descriptor.to_vec();
        body.extend_from_slice(payload);
        frame::encode(kind, 0, &body)
    }

    fn valid_parts(width: CounterWidth) -> ([u8; DESCRIPTOR_LEN], Vec<u8>) {
        let d = DescriptorV1::raw(params(Layout::Standard), 0, width);
        (d.to_bytes(), vec![0u8; d.payload_len as usize])
    }

    #[test]
    fn round_trips_both_widths_and_layouts() {
        for layout in [Layout::Standard, Layout::Blocked] {
            let p = FilterParams::for_capacity(500, 0.01, layout, HashSpec::xxh3(9)).unwrap();
            let bits = BitFilter::new(p).unwrap();
            let mut counts = CountingFilter::new(p).unwrap();
            let keys: Vec<[u8; 8]> = (0u64..500).map(|i| i.to_le_bytes()).collect();
            for k in &keys {
                bits.insert(k);
                counts.insert(k);
            }
            let bit_file = encode_bit_filter(&bits, 500);
            let count_file = encode_counting_filter(&counts, 500);
            let db = decode_filter(&bit_file).unwrap();
            let dc = decode_filter(&count_file).unwrap();
            assert_eq!(
                (db.kind(), dc.kind()),
                (Kind::BitFilter, Kind::CountingFilter)
            );
            assert_eq!((*db.params(), db.n()), (p, 500));
            assert_eq!(*dc.params(), p);
            assert!(keys.iter().all(|k| db.contains(k) && dc.contains(k)));
            // Both answer exactly like the filters they came from, absent keys too.
            let probe: Vec<[u8; 8]> = (500u64..20_000).map(|i| i.to_le_bytes()).collect();
            for k in &probe {
                assert_eq!(db.contains(k), bits.contains(k));
                assert_eq!(dc.contains(k), counts.contains(k));
            }
            assert_eq!(db.to_bit_filter().unwrap().to_words(), bits.to_words());
            assert_eq!(
                dc.to_bit_filter().unwrap().to_words(),
                counts.to_bit_filter().unwrap().to_words()
            );
            let c = dc.counters().unwrap();
            assert_eq!(
                c.to_counting_filter().unwrap().as_bytes(),
                counts.as_bytes()
            );
            assert!(keys.iter().all(|k| c.min_count(k) >= 1));
            assert!(db.counters().is_none());
            assert_eq!(
                encode_bit_filter(&db.to_bit_filter().unwrap(), 500),
                bit_file
            );
        }
    }

    #[test]
    fn unknown_ids_name_what_was_found_and_what_is_supported() {
        let (d, payload) = valid_parts(CounterWidth::Bit);
        for (at, value, what) in [
            (0, 3, "layout"),
            (1, 2, "hash algorithm"),
            (2, 8, "counter width"),
            (3, 1, "codec"),
            (3, 200, "codec"),
        ] {
            let mut bad = d;
            bad[at] = value;
            match decode_filter(&forged(Kind::BitFilter, bad, &payload)) {
                Err(CodecError::UnknownId {
                    what: w,
                    found,
                    supported,
                }) => {
                    assert_eq!((w, found), (what, value as u64));
                    assert!(!supported.is_empty());
                }
                other => panic!("{what} = {value}: {other:?}"),
            }
        }
    }

    #[test]
    fn invalid_parameters_name_the_field() {
        let (d, payload) = valid_parts(CounterWidth::Bit);
        let cases: [(usize, u64, &str); 4] = [
            (4, 0, "k"),              // k = 0
            (4, 33, "k"),             // k > MAX_K
            (16, 63, "m"),            // m below the minimum
            (16, (1 << 40) + 1, "m"), // m above the maximum
        ];
        for (at, value, field) in cases {
            let mut bad = d;
            if at == 4 {
                bad[4..8].copy_from_slice(&(value as u32).to_le_bytes());
            } else {
                bad[at..at + 8].copy_from_slice(&value.to_le_bytes());
            }
            match decode_filter(&forged(Kind::BitFilter, bad, &payload)) {
                Err(CodecError::InvalidField { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field} = {value}: {other:?}"),
            }
        }
        // Blocked layout with m not a multiple of 512.
        let mut bad = d;
        bad[0] = Layout::Blocked.id();
        bad[16..24].copy_from_slice(&1000u64.to_le_bytes());
        assert!(matches!(
            decode_filter(&forged(Kind::BitFilter, bad, &payload)),
            Err(CodecError::InvalidField { field: "m", .. })
        ));
    }

    #[test]
    fn lengths_are_checked_before_anything_is_trusted() {
        let (d, payload) = valid_parts(CounterWidth::Bit);
        // A declared length that disagrees with m.
        let mut bad = d;
        bad[32..40].copy_from_slice(&(payload.len() as u64 * 2).to_le_bytes());
        assert!(matches!(
            decode_filter(&forged(Kind::BitFilter, bad, &payload)),
            Err(CodecError::InvalidField {
                field: "payload length",
                ..
            })
        ));
        // The largest m accepted, with a payload that is not there: refused by
        // length, not by an allocation of 128 GiB.
        let mut huge = d;
        huge[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
        huge[32..40].copy_from_slice(&(1u64 << 37).to_le_bytes());
        assert_eq!(
            decode_filter(&forged(Kind::BitFilter, huge, &payload)).map(|_| ()),
            Err(CodecError::Truncated {
                needed: DESCRIPTOR_LEN as u64 + (1 << 37),
                found: (DESCRIPTOR_LEN + payload.len()) as u64,
            })
        );
        // A payload one byte short, and one byte long.
        assert!(matches!(
            decode_filter(&forged(Kind::BitFilter, d, &payload[1..])),
            Err(CodecError::Truncated { .. })
        ));
        let mut long = payload.clone();
        long.push(0);
        assert_eq!(
            decode_filter(&forged(Kind::BitFilter, d, &long)).map(|_| ()),
            Err(CodecError::TrailingBytes { extra: 1 })
        );
        // A descriptor cut short.
        let body = &d[..40];
        assert!(matches!(
            decode_filter(&frame::encode(Kind::BitFilter, 0, body)),
            Err(CodecError::Truncated { .. })
        ));
    }

    #[test]
    fn kind_flags_width_reserved_and_padding_are_checked() {
        let (d, payload) = valid_parts(CounterWidth::Bit);
        assert!(matches!(
            decode_filter(&forged(Kind::Snapshot, d, &payload)),
            Err(CodecError::WrongKind { .. })
        ));
        // A bit-filter descriptor in a counting-filter frame.
        assert!(matches!(
            decode_filter(&forged(Kind::CountingFilter, d, &payload)),
            Err(CodecError::InvalidField {
                field: "counter width",
                ..
            })
        ));
        let mut body = d.to_vec();
        body.extend_from_slice(&payload);
        assert!(matches!(
            decode_filter(&frame::encode(Kind::BitFilter, 2, &body)),
            Err(CodecError::InvalidField { field: "flags", .. })
        ));
        for at in 40..48 {
            let mut bad = d;
            bad[at] = 1;
            assert_eq!(
                decode_filter(&forged(Kind::BitFilter, bad, &payload)).map(|_| ()),
                Err(CodecError::ReservedNotZero)
            );
        }
        // m = 1000 in a standard filter: bits 1000..1024 are padding.
        let p = FilterParams::new(Layout::Standard, 1000, 3, HashSpec::xxh3(1)).unwrap();
        for (width, first_pad_bit) in [(CounterWidth::Bit, 1000), (CounterWidth::Four, 4000)] {
            let d = DescriptorV1::raw(p, 0, width);
            let len = d.payload_len as usize;
            let kind = width.file_kind();
            assert!(decode_filter(&forged(kind, d.to_bytes(), &vec![0; len])).is_ok());
            for bit in [first_pad_bit, first_pad_bit + 5, len * 8 - 1] {
                let mut payload = vec![0u8; len];
                payload[bit / 8] |= 1 << (bit % 8);
                assert!(
                    matches!(
                        decode_filter(&forged(kind, d.to_bytes(), &payload)),
                        Err(CodecError::InvalidField {
                            field: "padding",
                            ..
                        })
                    ),
                    "{width:?}: padding bit {bit} accepted"
                );
            }
            // The last real position may be set.
            let mut payload = vec![0u8; len];
            let last = first_pad_bit - 1;
            payload[last / 8] |= 1 << (last % 8);
            assert!(decode_filter(&forged(kind, d.to_bytes(), &payload)).is_ok());
        }
    }

    #[test]
    fn inspection_reports_every_field() {
        let p = FilterParams::new(Layout::Blocked, 2048, 5, HashSpec::xxh3(77)).unwrap();
        let mut c = CountingFilter::new(p).unwrap();
        for i in 0u32..100 {
            c.insert(&i.to_le_bytes());
        }
        for _ in 0..20 {
            c.insert(b"hot");
        }
        let bytes = encode_counting_filter(&c, 101);
        let i = inspect(&bytes).unwrap();
        assert_eq!(i.file_len, bytes.len() as u64);
        assert_eq!((i.format_version, i.min_reader_version), (1, 1));
        assert_eq!((i.kind, i.kind_id, i.flags), ("counting-filter", 2, 0));
        assert_eq!(i.body_len, 48 + 1024);
        assert_eq!(i.crc32, crc32fast::hash(&bytes[..bytes.len() - 4]));
        assert_eq!(
            (i.layout, i.layout_id, i.hash, i.hash_id),
            ("blocked", 2, "xxh3-128", 1)
        );
        assert_eq!((i.seed, i.m, i.k, i.n), (77, 2048, 5, 101));
        assert_eq!((i.counter_width, i.codec, i.codec_id), (4, "raw", 0));
        assert_eq!(i.payload_len, 1024);
        assert_eq!(i.saturated_counters, Some(c.saturated()));
        assert!(
            i.saturated_counters.unwrap() >= 1,
            "the hot key's counters stick at 15"
        );
        assert_eq!(i.bits_set, c.to_bit_filter().unwrap().count_ones());
        assert!((i.bits_per_key.unwrap() - 2048.0 / 101.0).abs() < 1e-9);
        let text = i.to_string();
        for needle in [
            "counting-filter",
            "blocked",
            "0x000000000000004d",
            "saturated counters",
        ] {
            assert!(text.contains(needle), "{needle} missing from:\n{text}");
        }
        let json = serde_json::to_value(&i).unwrap();
        assert_eq!(json["m"], 2048);
        assert_eq!(json["kind"], "counting-filter");
        // n is informational and may hold anything: a claim of 2^64 − 1 keys
        // is reported (model FP 1), quickly (found by the fuzzer: the blocked
        // model once walked ~10^9 terms for it).
        let d = DescriptorV1::raw(p, u64::MAX, CounterWidth::Four);
        let mut body = d.to_bytes().to_vec();
        body.extend_from_slice(c.as_bytes());
        let huge = inspect(&frame::encode(Kind::CountingFilter, 0, &body)).unwrap();
        assert_eq!((huge.n, huge.model_fp), (u64::MAX, 1.0));
        // Any defect is an error, not a partial report.
        let mut bad = bytes.clone();
        bad[100] ^= 1;
        assert!(matches!(
            inspect(&bad),
            Err(CodecError::ChecksumMismatch { .. })
        ));
    }

    /// The three positions of `b"golden"` under seed 0x0102030405060708 in a
    /// standard 1024-bit filter with k = 3.
    const GOLDEN_BITS: &[usize] = &[339, 507, 675];
    const GOLDEN_CRC: u32 = 0xbcfa_4033;
}
