//! The committed filter files under `migrations/fixtures/v1/` (format 1),
//! `migrations/fixtures/v2/` (format 2: the split-block layout) and
//! `migrations/fixtures/v4/` (format 4: the blocked layout hashed with
//! XXH3-64) and `migrations/fixtures/v6/` (format 6: the blocked layout
//! hashed with XXH3-64 sectorized).
//!
//! These files are never regenerated: they are what filterstore 0.1 (and,
//! for v2, 0.2) wrote, and every later build must read them with the same
//! answers. This test (1) reads
//! each fixture and checks its parameters, that every key written into it is
//! present, and the exact number of false positives among 100,000 fixed
//! absent keys, and (2) checks that today's encoder still writes the very same
//! bytes, so an accidental change of the format or of the hashing fails here.
//!
//! To create a fixture that is missing (a new one, never an existing one):
//! `FILTERSTORE_WRITE_FIXTURES=1 cargo test --release --test formats fixtures::`.
//! Existing files are never overwritten.

use filterstore::{decode_filter, encode_bit_filter, encode_counting_filter};
use filterstore::{BitFilter, BloomRead, CountingFilter, FilterParams, HashSpec, Layout};
use std::path::PathBuf;
use xxhash_rust::xxh3::xxh3_64;

/// The seed of every fixture of the layouts with a seed (the split-block
/// layout hashes with XXH64, seed 0).
const SEED: u64 = 0xF11E_5EED_0000_0001;
/// Absent keys probed for false positives.
const PROBES: u32 = 100_000;

struct Fixture {
    /// The format version that wrote it (its folder, and its frame's
    /// version and min reader version).
    version: u16,
    file: &'static str,
    layout: Layout,
    /// Standard: 2000 bits, not a multiple of 64, so the padding rule is
    /// exercised; blocked: 4 blocks. Both ≈ 10 bits per key for 200 keys.
    /// Split-block: 9 blocks of 256 bits (an odd count: half a line of
    /// padding), 11.5 bits per key.
    m: u64,
    k: u32,
    counting: bool,
    /// Pinned when the fixture was made: xxh3-64 of the file, its length, and
    /// the positives among the `PROBES` absent keys.
    digest: u64,
    len: usize,
    false_positives: u32,
}

const FIXTURES: [Fixture; 10] = [
    Fixture {
        version: 1,
        file: "bit_standard.fsf",
        layout: Layout::Standard,
        m: 2000,
        k: 7,
        counting: false,
        digest: 0x244c_1aa8_62e7_5a75,
        len: 332,
        false_positives: 831,
    },
    Fixture {
        version: 1,
        file: "bit_blocked.fsf",
        layout: Layout::Blocked,
        m: 2048,
        k: 6,
        counting: false,
        digest: 0x3d53_dfac_05dc_c16d,
        len: 332,
        false_positives: 835,
    },
    Fixture {
        version: 1,
        file: "counting_standard.fsf",
        layout: Layout::Standard,
        m: 2000,
        k: 7,
        counting: true,
        digest: 0x8bad_53d5_70f3_b707,
        len: 1100,
        false_positives: 863,
    },
    Fixture {
        version: 1,
        file: "counting_blocked.fsf",
        layout: Layout::Blocked,
        m: 2048,
        k: 6,
        counting: true,
        digest: 0x046a_5c26_88d3_b10a,
        len: 1100,
        false_positives: 862,
    },
    Fixture {
        version: 2,
        file: "bit_split_block.fsf",
        layout: Layout::SplitBlock,
        m: 2304,
        k: 8,
        counting: false,
        digest: 0x00b1_8677_c977_8e20,
        len: 396,
        false_positives: 610,
    },
    Fixture {
        version: 2,
        file: "counting_split_block.fsf",
        layout: Layout::SplitBlock,
        m: 2304,
        k: 8,
        counting: true,
        digest: 0xb013_1299_7c3c_7b1c,
        len: 1356,
        false_positives: 624,
    },
    Fixture {
        version: 4,
        file: "bit_blocked_xxh3_64.fsf",
        layout: Layout::Blocked,
        m: 2048,
        k: 6,
        counting: false,
        digest: 0xf4d6_1662_3fbe_0b3e,
        len: 332,
        false_positives: 940,
    },
    Fixture {
        version: 4,
        file: "counting_blocked_xxh3_64.fsf",
        layout: Layout::Blocked,
        m: 2048,
        k: 6,
        counting: true,
        digest: 0xddb4_8f26_f0ed_5f7c,
        len: 1100,
        false_positives: 950,
    },
    Fixture {
        version: 6,
        file: "bit_blocked_xxh3_64_sectorized.fsf",
        layout: Layout::Blocked,
        m: 2048,
        k: 8,
        counting: false,
        digest: 0xcab8_4413_e9e8_3911,
        len: 332,
        false_positives: 993,
    },
    Fixture {
        version: 6,
        file: "counting_blocked_xxh3_64_sectorized.fsf",
        layout: Layout::Blocked,
        m: 2048,
        k: 8,
        counting: true,
        digest: 0x622e_7319_01a9_9af6,
        len: 1100,
        false_positives: 1011,
    },
];

fn dir(f: &Fixture) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("migrations/fixtures/v{}", f.version))
}

/// The fixture's hash: XXH3-128 with [`SEED`], XXH64 seed 0 (the
/// split-block layout), XXH3-64 with [`SEED`] (the version-4 fixtures), or
/// XXH3-64 sectorized with [`SEED`] (the version-6 fixtures).
fn spec(f: &Fixture) -> HashSpec {
    match (f.layout, f.version) {
        (Layout::SplitBlock, _) => HashSpec::xxh64(),
        (_, 4) => HashSpec::xxh3_64(SEED),
        (_, 6) => HashSpec::xxh3_64_sectorized(SEED),
        _ => HashSpec::xxh3(SEED),
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:04}").into_bytes()
}

/// The key inserted 16 times into the counting fixtures: its counters stick at 15.
const HOT: &[u8] = b"hot-key";

/// The keys every fixture must hold.
fn live_keys(counting: bool) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = (0..200).map(key).collect();
    if counting {
        keys.push(HOT.to_vec());
    }
    keys
}

/// Builds a fixture's bytes exactly as they were made:
/// * bit filters: insert `key-0000` … `key-0199`; n = 200 (the version-6
///   one sets the keys' bits from [`FilterParams::positions`], the
///   format's definition of them, `docs/FORMAT.md` § 6, not through the
///   bit filter's insert path).
/// * counting filters: insert `key-0000` … `key-0299`, remove `key-0200` …
///   `key-0299`, insert `hot-key` 16 times; n = inserts − removes = 216.
fn build(f: &Fixture) -> Vec<u8> {
    let p = FilterParams::new(f.layout, f.m, f.k, spec(f)).unwrap();
    if f.counting {
        let mut c = CountingFilter::new(p).unwrap();
        for i in 0..300 {
            c.insert(&key(i));
        }
        for i in 200..300 {
            c.remove(&key(i)).unwrap();
        }
        for _ in 0..16 {
            c.insert(HOT);
        }
        assert!(c.saturated() > 0);
        encode_counting_filter(&c, 216)
    } else if f.version == 6 {
        encode_bit_filter(&bits_from_positions(p, &live_keys(false)), 200)
    } else {
        let b = BitFilter::new(p).unwrap();
        for k in live_keys(false) {
            b.insert(&k);
        }
        encode_bit_filter(&b, 200)
    }
}

/// A bit filter of `p` whose bits are exactly the positions of `keys`.
fn bits_from_positions(p: FilterParams, keys: &[Vec<u8>]) -> BitFilter {
    let mut words = vec![0u64; p.num_words()];
    for key in keys {
        for &q in p.positions(p.hash().hash(key)).as_slice() {
            words[(q / 64) as usize] |= 1 << (q % 64);
        }
    }
    BitFilter::from_words(p, &words).unwrap()
}

fn probe_positives(contains: impl Fn(&[u8]) -> bool) -> u32 {
    (0..PROBES)
        .filter(|i| contains(format!("absent-{i:06}").as_bytes()))
        .count() as u32
}

#[test]
fn fixtures_decode_with_the_same_answers() {
    if std::env::var_os("FILTERSTORE_WRITE_FIXTURES").is_some() {
        for f in &FIXTURES {
            let path = dir(f).join(f.file);
            if !path.exists() {
                std::fs::create_dir_all(dir(f)).unwrap();
                std::fs::write(&path, build(f)).unwrap();
            }
        }
    }
    for f in &FIXTURES {
        let path = dir(f).join(f.file);
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let d = decode_filter(&bytes).unwrap_or_else(|e| panic!("{}: {e}", f.file));
        let p = d.params();
        assert_eq!(
            (d.version, d.min_reader),
            (f.version, f.version),
            "{}",
            f.file
        );
        assert_eq!(
            (p.layout(), p.m(), p.k(), p.hash()),
            (f.layout, f.m, f.k, spec(f)),
            "{}",
            f.file
        );
        assert_eq!(d.n(), if f.counting { 216 } else { 200 });
        assert_eq!(d.counters().is_some(), f.counting);
        for k in live_keys(f.counting) {
            assert!(d.contains(&k), "{}: {:?} missing", f.file, k);
        }
        if let Some(c) = d.counters() {
            assert_eq!(c.min_count(HOT), 15, "{}: hot key not saturated", f.file);
            assert!(c.saturated() >= f.k as u64 / 2);
        }
        let fp = probe_positives(|k| d.contains(k));
        // Independent of the pinned count: the positives among PROBES absent
        // keys are Binomial(PROBES, q), q the filter's FP rate, estimated from
        // its fill (per block for the blocked layout). 5σ plus 10% of q for
        // the fill model's own error on a 2000-bit filter.
        let q = match &d.body {
            filterstore::FilterBody::Bits(v) => v.estimated_fp(),
            filterstore::FilterBody::Counters(c) => c.estimated_fp(),
        };
        let mean = q * PROBES as f64;
        let tol = 5.0 * mean.sqrt() + 0.1 * mean;
        assert!(
            (fp as f64 - mean).abs() <= tol,
            "{}: {fp} false positives, fill predicts {mean:.0} ± {tol:.0}",
            f.file
        );
        println!(
            "{}: len {} digest {:#018x} false positives {fp} (fill predicts {mean:.0})",
            f.file,
            bytes.len(),
            xxh3_64(&bytes)
        );
    }
    for f in &FIXTURES {
        let bytes = std::fs::read(dir(f).join(f.file)).unwrap();
        let d = decode_filter(&bytes).unwrap();
        let fp = probe_positives(|k| d.contains(k));
        assert_eq!(fp, f.false_positives, "{}: false positives", f.file);
        assert_eq!(bytes.len(), f.len, "{}: length", f.file);
        assert_eq!(xxh3_64(&bytes), f.digest, "{}: digest", f.file);
    }
}

/// The encoder of this build writes every fixture byte for byte: version 1
/// frames for the layouts of version 1 (format version 2 changed only
/// messages that carry build statistics and what names the split-block
/// layout, FORMAT.md § 15: a filter whose bytes version 1 describes is still
/// framed as version 1, min reader 1), version 2 for the split-block
/// layout, version 4 for the XXH3-64 hash, version 6 for the XXH3-64
/// sectorized hash. When a later format version
/// changes the encoder, this test is replaced by one that checks the
/// migration of these files; the files themselves stay.
#[test]
fn encoder_still_writes_the_fixture_bytes() {
    // Version 3 changed only the store's page-file superblock; version 4
    // added a hash id and the store's catalog records for sealed filters and
    // the log reference; version 5 only the superblock again; version 6
    // added a hash id (§ 15): the bytes of files of the older layouts and
    // hashes are still version 1's and 2's.
    assert_eq!(filterstore::FORMAT_VERSION, 6);
    for f in &FIXTURES {
        let committed = std::fs::read(dir(f).join(f.file)).unwrap();
        assert!(build(f) == committed, "{}: encoder output changed", f.file);
    }
}
