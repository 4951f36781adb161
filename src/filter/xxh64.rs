//! XXH64 (the xxHash project's 64-bit hash), the hash of Parquet's
//! split-block Bloom filter: written here so that it inlines into every
//! lookup (the `xxhash-rust` crate's `xxh64` is an out-of-line call), and
//! tested against that crate bit for bit (`tests/filter/golden_hash.rs`, and the
//! interop tests against arrow-rs, which hashes with `twox-hash`).
//!
//! The algorithm, as the xxHash specification (`doc/xxhash_spec.md`, "XXH64
//! algorithm description") defines it, with the little-endian reads of
//! every platform:
//!
//! * inputs of 32 bytes or more run four accumulators over 32-byte stripes
//!   and merge them ([`long_prefix`]); shorter ones start from
//!   `seed + PRIME64_5`;
//! * the length is added, the remaining 8-, 4- and 1-byte pieces are mixed
//!   in, and the result is avalanched.

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;
const P4: u64 = 0x85EB_CA77_C2B2_AE63;
const P5: u64 = 0x27D4_EB2F_1656_67C5;

/// XXH64 of `input` with `seed`. Inlined: a key's length, when the caller
/// knows it, unrolls the tail loops.
#[inline(always)]
pub(super) fn xxh64(input: &[u8], seed: u64) -> u64 {
    let (mut h, mut rest) = if input.len() >= 32 {
        long_prefix(input, seed)
    } else {
        (seed.wrapping_add(P5), input)
    };
    h = h.wrapping_add(input.len() as u64);
    while let Some((word, tail)) = rest.split_first_chunk::<8>() {
        h ^= round(0, u64::from_le_bytes(*word));
        h = h.rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
        rest = tail;
    }
    if let Some((word, tail)) = rest.split_first_chunk::<4>() {
        h ^= u64::from(u32::from_le_bytes(*word)).wrapping_mul(P1);
        h = h.rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
        rest = tail;
    }
    for &b in rest {
        h ^= u64::from(b).wrapping_mul(P5);
        h = h.rotate_left(11).wrapping_mul(P1);
    }
    avalanche(h)
}

/// The four-accumulator loop over the whole 32-byte stripes of `input`
/// (at least one), merged: the state before the tail, and the tail. Out of
/// line: keys that long are rare in lookups, and the short path stays small.
#[inline(never)]
fn long_prefix(input: &[u8], seed: u64) -> (u64, &[u8]) {
    let mut v = [
        seed.wrapping_add(P1).wrapping_add(P2),
        seed.wrapping_add(P2),
        seed,
        seed.wrapping_sub(P1),
    ];
    let mut rest = input;
    while let Some((stripe, tail)) = rest.split_first_chunk::<32>() {
        for (i, acc) in v.iter_mut().enumerate() {
            let mut lane = [0u8; 8];
            lane.copy_from_slice(&stripe[8 * i..8 * i + 8]);
            *acc = round(*acc, u64::from_le_bytes(lane));
        }
        rest = tail;
    }
    let mut h = v[0]
        .rotate_left(1)
        .wrapping_add(v[1].rotate_left(7))
        .wrapping_add(v[2].rotate_left(12))
        .wrapping_add(v[3].rotate_left(18));
    for acc in v {
        h = (h ^ round(0, acc)).wrapping_mul(P1).wrapping_add(P4);
    }
    (h, rest)
}

#[inline(always)]
fn round(acc: u64, lane: u64) -> u64 {
    acc.wrapping_add(lane.wrapping_mul(P2))
        .rotate_left(31)
        .wrapping_mul(P1)
}

#[inline(always)]
fn avalanche(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^ (h >> 32)
}

#[cfg(test)]
mod tests {
    use super::xxh64;

    /// Values of the xxHash reference implementation (its `xxhsum -H64`
    /// and the sanity table of `tests/sanity_test_vectors.h`): the empty
    /// input, and inputs that reach every piece of the algorithm.
    #[test]
    fn reference_values() {
        assert_eq!(xxh64(b"", 0), 0xEF46_DB37_51D8_E999);
        assert_eq!(xxh64(b"a", 0), 0xD24E_C4F1_A98C_6E5B);
        assert_eq!(xxh64(b"abc", 0), 0x44BC_2CF5_AD77_0999);
        assert_eq!(
            xxh64(b"Nobody inspects the spammish repetition", 0),
            0xFBCE_A83C_8A37_8BF1
        );
    }
}
