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
use crate::filter::hash::{HashAlgo, HashArg, KeyHash};

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

/// A filter's inserts (`&mut`, shared and the write bias owner's)
/// compiled for its kind and the best probe of this CPU, called through
/// pointers, of a key's [`KeyHash`] and of a key's one 64-bit hash
/// (XXH3-64; [`HashArg`]). Through `simd::dispatch` a key-by-key insert
/// built its job (the filter's parameters, its bits and the hash, 64 bytes)
/// in memory and checked the CPU per call: callgrind, lab loop of
/// `insert_mut`, 200,000 `u64` ids into a blocked filter hashed with
/// XXH3-64: 194 instructions per key, sbbf-rs-safe's insert 50.
pub(crate) struct InsertFn<T> {
    /// The inserts of a [`KeyHash`].
    by_hash: Inserts<T, KeyHash>,
    /// The inserts of a key's one 64-bit hash.
    by_64: Inserts<T, u64>,
    /// The filter's kind ([`STANDARD`] ...), read by [`InsertFn::call`]
    /// in a crate built for AVX2.
    #[cfg_attr(
        not(all(target_feature = "avx2", target_feature = "bmi2")),
        allow(dead_code)
    )]
    kind: u8,
}

/// One filter kind's three compiled inserts of a hash passed as `H` (not
/// called in a crate built for AVX2, where [`InsertFn::call`] inlines the
/// insert instead).
#[cfg_attr(
    all(target_feature = "avx2", target_feature = "bmi2"),
    allow(dead_code)
)]
pub(crate) struct Inserts<T, H> {
    /// The `&mut` insert ([`InsertFn::call`]).
    f: unsafe fn(&mut T, H) -> bool,
    /// The shared insert ([`InsertFn::call_shared`]).
    shared: unsafe fn(&T, H) -> bool,
    /// The insert of the write bias's owner ([`InsertFn::call_owned`]).
    owned: unsafe fn(&T, H) -> bool,
}

impl<T, H> Clone for Inserts<T, H> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, H> Copy for Inserts<T, H> {}

impl<T> Clone for InsertFn<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for InsertFn<T> {}

/// A hash an [`InsertFn`] has inserts of: which of its two sets takes it.
pub(crate) trait InsertArg: HashArg {
    /// `f`'s inserts of a hash passed as `Self`.
    fn inserts<T>(f: InsertFn<T>) -> Inserts<T, Self>;
}

impl InsertArg for KeyHash {
    #[inline(always)]
    fn inserts<T>(f: InsertFn<T>) -> Inserts<T, Self> {
        f.by_hash
    }
}

impl InsertArg for u64 {
    #[inline(always)]
    fn inserts<T>(f: InsertFn<T>) -> Inserts<T, Self> {
        f.by_64
    }
}

impl<T: HashInsert, H: HashArg> Inserts<T, H> {
    /// The inserts of a filter of kind `kind` for this CPU; `k` is the
    /// filter's: a blocked filter whose `k` fits the probe's one row gets
    /// the inserts compiled for its `k` (as `LookupFn::best`).
    fn best(kind: u8, k: u32) -> Self {
        #[cfg(all(
            target_arch = "x86_64",
            not(all(target_feature = "avx2", target_feature = "bmi2"))
        ))]
        if Isa::detect() == Isa::Avx2 {
            type Mut<T, H> = unsafe fn(&mut T, H) -> bool;
            type Shared<T, H> = unsafe fn(&T, H) -> bool;
            let row = (k as usize).wrapping_sub(1);
            let (f, shared, owned): (Mut<T, H>, Shared<T, H>, Shared<T, H>) = match kind {
                BLOCKED32 if row < 8 => (
                    per_k!(insert_avx2::<T, H>, BLOCKED32)[row],
                    per_k!(insert_shared_avx2::<T, H>, BLOCKED32)[row],
                    per_k!(insert_owned_avx2::<T, H>, BLOCKED32)[row],
                ),
                BLOCKED if row < 8 => (
                    per_k!(insert_avx2::<T, H>, BLOCKED)[row],
                    per_k!(insert_shared_avx2::<T, H>, BLOCKED)[row],
                    per_k!(insert_owned_avx2::<T, H>, BLOCKED)[row],
                ),
                _ => (
                    by_kind::<Mut<T, H>>(kind, per_kind!(insert_avx2::<T, H>)),
                    by_kind::<Shared<T, H>>(kind, per_kind!(insert_shared_avx2::<T, H>)),
                    by_kind::<Shared<T, H>>(kind, per_kind!(insert_owned_avx2::<T, H>)),
                ),
            };
            return Inserts { f, shared, owned };
        }
        let _ = k;
        Inserts::scalar(kind)
    }

    /// The inserts of a filter of this kind with the portable probe.
    fn scalar(kind: u8) -> Self {
        type Shared<T, H> = unsafe fn(&T, H) -> bool;
        Inserts {
            f: by_kind::<unsafe fn(&mut T, H) -> bool>(kind, per_kind!(insert_scalar::<T, H>)),
            shared: by_kind::<Shared<T, H>>(kind, per_kind!(insert_shared_scalar::<T, H>)),
            owned: by_kind::<Shared<T, H>>(kind, per_kind!(insert_owned_scalar::<T, H>)),
        }
    }
}

impl<T: HashInsert> InsertFn<T> {
    /// The inserts of a filter of this layout and hash for this CPU
    /// ([`Inserts::best`]).
    #[inline]
    pub(crate) fn best(layout: Layout, algo: HashAlgo, k: u32) -> Self {
        let kind = kind(layout, algo);
        InsertFn {
            by_hash: Inserts::best(kind, k),
            by_64: Inserts::best(kind, k),
            kind,
        }
    }

    /// Inserts `h` into `t`.
    #[inline(always)]
    pub(crate) fn call<H: InsertArg>(self, t: &mut T, h: H) -> bool {
        #[cfg(all(
            target_arch = "x86_64",
            target_feature = "avx2",
            target_feature = "bmi2"
        ))]
        return with_kind!(
            self.kind,
            t.insert_mut_with(super::avx2::Avx2(()), h.key_hash())
        );
        // SAFETY: the pointer is `insert_avx2` only if `Isa::detect` found
        // every feature it enables (`best`, the only constructor), else the
        // scalar one, which has no requirement.
        #[allow(unreachable_code)]
        unsafe {
            (H::inserts(self).f)(t, h)
        }
    }

    /// Inserts `h` into `t`, which other threads may write and read
    /// meanwhile.
    #[inline(always)]
    pub(crate) fn call_shared<H: InsertArg>(self, t: &T, h: H) -> bool {
        #[cfg(all(
            target_arch = "x86_64",
            target_feature = "avx2",
            target_feature = "bmi2"
        ))]
        return with_kind!(
            self.kind,
            t.insert_shared_with(super::avx2::Avx2(()), h.key_hash())
        );
        // SAFETY: as in `call`: the pointer is `insert_shared_avx2` only if
        // `Isa::detect` found every feature it enables, else the scalar one.
        #[allow(unreachable_code)]
        unsafe {
            (H::inserts(self).shared)(t, h)
        }
    }

    /// Inserts `h` into `t`, which other threads may read meanwhile but
    /// not write: the caller holds `t`'s write bias (`bloom::bias`).
    #[inline(always)]
    pub(crate) fn call_owned<H: InsertArg>(self, t: &T, h: H) -> bool {
        #[cfg(all(
            target_arch = "x86_64",
            target_feature = "avx2",
            target_feature = "bmi2"
        ))]
        return with_kind!(
            self.kind,
            t.insert_owned_with(super::avx2::Avx2(()), h.key_hash())
        );
        // SAFETY: as in `call`: the pointer is `insert_owned_avx2` only if
        // `Isa::detect` found every feature it enables, else the scalar one.
        #[allow(unreachable_code)]
        unsafe {
            (H::inserts(self).owned)(t, h)
        }
    }
}

#[cfg(test)]
impl<T: HashInsert> InsertFn<T> {
    /// Every insert this build can run on this CPU for a layout and hash
    /// (the scalar one, and the one [`InsertFn::best`] picks), for the tests.
    pub(crate) fn all_for_tests(layout: Layout, algo: HashAlgo, k: u32) -> [Self; 2] {
        let kind = kind(layout, algo);
        [
            InsertFn {
                by_hash: Inserts::scalar(kind),
                by_64: Inserts::scalar(kind),
                kind,
            },
            InsertFn::best(layout, algo, k),
        ]
    }

    /// Calls the pointer itself (which [`InsertFn::call`] skips in a crate
    /// built for AVX2).
    pub(crate) fn call_pointer_for_tests<H: InsertArg>(self, t: &mut T, h: H) -> bool {
        // SAFETY: as in `call`: the pointer is `insert_avx2` only if this
        // CPU has every feature it enables.
        unsafe { (H::inserts(self).f)(t, h) }
    }

    /// Calls the shared insert's pointer itself (which
    /// [`InsertFn::call_shared`] skips in a crate built for AVX2).
    pub(crate) fn call_shared_pointer_for_tests<H: InsertArg>(self, t: &T, h: H) -> bool {
        // SAFETY: as in `call_shared`: the pointer is `insert_shared_avx2`
        // only if this CPU has every feature it enables.
        unsafe { (H::inserts(self).shared)(t, h) }
    }

    /// Calls the bias owner's insert's pointer itself (which
    /// [`InsertFn::call_owned`] skips in a crate built for AVX2). The
    /// caller is the only thread that writes `t`.
    pub(crate) fn call_owned_pointer_for_tests<H: InsertArg>(self, t: &T, h: H) -> bool {
        // SAFETY: as in `call_owned`: the pointer is `insert_owned_avx2`
        // only if this CPU has every feature it enables.
        unsafe { (H::inserts(self).owned)(t, h) }
    }
}

/// `T`'s insert with the scalar probe (`unsafe` only to share
/// [`InsertFn`]'s pointer type; it has no requirement).
unsafe fn insert_scalar<T: HashInsert, H: HashArg, const KIND: u8>(t: &mut T, h: H) -> bool {
    t.insert_mut_with::<_, KIND>(Scalar, h.key_hash())
}

/// `T`'s shared insert with the scalar probe (as [`insert_scalar`]).
unsafe fn insert_shared_scalar<T: HashInsert, H: HashArg, const KIND: u8>(t: &T, h: H) -> bool {
    t.insert_shared_with::<_, KIND>(Scalar, h.key_hash())
}

/// `T`'s insert by the write bias's owner with the scalar probe (`unsafe`
/// as [`insert_shared_scalar`]).
unsafe fn insert_owned_scalar<T: HashInsert, H: HashArg, const KIND: u8>(t: &T, h: H) -> bool {
    t.insert_owned_with::<_, KIND>(Scalar, h.key_hash())
}
