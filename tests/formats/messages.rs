//! The committed exchange messages under `migrations/fixtures/v1/` (format
//! version 1: no build statistics) and `migrations/fixtures/v2/` (format
//! version 2: with build statistics, FORMAT.md § 12).
//!
//! Like the filter files of `fixtures.rs`, these files are never
//! regenerated: every later build must decode them with the same answers.
//! This test (1) decodes each one and checks its header, its statistics, that
//! every key sent is present (a delta is applied to the base it names, rebuilt
//! here), and the exact number of false positives among 100,000 fixed absent
//! keys, and (2) checks that today's encoder still writes the very same bytes.
//!
//! The version-1 messages were added in release 0.2, written by its encoder:
//! a message without statistics is byte for byte what 0.1 wrote
//! (`tests/exchange/messages.rs::golden_message_bytes` pins that layout).
//!
//! To create a fixture that is missing (a new one, never an existing one):
//! `FILTERSTORE_WRITE_FIXTURES=1 cargo test --release --test formats messages::`.

use filterstore::{decode_frame, decode_message, encode_delta_message, encode_message};
use filterstore::{encode_delta_message_with_stats, encode_message_with_stats, BuildStats};
use filterstore::{BitFilter, BloomRead, CodecChoice, FilterParams, HashSpec, Layout};
use std::path::PathBuf;
use xxhash_rust::xxh3::xxh3_64;

/// The seed of every fixture (that of the v1 filter files).
const SEED: u64 = 0xF11E_5EED_0000_0001;
/// Absent keys probed for false positives.
const PROBES: u32 = 100_000;

struct Fixture {
    /// Under `migrations/fixtures/`.
    path: &'static str,
    /// The frame's format version, and min reader version.
    format: u16,
    layout: Layout,
    m: u64,
    k: u32,
    /// A delta from `key-0000` … `key-0149` (version `version − 1`) to
    /// `key-0000` … `key-0199` (version `version`); else a full message of
    /// `key-0000` … `key-0199`.
    delta: bool,
    choice: CodecChoice,
    stats: Option<BuildStats>,
    version: u64,
    /// Pinned when the fixture was made: xxh3-64 of the file, its length,
    /// and the positives of the (applied) filter among the `PROBES` keys (the
    /// filters of `v1/bit_standard.fsf` and `v1/bit_blocked.fsf` have the same
    /// keys, seed and shape as two of them, and the same 831 and 835).
    digest: u64,
    len: usize,
    false_positives: u32,
}

/// Five rows per distinct key.
const STATS_5: BuildStats = BuildStats {
    rows: 1_000,
    distinct_keys: 200,
};
/// Three rows per distinct key.
const STATS_3: BuildStats = BuildStats {
    rows: 600,
    distinct_keys: 200,
};

const FIXTURES: [Fixture; 5] = [
    Fixture {
        path: "v1/message_full_rans.fsm",
        format: 1,
        layout: Layout::Standard,
        m: 8_000,
        k: 2,
        delta: false,
        choice: CodecChoice::Auto,
        stats: None,
        version: 1,
        digest: 0x475a_94c8_1edc_46b8,
        len: 396,
        false_positives: 231,
    },
    Fixture {
        path: "v1/message_delta_plain.fsm",
        format: 1,
        layout: Layout::Standard,
        m: 2_000,
        k: 7,
        delta: true,
        choice: CodecChoice::Plain,
        stats: None,
        version: 2,
        digest: 0x086c_3635_31b1_099a,
        len: 364,
        false_positives: 831,
    },
    Fixture {
        path: "v2/message_full_stats_rans.fsm",
        format: 2,
        layout: Layout::Standard,
        m: 8_000,
        k: 2,
        delta: false,
        choice: CodecChoice::Auto,
        stats: Some(STATS_5),
        version: 1,
        digest: 0xa105_df67_ba58_3214,
        len: 412,
        false_positives: 231,
    },
    Fixture {
        path: "v2/message_full_stats_plain.fsm",
        format: 2,
        layout: Layout::Blocked,
        m: 2_048,
        k: 6,
        delta: false,
        choice: CodecChoice::Plain,
        stats: Some(STATS_3),
        version: 3,
        digest: 0x3cd8_77ae_1378_1f9c,
        len: 380,
        false_positives: 835,
    },
    Fixture {
        path: "v2/message_delta_stats_rans.fsm",
        format: 2,
        layout: Layout::Standard,
        m: 8_000,
        k: 2,
        delta: true,
        choice: CodecChoice::Auto,
        stats: Some(STATS_5),
        version: 2,
        digest: 0x9afa_0258_6ef0_6b85,
        len: 223,
        false_positives: 231,
    },
];

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("migrations/fixtures")
}

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:04}").into_bytes()
}

fn filter_of(f: &Fixture, keys: std::ops::Range<u32>) -> BitFilter {
    let p = FilterParams::new(f.layout, f.m, f.k, HashSpec::xxh3(SEED)).unwrap();
    let b = BitFilter::new(p).unwrap();
    for i in keys {
        b.insert(&key(i));
    }
    b
}

/// The base a delta fixture applies to.
fn base_of(f: &Fixture) -> BitFilter {
    filter_of(f, 0..150)
}

/// Builds a fixture's bytes exactly as they were made.
fn build(f: &Fixture) -> Vec<u8> {
    let new = filter_of(f, 0..200);
    let (v, c) = (f.version, f.choice);
    match (f.delta, f.stats) {
        (false, None) => encode_message(&new, 200, v, c),
        (false, Some(s)) => encode_message_with_stats(&new, s, v, c),
        (true, None) => encode_delta_message(&new, &base_of(f), 200, v, v - 1, c),
        (true, Some(s)) => encode_delta_message_with_stats(&new, &base_of(f), s, v, v - 1, c),
    }
    .unwrap()
}

fn probe_positives(contains: impl Fn(&[u8]) -> bool) -> u32 {
    (0..PROBES)
        .filter(|i| contains(format!("absent-{i:06}").as_bytes()))
        .count() as u32
}

#[test]
fn message_fixtures_decode_with_the_same_answers() {
    if std::env::var_os("FILTERSTORE_WRITE_FIXTURES").is_some() {
        for f in &FIXTURES {
            let path = dir().join(f.path);
            if !path.exists() {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, build(f)).unwrap();
            }
        }
    }
    for f in &FIXTURES {
        let path = dir().join(f.path);
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let frame = decode_frame(&bytes).unwrap();
        assert_eq!(
            (frame.version, frame.min_reader),
            (f.format, f.format),
            "{}",
            f.path
        );
        assert_eq!(frame.flags, u8::from(f.stats.is_some()), "{}", f.path);
        let m = decode_message(&bytes).unwrap_or_else(|e| panic!("{}: {e}", f.path));
        let p = m.params();
        assert_eq!(
            (p.layout(), p.m(), p.k(), p.hash()),
            (f.layout, f.m, f.k, HashSpec::xxh3(SEED)),
            "{}",
            f.path
        );
        assert_eq!(
            (m.is_delta(), m.version),
            (f.delta, f.version),
            "{}",
            f.path
        );
        assert_eq!(m.build_stats(), f.stats, "{}", f.path);
        assert_eq!(m.descriptor.n, 200, "{}", f.path);
        let coded = f.choice == CodecChoice::Auto;
        let codec = if coded { "rans" } else { "raw" };
        assert_eq!(m.descriptor.codec.name(), codec, "{}", f.path);
        let received = if f.delta {
            assert_eq!(m.base_version, f.version - 1);
            m.apply_to(&base_of(f), f.version - 1).unwrap()
        } else {
            m.filter().unwrap().into_owned().unwrap()
        };
        for i in 0..200 {
            assert!(received.contains(&key(i)), "{}: key {i} missing", f.path);
        }
        let fp = probe_positives(|k| received.contains(k));
        // Independent of the pinned count: Binomial(PROBES, q) with q the
        // filter's rate from its fill; 5σ plus 10% of q for the fill
        // model's own error on a small filter.
        let mean = received.estimated_fp() * PROBES as f64;
        let tol = 5.0 * mean.sqrt() + 0.1 * mean;
        assert!(
            (fp as f64 - mean).abs() <= tol,
            "{}: {fp} false positives, fill predicts {mean:.0} ± {tol:.0}",
            f.path
        );
        println!(
            "{}: len {} digest {:#018x} false positives {fp} (fill predicts {mean:.0})",
            f.path,
            bytes.len(),
            xxh3_64(&bytes)
        );
        assert_eq!(fp, f.false_positives, "{}: false positives", f.path);
        assert_eq!(bytes.len(), f.len, "{}: length", f.path);
        assert_eq!(xxh3_64(&bytes), f.digest, "{}: digest", f.path);
        if let Some(s) = f.stats {
            // The receiving site's estimate from the bytes alone: every one
            // of 200 probe rows with keys 0..200 matches, `rows / distinct`
            // build rows each (no false positive among them to correct).
            let est = m.estimate_join_size(200, 200);
            if f.delta {
                assert!(est.is_err());
            } else {
                let est = est.unwrap();
                let want = s.rows as f64;
                assert!((est.rows - want).abs() < 1e-6 * want, "{}: {est:?}", f.path);
            }
        }
    }
}

/// The encoder of this build writes every message fixture byte for byte.
#[test]
fn encoder_still_writes_the_fixture_bytes() {
    for f in &FIXTURES {
        let committed = std::fs::read(dir().join(f.path)).unwrap();
        assert!(build(f) == committed, "{}: encoder output changed", f.path);
    }
}
