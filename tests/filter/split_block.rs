//! The split-block layout is Parquet's split-block Bloom filter (SBBF) bit
//! for bit: every path that sets or tests bits (single and bulk inserts,
//! shared and `&mut`, lookups single, batched and through a borrowed view,
//! the counting variant, folding) is checked against a reference written
//! here from the specification's text (apache/parquet-format `BloomFilter.md`:
//! XXH64 seed 0, block `((h >> 32) · z) >> 32`, lane bit `(x · SALT[i]) >> 27`)
//! and against `sbbf-rs-safe`, a peer implementation that shares no code
//! with this crate. (The interop tests against arrow-rs itself are in
//! `filterstore-datafusion/tests/sbbf.rs`.)

use filterstore::{
    decode_filter, encode_bit_filter, encode_counting_filter, BitFilter, BloomRead, CountingFilter,
    FilterBody, FilterParams, FilterView, HashSpec, Layout, ParamError,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use xxhash_rust::xxh64::xxh64 as reference_xxh64;

/// The specification's salts, copied from its text (not from the crate).
const SALT: [u32; 8] = [
    0x47b6137b, 0x44974d91, 0x8824ad5b, 0xa2b7289d, 0x705495c7, 0x2df1424b, 0x9efc4947, 0x5c6bfb31,
];

/// The specification's SBBF over `z` blocks of eight `u32` lanes.
struct Reference {
    blocks: Vec<[u32; 8]>,
}

impl Reference {
    fn new(z: usize) -> Self {
        Reference {
            blocks: vec![[0; 8]; z],
        }
    }
    fn block(&self, h: u64) -> usize {
        let z = self.blocks.len() as u64;
        (((h >> 32) * z) >> 32) as usize
    }
    fn mask(x: u32) -> [u32; 8] {
        let mut m = [0u32; 8];
        for i in 0..8 {
            m[i] = 1 << (x.wrapping_mul(SALT[i]) >> 27);
        }
        m
    }
    fn insert(&mut self, key: &[u8]) {
        let h = reference_xxh64(key, 0);
        let b = self.block(h);
        for (lane, m) in self.blocks[b].iter_mut().zip(Self::mask(h as u32)) {
            *lane |= m;
        }
    }
    fn check(&self, key: &[u8]) -> bool {
        let h = reference_xxh64(key, 0);
        let b = &self.blocks[self.block(h)];
        b.iter().zip(Self::mask(h as u32)).all(|(l, m)| l & m != 0)
    }
    /// The bitset: lane `i` of block `b` little-endian at byte `32b + 4i`.
    fn bytes(&self) -> Vec<u8> {
        self.blocks
            .iter()
            .flat_map(|b| b.iter().flat_map(|l| l.to_le_bytes()))
            .collect()
    }
}

fn params(z: u64) -> FilterParams {
    FilterParams::new(Layout::SplitBlock, 256 * z, 8, HashSpec::xxh64()).unwrap()
}

/// Keys of every length 0..=80 (XXH64's stripe loop starts at 32 bytes)
/// with random contents.
fn keys(n: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| (0..i % 81).map(|_| rng.gen()).collect())
        .collect()
}

/// The filter's bitset: its little-endian words without the padding of an
/// odd block count.
fn bitset(f: &BitFilter) -> Vec<u8> {
    let mut b = f.to_le_bytes();
    b.truncate((f.params().m() / 8) as usize);
    b
}

#[test]
fn inserts_set_the_specifications_bits() {
    for z in [1u64, 2, 3, 77, 1000, 4096] {
        let ks = keys(20_000, z);
        let mut reference = Reference::new(z as usize);
        ks.iter().for_each(|k| reference.insert(k));
        let want = reference.bytes();

        let one = BitFilter::new(params(z)).unwrap();
        ks.iter().for_each(|k| {
            one.insert(k);
        });
        assert_eq!(bitset(&one), want, "insert, z = {z}");
        let many = BitFilter::new(params(z)).unwrap();
        many.insert_many(&ks);
        assert_eq!(bitset(&many), want, "insert_many, z = {z}");
        let mut bulk = BitFilter::new(params(z)).unwrap();
        bulk.insert_many_mut(&ks);
        assert_eq!(bitset(&bulk), want, "insert_many_mut, z = {z}");
        let hashes: Vec<_> = ks.iter().map(|k| HashSpec::xxh64().hash(k)).collect();
        let mut by_hash = BitFilter::new(params(z)).unwrap();
        by_hash.insert_hashes_mut(&hashes);
        assert_eq!(bitset(&by_hash), want, "insert_hashes_mut, z = {z}");
        // The padding of an odd block count stays zero.
        assert!(one.to_le_bytes()[want.len()..].iter().all(|&b| b == 0));
    }
}

#[test]
fn lookups_answer_as_the_specification() {
    for z in [1u64, 5, 64, 3001, 40_000] {
        // At 40,000 blocks (1.28 MB) the batch runs the pipeline.
        let ks = keys(30_000, 100 + z);
        let (present, absent) = ks.split_at(10_000);
        let mut reference = Reference::new(z as usize);
        present.iter().for_each(|k| reference.insert(k));
        let mut f = BitFilter::new(params(z)).unwrap();
        f.insert_many_mut(present);
        let bytes = f.to_le_bytes();
        let view = FilterView::new(*f.params(), &bytes).unwrap();
        let want: Vec<bool> = ks.iter().map(|k| reference.check(k)).collect();
        assert!(want[..10_000].iter().all(|&x| x));
        let some_absent = want[10_000..].iter().filter(|&&x| !x).count();
        assert!(
            some_absent > 0 || z < 8,
            "z = {z}: no absent key answered absent"
        );
        let single: Vec<bool> = ks.iter().map(|k| f.contains(k)).collect();
        assert_eq!(single, want, "contains, z = {z}");
        assert_eq!(f.contains_many(&ks), want, "contains_many, z = {z}");
        let viewed: Vec<bool> = ks.iter().map(|k| view.contains(k)).collect();
        assert_eq!(viewed, want, "view, z = {z}");
        assert_eq!(view.contains_many(&ks), want, "view batch, z = {z}");
        let _ = absent;
    }
}

/// `sbbf-rs-safe` (a separate implementation of the same filter, AVX2 on
/// this machine) fed XXH64 seed 0 holds the same bytes and answers the same.
#[test]
fn bytes_match_sbbf_rs() {
    let n = 50_000;
    let ks = keys(2 * n, 7);
    let mut peer = sbbf_rs_safe::Filter::new(10, n);
    let z = peer.as_bytes().len() as u64 / 32;
    let mut ours = BitFilter::new(params(z)).unwrap();
    for k in &ks[..n] {
        peer.insert_hash(reference_xxh64(k, 0));
    }
    ours.insert_many_mut(&ks[..n]);
    assert_eq!(bitset(&ours), peer.as_bytes());
    for k in &ks {
        assert_eq!(ours.contains(k), peer.contains_hash(reference_xxh64(k, 0)));
    }
}

#[test]
fn files_and_views_round_trip() {
    let z = 9;
    let ks = keys(500, 3);
    let mut f = BitFilter::new(params(z)).unwrap();
    f.insert_many_mut(&ks);
    let file = encode_bit_filter(&f, 500);
    // Version 2, min reader 2: a version-1 reader must refuse, not misread.
    assert_eq!(&file[4..8], &[2, 0, 2, 0]);
    let d = decode_filter(&file).unwrap();
    assert_eq!(*d.params(), *f.params());
    assert!(ks.iter().all(|k| d.contains(k)));
    let FilterBody::Bits(view) = d.body else {
        panic!("a bit filter")
    };
    assert_eq!(encode_bit_filter(&view, 500), file);
}

#[test]
fn counting_variant_is_the_bit_filter_with_counters() {
    let z = 301;
    let ks = keys(3_000, 11);
    let mut c = CountingFilter::new(params(z)).unwrap();
    assert_eq!(
        c.as_bytes().len(),
        128 * 302,
        "128 bytes per block, padded to a line"
    );
    let mut bits = BitFilter::new(params(z)).unwrap();
    bits.insert_many_mut(&ks);
    for k in &ks {
        let out = c.insert(k);
        assert!(out.new_bits <= 8);
    }
    assert_eq!(c.to_bit_filter().unwrap().to_words(), bits.to_words());
    assert!(ks.iter().all(|k| c.contains(k)));
    // Remove half: the rest stay present; the removed answer as a filter of
    // the rest does (exact inverses).
    let (gone, kept) = ks.split_at(1_500);
    for k in gone {
        let cleared = c.remove(k).unwrap();
        assert!(cleared.as_slice().windows(2).all(|w| w[0] < w[1]));
    }
    let mut rest = BitFilter::new(params(z)).unwrap();
    rest.insert_many_mut(kept);
    assert_eq!(c.to_bit_filter().unwrap().to_words(), rest.to_words());
    assert!(kept.iter().all(|k| c.contains(k)));
    // The counters survive a file.
    let file = encode_counting_filter(&c, kept.len() as u64);
    let d = decode_filter(&file).unwrap();
    let counters = d.counters().unwrap();
    assert!(kept.iter().all(|k| counters.min_count(k) >= 1));
    assert_eq!(
        counters.to_counting_filter().unwrap().as_bytes(),
        c.as_bytes()
    );
}

/// Folding (`halve`) is arrow-rs's `fold_n(1)`: bit for bit the filter of
/// the same keys at half the blocks; an odd count is refused.
#[test]
fn halving_equals_a_fresh_filter_of_half_the_blocks() {
    for z in [2u64, 6, 1000, 4096] {
        let ks = keys(5_000, z);
        let mut big = BitFilter::new(params(z)).unwrap();
        big.insert_many_mut(&ks);
        let mut small = BitFilter::new(params(z / 2)).unwrap();
        small.insert_many_mut(&ks);
        assert_eq!(big.halve().unwrap().to_words(), small.to_words(), "z = {z}");
    }
    assert!(BitFilter::new(params(7)).unwrap().halve().is_err());
}

#[test]
fn union_and_intersection_are_bitwise() {
    let ks = keys(4_000, 21);
    let (a_keys, b_keys) = ks.split_at(2_500);
    let (mut a, mut b, mut both) = (
        BitFilter::new(params(200)).unwrap(),
        BitFilter::new(params(200)).unwrap(),
        BitFilter::new(params(200)).unwrap(),
    );
    a.insert_many_mut(a_keys);
    b.insert_many_mut(&ks[1_500..]);
    both.insert_many_mut(&ks);
    let u = a.try_clone().unwrap();
    u.union_with(&b).unwrap();
    assert_eq!(u.to_words(), both.to_words());
    a.intersect_with(&b).unwrap();
    assert!(ks[1_500..2_500].iter().all(|k| a.contains(k)));
    let _ = b_keys;
    let other = BitFilter::new(params(201)).unwrap();
    assert!(u.union_with(&other).is_err());
}

#[test]
fn shapes_outside_the_specification_are_refused() {
    let h = HashSpec::xxh64();
    let bad = |m, k, hash| FilterParams::new(Layout::SplitBlock, m, k, hash);
    assert!(matches!(
        bad(256 * 4, 7, h),
        Err(ParamError::SplitBlockShape { .. })
    ));
    assert!(matches!(
        bad(300, 8, h),
        Err(ParamError::SplitBlockShape { .. })
    ));
    assert!(matches!(
        bad(256 << 31, 8, h),
        Err(ParamError::SplitBlockShape { .. })
    ));
    assert!(
        bad(256 * ((1 << 31) - 1), 8, h).is_ok(),
        "2^31 - 1 blocks are allowed"
    );
    assert!(matches!(
        bad(256, 8, HashSpec::xxh3(0)),
        Err(ParamError::HashNotForLayout { .. })
    ));
    let seeded = HashSpec { seed: 1, ..h };
    assert!(matches!(
        bad(256, 8, seeded),
        Err(ParamError::HashNotForLayout { .. })
    ));
    for layout in [Layout::Standard, Layout::Blocked] {
        assert!(matches!(
            FilterParams::new(layout, 512, 3, h),
            Err(ParamError::HashNotForLayout { .. })
        ));
    }
    let p = FilterParams::for_capacity(1000, 0.01, Layout::SplitBlock, h).unwrap();
    assert!(p.with_hash(HashSpec::xxh3(3)).is_err());
    assert_eq!(HashSpec::default_for(Layout::SplitBlock), h);
    assert_eq!("split-block".parse::<Layout>().unwrap(), Layout::SplitBlock);
}

/// Inserts from several threads while others read: every key whose insert
/// returned is found (the shared path ORs 64-bit words with atomics).
#[test]
fn concurrent_inserts_lose_nothing() {
    let f = BitFilter::new(params(10_000)).unwrap();
    let ks = keys(40_000, 31);
    std::thread::scope(|s| {
        for chunk in ks.chunks(10_000) {
            let f = &f;
            s.spawn(move || {
                f.insert_many(&chunk[..5_000]);
                for k in &chunk[5_000..] {
                    f.insert(k);
                    assert!(f.contains(k));
                }
            });
        }
    });
    assert!(ks.iter().all(|k| f.contains(k)));
    let mut reference = Reference::new(10_000);
    ks.iter().for_each(|k| reference.insert(k));
    assert_eq!(bitset(&f), reference.bytes());
}
