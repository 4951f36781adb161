//! Tests of the bit filter's lookups, inserts and set operations.

use super::batch::{PIPELINE_MIN_BYTES, RING};
use super::setops::fold_pairs;
use super::*;
use crate::filter::hash::{HashAlgo, HashSpec};
use crate::filter::params::{FilterParams, Layout};

fn keys(range: std::ops::Range<u64>) -> Vec<[u8; 8]> {
    range.map(|i| i.to_le_bytes()).collect()
}

/// XXH3-128 with `seed`, or the split-block layout's fixed XXH64.
fn spec(layout: Layout, seed: u64) -> HashSpec {
    match layout {
        Layout::SplitBlock => HashSpec::xxh64(),
        _ => HashSpec::xxh3(seed),
    }
}

#[test]
fn fold_pairs_folds() {
    assert_eq!(fold_pairs(0b11), 1);
    assert_eq!(fold_pairs(0b10), 1);
    assert_eq!(fold_pairs(0b100), 0b10);
    assert_eq!(fold_pairs(1 << 63), 1 << 31);
    assert_eq!(fold_pairs(u64::MAX), u32::MAX);
    assert_eq!(fold_pairs(0), 0);
}

/// The optimised lookups (branch-free block probe, pipelined batch, the
/// view's block reader) must answer exactly as the reference: a key is
/// present when every one of its positions (`FilterParams::positions`) is set.
fn assert_lookups_match_reference(f: &BitFilter, probe: &[[u8; 8]]) -> Vec<bool> {
    let p = *f.params();
    let layout = p.layout();
    let bytes = f.to_le_bytes();
    let view = FilterView::new(p, &bytes).unwrap();
    let reference: Vec<bool> = probe
        .iter()
        .map(|k| {
            p.positions(p.hash().hash(k))
                .as_slice()
                .iter()
                .all(|&pos| f.bit(pos))
        })
        .collect();
    let single: Vec<bool> = probe.iter().map(|k| f.contains(k)).collect();
    let view_single: Vec<bool> = probe.iter().map(|k| view.contains(k)).collect();
    assert_eq!(single, reference, "{layout}: contains");
    assert_eq!(view_single, reference, "{layout}: view contains");
    // Batch lengths around both pipeline depths, and a long one.
    let lens = [0, 1, 7, 8, 9, RING - 1, RING, RING + 1, 2 * RING + 3];
    for len in lens.into_iter().chain([probe.len()]) {
        let want = &reference[..len];
        assert_eq!(
            f.contains_many(&probe[..len]),
            want,
            "{layout}: batch {len}"
        );
        assert_eq!(
            BloomRead::contains_many(&view, &probe[..len]),
            want,
            "{layout}: view batch {len}"
        );
    }
    reference
}

/// A small filter (batches looked up key by key) filled by inserts to
/// 10 bits per key, so both answers occur.
#[test]
fn lookups_match_the_reference_positions() {
    for layout in Layout::ALL {
        let p = FilterParams::with_bits_per_key(2_000, 10.0, layout, spec(layout, 9)).unwrap();
        let f = BitFilter::new(p).unwrap();
        for k in keys(0..2_000) {
            f.insert(&k);
        }
        let reference = assert_lookups_match_reference(&f, &keys(0..20_000));
        assert!(
            reference[..2_000].iter().all(|&x| x),
            "{layout}: false negative"
        );
        // Expected 148 (standard, 0.82%), 175 (blocked, 0.97%) or 228
        // (split-block, 1.26%) of 18,000, σ ≤ 16: the band is more than 7σ
        // wide on each side.
        let fp = reference[2_000..].iter().filter(|&&x| x).count();
        assert!(
            (50..500).contains(&fp),
            "{layout}: {fp} false positives of 18000"
        );
    }
}

/// A filter above `PIPELINE_MIN_BYTES` (batches go through the prefetch
/// pipeline), its words filled at random with 7/8 of the bits set so that
/// about (7/8)^k of keys are reported present: 39% at k = 7, 34% at the
/// split-block layout's k = 8.
#[test]
fn pipelined_lookups_match_the_reference_positions() {
    use rand::{RngCore, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    for layout in Layout::ALL {
        let m = 4 * PIPELINE_MIN_BYTES * 8;
        let k = if layout == Layout::SplitBlock { 8 } else { 7 };
        let p = FilterParams::new(layout, m, k, spec(layout, 11)).unwrap();
        let f = BitFilter::new(p).unwrap();
        for i in 0..p.num_words() {
            f.store_word(i, rng.next_u64() | rng.next_u64() | rng.next_u64());
        }
        let reference = assert_lookups_match_reference(&f, &keys(0..20_000));
        // 20,000 · (7/8)^k = 7,850 or 6,870, σ ≈ 70: ±6σ.
        let want = 20_000.0 * 0.875f64.powi(k as i32);
        let present = reference.iter().filter(|&&x| x).count() as f64;
        assert!(
            (present - want).abs() < 420.0,
            "{layout}: {present} vs {want}"
        );
    }
}

/// `insert` reads before it writes; its answer must still say whether a
/// bit changed, and the bits it skipped must be set.
#[test]
fn insert_reports_new_bits_only() {
    for layout in Layout::ALL {
        let k = if layout == Layout::SplitBlock { 8 } else { 7 };
        let p = FilterParams::new(layout, 512 * 64, k, spec(layout, 2)).unwrap();
        let f = BitFilter::new(p).unwrap();
        let mut fresh = 0;
        for k in keys(0..500) {
            fresh += f.insert(&k) as u32;
            assert!(!f.insert(&k), "{layout}: second insert changed bits");
            assert!(f.contains(&k), "{layout}: inserted key missing");
        }
        // Later keys may find all their bits set already (a false
        // positive at insert time), but at 500 keys in 32,768 bits that
        // is rare: the expected count is below 1.
        assert!(fresh >= 495, "{layout}: {fresh}");
        let ones = f.count_ones();
        for k in keys(0..500) {
            f.insert(&k);
        }
        assert_eq!(f.count_ones(), ones);
    }
}

#[test]
fn view_and_owned_agree() {
    for layout in Layout::ALL {
        let p = FilterParams::for_capacity(1000, 0.01, layout, spec(layout, 3)).unwrap();
        let f = BitFilter::new(p).unwrap();
        for k in keys(0..1000) {
            f.insert(&k);
        }
        let bytes = f.to_le_bytes();
        let v = FilterView::new(p, &bytes).unwrap();
        let probe = keys(0..5000);
        assert_eq!(
            f.contains_many(&probe),
            BloomRead::contains_many(&v, &probe)
        );
        assert!(FilterView::new(p, &bytes[1..]).is_err());
    }
}

#[test]
fn incompatible_union_is_refused() {
    let a = FilterParams::new(Layout::Standard, 1024, 3, HashSpec::xxh3(1)).unwrap();
    let b = FilterParams::new(Layout::Standard, 1024, 3, HashSpec::xxh3(2)).unwrap();
    let fa = BitFilter::new(a).unwrap();
    let fb = BitFilter::new(b).unwrap();
    let err = fa.union_with(&fb).unwrap_err();
    assert!(matches!(err, FilterError::Incompatible(ref s) if s.contains("hash")));
}

#[test]
fn halving_refuses_shapes_that_do_not_fold() {
    let p = FilterParams::new(Layout::Standard, 1000, 3, HashSpec::xxh3(1)).unwrap();
    assert!(BitFilter::new(p).unwrap().halve().is_err());
    let p = FilterParams::new(Layout::Blocked, 512 * 3, 3, HashSpec::xxh3(1)).unwrap();
    assert!(BitFilter::new(p).unwrap().halve().is_err());
    let p = FilterParams::new(Layout::Blocked, 512, 3, HashSpec::xxh3(1)).unwrap();
    assert!(BitFilter::new(p).unwrap().halve().is_err());
}

/// A filter halved `j` times OR-ed into a full-size one
/// (`union_with_halved`): every key of both stays, and halving the result
/// `j` times gives exactly the union of the halved filters; the halved
/// part keeps its own fill.
#[test]
fn union_with_halved_keeps_every_key_and_folds_back_exactly() {
    for layout in [Layout::Blocked, Layout::SplitBlock] {
        let k = if layout == Layout::SplitBlock { 8 } else { 7 };
        let p = FilterParams::new(layout, 512 * 96, k, spec(layout, 5)).unwrap();
        for j in 0..4u32 {
            let (big, small) = (BitFilter::new(p).unwrap(), BitFilter::new(p).unwrap());
            let from = 10_000 + 1_000 * u64::from(j);
            let (a, b) = (keys(0..2_000), keys(from..from + 500));
            big.insert_many(&a);
            small.insert_many(&b);
            let mut folded = small;
            for _ in 0..j {
                folded = folded.halve().unwrap();
            }
            let before = big.try_clone().unwrap();
            big.union_with_halved(&folded).unwrap();
            assert!(
                a.iter().chain(&b).all(|x| big.contains(x)),
                "{layout:?} j={j}"
            );
            let (mut back, mut want) = (big.try_clone().unwrap(), before);
            for _ in 0..j {
                back = back.halve().unwrap();
                want = want.halve().unwrap();
            }
            want.union_with(&folded).unwrap();
            assert_eq!(back.to_words(), want.to_words(), "{layout:?} j={j}");
            // The halved part alone, spread over the full size, has the
            // fill it had when halved.
            let alone = BitFilter::new(p).unwrap();
            alone.union_with_halved(&folded).unwrap();
            let fill = |f: &BitFilter| f.count_ones() as f64 / f.params().m() as f64;
            assert!(
                (fill(&alone) - fill(&folded)).abs() < 1e-12,
                "{layout:?} j={j}"
            );
        }
    }
}

#[test]
fn union_with_halved_refuses_other_shapes() {
    let p = FilterParams::new(Layout::Blocked, 512 * 8, 7, HashSpec::xxh3(1)).unwrap();
    let f = BitFilter::new(p).unwrap();
    let other = |m, k, seed| {
        BitFilter::new(FilterParams::new(Layout::Blocked, m, k, HashSpec::xxh3(seed)).unwrap())
            .unwrap()
    };
    for (m, k, seed) in [
        (512 * 3, 7, 1),
        (512 * 16, 7, 1),
        (512 * 4, 6, 1),
        (512 * 4, 7, 2),
    ] {
        let err = f.union_with_halved(&other(m, k, seed)).unwrap_err();
        assert!(
            matches!(err, FilterError::Incompatible(_)),
            "{m} {k} {seed}"
        );
    }
    let s = FilterParams::new(Layout::Standard, 1024, 3, HashSpec::xxh3(1)).unwrap();
    let half = BitFilter::new(s).unwrap().halve().unwrap();
    let err = BitFilter::new(s)
        .unwrap()
        .union_with_halved(&half)
        .unwrap_err();
    assert!(matches!(err, FilterError::Incompatible(ref s) if s.contains("blocked")));
    assert_eq!(f.count_ones(), 0, "a refused union changes nothing");
}

/// Every compiled lookup (the scalar one, and the AVX2 one on a CPU that
/// has it, compiled for the filter's `k` where it fits the probe's one
/// row), every layout and hash (the blocked layout with XXH3-128 and
/// XXH3-64), every `k` of that row and some beyond: the answer of the
/// reference positions, and the same as `contains_hash` of the filter (its
/// blocks found without a bounds check), of a view of its bytes and of a
/// frozen copy (every compiled lookup of that one too); for
/// XXH3-64, the lookups of the one 64-bit hash (`LookupFn::call64`, what
/// `contains` calls) too.
#[test]
fn every_compiled_lookup_matches_the_reference() {
    use crate::filter::hash::KeyHash;
    use crate::filter::simd::LookupFn;
    use rand::{RngCore, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(29);
    let mut next = move || rng.next_u64();
    let kinds = [
        (Layout::Standard, HashSpec::xxh3(1)),
        (Layout::Blocked, HashSpec::xxh3(1)),
        (Layout::Blocked, HashSpec::xxh3_64(1)),
        (Layout::Blocked, HashSpec::xxh3_64_sectorized(1)),
        (Layout::SplitBlock, HashSpec::xxh64()),
    ];
    for (layout, spec) in kinds {
        for k in [1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 32] {
            if spec.algo == HashAlgo::Xxh3_64Sectorized && k != 8 {
                continue;
            }
            let hash = HashSpec {
                seed: if layout == Layout::SplitBlock {
                    0
                } else {
                    k.into()
                },
                ..spec
            };
            let p = match layout {
                Layout::SplitBlock if k != 8 => continue,
                Layout::SplitBlock => FilterParams::new(layout, 256 * 127, k, hash),
                _ => FilterParams::new(layout, 512 * 64, k, hash),
            }
            .unwrap();
            // Seven bits in eight set: both answers are common at every k.
            let words: Vec<u64> = (0..p.num_words())
                .map(|_| next() | next() | next())
                .collect();
            let f = BitFilter::from_words(p, &words).unwrap();
            let bytes = f.to_le_bytes();
            let view = FilterView::new(p, &bytes).unwrap();
            let frozen = f.try_clone().unwrap().freeze();
            let lookups = LookupFn::<BitFilter>::all_for_tests(layout, hash.algo, k);
            let frozen_lookups = LookupFn::<FrozenFilter>::all_for_tests(layout, hash.algo, k);
            for i in 0..3_000u64 {
                let key = i.to_le_bytes();
                let h = p.hash().hash(&key);
                let want = p.positions(h).as_slice().iter().all(|&q| f.bit(q));
                let case = format!("{layout} {} k={k} key {i}", hash.algo.name());
                assert_eq!(f.contains_hash(h), want, "{case}");
                assert_eq!(view.contains_hash(h), want, "{case} view");
                // `contains` passes a 64-bit hash alone (`call64`).
                assert_eq!(f.contains(&key), want, "{case} contains");
                assert_eq!(view.contains(&key), want, "{case} view contains");
                assert_eq!(frozen.contains_hash(h), want, "{case} frozen");
                assert_eq!(frozen.contains(&key), want, "{case} frozen contains");
                let h64 = p.hash().hash64(&key);
                assert_eq!(h64.map(KeyHash::of_64).unwrap_or(h), h, "{case}");
                for (j, l) in lookups.iter().enumerate() {
                    let got = l.call_pointer_for_tests(&f, h);
                    assert_eq!(got, want, "{case} lookup {j}");
                    if let Some(h64) = h64 {
                        let got = l.call64_pointer_for_tests(&f, h64);
                        assert_eq!(got, want, "{case} lookup {j} of the 64-bit hash");
                    }
                }
                for (j, l) in frozen_lookups.iter().enumerate() {
                    let got = l.call_pointer_for_tests(&frozen, h);
                    assert_eq!(got, want, "{case} frozen lookup {j}");
                    if let Some(h64) = h64 {
                        let got = l.call64_pointer_for_tests(&frozen, h64);
                        assert_eq!(got, want, "{case} frozen lookup {j} of the 64-bit hash");
                    }
                }
            }
        }
    }
}

/// Every compiled insert, `&mut`, shared and the write bias owner's (the
/// scalar one, and the AVX2 one on a CPU that has it), every layout and hash, `k` around the
/// probe's row of eight, keys repeated: the bits of the key's `positions`
/// set one by one, and the same answer (whether a bit was clear); for
/// XXH3-64, the inserts of the one 64-bit hash too, and `insert` and
/// `insert_mut`, which call those.
#[test]
fn every_compiled_insert_matches_single_inserts() {
    use crate::filter::simd::InsertFn;
    let kinds = [
        (Layout::Standard, HashSpec::xxh3(2)),
        (Layout::Blocked, HashSpec::xxh3(2)),
        (Layout::Blocked, HashSpec::xxh3_64(2)),
        (Layout::Blocked, HashSpec::xxh3_64_sectorized(2)),
        (Layout::SplitBlock, HashSpec::xxh64()),
    ];
    for (layout, hash) in kinds {
        for k in [1, 2, 3, 4, 5, 6, 7, 8, 9, 17, 32] {
            let p = match layout {
                _ if hash.algo == HashAlgo::Xxh3_64Sectorized && k != 8 => continue,
                Layout::SplitBlock if k != 8 => continue,
                Layout::SplitBlock => FilterParams::new(layout, 256 * 61, k, hash),
                _ => FilterParams::new(layout, 512 * 30, k, hash),
            }
            .unwrap();
            let want = BitFilter::new(p).unwrap();
            let keys: Vec<[u8; 8]> = (0u64..3_000).chain(0..500).map(u64::to_le_bytes).collect();
            let fresh: Vec<bool> = keys
                .iter()
                .map(|key| {
                    let at = p.positions(p.hash().hash(key));
                    at.as_slice()
                        .iter()
                        .fold(false, |c, &q| want.set_bit(q) | c)
                })
                .collect();
            for (j, ins) in InsertFn::<BitFilter>::all_for_tests(layout, hash.algo, k)
                .into_iter()
                .enumerate()
            {
                let case = format!("{layout} {} k={k} insert {j}", hash.algo.name());
                let by_hash = |key: &[u8]| p.hash().hash(key);
                inserts_match(ins, p, &keys, by_hash, &fresh, &want, &case);
                if p.hash().hash64(&keys[0]).is_some() {
                    // The inserts of the one 64-bit hash (what `insert` and
                    // `insert_mut` call).
                    let by_64 = |key: &[u8]| p.hash().hash64(key).unwrap_or_default();
                    inserts_match(ins, p, &keys, by_64, &fresh, &want, &case);
                }
            }
            let (mut f, g) = (BitFilter::new(p).unwrap(), BitFilter::new(p).unwrap());
            let got: Vec<bool> = keys.iter().map(|key| f.insert_mut(key)).collect();
            assert_eq!(
                got,
                fresh,
                "{layout} {} k={k}: insert_mut",
                hash.algo.name()
            );
            let got: Vec<bool> = keys.iter().map(|key| g.insert(key)).collect();
            assert_eq!(got, fresh, "{layout} {} k={k}: insert", hash.algo.name());
            assert!(f.to_words() == want.to_words() && g.to_words() == want.to_words());
        }
    }
}

/// `ins`'s `&mut`, shared and owned inserts of `keys`, each hashed by
/// `hash_of`, into empty filters of `p`: the answers `fresh` and the bits
/// of `want`.
fn inserts_match<H: crate::filter::simd::InsertArg>(
    ins: crate::filter::simd::InsertFn<BitFilter>,
    p: FilterParams,
    keys: &[[u8; 8]],
    hash_of: impl Fn(&[u8]) -> H,
    fresh: &[bool],
    want: &BitFilter,
    case: &str,
) {
    let mut f = BitFilter::new(p).unwrap();
    let got: Vec<bool> = keys
        .iter()
        .map(|key| ins.call_pointer_for_tests(&mut f, hash_of(key)))
        .collect();
    assert_eq!(got, fresh, "{case}: answers");
    assert!(f.to_words() == want.to_words(), "{case}: bits");
    let g = BitFilter::new(p).unwrap();
    let got: Vec<bool> = keys
        .iter()
        .map(|key| ins.call_shared_pointer_for_tests(&g, hash_of(key)))
        .collect();
    assert_eq!(got, fresh, "{case}: shared answers");
    assert!(g.to_words() == want.to_words(), "{case}: shared bits");
    let o = BitFilter::new(p).unwrap();
    let got: Vec<bool> = keys
        .iter()
        .map(|key| ins.call_owned_pointer_for_tests(&o, hash_of(key)))
        .collect();
    assert_eq!(got, fresh, "{case}: owned answers");
    assert!(o.to_words() == want.to_words(), "{case}: owned bits");
}

/// A view of long-lived bytes is usable where a shorter-lived one is
/// expected: the view is covariant in its lifetime (a compile-time check;
/// a view that stored a `fn(&FilterView<'a>)` was not).
#[test]
fn a_view_shortens_its_lifetime() {
    fn shorten<'a>(v: FilterView<'static>) -> FilterView<'a> {
        v
    }
    static BYTES: [u8; 64] = [0; 64];
    let p = FilterParams::new(Layout::Blocked, 512, 1, HashSpec::xxh3(0)).unwrap();
    let v = shorten(FilterView::new(p, &BYTES).unwrap());
    assert!(!v.contains(b"absent from an empty filter"));
}

/// Every batch strategy gives the answers of the reference, for every
/// layout and hash (the blocked layout with XXH3-128 and XXH3-64, whose
/// batches probe from 32-bit products, at several `k`: each batch loop is
/// compiled per `k` of the probe's row), on a filter in L2 and one above
/// the pipeline's threshold, with batches of every awkward length, one
/// longer than a partitioned round.
#[test]
fn every_batch_strategy_answers_alike() {
    use super::partition::ROUND_KEYS;
    use rand::{RngCore, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(23);
    let strategies = [
        BatchStrategy::Auto,
        BatchStrategy::KeyByKey,
        BatchStrategy::Pipeline,
        BatchStrategy::Partitioned,
    ];
    let kinds = [
        (Layout::Standard, spec(Layout::Standard, 17), &[6][..]),
        (Layout::Blocked, HashSpec::xxh3(17), &[1, 6, 8, 9][..]),
        (
            Layout::Blocked,
            HashSpec::xxh3_64(17),
            &[1, 3, 6, 7, 8, 9][..],
        ),
        (Layout::Blocked, HashSpec::xxh3_64_sectorized(17), &[8][..]),
        (Layout::SplitBlock, HashSpec::xxh64(), &[8][..]),
    ];
    for (layout, hash, ks) in kinds {
        for (m, &k) in [512 * 64, 4 * PIPELINE_MIN_BYTES * 8]
            .into_iter()
            .flat_map(|m| ks.iter().map(move |k| (m, k)))
        {
            let p = FilterParams::new(layout, m, k, hash).unwrap();
            let words: Vec<u64> = (0..p.num_words())
                .map(|_| rng.next_u64() | rng.next_u64() | rng.next_u64())
                .collect();
            let f = BitFilter::from_words(p, &words).unwrap();
            let long = if layout == Layout::SplitBlock && m > 512 * 64 {
                ROUND_KEYS as u64 + 123
            } else {
                5_000
            };
            let probe = keys(0..long);
            let reference = assert_lookups_match_reference(&f, &probe[..3_000]);
            let mut out = vec![false; probe.len()];
            for s in strategies {
                for len in [0, 1, 15, 16, 17, 3_000, probe.len()] {
                    f.contains_many_with(&probe[..len], &mut out, s);
                    let n = len.min(3_000);
                    let case = format!("{layout} {} k={k} m={m} {s:?}", hash.algo.name());
                    assert_eq!(&out[..n], &reference[..n], "{case} len {len}");
                }
                if probe.len() > 3_000 {
                    let want: Vec<bool> = probe.iter().map(|k| f.contains(k)).collect();
                    let case = format!("{layout} {} k={k} m={m} {s:?}", hash.algo.name());
                    assert!(out == want, "{case}: the long batch differs");
                }
            }
        }
    }
}

#[test]
fn the_one_writer_insert_sets_the_bits_of_the_shared_one() {
    // Plain stores instead of locked ORs (`probe::Alone`): the same bits and
    // the same count of keys that found a bit clear, in every layout, with
    // keys repeated within and across batches.
    for layout in [Layout::Blocked, Layout::Standard, Layout::SplitBlock] {
        let p = FilterParams::with_bits_per_key(20_000, 10.0, layout, spec(layout, 3)).unwrap();
        let (shared, alone) = (BitFilter::new(p).unwrap(), BitFilter::new(p).unwrap());
        for batch in 0..4u64 {
            let hashes: Vec<_> = keys(batch * 4_000..batch * 4_000 + 6_000)
                .iter()
                .map(|k| p.hash().hash(k))
                .collect();
            assert_eq!(
                shared.insert_hashes(&hashes),
                alone.insert_hashes_one_writer(&hashes),
                "{layout}"
            );
        }
        assert!(
            (0..p.num_words()).all(|i| shared.word(i) == alone.word(i)),
            "{layout}"
        );
    }
}

/// The shared bulk insert through a copy (`shadow`) and the direct one,
/// and the key-by-key `insert_mut`, set the bits of one `insert` per key
/// and count the keys that found a bit clear as it does: in every layout,
/// with batches on both sides of the copy's threshold, keys repeated
/// within and across batches, into a filter already holding keys.
#[test]
fn shared_bulk_inserts_and_insert_mut_match_single_inserts() {
    for layout in Layout::ALL {
        let p = FilterParams::with_bits_per_key(50_000, 10.0, layout, spec(layout, 5)).unwrap();
        let (single, shared) = (BitFilter::new(p).unwrap(), BitFilter::new(p).unwrap());
        let mut exclusive = BitFilter::new(p).unwrap();
        let mut paths = [0; 2];
        // Batches of 1,000 keys are below the threshold (about 1,950 keys
        // for these 62,500 bytes), of 12,000 above; every other batch
        // repeats half of the one before.
        for (i, len) in [1_000u64, 12_000, 1_000, 1_000, 12_000, 12_000, 300]
            .into_iter()
            .enumerate()
        {
            let start = 10_000 * i as u64 - if i % 2 == 1 { len / 2 } else { 0 };
            let batch = keys(start..start + len);
            let copied = shadow::worth_copying(&p, batch.len());
            paths[usize::from(copied)] += 1;
            let fresh = batch.iter().filter(|k| single.insert(&k[..])).count() as u64;
            assert_eq!(shared.insert_many(&batch), fresh, "{layout} batch {i}");
            let by_key = batch
                .iter()
                .filter(|k| exclusive.insert_mut(&k[..]))
                .count();
            assert_eq!(by_key as u64, fresh, "{layout} batch {i}: insert_mut");
            let want = single.to_words();
            assert!(shared.to_words() == want, "{layout} batch {i}: insert_many");
            assert!(
                exclusive.to_words() == want,
                "{layout} batch {i}: insert_mut"
            );
        }
        assert_eq!(paths, [4, 3], "{layout}: both paths taken");
    }
}

/// An empty filter holds zero keys, not minus zero (`filterstore estimate`
/// printed "-0" for two empty filters): in every layout, for the set and
/// for the union of two empty filters.
#[test]
fn an_empty_filter_estimates_plus_zero() {
    for layout in [Layout::Standard, Layout::Blocked, Layout::SplitBlock] {
        let p = FilterParams::for_capacity(1_000, 0.01, layout, spec(layout, 1)).unwrap();
        let (a, b) = (BitFilter::new(p).unwrap(), BitFilter::new(p).unwrap());
        for est in [a.estimate_len(), a.estimate_union_len(&b).unwrap()] {
            assert!(est == 0.0 && est.is_sign_positive(), "{layout:?}: {est}");
            assert_eq!(format!("{est:.0}"), "0");
        }
    }
}

/// A filter hashed with XXH3-64 reads `x = h2 >> 32` in every path, as
/// `FilterParams::positions` and the counting filter's probe do
/// (`KeyHash::upper_h2`), sectorized or not: a hash made by hand (its `h2`
/// not `h1 << 32`, its lower half not zero) sets exactly its `positions`,
/// through the shared insert and `insert_mut`, and is found; the counting
/// filter's in-block positions are the same.
#[test]
fn xxh3_64_hashes_made_by_hand_set_their_positions() {
    use crate::filter::counting::in_block_probe;
    use crate::filter::hash::KeyHash;
    use rand::{RngCore, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(41);
    for (spec, k) in [
        (HashSpec::xxh3_64_sectorized(5), 8),
        (HashSpec::xxh3_64(5), 7),
        (HashSpec::xxh3_64(5), 12),
    ] {
        let p = FilterParams::new(Layout::Blocked, 512 * 32, k, spec).unwrap();
        for _ in 0..2_000 {
            let h = KeyHash {
                h1: rng.next_u64(),
                h2: rng.next_u64(),
            };
            let case = format!("{} k={k} {h:?}", spec.algo.name());
            let want = p.positions(h);
            let base = want.as_slice()[0] / 512 * 512;
            let mut counting: Vec<u64> = (0..k as usize)
                .map(|i| base + in_block_probe(&p, h.h2, i) as u64)
                .collect();
            counting.sort_unstable();
            counting.dedup();
            assert_eq!(counting, want.as_slice(), "{case} counting");
            let (shared, mut owned) = (BitFilter::new(p).unwrap(), BitFilter::new(p).unwrap());
            shared.insert_hash(h);
            owned.insert_hash_mut(h);
            for f in [&shared, &owned] {
                let set: Vec<u64> = (0..p.m()).filter(|&q| f.bit(q)).collect();
                assert_eq!(set, want.as_slice(), "{case}");
                assert!(f.contains_hash(h), "{case}");
            }
        }
    }
}
