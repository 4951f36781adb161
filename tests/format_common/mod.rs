//! Helpers shared by the format and message tests: a CRC-32 written from
//! `docs/FORMAT.md` alone (so that the tests do not check the crate's code
//! against itself), and the keys and filters the message tests send.
#![allow(dead_code)]

use filterstore::{BitFilter, FilterParams, HashSpec, Layout};

/// Keys `range`, as 4 little-endian bytes each.
pub fn keys(range: std::ops::Range<u32>) -> Vec<[u8; 4]> {
    range.map(|i| i.to_le_bytes()).collect()
}

/// A filter of `ks` with seed 77.
pub fn filter(layout: Layout, m: u64, k: u32, ks: &[[u8; 4]]) -> BitFilter {
    let f = BitFilter::new(FilterParams::new(layout, m, k, HashSpec::xxh3(77)).unwrap()).unwrap();
    for key in ks {
        f.insert(key);
    }
    f
}

/// CRC-32/ISO-HDLC, bit by bit (FORMAT.md § 1: the reflected polynomial
/// `0xEDB88320`, initial value and final XOR `0xFFFFFFFF`).
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

#[test]
fn crc32_check_value() {
    // FORMAT.md § 1: crc32("123456789") = 0xCBF43926.
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
}
