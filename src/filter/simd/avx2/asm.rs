//! The AVX2 probe's inline assembly, each function with its own SAFETY
//! argument: the loads and stores of a shared block's words (aligned
//! 16-byte accesses, each one atomic access on every CPU with AVX, where the
//! 32-byte access an intrinsic would emit carries no such guarantee), and
//! the `vptest` whose carry flag answers a probe.

use super::super::{SharedBlock, SplitShared};

/// The four words of a shared split block in one register, read by two
/// aligned 16-byte loads in `asm!`.
///
/// # Safety
/// The CPU must support AVX2 (callers hold an [`Avx2`](super::Avx2)).
#[inline(always)]
pub(super) unsafe fn shared_split_register(block: &SplitShared) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    let p = block.0.as_ptr();
    let (lo, hi): (__m128i, __m128i);
    // SAFETY: the caller holds an `Avx2` (this function's contract), so AVX
    // is there and VMOVDQA exists. `p` points to a live split block of 32
    // bytes, 32-byte aligned (`SplitShared`), so both 16-byte loads are in
    // bounds and aligned. As for `shared_block_registers` below: the loads
    // are in asm, not Rust, and each is one atomic 16-byte access on every
    // CPU with AVX (Intel SDM Vol. 3A §9.1.1; AMD APM Vol. 2 §7.3.2), so
    // each word is read whole as a relaxed atomic load would read it; a
    // 32-byte load carries no such guarantee, hence two. `readonly`, no
    // `pure`: each call reads the words again
    // (`tests::shared_probes_see_later_stores`).
    unsafe {
        std::arch::asm!(
            "vmovdqa {lo}, xmmword ptr [{p}]",
            "vmovdqa {hi}, xmmword ptr [{p} + 16]",
            p = in(reg) p,
            lo = out(xmm_reg) lo,
            hi = out(xmm_reg) hi,
            options(nostack, readonly, preserves_flags),
        );
        _mm256_set_m128i(hi, lo)
    }
}

/// The eight words of a shared block in two registers (words 0–3, 4–7),
/// read by four aligned 16-byte loads in `asm!`.
///
/// # Safety
/// The CPU must support AVX2 (callers hold an [`Avx2`](super::Avx2)).
#[inline(always)]
pub(super) unsafe fn shared_block_registers(
    block: &SharedBlock,
) -> (std::arch::x86_64::__m256i, std::arch::x86_64::__m256i) {
    use std::arch::x86_64::*;
    let p = block.0.as_ptr();
    let (q0, q1, q2, q3): (__m128i, __m128i, __m128i, __m128i);
    // SAFETY: the caller holds an `Avx2` (this function's contract), so AVX
    // is there and VMOVDQA exists. `p` points to a live block of 64
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
        (_mm256_set_m128i(q1, q0), _mm256_set_m128i(q3, q2))
    }
}

/// The eight words of a shared block that no other thread writes meanwhile
/// (the caller holds the filter's write bias) in two registers (words 0–3,
/// 4–7), read by two aligned 32-byte loads in `asm!`.
///
/// # Safety
/// The CPU must support AVX (callers hold an [`Avx2`](super::Avx2)).
#[inline]
#[target_feature(enable = "avx")]
pub(super) unsafe fn owned_block_registers(
    block: &SharedBlock,
) -> (std::arch::x86_64::__m256i, std::arch::x86_64::__m256i) {
    use std::arch::x86_64::*;
    let p = block.0.as_ptr();
    let (lo, hi): (__m256i, __m256i);
    // SAFETY: AVX per this function's contract, so VMOVDQA of a 32-byte
    // register exists. `p` points to a live block of 64 bytes, 64-byte
    // aligned (`SharedBlock`), so both loads are in bounds and aligned. The
    // loads are asm, not Rust loads, so no data race in Rust's memory model
    // can arise from them. Their effect is what relaxed `AtomicU64` loads
    // of the eight words could do because no other thread writes the block
    // while they run (the caller's write bias: `Probe::shared_block_or_alone`'s
    // contract): every word holds one value meanwhile, so a 32-byte load,
    // which is not documented as one atomic access, cannot read a word half
    // before and half after a write. Other threads' reads do not matter.
    // `readonly`: the asm writes no memory; no `pure`, so each call reads
    // the words again.
    unsafe {
        std::arch::asm!(
            "vmovdqa {lo}, ymmword ptr [{p}]",
            "vmovdqa {hi}, ymmword ptr [{p} + 32]",
            p = in(reg) p,
            lo = out(ymm_reg) lo,
            hi = out(ymm_reg) hi,
            options(nostack, readonly, preserves_flags),
        );
    }
    (lo, hi)
}

/// Stores the eight words of a shared block from two registers (words
/// 0–3, 4–7) by four aligned 16-byte stores in `asm!`: the writes of
/// [`shared_block_registers`]' reads.
///
/// # Safety
/// The CPU must support AVX2 (callers hold an [`Avx2`](super::Avx2)).
#[inline(always)]
pub(super) unsafe fn store_shared_block(
    block: &SharedBlock,
    lo: std::arch::x86_64::__m256i,
    hi: std::arch::x86_64::__m256i,
) {
    use std::arch::x86_64::*;
    let p = block.0.as_ptr();
    // SAFETY: the caller holds an `Avx2` (this function's contract), so AVX
    // is there and VMOVDQA and VEXTRACTI128 exist. `p` points to a live
    // block of 64 bytes, 64-byte aligned (`SharedBlock`), so the four
    // 16-byte stores are in bounds and aligned. Writing through a shared
    // reference is sound because the words are `AtomicU64` (interior
    // mutability), and the stores are not a data race with other threads'
    // atomic accesses because they are asm, not Rust stores, whose effect
    // is what relaxed `AtomicU64` stores of the eight words could do:
    // every CPU with AVX performs an aligned VEX.128 VMOVDQA as one atomic
    // 16-byte access (Intel SDM Vol. 3A §9.1.1; AMD APM Vol. 2 §7.3.2),
    // so a reader sees each word whole, before or after. The extracts of
    // the upper halves are register moves; only VMOVDQA touches memory.
    // No ordering beyond relaxed is claimed (the caller's release, if any,
    // comes after). `nostack`: the asm pushes nothing.
    unsafe {
        let (q0, q1) = (
            _mm256_castsi256_si128(lo),
            _mm256_extracti128_si256::<1>(lo),
        );
        let (q2, q3) = (
            _mm256_castsi256_si128(hi),
            _mm256_extracti128_si256::<1>(hi),
        );
        std::arch::asm!(
            "vmovdqa xmmword ptr [{p}], {q0}",
            "vmovdqa xmmword ptr [{p} + 16], {q1}",
            "vmovdqa xmmword ptr [{p} + 32], {q2}",
            "vmovdqa xmmword ptr [{p} + 48], {q3}",
            p = in(reg) p,
            q0 = in(xmm_reg) q0,
            q1 = in(xmm_reg) q1,
            q2 = in(xmm_reg) q2,
            q3 = in(xmm_reg) q3,
            options(nostack, preserves_flags),
        );
    }
}

/// Stores the four words of a shared split block from one register by two
/// aligned 16-byte stores in `asm!`: the writes of
/// [`shared_split_register`]'s reads.
///
/// # Safety
/// The CPU must support AVX2 (callers hold an [`Avx2`](super::Avx2)).
#[inline(always)]
pub(super) unsafe fn store_shared_split(block: &SplitShared, words: std::arch::x86_64::__m256i) {
    use std::arch::x86_64::*;
    let p = block.0.as_ptr();
    // SAFETY: as for `store_shared_block`: AVX is there (this function's
    // contract); `p` points to a live split block of 32 bytes, 32-byte
    // aligned (`SplitShared`), so both 16-byte stores are in bounds and
    // aligned; the words are atomics, written by asm whose effect is what
    // relaxed `AtomicU64` stores could do, each aligned VEX.128 VMOVDQA
    // being one atomic access (Intel SDM Vol. 3A §9.1.1; AMD APM Vol. 2
    // §7.3.2).
    unsafe {
        let (lo, hi) = (
            _mm256_castsi256_si128(words),
            _mm256_extracti128_si256::<1>(words),
        );
        std::arch::asm!(
            "vmovdqa xmmword ptr [{p}], {lo}",
            "vmovdqa xmmword ptr [{p} + 16], {hi}",
            p = in(reg) p,
            lo = in(xmm_reg) lo,
            hi = in(xmm_reg) hi,
            options(nostack, preserves_flags),
        );
    }
}

/// Whether every bit set in `mask` is set in `got`: one `vptest` (CF)
/// and `setb`, for the rows of a probe of `k > 8`. In `asm!` because LLVM
/// rewrote `_mm256_testc_si256` with a mask loaded from a table into an
/// AND-NOT and a horizontal OR (nine instructions where this is two); the
/// one-row probe of `k ≤ 8` uses the intrinsic again, which LLVM now
/// compiles there to `vptest` and `setb` (`avx2_rows_have_all`).
///
/// # Safety
/// The CPU must support AVX (callers hold an [`Avx2`](super::Avx2)).
#[inline]
#[target_feature(enable = "avx")]
pub(super) unsafe fn all_live_set(
    got: std::arch::x86_64::__m256i,
    mask: std::arch::x86_64::__m256i,
) -> bool {
    let all: u8;
    // SAFETY: AVX per this function's contract. The asm reads two
    // registers and writes one byte register and the flags; no memory.
    unsafe {
        std::arch::asm!(
            "vptest {got}, {mask}",
            "setb {all}",
            got = in(ymm_reg) got,
            mask = in(ymm_reg) mask,
            all = out(reg_byte) all,
            options(pure, nomem, nostack),
        );
    }
    all != 0
}

/// Whether any bit of `v` is set: one `vptest` (ZF) and `setne`.
///
/// # Safety
/// The CPU must support AVX (callers hold an [`Avx2`](super::Avx2)).
#[inline]
#[target_feature(enable = "avx")]
pub(super) unsafe fn any_set(v: std::arch::x86_64::__m256i) -> bool {
    let any: u8;
    // SAFETY: AVX per this function's contract. The asm reads one
    // register and writes one byte register and the flags; no memory.
    unsafe {
        std::arch::asm!(
            "vptest {v}, {v}",
            "setne {any}",
            v = in(ymm_reg) v,
            any = out(reg_byte) any,
            options(pure, nomem, nostack),
        );
    }
    any != 0
}
