//! Tests of the hash and the positions it derives.

use super::*;

#[test]
fn split_positions_are_one_per_lane_in_the_block() {
    let m = 256 * 1000;
    for h in [0u64, u64::MAX, 0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210] {
        let p = split_positions(h, m);
        let s = p.as_slice();
        assert_eq!(s.len(), 8);
        let b = split_block_index(h, 1000);
        for (i, &pos) in s.iter().enumerate() {
            assert_eq!(pos / 256, b);
            assert_eq!((pos % 256) / 32, i as u64);
            assert_eq!(pos % 32, u64::from(split_lane_bit(h as u32, i)));
        }
    }
}

/// With `h2 = x << 32` (XXH3-64), position `i` is the top 9 bits of the
/// 32-bit product `x · lo32(SALT[i])`, as `filter::hash` documents and
/// the AVX2 probe computes it; and the salts' low halves are odd and
/// distinct (two equal ones would give two probes one position).
#[test]
fn xxh3_64_positions_are_32_bit_products() {
    for (i, s) in BLOCK_SALTS.iter().enumerate() {
        assert_eq!(*s as u32 & 1, 1);
        assert!(BLOCK_SALTS[..i].iter().all(|t| *t as u32 != *s as u32));
    }
    let spec = HashSpec::xxh3_64(3);
    for key in 0u32..5_000 {
        let h = spec.hash(&key.to_le_bytes());
        let x = h.h1 as u32;
        for (i, s) in BLOCK_SALTS.iter().enumerate() {
            assert_eq!(in_block_position(h.h2, i), x.wrapping_mul(*s as u32) >> 23);
        }
    }
}

#[test]
fn salts_are_odd_and_distinct() {
    for (i, s) in BLOCK_SALTS.iter().enumerate() {
        assert_eq!(s & 1, 1, "salt {i} is even");
        for t in &BLOCK_SALTS[..i] {
            assert_ne!(s, t);
        }
    }
}

#[test]
fn map_to_range_is_in_range_and_uses_high_bits() {
    assert_eq!(map_to_range(0, 1000), 0);
    assert_eq!(map_to_range(u64::MAX, 1000), 999);
    assert_eq!(map_to_range(1 << 63, 1000), 500);
}

/// The standard probe sequence is enhanced double hashing exactly as the
/// module docs state it, whichever code path walks it.
#[test]
fn standard_probes_are_enhanced_double_hashing() {
    let spec = HashSpec::xxh3(8);
    let m = 1_000_003;
    for key in 0u32..1000 {
        let h = spec.hash(&key.to_le_bytes());
        let (mut x, mut y) = (h.h1, h.h2);
        let mut want = Vec::new();
        for i in 0..MAX_K as u64 {
            want.push(((x as u128 * m as u128) >> 64) as u64);
            x = x.wrapping_add(y);
            y = y.wrapping_add(i);
        }
        let mut got = Vec::new();
        for_each_standard_position(h, m, MAX_K, |p| {
            got.push(p);
            true
        });
        assert_eq!(got, want);
        let mut probes = StandardProbes::new(h, m);
        let peeled: Vec<u64> = (0..MAX_K).map(|_| probes.next_position()).collect();
        assert_eq!(peeled, want);
        assert_eq!(probes.taken(), u64::from(MAX_K));
    }
}

/// `positions` reads the blocked layout's positions off bit masks; they
/// must be exactly the probes' positions, sorted, repeats removed.
#[test]
fn blocked_positions_are_the_sorted_distinct_probes() {
    let spec = HashSpec::xxh3(4);
    let m = 512 * 1000;
    let mut repeats = 0;
    for k in [1, 2, 7, 20, MAX_K] {
        for key in 0u32..3000 {
            let h = spec.hash(&key.to_le_bytes());
            let base = map_to_range(h.h1, m / 512) * 512;
            let mut want: Vec<u64> = (0..k as usize)
                .map(|i| base + u64::from(in_block_position(h.h2, i)))
                .collect();
            want.sort_unstable();
            want.dedup();
            repeats += k as usize - want.len();
            assert_eq!(positions(Layout::Blocked, m, k, h).as_slice(), &want[..]);
        }
    }
    // Some keys must have had two probes on one position (at k = 32 in
    // 512 bits, about 60% of keys do), or the dedup went untested.
    assert!(repeats > 1000, "{repeats}");
}

#[test]
fn positions_are_sorted_distinct_and_in_range() {
    let spec = HashSpec::xxh3(1);
    for layout in [Layout::Standard, Layout::Blocked] {
        for key in 0u32..2000 {
            let p = positions(layout, 512 * 3, 20, spec.hash(&key.to_le_bytes()));
            let s = p.as_slice();
            assert!(!s.is_empty() && s.len() <= 20);
            assert!(s.windows(2).all(|w| w[0] < w[1]));
            assert!(s.iter().all(|&x| x < 512 * 3));
            if layout == Layout::Blocked {
                assert_eq!(s[0] / 512, s[s.len() - 1] / 512);
            }
        }
    }
}
