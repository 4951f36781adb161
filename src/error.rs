//! Error types, one enum per family of operations. Every variant says what was
//! found and what the caller can do about it.

use thiserror::Error;

/// A rate for messages: plain decimals where they read well, scientific
/// notation otherwise (`1e-300`, not three hundred digits).
pub(crate) struct Rate(pub(crate) f64);

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let a = self.0.abs();
        if a == 0.0 || (1e-4..1e6).contains(&a) || !a.is_finite() {
            write!(f, "{}", self.0)
        } else {
            write!(f, "{:e}", self.0)
        }
    }
}

/// Invalid filter parameters: refused before anything is allocated.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum ParamError {
    /// A filter must be sized for at least one key.
    #[error("expected number of keys must be at least 1")]
    ZeroKeys,
    /// The false-positive rate must lie strictly between 0 and 1.
    #[error("false-positive rate {} is outside (0, 1); use e.g. 0.01 for 1%", Rate(*.0))]
    FpOutOfRange(f64),
    /// `k` is zero or larger than the supported maximum.
    #[error("number of hash functions k = {k} is outside 1..={max}")]
    KOutOfRange {
        /// The value given.
        k: u32,
        /// The largest supported value.
        max: u32,
    },
    /// `m` is outside the supported range.
    #[error("filter size m = {m} bits is outside {min}..={max}")]
    MOutOfRange {
        /// The value given.
        m: u64,
        /// The smallest supported value.
        min: u64,
        /// The largest supported value.
        max: u64,
    },
    /// The blocked layout needs whole 512-bit blocks.
    #[error("blocked layout needs m to be a multiple of 512 bits, got {m}")]
    BlockedMNotMultiple {
        /// The value given.
        m: u64,
    },
    /// The split-block layout (Parquet's SBBF) needs whole 256-bit blocks,
    /// `1 ..= 2^31 - 1` of them, and exactly `k = 8`.
    #[error("split-block layout needs m to be a multiple of 256 bits with 1..=2^31-1 blocks and k = 8 (one bit per 32-bit lane), got m = {m}, k = {k}")]
    SplitBlockShape {
        /// The `m` given.
        m: u64,
        /// The `k` given.
        k: u32,
    },
    /// The split-block layout hashes with XXH64, seed 0 (Parquet's hash: the
    /// filter's bits are then an SBBF), and only it hashes with XXH64.
    #[error("the {layout} layout cannot hash with {algo} seed {seed:#x}: the split-block layout hashes with xxh64 seed 0 (Parquet's hash), the standard one with xxh3-128, the blocked one with xxh3-128, xxh3-64 or xxh3-64-sectorized")]
    HashNotForLayout {
        /// The layout given.
        layout: &'static str,
        /// The hash algorithm given.
        algo: &'static str,
        /// The seed given.
        seed: u64,
    },
    /// The sectorized hash ([`crate::HashAlgo::Xxh3_64Sectorized`]) sets one
    /// bit in each of a block's eight sectors: `k` is 8.
    #[error("the xxh3-64-sectorized hash sets one bit in each of a block's eight sectors, so k must be 8, got k = {k}")]
    SectorizedK {
        /// The `k` given.
        k: u32,
    },
    /// Bits per key must be a finite number in `1..=1024`.
    #[error("bits per key {0} is outside 1..=1024")]
    BitsPerKeyOutOfRange(f64),
    /// The requested capacity and rate need a filter larger than supported.
    #[error("{n} keys at false-positive rate {} need more than 2^40 bits; split the table or raise the rate", Rate(*fp))]
    TooLarge {
        /// Keys requested.
        n: u64,
        /// Rate requested.
        fp: f64,
    },
    /// The layout name is not known.
    #[error("unknown layout {0:?}; expected \"blocked\", \"standard\" or \"split-block\"")]
    UnknownLayout(String),
    /// The memory for the filter could not be allocated.
    #[error("could not allocate {bytes} bytes for the filter")]
    AllocationFailed {
        /// Bytes requested.
        bytes: u64,
    },
}

/// Errors of filter operations on valid parameters.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum FilterError {
    /// Set operations need the same layout, m, k, hash algorithm and seed.
    #[error("filters are not compatible: {0}")]
    Incompatible(String),
    /// The filter cannot be halved.
    #[error("filter cannot be halved: {0}")]
    NotHalvable(&'static str),
    /// A remove was refused because one of the key's counters is zero: the key
    /// was never inserted. Nothing was changed.
    #[error("key is not in the counting filter (a counter is zero); nothing was changed")]
    NotPresent,
    /// A bit or counter array does not have the length the parameters imply.
    #[error("array has {found} bytes, parameters need {expected}")]
    LengthMismatch {
        /// Bytes the parameters need.
        expected: u64,
        /// Bytes present.
        found: u64,
    },
}

/// Errors decoding persisted or transmitted bytes. A filter that cannot be
/// decoded must be treated as "maybe" for every key, never as "absent".
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum CodecError {
    /// Fewer bytes than the structure needs.
    #[error("truncated: need {needed} bytes, found {found}")]
    Truncated {
        /// Bytes needed.
        needed: u64,
        /// Bytes present.
        found: u64,
    },
    /// Bytes after the end of the structure.
    #[error("{extra} unexpected bytes after the end of the record")]
    TrailingBytes {
        /// Extra bytes.
        extra: u64,
    },
    /// Not a filterstore record: the first four bytes are not the magic
    /// "FSTR" (a text file, another program's file).
    #[error("not a filterstore file or record: it starts with \"{}\", not \"FSTR\"", found.escape_ascii())]
    BadMagic {
        /// The first four bytes found.
        found: [u8; 4],
    },
    /// Written by a newer filterstore that this build cannot read.
    #[error("format version {found} needs a reader of version {min_reader} or newer; this build reads up to {supported}: upgrade filterstore")]
    UnsupportedVersion {
        /// Version found.
        found: u16,
        /// Minimum reader version the writer demanded.
        min_reader: u16,
        /// The newest version this build reads.
        supported: u16,
    },
    /// A version field older than any this build reads. Version 0 was never
    /// written, so today this means the bytes are corrupt.
    #[error("format version {found} (minimum reader {min_reader}) is older than the oldest this build reads ({oldest}): the record is corrupt, or must be migrated by the release that still reads it")]
    VersionTooOld {
        /// Version found.
        found: u16,
        /// Minimum reader version found.
        min_reader: u16,
        /// The oldest version this build reads.
        oldest: u16,
    },
    /// An identifier (layout, hash algorithm, codec, counter width) that this
    /// build does not know: written by a newer filterstore, or corrupt.
    #[error("unknown {what} id {found}; this build supports {supported}: upgrade filterstore, or re-export the filter with a supported {what}")]
    UnknownId {
        /// Which identifier ("layout", "hash algorithm", "codec", "counter width").
        what: &'static str,
        /// The value found.
        found: u64,
        /// The values this build supports, for the message.
        supported: &'static str,
    },
    /// A record kind this build does not know.
    #[error("unknown record kind {0}; known kinds are 1..=10")]
    UnknownKind(u8),
    /// A record of another kind than expected.
    #[error("expected a {expected} record, found a {found} record")]
    WrongKind {
        /// Kind expected.
        expected: &'static str,
        /// Kind found.
        found: &'static str,
    },
    /// Reserved bytes must be zero in this version.
    #[error("reserved bytes are not zero: corrupt, or written by an incompatible version")]
    ReservedNotZero,
    /// The CRC32 does not match the contents.
    #[error(
        "checksum mismatch: stored {stored:#010x}, computed {computed:#010x}; the data is corrupt"
    )]
    ChecksumMismatch {
        /// CRC stored in the record.
        stored: u32,
        /// CRC of the bytes present.
        computed: u32,
    },
    /// A value could not be encoded: a limit or a bug of the writer, not
    /// damage to any stored bytes. Nothing was written.
    #[error("could not encode {what}: {reason}; nothing was written")]
    Encode {
        /// What was being encoded.
        what: &'static str,
        /// Why it failed.
        reason: String,
    },
    /// A field holds a value that is not valid for it.
    #[error("invalid field {field}: {reason}")]
    InvalidField {
        /// The field's name.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}
