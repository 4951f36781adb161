//! Property tests of the core: never a false negative, the counting filter
//! against an exact model of its counters (saturation included), and the laws
//! of union, intersection and halving.

use filterstore::positions;
use filterstore::COUNTER_MAX;
use filterstore::{
    BitFilter, BloomRead, CountingFilter, FilterError, FilterParams, FilterView, HashSpec, Layout,
};
use proptest::prelude::*;
use std::collections::HashMap;

fn layout() -> impl Strategy<Value = Layout> {
    prop_oneof![Just(Layout::Standard), Just(Layout::Blocked)]
}

fn keys(max: usize) -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(prop::collection::vec(any::<u8>(), 0..24), 0..max)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every inserted key is found: by the owned filter, the batched path, a
    /// view over its bytes, the counting filter, and the bit filter derived
    /// from the counters, which must equal the directly built one bit for bit.
    #[test]
    fn no_false_negatives(layout in layout(), bpk in 1.0f64..30.0, seed in any::<u64>(), keys in keys(400)) {
        let n = keys.len().max(1) as u64;
        let p = FilterParams::with_bits_per_key(n, bpk, layout, HashSpec::xxh3(seed)).unwrap();
        let f = BitFilter::new(p).unwrap();
        let mut c = CountingFilter::new(p).unwrap();
        for k in &keys {
            f.insert(k);
            c.insert(k);
        }
        let bytes = f.to_le_bytes();
        let view = FilterView::new(p, &bytes).unwrap();
        prop_assert!(f.contains_many(&keys).into_iter().all(|b| b));
        for k in &keys {
            prop_assert!(f.contains(k));
            prop_assert!(view.contains(k));
            prop_assert!(c.contains(k));
        }
        prop_assert_eq!(c.to_bit_filter().unwrap().to_words(), f.to_words());
    }

    /// Random inserts and removes on a tiny filter, so that counters collide
    /// and saturate, against a model that tracks each counter exactly: the
    /// true count, and whether it ever reached 15 (then it sticks at 15).
    #[test]
    fn counting_filter_matches_its_model(
        layout in layout(),
        blocks in 1u64..4,
        k in 1u32..=32,
        seed in any::<u64>(),
        ops in prop::collection::vec((any::<bool>(), 0u8..24), 1..400),
    ) {
        let p = FilterParams::new(layout, blocks * 512, k, HashSpec::xxh3(seed)).unwrap();
        let mut c = CountingFilter::new(p).unwrap();
        let mut live: HashMap<u8, u32> = HashMap::new();
        let mut count: HashMap<u64, u32> = HashMap::new();
        let mut sticky: HashMap<u64, bool> = HashMap::new();
        let pos = |key: u8| positions(p.layout(), p.m(), p.k(), p.hash().hash(&[key])).as_slice().to_vec();
        for (insert, key) in ops {
            let live_count = live.get(&key).copied().unwrap_or(0);
            if insert {
                let got = c.insert(&[key]);
                *live.entry(key).or_default() += 1;
                let (mut new_bits, mut newly_saturated) = (0, 0);
                for i in pos(key) {
                    let e = count.entry(i).or_default();
                    *e += 1;
                    new_bits += u32::from(*e == 1 && !sticky.contains_key(&i));
                    if *e >= COUNTER_MAX as u32 && !sticky.contains_key(&i) {
                        newly_saturated += 1;
                        sticky.insert(i, true);
                    }
                }
                prop_assert_eq!(got.new_bits, new_bits, "insert of {}", key);
                prop_assert_eq!(got.newly_saturated, newly_saturated, "insert of {}", key);
            } else if live_count > 0 {
                let cleared = c.remove(&[key]).unwrap();
                *live.get_mut(&key).unwrap() -= 1;
                let mut expected = Vec::new();
                for i in pos(key) {
                    let e = count.get_mut(&i).unwrap();
                    *e -= 1;
                    if *e == 0 && !sticky.contains_key(&i) {
                        expected.push(i);
                    }
                }
                prop_assert_eq!(cleared.as_slice(), &expected[..], "remove of {}", key);
            } else if !c.contains(&[key]) {
                // Never inserted and not a false positive: refused, unchanged.
                let before = c.as_bytes().to_vec();
                prop_assert_eq!(c.remove(&[key]), Err(FilterError::NotPresent));
                prop_assert_eq!(c.as_bytes(), &before[..]);
            }
            // (Removing a never-inserted key that is a false positive breaks
            // the host's contract; the model does not do it.)
            for i in 0..p.m() {
                let expected = if sticky.get(&i).copied().unwrap_or(false) {
                    COUNTER_MAX
                } else {
                    count.get(&i).copied().unwrap_or(0) as u8
                };
                prop_assert_eq!(c.counter(i), expected, "counter {}", i);
            }
            for (key, n) in &live {
                if *n > 0 {
                    prop_assert!(c.contains(&[*key]), "false negative for {}", key);
                }
            }
            let saturated = sticky.values().filter(|s| **s).count() as u64;
            prop_assert_eq!(c.saturated(), saturated);
        }
    }

    /// OR of two filters equals the filter of the union; AND keeps every key of
    /// the intersection; halving keeps every key and commutes with union.
    #[test]
    fn set_operation_laws(
        layout in layout(),
        log_blocks in 1u32..6,
        k in 1u32..10,
        seed in any::<u64>(),
        a in keys(200),
        b in keys(200),
    ) {
        let m = 512u64 << log_blocks;
        let p = FilterParams::new(layout, m, k, HashSpec::xxh3(seed)).unwrap();
        let build = |ks: &[Vec<u8>]| {
            let f = BitFilter::new(p).unwrap();
            for key in ks {
                f.insert(key);
            }
            f
        };
        let fa = build(&a);
        let fb = build(&b);
        let both: Vec<Vec<u8>> = a.iter().chain(&b).cloned().collect();
        let union = fa.try_clone().unwrap();
        union.union_with(&fb).unwrap();
        prop_assert_eq!(union.to_words(), build(&both).to_words());

        let inter = fa.try_clone().unwrap();
        inter.intersect_with(&fb).unwrap();
        for key in a.iter().filter(|k| b.contains(k)) {
            prop_assert!(inter.contains(key));
        }

        let half = union.halve().unwrap();
        prop_assert_eq!(half.params().m(), m / 2);
        for key in &both {
            prop_assert!(half.contains(key), "halving lost a key");
        }
        let ha = fa.halve().unwrap();
        ha.union_with(&fb.halve().unwrap()).unwrap();
        prop_assert_eq!(ha.to_words(), half.to_words());
        // Halving equals building directly at half the size.
        let direct = BitFilter::new(*half.params()).unwrap();
        for key in &both {
            direct.insert(key);
        }
        prop_assert_eq!(direct.to_words(), half.to_words());
    }

    /// The blocked layout halves at any even block count, not only a power
    /// of two (multiply-high block indices), with either hash: the result is
    /// the filter built directly at half the blocks, and halving again while
    /// the count stays even keeps every key.
    #[test]
    fn blocked_halving_at_any_even_block_count(
        half_blocks in 1u64..48,
        k in 1u32..12,
        seed in any::<u64>(),
        algo in 0u8..3,
        ks in keys(300),
    ) {
        let (hash, k) = match algo {
            0 => (HashSpec::xxh3(seed), k),
            1 => (HashSpec::xxh3_64(seed), k),
            _ => (HashSpec::xxh3_64_sectorized(seed), 8),
        };
        let m = 512 * 2 * half_blocks;
        let p = FilterParams::new(Layout::Blocked, m, k, hash).unwrap();
        let f = BitFilter::new(p).unwrap();
        let direct = BitFilter::new(FilterParams::new(Layout::Blocked, m / 2, k, hash).unwrap()).unwrap();
        for key in &ks {
            f.insert(key);
            direct.insert(key);
        }
        let mut half = f.halve().unwrap();
        prop_assert_eq!(half.to_words(), direct.to_words());
        while half.params().num_blocks().is_multiple_of(2) {
            half = half.halve().unwrap();
            for key in &ks {
                prop_assert!(half.contains(key), "halving lost a key");
            }
        }
        prop_assert!(half.halve().is_err(), "an odd block count does not halve");
    }
}

#[test]
fn standard_power_of_two_halving_matches_direct_build() {
    let p = FilterParams::new(Layout::Standard, 1 << 12, 5, HashSpec::xxh3(9)).unwrap();
    let f = BitFilter::new(p).unwrap();
    let direct =
        BitFilter::new(FilterParams::new(Layout::Standard, 1 << 11, 5, HashSpec::xxh3(9)).unwrap())
            .unwrap();
    for i in 0u32..300 {
        f.insert(&i.to_le_bytes());
        direct.insert(&i.to_le_bytes());
    }
    assert_eq!(f.halve().unwrap().to_words(), direct.to_words());
}
