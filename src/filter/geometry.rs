//! The geometry every filter shares: the three layouts and the block, word
//! and size constants. A leaf module: `hash` (which derives positions) and
//! `params` (which sizes filters) both build on it, and it imports neither.
//! The byte layout itself is drawn once, in docs/FORMAT.md.

use crate::error::ParamError;

/// Bits in one block of the blocked layout: one 64-byte cache line.
pub const BLOCK_BITS: u64 = 512;
/// Bits in one storage word.
pub(crate) const WORD_BITS: u64 = 64;
/// Words in one block.
pub(crate) const WORDS_PER_BLOCK: usize = (BLOCK_BITS / WORD_BITS) as usize;
/// Bytes in one block.
pub(crate) const BLOCK_BYTES: usize = (BLOCK_BITS / 8) as usize;
/// The largest number of hash functions accepted. Optimal `k` reaches 22 at 32
/// bits per key (Summary Cache Table 1); beyond 32 every lookup only gets slower.
pub const MAX_K: u32 = 32;
/// The largest filter accepted: 2^40 bits (128 GiB). Larger requests are refused
/// before any allocation is attempted.
pub const MAX_M_BITS: u64 = 1 << 40;
/// The smallest filter accepted.
pub const MIN_M_BITS: u64 = 64;
/// Bits in one block of the split-block layout (Parquet's SBBF): eight
/// 32-bit lanes, half a 64-byte line.
pub const SPLIT_BLOCK_BITS: u64 = 256;
/// Bits a key sets in the split-block layout: one per 32-bit lane.
pub const SPLIT_K: u32 = 8;
/// The most blocks a split-block filter may have: the Parquet specification
/// allows `1 <= z < 2^31` (64 GiB); the block index is computed from the
/// hash's upper 32 bits times `z`, exact for any such `z`.
pub const MAX_SPLIT_BLOCKS: u64 = (1 << 31) - 1;

/// Where a key's `k` positions may fall.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Positions anywhere in `m`. Matches the classical theory exactly; a
    /// lookup of a present key touches up to `k` cache lines.
    Standard,
    /// All positions of a key inside one 512-bit block (one cache line), and
    /// its counters inside one 256-byte counter page. About 17% more false
    /// positives than `Standard` at 10 bits per key for the same `m`; the
    /// sizing below compensates by choosing a slightly larger `m`.
    Blocked,
    /// Parquet's split-block Bloom filter (SBBF), bit for bit: 256-bit
    /// blocks of eight 32-bit lanes, one bit per lane (`k = 8`), hashed with
    /// XXH64, seed 0 ([`crate::HashSpec::xxh64`]). Its bytes are an SBBF
    /// bitset that every Parquet reader (arrow-rs, parquet-mr, Impala,
    /// DuckDB) reads, and its lookup is one vector multiply and one test.
    /// It needs 10.5 bits per key for a 1% rate where the blocked layout
    /// needs 9.9 (`FilterParams::for_capacity` sizes it by its own model).
    SplitBlock,
}

impl Layout {
    /// Stable one-byte identifier used in every persisted header.
    pub fn id(self) -> u8 {
        match self {
            Layout::Standard => 1,
            Layout::Blocked => 2,
            Layout::SplitBlock => 3,
        }
    }

    /// Inverse of [`Layout::id`].
    pub fn from_id(id: u8) -> Option<Layout> {
        match id {
            1 => Some(Layout::Standard),
            2 => Some(Layout::Blocked),
            3 => Some(Layout::SplitBlock),
            _ => None,
        }
    }

    /// Lower-case name, as used by the CLI and in JSON output.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Standard => "standard",
            Layout::Blocked => "blocked",
            Layout::SplitBlock => "split-block",
        }
    }

    /// Every layout, in id order.
    pub const ALL: [Layout; 3] = [Layout::Standard, Layout::Blocked, Layout::SplitBlock];
}

impl std::str::FromStr for Layout {
    type Err = ParamError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "standard" => Ok(Layout::Standard),
            "blocked" => Ok(Layout::Blocked),
            "split-block" => Ok(Layout::SplitBlock),
            other => Err(ParamError::UnknownLayout(other.to_string())),
        }
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}
