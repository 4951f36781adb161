//! An insert's word masks for the AVX2 probe (`avx2_block_masks`), built
//! one of two ways ([`MaskWay`]).
//!
//! * **Windows.** Position `p` of a block (0 to 511) is bit `p % 8` of byte
//!   `p / 8` (the block's eight words in memory order, little-endian).
//!   [`ONE_HOTS`] holds eight tables of 128 bytes, table `b` all zero but
//!   byte 64, which is `1 << b`: the 64 bytes of table `p % 8` from byte
//!   `64 - p / 8` are the block with position `p` alone set. A key's masks
//!   are the OR of its positions' windows, two unaligned 32-byte loads
//!   each, once the window's offset is in a general register (`vpextrd`).
//! * **Shifts.** Per position a broadcast and, in each of two registers of
//!   sixteen 32-bit lanes, a subtract of the lanes' first positions and a
//!   `vpsllvd` of 1 (a count of 32 or more gives 0): about eight vector
//!   instructions per position, four of them shifts or shuffles, and no
//!   load.
//!
//! This Zen 4 runs shifts and shuffles two per cycle where it runs four adds
//! or ORs (lab, independent chains of one instruction: `vpsllvd`, `vpermd`,
//! `vpshufb` and `vpmulld` 0.137 ns each, `vpaddd` and `vpor` 0.07). Lab,
//! 1M keys (`docs/BENCHMARKS.md`): the masks alone, seven positions, 5.5 ns
//! per key by shifts and 3.4 by windows; a key-by-key `insert_mut` of a
//! `u64` id written into the loop 8.1 and 6.5 (sbbf-rs-safe's insert 4.1).
//! The bulk inserts, whose loops keep the load pipes busy with keys,
//! prefetches and blocks, took 4–7% longer by windows, so they build by
//! shifts.

use super::super::MaskWay;
use crate::filter::geometry::WORDS_PER_BLOCK;

/// The masks of the first `min(k, 8)` of a block's positions, given in
/// the eight 32-bit lanes of `pos` (their bits from 9 up are ignored), as
/// the block's eight words, built the `way` given.
///
/// # Safety
/// The CPU must support AVX2 (callers hold an `Avx2`).
#[inline(always)]
pub(super) unsafe fn avx2_block_masks(
    pos: std::arch::x86_64::__m256i,
    k: u32,
    way: MaskWay,
) -> [u64; WORDS_PER_BLOCK] {
    // SAFETY: AVX2 per this function's contract, as both require.
    unsafe {
        match way {
            MaskWay::Windows => window_masks(pos, k),
            MaskWay::Shifts => shifted_masks(pos, k),
        }
    }
}

/// Eight tables of 128 bytes, table `b` zero but byte 64 (`1 << b`): the
/// one-hot windows of the module docs. 1 KiB, aligned to 128 bytes, so
/// each table starts a cache line.
#[repr(C, align(128))]
struct OneHots([[u8; 128]; 8]);

/// The one table of windows.
static ONE_HOTS: OneHots = {
    let mut tables = [[0u8; 128]; 8];
    let mut b = 0;
    while b < 8 {
        tables[b][64] = 1 << b;
        b += 1;
    }
    OneHots(tables)
};

/// [`avx2_block_masks`] by windows ([`MaskWay::Windows`]): the OR of each
/// position's window of [`ONE_HOTS`] (the module docs). The windows' offsets are computed for
/// all eight lanes at once and read back one by one from a local array (a
/// 32-byte store forwards to each 4-byte load); the masks never go through
/// memory a word at a time, as a scatter of 8-byte ORs read back by a
/// 32-byte load would (not forwarded: the load waits for the stores).
///
/// # Safety
/// The CPU must support AVX2 (callers hold an `Avx2`).
#[inline(always)]
unsafe fn window_masks(pos: std::arch::x86_64::__m256i, k: u32) -> [u64; WORDS_PER_BLOCK] {
    use std::arch::x86_64::*;
    let mut masks = [0u64; WORDS_PER_BLOCK];
    let mut starts = [0u32; 8];
    let table = ONE_HOTS.0.as_ptr().cast::<u8>();
    // SAFETY: AVX2 per this function's contract. The stores write the 32
    // bytes of the local `starts` and the 64 of the local `masks` (`storeu`:
    // no alignment needed). Each window's loads: with `p = pos & 511`, the
    // window starts at `s = 128 · (p % 8) + 64 − p / 8`, in `128 · (p % 8)
    // + 1 ..= 128 · (p % 8) + 64` since `p / 8 ≤ 63`, and the two loads read
    // bytes `s .. s + 64`, which end at most at `128 · (p % 8) + 128 ≤
    // 1024`: inside the 1,024 bytes of `ONE_HOTS` (`loadu`: no alignment
    // needed), a static that is never written.
    unsafe {
        let p = _mm256_and_si256(pos, _mm256_set1_epi32(511));
        let table_of_bit = _mm256_slli_epi32::<7>(_mm256_and_si256(p, _mm256_set1_epi32(7)));
        let window = _mm256_sub_epi32(
            _mm256_add_epi32(table_of_bit, _mm256_set1_epi32(64)),
            _mm256_srli_epi32::<3>(p),
        );
        _mm256_storeu_si256(starts.as_mut_ptr().cast::<__m256i>(), window);
        let (mut lo, mut hi) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        for &start in &starts[..k.min(8) as usize] {
            let w = table.add(start as usize);
            lo = _mm256_or_si256(lo, _mm256_loadu_si256(w.cast::<__m256i>()));
            hi = _mm256_or_si256(hi, _mm256_loadu_si256(w.add(32).cast::<__m256i>()));
        }
        let out = masks.as_mut_ptr().cast::<__m256i>();
        _mm256_storeu_si256(out, lo);
        _mm256_storeu_si256(out.add(1), hi);
    }
    masks
}

/// [`avx2_block_masks`] in registers ([`MaskWay::Shifts`]): the block
/// taken as sixteen 32-bit words in two registers, position `p` is bit
/// `p % 32` of word `p / 32`. Per position, one broadcast and, in each
/// register, a subtract of the words' first positions and a `vpsllvd` of 1
/// by the difference: only the position's own word gets a count below 32;
/// every other difference is 32 or more (or wrapped), and `vpsllvd` by
/// such a count gives 0.
///
/// # Safety
/// The CPU must support AVX2 (callers hold an `Avx2`).
#[inline(always)]
unsafe fn shifted_masks(pos: std::arch::x86_64::__m256i, k: u32) -> [u64; WORDS_PER_BLOCK] {
    use std::arch::x86_64::*;
    let mut masks = [0u64; WORDS_PER_BLOCK];
    // SAFETY: AVX2 per this function's contract; the stores write the 64
    // bytes of the local `masks` (`storeu`: no alignment needed).
    unsafe {
        let pos = _mm256_and_si256(pos, _mm256_set1_epi32(511));
        let first_lo = _mm256_setr_epi32(0, 32, 64, 96, 128, 160, 192, 224);
        let first_hi = _mm256_setr_epi32(256, 288, 320, 352, 384, 416, 448, 480);
        let one = _mm256_set1_epi32(1);
        let (mut lo, mut hi) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        for i in 0..k.min(8) as i32 {
            let p = _mm256_permutevar8x32_epi32(pos, _mm256_set1_epi32(i));
            lo = _mm256_or_si256(lo, _mm256_sllv_epi32(one, _mm256_sub_epi32(p, first_lo)));
            hi = _mm256_or_si256(hi, _mm256_sllv_epi32(one, _mm256_sub_epi32(p, first_hi)));
        }
        let out = masks.as_mut_ptr().cast::<__m256i>();
        _mm256_storeu_si256(out, lo);
        _mm256_storeu_si256(out.add(1), hi);
    }
    masks
}

#[cfg(test)]
mod tests {
    use super::ONE_HOTS;

    /// Every window of the table is the block with its position alone set,
    /// read through the same offsets as `avx2_block_masks`, without AVX2:
    /// a table byte out of place, or an offset off by one, fails it.
    #[test]
    fn each_window_is_its_positions_one_hot() {
        let table: Vec<u8> = ONE_HOTS.0.iter().flatten().copied().collect();
        assert_eq!(table.len(), 1024);
        for p in 0..512usize {
            let start = 128 * (p % 8) + 64 - p / 8;
            let window = &table[start..start + 64];
            for (byte, &got) in window.iter().enumerate() {
                let want = if byte == p / 8 { 1u8 << (p % 8) } else { 0 };
                assert_eq!(got, want, "position {p}, byte {byte}");
            }
        }
    }
}
