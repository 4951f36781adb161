//! The frame around every persisted record and every message
//! (`docs/FORMAT.md` § 2): its layout, and the order of the decoder's checks
//! (§ 14), are specified there and pinned by golden tests; this file
//! implements them and nothing else. Every failure is a typed
//! [`CodecError`]; nothing here panics on any input, and the declared body
//! length is checked against the bytes present before anything else reads it.

use super::reader::ByteReader;
use crate::error::CodecError;

/// First four bytes of every filterstore record or message.
pub const MAGIC: [u8; 4] = *b"FSTR";
/// The newest format version this build reads and writes (`docs/FORMAT.md`
/// § 13). Each frame is written with the lowest version that describes its
/// bytes: version 1 unless it holds something § 15 lists under a later
/// version, so that older readers keep reading everything they can.
pub const FORMAT_VERSION: u16 = 6;
/// The oldest format version this build can read (older ones are migrated).
pub const MIN_READ_VERSION: u16 = 1;
/// Format version 1: the version, and the min reader version, of every
/// frame whose bytes version 1 describes exactly.
pub const VERSION_1: u16 = 1;
/// Format version 2 (`docs/FORMAT.md` § 15): an exchange message that
/// carries build statistics (§ 12), and any filter file or message naming
/// the split-block layout (§ 5), is written as version 2, min reader 2.
pub const VERSION_2: u16 = 2;
/// Format version 3 (`docs/FORMAT.md` § 15): a page file's superblock
/// that says where its log starts (§ 11); written as version 3, min reader 3.
/// Only the store writes it (feature `store`).
#[cfg_attr(not(feature = "store"), allow(dead_code))]
pub const VERSION_3: u16 = 3;
/// Format version 4 (`docs/FORMAT.md` § 15), in two uses: hash algorithm 3,
/// XXH3-64 (§ 5, § 6), so any filter file, message, catalog record or
/// superblock naming it; and a sealed filter's catalog record (kind 11,
/// § 9a) and the catalog's reference to its log (§ 8), written by a store of
/// format 6. Version 4, min reader 4 in both.
pub const VERSION_4: u16 = 4;
/// Format version 5 (`docs/FORMAT.md` § 15): a page file's superblock that
/// says how far its log was durable (`durable_seq`, § 11), written by a
/// store of format 8 as version 5, min reader 5. Only the store writes it
/// (feature `store`).
#[cfg_attr(not(feature = "store"), allow(dead_code))]
pub const VERSION_5: u16 = 5;
/// Format version 6 (`docs/FORMAT.md` § 15): hash algorithm 4, XXH3-64
/// with sectorized positions (§ 5, § 6). Any filter file, message, catalog
/// record (of a table or a sealed filter) or superblock naming it is
/// written as version 6, min reader 6.
pub const VERSION_6: u16 = 6;
/// Size of the fixed frame header in bytes.
pub const HEADER_LEN: usize = 24;
/// Size of the CRC32 trailer in bytes.
pub const TRAILER_LEN: usize = 4;
/// Total framing overhead in bytes.
pub const OVERHEAD: usize = HEADER_LEN + TRAILER_LEN;

/// What a frame holds. The numeric ids are part of the format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FrameKind {
    /// An exported bit filter (descriptor + bit array).
    BitFilter,
    /// An exported counting filter (descriptor + packed 4-bit counters).
    CountingFilter,
    /// The store's catalog header (store-wide format version).
    Catalog,
    /// One table's metadata record in the catalog.
    TableMeta,
    /// A page of counters inside the store.
    CounterPage,
    /// A snapshot of a table's bit filter inside the store.
    Snapshot,
    /// A semi-join message carrying a whole filter.
    ExchangeFull,
    /// A semi-join message carrying the XOR against a base version.
    ExchangeDelta,
    /// A record of the store's write-ahead log (key hashes of whole batches).
    LogRecord,
    /// The folded state of one table generation in the store (live keys, log position).
    TableState,
    /// One sealed filter's metadata record in the catalog (format version 4).
    SealedMeta,
}

/// The crate's modules call it `frame::Kind`; the API names it
/// [`FrameKind`], which is the name its documentation shows.
pub use self::FrameKind as Kind;

impl FrameKind {
    /// All kinds, for error messages and exhaustive tests.
    pub const ALL: [FrameKind; 11] = [
        FrameKind::BitFilter,
        FrameKind::CountingFilter,
        FrameKind::Catalog,
        FrameKind::TableMeta,
        FrameKind::CounterPage,
        FrameKind::Snapshot,
        FrameKind::ExchangeFull,
        FrameKind::ExchangeDelta,
        FrameKind::LogRecord,
        FrameKind::TableState,
        FrameKind::SealedMeta,
    ];

    /// The stable id stored in the frame.
    pub fn id(self) -> u8 {
        match self {
            FrameKind::BitFilter => 1,
            FrameKind::CountingFilter => 2,
            FrameKind::Catalog => 3,
            FrameKind::TableMeta => 4,
            FrameKind::CounterPage => 5,
            FrameKind::Snapshot => 6,
            FrameKind::ExchangeFull => 7,
            FrameKind::ExchangeDelta => 8,
            FrameKind::LogRecord => 9,
            FrameKind::TableState => 10,
            FrameKind::SealedMeta => 11,
        }
    }

    /// Inverse of [`FrameKind::id`].
    pub fn from_id(id: u8) -> Option<FrameKind> {
        FrameKind::ALL.into_iter().find(|k| k.id() == id)
    }

    /// Lower-case name for messages.
    pub fn name(self) -> &'static str {
        match self {
            FrameKind::BitFilter => "bit-filter",
            FrameKind::CountingFilter => "counting-filter",
            FrameKind::Catalog => "catalog",
            FrameKind::TableMeta => "table-meta",
            FrameKind::CounterPage => "counter-page",
            FrameKind::Snapshot => "snapshot",
            FrameKind::ExchangeFull => "exchange-full",
            FrameKind::ExchangeDelta => "exchange-delta",
            FrameKind::LogRecord => "log-record",
            FrameKind::TableState => "table-state",
            FrameKind::SealedMeta => "sealed-meta",
        }
    }
}

/// A decoded frame borrowing its body from the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The format version the record was written with.
    pub version: u16,
    /// The oldest reader version that can read it.
    pub min_reader: u16,
    /// What the body holds.
    pub kind: FrameKind,
    /// Kind-specific flags.
    pub flags: u8,
    /// The body.
    pub body: &'a [u8],
    /// The CRC32 of header and body, as stored (and verified).
    pub crc32: u32,
}

/// Frames `body` as a record of `kind` of format version 1, min reader 1:
/// the frame of every body whose bytes version 1 describes. (The exchange
/// frames a message that needs version 2 with its versions given.)
pub fn encode(kind: FrameKind, flags: u8, body: &[u8]) -> Vec<u8> {
    encode_versioned(kind, flags, body, VERSION_1, VERSION_1)
}

/// Frames `body` with explicit versions (used by migrations and their tests).
pub fn encode_versioned(
    kind: FrameKind,
    flags: u8,
    body: &[u8],
    version: u16,
    min_reader: u16,
) -> Vec<u8> {
    write_frame(kind, flags, body.len(), version, min_reader, |out| {
        out.extend_from_slice(body)
    })
}

/// Frames a body of exactly `body_len` bytes that `write_body` appends to
/// the output, for readers of `version`, written as both its version and
/// its min reader version: the lowest version that describes the body
/// (version 1 for every filter file of the version-1 layouts, 2 for one
/// naming the split-block layout). Large bodies (a filter's bit array) are
/// then written once, straight into the one buffer of exact capacity,
/// instead of being collected first and copied.
///
/// # Panics
/// If `write_body` appends other than `body_len` bytes: a bug in the caller,
/// never a property of input data.
pub fn encode_with_version(
    kind: FrameKind,
    flags: u8,
    body_len: usize,
    version: u16,
    write_body: impl FnOnce(&mut Vec<u8>),
) -> Vec<u8> {
    write_frame(kind, flags, body_len, version, version, write_body)
}

/// The header [`encode_with_version`] writes before a body of `body_len`
/// bytes for readers of `version`: for a writer that streams the body (and
/// the CRC of header and body after it) instead of building the frame in
/// memory (the store's export).
#[cfg_attr(not(feature = "store"), allow(dead_code))]
pub(crate) fn header(kind: Kind, flags: u8, body_len: u64, version: u16) -> [u8; HEADER_LEN] {
    header_with(kind, flags, body_len, version, version)
}

fn header_with(
    kind: Kind,
    flags: u8,
    body_len: u64,
    version: u16,
    min_reader: u16,
) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..4].copy_from_slice(&MAGIC);
    h[4..6].copy_from_slice(&version.to_le_bytes());
    h[6..8].copy_from_slice(&min_reader.to_le_bytes());
    h[8] = kind.id();
    h[9] = flags;
    h[12..20].copy_from_slice(&body_len.to_le_bytes());
    h
}

/// Checks the header at the start of a frame, for a reader that streams the
/// body (the store's import): the checks of [`decode`] that need only the
/// header, in its order. Returns the kind, the flags, the body length and
/// the version.
#[cfg_attr(not(feature = "store"), allow(dead_code))]
pub(crate) fn decode_header(bytes: &[u8; HEADER_LEN]) -> Result<(Kind, u8, u64, u16), CodecError> {
    let h = read_header(&mut ByteReader::new(bytes))?;
    Ok((h.kind, h.flags, h.body_len, h.version))
}

fn write_frame(
    kind: FrameKind,
    flags: u8,
    body_len: usize,
    version: u16,
    min_reader: u16,
    write_body: impl FnOnce(&mut Vec<u8>),
) -> Vec<u8> {
    let mut out = Vec::with_capacity(OVERHEAD + body_len);
    out.extend_from_slice(&header_with(
        kind,
        flags,
        body_len as u64,
        version,
        min_reader,
    ));
    write_body(&mut out);
    assert_eq!(
        out.len(),
        HEADER_LEN + body_len,
        "frame body writer wrote a different length than it declared"
    );
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes a frame, accepting any format version this build can read. The
/// checks run in the order of the table in `docs/FORMAT.md` § 14.
///
/// # Examples
/// ```
/// use filterstore::{decode_frame, encode_frame, CodecError, FrameKind};
///
/// let bytes = encode_frame(FrameKind::TableMeta, 0x5a, b"abc");
/// assert_eq!(bytes.len(), 24 + 3 + 4);
/// let f = decode_frame(&bytes)?;
/// assert_eq!((f.kind, f.flags, f.body), (FrameKind::TableMeta, 0x5a, &b"abc"[..]));
/// assert_eq!(f.crc32, 0xB026_B5DF);
///
/// // A truncated frame is a typed error naming the bytes it needed.
/// assert_eq!(
///     decode_frame(&bytes[..30]),
///     Err(CodecError::Truncated { needed: 31, found: 30 })
/// );
/// # Ok::<(), CodecError>(())
/// ```
pub fn decode(bytes: &[u8]) -> Result<Frame<'_>, CodecError> {
    // The magic first, once its four bytes are there: bytes of another
    // kind (a text file, say) are "not a filterstore record" whatever their
    // length, not a truncated one.
    if let Some(found) = bytes.first_chunk::<4>().filter(|m| **m != MAGIC) {
        return Err(CodecError::BadMagic { found: *found });
    }
    if bytes.len() < OVERHEAD {
        return Err(CodecError::Truncated {
            needed: OVERHEAD as u64,
            found: bytes.len() as u64,
        });
    }
    let mut r = ByteReader::new(bytes);
    let header = read_header(&mut r)?;
    let body = take_body(&mut r, header.body_len, bytes.len())?;
    let stored = r.u32()?;
    r.finish()?;
    let computed = crc32fast::hash(&bytes[..HEADER_LEN + body.len()]);
    if stored != computed {
        return Err(CodecError::ChecksumMismatch { stored, computed });
    }
    Ok(Frame {
        version: header.version,
        min_reader: header.min_reader,
        kind: header.kind,
        flags: header.flags,
        body,
        crc32: stored,
    })
}

/// The fields of a frame header.
struct Header {
    version: u16,
    min_reader: u16,
    kind: FrameKind,
    flags: u8,
    body_len: u64,
}

/// Reads the 24-byte header: magic, versions, kind, reserved bytes.
fn read_header(r: &mut ByteReader<'_>) -> Result<Header, CodecError> {
    let magic = r.array::<4>()?;
    if magic != MAGIC {
        return Err(CodecError::BadMagic { found: magic });
    }
    let version = r.u16()?;
    let min_reader = r.u16()?;
    check_versions(version, min_reader)?;
    let kind_id = r.u8()?;
    let kind = FrameKind::from_id(kind_id).ok_or(CodecError::UnknownKind(kind_id))?;
    let flags = r.u8()?;
    let reserved_a = r.array::<2>()?;
    let body_len = r.u64()?;
    let reserved_b = r.array::<4>()?;
    if reserved_a != [0, 0] || reserved_b != [0, 0, 0, 0] {
        return Err(CodecError::ReservedNotZero);
    }
    debug_assert_eq!(r.position(), HEADER_LEN);
    Ok(Header {
        version,
        min_reader,
        kind,
        flags,
        body_len,
    })
}

/// The version rules of `docs/FORMAT.md` § 13.
fn check_versions(version: u16, min_reader: u16) -> Result<(), CodecError> {
    if min_reader > FORMAT_VERSION || version < min_reader {
        return Err(CodecError::UnsupportedVersion {
            found: version,
            min_reader,
            supported: FORMAT_VERSION,
        });
    }
    // Version 0 was never written: a zero here is corruption, not history.
    if version < MIN_READ_VERSION || min_reader == 0 {
        return Err(CodecError::VersionTooOld {
            found: version,
            min_reader,
            oldest: MIN_READ_VERSION,
        });
    }
    Ok(())
}

/// The body, after checking the declared length against the bytes present
/// (all but the CRC trailer): neither more nor fewer.
fn take_body<'a>(
    r: &mut ByteReader<'a>,
    body_len: u64,
    total: usize,
) -> Result<&'a [u8], CodecError> {
    let available = (r.remaining() - TRAILER_LEN) as u64;
    if body_len > available {
        return Err(CodecError::Truncated {
            needed: body_len.saturating_add(OVERHEAD as u64),
            found: total as u64,
        });
    }
    if body_len < available {
        return Err(CodecError::TrailingBytes {
            extra: available - body_len,
        });
    }
    r.take(body_len)
}

/// Decodes a frame and checks that it holds `kind`.
#[cfg_attr(not(feature = "store"), allow(dead_code))]
pub fn decode_kind(bytes: &[u8], kind: FrameKind) -> Result<Frame<'_>, CodecError> {
    let f = decode(bytes)?;
    if f.kind != kind {
        return Err(CodecError::WrongKind {
            expected: kind.name(),
            found: f.kind.name(),
        });
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CRC bytes were computed independently with Python's `zlib.crc32`
    /// (the same IEEE CRC-32 as `crc32fast`).
    #[test]
    fn golden_bytes() {
        let f = encode(FrameKind::TableMeta, 0x5a, b"abc");
        assert_eq!(
            f,
            [
                b'F', b'S', b'T', b'R', 1, 0, 1, 0, 4, 0x5a, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                0, b'a', b'b', b'c', 0xdf, 0xb5, 0x26, 0xb0
            ]
        );
        let d = decode(&f).unwrap();
        assert_eq!(d.body, b"abc");
        assert_eq!(d.kind, FrameKind::TableMeta);
        assert_eq!(d.flags, 0x5a);
    }

    #[test]
    fn every_flip_and_truncation_is_refused() {
        let f = encode(FrameKind::BitFilter, 0, &[7u8; 40]);
        for i in 0..f.len() {
            for bit in 0..8 {
                let mut g = f.clone();
                g[i] ^= 1 << bit;
                assert!(decode(&g).is_err(), "flip at byte {i} bit {bit} accepted");
            }
        }
        for len in 0..f.len() {
            assert!(decode(&f[..len]).is_err(), "truncation to {len} accepted");
        }
    }

    /// Bytes that do not start with the magic are refused as such, however
    /// few: a 12-byte text file is not a filterstore record, rather than a
    /// truncated one. Fewer than four bytes cannot show the magic.
    #[test]
    fn the_magic_is_checked_before_the_length() {
        assert_eq!(
            decode(b"hello world\n"),
            Err(CodecError::BadMagic { found: *b"hell" })
        );
        assert_eq!(
            decode(b"FSTX"),
            Err(CodecError::BadMagic { found: *b"FSTX" })
        );
        assert_eq!(
            decode(b"FSTR"),
            Err(CodecError::Truncated {
                needed: 28,
                found: 4
            })
        );
        assert_eq!(
            decode(b"he"),
            Err(CodecError::Truncated {
                needed: 28,
                found: 2
            })
        );
    }

    #[test]
    fn newer_version_is_a_typed_error() {
        let f = encode_versioned(FrameKind::Catalog, 0, b"", 9, 9);
        assert!(matches!(
            decode(&f),
            Err(CodecError::UnsupportedVersion { found: 9, .. })
        ));
        // A newer writer that older readers may still read is accepted.
        let f = encode_versioned(FrameKind::Catalog, 0, b"", 9, 1);
        assert_eq!(decode(&f).unwrap().version, 9);
        // Versions 2 to 6 are read; version 7 is not (yet).
        let f = encode_versioned(FrameKind::ExchangeFull, 0, b"", 2, 2);
        assert_eq!((decode(&f).unwrap().version, FORMAT_VERSION), (2, 6));
        let f = encode_versioned(FrameKind::TableState, 0, b"", 3, 3);
        assert_eq!(decode(&f).unwrap().version, 3);
        let f = encode_versioned(FrameKind::BitFilter, 0, b"", 4, 4);
        assert_eq!(decode(&f).unwrap().version, 4);
        let f = encode_with_version(FrameKind::BitFilter, 0, 0, 2, |_| {});
        assert_eq!(
            (decode(&f).unwrap().version, decode(&f).unwrap().min_reader),
            (2, 2)
        );
        let f = encode_versioned(FrameKind::SealedMeta, 0, b"", 4, 4);
        assert_eq!(decode(&f).unwrap().version, 4);
        let f = encode_versioned(FrameKind::TableState, 0, b"", 5, 5);
        assert_eq!(decode(&f).unwrap().version, 5);
        let f = encode_versioned(FrameKind::BitFilter, 0, b"", 6, 6);
        assert_eq!(decode(&f).unwrap().version, 6);
        let f = encode_versioned(FrameKind::ExchangeFull, 0, b"", 7, 7);
        assert_eq!(
            decode(&f),
            Err(CodecError::UnsupportedVersion {
                found: 7,
                min_reader: 7,
                supported: 6
            })
        );
    }

    #[test]
    fn version_zero_is_refused() {
        for (version, min_reader) in [(0, 0), (1, 0)] {
            let f = encode_versioned(FrameKind::Catalog, 0, b"", version, min_reader);
            assert_eq!(
                decode(&f),
                Err(CodecError::VersionTooOld {
                    found: version,
                    min_reader,
                    oldest: MIN_READ_VERSION
                })
            );
        }
    }

    #[test]
    fn hostile_length_does_not_allocate() {
        let mut f = encode(FrameKind::BitFilter, 0, b"");
        f[12..20].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(decode(&f), Err(CodecError::Truncated { .. })));
    }
}
