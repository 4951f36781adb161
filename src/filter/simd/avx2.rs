//! The AVX2 block probe (x86-64): see the parent module for what it computes
//! and why it is sound.

mod asm;
#[cfg(not(all(target_feature = "avx2", target_feature = "bmi2")))]
mod entry;
mod masks;
mod sectors;

use super::{MaskWay, Probe, SharedBlock, SplitShared};
use crate::filter::geometry::{BLOCK_BYTES, MAX_K, SPLIT_K, WORDS_PER_BLOCK};
use crate::filter::hash::{in_block_position, BLOCK_SALTS};
use crate::filter::split::SPLIT_SALTS;
use asm::{
    all_live_set, any_set, owned_block_registers, shared_block_registers, shared_split_register,
    store_shared_block, store_shared_split,
};
#[cfg(not(all(target_feature = "avx2", target_feature = "bmi2")))]
pub(super) use entry::{insert_avx2, insert_owned_avx2, insert_shared_avx2, lookup_avx2, run_avx2};
use masks::avx2_block_masks;
use sectors::{registers_have_sectors, sector_mask_registers};

/// The AVX2 probe: holding one means the CPU has AVX2, BMI1, BMI2 and POPCNT. Its field
/// is private to `filter::simd`, which makes one only
/// inside [`run_avx2`], [`lookup_avx2`], [`insert_avx2`],
/// [`insert_shared_avx2`] and [`insert_owned_avx2`] (called only
/// after `Isa::detect` said yes: `dispatch`, `LookupFn::best`,
/// `InsertFn::best`), and in `dispatch`, `LookupFn::call` and
/// `InsertFn::call` of a crate built for AVX2 and BMI2
/// (`cfg(target_feature)`), which runs only on such CPUs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx2(pub(super) ());

/// The salts split for 32-bit lanes, eight probes per row: `[lo, lo of the
/// odd lanes moved to the even ones, hi]`.
#[repr(C, align(32))]
struct SaltRow([[u32; 8]; 3]);

const SALT_ROWS: [SaltRow; (MAX_K / 8) as usize] = {
    let mut rows = [const { SaltRow([[0; 8]; 3]) }; (MAX_K / 8) as usize];
    let mut i = 0;
    while i < MAX_K as usize {
        let (r, j) = (i / 8, i % 8);
        let s = BLOCK_SALTS[i];
        rows[r].0[0][j] = s as u32;
        if j % 2 == 1 {
            rows[r].0[1][j - 1] = s as u32;
        }
        rows[r].0[2][j] = (s >> 32) as u32;
        i += 1;
    }
    rows
};

impl Probe for Avx2 {
    #[inline(always)]
    fn block_masks(self, h2: u64, k: u32, way: MaskWay) -> [u64; WORDS_PER_BLOCK] {
        use std::arch::x86_64::*;
        // SAFETY: holding an `Avx2` means AVX2 is there (its docs).
        let mut masks = unsafe {
            let h = [
                _mm256_set1_epi32(h2 as u32 as i32),
                _mm256_set1_epi32((h2 >> 32) as u32 as i32),
            ];
            avx2_block_masks(
                _mm256_srli_epi32::<23>(avx2_row_tops(h, &SALT_ROWS[0])),
                k,
                way,
            )
        };
        for i in 8..(k as usize).min(MAX_K as usize) {
            let (w, bit) = super::block_word_bit(in_block_position(h2, i));
            masks[w] |= bit;
        }
        masks
    }

    #[inline(always)]
    fn block_masks32(self, x: u32, k: u32, way: MaskWay) -> [u64; WORDS_PER_BLOCK] {
        use std::arch::x86_64::*;
        // SAFETY: holding an `Avx2` means AVX2 is there (its docs); the
        // salt load reads a 32-byte aligned row of 32 bytes.
        let mut masks = unsafe {
            let salts = _mm256_load_si256(SALT_ROWS[0].0[0].as_ptr().cast::<__m256i>());
            let tops = _mm256_mullo_epi32(_mm256_set1_epi32(x as i32), salts);
            avx2_block_masks(_mm256_srli_epi32::<23>(tops), k, way)
        };
        for i in 8..(k as usize).min(MAX_K as usize) {
            let (w, bit) = super::block_word_bit(in_block_position(u64::from(x) << 32, i));
            masks[w] |= bit;
        }
        masks
    }

    #[inline(always)]
    fn block_or_mut(self, block: &mut SharedBlock, masks: [u64; WORDS_PER_BLOCK]) -> bool {
        use std::arch::x86_64::*;
        let p = block.0.as_mut_ptr().cast::<__m256i>();
        // SAFETY: AVX2 as above. `p` points to a live block of 64 bytes,
        // 64-byte aligned (`SharedBlock`), borrowed exclusively (`&mut`): no
        // other access to it exists, atomic or not, so plain vector loads
        // and stores are race-free. `AtomicU64` has the size, alignment and
        // bit validity of `u64`, and any bits are a valid block.
        unsafe {
            let (m_lo, m_hi) = mask_registers(&masks);
            let (lo, hi) = (_mm256_load_si256(p), _mm256_load_si256(p.add(1)));
            _mm256_store_si256(p, _mm256_or_si256(lo, m_lo));
            _mm256_store_si256(p.add(1), _mm256_or_si256(hi, m_hi));
            _mm256_testc_si256(lo, m_lo) & _mm256_testc_si256(hi, m_hi) == 0
        }
    }

    #[inline(always)]
    fn block_has_all(self, words: &[u64; WORDS_PER_BLOCK], h2: u64, k: u32) -> bool {
        use std::arch::x86_64::*;
        // SAFETY: holding an `Avx2` means AVX2 is there (its docs). The
        // loads read the local `words` (64 bytes, in bounds; `loadu` needs
        // no alignment).
        unsafe {
            let lo = _mm256_loadu_si256(words.as_ptr().cast::<__m256i>());
            let hi = _mm256_loadu_si256(words.as_ptr().add(4).cast::<__m256i>());
            avx2_registers_have_all(lo, hi, h2, k)
        }
    }

    #[inline(always)]
    fn split_has_all(self, lanes: &[u32; SPLIT_K as usize], x: u32) -> bool {
        use std::arch::x86_64::*;
        // SAFETY: holding an `Avx2` means AVX2 is there (its docs); the
        // load reads the 32 bytes of the local `lanes` (`loadu`: no
        // alignment needed).
        unsafe {
            let block = _mm256_loadu_si256(lanes.as_ptr().cast::<__m256i>());
            split_block_has_masks(block, split_masks(x))
        }
    }

    #[inline(always)]
    fn bytes_block_has_all(self, bytes: &[u8; BLOCK_BYTES], h2: u64, k: u32) -> bool {
        // SAFETY: AVX2 as above, as `avx2_registers_have_all` requires.
        unsafe {
            let (lo, hi) = bytes_registers(bytes);
            avx2_registers_have_all(lo, hi, h2, k)
        }
    }

    #[inline(always)]
    fn bytes_block_has_all32(self, bytes: &[u8; BLOCK_BYTES], x: u32, k: u32) -> bool {
        // SAFETY: AVX2 as above, as `avx2_registers_have_all32` requires.
        unsafe {
            let (lo, hi) = bytes_registers(bytes);
            avx2_registers_have_all32(lo, hi, x, k)
        }
    }

    #[inline(always)]
    fn bytes_split_has_all(self, bytes: &[u8; 32], x: u32) -> bool {
        use std::arch::x86_64::*;
        // SAFETY: AVX2 as above; the load reads the 32 bytes of `bytes`, a
        // shared borrow of memory no one may write while it lives (plain
        // bytes, not atomics), with no alignment needed.
        unsafe {
            let block = _mm256_loadu_si256(bytes.as_ptr().cast::<__m256i>());
            split_block_has_masks(block, split_masks(x))
        }
    }

    #[inline(always)]
    fn shared_split_has_all(self, block: &SplitShared, x: u32) -> bool {
        // SAFETY: AVX2 (an `Avx2` is held), as `shared_split_register`
        // requires.
        unsafe { split_block_has_masks(shared_split_register(block), split_masks(x)) }
    }

    #[inline(always)]
    fn split_word_masks(self, x: u32) -> [u64; 4] {
        use std::arch::x86_64::*;
        let mut words = [0u64; 4];
        // SAFETY: AVX2 as above; the store writes the 32 bytes of the local
        // `words`, with no alignment needed.
        unsafe { _mm256_storeu_si256(words.as_mut_ptr().cast::<__m256i>(), split_masks(x)) };
        words
    }

    #[inline(always)]
    fn split_insert_mut(self, block: &mut SplitShared, x: u32) -> bool {
        use std::arch::x86_64::*;
        let p = block.0.as_mut_ptr().cast::<__m256i>();
        // SAFETY: AVX2 as above. `p` points to a live split block of 32
        // bytes, 32-byte aligned, borrowed exclusively (`&mut`): no other
        // access to it exists, atomic or not, so plain vector loads and
        // stores are race-free. `AtomicU64` has the size, alignment and bit
        // validity of `u64`, and any bits are a valid block.
        unsafe {
            let old = _mm256_load_si256(p);
            let masks = split_masks(x);
            _mm256_store_si256(p, _mm256_or_si256(old, masks));
            !split_block_has_masks(old, masks)
        }
    }

    #[inline(always)]
    fn shared_block_has_all(self, block: &SharedBlock, h2: u64, k: u32) -> bool {
        // SAFETY: AVX2 (an `Avx2` is held), as both functions require.
        unsafe {
            let (lo, hi) = shared_block_registers(block);
            avx2_registers_have_all(lo, hi, h2, k)
        }
    }

    #[inline(always)]
    fn shared_block_lacks(self, block: &SharedBlock, masks: &[u64; WORDS_PER_BLOCK]) -> bool {
        use std::arch::x86_64::*;
        // SAFETY: AVX2 (an `Avx2` is held), as both functions require.
        unsafe {
            let (lo, hi) = shared_block_registers(block);
            let (m_lo, m_hi) = mask_registers(masks);
            _mm256_testc_si256(lo, m_lo) & _mm256_testc_si256(hi, m_hi) == 0
        }
    }

    #[inline(always)]
    fn shared_block_or_alone(self, block: &SharedBlock, masks: &[u64; WORDS_PER_BLOCK]) -> bool {
        use std::arch::x86_64::*;
        // SAFETY: AVX2 (an `Avx2` is held), as the functions called
        // require. The caller holds the filter's write bias: no other
        // thread writes the block while this runs (the trait's contract),
        // which `owned_block_registers` requires.
        unsafe {
            // The holder is the block's only writer, so it reads the block
            // with two 32-byte loads (`owned_block_registers`); it writes it
            // with four 16-byte stores, each one atomic access, for the
            // readers. Lab loop of key-by-key shared inserts of `u64` ids,
            // 1M keys: 9.75–9.77 ns with the block read by four 16-byte
            // loads and joined into two registers, 9.53–9.56 with it kept in
            // the four, 9.07–9.16 read by two 32-byte loads. The test is
            // `_mm256_testz_si256`: `any_set`'s `vptest` in `asm!` read
            // 9.85–10.02 in the four registers' version.
            let (lo, hi) = owned_block_registers(block);
            let (m_lo, m_hi) = mask_registers(masks);
            let missing =
                _mm256_or_si256(_mm256_andnot_si256(lo, m_lo), _mm256_andnot_si256(hi, m_hi));
            let lacks = _mm256_testz_si256(missing, missing) == 0;
            if lacks {
                let (lo, hi) = (_mm256_or_si256(lo, m_lo), _mm256_or_si256(hi, m_hi));
                store_shared_block(block, lo, hi);
            }
            lacks
        }
    }

    #[inline(always)]
    fn shared_split_or_alone(self, block: &SplitShared, masks: &[u64; 4]) -> bool {
        use std::arch::x86_64::*;
        // SAFETY: AVX2 (an `Avx2` is held), as the functions called
        // require; the mask load reads the 32 bytes of `masks` (`loadu`).
        // The caller holds the filter's write bias: no other thread writes
        // the block between the loads and the stores (the trait's
        // contract).
        unsafe {
            let words = shared_split_register(block);
            let m = _mm256_loadu_si256(masks.as_ptr().cast::<__m256i>());
            let lacks = any_set(_mm256_andnot_si256(words, m));
            if lacks {
                store_shared_split(block, _mm256_or_si256(words, m));
            }
            lacks
        }
    }

    #[inline(always)]
    fn shared_split_lacks(self, block: &SplitShared, masks: &[u64; 4]) -> bool {
        use std::arch::x86_64::*;
        // SAFETY: AVX2 (an `Avx2` is held), as `shared_split_register`
        // requires; the mask load reads the 32 bytes of `masks` (`loadu`).
        unsafe {
            let words = shared_split_register(block);
            let m = _mm256_loadu_si256(masks.as_ptr().cast::<__m256i>());
            _mm256_testc_si256(words, m) == 0
        }
    }

    #[inline(always)]
    fn sector_masks(self, x: u32) -> [u64; WORDS_PER_BLOCK] {
        // SAFETY: AVX2 (an `Avx2` is held), as `sector_mask_registers`
        // requires; the stores write the 64 bytes of `masks` (`storeu`).
        unsafe { sectors::masks_array(sector_mask_registers(x)) }
    }

    #[inline(always)]
    fn sectors_has_all(self, words: &[u64; WORDS_PER_BLOCK], x: u32) -> bool {
        // SAFETY: AVX2 as above; the loads read the 64 bytes of `words`.
        unsafe {
            let (lo, hi) = mask_registers(words);
            registers_have_sectors(lo, hi, x)
        }
    }

    #[inline(always)]
    fn shared_sectors_has_all(self, block: &SharedBlock, x: u32) -> bool {
        // SAFETY: AVX2 (an `Avx2` is held), as both functions require.
        unsafe {
            let (lo, hi) = shared_block_registers(block);
            registers_have_sectors(lo, hi, x)
        }
    }

    #[inline(always)]
    fn bytes_sectors_has_all(self, bytes: &[u8; BLOCK_BYTES], x: u32) -> bool {
        // SAFETY: AVX2 (an `Avx2` is held), as both functions require.
        unsafe {
            let (lo, hi) = bytes_registers(bytes);
            registers_have_sectors(lo, hi, x)
        }
    }

    #[inline(always)]
    fn shared_block_has_all32(self, block: &SharedBlock, x: u32, k: u32) -> bool {
        // SAFETY: AVX2 (an `Avx2` is held), as both functions require.
        unsafe {
            let (lo, hi) = shared_block_registers(block);
            avx2_registers_have_all32(lo, hi, x, k)
        }
    }
}

/// A block held as its 64 bytes in two registers (words 0–3, 4–7), read
/// by two plain vector loads.
///
/// # Safety
/// The CPU must support AVX (callers hold an [`Avx2`]).
#[inline(always)]
unsafe fn bytes_registers(
    bytes: &[u8; BLOCK_BYTES],
) -> (std::arch::x86_64::__m256i, std::arch::x86_64::__m256i) {
    use std::arch::x86_64::*;
    // SAFETY: AVX per this function's contract; the loads read the 64
    // bytes of `bytes`, a shared borrow of plain bytes (not atomics) that
    // no one may write while it lives, so no load races a write; `loadu`:
    // a view's bytes need no alignment.
    unsafe {
        let p = bytes.as_ptr().cast::<__m256i>();
        (_mm256_loadu_si256(p), _mm256_loadu_si256(p.add(1)))
    }
}

/// A block's eight word masks in two registers (words 0–3, 4–7).
///
/// # Safety
/// The CPU must support AVX (callers hold an [`Avx2`]).
#[inline(always)]
unsafe fn mask_registers(
    masks: &[u64; WORDS_PER_BLOCK],
) -> (std::arch::x86_64::__m256i, std::arch::x86_64::__m256i) {
    use std::arch::x86_64::*;
    // SAFETY: AVX per this function's contract; the loads read the 64
    // bytes of `masks` (`loadu`: no alignment needed).
    unsafe {
        let m = masks.as_ptr().cast::<__m256i>();
        (_mm256_loadu_si256(m), _mm256_loadu_si256(m.add(1)))
    }
}

/// The AVX2 probe of a block held in two registers (words 0–3, 4–7).
///
/// # Safety
/// The CPU must support AVX2 (callers hold an [`Avx2`]).
#[inline(always)]
unsafe fn avx2_registers_have_all(
    lo: std::arch::x86_64::__m256i,
    hi: std::arch::x86_64::__m256i,
    h2: u64,
    k: u32,
) -> bool {
    use std::arch::x86_64::*;
    // SAFETY: AVX2 per this function's contract.
    unsafe {
        let h = [
            _mm256_set1_epi32(h2 as u32 as i32),
            _mm256_set1_epi32((h2 >> 32) as u32 as i32),
        ];
        avx2_rows_have_all(
            lo,
            hi,
            k,
            #[inline(always)]
            |row| avx2_row_tops(h, row),
        )
    }
}

/// [`avx2_registers_have_all`] of `h2 = x << 32` (the XXH3-64 hash): the
/// top 32 bits of `h2 · salt` are then `x · lo32(salt)` modulo 2^32, one
/// `vpmulld` per row where the 64-bit product's top half takes seven
/// instructions.
///
/// # Safety
/// The CPU must support AVX2 (callers hold an [`Avx2`]).
#[inline(always)]
unsafe fn avx2_registers_have_all32(
    lo: std::arch::x86_64::__m256i,
    hi: std::arch::x86_64::__m256i,
    x: u32,
    k: u32,
) -> bool {
    use std::arch::x86_64::*;
    // SAFETY: AVX2 per this function's contract; the salt load reads a
    // 32-byte aligned row of 32 bytes.
    unsafe {
        let x = _mm256_set1_epi32(x as i32);
        avx2_rows_have_all(
            lo,
            hi,
            k,
            #[inline(always)]
            |row| _mm256_mullo_epi32(x, _mm256_load_si256(row.0[0].as_ptr().cast::<__m256i>())),
        )
    }
}

/// Whether the `k` probes whose rows of eight `tops` computes (the top 32
/// bits of each probe's product, `avx2_row_tops`) are all set in the block
/// held in `lo` and `hi`.
///
/// # Safety
/// The CPU must support AVX2 (callers hold an [`Avx2`]).
#[inline(always)]
unsafe fn avx2_rows_have_all(
    lo: std::arch::x86_64::__m256i,
    hi: std::arch::x86_64::__m256i,
    k: u32,
    tops: impl Fn(&SaltRow) -> std::arch::x86_64::__m256i,
) -> bool {
    // SAFETY: AVX2 per this function's contract.
    unsafe {
        // A filter sized for a target rate of 1% or more has k ≤ 8 (k = 6
        // at 1%): one row, no loop, no clamp (callgrind: 6 instructions
        // fewer per lookup). Lanes at and past `k` are not tested:
        // `vptest` sets CF when every bit of the mask is set in `got`. The
        // intrinsic here, not `all_live_set`'s `asm!`: LLVM now emits
        // `vptest` with the mask as its memory operand and `setb`, and
        // knows the answer is 0 or 1 (34 → 31 instructions per lookup,
        // disassembled, where the `asm!` took a load, `setb`, `test` and
        // `setne`); with `k` fixed ([`super::lookup::with_k`]) the mask's
        // address is a constant.
        if k <= 8 {
            let got = avx2_row_probed(lo, hi, tops(&SALT_ROWS[0]));
            return std::arch::x86_64::_mm256_testc_si256(got, live_lanes(k as usize)) != 0;
        }
        let k = (k as usize).min(MAX_K as usize);
        let mut all = true;
        for (r, row) in SALT_ROWS.iter().enumerate().take(k.div_ceil(8)) {
            let got = avx2_row_probed(lo, hi, tops(row));
            all &= all_live_set(got, live_lanes(k - 8 * r));
        }
        all
    }
}

/// The eight lane masks of the split-block layout for `x`, lane `i` of the
/// register being lane `i` of the block: `1 << ((x · SALT[i]) >> 27)`,
/// one `vpmulld`, one shift and one `vpsllvd`.
///
/// # Safety
/// The CPU must support AVX2 (callers hold an [`Avx2`]).
#[inline(always)]
unsafe fn split_masks(x: u32) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    #[repr(C, align(32))]
    struct Salts([u32; SPLIT_K as usize]);
    const SALTS: Salts = Salts(SPLIT_SALTS);
    // SAFETY: AVX2 per this function's contract; the load reads the 32
    // aligned bytes of `SALTS`.
    unsafe {
        let salts = _mm256_load_si256(SALTS.0.as_ptr().cast::<__m256i>());
        let bits = _mm256_srli_epi32::<27>(_mm256_mullo_epi32(_mm256_set1_epi32(x as i32), salts));
        _mm256_sllv_epi32(_mm256_set1_epi32(1), bits)
    }
}

/// Whether every lane mask is set in `block`: one `vptest` (CF set when
/// `masks AND NOT block` is zero) and `setb`.
///
/// # Safety
/// The CPU must support AVX (callers hold an [`Avx2`]).
#[inline(always)]
unsafe fn split_block_has_masks(
    block: std::arch::x86_64::__m256i,
    masks: std::arch::x86_64::__m256i,
) -> bool {
    // SAFETY: AVX per this function's contract. (The intrinsic, not the
    // `asm!` of `all_live_set`: with masks computed in registers LLVM
    // emits `vptest` and `setb` for it, and knows the result is 0 or 1.)
    unsafe { std::arch::x86_64::_mm256_testc_si256(block, masks) != 0 }
}

/// Bit 0 set in the first `live` (at most 8) 32-bit lanes: which probes
/// of a row count, as a `vptest` mask.
///
/// # Safety
/// The CPU must support AVX (callers hold an [`Avx2`]).
#[inline(always)]
unsafe fn live_lanes(live: usize) -> std::arch::x86_64::__m256i {
    #[repr(C, align(32))]
    struct Masks([[u32; 8]; 9]);
    const LIVE: Masks = {
        let mut m = [[0u32; 8]; 9];
        let mut live = 0;
        while live < 9 {
            let mut j = 0;
            while j < live {
                m[live][j] = 1;
                j += 1;
            }
            live += 1;
        }
        Masks(m)
    };
    // SAFETY: AVX per this function's contract; the load reads one
    // 32-byte aligned row of 32 bytes (`live` clamped to the table).
    unsafe { std::arch::x86_64::_mm256_load_si256(LIVE.0[live.min(8)].as_ptr().cast()) }
}

/// The top 32 bits of the eight wrapping 64-bit products `h2 · salt` of
/// one salt row (module docs), `h = [lo32(h2), hi32(h2)]` each broadcast:
/// the position of probe `8·r + j` is the top 9 bits of lane `j`.
///
/// # Safety
/// The CPU must support AVX2 (callers hold an [`Avx2`]).
#[inline(always)]
unsafe fn avx2_row_tops(
    h: [std::arch::x86_64::__m256i; 2],
    row: &SaltRow,
) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    // SAFETY: AVX2 per this function's contract; the salt loads read
    // 32-byte aligned rows of 32 bytes each.
    unsafe {
        let [h_lo, h_hi] = h;
        let s_lo = _mm256_load_si256(row.0[0].as_ptr().cast::<__m256i>());
        let s_lo_odd = _mm256_load_si256(row.0[1].as_ptr().cast::<__m256i>());
        let s_hi = _mm256_load_si256(row.0[2].as_ptr().cast::<__m256i>());
        let cross = _mm256_add_epi32(
            _mm256_mullo_epi32(h_lo, s_hi),
            _mm256_mullo_epi32(h_hi, s_lo),
        );
        let even = _mm256_srli_epi64::<32>(_mm256_mul_epu32(h_lo, s_lo));
        let odd = _mm256_mul_epu32(h_lo, s_lo_odd);
        let carry = _mm256_blend_epi32::<0b1010_1010>(even, odd);
        _mm256_add_epi32(carry, cross)
    }
}

/// Eight probes of one salt row: bit 0 of lane `j` of the result is
/// probe `8·r + j`, whose product's top 32 bits are lane `j` of `top`
/// (`avx2_row_tops`), read from the block held in `lo` and `hi` (the other
/// bits are not meaningful).
///
/// # Safety
/// The CPU must support AVX2 (callers hold an [`Avx2`]).
#[inline(always)]
unsafe fn avx2_row_probed(
    lo: std::arch::x86_64::__m256i,
    hi: std::arch::x86_64::__m256i,
    top: std::arch::x86_64::__m256i,
) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    // SAFETY: AVX2 per this function's contract.
    unsafe {
        // The position is the top 9 bits of `top`: lane `pos / 32` of the
        // block is bits 28–31 (`vpermd` reads the low three of the index,
        // the sign picks the register), bit `pos % 32` is bits 23–27.
        let lane = _mm256_srli_epi32::<28>(top);
        let from_lo = _mm256_permutevar8x32_epi32(lo, lane);
        let from_hi = _mm256_permutevar8x32_epi32(hi, lane);
        let word = _mm256_castps_si256(_mm256_blendv_ps(
            _mm256_castsi256_ps(from_lo),
            _mm256_castsi256_ps(from_hi),
            _mm256_castsi256_ps(top),
        ));
        let bit = _mm256_srli_epi32::<27>(_mm256_slli_epi32::<4>(top));
        _mm256_srlv_epi32(word, bit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The salt rows hold the salts' halves where the probe expects them.
    #[test]
    fn salt_rows_split_the_salts() {
        for (i, &s) in BLOCK_SALTS.iter().enumerate() {
            let row = &SALT_ROWS[i / 8].0;
            assert_eq!(row[0][i % 8], s as u32);
            assert_eq!(row[2][i % 8], (s >> 32) as u32);
            if i % 2 == 1 {
                assert_eq!(row[1][i % 8 - 1], s as u32);
            }
        }
    }
}
