//! Exchange messages: round trips, the plain fallback, deltas, budgets, and
//! refusal of every corrupt or hostile message.

mod format_common;

use filterstore::{
    build_message, decode_message, decode_message_with_limit, encode_delta_message, encode_message,
    CodecChoice, CodecError, ExchangeError, MessageTarget, ReceivedFilter,
    DEFAULT_MAX_MESSAGE_BITS, MESSAGE_OVERHEAD,
};
use filterstore::{decode_frame, encode_frame, FrameKind as Kind};
use filterstore::{BitFilter, BloomRead, FilterParams, HashSpec, Layout};

fn keys(range: std::ops::Range<u32>) -> Vec<[u8; 4]> {
    range.map(|i| i.to_le_bytes()).collect()
}

fn filter(layout: Layout, m: u64, k: u32, ks: &[[u8; 4]]) -> BitFilter {
    let f = BitFilter::new(FilterParams::new(layout, m, k, HashSpec::xxh3(77)).unwrap()).unwrap();
    for key in ks {
        f.insert(key);
    }
    f
}

#[test]
fn full_messages_round_trip_plain_and_coded() {
    let ks = keys(0..1000);
    for layout in [Layout::Standard, Layout::Blocked] {
        // Dense (sized for lookups): stays plain. Sparse: entropy-coded.
        for (m, k, codec) in [(10_240, 7, "raw"), (40_960, 2, "rans")] {
            let f = filter(layout, m, k, &ks);
            let bytes = encode_message(&f, 1000, 5, CodecChoice::Auto).unwrap();
            let msg = decode_message(&bytes).unwrap();
            assert_eq!(msg.descriptor.codec.name(), codec, "{layout} m={m}");
            assert_eq!(
                (msg.version, msg.base_version, msg.descriptor.n),
                (5, 0, 1000)
            );
            let got = msg.filter().unwrap();
            match (&got, codec) {
                (ReceivedFilter::Borrowed(_), "raw") | (ReceivedFilter::Owned(_), "rans") => {}
                _ => panic!("plain messages are read in place, coded ones decoded"),
            }
            assert_eq!(got.params(), f.params());
            for i in 0..f.params().num_words() {
                assert_eq!(got.word(i), f.word(i));
            }
            if codec == "rans" {
                assert!(bytes.len() < f.params().bit_bytes() as usize);
            }
            let plain = encode_message(&f, 1000, 5, CodecChoice::Plain).unwrap();
            assert_eq!(
                plain.len(),
                MESSAGE_OVERHEAD + f.params().bit_bytes() as usize
            );
        }
    }
}

#[test]
fn empty_and_full_filters_can_always_be_sent() {
    let f = filter(Layout::Standard, 1000, 3, &[]);
    let msg = encode_message(&f, 0, 1, CodecChoice::Auto).unwrap();
    let d = decode_message(&msg).unwrap();
    assert!(!d.filter().unwrap().contains(b"x"));
    let full = filter(Layout::Standard, 64, 8, &keys(0..500));
    assert_eq!(full.count_ones(), 64);
    let msg = encode_message(&full, 500, 1, CodecChoice::Auto).unwrap();
    assert!(decode_message(&msg)
        .unwrap()
        .filter()
        .unwrap()
        .contains(b"anything"));
}

#[test]
fn deltas_carry_only_the_change_and_apply_only_to_their_base() {
    let base = filter(Layout::Standard, 200_000, 3, &keys(0..10_000));
    let new = filter(Layout::Standard, 200_000, 3, &keys(0..10_100));
    let full = encode_message(&new, 10_100, 2, CodecChoice::Auto).unwrap();
    let delta = encode_delta_message(&new, &base, 10_100, 2, 1, CodecChoice::Auto).unwrap();
    // 100 new keys change at most 300 bits: a few bytes each, against a
    // ~15 KB full message.
    assert!(delta.len() < 1_500, "delta {} bytes", delta.len());
    assert!(full.len() > 10 * delta.len());
    let d = decode_message(&delta).unwrap();
    assert!(d.is_delta());
    assert_eq!((d.version, d.base_version), (2, 1));
    let rebuilt = d.apply_to(&base, 1).unwrap();
    assert_eq!(rebuilt.to_words(), new.to_words());
    assert!(matches!(
        d.apply_to(&base, 7),
        Err(ExchangeError::BaseVersionMismatch {
            expected: 1,
            held: 7
        })
    ));
    assert!(matches!(
        decode_message(&full).unwrap().apply_to(&base, 1),
        Err(ExchangeError::WrongMessageKind { .. })
    ));
    assert!(matches!(
        d.filter(),
        Err(ExchangeError::WrongMessageKind { .. })
    ));
    let other_seed = BitFilter::new(base.params().with_hash(HashSpec::xxh3(1))).unwrap();
    assert!(matches!(
        d.apply_to(&other_seed, 1),
        Err(ExchangeError::Filter(_))
    ));
}

#[test]
fn partial_filters_merge_into_the_whole() {
    let p = FilterParams::new(Layout::Standard, 100_000, 2, HashSpec::xxh3(3)).unwrap();
    let whole = BitFilter::new(p).unwrap();
    let merged = BitFilter::new(p).unwrap();
    for part in 0..3u32 {
        let f = BitFilter::new(p).unwrap();
        for k in keys(part * 1000..part * 1000 + 1000) {
            f.insert(&k);
            whole.insert(&k);
        }
        let msg = encode_message(&f, 1000, 1, CodecChoice::Auto).unwrap();
        merged
            .union_with(&decode_message(&msg).unwrap().filter().unwrap())
            .unwrap();
    }
    assert_eq!(merged.to_words(), whole.to_words());
}

#[test]
fn budget_is_never_exceeded_and_fp_target_is_met_compactly() {
    let ks = keys(0..20_000);
    for budget in [2_700u64, 5_000, 10_000, 20_000, 40_000] {
        let (msg, f) =
            build_message(&ks, MessageTarget::Budget(budget), HashSpec::xxh3(9), 1).unwrap();
        assert!(msg.len() as u64 <= budget, "{} > {budget}", msg.len());
        assert!(ks.iter().all(|k| f.contains(k)));
        let received = decode_message(&msg).unwrap().filter().unwrap();
        assert!(ks.iter().all(|k| received.contains(k)));
    }
    assert!(matches!(
        build_message(&ks, MessageTarget::Budget(50), HashSpec::xxh3(9), 1),
        Err(ExchangeError::BudgetTooSmall { .. })
    ));
    // Under one bit per key the optimiser refuses: such a filter says "maybe" to everything.
    assert!(matches!(
        build_message(&ks, MessageTarget::Budget(500), HashSpec::xxh3(9), 1),
        Err(ExchangeError::Optimize(_))
    ));
    // 2% target: whole-message bits per key within 1.25× of log2(1/0.02).
    let ks = keys(0..100_000);
    let (msg, f) = build_message(&ks, MessageTarget::Fp(0.02), HashSpec::xxh3(9), 1).unwrap();
    let bits_per_key = msg.len() as f64 * 8.0 / ks.len() as f64;
    assert!(
        bits_per_key <= 1.25 * (1.0f64 / 0.02).log2(),
        "{bits_per_key}"
    );
    // Measured FP at most 2% + 5σ (Binomial(100,000, 0.02): σ = 44).
    let fp = (100_000u32..200_000)
        .filter(|i| f.contains(&i.to_le_bytes()))
        .count();
    assert!(fp <= 2_000 + 5 * 45, "{fp} false positives");
}

#[test]
fn every_flip_and_truncation_is_refused() {
    for choice in [CodecChoice::Auto, CodecChoice::Plain] {
        let f = filter(Layout::Standard, 4096, 2, &keys(0..100));
        let msg = encode_message(&f, 100, 3, choice).unwrap();
        for i in 0..msg.len() {
            let mut bad = msg.clone();
            bad[i] ^= 0x10;
            assert!(decode_message(&bad).is_err(), "flip at {i} accepted");
        }
        for len in 0..msg.len() {
            assert!(
                decode_message(&msg[..len]).is_err(),
                "truncation to {len} accepted"
            );
        }
    }
}

/// Re-frames a modified body so that the CRC is right: what a hostile sender does.
fn reframe(msg: &[u8], edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let f = decode_frame(msg).unwrap();
    let mut body = f.body.to_vec();
    edit(&mut body);
    encode_frame(f.kind, 0, &body)
}

#[test]
fn hostile_headers_are_refused_before_allocating() {
    let f = filter(Layout::Standard, 4096, 2, &keys(0..100));
    let msg = encode_message(&f, 100, 3, CodecChoice::Auto).unwrap();
    assert_eq!(
        decode_message(&msg).unwrap().descriptor.codec.name(),
        "rans"
    );
    // m = 2^40 with a tiny coded payload: refused by the memory cap.
    let huge = reframe(&msg, |b| {
        b[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes())
    });
    assert!(matches!(
        decode_message(&huge),
        Err(ExchangeError::TooLarge { .. })
    ));
    assert!(matches!(
        decode_message_with_limit(&msg, 1024),
        Err(ExchangeError::TooLarge { .. })
    ));
    // More one bits than positions.
    let ones = reframe(&msg, |b| b[64..72].copy_from_slice(&u64::MAX.to_le_bytes()));
    assert!(decode_message(&ones).is_err());
    // A wrong one count is caught when the coded payload is decoded.
    let wrong = reframe(&msg, |b| {
        let n = u64::from_le_bytes(b[64..72].try_into().unwrap()) + 1;
        b[64..72].copy_from_slice(&n.to_le_bytes());
    });
    assert!(decode_message(&wrong).unwrap().filter().is_err());
    // A full message with a base version.
    let based = reframe(&msg, |b| b[56..64].copy_from_slice(&9u64.to_le_bytes()));
    assert!(decode_message(&based).is_err());
    // Reserved bytes.
    let reserved = reframe(&msg, |b| b[72] = 1);
    assert!(decode_message(&reserved).is_err());
    // A filter file is not a message.
    let file = filterstore::encode_bit_filter(&f, 100);
    assert!(decode_message(&file).is_err());
    // Plain payload with a bit set past m (m = 4000 leaves 96 padding bits).
    let f = filter(Layout::Standard, 4000, 2, &keys(0..100));
    let plain = encode_message(&f, 100, 3, CodecChoice::Plain).unwrap();
    assert!(decode_message(&plain).is_ok());
    let padded = reframe(&plain, |b| {
        let last = b.len() - 1;
        b[last] = 0x80;
    });
    assert!(decode_message(&padded).is_err());
    let _ = DEFAULT_MAX_MESSAGE_BITS;
}

#[test]
fn golden_message_bytes() {
    // A 64-bit standard filter with one key, sent plain: pins the layout of
    // docs/FORMAT.md § Exchange messages.
    let f = filter(Layout::Standard, 64, 1, &[]);
    f.insert(b"k");
    let msg = encode_message(&f, 1, 7, CodecChoice::Plain).unwrap();
    assert_eq!(msg.len(), MESSAGE_OVERHEAD + 64);
    assert_eq!(&msg[..4], b"FSTR");
    assert_eq!(msg[8], Kind::ExchangeFull.id());
    let body = decode_frame(&msg).unwrap().body;
    assert_eq!(&body[0..4], &[1, 1, 0, 0]); // standard, xxh3-128, bit filter, raw
    assert_eq!(&body[4..8], &1u32.to_le_bytes()); // k
    assert_eq!(&body[8..16], &77u64.to_le_bytes()); // seed
    assert_eq!(&body[16..24], &64u64.to_le_bytes()); // m
    assert_eq!(&body[24..32], &1u64.to_le_bytes()); // n
    assert_eq!(&body[32..40], &64u64.to_le_bytes()); // payload length (one block)
    assert_eq!(&body[48..56], &7u64.to_le_bytes()); // version
    assert_eq!(&body[56..64], &0u64.to_le_bytes()); // base version
    assert_eq!(&body[64..72], &1u64.to_le_bytes()); // ones
    assert_eq!(&body[72..80], &[0; 8]); // reserved
                                        // Multiply-high range reduction of h1 (FORMAT.md § hashing), written out
                                        // here so the golden bytes do not depend on the code under test.
    let bit = ((u128::from(HashSpec::xxh3(77).hash(b"k").h1) * 64) >> 64) as u32;
    assert_eq!(&body[80..88], &(1u64 << bit).to_le_bytes());
    assert!(body[88..].iter().all(|&b| b == 0));
}

/// FORMAT.md § 12 orders the reader's checks: the message fields before the
/// payload, the memory cap before both. A message wrong in several places
/// reports the first of them in that order.
#[test]
fn checks_run_in_the_order_of_the_spec() {
    let f = filter(Layout::Standard, 4096, 2, &keys(0..100));
    let msg = encode_message(&f, 100, 3, CodecChoice::Plain).unwrap();
    let too_many_ones = |b: &mut Vec<u8>| b[64..72].copy_from_slice(&u64::MAX.to_le_bytes());
    // Wrong `ones` and a payload cut short: the field is reported.
    let both = reframe(&msg, |b| {
        too_many_ones(b);
        b.truncate(b.len() - 8);
    });
    match decode_message(&both) {
        Err(ExchangeError::Codec(CodecError::InvalidField { field: "ones", .. })) => {}
        other => panic!("{other:?}"),
    }
    // ...and over the memory cap, the cap is reported first.
    assert!(matches!(
        decode_message_with_limit(&both, 1024),
        Err(ExchangeError::TooLarge {
            m: 4096,
            limit: 1024
        })
    ));
    // The payload alone cut short is a truncation.
    let short = reframe(&msg, |b| b.truncate(b.len() - 8));
    assert!(matches!(
        decode_message(&short),
        Err(ExchangeError::Codec(CodecError::Truncated { .. }))
    ));
}

// ---- Build statistics (format version 2) ----

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
