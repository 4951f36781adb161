//! Golden test: pins the hash and the positions it produces for fixed keys and
//! seeds, so that no change to the code, a dependency or the platform can
//! silently change which bits a key maps to (every persisted or shipped filter
//! depends on it). The first row is XXH3-128 of the empty input with seed 0,
//! whose published reference value is 0x99aa06d3014798d8_6001c324468d497f.

use filterstore::{positions, HashSpec};
use filterstore::{FilterParams, Layout};

struct Golden {
    seed: u64,
    key: &'static [u8],
    h1: u64,
    h2: u64,
    /// Distinct positions, sorted: standard layout, m = 1,000,003, k = 7.
    standard: &'static [u64],
    /// Distinct positions, sorted: blocked layout, 1,000 blocks, k = 7.
    blocked: &'static [u64],
}

const GOLDEN: &[Golden] = &[
    Golden {
        seed: 0x0,
        key: &[],
        h1: 0x6001c324468d497f,
        h2: 0x99aa06d3014798d8,
        standard: &[175779, 375028, 376281, 575529, 776031, 975280, 976533],
        blocked: &[192127, 192180, 192182, 192207, 192288, 192377, 192482],
    },
    Golden {
        seed: 0x0,
        key: &[97],
        h1: 0xe6c632b61e964e1f,
        h2: 0xa96faf705af16834,
        standard: &[210764, 225183, 548905, 563323, 872626, 887045, 901464],
        blocked: &[461334, 461386, 461513, 461699, 461782, 461804, 461819],
    },
    Golden {
        seed: 0x0,
        key: &[102, 105, 108, 116, 101, 114, 115, 116, 111, 114, 101],
        h1: 0xbb2bc0e3e9fd94b2,
        h2: 0xaa60de7fff850517,
        standard: &[58839, 62217, 393299, 396678, 724382, 727760, 731138],
        blocked: &[374352, 374376, 374528, 374631, 374658, 374756, 374763],
    },
    Golden {
        seed: 0x0,
        key: &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        h1: 0x05ea23ef06e28b2d,
        h2: 0xe5189a9599e3f862,
        standard: &[23104, 392545, 497638, 602732, 707826, 812919, 918013],
        blocked: &[11798, 12117, 12134, 12159, 12183, 12256],
    },
    Golden {
        seed: 0x0,
        key: &[
            1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0,
            0, 0, 0,
        ],
        h1: 0x33491ce3a4ecfabd,
        h2: 0x93e085440feb4ed7,
        standard: &[88557, 200334, 355624, 510914, 666204, 777981, 933271],
        blocked: &[102453, 102600, 102637, 102684, 102728, 102827, 102861],
    },
    Golden {
        seed: 0x123456789abcdef0,
        key: &[],
        h1: 0xb950a1d9e9a4a947,
        h2: 0xe7da00845366b2f3,
        standard: &[157908, 252238, 346568, 440898, 535228, 629558, 723888],
        blocked: &[370215, 370277, 370296, 370335, 370463, 370472, 370673],
    },
    Golden {
        seed: 0x123456789abcdef0,
        key: &[97],
        h1: 0xb3d499069b2d173a,
        h2: 0x5b0a5ab670b7306e,
        standard: &[58089, 124970, 413717, 480597, 702464, 769345, 836225],
        blocked: &[359498, 359585, 359607, 359646, 359836, 359841, 359922],
    },
    Golden {
        seed: 0x123456789abcdef0,
        key: &[102, 105, 108, 116, 101, 114, 115, 116, 111, 114, 101],
        h1: 0x5bca331269334ae4,
        h2: 0x98ec441894431c53,
        standard: &[150619, 345330, 358555, 553265, 747976, 942687, 955912],
        blocked: &[183606, 183622, 183637, 183650, 183703, 183759, 183769],
    },
    Golden {
        seed: 0x123456789abcdef0,
        key: &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        h1: 0xae9a66d6e7349024,
        h2: 0xd5672f6fc61fb73b,
        standard: &[16466, 182861, 349255, 515650, 682045, 683679, 850074],
        blocked: &[349271, 349273, 349375, 349387, 349546, 349616, 349674],
    },
    Golden {
        seed: 0x123456789abcdef0,
        key: &[
            1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0,
            0, 0, 0,
        ],
        h1: 0x8d0fa5f052479512,
        h2: 0xca2a6901f5a816b0,
        standard: &[130439, 289278, 340730, 499569, 551021, 709860, 920151],
        blocked: &[282132, 282236, 282392, 282515, 282537, 282543, 282581],
    },
];

#[test]
fn hash_and_positions_never_change() {
    for g in GOLDEN {
        let h = HashSpec::xxh3(g.seed).hash(g.key);
        assert_eq!(
            (h.h1, h.h2),
            (g.h1, g.h2),
            "hash of {:?} seed {:#x}",
            g.key,
            g.seed
        );
        let st = positions(Layout::Standard, 1_000_003, 7, h);
        assert_eq!(
            st.as_slice(),
            g.standard,
            "standard positions of {:?}",
            g.key
        );
        let bl = positions(Layout::Blocked, 512 * 1000, 7, h);
        assert_eq!(bl.as_slice(), g.blocked, "blocked positions of {:?}", g.key);
    }
}

/// XXH64 seed 0 of the golden keys (the first two are the xxHash
/// reference's published values for "" and "a") and their split-block
/// positions in a filter of 1,000 blocks; the hash is also checked against
/// the reference implementation below, the positions against
/// `split_block.rs`'s model of the Parquet specification.
const GOLDEN_XXH64: &[(&[u8], u64, [u64; 8])] = &[
    (
        &[],
        0xef46db3751d8e999,
        [
            239133, 239136, 239193, 239228, 239246, 239286, 239325, 239358,
        ],
    ),
    (
        &[97],
        0xd24ec4f1a98c6e5b,
        [
            210194, 210225, 210241, 210284, 210321, 210360, 210395, 210431,
        ],
    ),
    (
        b"filterstore",
        0xb5983c7bde21c6d6,
        [
            181534, 181539, 181581, 181602, 181638, 181682, 181697, 181748,
        ],
    ),
    (
        &[0; 16],
        0xaf09f71516247c32,
        [
            174864, 174881, 174929, 174966, 174978, 175027, 175061, 175100,
        ],
    ),
    (
        &[
            1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0,
            0, 0, 0,
        ],
        0x73f859a04f669e6d,
        [
            115988, 116007, 116056, 116094, 116099, 116128, 116176, 116198,
        ],
    ),
];

#[test]
fn xxh64_and_split_block_positions_never_change() {
    for (key, h, pos) in GOLDEN_XXH64 {
        let got = HashSpec::xxh64().hash(key);
        assert_eq!((got.h1, got.h2), (*h, 0), "xxh64 of {key:?}");
        let p = positions(Layout::SplitBlock, 256 * 1000, 8, got);
        assert_eq!(p.as_slice(), pos, "split-block positions of {key:?}");
    }
}

/// The crate's inlined XXH64 is the `xxhash-rust` crate's (the reference
/// port of the xxHash C code) for every length 0..=300 (every tail of
/// 8-, 4- and 1-byte pieces, one to nine 32-byte stripes) and several
/// seeds, random contents.
#[test]
fn xxh64_is_the_reference_xxh64() {
    use xxhash_rust::xxh64::xxh64;
    let data = random_bytes(0x243f_6a88_85a3_08d3);
    for seed in [0, 1, u64::MAX, 0x9e37_79b9_7f4a_7c15] {
        let spec = HashSpec {
            algo: filterstore::HashAlgo::Xxh64,
            seed,
        };
        for len in 0..=300 {
            let key = &data[300 - len..];
            assert_eq!(
                spec.hash(key).h1,
                xxh64(key, seed),
                "len {len} seed {seed:#x}"
            );
        }
    }
}

/// XXH3-64 (hash id 3) of the golden keys with a seed, and their blocked
/// positions in a filter of 1,000 blocks at k = 7 (`h1 = h`, `h2 = h << 32`).
/// The first row is XXH3-64 of the empty input with seed 0, whose published
/// reference value is 0x2d06800538d394c2; the hash is also checked against
/// the `xxhash-rust` crate below.
const GOLDEN_XXH3_64: &[(u64, &[u8], u64, [u64; 7])] = &[
    (
        0,
        &[],
        0x2d06800538d394c2,
        [89653, 89854, 89918, 89925, 89976, 89983, 89994],
    ),
    (
        0,
        &[97],
        0xe6c632b61e964e1f,
        [461441, 461530, 461556, 461677, 461725, 461788, 461819],
    ),
    (
        0,
        b"filterstore",
        0x7b90c7a186214973,
        [246882, 246944, 247026, 247032, 247247, 247252, 247295],
    ),
    (
        0,
        &[0; 16],
        0xd0a66a65c7528968,
        [417288, 417361, 417499, 417517, 417675, 417684, 417741],
    ),
    (
        0,
        &[
            1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0,
            0, 0, 0,
        ],
        0x53e911333a923397,
        [167477, 167519, 167725, 167737, 167738, 167836, 167851],
    ),
    (
        0x5eed,
        b"filterstore",
        0x31f8d40cb0e3867c,
        [99928, 99931, 99935, 99959, 100038, 100106, 100233],
    ),
    (
        u64::MAX,
        &[
            1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0,
            0, 0, 0,
        ],
        0xfca4b2245a231b16,
        [504834, 504980, 505135, 505150, 505283, 505336, 505339],
    ),
];

#[test]
fn xxh3_64_and_its_blocked_positions_never_change() {
    for (seed, key, h, pos) in GOLDEN_XXH3_64 {
        let got = HashSpec::xxh3_64(*seed).hash(key);
        assert_eq!((got.h1, got.h2), (*h, h << 32), "xxh3-64 of {key:?}");
        let p = positions(Layout::Blocked, 512 * 1000, 7, got);
        assert_eq!(p.as_slice(), pos, "blocked positions of {key:?}");
    }
}

/// The XXH3-64 hash id is the `xxhash-rust` crate's `xxh3_64_with_seed`
/// for every length 0..=300 and several seeds, random contents.
#[test]
fn xxh3_64_is_the_reference_xxh3_64() {
    use xxhash_rust::xxh3::xxh3_64_with_seed;
    let data = random_bytes(0x1319_8a2e_0370_7344);
    for seed in [0, 1, u64::MAX, 0x9e37_79b9_7f4a_7c15] {
        for len in 0..=300 {
            let key = &data[300 - len..];
            let h = HashSpec::xxh3_64(seed).hash(key);
            assert_eq!(
                h.h1,
                xxh3_64_with_seed(key, seed),
                "len {len} seed {seed:#x}"
            );
            assert_eq!(h.h2, h.h1 << 32);
        }
    }
}

/// 300 bytes from a xorshift generator started at `state`.
fn random_bytes(mut state: u64) -> Vec<u8> {
    (0..300)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// XXH3-64 sectorized (hash id 4) of the keys of [`GOLDEN_XXH3_64`]: the
/// same hashes, and their sectorized positions in a blocked filter of 1,000
/// blocks (k = 8, one bit per sector), sorted. Computed independently of
/// the crate from the hashes and `SALT` (`docs/FORMAT.md` § 6). By hand,
/// for "filterstore" seed 0: `h = 0x7b90c7a186214973`, block
/// `(h · 1000) >> 64 = 482` (base 246,784), `x = 0x86214973`; sector 0:
/// `x · 0xd666f075 mod 2^32 = 0xe7e4618f`, `r = 0xe7e4618f >> 26 = 57`,
/// so bit `57 & 31 = 25` of word `0 + 8·(57 >> 5) = 8`, position
/// `246,784 + 32·8 + 25 = 247,065`; sector 2: `x · 0x38cc6ff5 mod 2^32 =
/// 0x7c58280f`, `r = 31`, bit 31 of word 2, position `246,784 + 95 =
/// 246,879`.
const GOLDEN_XXH3_64_SECTORIZED: &[(u64, &[u8], [u64; 8])] = &[
    (
        0,
        &[],
        [89670, 89791, 89825, 89873, 89903, 89959, 89999, 90056],
    ),
    (
        0,
        &[97],
        [
            461371, 461406, 461456, 461595, 461695, 461741, 461779, 461800,
        ],
    ),
    (
        0,
        b"filterstore",
        [
            246879, 246910, 246924, 246964, 247026, 247065, 247103, 247258,
        ],
    ),
    (
        0,
        &[0; 16],
        [
            417290, 417437, 417467, 417473, 417523, 417593, 417618, 417649,
        ],
    ),
    (
        0x5eed,
        b"filterstore",
        [99864, 99883, 99918, 99947, 100011, 100079, 100241, 100289],
    ),
    (
        u64::MAX,
        &[
            1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0,
            0, 0, 0,
        ],
        [
            504850, 504960, 505063, 505151, 505176, 505215, 505255, 505285,
        ],
    ),
];

#[test]
fn xxh3_64_sectorized_positions_never_change() {
    for (seed, key, pos) in GOLDEN_XXH3_64_SECTORIZED {
        let spec = HashSpec::xxh3_64_sectorized(*seed);
        let h = spec.hash(key);
        assert_eq!(h, HashSpec::xxh3_64(*seed).hash(key), "the hash of {key:?}");
        let p = FilterParams::new(Layout::Blocked, 512 * 1000, 8, spec).unwrap();
        let got = p.positions(h);
        assert_eq!(got.as_slice(), pos, "sectorized positions of {key:?}");
        // One bit per sector: sector i is 32-bit words i and i + 8.
        let mut sectors: Vec<u64> = pos.iter().map(|q| (q % 512 / 32) % 8).collect();
        sectors.sort_unstable();
        assert_eq!(sectors, (0..8).collect::<Vec<u64>>(), "{key:?}");
    }
}
