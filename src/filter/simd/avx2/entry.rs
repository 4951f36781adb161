//! The AVX2 probe's entry points: each a function compiled with AVX2,
//! BMI1, BMI2 and POPCNT enabled that makes the [`Avx2`] token, called
//! only after `Isa::detect` said the CPU has them (`dispatch`,
//! `LookupFn::best`, `InsertFn::best`); absent from a crate built for
//! AVX2 and BMI2, which needs no such check.

use super::Avx2;

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
pub(in crate::filter::simd) unsafe fn lookup_avx2<T: super::super::HashLookup, const LAYOUT: u8>(
    t: &T,
    h: crate::filter::hash::KeyHash,
) -> bool {
    #[cfg(test)]
    super::super::tests::AVX2_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    t.lookup_with::<_, LAYOUT>(Avx2(()), h)
}

/// [`lookup_avx2`] of the one 64-bit hash `h` of a key hashed with XXH3-64
/// (`KeyHash::of_64`), `h2` derived here, in the callee.
///
/// # Safety
/// The CPU must support every feature enabled here (what `Isa::detect`
/// asks for).
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
pub(in crate::filter::simd) unsafe fn lookup64_avx2<
    T: super::super::HashLookup,
    const LAYOUT: u8,
>(
    t: &T,
    h: u64,
) -> bool {
    #[cfg(test)]
    super::super::tests::AVX2_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    t.lookup_with::<_, LAYOUT>(Avx2(()), crate::filter::hash::KeyHash::of_64(h))
}

/// `T`'s `&mut` insert compiled with AVX2, BMI1, BMI2 and POPCNT enabled.
///
/// # Safety
/// The CPU must support every feature enabled here (what `Isa::detect`
/// asks for).
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
pub(in crate::filter::simd) unsafe fn insert_avx2<T: super::super::HashInsert, const KIND: u8>(
    t: &mut T,
    h: crate::filter::hash::KeyHash,
) -> bool {
    #[cfg(test)]
    super::super::tests::AVX2_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    t.insert_mut_with::<_, KIND>(Avx2(()), h)
}

/// `T`'s shared insert compiled with AVX2, BMI1, BMI2 and POPCNT enabled.
///
/// # Safety
/// The CPU must support every feature enabled here (what `Isa::detect`
/// asks for).
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
pub(in crate::filter::simd) unsafe fn insert_shared_avx2<
    T: super::super::HashInsert,
    const KIND: u8,
>(
    t: &T,
    h: crate::filter::hash::KeyHash,
) -> bool {
    #[cfg(test)]
    super::super::tests::AVX2_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    t.insert_shared_with::<_, KIND>(Avx2(()), h)
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
    const KIND: u8,
>(
    t: &T,
    h: crate::filter::hash::KeyHash,
) -> bool {
    #[cfg(test)]
    super::super::tests::AVX2_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    t.insert_owned_with::<_, KIND>(Avx2(()), h)
}
