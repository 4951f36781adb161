//! The SIMD block probe against the scalar one, and the bulk inserts
//! against single inserts (issue 13). Needs feature `test-internals` for
//! the bare probes (`cargo test --all-features --test filter simd::`).
//!
//! * proptest (seeded by proptest's own persistence file and a fixed RNG
//!   for the adversarial cases): `k = 1..=32`, random words and `h2`;
//! * adversarial blocks: all ones, all zeros, exactly the key's bits, the
//!   key's bits minus one; adversarial `h2`: 0, all ones, single bits;
//! * whole filters, tiny (one block) and large (past the pipeline's 1 MiB),
//!   single and batched lookups against the positions of `positions()`;
//! * concurrent inserts: no false negative for keys inserted before a
//!   query began, while other threads keep inserting;
//! * `insert_many` and `insert_many_mut` set exactly the bits of one
//!   `insert` per key.

use crate::timeout::with_timeout;
use filterstore::__internals::{block_has_all, scalar_block_has_all, uses_avx2};
use filterstore::{
    positions, BitFilter, BloomRead, FilterParams, FilterView, HashSpec, Layout, MAX_K,
};
use proptest::prelude::*;
use rand::{RngCore, SeedableRng};

/// The time limit of a test of threads that take the stripe locks, which
/// spin without a bound: a lock left taken (what these tests look for)
/// fails the test instead of hanging it.
const STRIPE_TEST_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

fn key_bits(h2: u64, k: u32) -> [u64; 8] {
    let mut w = [0u64; 8];
    // The key's positions as `positions()` derives them, in block 0.
    let h = filterstore::KeyHash { h1: 0, h2 };
    for &p in positions(Layout::Blocked, 512, k, h).as_slice() {
        w[(p / 64) as usize] |= 1 << (p % 64);
    }
    w
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Random words at every density, random `h2`, every `k`.
    #[test]
    fn simd_equals_scalar_on_random_blocks(
        words in prop::array::uniform8(any::<u64>()),
        density in 0u32..4,
        h2 in any::<u64>(),
        k in 1u32..=MAX_K,
    ) {
        // OR-ing 0..3 more random words in makes blocks from half full to
        // nearly full, so both answers occur at every k.
        let mut rng = rand::rngs::StdRng::seed_from_u64(h2);
        let w: [u64; 8] = std::array::from_fn(|i| {
            (0..density).fold(words[i], |a, _| a | rng.next_u64())
        });
        prop_assert_eq!(block_has_all(&w, h2, k), scalar_block_has_all(&w, h2, k));
    }

    /// The key's own bits: found; any one cleared: not found.
    #[test]
    fn simd_finds_exactly_the_key_bits(h2 in any::<u64>(), k in 1u32..=MAX_K, drop in 0usize..32) {
        let w = key_bits(h2, k);
        prop_assert!(block_has_all(&w, h2, k));
        let h = filterstore::KeyHash { h1: 0, h2 };
        let ps = positions(Layout::Blocked, 512, k, h);
        let p = ps.as_slice()[drop % ps.as_slice().len()];
        let mut v = w;
        v[(p / 64) as usize] &= !(1 << (p % 64));
        prop_assert!(!block_has_all(&v, h2, k));
        prop_assert!(!scalar_block_has_all(&v, h2, k));
    }
}

#[test]
fn simd_equals_scalar_on_adversarial_blocks() {
    let mut h2s = vec![
        0,
        u64::MAX,
        1,
        1 << 63,
        0x8000_0000,
        0xffff_ffff,
        0xffff_ffff_0000_0000,
    ];
    h2s.extend((0..64).map(|i| 1u64 << i));
    h2s.extend((0..64).map(|i| !(1u64 << i)));
    let blocks = [
        [0u64; 8],
        [u64::MAX; 8],
        [0x5555_5555_5555_5555; 8],
        [0xaaaa_aaaa_aaaa_aaaa; 8],
    ];
    for &h2 in &h2s {
        for k in 1..=MAX_K {
            for b in blocks.iter().copied().chain([key_bits(h2, k)]) {
                assert_eq!(
                    block_has_all(&b, h2, k),
                    scalar_block_has_all(&b, h2, k),
                    "h2={h2:#x} k={k}"
                );
            }
            assert!(block_has_all(&[u64::MAX; 8], h2, k));
            assert!(!block_has_all(&[0; 8], h2, k));
        }
    }
    eprintln!("probe with AVX2: {}", uses_avx2());
}

/// Whole filters of both layouts, the blocked one with both of its hashes
/// (each has its own compiled lookup): single lookups, batches and views
/// (over bytes at an odd address) agree with the reference positions, tiny
/// and past the pipeline threshold, every k.
#[test]
fn filter_lookups_equal_reference_positions() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(13);
    for (layout, spec) in [
        (Layout::Blocked, HashSpec::xxh3 as fn(u64) -> HashSpec),
        (Layout::Blocked, HashSpec::xxh3_64),
        (Layout::Standard, HashSpec::xxh3),
    ] {
        for (m, ks) in [
            (512u64, &[1u32, 2, 7, 8, 9, 16, 31, 32][..]),
            (512 * 40_000, &[1, 7, 8, 17, 32][..]),
        ] {
            for &k in ks {
                lookups_equal_reference(&mut rng, layout, m, k, spec(k as u64));
            }
        }
    }
}

fn lookups_equal_reference(rng: &mut impl RngCore, layout: Layout, m: u64, k: u32, spec: HashSpec) {
    let p = FilterParams::new(layout, m, k, spec).unwrap();
    let words: Vec<u64> = (0..p.num_words())
        .map(|_| rng.next_u64() | rng.next_u64() | rng.next_u64())
        .collect();
    let f = BitFilter::from_words(p, &words).unwrap();
    // The view's bytes at an odd address: its probe loads them unaligned.
    let mut odd = vec![0u8; 1];
    odd.extend(f.to_le_bytes());
    let view = FilterView::new(p, &odd[1..]).unwrap();
    let keys: Vec<[u8; 8]> = (0..5_000u64).map(|i| i.to_le_bytes()).collect();
    let want: Vec<bool> = keys
        .iter()
        .map(|key| {
            positions(layout, m, k, p.hash().hash(key))
                .as_slice()
                .iter()
                .all(|&q| f.bit(q))
        })
        .collect();
    let case = format!("{layout:?} {:?} m={m} k={k}", spec.algo);
    let single: Vec<bool> = keys.iter().map(|key| f.contains(key)).collect();
    assert_eq!(single, want, "{case}");
    assert_eq!(f.contains_many(&keys), want, "batch {case}");
    let view_single: Vec<bool> = keys.iter().map(|key| view.contains(key)).collect();
    assert_eq!(view_single, want, "view {case}");
    assert_eq!(
        BloomRead::contains_many(&view, &keys),
        want,
        "view batch {case}"
    );
    let hits = want.iter().filter(|&&x| x).count();
    assert!(hits > 0 && hits < keys.len() || k == 1, "{case}: {hits}");
}

/// While two threads insert new keys, lookups of keys inserted before the
/// lookups began are never missed, single or batched.
#[test]
fn no_false_negative_under_concurrent_inserts() {
    with_timeout(STRIPE_TEST_LIMIT, || {
        let p = FilterParams::with_bits_per_key(400_000, 10.0, Layout::Blocked, HashSpec::xxh3(21))
            .unwrap();
        let f = BitFilter::new(p).unwrap();
        let before: Vec<[u8; 8]> = (0..100_000u64).map(|i| i.to_le_bytes()).collect();
        f.insert_many(&before);
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let f = &f;
                s.spawn(move || {
                    for i in 0..150_000u64 {
                        f.insert(&(1_000_000 * (t + 1) + i).to_le_bytes());
                    }
                });
            }
            for _ in 0..5 {
                assert!(
                    before.iter().all(|k| f.contains(k)),
                    "single lookup missed a key"
                );
                assert!(
                    f.contains_many(&before).iter().all(|&x| x),
                    "batch missed a key"
                );
            }
        });
    });
}

/// Shared bulk inserts dense enough to go through a private copy (merged
/// back with atomic ORs), run by two threads at once beside a thread of
/// single inserts, lose no bit: every key of every batch is found once all
/// have returned, and each thread finds its own earlier batches meanwhile.
#[test]
fn concurrent_copied_bulk_inserts_lose_no_bit() {
    with_timeout(STRIPE_TEST_LIMIT, || {
        let p = FilterParams::with_bits_per_key(200_000, 10.0, Layout::Blocked, HashSpec::xxh3(22))
            .unwrap();
        let f = BitFilter::new(p).unwrap();
        let batch = |t: u64, b: u64| -> Vec<[u8; 8]> {
            (0..20_000u64)
                .map(|i| (t << 40 | b << 20 | i).to_le_bytes())
                .collect()
        };
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let (f, batch) = (&f, &batch);
                s.spawn(move || {
                    for b in 0..4 {
                        f.insert_many(&batch(t, b));
                        for done in 0..=b {
                            assert!(batch(t, done).iter().all(|k| f.contains(k)), "{t}/{done}");
                        }
                    }
                });
            }
            let f = &f;
            s.spawn(move || {
                (0..40_000u64).for_each(|i| _ = f.insert(&(9 << 40 | i).to_le_bytes()))
            });
        });
        for t in 0..2 {
            for b in 0..4 {
                assert!(batch(t, b).iter().all(|k| f.contains(k)), "{t}/{b}");
            }
        }
        assert!((0..40_000u64).all(|i| f.contains(&(9 << 40 | i).to_le_bytes())));
    });
}

/// Key-by-key shared inserts and small shared batches (below the private
/// copy's density: one locked OR per word) from three threads started
/// together into a filter of 2,048 blocks (ending about half full, so that
/// words still change), lose no bit: every key is found once all have
/// returned. (A plain load and store in place of the locked ORs failed
/// here.)
#[test]
fn contended_shared_inserts_lose_no_bit() {
    with_timeout(STRIPE_TEST_LIMIT, || {
        const KEYS: u64 = 40_000;
        for (layout, spec, k) in [
            (Layout::Blocked, HashSpec::xxh3_64(23), 7),
            (Layout::Blocked, HashSpec::xxh3_64_sectorized(23), 8),
            (Layout::SplitBlock, HashSpec::xxh64(), 8),
        ] {
            let p = FilterParams::new(layout, 512 * 2_048, k, spec).unwrap();
            let f = BitFilter::new(p).unwrap();
            let key = |t: u64, i: u64| (t << 40 | i).to_le_bytes();
            let start = std::sync::Barrier::new(3);
            std::thread::scope(|s| {
                for t in 0..2u64 {
                    let (f, start) = (&f, &start);
                    s.spawn(move || {
                        start.wait();
                        (0..KEYS).for_each(|i| _ = f.insert(&key(t, i)));
                    });
                }
                let (f, start) = (&f, &start);
                s.spawn(move || {
                    start.wait();
                    for b in 0..KEYS / 8 {
                        let batch: Vec<[u8; 8]> = (0..8).map(|i| key(2, b * 8 + i)).collect();
                        f.insert_many(&batch);
                    }
                });
            });
            for t in 0..3 {
                let missed = (0..KEYS).filter(|&i| !f.contains(&key(t, i))).count();
                assert_eq!(missed, 0, "{layout:?}: thread {t} lost {missed} keys");
            }
        }
    });
}

/// Unions into a blocked or split-block filter (of filters of its size and
/// halved ones)
/// beside key-by-key shared inserts into it,
/// and beside shared batches merged through a private copy, lose no bit:
/// all three OR its lines under their stripe locks (`bloom::stripes`).
/// Three threads wait on a counter to start each round together; each
/// round ORs 64 keys each way into a fresh filter of 16 blocks and then
/// looks them all up. (With `union_with` by lock-free atomic ORs beside the
/// inserts' plain stores under the locks, this lost keys.)
#[test]
fn unions_beside_shared_inserts_lose_no_bit() {
    with_timeout(STRIPE_TEST_LIMIT, || {
        for (layout, spec, k) in [
            (Layout::Blocked, HashSpec::xxh3_64(24), 7),
            (Layout::Blocked, HashSpec::xxh3_64_sectorized(24), 8),
            (Layout::SplitBlock, HashSpec::xxh64(), 8),
        ] {
            let p = FilterParams::new(layout, 512 * 16, k, spec).unwrap();
            unions_beside_shared_inserts(p);
        }
    });
}

/// [`unions_beside_shared_inserts_lose_no_bit`] into a filter of `p`.
fn unions_beside_shared_inserts(p: FilterParams) {
    const ROUNDS: u64 = 1_000;
    const KEYS: u64 = 64;
    let key = |t: u64, r: u64, i: u64| (t << 48 | r << 16 | i).to_le_bytes();
    let f = BitFilter::new(p).unwrap();
    let arrived = std::sync::atomic::AtomicU64::new(0);
    // Each thread counts in, then spins until all three of the round have.
    let start = |r: u64| {
        arrived.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        while arrived.load(std::sync::atomic::Ordering::Acquire) < 3 * (r + 1) {
            std::thread::yield_now();
        }
    };
    let mut lost = 0;
    for r in 0..ROUNDS {
        f.clear();
        // Every other one halved: `union_with_halved` ORs it.
        let singles: Vec<BitFilter> = (0..KEYS)
            .map(|i| {
                let mut g = BitFilter::new(p).unwrap();
                g.insert_mut(&key(1, r, i));
                match i % 2 {
                    0 => g,
                    _ => g.halve().unwrap(),
                }
            })
            .collect();
        let batch: Vec<[u8; 8]> = (0..KEYS).map(|i| key(2, r, i)).collect();
        std::thread::scope(|s| {
            let (f, start) = (&f, &start);
            s.spawn(move || {
                start(r);
                (0..KEYS).for_each(|i| _ = f.insert(&key(0, r, i)));
            });
            let singles = &singles;
            s.spawn(move || {
                start(r);
                singles.iter().for_each(|g| f.union_with_halved(g).unwrap());
            });
            let batch = &batch;
            s.spawn(move || {
                start(r);
                f.insert_many(batch);
            });
        });
        lost += (0..3)
            .flat_map(|t| (0..KEYS).map(move |i| key(t, r, i)))
            .filter(|k| !f.contains(k))
            .count();
    }
    assert_eq!(
        lost,
        0,
        "{:?}: {lost} keys lost in {ROUNDS} rounds",
        p.layout()
    );
}

/// The bulk inserts set exactly the bits of single inserts, both layouts,
/// small and large filters, duplicates included.
#[test]
fn bulk_inserts_equal_single_inserts() {
    for layout in [Layout::Standard, Layout::Blocked] {
        for n in [0u64, 1, 15, 16, 17, 1_000, 300_000] {
            let p =
                FilterParams::with_bits_per_key(n.max(1), 10.0, layout, HashSpec::xxh3(n)).unwrap();
            bulk_equals_single(p, n);
        }
        // Every k (the bulk inserts take positions 0–7 from the vector
        // probe where the CPU has AVX2, the rest one by one).
        for k in 1..=MAX_K {
            let p = FilterParams::new(layout, 512 * 40, k, HashSpec::xxh3(k.into())).unwrap();
            bulk_equals_single(p, 2_000);
        }
    }
}

/// `n` keys (and a third of them again) inserted one by one and by each
/// bulk insert into filters of parameters `p`: the bits of the reference
/// positions, the same count of keys that set a new bit.
fn bulk_equals_single(p: FilterParams, n: u64) {
    let case = format!("{} k={} n={n}", p.layout(), p.k());
    let keys: Vec<[u8; 8]> = (0..n).chain(0..n / 3).map(|i| i.to_le_bytes()).collect();
    let single = BitFilter::new(p).unwrap();
    let fresh = keys.iter().filter(|k| single.insert(&k[..])).count() as u64;
    let shared = BitFilter::new(p).unwrap();
    assert_eq!(shared.insert_many(&keys), fresh, "{case}: new-bit count");
    let mut exclusive = BitFilter::new(p).unwrap();
    exclusive.insert_many_mut(&keys);
    let hashes: Vec<_> = keys.iter().map(|k| p.hash().hash(k)).collect();
    let by_hash = BitFilter::new(p).unwrap();
    by_hash.insert_hashes(&hashes);
    let mut by_hash_mut = BitFilter::new(p).unwrap();
    by_hash_mut.insert_hashes_mut(&hashes);
    let want = single.to_words();
    let mut reference = vec![0u64; p.num_words()];
    for key in &keys {
        for &q in positions(p.layout(), p.m(), p.k(), p.hash().hash(key)).as_slice() {
            reference[(q / 64) as usize] |= 1 << (q % 64);
        }
    }
    assert!(
        want == reference,
        "{case}: single inserts differ from positions()"
    );
    for (what, f) in [
        ("insert_many", &shared),
        ("insert_many_mut", &exclusive),
        ("insert_hashes", &by_hash),
        ("insert_hashes_mut", &by_hash_mut),
    ] {
        assert!(f.to_words() == want, "{case}: {what} differs");
    }
}
