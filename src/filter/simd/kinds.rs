//! The macros that compile a function once per filter kind, and per `k`
//! of the probe's one row, and pick one of those at run time (declared
//! before the modules that use them: `#[macro_use]` in `simd/mod.rs`).

/// `[f::<T, H, STANDARD>, f::<T, H, BLOCKED>, f::<T, H, SPLIT>,
/// f::<T, H, BLOCKED32>, f::<T, H, SECTORIZED>]`: a function compiled once
/// per filter kind (after its other type parameters), in the order
/// `lookup::by_kind` indexes (the kinds are 0 to 4).
macro_rules! per_kind {
    ($f:ident::<$($t:ty),+>) => {
        [
            $f::<$($t),+, STANDARD>,
            $f::<$($t),+, BLOCKED>,
            $f::<$($t),+, SPLIT>,
            $f::<$($t),+, BLOCKED32>,
            $f::<$($t),+, SECTORIZED>,
        ]
    };
}

/// `[f::<T, with_k(kind, 1)>, …, f::<T, with_k(kind, 8)>]`: a blocked
/// lookup or insert compiled for each `k` of the probe's one row (for the pointers:
/// a crate built for AVX2 inlines the lookup or insert with the filter's
/// `k` read per call).
#[cfg_attr(
    all(target_feature = "avx2", target_feature = "bmi2"),
    allow(unused_macros)
)]
macro_rules! per_k {
    ($f:ident::<$($t:ty),+>, $kind:ident) => {
        [
            $f::<$($t),+, { with_k($kind, 1) }>,
            $f::<$($t),+, { with_k($kind, 2) }>,
            $f::<$($t),+, { with_k($kind, 3) }>,
            $f::<$($t),+, { with_k($kind, 4) }>,
            $f::<$($t),+, { with_k($kind, 5) }>,
            $f::<$($t),+, { with_k($kind, 6) }>,
            $f::<$($t),+, { with_k($kind, 7) }>,
            $f::<$($t),+, { with_k($kind, 8) }>,
        ]
    };
}

/// `$body` with `$K` a `const u32` there: the filter's `k` (`$k`) where
/// it fits the probe's one row (1 to 8), else 0 (read per key). A bulk
/// loop compiled for its filter's `k` as the single lookups and inserts
/// are ([`super::lookup::with_k`]): its probe's live lanes and its branch on `k`
/// fold away.
macro_rules! with_row_k {
    ($k:expr, $K:ident, $body:expr) => {
        match $k {
            1 => {
                const $K: u32 = 1;
                $body
            }
            2 => {
                const $K: u32 = 2;
                $body
            }
            3 => {
                const $K: u32 = 3;
                $body
            }
            4 => {
                const $K: u32 = 4;
                $body
            }
            5 => {
                const $K: u32 = 5;
                $body
            }
            6 => {
                const $K: u32 = 6;
                $body
            }
            7 => {
                const $K: u32 = 7;
                $body
            }
            8 => {
                const $K: u32 = 8;
                $body
            }
            _ => {
                const $K: u32 = 0;
                $body
            }
        }
    };
}
pub(crate) use with_row_k;

/// The `k` a loop compiled by [`with_row_k`] for `K` runs with: `K`, or
/// the filter's `k` where `K` is 0.
#[inline(always)]
pub(crate) const fn row_k<const K: u32>(filter_k: u32) -> u32 {
    if K == 0 {
        filter_k
    } else {
        K
    }
}

/// `t.method::<_, KIND>(args)` for the filter kind `kind`, each kind's
/// call compiled on its own: what a crate built for AVX2 runs in place of
/// the pointers of `per_kind!` (`LookupFn::call`, `InsertFn::call`).
#[cfg(all(
    target_arch = "x86_64",
    target_feature = "avx2",
    target_feature = "bmi2"
))]
macro_rules! with_kind {
    ($kind:expr, $t:ident.$method:ident($($arg:expr),*)) => {
        match $kind {
            STANDARD => $t.$method::<_, STANDARD>($($arg),*),
            BLOCKED => $t.$method::<_, BLOCKED>($($arg),*),
            BLOCKED32 => $t.$method::<_, BLOCKED32>($($arg),*),
            SECTORIZED => $t.$method::<_, SECTORIZED>($($arg),*),
            _ => $t.$method::<_, SPLIT>($($arg),*),
        }
    };
}
