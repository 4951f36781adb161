//! A single insert of a hashed key into a filter held `&mut`, compiled
//! once per filter kind and probe, called through a pointer chosen when the
//! filter is made ([`InsertFn`]): what [`super::LookupFn`] is to lookups.

#[cfg(all(
    target_arch = "x86_64",
    not(all(target_feature = "avx2", target_feature = "bmi2"))
))]
use super::lookup::with_k;
use super::lookup::{by_kind, kind, BLOCKED, BLOCKED32, SECTORIZED, SPLIT, STANDARD};
use super::Probe;
use super::Scalar;
#[cfg(all(
    target_arch = "x86_64",
    not(all(target_feature = "avx2", target_feature = "bmi2"))
))]
use super::{insert_avx2, insert_owned_avx2, insert_shared_avx2, Isa};
use crate::filter::geometry::Layout;
use crate::filter::hash::{HashAlgo, KeyHash};

/// How the AVX2 probe builds a key's word masks ([`Probe::block_masks`];
/// the scalar probe has one way). Each is faster where the other is not
/// (lab, 1M keys, `docs/BENCHMARKS.md`, "An insert's masks from a table of
/// one-hot windows").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MaskWay {
    /// From a table of one-hot windows (`avx2/masks.rs`): two loads and two
    /// ORs per position, few shifts and shuffles. A key-by-key insert's:
    /// 9.1 → 8.2 ns per `insert_mut` of a `u64` id.
    Windows,
    /// In registers: per position a broadcast, and per register a subtract
    /// and a `vpsllvd`, no load. The bulk inserts', whose loops keep the
    /// load pipes busy with their keys, prefetches and blocks: with the
    /// windows they took 4–7% longer (`insert_many_mut` of ids 6.25–6.29 →
    /// 6.66–6.72 ns per key).
    Shifts,
}

/// An insert of one hashed key, written once over [`Probe`] (see
/// [`InsertFn`]): into a filter no other thread can reach, or one that
/// others may write at the same time.
pub(crate) trait HashInsert {
    /// Sets the bits of the key hashed to `h`, with `probe`; whether one
    /// was clear. `KIND` is the filter's kind ([`STANDARD`] ...).
    fn insert_mut_with<P: Probe, const KIND: u8>(&mut self, probe: P, h: KeyHash) -> bool;

    /// [`HashInsert::insert_mut_with`] into a filter other threads may
    /// write and read meanwhile.
    fn insert_shared_with<P: Probe, const KIND: u8>(&self, probe: P, h: KeyHash) -> bool;

    /// [`HashInsert::insert_mut_with`] into a filter other threads may
    /// read meanwhile but no other thread writes: the caller holds its
    /// write bias (`bloom::bias`).
    fn insert_owned_with<P: Probe, const KIND: u8>(&self, probe: P, h: KeyHash) -> bool;
}

/// A filter's `&mut` insert compiled for its kind and the best probe of
/// this CPU, called through a pointer. Through `simd::dispatch` a
/// key-by-key insert built its job (the filter's parameters, its bits and
/// the hash, 64 bytes) in memory and checked the CPU per call: callgrind,
/// lab loop of `insert_mut`, 200,000 `u64` ids into a blocked filter
/// hashed with XXH3-64: 194 instructions per key, sbbf-rs-safe's insert
/// 50.
pub(crate) struct InsertFn<T> {
    /// The compiled insert (not called in a crate built for AVX2, where
    /// [`InsertFn::call`] inlines the insert instead).
    #[cfg_attr(
        all(target_feature = "avx2", target_feature = "bmi2"),
        allow(dead_code)
    )]
    f: unsafe fn(&mut T, KeyHash) -> bool,
    /// The compiled shared insert, as `f` ([`InsertFn::call_shared`]).
    #[cfg_attr(
        all(target_feature = "avx2", target_feature = "bmi2"),
        allow(dead_code)
    )]
    shared: unsafe fn(&T, KeyHash) -> bool,
    /// The compiled insert of the write bias's owner, as `f`
    /// ([`InsertFn::call_owned`]).
    #[cfg_attr(
        all(target_feature = "avx2", target_feature = "bmi2"),
        allow(dead_code)
    )]
    owned: unsafe fn(&T, KeyHash) -> bool,
    /// The filter's kind ([`STANDARD`] ...), read by [`InsertFn::call`]
    /// in a crate built for AVX2.
    #[cfg_attr(
        not(all(target_feature = "avx2", target_feature = "bmi2")),
        allow(dead_code)
    )]
    kind: u8,
}

impl<T> Clone for InsertFn<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for InsertFn<T> {}

impl<T: HashInsert> InsertFn<T> {
    /// The insert of a filter of this layout and hash for this CPU; `k` is
    /// the filter's: a blocked filter whose `k` fits the probe's one row
    /// gets the inserts compiled for its `k` (as `LookupFn::best`).
    #[inline]
    pub(crate) fn best(layout: Layout, algo: HashAlgo, k: u32) -> Self {
        let kind = kind(layout, algo);
        #[cfg(all(
            target_arch = "x86_64",
            not(all(target_feature = "avx2", target_feature = "bmi2"))
        ))]
        if Isa::detect() == Isa::Avx2 {
            type Mut<T> = unsafe fn(&mut T, KeyHash) -> bool;
            type Shared<T> = unsafe fn(&T, KeyHash) -> bool;
            let row = (k as usize).wrapping_sub(1);
            let (f, shared, owned): (Mut<T>, Shared<T>, Shared<T>) = match kind {
                BLOCKED32 if row < 8 => (
                    per_k!(insert_avx2::<T>, BLOCKED32)[row],
                    per_k!(insert_shared_avx2::<T>, BLOCKED32)[row],
                    per_k!(insert_owned_avx2::<T>, BLOCKED32)[row],
                ),
                BLOCKED if row < 8 => (
                    per_k!(insert_avx2::<T>, BLOCKED)[row],
                    per_k!(insert_shared_avx2::<T>, BLOCKED)[row],
                    per_k!(insert_owned_avx2::<T>, BLOCKED)[row],
                ),
                _ => (
                    by_kind::<Mut<T>>(kind, per_kind!(insert_avx2::<T>)),
                    by_kind::<Shared<T>>(kind, per_kind!(insert_shared_avx2::<T>)),
                    by_kind::<Shared<T>>(kind, per_kind!(insert_owned_avx2::<T>)),
                ),
            };
            return InsertFn {
                f,
                shared,
                owned,
                kind,
            };
        }
        let _ = k;
        InsertFn::scalar(kind)
    }

    /// The insert of a filter of this kind with the portable probe.
    fn scalar(kind: u8) -> Self {
        let f = by_kind::<unsafe fn(&mut T, KeyHash) -> bool>(kind, per_kind!(insert_scalar::<T>));
        type Shared<T> = unsafe fn(&T, KeyHash) -> bool;
        let shared = by_kind::<Shared<T>>(kind, per_kind!(insert_shared_scalar::<T>));
        let owned = by_kind::<Shared<T>>(kind, per_kind!(insert_owned_scalar::<T>));
        InsertFn {
            f,
            shared,
            owned,
            kind,
        }
    }

    /// Inserts `h` into `t`.
    #[inline(always)]
    pub(crate) fn call(self, t: &mut T, h: KeyHash) -> bool {
        #[cfg(all(
            target_arch = "x86_64",
            target_feature = "avx2",
            target_feature = "bmi2"
        ))]
        return with_kind!(self.kind, t.insert_mut_with(super::avx2::Avx2(()), h));
        // SAFETY: the pointer is `insert_avx2` only if `Isa::detect` found
        // every feature it enables (`best`, the only constructor), else the
        // scalar one, which has no requirement.
        #[allow(unreachable_code)]
        unsafe {
            (self.f)(t, h)
        }
    }

    /// Inserts `h` into `t`, which other threads may write and read
    /// meanwhile.
    #[inline(always)]
    pub(crate) fn call_shared(self, t: &T, h: KeyHash) -> bool {
        #[cfg(all(
            target_arch = "x86_64",
            target_feature = "avx2",
            target_feature = "bmi2"
        ))]
        return with_kind!(self.kind, t.insert_shared_with(super::avx2::Avx2(()), h));
        // SAFETY: as in `call`: the pointer is `insert_shared_avx2` only if
        // `Isa::detect` found every feature it enables, else the scalar one.
        #[allow(unreachable_code)]
        unsafe {
            (self.shared)(t, h)
        }
    }

    /// Inserts `h` into `t`, which other threads may read meanwhile but
    /// not write: the caller holds `t`'s write bias (`bloom::bias`).
    #[inline(always)]
    pub(crate) fn call_owned(self, t: &T, h: KeyHash) -> bool {
        #[cfg(all(
            target_arch = "x86_64",
            target_feature = "avx2",
            target_feature = "bmi2"
        ))]
        return with_kind!(self.kind, t.insert_owned_with(super::avx2::Avx2(()), h));
        // SAFETY: as in `call`: the pointer is `insert_owned_avx2` only if
        // `Isa::detect` found every feature it enables, else the scalar one.
        #[allow(unreachable_code)]
        unsafe {
            (self.owned)(t, h)
        }
    }
}

#[cfg(test)]
impl<T: HashInsert> InsertFn<T> {
    /// Every insert this build can run on this CPU for a layout and hash
    /// (the scalar one, and the one [`InsertFn::best`] picks), for the tests.
    pub(crate) fn all_for_tests(layout: Layout, algo: HashAlgo, k: u32) -> [Self; 2] {
        [
            InsertFn::scalar(kind(layout, algo)),
            InsertFn::best(layout, algo, k),
        ]
    }

    /// Calls the pointer itself (which [`InsertFn::call`] skips in a crate
    /// built for AVX2).
    pub(crate) fn call_pointer_for_tests(self, t: &mut T, h: KeyHash) -> bool {
        // SAFETY: as in `call`: the pointer is `insert_avx2` only if this
        // CPU has every feature it enables.
        unsafe { (self.f)(t, h) }
    }

    /// Calls the shared insert's pointer itself (which
    /// [`InsertFn::call_shared`] skips in a crate built for AVX2).
    pub(crate) fn call_shared_pointer_for_tests(self, t: &T, h: KeyHash) -> bool {
        // SAFETY: as in `call_shared`: the pointer is `insert_shared_avx2`
        // only if this CPU has every feature it enables.
        unsafe { (self.shared)(t, h) }
    }

    /// Calls the bias owner's insert's pointer itself (which
    /// [`InsertFn::call_owned`] skips in a crate built for AVX2). The
    /// caller is the only thread that writes `t`.
    pub(crate) fn call_owned_pointer_for_tests(self, t: &T, h: KeyHash) -> bool {
        // SAFETY: as in `call_owned`: the pointer is `insert_owned_avx2`
        // only if this CPU has every feature it enables.
        unsafe { (self.owned)(t, h) }
    }
}

/// `T`'s insert with the scalar probe (`unsafe` only to share
/// [`InsertFn`]'s pointer type; it has no requirement).
unsafe fn insert_scalar<T: HashInsert, const KIND: u8>(t: &mut T, h: KeyHash) -> bool {
    t.insert_mut_with::<_, KIND>(Scalar, h)
}

/// `T`'s shared insert with the scalar probe (as [`insert_scalar`]).
unsafe fn insert_shared_scalar<T: HashInsert, const KIND: u8>(t: &T, h: KeyHash) -> bool {
    t.insert_shared_with::<_, KIND>(Scalar, h)
}

/// `T`'s insert by the write bias's owner with the scalar probe (`unsafe`
/// as [`insert_shared_scalar`]).
unsafe fn insert_owned_scalar<T: HashInsert, const KIND: u8>(t: &T, h: KeyHash) -> bool {
    t.insert_owned_with::<_, KIND>(Scalar, h)
}
