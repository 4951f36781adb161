//! A frozen filter answers as the filter it was frozen from, and thaws to
//! it, keeping its memory.

use super::{BitFilter, BloomRead, FrozenFilter};
use crate::filter::params::{FilterParams, Layout};
use crate::HashSpec;
use rand::{Rng, SeedableRng};

/// `n` random keys of 1 to 40 bytes (both of XXH3-64's short-key paths and
/// its longer ones), the first byte `tag` so that two sets never meet.
fn keys(rng: &mut rand::rngs::StdRng, n: usize, tag: u8) -> Vec<Vec<u8>> {
    const LENS: [usize; 6] = [1, 4, 8, 16, 24, 40];
    (0..n)
        .map(|i| {
            let mut k = vec![0u8; LENS[i % LENS.len()]];
            rng.fill(&mut k[..]);
            k[0] = tag;
            k
        })
        .collect()
}

/// Every layout and hash: a filter written by two threads, frozen, answers
/// every present key and every absent key (false positives included) as the
/// filter did, by `contains`, `contains_hash` and `contains_many`, with the
/// same bytes; thawed, it answers so again and takes inserts.
#[test]
fn frozen_filters_answer_as_their_filters_and_thaw_to_them() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(41);
    let kinds = [
        (Layout::Standard, HashSpec::xxh3(3)),
        (Layout::Blocked, HashSpec::xxh3(3)),
        (Layout::Blocked, HashSpec::xxh3_64(3)),
        (Layout::Blocked, HashSpec::xxh3_64_sectorized(3)),
        (Layout::SplitBlock, HashSpec::xxh64()),
    ];
    for (layout, spec) in kinds {
        let case = format!("{layout} {}", spec.algo.name());
        let p = FilterParams::with_bits_per_key(5_000, 8.0, layout, spec).unwrap();
        let present = keys(&mut rng, 5_000, 1);
        let absent = keys(&mut rng, 20_000, 2);
        let f = BitFilter::new(p).unwrap();
        let (a, b) = present.split_at(present.len() / 2);
        std::thread::scope(|s| {
            for half in [a, b] {
                let f = &f;
                s.spawn(move || half.iter().for_each(|k| _ = f.insert(k)));
            }
        });
        let all: Vec<&Vec<u8>> = present.iter().chain(&absent).collect();
        let want: Vec<bool> = all.iter().map(|k| f.contains(k)).collect();
        assert!(want[..present.len()].iter().all(|&w| w), "{case}");
        let fp = want[present.len()..].iter().filter(|&&w| w).count();
        assert!(
            fp > 0 && fp < absent.len() / 10,
            "{case}: both answers, fp {fp}"
        );
        let bytes = f.to_le_bytes();
        let frozen = f.freeze();
        for (k, &w) in all.iter().zip(&want) {
            assert_eq!(frozen.contains(k), w, "{case} {k:?}");
            assert_eq!(frozen.contains_hash(p.hash().hash(k)), w, "{case} {k:?}");
        }
        assert_eq!(frozen.contains_many(&all), want, "{case}");
        assert_eq!(frozen.to_le_bytes(), bytes, "{case}");
        let thawed = frozen.thaw();
        assert_eq!(thawed.contains_many(&all), want, "{case}");
        assert_eq!(thawed.to_le_bytes(), bytes, "{case}");
        assert!(thawed.insert(b"\x03 after the thaw") && thawed.contains(b"\x03 after the thaw"));
    }
}

/// A frozen filter is shared between threads as a filter is: `Send` and
/// `Sync` (a compile-time check), and read by several threads at once.
#[test]
fn frozen_filters_are_read_by_many_threads() {
    fn shared<T: Send + Sync>(_: &T) {}
    let p = FilterParams::with_bits_per_key(20_000, 10.0, Layout::Blocked, HashSpec::xxh3_64(5));
    let f = BitFilter::new(p.unwrap()).unwrap();
    (0..20_000u64).for_each(|i| _ = f.insert(&i.to_le_bytes()));
    let frozen = f.freeze();
    shared(&frozen);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let frozen = &frozen;
            s.spawn(move || {
                let mut ids = (t..20_000).step_by(4);
                assert!(ids.all(|i| frozen.contains(&i.to_le_bytes())));
            });
        }
    });
}

/// Freezing and thawing keep the filter's memory: no copy, and the bits
/// stay 64-byte aligned, as the frozen lookup's loads assume they are.
#[test]
fn freezing_and_thawing_move_no_bit() {
    let p = FilterParams::with_bits_per_key(10_000, 10.0, Layout::Blocked, HashSpec::xxh3(1));
    let p = p.unwrap();
    let f = BitFilter::new(p).unwrap();
    let at = f.words_ptr();
    assert_eq!(at as usize % 64, 0);
    let frozen: FrozenFilter = f.freeze();
    assert!(std::ptr::eq(frozen.blocks.bytes().as_ptr(), at.cast()));
    assert_eq!(frozen.blocks.bytes().len() as u64, p.bit_bytes());
    assert!(std::ptr::eq(frozen.thaw().words_ptr(), at));
}
