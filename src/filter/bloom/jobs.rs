//! The lookups, written once over a block probe and compiled once per
//! probe (scalar, and AVX2 on x86-64): a batch is a [`Job`], run with the
//! best probe of this CPU behind one dispatch, hashing included; a single
//! lookup of a hashed key is the [`HashLookup`] that each filter calls
//! through the pointer it chose when made (`filter::simd::LookupFn`).

use super::batch::{blocked_pipeline, split_pipeline, standard_pipeline};
use super::partition::partitioned;
use super::probe::{block_has_all, block_of, split_block_has_all};
use super::BatchStrategy;
use super::BloomRead;
use crate::filter::hash::{KeyHash, KeyHasher, Xxh3Hasher, Xxh64Hasher};
use crate::filter::params::{split_block_of, Layout};
use crate::filter::simd::{HashLookup, Job, Probe, BLOCKED, SPLIT};

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
        match LAYOUT {
            BLOCKED => blocked_has_all(self, probe, h),
            SPLIT => split_has_all(self, probe, h),
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
        let (h3, h64) = (Xxh3Hasher(p.hash().seed), Xxh64Hasher(p.hash().seed));
        let strategy = match self.strategy {
            BatchStrategy::Auto => {
                BatchStrategy::auto(p.bit_bytes(), f.on_huge_pages(), keys.len())
            }
            chosen => chosen,
        };
        if strategy == BatchStrategy::KeyByKey {
            // One loop per layout, hashing with its algorithm.
            match p.layout() {
                Layout::Standard => one_by_one(keys, out, h3, |h| f.standard_has_all(h)),
                Layout::Blocked => one_by_one(keys, out, h3, |h| blocked_has_all(f, probe, h)),
                Layout::SplitBlock => one_by_one(keys, out, h64, |h| split_has_all(f, probe, h)),
            }
            return;
        }
        if strategy == BatchStrategy::Partitioned && partition(f, probe, keys, out) {
            return;
        }
        match p.layout() {
            Layout::Standard => standard_pipeline(f, keys, out),
            Layout::Blocked => blocked_pipeline(f, probe, keys, out),
            Layout::SplitBlock => split_pipeline(f, probe, keys, out),
        }
    }
}

/// The partitioned lookup of the block layouts (`partition.rs`); `false`
/// for the standard layout, or when its scratch memory cannot be had.
#[inline(always)]
fn partition<F: BloomRead + ?Sized, P: Probe, K: AsRef<[u8]>>(
    f: &F,
    probe: P,
    keys: &[K],
    out: &mut [bool],
) -> bool {
    let p = *f.params();
    let (h3, h64) = (Xxh3Hasher(p.hash().seed), Xxh64Hasher(p.hash().seed));
    match p.layout() {
        Layout::Standard => false,
        Layout::Blocked => partitioned(
            f,
            keys,
            out,
            (p.num_blocks(), 64),
            #[inline(always)]
            |key: &[u8]| {
                let h = h3.hash(key);
                (block_of(&p, h) as u64, h.h2)
            },
            #[inline(always)]
            |b, h2| block_has_all(f, probe, b, h2, p.k()),
        ),
        Layout::SplitBlock => partitioned(
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
        ),
    }
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
