use super::*;
use crate::codec::frame::{self, Kind};
use crate::codec::reader::ByteReader;
use crate::error::CodecError;
use crate::filter::bloom::{BitFilter, BloomRead};
use crate::filter::counting::CountingFilter;
use crate::filter::hash::HashSpec;
use crate::filter::params::{FilterParams, Layout};

fn params(layout: Layout) -> FilterParams {
    FilterParams::new(layout, 1024, 3, HashSpec::xxh3(0x0102_0304_0506_0708)).unwrap()
}

/// The descriptor's bytes, written out by hand from `docs/FORMAT.md`.
#[test]
fn golden_descriptor_bytes() {
    let d = DescriptorV1::raw(params(Layout::Blocked), 300, CounterWidth::Four);
    assert_eq!(
        d.to_bytes(),
        [
            2, 1, 4, 0, // layout, hash, counter width, codec
            3, 0, 0, 0, // k
            8, 7, 6, 5, 4, 3, 2, 1, // seed
            0, 4, 0, 0, 0, 0, 0, 0, // m = 1024
            44, 1, 0, 0, 0, 0, 0, 0, // n = 300
            0, 2, 0, 0, 0, 0, 0, 0, // payload: 2 blocks · 256 bytes
            0, 0, 0, 0, 0, 0, 0, 0, // reserved
        ]
    );
    let bytes = d.to_bytes();
    let mut r = ByteReader::new(&bytes);
    assert_eq!(DescriptorV1::read(&mut r).unwrap(), d);
    assert_eq!(r.remaining(), 0);
}

/// The descriptor of a blocked bit filter hashed with XXH3-64 (hash id 3),
/// byte for byte, and its frame's header: version 4, min reader 4.
#[test]
fn golden_xxh3_64_descriptor_and_header_bytes() {
    let p = FilterParams::new(
        Layout::Blocked,
        1024,
        3,
        HashSpec::xxh3_64(0x0102_0304_0506_0708),
    )
    .unwrap();
    let d = DescriptorV1::raw(p, 300, CounterWidth::Bit);
    assert_eq!(
        d.to_bytes(),
        [
            2, 3, 0, 0, // layout, hash, counter width, codec
            3, 0, 0, 0, // k
            8, 7, 6, 5, 4, 3, 2, 1, // seed
            0, 4, 0, 0, 0, 0, 0, 0, // m = 1024
            44, 1, 0, 0, 0, 0, 0, 0, // n = 300
            128, 0, 0, 0, 0, 0, 0, 0, // payload: 2 blocks · 64 bytes
            0, 0, 0, 0, 0, 0, 0, 0, // reserved
        ]
    );
    let bytes = d.to_bytes();
    let mut r = ByteReader::new(&bytes);
    assert_eq!(DescriptorV1::read(&mut r).unwrap(), d);
    let file = encode_bit_filter(&BitFilter::new(p).unwrap(), 300);
    assert_eq!(
        &file[..24],
        &[b'F', b'S', b'T', b'R', 4, 0, 4, 0, 1, 0, 0, 0, 176, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(&file[24..72], &bytes);
}

/// A whole bit-filter file with one key, byte for byte. The CRC was
/// computed independently with Python's `zlib.crc32` over bytes 0..200.
#[test]
fn golden_bit_filter_file() {
    let f = BitFilter::new(params(Layout::Standard)).unwrap();
    f.insert(b"golden");
    let bytes = encode_bit_filter(&f, 1);
    assert_eq!(bytes.len(), 24 + 48 + 128 + 4);
    assert_eq!(
        &bytes[..24],
        &[b'F', b'S', b'T', b'R', 1, 0, 1, 0, 1, 0, 0, 0, 176, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(
        bytes[24..72],
        DescriptorV1::raw(f.params().to_owned(), 1, CounterWidth::Bit).to_bytes()
    );
    assert_eq!(&bytes[72..200], &f.to_le_bytes()[..]);
    let set: Vec<usize> = (0..1024).filter(|&i| f.bit(i as u64)).collect();
    assert_eq!(set, GOLDEN_BITS);
    assert_eq!(&bytes[200..], &GOLDEN_CRC.to_le_bytes());
}
/// A file of `kind` around a hand-made descriptor and payload, with a
/// valid frame and CRC, so that the descriptor checks are what is tested.
fn forged(kind: Kind, descriptor: [u8; DESCRIPTOR_LEN], payload: &[u8]) -> Vec<u8> {
    let mut body = descriptor.to_vec();
    body.extend_from_slice(payload);
    frame::encode(kind, 0, &body)
}

fn valid_parts(width: CounterWidth) -> ([u8; DESCRIPTOR_LEN], Vec<u8>) {
    let d = DescriptorV1::raw(params(Layout::Standard), 0, width);
    (d.to_bytes(), vec![0u8; d.payload_len as usize])
}

#[test]
fn round_trips_both_widths_and_layouts() {
    for layout in [Layout::Standard, Layout::Blocked] {
        let p = FilterParams::for_capacity(500, 0.01, layout, HashSpec::xxh3(9)).unwrap();
        let bits = BitFilter::new(p).unwrap();
        let mut counts = CountingFilter::new(p).unwrap();
        let keys: Vec<[u8; 8]> = (0u64..500).map(|i| i.to_le_bytes()).collect();
        for k in &keys {
            bits.insert(k);
            counts.insert(k);
        }
        let bit_file = encode_bit_filter(&bits, 500);
        let count_file = encode_counting_filter(&counts, 500);
        let db = decode_filter(&bit_file).unwrap();
        let dc = decode_filter(&count_file).unwrap();
        assert_eq!(
            (db.kind(), dc.kind()),
            (Kind::BitFilter, Kind::CountingFilter)
        );
        assert_eq!((*db.params(), db.n()), (p, 500));
        assert_eq!(*dc.params(), p);
        assert!(keys.iter().all(|k| db.contains(k) && dc.contains(k)));
        // Both answer exactly like the filters they came from, absent keys too.
        let probe: Vec<[u8; 8]> = (500u64..20_000).map(|i| i.to_le_bytes()).collect();
        for k in &probe {
            assert_eq!(db.contains(k), bits.contains(k));
            assert_eq!(dc.contains(k), counts.contains(k));
        }
        assert_eq!(db.to_bit_filter().unwrap().to_words(), bits.to_words());
        assert_eq!(
            dc.to_bit_filter().unwrap().to_words(),
            counts.to_bit_filter().unwrap().to_words()
        );
        let c = dc.counters().unwrap();
        assert_eq!(
            c.to_counting_filter().unwrap().as_bytes(),
            counts.as_bytes()
        );
        assert!(keys.iter().all(|k| c.min_count(k) >= 1));
        assert!(db.counters().is_none());
        assert_eq!(
            encode_bit_filter(&db.to_bit_filter().unwrap(), 500),
            bit_file
        );
    }
}

#[test]
fn unknown_ids_name_what_was_found_and_what_is_supported() {
    let (d, payload) = valid_parts(CounterWidth::Bit);
    for (at, value, what) in [
        (0, 4, "layout"),
        (1, 5, "hash algorithm"),
        (2, 8, "counter width"),
        (3, 1, "codec"),
        (3, 200, "codec"),
    ] {
        let mut bad = d;
        bad[at] = value;
        match decode_filter(&forged(Kind::BitFilter, bad, &payload)) {
            Err(CodecError::UnknownId {
                what: w,
                found,
                supported,
            }) => {
                assert_eq!((w, found), (what, value as u64));
                assert!(!supported.is_empty());
            }
            other => panic!("{what} = {value}: {other:?}"),
        }
    }
}

/// XXH3-64 (hash id 3) is version 4 and the blocked layout's only: a
/// blocked file hashed with it is framed as version 4 and reads back with
/// the same bits and answers; re-framed as version 3 it is refused (the
/// field at fault named), and so is a standard-layout descriptor naming it.
#[test]
fn xxh3_64_descriptors_need_version_four_and_the_blocked_layout() {
    let p = FilterParams::new(Layout::Blocked, 512 * 5, 6, HashSpec::xxh3_64(9)).unwrap();
    let f = BitFilter::new(p).unwrap();
    let keys: Vec<[u8; 8]> = (0u64..200).map(u64::to_le_bytes).collect();
    f.insert_many(&keys);
    let file = encode_bit_filter(&f, 200);
    let decoded = decode_filter(&file).unwrap();
    assert_eq!((decoded.version, decoded.min_reader), (4, 4));
    let back = decoded.to_bit_filter().unwrap();
    assert_eq!(*back.params(), p);
    assert!(back.to_words() == f.to_words());
    let probe: Vec<[u8; 8]> = (0u64..5_000).map(u64::to_le_bytes).collect();
    assert_eq!(back.contains_many(&probe), f.contains_many(&probe));
    let body = &file[frame::HEADER_LEN..file.len() - frame::TRAILER_LEN];
    for v in [1, 2, 3] {
        let old = frame::encode_versioned(Kind::BitFilter, 0, body, v, v);
        match decode_filter(&old) {
            Err(CodecError::InvalidField { field, reason }) => {
                assert_eq!(field, "hash algorithm", "version {v}");
                assert!(reason.contains("new in format version 4"), "{reason}");
            }
            other => panic!("version {v}: {other:?}"),
        }
    }
    let mut d: [u8; DESCRIPTOR_LEN] = body[..DESCRIPTOR_LEN].try_into().unwrap();
    d[0] = Layout::Standard.id();
    d[16..24].copy_from_slice(&(512u64 * 5).to_le_bytes());
    let bad = forged(Kind::BitFilter, d, &body[DESCRIPTOR_LEN..]);
    let bad = frame::encode_versioned(Kind::BitFilter, 0, &bad[24..bad.len() - 4], 4, 4);
    assert!(matches!(
        decode_filter(&bad),
        Err(CodecError::InvalidField {
            field: "hash algorithm",
            ..
        })
    ));
}

/// The descriptor of a blocked bit filter hashed with XXH3-64 sectorized
/// (hash id 4, k = 8), byte for byte, and its frame's header: version 6,
/// min reader 6.
#[test]
fn golden_xxh3_64_sectorized_descriptor_and_header_bytes() {
    let spec = HashSpec::xxh3_64_sectorized(0x0102_0304_0506_0708);
    let p = FilterParams::new(Layout::Blocked, 1024, 8, spec).unwrap();
    let d = DescriptorV1::raw(p, 300, CounterWidth::Bit);
    assert_eq!(
        d.to_bytes(),
        [
            2, 4, 0, 0, // layout, hash, counter width, codec
            8, 0, 0, 0, // k
            8, 7, 6, 5, 4, 3, 2, 1, // seed
            0, 4, 0, 0, 0, 0, 0, 0, // m = 1024
            44, 1, 0, 0, 0, 0, 0, 0, // n = 300
            128, 0, 0, 0, 0, 0, 0, 0, // payload: 2 blocks · 64 bytes
            0, 0, 0, 0, 0, 0, 0, 0, // reserved
        ]
    );
    let bytes = d.to_bytes();
    let mut r = ByteReader::new(&bytes);
    assert_eq!(DescriptorV1::read(&mut r).unwrap(), d);
    assert_eq!(d.format_version(), frame::VERSION_6);
    let file = encode_bit_filter(&BitFilter::new(p).unwrap(), 300);
    assert_eq!(
        &file[..24],
        &[b'F', b'S', b'T', b'R', 6, 0, 6, 0, 1, 0, 0, 0, 176, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(&file[24..72], &bytes);
}

/// A bit filter of `p` holding `keys`, its bits set from
/// [`FilterParams::positions`] (not through the filter's insert path).
fn bits_from_positions(p: FilterParams, keys: &[[u8; 8]]) -> BitFilter {
    let mut words = vec![0u64; p.num_words()];
    for key in keys {
        for &q in p.positions(p.hash().hash(key)).as_slice() {
            words[(q / 64) as usize] |= 1 << (q % 64);
        }
    }
    BitFilter::from_words(p, &words).unwrap()
}

/// XXH3-64 sectorized (hash id 4) is version 6, the blocked layout's only
/// and k = 8 only: bit and counting files hashed with it are framed as
/// version 6 and read back with the same bits and counters; re-framed as
/// any older version they are refused (field "hash algorithm"), and so is
/// a descriptor naming it with the standard layout or another `k`.
#[test]
fn xxh3_64_sectorized_descriptors_need_version_six() {
    let p =
        FilterParams::new(Layout::Blocked, 512 * 5, 8, HashSpec::xxh3_64_sectorized(9)).unwrap();
    let keys: Vec<[u8; 8]> = (0u64..200).map(u64::to_le_bytes).collect();
    let f = bits_from_positions(p, &keys);
    let mut c = CountingFilter::new(p).unwrap();
    for k in &keys {
        c.insert(k);
    }
    assert!(c.to_bit_filter().unwrap().to_words() == f.to_words());
    for file in [encode_bit_filter(&f, 200), encode_counting_filter(&c, 200)] {
        let decoded = decode_filter(&file).unwrap();
        assert_eq!((decoded.version, decoded.min_reader), (6, 6));
        assert_eq!(*decoded.params(), p);
        if let Some(counters) = decoded.counters() {
            assert!(keys.iter().all(|k| counters.min_count(k) > 0));
        } else {
            assert!(decoded.to_bit_filter().unwrap().to_words() == f.to_words());
        }
        let body = &file[frame::HEADER_LEN..file.len() - frame::TRAILER_LEN];
        let kind = frame::decode(&file).unwrap().kind;
        for v in 1..=5 {
            let old = frame::encode_versioned(kind, 0, body, v, v);
            match decode_filter(&old) {
                Err(CodecError::InvalidField { field, reason }) => {
                    assert_eq!(field, "hash algorithm", "version {v}");
                    assert!(reason.contains("new in format version 6"), "{reason}");
                    assert!(reason.contains("xxh3-64-sectorized"), "{reason}");
                }
                other => panic!("version {v}: {other:?}"),
            }
        }
    }
    let file = encode_bit_filter(&f, 200);
    let body = &file[frame::HEADER_LEN..file.len() - frame::TRAILER_LEN];
    let d: [u8; DESCRIPTOR_LEN] = body[..DESCRIPTOR_LEN].try_into().unwrap();
    let mut standard = d;
    standard[0] = Layout::Standard.id();
    let mut k7 = d;
    k7[4] = 7;
    for (bad, field) in [(standard, "hash algorithm"), (k7, "k")] {
        let bad = forged(Kind::BitFilter, bad, &body[DESCRIPTOR_LEN..]);
        let bad = frame::encode_versioned(Kind::BitFilter, 0, &bad[24..bad.len() - 4], 6, 6);
        match decode_filter(&bad) {
            Err(CodecError::InvalidField { field: got, .. }) => assert_eq!(got, field),
            other => panic!("{field}: {other:?}"),
        }
    }
}

/// The split-block layout (id 3) and XXH64 (id 2) are version 2: a frame
/// of version 1 naming them is refused, and so is a split-block descriptor
/// with another hash, a seed, or another `k`.
#[test]
fn split_block_descriptors_need_version_two_and_their_own_hash() {
    let p = FilterParams::new(Layout::SplitBlock, 256 * 5, 8, HashSpec::xxh64()).unwrap();
    let f = BitFilter::new(p).unwrap();
    f.insert(b"k");
    let file = encode_bit_filter(&f, 1);
    assert_eq!(decode_filter(&file).unwrap().version, 2);
    let body = &file[frame::HEADER_LEN..file.len() - frame::TRAILER_LEN];
    let v1 = frame::encode_versioned(Kind::BitFilter, 0, body, 1, 1);
    assert!(matches!(
        decode_filter(&v1),
        Err(CodecError::InvalidField {
            field: "layout",
            ..
        })
    ));
    for (at, value, field) in [
        (1, 1u8, "hash algorithm"),
        (8, 7, "hash algorithm"),
        (4, 7, "k"),
    ] {
        let mut d: [u8; DESCRIPTOR_LEN] = body[..DESCRIPTOR_LEN].try_into().unwrap();
        d[at] = value;
        let bad = forged(Kind::BitFilter, d, &body[DESCRIPTOR_LEN..]);
        let bad = frame::encode_versioned(Kind::BitFilter, 0, &bad[24..bad.len() - 4], 2, 2);
        match decode_filter(&bad) {
            Err(CodecError::InvalidField { field: f, .. }) => assert_eq!(f, field, "byte {at}"),
            other => panic!("byte {at} = {value}: {other:?}"),
        }
    }
}

#[test]
fn invalid_parameters_name_the_field() {
    let (d, payload) = valid_parts(CounterWidth::Bit);
    let cases: [(usize, u64, &str); 4] = [
        (4, 0, "k"),              // k = 0
        (4, 33, "k"),             // k > MAX_K
        (16, 63, "m"),            // m below the minimum
        (16, (1 << 40) + 1, "m"), // m above the maximum
    ];
    for (at, value, field) in cases {
        let mut bad = d;
        if at == 4 {
            bad[4..8].copy_from_slice(&(value as u32).to_le_bytes());
        } else {
            bad[at..at + 8].copy_from_slice(&value.to_le_bytes());
        }
        match decode_filter(&forged(Kind::BitFilter, bad, &payload)) {
            Err(CodecError::InvalidField { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field} = {value}: {other:?}"),
        }
    }
    // Blocked layout with m not a multiple of 512.
    let mut bad = d;
    bad[0] = Layout::Blocked.id();
    bad[16..24].copy_from_slice(&1000u64.to_le_bytes());
    assert!(matches!(
        decode_filter(&forged(Kind::BitFilter, bad, &payload)),
        Err(CodecError::InvalidField { field: "m", .. })
    ));
}

#[test]
fn lengths_are_checked_before_anything_is_trusted() {
    let (d, payload) = valid_parts(CounterWidth::Bit);
    // A declared length that disagrees with m.
    let mut bad = d;
    bad[32..40].copy_from_slice(&(payload.len() as u64 * 2).to_le_bytes());
    assert!(matches!(
        decode_filter(&forged(Kind::BitFilter, bad, &payload)),
        Err(CodecError::InvalidField {
            field: "payload length",
            ..
        })
    ));
    // The largest m accepted, with a payload that is not there: refused by
    // length, not by an allocation of 128 GiB.
    let mut huge = d;
    huge[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
    huge[32..40].copy_from_slice(&(1u64 << 37).to_le_bytes());
    assert_eq!(
        decode_filter(&forged(Kind::BitFilter, huge, &payload)).map(|_| ()),
        Err(CodecError::Truncated {
            needed: DESCRIPTOR_LEN as u64 + (1 << 37),
            found: (DESCRIPTOR_LEN + payload.len()) as u64,
        })
    );
    // A payload one byte short, and one byte long.
    assert!(matches!(
        decode_filter(&forged(Kind::BitFilter, d, &payload[1..])),
        Err(CodecError::Truncated { .. })
    ));
    let mut long = payload.clone();
    long.push(0);
    assert_eq!(
        decode_filter(&forged(Kind::BitFilter, d, &long)).map(|_| ()),
        Err(CodecError::TrailingBytes { extra: 1 })
    );
    // A descriptor cut short.
    let body = &d[..40];
    assert!(matches!(
        decode_filter(&frame::encode(Kind::BitFilter, 0, body)),
        Err(CodecError::Truncated { .. })
    ));
}

#[test]
fn kind_flags_width_reserved_and_padding_are_checked() {
    let (d, payload) = valid_parts(CounterWidth::Bit);
    assert!(matches!(
        decode_filter(&forged(Kind::Snapshot, d, &payload)),
        Err(CodecError::WrongKind { .. })
    ));
    // A bit-filter descriptor in a counting-filter frame.
    assert!(matches!(
        decode_filter(&forged(Kind::CountingFilter, d, &payload)),
        Err(CodecError::InvalidField {
            field: "counter width",
            ..
        })
    ));
    let mut body = d.to_vec();
    body.extend_from_slice(&payload);
    assert!(matches!(
        decode_filter(&frame::encode(Kind::BitFilter, 2, &body)),
        Err(CodecError::InvalidField { field: "flags", .. })
    ));
    for at in 40..48 {
        let mut bad = d;
        bad[at] = 1;
        assert_eq!(
            decode_filter(&forged(Kind::BitFilter, bad, &payload)).map(|_| ()),
            Err(CodecError::ReservedNotZero)
        );
    }
    // m = 1000 in a standard filter: bits 1000..1024 are padding.
    let p = FilterParams::new(Layout::Standard, 1000, 3, HashSpec::xxh3(1)).unwrap();
    for (width, first_pad_bit) in [(CounterWidth::Bit, 1000), (CounterWidth::Four, 4000)] {
        let d = DescriptorV1::raw(p, 0, width);
        let len = d.payload_len as usize;
        let kind = width.file_kind();
        assert!(decode_filter(&forged(kind, d.to_bytes(), &vec![0; len])).is_ok());
        for bit in [first_pad_bit, first_pad_bit + 5, len * 8 - 1] {
            let mut payload = vec![0u8; len];
            payload[bit / 8] |= 1 << (bit % 8);
            assert!(
                matches!(
                    decode_filter(&forged(kind, d.to_bytes(), &payload)),
                    Err(CodecError::InvalidField {
                        field: "padding",
                        ..
                    })
                ),
                "{width:?}: padding bit {bit} accepted"
            );
        }
        // The last real position may be set.
        let mut payload = vec![0u8; len];
        let last = first_pad_bit - 1;
        payload[last / 8] |= 1 << (last % 8);
        assert!(decode_filter(&forged(kind, d.to_bytes(), &payload)).is_ok());
    }
}

#[test]
fn inspection_reports_every_field() {
    let p = FilterParams::new(Layout::Blocked, 2048, 5, HashSpec::xxh3(77)).unwrap();
    let mut c = CountingFilter::new(p).unwrap();
    for i in 0u32..100 {
        c.insert(&i.to_le_bytes());
    }
    for _ in 0..20 {
        c.insert(b"hot");
    }
    let bytes = encode_counting_filter(&c, 101);
    let i = inspect(&bytes).unwrap();
    assert_eq!(i.file_len, bytes.len() as u64);
    assert_eq!((i.format_version, i.min_reader_version), (1, 1));
    assert_eq!((i.kind, i.kind_id, i.flags), ("counting-filter", 2, 0));
    assert_eq!(i.body_len, 48 + 1024);
    assert_eq!(i.crc32, crc32fast::hash(&bytes[..bytes.len() - 4]));
    assert_eq!(
        (i.layout, i.layout_id, i.hash, i.hash_id),
        ("blocked", 2, "xxh3-128", 1)
    );
    assert_eq!((i.seed, i.m, i.k, i.n), (77, 2048, 5, 101));
    assert_eq!((i.counter_width, i.codec, i.codec_id), (4, "raw", 0));
    assert_eq!(i.payload_len, 1024);
    assert_eq!(i.saturated_counters, Some(c.saturated()));
    assert!(
        i.saturated_counters.unwrap() >= 1,
        "the hot key's counters stick at 15"
    );
    assert_eq!(i.bits_set, c.to_bit_filter().unwrap().count_ones());
    assert!((i.bits_per_key.unwrap() - 2048.0 / 101.0).abs() < 1e-9);
    let text = i.to_string();
    for needle in [
        "counting-filter",
        "blocked",
        "0x000000000000004d",
        "saturated counters",
    ] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
    let json = serde_json::to_value(&i).unwrap();
    assert_eq!(json["m"], 2048);
    assert_eq!(json["kind"], "counting-filter");
    // n is informational and may hold anything: a claim of 2^64 − 1 keys
    // is reported (model FP 1), quickly (found by the fuzzer: the blocked
    // model once walked ~10^9 terms for it).
    let d = DescriptorV1::raw(p, u64::MAX, CounterWidth::Four);
    let mut body = d.to_bytes().to_vec();
    body.extend_from_slice(c.as_bytes());
    let huge = inspect(&frame::encode(Kind::CountingFilter, 0, &body)).unwrap();
    assert_eq!((huge.n, huge.model_fp), (u64::MAX, 1.0));
    // Any defect is an error, not a partial report.
    let mut bad = bytes.clone();
    bad[100] ^= 1;
    assert!(matches!(
        inspect(&bad),
        Err(CodecError::ChecksumMismatch { .. })
    ));
}

/// The three positions of `b"golden"` under seed 0x0102030405060708 in a
/// standard 1024-bit filter with k = 3.
const GOLDEN_BITS: &[usize] = &[339, 507, 675];
const GOLDEN_CRC: u32 = 0xbcfa_4033;
