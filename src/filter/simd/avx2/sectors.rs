//! The AVX2 probe of sectorized positions (the blocked layout hashed with
//! XXH3-64 sectorized: `hash::sector_masks`, the reference). A block held
//! in two registers has 32-bit word `i` in lane `i` of the first and word
//! `i + 8` in lane `i` of the second, so sector `i` (words `i` and `i + 8`)
//! is lane `i` of both: a key's eight masks are one `vpmulld` for the eight
//! offsets `r = (x · lo32(SALT[i])) >> 26` and one `vpsllvd` of 1 per
//! register, by `r` and by `r − 32`. `vpsllvd` gives 0 for a count of 32 or
//! more (Intel SDM, VPSLLVD: "If the value specified by the count operand
//! is greater than 31, the destination is zeroed"; a count is read as
//! unsigned, so `r − 32` below 0 is above 31), which leaves each lane's bit
//! in exactly one of the two registers.

use super::SALT_ROWS;
use crate::filter::geometry::WORDS_PER_BLOCK;
use std::arch::x86_64::*;

/// A sectorized key's masks for the block's two registers (32-bit words
/// 0–7 and 8–15).
///
/// # Safety
/// The CPU must support AVX2 (callers hold an [`super::Avx2`]).
#[inline(always)]
pub(super) unsafe fn sector_mask_registers(x: u32) -> (__m256i, __m256i) {
    // SAFETY: AVX2 per this function's contract; the salt load reads a
    // 32-byte aligned row of 32 bytes (`SaltRow` is `align(32)`).
    unsafe {
        let salts = _mm256_load_si256(SALT_ROWS[0].0[0].as_ptr().cast::<__m256i>());
        let r = _mm256_srli_epi32::<26>(_mm256_mullo_epi32(_mm256_set1_epi32(x as i32), salts));
        let one = _mm256_set1_epi32(1);
        let lo = _mm256_sllv_epi32(one, r);
        let hi = _mm256_sllv_epi32(one, _mm256_sub_epi32(r, _mm256_set1_epi32(32)));
        (lo, hi)
    }
}

/// Whether the eight sector bits of `x` are all set in the block held in
/// `lo` and `hi`: one `vptest` of what the masks have and the block lacks
/// (two `vptest`, one per register, took 11.5 against 9.1 ns per lookup at
/// 10M keys in a lab loop).
///
/// # Safety
/// The CPU must support AVX2 (callers hold an [`super::Avx2`]).
#[inline(always)]
pub(super) unsafe fn registers_have_sectors(lo: __m256i, hi: __m256i, x: u32) -> bool {
    // SAFETY: AVX2 per this function's contract.
    unsafe {
        let (m_lo, m_hi) = sector_mask_registers(x);
        let missing = _mm256_or_si256(_mm256_andnot_si256(lo, m_lo), _mm256_andnot_si256(hi, m_hi));
        _mm256_testz_si256(missing, missing) == 1
    }
}

/// The two mask registers as the block's eight 64-bit word masks.
///
/// # Safety
/// The CPU must support AVX (callers hold an [`super::Avx2`]).
#[inline(always)]
pub(super) unsafe fn masks_array((lo, hi): (__m256i, __m256i)) -> [u64; WORDS_PER_BLOCK] {
    let mut masks = [0u64; WORDS_PER_BLOCK];
    // SAFETY: AVX per this function's contract; the stores write the 64
    // bytes of the local `masks` (`storeu`: no alignment needed).
    unsafe {
        let p = masks.as_mut_ptr().cast::<__m256i>();
        _mm256_storeu_si256(p, lo);
        _mm256_storeu_si256(p.add(1), hi);
    }
    masks
}

#[cfg(test)]
mod tests {
    use super::super::Avx2;
    use crate::filter::hash::sector_masks;
    use crate::filter::simd::{Isa, Probe};

    /// Every offset of every sector: `x` walks the products' top bits
    /// through all 64 values of each lane, and more.
    #[test]
    fn sector_masks_match_the_reference() {
        if Isa::detect() != Isa::Avx2 {
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        let probe = Avx2(());
        let mut x = 0x9e37_79b9u32;
        for _ in 0..100_000 {
            x = x.wrapping_mul(0x0019_660d).wrapping_add(0x3c6e_f35f);
            let want = sector_masks(x);
            assert_eq!(probe.sector_masks(x), want, "x = {x:#x}");
            assert!(probe.sectors_has_all(&want, x));
            let ones: u32 = want.iter().map(|w| w.count_ones()).sum();
            assert_eq!(ones, 8, "one bit per sector, x = {x:#x}");
        }
    }
}
