//! The AVX2 probe of sectorized positions (the blocked layout hashed with
//! XXH3-64 sectorized: `hash::sector_masks`, the reference). A block held
//! in two registers has 32-bit word `i` in lane `i` of the first and word
//! `i + 8` in lane `i` of the second, so sector `i` (words `i` and `i + 8`)
//! is lane `i` of both. One `vpmulld` gives the eight products
//! `x · lo32(SALT[i])`, whose top 6 bits are the offsets `r`: bit 5 of `r`
//! (the product's sign) picks the sector's word, `r & 31` the bit in it (two
//! shifts and one `vpsllvd` of 1). A lookup blends each lane's word out of
//! the two registers by that sign and tests all eight with one `vptest`; an
//! insert splits the bits into the two registers' masks by it.

use super::SALT_ROWS;
use crate::filter::geometry::WORDS_PER_BLOCK;
use std::arch::x86_64::*;

/// A sectorized key's products and bit masks: lane `i` of the first is
/// `x · lo32(SALT[i])`, whose top bit (bit 5 of the offset `r`) says which
/// of the sector's two words holds its bit; lane `i` of the second is
/// `1 << (r & 31)`, that bit within the word.
///
/// # Safety
/// The CPU must support AVX2 (callers hold an [`super::Avx2`]).
#[inline(always)]
unsafe fn sector_parts(x: u32) -> (__m256i, __m256i) {
    // SAFETY: AVX2 per this function's contract; the salt load reads a
    // 32-byte aligned row of 32 bytes (`SaltRow` is `align(32)`).
    unsafe {
        let salts = _mm256_load_si256(SALT_ROWS[0].0[0].as_ptr().cast::<__m256i>());
        let top = _mm256_mullo_epi32(_mm256_set1_epi32(x as i32), salts);
        let bit = _mm256_srli_epi32::<27>(_mm256_slli_epi32::<1>(top));
        (top, _mm256_sllv_epi32(_mm256_set1_epi32(1), bit))
    }
}

/// A sectorized key's masks for the block's two registers (32-bit words
/// 0–7 and 8–15): each lane's bit goes to the first where the product's
/// top bit is clear, else to the second.
///
/// # Safety
/// The CPU must support AVX2 (callers hold an [`super::Avx2`]).
#[inline(always)]
pub(super) unsafe fn sector_mask_registers(x: u32) -> (__m256i, __m256i) {
    // SAFETY: AVX2 per this function's contract.
    unsafe {
        let (top, m) = sector_parts(x);
        let high = _mm256_srai_epi32::<31>(top);
        (_mm256_andnot_si256(high, m), _mm256_and_si256(high, m))
    }
}

/// Whether the eight sector bits of `x` are all set in the block held in
/// `lo` and `hi`: each sector's word picked by a blend on the product's top
/// bit, then one `vptest` (CF: no mask bit is clear in the words), as
/// sbbf-rs-safe tests its one register. Testing the two registers against
/// two masks took four instructions more (among them a shift and an AND
/// that LLVM adds to zero the lanes of a shift by 32 or more) and was
/// slower: 5.26–5.32 ns per 1M-key lookup against 4.80–4.87 in a lab loop
/// (`docs/BENCHMARKS.md`, "Sectorized positions: hash id 4").
///
/// # Safety
/// The CPU must support AVX2 (callers hold an [`super::Avx2`]).
#[inline(always)]
pub(super) unsafe fn registers_have_sectors(lo: __m256i, hi: __m256i, x: u32) -> bool {
    // SAFETY: AVX2 per this function's contract.
    unsafe {
        let (top, m) = sector_parts(x);
        let words = _mm256_castps_si256(_mm256_blendv_ps(
            _mm256_castsi256_ps(lo),
            _mm256_castsi256_ps(hi),
            _mm256_castsi256_ps(top),
        ));
        _mm256_testc_si256(words, m) == 1
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
