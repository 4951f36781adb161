//! The one module with `unsafe`: the AVX2 block probe, its dispatch, and
//! the flat view of a filter's aligned blocks.
//!
//! # What it computes
//! Exactly what [`scalar_block_has_all`] computes, which is the blocked
//! layout of docs/FORMAT.md §6: probe `i` of a key is bit
//! `(h2 · SALT[i]) >> 55` of its 512-bit block. The AVX2 path takes eight
//! probes per step:
//!
//! * **Positions.** AVX2 has no 64-bit multiply, but only the top 9 bits of
//!   the 64-bit product are needed, and the high half of a wrapping 64-bit
//!   product is `hi32(h_lo·s_lo) + lo32(h_lo·s_hi) + lo32(h_hi·s_lo)` modulo
//!   2^32 (the `h_hi·s_hi` term only reaches bit 64 and above). That is two
//!   `vpmulld` for the cross terms of eight salts and two `vpmuludq` for the
//!   high halves of the eight low products.
//! * **Test.** The block is sixteen 32-bit lanes in two registers; position
//!   `p` is bit `p % 32` of lane `p / 32`. `vpermd` on both registers and a
//!   blend on bit 8 of `p` bring each probe's lane into place, a variable
//!   left shift by `31 − p % 32` moves the probed bit to the sign, and
//!   `vmovmskps` collects the eight answers.
//!
//! That is about 25 instructions for up to eight probes where the scalar
//! loop spends nine per probe (63 at k = 7): fewer instructions per lookup
//! is more lookups in the reorder buffer, hence more cache misses in flight
//! (see `bloom` module docs).
//!
//! # Why this is sound
//! * **Dispatch.** The CPU is asked once ([`Isa::detect`], cached in an
//!   atomic); [`Avx2`] values exist only after it answered yes, so every
//!   intrinsic below runs on a CPU that has AVX2 and BMI2. Code that uses
//!   the probe is written once, generic over [`Probe`], and instantiated
//!   twice: inside [`run_avx2`], compiled with the features enabled, and
//!   inside the baseline build.
//! * **Memory.** A block of a shared [`crate::BitFilter`], which other
//!   threads may be setting bits in through atomics, is read by four
//!   aligned 16-byte `VMOVDQA` loads in `asm!` ([`SharedBlock`]), never by a
//!   Rust vector load (that would be a data race in Rust's memory model).
//!   The asm's effect is one that Rust code with relaxed `AtomicU64` loads
//!   could have: every CPU with AVX performs such a load as one atomic
//!   access (Intel SDM Vol. 3A §9.1.1), so each word is read whole. Lookups
//!   need no more than relaxed loads (`bloom` module docs). Before this, the
//!   eight words were copied out with relaxed loads and moved into two
//!   registers: 20 instructions where the asm takes 6 (callgrind, 10M
//!   keys: 162 → 142 instructions per lookup; 134 since the blocks are
//!   aligned by their type, [`SharedBlock`]; 128 with the one-row probe of
//!   `k ≤ 8`). Blocks of a borrowed
//!   [`crate::FilterView`] are plain bytes, copied into a local `[u64; 8]`
//!   that the vector loads read.
//!
//! * **The flat view.** A [`crate::BitFilter`] keeps its bits as a slice of
//!   [`SharedBlock`]s; [`SharedBlock::flat`] reads the same memory as one
//!   slice of words, which a block is exactly (`repr(C)`, size asserted at
//!   compile time). Tested against indexing block by block
//!   (`flat_view_matches_block_indexing`).
//!
//! Tested against the scalar probe in `tests/core_simd.rs` (proptest over
//! `k = 1..=32`, all-ones, all-zeros and single-bit blocks, adversarial
//! `h2`) and under concurrent inserts.

use crate::filter::geometry::{MAX_K, WORDS_PER_BLOCK};
use crate::filter::hash::{in_block_position, BLOCK_SALTS};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// A block probe: whether the `k` in-block positions of `h2` are all set
/// in `words`. Implemented by [`Scalar`] and (on x86-64) [`Avx2`].
pub(crate) trait Probe: Copy {
    /// Whether every position is set.
    fn block_has_all(self, words: &[u64; WORDS_PER_BLOCK], h2: u64, k: u32) -> bool;

    /// [`Probe::block_has_all`] of a block that other threads may be
    /// setting bits in: each word is read as a relaxed atomic load would
    /// read it (or as a stronger load).
    #[inline(always)]
    fn shared_block_has_all(self, block: &SharedBlock, h2: u64, k: u32) -> bool {
        let words = std::array::from_fn(|w| block.0[w].load(Ordering::Relaxed));
        self.block_has_all(&words, h2, k)
    }
}

/// One block of a shared filter: eight atomic words on one 64-byte line.
/// A [`crate::BitFilter`] keeps its bits as a slice of these, so every
/// block is aligned by its type (no run-time check) and probed with
/// aligned vector loads.
#[doc(hidden)]
#[repr(C, align(64))]
pub struct SharedBlock(pub(crate) [AtomicU64; WORDS_PER_BLOCK]);

// The flat view below relies on a block being its eight words, no padding.
const _: () = assert!(std::mem::size_of::<SharedBlock>() == 8 * WORDS_PER_BLOCK);

impl SharedBlock {
    /// A block of zero bits.
    pub(crate) fn zeroed() -> SharedBlock {
        SharedBlock(std::array::from_fn(|_| AtomicU64::new(0)))
    }

    /// The words of `blocks`, in order, as one slice: word `w` of block `b`
    /// is element `8·b + w`. The standard layout indexes words directly,
    /// where going through the block costs a shift, a mask and an add more
    /// per probe.
    #[inline(always)]
    pub(crate) fn flat(blocks: &[SharedBlock]) -> &[AtomicU64] {
        // SAFETY: `SharedBlock` is `repr(C)` with the one field
        // `[AtomicU64; 8]` and its size is exactly those 64 bytes (asserted
        // above), so `n` contiguous blocks are `8·n` contiguous, initialised
        // `AtomicU64`s, each aligned (64 is a multiple of 8). The length
        // cannot overflow: the blocks already occupy `64·n ≤ isize::MAX`
        // bytes. The slice borrows `blocks` immutably for its lifetime, and
        // `AtomicU64` permits shared mutation, as the blocks do.
        unsafe {
            std::slice::from_raw_parts(
                blocks.as_ptr().cast::<AtomicU64>(),
                blocks.len() * WORDS_PER_BLOCK,
            )
        }
    }

    /// [`SharedBlock::flat`] for exclusive access (plain stores).
    #[inline(always)]
    pub(crate) fn flat_mut(blocks: &mut [SharedBlock]) -> &mut [AtomicU64] {
        // SAFETY: as for `flat`; the slice borrows `blocks` mutably for its
        // lifetime, so no other access overlaps it.
        unsafe {
            std::slice::from_raw_parts_mut(
                blocks.as_mut_ptr().cast::<AtomicU64>(),
                blocks.len() * WORDS_PER_BLOCK,
            )
        }
    }
}

/// Work that runs with the best probe this CPU supports: its `run` is
/// instantiated once per probe, inside a function compiled for it.
pub(crate) trait Job {
    /// What the work returns.
    type Out;
    /// Does the work with `probe`. Implementations are `#[inline(always)]`,
    /// so that they are compiled inside [`run_avx2`] with its features.
    fn run<P: Probe>(self, probe: P) -> Self::Out;
}

/// The portable probe: one multiply, shift and load per position,
/// accumulated without branches.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scalar;

impl Probe for Scalar {
    #[inline(always)]
    fn block_has_all(self, words: &[u64; WORDS_PER_BLOCK], h2: u64, k: u32) -> bool {
        scalar_block_has_all(words, h2, k)
    }
}

/// The reference block probe (also the fallback): branch-free, all `k`
/// probes read, accumulated in a register.
#[inline(always)]
pub fn scalar_block_has_all(words: &[u64; WORDS_PER_BLOCK], h2: u64, k: u32) -> bool {
    let mut acc = 1u64;
    // `k ≤ MAX_K` by construction; the min lets the salt lookups go unchecked.
    for i in 0..(k as usize).min(MAX_K as usize) {
        let pos = in_block_position(h2, i);
        acc &= words[(pos / 64) as usize] >> (pos % 64);
    }
    acc & 1 == 1
}

/// Which probe this CPU runs (0: not asked yet).
static ISA: AtomicU8 = AtomicU8::new(0);

/// The instruction sets the probe can use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    /// Portable code only.
    Scalar,
    /// AVX2 and BMI2 (x86-64).
    Avx2,
}

impl Isa {
    /// What this CPU supports, asked once per process.
    #[inline(always)]
    pub(crate) fn detect() -> Isa {
        match ISA.load(Ordering::Relaxed) {
            1 => Isa::Scalar,
            2 => Isa::Avx2,
            _ => {
                let isa = Isa::ask_cpu();
                ISA.store(if isa == Isa::Avx2 { 2 } else { 1 }, Ordering::Relaxed);
                isa
            }
        }
    }

    #[cold]
    fn ask_cpu() -> Isa {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("bmi2") {
            return Isa::Avx2;
        }
        Isa::Scalar
    }
}

/// Runs `job` with the best probe of this CPU.
#[inline(always)]
pub(crate) fn dispatch<J: Job>(job: J) -> J::Out {
    // Built for AVX2 (`-C target-cpu=native` on such a machine): no
    // detection and no call, the probe inlines into the caller.
    #[cfg(all(
        target_arch = "x86_64",
        target_feature = "avx2",
        target_feature = "bmi2"
    ))]
    return job.run(Avx2(()));
    #[cfg(all(
        target_arch = "x86_64",
        not(all(target_feature = "avx2", target_feature = "bmi2"))
    ))]
    if Isa::detect() == Isa::Avx2 {
        // SAFETY: `run_avx2` needs AVX2 and BMI2, which `Isa::detect` just
        // confirmed this CPU has.
        return unsafe { run_avx2(job) };
    }
    #[allow(unreachable_code)]
    job.run(Scalar)
}

/// The dispatched block probe on its own (for the tests that compare it
/// with [`scalar_block_has_all`]; lookups run whole jobs instead).
#[cfg_attr(not(feature = "test-internals"), allow(dead_code))]
pub fn block_has_all(words: &[u64; WORDS_PER_BLOCK], h2: u64, k: u32) -> bool {
    struct One<'a>(&'a [u64; WORDS_PER_BLOCK], u64, u32);
    impl Job for One<'_> {
        type Out = bool;
        #[inline(always)]
        fn run<P: Probe>(self, probe: P) -> bool {
            probe.block_has_all(self.0, self.1, self.2)
        }
    }
    dispatch(One(words, h2, k))
}

/// Whether this process probes with AVX2.
#[cfg_attr(not(feature = "test-internals"), allow(dead_code))]
pub fn uses_avx2() -> bool {
    Isa::detect() == Isa::Avx2
}

/// Issues a prefetch of the cache line holding `*p`: a hint, never needed
/// for correctness.
#[inline(always)]
pub(crate) fn prefetch<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` never faults, reads nothing into the program
    // and writes nothing; the pointer comes from a live reference. It is
    // `unsafe` only because it carries `#[target_feature(enable = "sse")]`,
    // which every x86-64 CPU has. Exercised by every batched-lookup test.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(p).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// `job` compiled with AVX2 and BMI2 enabled.
///
/// # Safety
/// The CPU must support AVX2 and BMI2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
unsafe fn run_avx2<J: Job>(job: J) -> J::Out {
    job.run(Avx2(()))
}

/// The AVX2 probe. The private field keeps it from being made anywhere but
/// [`run_avx2`], which only runs on CPUs with AVX2.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx2(());

/// The salts split for 32-bit lanes, eight probes per row: `[lo, lo of the
/// odd lanes moved to the even ones, hi]`.
#[cfg(target_arch = "x86_64")]
#[repr(C, align(32))]
struct SaltRow([[u32; 8]; 3]);

#[cfg(target_arch = "x86_64")]
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

#[cfg(target_arch = "x86_64")]
impl Probe for Avx2 {
    #[inline(always)]
    fn block_has_all(self, words: &[u64; WORDS_PER_BLOCK], h2: u64, k: u32) -> bool {
        use std::arch::x86_64::*;
        // SAFETY: an `Avx2` exists only inside `run_avx2`, which runs only on
        // CPUs with AVX2 (module docs). The loads read the local `words`
        // (64 bytes, in bounds) and the salt table (32-byte aligned rows of
        // 32 bytes each); `loadu` needs no alignment anyway.
        unsafe {
            let lo = _mm256_loadu_si256(words.as_ptr().cast::<__m256i>());
            let hi = _mm256_loadu_si256(words.as_ptr().add(4).cast::<__m256i>());
            avx2_registers_have_all(lo, hi, h2, k)
        }
    }

    #[inline(always)]
    fn shared_block_has_all(self, block: &SharedBlock, h2: u64, k: u32) -> bool {
        use std::arch::x86_64::*;
        let p = block.0.as_ptr();
        let (q0, q1, q2, q3): (__m128i, __m128i, __m128i, __m128i);
        // SAFETY: an `Avx2` exists only inside `run_avx2`, on CPUs with AVX
        // (module docs), so VMOVDQA exists. `p` points to a live block of 64
        // bytes, 64-byte aligned (`SharedBlock`), so the four 16-byte loads
        // are in bounds and aligned. The loads are not a data race although
        // other threads write these words through atomics: the block is
        // read in asm, not by Rust loads, and the asm's effect is what Rust
        // code with relaxed `AtomicU64` loads of the eight words could do,
        // because every CPU with AVX performs an aligned VEX.128 VMOVDQA as
        // one atomic 16-byte access (Intel SDM Vol. 3A §9.1.1, "Guaranteed
        // Atomic Operations"; AMD APM Vol. 2 §7.3.2 likewise for AVX
        // CPUs), so each word is read whole, at some point of its
        // modification order. No ordering beyond relaxed is claimed, and
        // none is needed: lookups are relaxed loads (`bloom` module docs).
        // `readonly`: the asm writes no memory; no `pure`, so each call
        // reads the words again.
        unsafe {
            std::arch::asm!(
                "vmovdqa {q0}, xmmword ptr [{p}]",
                "vmovdqa {q1}, xmmword ptr [{p} + 16]",
                "vmovdqa {q2}, xmmword ptr [{p} + 32]",
                "vmovdqa {q3}, xmmword ptr [{p} + 48]",
                p = in(reg) p,
                q0 = out(xmm_reg) q0,
                q1 = out(xmm_reg) q1,
                q2 = out(xmm_reg) q2,
                q3 = out(xmm_reg) q3,
                options(nostack, readonly, preserves_flags),
            );
            let lo = _mm256_set_m128i(q1, q0);
            let hi = _mm256_set_m128i(q3, q2);
            avx2_registers_have_all(lo, hi, h2, k)
        }
    }
}

/// The AVX2 probe of a block held in two registers (words 0–3, 4–7).
///
/// # Safety
/// The CPU must support AVX2 (callers hold an [`Avx2`]).
#[cfg(target_arch = "x86_64")]
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
        // A filter sized for a target rate of 1% or more has k ≤ 8 (k = 6
        // at 1%): one row, no loop, no clamp (callgrind: 6 instructions
        // fewer per lookup). Lanes at and past `k` count as set.
        if k <= 8 {
            let got = avx2_row_bits(lo, hi, h, &SALT_ROWS[0]);
            return (u64::from(got) | (u64::MAX << k)) as u8 == u8::MAX;
        }
        let k = (k as usize).min(MAX_K as usize);
        let mut all = true;
        for (r, row) in SALT_ROWS.iter().enumerate().take(k.div_ceil(8)) {
            let got = avx2_row_bits(lo, hi, h, row);
            // `live ≤ 32`, so the shift stays inside the u64.
            let live = k - 8 * r;
            all &= (u64::from(got) | (u64::MAX << live)) as u8 == u8::MAX;
        }
        all
    }
}

/// Eight probes of one salt row: bit `j` of the result is whether probe
/// `8·r + j` of `h = [lo32(h2), hi32(h2)]` (each broadcast) is set in the
/// block held in `lo` and `hi`.
///
/// # Safety
/// The CPU must support AVX2 (callers hold an [`Avx2`]).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn avx2_row_bits(
    lo: std::arch::x86_64::__m256i,
    hi: std::arch::x86_64::__m256i,
    h: [std::arch::x86_64::__m256i; 2],
    row: &SaltRow,
) -> u32 {
    use std::arch::x86_64::*;
    // SAFETY: AVX2 per this function's contract; the salt loads read
    // 32-byte aligned rows of 32 bytes each.
    unsafe {
        let [h_lo, h_hi] = h;
        let s_lo = _mm256_load_si256(row.0[0].as_ptr().cast::<__m256i>());
        let s_lo_odd = _mm256_load_si256(row.0[1].as_ptr().cast::<__m256i>());
        let s_hi = _mm256_load_si256(row.0[2].as_ptr().cast::<__m256i>());
        // Top 32 bits of the eight wrapping 64-bit products (module docs).
        let cross = _mm256_add_epi32(
            _mm256_mullo_epi32(h_lo, s_hi),
            _mm256_mullo_epi32(h_hi, s_lo),
        );
        let even = _mm256_srli_epi64::<32>(_mm256_mul_epu32(h_lo, s_lo));
        let odd = _mm256_mul_epu32(h_lo, s_lo_odd);
        let carry = _mm256_blend_epi32::<0b1010_1010>(even, odd);
        let pos = _mm256_srli_epi32::<23>(_mm256_add_epi32(carry, cross));
        // Lane `pos / 32` of the block, bit `pos % 32` to the sign.
        let lane = _mm256_srli_epi32::<5>(pos);
        let from_lo = _mm256_permutevar8x32_epi32(lo, lane);
        let from_hi = _mm256_permutevar8x32_epi32(hi, lane);
        let upper = _mm256_slli_epi32::<23>(pos);
        let word = _mm256_castps_si256(_mm256_blendv_ps(
            _mm256_castsi256_ps(from_lo),
            _mm256_castsi256_ps(from_hi),
            _mm256_castsi256_ps(upper),
        ));
        let low5 = _mm256_set1_epi32(31);
        let probed = _mm256_sllv_epi32(word, _mm256_andnot_si256(pos, low5));
        _mm256_movemask_ps(_mm256_castsi256_ps(probed)) as u32
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

    /// The probe of a shared block (vector loads of atomic words) answers
    /// as the scalar probe of the same words: random blocks of every
    /// density, every `k`, and the key's exact bits with one cleared.
    #[test]
    fn shared_block_probe_matches_scalar() {
        struct Shared<'a>(&'a SharedBlock, u64, u32);
        impl Job for Shared<'_> {
            type Out = bool;
            #[inline(always)]
            fn run<P: Probe>(self, probe: P) -> bool {
                probe.shared_block_has_all(self.0, self.1, self.2)
            }
        }
        let block = SharedBlock(std::array::from_fn(|_| AtomicU64::new(0)));
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x ^ (x >> 31)
        };
        for round in 0..4_000 {
            let h2 = next();
            let k = 1 + round % MAX_K;
            let words: [u64; 8] =
                std::array::from_fn(|_| (0..round % 4).fold(next(), |a, _| a | next()));
            let mut exact = [0u64; 8];
            for i in 0..k as usize {
                let p = in_block_position(h2, i);
                exact[(p / 64) as usize] |= 1 << (p % 64);
            }
            let mut less = exact;
            let p = in_block_position(h2, round as usize % k as usize);
            less[(p / 64) as usize] &= !(1 << (p % 64));
            for w in [words, exact, less] {
                for (a, v) in block.0.iter().zip(w) {
                    a.store(v, Ordering::Relaxed);
                }
                let got = dispatch(Shared(&block, h2, k));
                assert_eq!(got, scalar_block_has_all(&w, h2, k), "k={k} h2={h2:#x}");
            }
            assert!(!dispatch(Shared(&block, h2, k)), "one bit cleared");
        }
    }

    /// The flat view is the blocks' words in order: every word read and
    /// written through it is the one the safe path (block, then word)
    /// reads, over a slice that starts mid-allocation, for both views.
    #[test]
    fn flat_view_matches_block_indexing() {
        let mut blocks: Vec<SharedBlock> = (0..5).map(|_| SharedBlock::zeroed()).collect();
        for (i, w) in SharedBlock::flat(&blocks[1..]).iter().enumerate() {
            w.store(i as u64 * 3 + 1, Ordering::Relaxed);
        }
        for (i, w) in SharedBlock::flat_mut(&mut blocks[3..])
            .iter_mut()
            .enumerate()
        {
            *w.get_mut() ^= 1 << (i % 64);
        }
        assert_eq!(SharedBlock::flat(&blocks).len(), 5 * WORDS_PER_BLOCK);
        for (b, block) in blocks.iter().enumerate() {
            assert!(std::ptr::from_ref(block).is_aligned());
            for (w, word) in block.0.iter().enumerate() {
                let flat = (b * WORDS_PER_BLOCK + w) as u64;
                let mut want = if b >= 1 { (flat - 8) * 3 + 1 } else { 0 };
                if b >= 3 {
                    want ^= 1 << ((flat - 24) % 64);
                }
                assert_eq!(word.load(Ordering::Relaxed), want, "block {b} word {w}");
            }
        }
    }

    /// Every single probe of every k lands on the scalar bit: a block with
    /// exactly the key's bits is found, and one with any of them cleared
    /// is not.
    #[test]
    fn dispatched_probe_matches_scalar_bit_by_bit() {
        let mut h2 = 0x0123_4567_89ab_cdefu64;
        for k in 1..=MAX_K {
            for _ in 0..200 {
                h2 = h2
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let mut words = [0u64; 8];
                for i in 0..k as usize {
                    let p = in_block_position(h2, i);
                    words[(p / 64) as usize] |= 1 << (p % 64);
                }
                assert!(block_has_all(&words, h2, k), "k={k} h2={h2:#x}");
                for i in 0..k as usize {
                    let p = in_block_position(h2, i);
                    let mut w = words;
                    w[(p / 64) as usize] &= !(1 << (p % 64));
                    assert!(!block_has_all(&w, h2, k), "k={k} probe {i}");
                    assert!(!scalar_block_has_all(&w, h2, k));
                }
            }
        }
    }
}
