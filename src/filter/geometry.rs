//! The geometry every filter shares: the two layouts and the block, word
//! and size constants. A leaf module: `hash` (which derives positions) and
//! `params` (which sizes filters) both build on it, and it imports neither.
//! The byte layout itself is drawn once, in docs/FORMAT.md.

use crate::error::ParamError;

/// Bits in one block of the blocked layout: one 64-byte cache line.
pub const BLOCK_BITS: u64 = 512;
/// Bits in one storage word.
pub const WORD_BITS: u64 = 64;
/// Words in one block.
pub const WORDS_PER_BLOCK: usize = (BLOCK_BITS / WORD_BITS) as usize;
/// The largest number of hash functions accepted. Optimal `k` reaches 22 at 32
/// bits per key (Summary Cache Table 1); beyond 32 every lookup only gets slower.
pub const MAX_K: u32 = 32;
/// The largest filter accepted: 2^40 bits (128 GiB). Larger requests are refused
/// before any allocation is attempted.
pub const MAX_M_BITS: u64 = 1 << 40;
/// The smallest filter accepted.
pub const MIN_M_BITS: u64 = 64;

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
}

impl Layout {
    /// Stable one-byte identifier used in every persisted header.
    pub fn id(self) -> u8 {
        match self {
            Layout::Standard => 1,
            Layout::Blocked => 2,
        }
    }

    /// Inverse of [`Layout::id`].
    pub fn from_id(id: u8) -> Option<Layout> {
        match id {
            1 => Some(Layout::Standard),
            2 => Some(Layout::Blocked),
            _ => None,
        }
    }

    /// Lower-case name, as used by the CLI and in JSON output.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Standard => "standard",
            Layout::Blocked => "blocked",
        }
    }
}

impl std::str::FromStr for Layout {
    type Err = ParamError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "standard" => Ok(Layout::Standard),
            "blocked" => Ok(Layout::Blocked),
            other => Err(ParamError::UnknownLayout(other.to_string())),
        }
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}
