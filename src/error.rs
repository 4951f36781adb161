//! Error types, one enum per family of operations. Every variant says what was
//! found and what the caller can do about it.

use thiserror::Error;

/// Invalid filter parameters: refused before anything is allocated.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum ParamError {
    /// A filter must be sized for at least one key.
    #[error("expected number of keys must be at least 1")]
    ZeroKeys,
    /// The false-positive rate must lie strictly between 0 and 1.
    #[error("false-positive rate {0} is outside (0, 1); use e.g. 0.01 for 1%")]
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
    /// Bits per key must be a finite number in `1..=1024`.
    #[error("bits per key {0} is outside 1..=1024")]
    BitsPerKeyOutOfRange(f64),
    /// The requested capacity and rate need a filter larger than supported.
    #[error("{n} keys at false-positive rate {fp} need more than 2^40 bits; split the table or raise the rate")]
    TooLarge {
        /// Keys requested.
        n: u64,
        /// Rate requested.
        fp: f64,
    },
    /// The layout name is not known.
    #[error("unknown layout {0:?}; expected \"blocked\" or \"standard\"")]
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
