//! Exchange messages: round trips, the plain fallback, deltas, budgets, and
//! refusal of every corrupt or hostile message.

use crate::format_common;

use filterstore::{
    build_message, decode_message, decode_message_with_limit, encode_delta_message, encode_message,
    CodecChoice, CodecError, ExchangeError, MessageTarget, ReceivedFilter,
    DEFAULT_MAX_MESSAGE_BITS, MESSAGE_OVERHEAD,
};
use filterstore::{decode_frame, encode_frame, FrameKind as Kind};
use filterstore::{BitFilter, BloomRead, FilterParams, HashSpec, Layout};
use format_common::{filter, keys};

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
    let other_seed = BitFilter::new(base.params().with_hash(HashSpec::xxh3(1)).unwrap()).unwrap();
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

/// A blocked filter hashed with XXH3-64 (hash id 3, format version 4) is
/// sent as a version-4 message, plain or coded, and received with the same
/// bits and hash; re-framed as version 1 it is refused, naming the hash.
#[test]
fn xxh3_64_messages_are_version_four() {
    let ks = keys(0..1000);
    for (m, k) in [(10_240, 7), (40_960, 2)] {
        let p = FilterParams::new(Layout::Blocked, m, k, HashSpec::xxh3_64(11)).unwrap();
        let f = BitFilter::new(p).unwrap();
        f.insert_many(&ks);
        for choice in [CodecChoice::Auto, CodecChoice::Plain] {
            let bytes = encode_message(&f, 1000, 5, choice).unwrap();
            let frame = decode_frame(&bytes).unwrap();
            assert_eq!((frame.version, frame.min_reader), (4, 4));
            let msg = decode_message(&bytes).unwrap();
            let got = msg.filter().unwrap();
            assert_eq!(got.params(), &p);
            assert!((0..p.num_words()).all(|i| got.word(i) == f.word(i)));
            assert!(ks.iter().all(|key| got.contains(key)));
            let old = reframe(&bytes, |_| {});
            match decode_message(&old) {
                Err(ExchangeError::Codec(CodecError::InvalidField { field, .. })) => {
                    assert_eq!(field, "hash algorithm")
                }
                other => panic!("a version-1 frame naming hash 3: {other:?}"),
            }
        }
    }
}

/// A blocked filter hashed with XXH3-64 sectorized (hash id 4, format
/// version 6) is sent as a version-6 message, plain or coded, and received
/// with the same bits and hash; re-framed as version 1 it is refused,
/// naming the hash. The filter's bits come from a counting filter (its
/// insert derives the sectorized positions, `docs/FORMAT.md` § 6).
#[test]
fn xxh3_64_sectorized_messages_are_version_six() {
    let ks = keys(0..1000);
    for m in [10_240, 40_960] {
        let spec = HashSpec::xxh3_64_sectorized(11);
        let p = FilterParams::new(Layout::Blocked, m, 8, spec).unwrap();
        let mut c = filterstore::CountingFilter::new(p).unwrap();
        for key in &ks {
            c.insert(key);
        }
        let f = c.to_bit_filter().unwrap();
        for choice in [CodecChoice::Auto, CodecChoice::Plain] {
            let bytes = encode_message(&f, 1000, 5, choice).unwrap();
            let frame = decode_frame(&bytes).unwrap();
            assert_eq!((frame.version, frame.min_reader), (6, 6));
            let msg = decode_message(&bytes).unwrap();
            let got = msg.filter().unwrap();
            assert_eq!(got.params(), &p);
            assert!((0..p.num_words()).all(|i| got.word(i) == f.word(i)));
            let old = reframe(&bytes, |_| {});
            match decode_message(&old) {
                Err(ExchangeError::Codec(CodecError::InvalidField { field, reason })) => {
                    assert_eq!(field, "hash algorithm");
                    assert!(reason.contains("new in format version 6"), "{reason}");
                }
                other => panic!("a version-1 frame naming hash 4: {other:?}"),
            }
        }
    }
}
