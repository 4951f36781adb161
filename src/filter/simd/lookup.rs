//! A single lookup of a hashed key, compiled once per filter kind (layout,
//! and for the blocked layout its hash: [`BLOCKED32`]) and probe, called
//! through a pointer chosen when the filter is made ([`LookupFn`]).

use super::Probe;
use super::Scalar;
#[cfg(all(
    target_arch = "x86_64",
    not(all(target_feature = "avx2", target_feature = "bmi2"))
))]
use super::{lookup_avx2, Isa};
use crate::filter::geometry::Layout;
use crate::filter::hash::{HashAlgo, HashArg, HashSpec, KeyHash};

/// A filter kind as a const generic parameter of
/// [`HashLookup::lookup_with`]: its layout, and for the blocked layout
/// whether its hash is XXH3-64 ([`BLOCKED32`]).
pub(crate) const STANDARD: u8 = 0;
/// See [`STANDARD`].
pub(crate) const BLOCKED: u8 = 1;
/// See [`STANDARD`].
pub(crate) const SPLIT: u8 = 2;
/// The blocked layout hashed with XXH3-64: `h2 = h << 32`, so each
/// position is the top 9 bits of a 32-bit product (`filter::hash`), which
/// the AVX2 probe computes with one `vpmulld` per eight probes instead of
/// the seven instructions of the 64-bit product's top half
/// ([`Probe::shared_block_has_all32`]). The same answers as [`BLOCKED`].
pub(crate) const BLOCKED32: u8 = 3;
/// The blocked layout hashed with XXH3-64 and sectorized positions
/// (`hash::sector_masks`): one bit in each of the block's eight sectors,
/// `k = 8` ([`Probe::shared_sectors_has_all`]).
pub(crate) const SECTORIZED: u8 = 4;

/// A blocked kind ([`BLOCKED`] or [`BLOCKED32`]) compiled for one `k` of
/// at most 8, the probe's one row: `kind | k << 3` (the kind in the low
/// three bits, `k` above them; 0 above them means the filter's own `k`, read
/// per lookup). The probe's branch on `k` and its load of the live lanes by `k`
/// fold away (five instructions of the XXH3-64 lookup's 39, disassembled).
#[cfg_attr(
    all(target_feature = "avx2", target_feature = "bmi2"),
    allow(dead_code)
)]
pub(crate) const fn with_k(kind: u8, k: u8) -> u8 {
    kind | k << 3
}

/// The kind of a compiled lookup's `LAYOUT` ([`with_k`]).
pub(crate) const fn base_kind(layout: u8) -> u8 {
    layout & 7
}

/// The `k` a lookup or insert compiled for `layout` ([`with_k`]) runs
/// with: the one it was compiled for, else the filter's own, `filter_k`.
#[inline(always)]
pub(crate) const fn k_of(layout: u8, filter_k: u32) -> u32 {
    match layout >> 3 {
        0 => filter_k,
        k => k as u32,
    }
}

/// The one of `fs` compiled for `kind`: `fs[STANDARD]`, `fs[BLOCKED]`,
/// `fs[SPLIT]`, `fs[BLOCKED32]` or `fs[SECTORIZED]` (the kinds are 0 to 4).
pub(super) fn by_kind<F: Copy>(kind: u8, fs: [F; KINDS]) -> F {
    fs[usize::from(kind.min(SECTORIZED))]
}

/// How many kinds there are.
pub(super) const KINDS: usize = SECTORIZED as usize + 1;

/// The kind ([`STANDARD`] ...) of a filter of `layout` hashed with `algo`.
pub(super) fn kind(layout: Layout, algo: HashAlgo) -> u8 {
    match (layout, algo) {
        (Layout::Standard, _) => STANDARD,
        (Layout::Blocked, HashAlgo::Xxh3_64) => BLOCKED32,
        (Layout::Blocked, HashAlgo::Xxh3_64Sectorized) => SECTORIZED,
        (Layout::Blocked, _) => BLOCKED,
        (Layout::SplitBlock, _) => SPLIT,
    }
}

/// The table of compiled lookups [`LookupChoice::index`] indexes, of
/// pointer type `$F`: the scalar ones by kind; with run-time dispatch, then
/// the AVX2 ones by kind and the blocked kinds' for each `k` of the row.
/// A constant, in read-only memory (an array of pointers built in the
/// function was written to the stack at every call).
macro_rules! lookup_table {
    ($F:ty, $scalar:ident, $avx2:ident::<$($t:ty),+>) => {{
        #[cfg(all(
            target_arch = "x86_64",
            not(all(target_feature = "avx2", target_feature = "bmi2"))
        ))]
        let table = const {
            let s: [$F; KINDS] = per_kind!($scalar::<$($t),+>);
            let a: [$F; KINDS] = per_kind!($avx2::<$($t),+>);
            let b32: [$F; 8] = per_k!($avx2::<$($t),+>, BLOCKED32);
            let b: [$F; 8] = per_k!($avx2::<$($t),+>, BLOCKED);
            [
                s[0], s[1], s[2], s[3], s[4], a[0], a[1], a[2], a[3], a[4], b32[0], b32[1], b32[2],
                b32[3], b32[4], b32[5], b32[6], b32[7], b[0], b[1], b[2], b[3], b[4], b[5], b[6],
                b[7],
            ]
        };
        #[cfg(not(all(
            target_arch = "x86_64",
            not(all(target_feature = "avx2", target_feature = "bmi2"))
        )))]
        let table = const { per_kind!($scalar::<$($t),+>) };
        table
    }};
}

/// A lookup of one hashed key, written once over [`Probe`] (see
/// [`LookupFn`]).
pub(crate) trait HashLookup {
    /// Whether the key hashed to `h` may be present, probed with `probe`;
    /// `LAYOUT` is the filter's kind ([`STANDARD`], [`BLOCKED`],
    /// [`BLOCKED32`], [`SECTORIZED`] or [`SPLIT`]): each kind's lookup is compiled on its
    /// own, without the others' registers and branches.
    fn lookup_with<P: Probe, const LAYOUT: u8>(&self, probe: P, h: KeyHash) -> bool;
}

/// A filter's lookup compiled for its layout and the best probe of this
/// CPU, called through a pointer: a [`crate::BitFilter`] chooses it once,
/// when made; a [`crate::FilterView`] per call (see its `contains_hash`).
///
/// A single lookup used to [`dispatch`] per call: the caller loaded the
/// cached CPU answer, branched, kept the scalar lookup inlined beside the
/// call (its registers spilled and reloaded around the call) and passed
/// the filter and hash as a struct in memory; the callee branched on the
/// layout and saved registers for the standard layout's loop. Callgrind
/// (lab loop of `contains`, 1M-key blocked filter, 16-byte keys, k = 7):
/// 128 instructions per lookup; through a `LookupFn`, with the hash in
/// registers and one function per layout, 94 (the standard layout 92;
/// 92 for the blocked one since its probe answers with one `vptest`).
/// Built for AVX2 (`-C target-cpu=x86-64-v3`) there is no pointer: the
/// lookup inlines into the caller (85: fewer instructions, but at 100M
/// keys no faster; docs/BENCHMARKS.md).
///
/// A key hashed with XXH3-64 is looked up by its one 64-bit hash `h`
/// ([`LookupFn::call64`]; `h2 = h << 32` is derived in the callee), not
/// by its [`KeyHash`]. That saves the caller's shift and the callee's
/// shift back, three instructions of about fifty per lookup, and 8% of its
/// time (lab loop compiled for the baseline CPU, 1M 16-byte keys,
/// sectorized: 4.78–4.81 → 4.36–4.42 ns per key, sbbf-rs-safe 4.23–4.30;
/// docs/BENCHMARKS.md); why so much was not found.
///
/// [`dispatch`]: super::dispatch
pub(crate) struct LookupFn<T> {
    /// The compiled lookup (not called in a crate built for AVX2, where
    /// [`LookupFn::call`] inlines the lookup instead).
    #[cfg_attr(
        all(target_feature = "avx2", target_feature = "bmi2"),
        allow(dead_code)
    )]
    f: unsafe fn(&T, KeyHash) -> bool,
    /// The same lookup of a key's one 64-bit hash `h` (XXH3-64), whose
    /// [`KeyHash`] is [`KeyHash::of_64`]`(h)`: [`LookupFn::call64`].
    #[cfg_attr(
        all(target_feature = "avx2", target_feature = "bmi2"),
        allow(dead_code)
    )]
    f64: unsafe fn(&T, u64) -> bool,
    /// The filter's kind ([`STANDARD`] ...).
    kind: u8,
}

impl<T> Clone for LookupFn<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for LookupFn<T> {}

impl<T> std::fmt::Debug for LookupFn<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LookupFn")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// Which compiled lookup [`LookupFn::best`] picks for a filter on this CPU,
/// as its place in one table of them ([`LookupFn::chosen`]): for a filter
/// that cannot hold the pointer itself. A [`FilterView`] holding a
/// `fn(&FilterView<'a>, KeyHash)` would be invariant in `'a`; choosing per
/// call cost its every lookup a load of the CPU's answer, the kind's match
/// and the choice of table. A view keeps this (two bytes) instead.
///
/// [`FilterView`]: crate::FilterView
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LookupChoice {
    /// The lookup's place in [`LookupFn::chosen`]'s table: the scalar
    /// lookups by kind (0–4); with run-time dispatch, then the AVX2 ones by
    /// kind (5–9), and the blocked kinds' compiled for each `k` of the
    /// probe's row ([`BLOCKED32`] 10–17, [`BLOCKED`] 18–25).
    index: u8,
    /// The filter's kind ([`STANDARD`] ...).
    kind: u8,
}

impl LookupChoice {
    /// The lookup of a filter of this layout and hash for this CPU.
    /// `k` is the filter's: a blocked filter whose `k` fits the probe's one
    /// row gets the lookup compiled for its `k` ([`with_k`]).
    pub(crate) fn best(layout: Layout, algo: HashAlgo, k: u32) -> Self {
        let kind = kind(layout, algo);
        #[cfg(all(
            target_arch = "x86_64",
            not(all(target_feature = "avx2", target_feature = "bmi2"))
        ))]
        if Isa::detect() == Isa::Avx2 {
            let row = k.wrapping_sub(1);
            let index = match kind {
                BLOCKED32 if row < 8 => 10 + row as u8,
                BLOCKED if row < 8 => 18 + row as u8,
                _ => KINDS as u8 + kind.min(SECTORIZED),
            };
            return LookupChoice { index, kind };
        }
        let _ = k;
        LookupChoice::scalar(kind)
    }

    /// The scalar lookup of a filter of this kind.
    fn scalar(kind: u8) -> Self {
        LookupChoice {
            index: kind.min(SECTORIZED),
            kind,
        }
    }
}

impl<T: HashLookup> LookupFn<T> {
    /// The lookup of a filter of this layout and hash for this CPU
    /// ([`LookupChoice::best`]).
    #[inline]
    pub(crate) fn best(layout: Layout, algo: HashAlgo, k: u32) -> Self {
        LookupFn::chosen(LookupChoice::best(layout, algo, k))
    }

    /// The lookup `c` names: one load from a table that is a constant (in
    /// read-only memory; an array of pointers built in the function was
    /// written to the stack at every call).
    #[inline(always)]
    pub(crate) fn chosen(c: LookupChoice) -> Self {
        type F<T> = unsafe fn(&T, KeyHash) -> bool;
        type F64<T> = unsafe fn(&T, u64) -> bool;
        let i = usize::from(c.index);
        let f = lookup_table!(F<T>, lookup_scalar, lookup_avx2::<T, KeyHash>)
            .get(i)
            .copied();
        let f64 = lookup_table!(F64<T>, lookup_scalar, lookup_avx2::<T, u64>)
            .get(i)
            .copied();
        // `None` is unreachable (`LookupChoice::best` makes every index):
        // the scalar lookup of the kind answers alike.
        LookupFn {
            f: f.unwrap_or_else(|| by_kind::<F<T>>(c.kind, per_kind!(lookup_scalar::<T, KeyHash>))),
            f64: f64
                .unwrap_or_else(|| by_kind::<F64<T>>(c.kind, per_kind!(lookup_scalar::<T, u64>))),
            kind: c.kind,
        }
    }

    /// Looks `h` up in `t`.
    #[inline(always)]
    pub(crate) fn call(self, t: &T, h: KeyHash) -> bool {
        #[cfg(all(
            target_arch = "x86_64",
            target_feature = "avx2",
            target_feature = "bmi2"
        ))]
        return with_kind!(self.kind, t.lookup_with(super::avx2::Avx2(()), h));
        // SAFETY: the pointer is `lookup_avx2` only if `Isa::detect` found
        // every feature it enables (`best`, the only constructor), else the scalar one,
        // which has no requirement.
        #[allow(unreachable_code)]
        unsafe {
            (self.f)(t, h)
        }
    }

    /// Looks `key`, hashed with `hash`, up in `t`: by its one 64-bit hash
    /// where `hash` makes one ([`LookupFn::call64`]), else by its
    /// [`KeyHash`]. What `contains` of a filter, a view and a frozen filter
    /// is.
    #[inline(always)]
    pub(crate) fn key(self, t: &T, hash: HashSpec, key: &[u8]) -> bool {
        match hash.hash64(key) {
            Some(h) => self.call64(t, h),
            None => self.call(t, hash.hash(key)),
        }
    }

    /// Looks up, in `t`, the key whose one 64-bit hash is `h`: the same
    /// answer as [`LookupFn::call`] of [`KeyHash::of_64`]`(h)`.
    #[inline(always)]
    pub(crate) fn call64(self, t: &T, h: u64) -> bool {
        #[cfg(all(
            target_arch = "x86_64",
            target_feature = "avx2",
            target_feature = "bmi2"
        ))]
        return self.call(t, KeyHash::of_64(h));
        // SAFETY: as in `call`: `f64` is `lookup_avx2` only if
        // `Isa::detect` found every feature it enables.
        #[allow(unreachable_code)]
        unsafe {
            (self.f64)(t, h)
        }
    }
}

#[cfg(test)]
impl<T: HashLookup> LookupFn<T> {
    /// Every lookup this build can run on this CPU for a layout and hash
    /// (the scalar one, and the one [`LookupFn::best`] picks), for the tests.
    pub(crate) fn all_for_tests(layout: Layout, algo: HashAlgo, k: u32) -> [Self; 2] {
        [
            LookupFn::chosen(LookupChoice::scalar(kind(layout, algo))),
            LookupFn::best(layout, algo, k),
        ]
    }

    /// Calls the pointer itself (which [`LookupFn::call`] skips in a crate
    /// built for AVX2).
    pub(crate) fn call_pointer_for_tests(self, t: &T, h: KeyHash) -> bool {
        // SAFETY: as in `call`: the pointer is `lookup_avx2` only if this
        // CPU has every feature it enables.
        unsafe { (self.f)(t, h) }
    }

    /// Calls the 64-bit hash's pointer itself ([`LookupFn::call64`]).
    pub(crate) fn call64_pointer_for_tests(self, t: &T, h: u64) -> bool {
        // SAFETY: as in `call64`.
        unsafe { (self.f64)(t, h) }
    }
}

/// `T`'s lookup with the scalar probe (`unsafe` only to share
/// [`LookupFn`]'s pointer type; it has no requirement).
unsafe fn lookup_scalar<T: HashLookup, H: HashArg, const LAYOUT: u8>(t: &T, h: H) -> bool {
    t.lookup_with::<_, LAYOUT>(Scalar, h.key_hash())
}
