//! The filters under test, behind two small traits so that every figure is
//! measured by the same code. Each key's query is monomorphic (no dynamic
//! call per key): [`Lookup::hits`] loops over a whole segment of keys and is
//! the only call made through `dyn`. Every subject's `contains` and
//! `insert` here is `#[inline(always)]`, so that each loop runs the
//! library's own call inlined, as a user's loop calling it does: LLVM had
//! inlined the small wrappers (sbbf-rs-safe's) and left larger ones out of
//! line (this crate's, whose `contains` matches on the hash algorithm), a
//! call and a branch per key that only the bench paid.

use super::harness::Key;
use fastbloom_rs::{Deletable, Membership};
use filterstore::{BitFilter, BloomRead, CountingFilter, FilterView, FrozenFilter};
use std::hash::BuildHasher;
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// The seed of every filter's hash (the peers' seeds are derived from it).
pub const HASH_SEED: u64 = 0x5eed_f11e_0000_0002;

/// Peers that take a 64-bit hash get `xxh3_64` of the key: the same hash
/// family this crate uses (its 128-bit variant).
pub fn hash64(key: &Key) -> u64 {
    xxh3_64_with_seed(key, HASH_SEED)
}

/// XXH64 seed 0, Parquet's hash, as this crate's split-block layout
/// computes it (inlined): fed to `sbbf-rs-safe` it builds the very bits of
/// a split-block filter of the same size.
pub fn xxh64_parquet(key: &Key) -> u64 {
    filterstore::HashSpec::xxh64().hash(key).h1
}

/// `sbbf-rs-safe` hashing with [`xxh64_parquet`]: the same filter, bit for
/// bit, as `filterstore_split` (asserted in `build_all`).
pub struct SbbfXxh64(pub sbbf_rs_safe::Filter);

impl Lookup for SbbfXxh64 {
    #[inline(always)]
    fn contains(&self, key: &Key) -> bool {
        self.0.contains_hash(xxh64_parquet(key))
    }
    fn bits(&self) -> u64 {
        self.0.bits()
    }
    fn k(&self) -> String {
        "8".into()
    }
}

impl Dynamic for SbbfXxh64 {
    #[inline(always)]
    fn insert(&mut self, key: &Key) {
        self.0.insert_hash(xxh64_parquet(key));
    }
    fn clear(&mut self) {
        self.0.reset();
    }
}

/// What every filter under test answers: membership, size, `k`.
pub trait Lookup {
    fn contains(&self, key: &Key) -> bool;
    /// Bits of memory holding the filter's answer (padding included).
    fn bits(&self) -> u64;
    /// Number of probes, for the table (`-` where it does not apply).
    fn k(&self) -> String;
    /// How many of `keys` are reported present, one lookup per key.
    fn hits(&self, keys: &[Key]) -> u64 {
        keys.iter().map(|k| self.contains(k) as u64).sum()
    }
}

/// A filter that takes inserts one key at a time.
pub trait Dynamic: Lookup {
    fn insert(&mut self, key: &Key);
    fn clear(&mut self);
}

impl Lookup for BitFilter {
    #[inline(always)]
    fn contains(&self, key: &Key) -> bool {
        BitFilter::contains(self, key)
    }
    fn bits(&self) -> u64 {
        self.params().bit_bytes() * 8
    }
    fn k(&self) -> String {
        self.params().k().to_string()
    }
}

/// A read-only view of a blocked filter's bytes (as a decoded message or a
/// memory-mapped file holds them): lookups only.
impl Lookup for FilterView<'_> {
    #[inline(always)]
    fn contains(&self, key: &Key) -> bool {
        FilterView::contains(self, key)
    }
    fn bits(&self) -> u64 {
        self.params().bit_bytes() * 8
    }
    fn k(&self) -> String {
        self.params().k().to_string()
    }
}

/// A frozen copy of a blocked filter (read-only, as sbbf-rs-safe's filter
/// is while it is read): lookups only.
impl Lookup for FrozenFilter {
    #[inline(always)]
    fn contains(&self, key: &Key) -> bool {
        FrozenFilter::contains(self, key)
    }
    fn bits(&self) -> u64 {
        self.params().bit_bytes() * 8
    }
    fn k(&self) -> String {
        self.params().k().to_string()
    }
}

impl Dynamic for BitFilter {
    #[inline(always)]
    fn insert(&mut self, key: &Key) {
        BitFilter::insert(self, key);
    }
    fn clear(&mut self) {
        BitFilter::clear(self);
    }
}

impl<S: BuildHasher> Lookup for fastbloom::BloomFilter<S> {
    #[inline(always)]
    fn contains(&self, key: &Key) -> bool {
        fastbloom::BloomFilter::contains(self, key)
    }
    fn bits(&self) -> u64 {
        self.num_bits() as u64
    }
    fn k(&self) -> String {
        self.num_hashes().to_string()
    }
}

impl<S: BuildHasher> Dynamic for fastbloom::BloomFilter<S> {
    #[inline(always)]
    fn insert(&mut self, key: &Key) {
        fastbloom::BloomFilter::insert(self, key);
    }
    fn clear(&mut self) {
        fastbloom::BloomFilter::clear(self);
    }
}

impl Lookup for sbbf_rs_safe::Filter {
    #[inline(always)]
    fn contains(&self, key: &Key) -> bool {
        self.contains_hash(hash64(key))
    }
    fn bits(&self) -> u64 {
        self.as_bytes().len() as u64 * 8
    }
    fn k(&self) -> String {
        "8".into()
    }
}

impl Dynamic for sbbf_rs_safe::Filter {
    #[inline(always)]
    fn insert(&mut self, key: &Key) {
        self.insert_hash(hash64(key));
    }
    fn clear(&mut self) {
        self.reset();
    }
}

impl Lookup for xorf::BinaryFuse8 {
    #[inline(always)]
    fn contains(&self, key: &Key) -> bool {
        xorf::Filter::contains(self, &hash64(key))
    }
    fn bits(&self) -> u64 {
        self.fingerprints.len() as u64 * 8
    }
    fn k(&self) -> String {
        "-".into()
    }
}

impl Lookup for bloomfilter::Bloom<Key> {
    #[inline(always)]
    fn contains(&self, key: &Key) -> bool {
        self.check(key)
    }
    fn bits(&self) -> u64 {
        self.len()
    }
    fn k(&self) -> String {
        self.number_of_hash_functions().to_string()
    }
}

impl Dynamic for bloomfilter::Bloom<Key> {
    #[inline(always)]
    fn insert(&mut self, key: &Key) {
        self.set(key);
    }
    fn clear(&mut self) {
        bloomfilter::Bloom::clear(self);
    }
}

/// This crate's batched lookup, measured as its own subject.
pub struct Batched<'a>(pub &'a BitFilter);

impl Lookup for Batched<'_> {
    #[inline(always)]
    fn contains(&self, key: &Key) -> bool {
        self.0.contains(key)
    }
    fn bits(&self) -> u64 {
        self.0.bits()
    }
    fn k(&self) -> String {
        self.0.k()
    }
    /// One `contains_many_into` per 4,096 keys.
    fn hits(&self, keys: &[Key]) -> u64 {
        let mut out = [false; 4096];
        keys.chunks(out.len())
            .map(|chunk| {
                let out = &mut out[..chunk.len()];
                self.0.contains_many_into(chunk, out);
                out.iter().map(|&x| x as u64).sum::<u64>()
            })
            .sum()
    }
}

/// A counting filter under test.
pub trait Counting {
    fn insert(&mut self, key: &Key);
    /// Removes a key known to be present.
    fn remove(&mut self, key: &Key);
    fn contains(&self, key: &Key) -> bool;
}

impl Counting for CountingFilter {
    #[inline(always)]
    fn insert(&mut self, key: &Key) {
        CountingFilter::insert(self, key);
    }
    fn remove(&mut self, key: &Key) {
        CountingFilter::remove(self, key).expect("a present key is removable");
    }
    #[inline(always)]
    fn contains(&self, key: &Key) -> bool {
        CountingFilter::contains(self, key)
    }
}

impl Counting for fastbloom_rs::CountingBloomFilter {
    #[inline(always)]
    fn insert(&mut self, key: &Key) {
        self.add(key);
    }
    fn remove(&mut self, key: &Key) {
        Deletable::remove(self, key);
    }
    #[inline(always)]
    fn contains(&self, key: &Key) -> bool {
        Membership::contains(self, key)
    }
}

/// `sbbf-rs-safe` looked up the way our batched lookup works: each key
/// hashed 16 keys ahead and its 32-byte bucket prefetched, so batched
/// lookups are compared like for like (issue 13); with the hash given.
pub struct SbbfPrefetch<'a>(pub &'a sbbf_rs_safe::Filter, pub fn(&Key) -> u64);

impl Lookup for SbbfPrefetch<'_> {
    #[inline(always)]
    fn contains(&self, key: &Key) -> bool {
        self.0.contains_hash((self.1)(key))
    }
    fn bits(&self) -> u64 {
        self.0.bits()
    }
    fn k(&self) -> String {
        "8".into()
    }
    fn hits(&self, keys: &[Key]) -> u64 {
        const AHEAD: usize = 16;
        let bytes = self.0.as_bytes();
        let buckets = (bytes.len() / 32) as u64;
        let hash = self.1;
        let enter = |key: &Key| {
            let h = hash(key);
            // sbbf-rs's bucket index (arch/fallback/parquet_impl.rs).
            let bucket = ((h >> 32).saturating_mul(buckets) >> 32) as usize;
            prefetch(&bytes[bucket * 32]);
            h
        };
        let mut ring = [0u64; AHEAD];
        for (slot, key) in ring.iter_mut().zip(keys) {
            *slot = enter(key);
        }
        let mut hits = 0;
        for i in 0..keys.len() {
            let h = ring[i % AHEAD];
            if let Some(next) = keys.get(i + AHEAD) {
                ring[i % AHEAD] = enter(next);
            }
            hits += self.0.contains_hash(h) as u64;
        }
        hits
    }
}

#[allow(unsafe_code)]
fn prefetch(p: &u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults; `p` is a live reference.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(p).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
