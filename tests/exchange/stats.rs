//! Exchange messages with build statistics (format version 2, FORMAT.md
//! § 12): round trips, the estimate from the message alone, budgets, the
//! flags each version defines, forged statistics, the order of the checks,
//! and the golden bytes.

use crate::format_common;

use filterstore::{decode_frame, decode_message, encode_frame, encode_message, FrameKind as Kind};
use filterstore::{BloomRead, CodecChoice, CodecError, ExchangeError, HashSpec, Layout};
use filterstore::{MessageTarget, MESSAGE_OVERHEAD};
use format_common::{filter, keys};

use filterstore::{
    build_message_with_stats, encode_delta_message_with_stats, encode_message_with_stats,
    estimate_join_size, BuildStats, BUILD_STATS_LEN,
};

/// Re-frames a message with the given versions and flags, its body edited,
/// the CRC right: what a buggy or hostile writer could send.
fn reframe_as(msg: &[u8], version: u16, flags: u8, edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let f = decode_frame(msg).unwrap();
    let mut body = f.body.to_vec();
    edit(&mut body);
    let mut out = encode_frame(f.kind, flags, &body);
    out[4..6].copy_from_slice(&version.to_le_bytes());
    out[6..8].copy_from_slice(&version.to_le_bytes());
    let end = out.len() - 4;
    let crc = format_common::crc32(&out[..end]);
    out[end..].copy_from_slice(&crc.to_le_bytes());
    out
}

const STATS: BuildStats = BuildStats {
    rows: 4_321,
    distinct_keys: 1_000,
};

#[test]
fn stats_round_trip_in_full_and_delta_messages() {
    let ks = keys(0..1000);
    for layout in [Layout::Standard, Layout::Blocked] {
        for (m, k) in [(10_240, 7), (40_960, 2)] {
            let f = filter(layout, m, k, &ks);
            for choice in [CodecChoice::Auto, CodecChoice::Plain] {
                let with = encode_message_with_stats(&f, STATS, 5, choice).unwrap();
                let without = encode_message(&f, 1000, 5, choice).unwrap();
                // The statistics cost their 16 bytes and change nothing else.
                assert_eq!(with.len(), without.len() + BUILD_STATS_LEN);
                let d = decode_message(&with).unwrap();
                assert_eq!(d.build_stats(), Some(STATS));
                assert_eq!((d.version, d.descriptor.n), (5, STATS.distinct_keys));
                assert_eq!(
                    d.payload_len(),
                    decode_message(&without).unwrap().payload_len()
                );
                let got = d.filter().unwrap();
                assert!((0..f.params().num_words()).all(|i| got.word(i) == f.word(i)));
                // Version 2 / min reader 2, flag 0x01; without: 1 / 1, no flag.
                let (fw, fo) = (
                    decode_frame(&with).unwrap(),
                    decode_frame(&without).unwrap(),
                );
                assert_eq!((fw.version, fw.min_reader, fw.flags), (2, 2, 1));
                assert_eq!((fo.version, fo.min_reader, fo.flags), (1, 1, 0));
                assert_eq!(decode_message(&without).unwrap().build_stats(), None);
            }
        }
    }
    let base = filter(Layout::Standard, 200_000, 3, &keys(0..10_000));
    let new = filter(Layout::Standard, 200_000, 3, &keys(0..10_100));
    let stats = BuildStats {
        rows: 30_000,
        distinct_keys: 10_100,
    };
    let delta =
        encode_delta_message_with_stats(&new, &base, stats, 2, 1, CodecChoice::Auto).unwrap();
    let d = decode_message(&delta).unwrap();
    assert_eq!(
        (d.build_stats(), d.version, d.base_version),
        (Some(stats), 2, 1)
    );
    assert_eq!(d.apply_to(&base, 1).unwrap().to_words(), new.to_words());
    // A delta's estimate needs the applied filter.
    assert!(matches!(
        d.estimate_join_size(1, 1),
        Err(ExchangeError::WrongMessageKind { expected: "full" })
    ));
}

/// The estimate from the message alone is the one from the decoded filter
/// and the statistics, for both layouts (the standard one reads its rate
/// from the header, the blocked one decodes), and it is accurate.
#[test]
fn estimate_from_the_message_alone() {
    // Build side: keys 0..5,000, key i on 1 + i % 4 rows (mean 2.5).
    let build: Vec<[u8; 4]> = keys(0..5_000);
    let stats = BuildStats {
        rows: (0..5_000u64).map(|i| 1 + i % 4).sum(),
        distinct_keys: 5_000,
    };
    // Probe side: 60,000 rows, keys 0..20,000 three times each; the rows of
    // keys below 5,000 join, each with its build rows.
    let probe_rows: Vec<[u8; 4]> = (0..60_000u32).map(|i| (i % 20_000).to_le_bytes()).collect();
    let exact: u64 = 3 * (0..5_000u64).map(|i| 1 + i % 4).sum::<u64>();
    for layout in [Layout::Standard, Layout::Blocked] {
        let f = filter(layout, 48_128, 5, &build);
        for choice in [CodecChoice::Auto, CodecChoice::Plain] {
            let bytes = encode_message_with_stats(&f, stats, 1, choice).unwrap();
            // Only the bytes cross: decode, probe, estimate.
            let m = decode_message(&bytes).unwrap();
            let received = m.filter().unwrap();
            let passed = probe_rows.iter().filter(|k| received.contains(*k)).count() as u64;
            let est = m
                .estimate_join_size(probe_rows.len() as u64, passed)
                .unwrap();
            let direct = estimate_join_size(&f, stats, probe_rows.len() as u64, passed);
            assert!((est.rows - direct.rows).abs() < 1e-6, "{est:?} {direct:?}");
            assert!((est.fp - direct.fp).abs() < 1e-15);
            // The false-positive term is the whole error here only up to
            // the multiplicity's spread; 5 standard errors of it, plus the
            // √T·σ term (T = 15,000 matching rows, σ² = 1.25, times 1).
            let sd = (est.std_error.powi(2) + 15_000.0 * 1.25).sqrt();
            assert!(
                (est.rows - exact as f64).abs() < 5.0 * sd,
                "{layout}: {est:?}, exact {exact}"
            );
        }
    }
    // A message without statistics cannot be estimated from.
    let f = filter(Layout::Standard, 4096, 2, &keys(0..100));
    let plain = encode_message(&f, 100, 1, CodecChoice::Auto).unwrap();
    assert!(matches!(
        decode_message(&plain).unwrap().estimate_join_size(10, 1),
        Err(ExchangeError::NoBuildStats)
    ));
}

#[test]
fn budgets_count_the_statistics() {
    let ks = keys(0..20_000);
    let stats = BuildStats {
        rows: 50_000,
        distinct_keys: 20_000,
    };
    for budget in [2_700u64, 5_000, 10_000] {
        let target = MessageTarget::Budget(budget);
        let (msg, f) = build_message_with_stats(&ks, stats, target, HashSpec::xxh3(9), 1).unwrap();
        assert!(msg.len() as u64 <= budget, "{} > {budget}", msg.len());
        let d = decode_message(&msg).unwrap();
        assert_eq!(d.build_stats(), Some(stats));
        assert!(ks.iter().all(|k| f.contains(k)));
    }
    // 108 + 16 + 1 bytes at least.
    let tiny = MessageTarget::Budget(124);
    assert!(matches!(
        build_message_with_stats(&ks, stats, tiny, HashSpec::xxh3(9), 1),
        Err(ExchangeError::BudgetTooSmall { budget: 124 })
    ));
}

#[test]
fn statistics_no_build_side_has_are_refused() {
    let f = filter(Layout::Standard, 4096, 2, &keys(0..100));
    for (rows, distinct_keys) in [(10, 11), (5, 0)] {
        let bad = BuildStats {
            rows,
            distinct_keys,
        };
        assert!(matches!(
            encode_message_with_stats(&f, bad, 1, CodecChoice::Auto),
            Err(ExchangeError::Codec(CodecError::Encode {
                what: "build statistics",
                ..
            }))
        ));
    }
    // An empty build side is a build side.
    let empty = BuildStats {
        rows: 0,
        distinct_keys: 0,
    };
    let none = filter(Layout::Standard, 4096, 2, &[]);
    let msg = encode_message_with_stats(&none, empty, 1, CodecChoice::Auto).unwrap();
    let d = decode_message(&msg).unwrap();
    assert_eq!(d.estimate_join_size(100, 0).unwrap().rows, 0.0);
    // The same defects written by someone else, with a valid CRC: refused.
    let good = encode_message_with_stats(&f, STATS, 1, CodecChoice::Plain).unwrap();
    for (rows, distinct) in [(10u64, 11u64), (5, 0), (0, 1)] {
        let forged = reframe_as(&good, 2, 1, |b| {
            b[80..88].copy_from_slice(&rows.to_le_bytes());
            b[88..96].copy_from_slice(&distinct.to_le_bytes());
        });
        match decode_message(&forged) {
            Err(ExchangeError::Codec(CodecError::InvalidField {
                field: "build statistics",
                ..
            })) => {}
            other => panic!("rows {rows}, distinct {distinct}: {other:?}"),
        }
    }
    // The same bytes re-signed are accepted: the forging helper is sound.
    assert!(decode_message(&reframe_as(&good, 2, 1, |_| {})).is_ok());
}

/// Flags are what the frame's version defines: none in version 1, 0x01
/// (build statistics) from version 2.
#[test]
fn flags_follow_the_version() {
    let f = filter(Layout::Standard, 4096, 2, &keys(0..100));
    let v2 = encode_message_with_stats(&f, STATS, 1, CodecChoice::Plain).unwrap();
    let v1 = encode_message(&f, 100, 1, CodecChoice::Plain).unwrap();
    let flags_error = |bytes: &[u8]| {
        matches!(
            decode_message(bytes),
            Err(ExchangeError::Codec(CodecError::InvalidField {
                field: "flags",
                ..
            }))
        )
    };
    // A version-2 message relabelled as version 1: its flag is not defined there.
    assert!(flags_error(&reframe_as(&v2, 1, 1, |_| {})));
    // Every other flag, in either version.
    for flags in 2..=255u8 {
        assert!(
            flags_error(&reframe_as(&v2, 2, flags, |_| {})),
            "{flags:#04x}"
        );
        assert!(
            flags_error(&reframe_as(&v1, 1, flags, |_| {})),
            "{flags:#04x}"
        );
    }
    // Version 2 without the flag: a version-1 body under a version-2 frame
    // (what a later layout of version 2 writes) reads as before.
    let relabelled = reframe_as(&v1, 2, 0, |_| {});
    let d = decode_message(&relabelled).unwrap();
    assert_eq!((d.build_stats(), d.ones), (None, f.count_ones()));
    // The flag without the statistics, or the statistics without the flag:
    // the lengths no longer add up.
    assert!(decode_message(&reframe_as(&v1, 2, 1, |_| {})).is_err());
    assert!(decode_message(&reframe_as(&v2, 2, 0, |_| {})).is_err());
}

/// FORMAT.md § 12 reads the statistics after the message fields and before
/// the payload: a message wrong in both reports the fields.
#[test]
fn statistics_are_checked_after_the_fields_and_before_the_payload() {
    let f = filter(Layout::Standard, 4096, 2, &keys(0..100));
    let msg = encode_message_with_stats(&f, STATS, 1, CodecChoice::Plain).unwrap();
    let bad_stats = |b: &mut Vec<u8>| b[88..96].copy_from_slice(&u64::MAX.to_le_bytes());
    let both = reframe_as(&msg, 2, 1, |b| {
        b[64..72].copy_from_slice(&u64::MAX.to_le_bytes());
        bad_stats(b);
    });
    assert!(matches!(
        decode_message(&both),
        Err(ExchangeError::Codec(CodecError::InvalidField {
            field: "ones",
            ..
        }))
    ));
    let stats_and_short = reframe_as(&msg, 2, 1, |b| {
        bad_stats(b);
        b.truncate(b.len() - 8);
    });
    assert!(matches!(
        decode_message(&stats_and_short),
        Err(ExchangeError::Codec(CodecError::InvalidField {
            field: "build statistics",
            ..
        }))
    ));
}

#[test]
fn golden_message_bytes_with_statistics() {
    // The filter of golden_message_bytes, sent plain with statistics:
    // pins the version-2 layout of docs/FORMAT.md § 12.
    let f = filter(Layout::Standard, 64, 1, &[]);
    f.insert(b"k");
    let stats = BuildStats {
        rows: 3,
        distinct_keys: 1,
    };
    let msg = encode_message_with_stats(&f, stats, 7, CodecChoice::Plain).unwrap();
    assert_eq!(msg.len(), MESSAGE_OVERHEAD + BUILD_STATS_LEN + 64);
    let bit = ((u128::from(HashSpec::xxh3(77).hash(b"k").h1) * 64) >> 64) as u32;
    let mut want = Vec::new();
    want.extend_from_slice(b"FSTR");
    want.extend_from_slice(&[2, 0, 2, 0]); // format version 2, min reader 2
    want.extend_from_slice(&[Kind::ExchangeFull.id(), 0x01, 0, 0]); // kind 7, flag: statistics
    want.extend_from_slice(&(48u64 + 32 + 16 + 64).to_le_bytes()); // body length
    want.extend_from_slice(&[0; 4]);
    want.extend_from_slice(&[1, 1, 0, 0]); // standard, xxh3-128, bit filter, raw
    want.extend_from_slice(&1u32.to_le_bytes()); // k
    want.extend_from_slice(&77u64.to_le_bytes()); // seed
    want.extend_from_slice(&64u64.to_le_bytes()); // m
    want.extend_from_slice(&1u64.to_le_bytes()); // n = distinct keys
    want.extend_from_slice(&64u64.to_le_bytes()); // payload length
    want.extend_from_slice(&[0; 8]); // reserved
    want.extend_from_slice(&7u64.to_le_bytes()); // version
    want.extend_from_slice(&0u64.to_le_bytes()); // base version
    want.extend_from_slice(&1u64.to_le_bytes()); // ones
    want.extend_from_slice(&[0; 8]); // reserved
    want.extend_from_slice(&3u64.to_le_bytes()); // build rows
    want.extend_from_slice(&1u64.to_le_bytes()); // build distinct keys
    want.extend_from_slice(&(1u64 << bit).to_le_bytes()); // the one word in use
    want.extend_from_slice(&[0; 56]); // the rest of the block
    let crc = format_common::crc32(&want);
    want.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(msg, want);
    // The same filter without statistics is version 1, byte for byte the
    // message of golden_message_bytes: 16 bytes shorter, flags 0.
    let v1 = encode_message(&f, 1, 7, CodecChoice::Plain).unwrap();
    assert_eq!(&v1[4..10], &[1, 0, 1, 0, 7, 0]);
    assert_eq!(v1.len() + BUILD_STATS_LEN, msg.len());
}
