//! The lookups, written once over a block probe and compiled once per
//! probe (scalar, and AVX2 on x86-64): a batch is a [`Job`], run with the
//! best probe of this CPU behind one dispatch, hashing included; a single
//! lookup of a hashed key is the [`HashLookup`] that each filter calls
//! through the pointer it chose when made (`filter::simd::LookupFn`).

use super::batch::{blocked_pipeline, split_pipeline, standard_pipeline};
use super::partition::partitioned;
use super::probe::{
    block32_has_all, block_h2_has_all, block_has_all, block_of, sectors_has_all,
    split_block_has_all,
};
use super::BatchStrategy;
use super::BloomRead;
use crate::filter::hash::{
    HashAlgo, KeyHash, KeyHasher, Xxh3Hasher, Xxh3_64Hasher, Xxh3_64SectorizedHasher, Xxh64Hasher,
};
use crate::filter::params::{split_block_of, Layout};
use crate::filter::simd::{
    base_kind, k_of, row_k, with_row_k, HashLookup, Job, Probe, BLOCKED, BLOCKED32, SECTORIZED,
    SPLIT,
};

/// One lookup of a hashed key.
pub(super) struct ContainsHash<'a, F: ?Sized> {
    pub f: &'a F,
    pub h: KeyHash,
}

impl<F: BloomRead + ?Sized> Job for ContainsHash<'_, F> {
    type Out = bool;
    #[inline(always)]
    fn run<P: Probe>(self, probe: P) -> bool {
        let (f, h) = (self.f, self.h);
        let p = f.params();
        match p.layout() {
            Layout::Standard => f.standard_has_all(h),
            Layout::Blocked => blocked_has_all(f, probe, h),
            Layout::SplitBlock => split_has_all(f, probe, h),
        }
    }
}

/// Every filter's lookup, compiled per layout and probe behind its
/// [`crate::filter::simd::LookupFn`].
impl<F: BloomRead> HashLookup for F {
    #[inline(always)]
    fn lookup_with<P: Probe, const LAYOUT: u8>(&self, probe: P, h: KeyHash) -> bool {
        let p = self.params();
        // A constant where the lookup was compiled for this filter's `k`.
        let k = k_of(LAYOUT, p.k());
        let x = (h.h2 >> 32) as u32;
        match (base_kind(LAYOUT), self.shared_blocks(), self.byte_blocks()) {
            (BLOCKED, Some(blocks), _) => probe.shared_block_has_all(blocks.of_hash(h.h1), h.h2, k),
            (BLOCKED32, Some(blocks), _) => {
                probe.shared_block_has_all32(blocks.of_hash(h.h1), x, k)
            }
            (BLOCKED, None, Some(bytes)) => probe.bytes_block_has_all(bytes.of_hash(h.h1), h.h2, k),
            (BLOCKED32, None, Some(bytes)) => {
                probe.bytes_block_has_all32(bytes.of_hash(h.h1), x, k)
            }
            (SECTORIZED, Some(blocks), _) => probe.shared_sectors_has_all(blocks.of_hash(h.h1), x),
            (SECTORIZED, None, Some(bytes)) => probe.bytes_sectors_has_all(bytes.of_hash(h.h1), x),
            (SECTORIZED, None, None) => sectors_has_all(self, probe, block_of(p, h), x),
            (BLOCKED, None, None) => block_has_all(self, probe, block_of(p, h), h.h2, k),
            (BLOCKED32, None, None) => block32_has_all(self, probe, block_of(p, h), x, k),
            (SPLIT, ..) => split_has_all(self, probe, h),
            _ => self.standard_has_all(h),
        }
    }
}

/// The blocked-layout lookup of a hashed key.
#[inline(always)]
pub(super) fn blocked_has_all<F: BloomRead + ?Sized, P: Probe>(
    f: &F,
    probe: P,
    h: KeyHash,
) -> bool {
    let p = f.params();
    if p.hash().algo == HashAlgo::Xxh3_64Sectorized {
        return sectors_has_all(f, probe, block_of(p, h), (h.h2 >> 32) as u32);
    }
    block_has_all(f, probe, block_of(p, h), h.h2, p.k())
}

/// The split-block lookup of a hashed key.
#[inline(always)]
pub(super) fn split_has_all<F: BloomRead + ?Sized, P: Probe>(f: &F, probe: P, h: KeyHash) -> bool {
    split_block_has_all(f, probe, split_block_of(f.params(), h), h.h1 as u32)
}

/// A batch of lookups.
pub(super) struct ContainsMany<'a, F: ?Sized, K> {
    pub f: &'a F,
    pub keys: &'a [K],
    /// As long as `keys`.
    pub out: &'a mut [bool],
    pub strategy: BatchStrategy,
}

impl<F: BloomRead + ?Sized, K: AsRef<[u8]>> Job for ContainsMany<'_, F, K> {
    type Out = ();
    #[inline(always)]
    fn run<P: Probe>(self, probe: P) {
        let (f, keys, out) = (self.f, self.keys, self.out);
        let p = *f.params();
        let seed = p.hash().seed;
        let strategy = match self.strategy {
            BatchStrategy::Auto => {
                BatchStrategy::auto(p.bit_bytes(), f.on_huge_pages(), keys.len())
            }
            chosen => chosen,
        };
        // One loop per layout and hash algorithm.
        match (p.layout(), p.hash().algo) {
            (Layout::Standard, _) => {
                if strategy == BatchStrategy::KeyByKey {
                    one_by_one(keys, out, Xxh3Hasher(seed), |h| f.standard_has_all(h));
                } else {
                    standard_pipeline(f, keys, out);
                }
            }
            (Layout::Blocked, HashAlgo::Xxh3_64) => with_row_k!(
                p.k(),
                RK,
                blocked_batch::<_, _, _, _, RK>(f, probe, keys, out, strategy, Xxh3_64Hasher(seed))
            ),
            (Layout::Blocked, HashAlgo::Xxh3_64Sectorized) => {
                let hasher = Xxh3_64SectorizedHasher(seed);
                blocked_batch::<_, _, _, _, 8>(f, probe, keys, out, strategy, hasher)
            }
            (Layout::Blocked, _) => with_row_k!(
                p.k(),
                RK,
                blocked_batch::<_, _, _, _, RK>(f, probe, keys, out, strategy, Xxh3Hasher(seed))
            ),
            (Layout::SplitBlock, _) => split_batch(f, probe, keys, out, strategy),
        }
    }
}

/// A batch of lookups of a blocked filter whose keys `hasher` hashes.
/// Compiled for `k = RK` (`with_row_k`); an XXH3-64 filter's blocks are
/// probed from 32-bit products ([`block_h2_has_all`]).
#[inline(always)]
fn blocked_batch<F, P, K, H, const RK: u32>(
    f: &F,
    probe: P,
    keys: &[K],
    out: &mut [bool],
    strategy: BatchStrategy,
    hasher: H,
) where
    F: BloomRead + ?Sized,
    P: Probe,
    K: AsRef<[u8]>,
    H: KeyHasher,
{
    let p = *f.params();
    let k = row_k::<RK>(p.k());
    // The closures are `#[inline(always)]`: one left out of line would be
    // compiled without the probe's target features (`bulk::ring`).
    if strategy == BatchStrategy::KeyByKey {
        return one_by_one(
            keys,
            out,
            hasher,
            #[inline(always)]
            |h| block_h2_has_all::<F, P, H>(f, probe, block_of(&p, h), h.h2, k),
        );
    }
    if strategy == BatchStrategy::Partitioned {
        let done = partitioned(
            f,
            keys,
            out,
            (p.num_blocks(), 64),
            #[inline(always)]
            |key: &[u8]| {
                let h = hasher.hash(key);
                (block_of(&p, h) as u64, h.h2)
            },
            #[inline(always)]
            |b, h2| block_h2_has_all::<F, P, H>(f, probe, b, h2, k),
        );
        if done {
            return;
        }
    }
    blocked_pipeline(
        f,
        keys,
        out,
        hasher,
        #[inline(always)]
        |b, h2| block_h2_has_all::<F, P, H>(f, probe, b, h2, k),
    );
}

/// A batch of lookups of a split-block filter.
#[inline(always)]
fn split_batch<F: BloomRead + ?Sized, P: Probe, K: AsRef<[u8]>>(
    f: &F,
    probe: P,
    keys: &[K],
    out: &mut [bool],
    strategy: BatchStrategy,
) {
    let p = *f.params();
    let h64 = Xxh64Hasher(p.hash().seed);
    if strategy == BatchStrategy::KeyByKey {
        return one_by_one(keys, out, h64, |h| split_has_all(f, probe, h));
    }
    if strategy == BatchStrategy::Partitioned {
        let done = partitioned(
            f,
            keys,
            out,
            (p.m() / 256, 32),
            #[inline(always)]
            |key: &[u8]| {
                let h = h64.hash(key);
                (split_block_of(&p, h) as u64, h.h1)
            },
            #[inline(always)]
            |b, h| split_block_has_all(f, probe, b, h as u32),
        );
        if done {
            return;
        }
    }
    split_pipeline(f, probe, keys, out);
}

/// `out[i] = test(hash(keys[i]))`, key by key (filters that fit in L2).
#[inline(always)]
fn one_by_one<K: AsRef<[u8]>, H: KeyHasher>(
    keys: &[K],
    out: &mut [bool],
    hasher: H,
    test: impl Fn(KeyHash) -> bool,
) {
    for (o, key) in out.iter_mut().zip(keys) {
        *o = test(hasher.hash(key.as_ref()));
    }
}
