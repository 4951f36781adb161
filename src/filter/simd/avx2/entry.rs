//! The AVX2 probe's entry points: each a function compiled with AVX2,
//! BMI1, BMI2 and POPCNT enabled that makes the [`Avx2`] token, called
//! only after `Isa::detect` said the CPU has them (`dispatch`,
//! `LookupFn::best`, `InsertFn::best`); absent from a crate built for
//! AVX2 and BMI2, which needs no such check. A lookup or insert takes its
//! key's hash as a [`HashArg`]: a `KeyHash`, or the one 64-bit hash of a
//! key hashed with XXH3-64, its `KeyHash` made here, in the callee.

use super::Avx2;
use crate::filter::hash::HashArg;

/// `job` compiled with AVX2, BMI1, BMI2 and POPCNT enabled.
///
/// # Safety
/// The CPU must support every feature enabled here (what `Isa::detect`
/// asks for).
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
pub(in crate::filter::simd) unsafe fn run_avx2<J: super::super::Job>(job: J) -> J::Out {
    #[cfg(test)]
    super::super::tests::AVX2_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    job.run(Avx2(()))
}

/// `T`'s lookup compiled with AVX2, BMI1, BMI2 and POPCNT enabled.
///
/// # Safety
/// The CPU must support every feature enabled here (what `Isa::detect`
/// asks for).
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
pub(in crate::filter::simd) unsafe fn lookup_avx2<
    T: super::super::HashLookup,
    H: HashArg,
    const LAYOUT: u8,
>(
    t: &T,
    h: H,
) -> bool {
    #[cfg(test)]
    super::super::tests::AVX2_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    t.lookup_with::<_, LAYOUT>(Avx2(()), h.key_hash())
}

/// `T`'s `&mut` insert compiled with AVX2, BMI1, BMI2 and POPCNT enabled.
///
/// # Safety
/// The CPU must support every feature enabled here (what `Isa::detect`
/// asks for).
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
pub(in crate::filter::simd) unsafe fn insert_avx2<
    T: super::super::HashInsert,
    H: HashArg,
    const KIND: u8,
>(
    t: &mut T,
    h: H,
) -> bool {
    #[cfg(test)]
    super::super::tests::AVX2_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    t.insert_mut_with::<_, KIND>(Avx2(()), h.key_hash())
}

/// `T`'s shared insert compiled with AVX2, BMI1, BMI2 and POPCNT enabled.
///
/// # Safety
/// The CPU must support every feature enabled here (what `Isa::detect`
/// asks for).
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
pub(in crate::filter::simd) unsafe fn insert_shared_avx2<
    T: super::super::HashInsert,
    H: HashArg,
    const KIND: u8,
>(
    t: &T,
    h: H,
) -> bool {
    #[cfg(test)]
    super::super::tests::AVX2_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    t.insert_shared_with::<_, KIND>(Avx2(()), h.key_hash())
}

/// `T`'s insert by the owner of its write bias, compiled with AVX2, BMI1,
/// BMI2 and POPCNT enabled.
///
/// # Safety
/// The CPU must support every feature enabled here (what `Isa::detect`
/// asks for).
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
pub(in crate::filter::simd) unsafe fn insert_owned_avx2<
    T: super::super::HashInsert,
    H: HashArg,
    const KIND: u8,
>(
    t: &T,
    h: H,
) -> bool {
    #[cfg(test)]
    super::super::tests::AVX2_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    t.insert_owned_with::<_, KIND>(Avx2(()), h.key_hash())
}
