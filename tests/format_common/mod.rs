//! Helpers shared by the format tests, written from `docs/FORMAT.md` alone
//! so that the tests do not check the crate's code against itself.
#![allow(dead_code)]

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
