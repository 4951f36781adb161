//! The split-block layout's positions: Parquet's split-block Bloom filter
//! (SBBF), as the Parquet specification (`BloomFilter.md` of
//! apache/parquet-format, "Technical Approach") defines it, bit for bit.
//!
//! * A key's hash `h` is XXH64 of its bytes, seed 0 (`HashSpec::xxh64`;
//!   `KeyHash::h1`).
//! * The filter has `z` blocks of 256 bits, `1 <= z < 2^31`. The key's block
//!   is `((h >> 32) · z) >> 32`: the upper 32 bits of the hash, multiplied
//!   by `z` in 64 bits, shifted down (multiply-shift: no division, and
//!   halving `z` halves every index, so a filter folds by OR-ing neighbours).
//! * A block is eight 32-bit lanes. With `x` the lower 32 bits of `h`, the
//!   key's bit in lane `i` is `(x · SALT[i]) >> 27` (a wrapping 32-bit
//!   product, top 5 bits), `SALT` being the specification's eight constants
//!   ([`SPLIT_SALTS`]).
//! * Bytes: lane `i` of block `b` is the little-endian `u32` at byte
//!   `32·b + 4·i`. In filterstore's numbering of positions (bit `j` of the
//!   filter is bit `j mod 8` of byte `j / 8`) the key's positions are
//!   `256·b + 32·i + bit_i`: a filter's bit array is the SBBF bitset itself.
//!
//! Because the hash is unseeded, anyone can compute which keys share a
//! block: see `HashSpec::xxh64` for what that means for keys an adversary
//! chooses.

use crate::filter::geometry::SPLIT_K;

/// The Parquet specification's salts: lane `i`'s bit is the top 5 bits of
/// `x · SPLIT_SALTS[i]` (wrapping 32-bit product).
pub const SPLIT_SALTS: [u32; SPLIT_K as usize] = [
    0x47b6_137b,
    0x4497_4d91,
    0x8824_ad5b,
    0xa2b7_289d,
    0x7054_95c7,
    0x2df1_424b,
    0x9efc_4947,
    0x5c6b_fb31,
];

/// The block of hash `h` among `blocks` (`1 <= blocks < 2^32`): the
/// specification's `((h >> 32) · z) >> 32`, exact in 64 bits.
#[inline(always)]
pub fn split_block_index(h: u64, blocks: u64) -> u64 {
    ((h >> 32) * blocks) >> 32
}

/// The bit (`0..32`) of lane `i` (`< 8`) for the lower 32 bits `x` of a
/// key's hash.
#[inline(always)]
pub(crate) fn split_lane_bit(x: u32, i: usize) -> u32 {
    x.wrapping_mul(SPLIT_SALTS[i % SPLIT_SALTS.len()]) >> 27
}

/// The eight lane masks of `x` (one bit each): what an insert ORs into the
/// key's block and a lookup tests.
#[inline(always)]
pub fn split_masks(x: u32) -> [u32; SPLIT_K as usize] {
    std::array::from_fn(|i| 1 << split_lane_bit(x, i))
}

/// The eight lane masks of `x` as the four 64-bit words of a block (lane
/// `2w` in the low half of word `w`, lane `2w + 1` in the high half: the
/// little-endian byte order of the bitset).
#[inline(always)]
pub(crate) fn split_word_masks(x: u32) -> [u64; 4] {
    let m = split_masks(x);
    std::array::from_fn(|w| u64::from(m[2 * w]) | u64::from(m[2 * w + 1]) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block index is the specification's formula, and stays below `z`
    /// at its extremes (the top hash with the most blocks allowed).
    #[test]
    fn block_index_is_multiply_shift_of_the_upper_half() {
        assert_eq!(split_block_index(u64::MAX, 1), 0);
        assert_eq!(split_block_index(u64::MAX, (1 << 31) - 1), (1 << 31) - 2);
        assert_eq!(
            split_block_index(0xFFFF_FFFF, 1 << 20),
            0,
            "lower half ignored"
        );
        assert_eq!(split_block_index(1 << 63, 10), 5);
        // Halving z halves the index (what folding relies on).
        for h in [
            0x1234_5678_9abc_def0u64,
            u64::MAX,
            1 << 40,
            0xdead_beef << 32,
        ] {
            assert_eq!(split_block_index(h, 512) / 2, split_block_index(h, 256));
        }
    }

    /// The masks are the specification's `Mask` function: one bit per lane,
    /// from the top five bits of `x · SALT[i]`; worked by hand for x = 1
    /// (the salts' own top five bits) and x = 0 (bit 0 everywhere).
    #[test]
    fn masks_follow_the_specification() {
        let salts_top: Vec<u32> = SPLIT_SALTS.iter().map(|s| s >> 27).collect();
        assert_eq!(salts_top, [8, 8, 17, 20, 14, 5, 19, 11]);
        assert_eq!(
            split_masks(1),
            std::array::from_fn(|i| 1u32 << salts_top[i])
        );
        assert_eq!(split_masks(0), [1; 8]);
        let w = split_word_masks(1);
        assert_eq!(w[0], 1 << 8 | 1 << (32 + 8));
        assert_eq!(w[3], 1 << 19 | 1 << (32 + 11));
    }
}
