//! Golden bytes of the metadata encoding: every serde shape that
//! `docs/FORMAT.md` (§ Metadata encoding) specifies, encoded through
//! `codec::meta` and compared with bytes written out by hand from that
//! section. If bincode, its configuration or serde's data model ever changes
//! how a shape is written, this test fails before any record on disk does.

use filterstore::__internals::frame::{self, Kind};
use filterstore::__internals::meta;
use filterstore::CodecError;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, PartialEq)]
enum Shape {
    Unit,
    Newtype(u16),
    Tuple(u8, u8),
    Struct { a: u8 },
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Inner(u32);

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Every {
    u8: u8,
    u16: u16,
    u32: u32,
    u64: u64,
    i32: i32,
    i64: i64,
    f64: f64,
    bool_true: bool,
    bool_false: bool,
    string: String,
    bytes: Vec<u8>,
    seq: Vec<u16>,
    none: Option<u32>,
    some: Option<u32>,
    array: [u8; 3],
    tuple: (u8, u16),
    inner: Inner,
    unit: (),
    shapes: Vec<Shape>,
}

fn sample() -> Every {
    Every {
        u8: 0xab,
        u16: 0x0102,
        u32: 0x0102_0304,
        u64: 0x0102_0304_0506_0708,
        i32: -2,
        i64: -1,
        f64: 1.5,
        bool_true: true,
        bool_false: false,
        string: "hé".into(),
        bytes: vec![9, 8],
        seq: vec![0x0a0b],
        none: None,
        some: Some(7),
        array: [1, 2, 3],
        tuple: (4, 0x0506),
        inner: Inner(0x11),
        unit: (),
        shapes: vec![
            Shape::Unit,
            Shape::Newtype(0x0201),
            Shape::Tuple(5, 6),
            Shape::Struct { a: 7 },
        ],
    }
}

#[rustfmt::skip]
const GOLDEN_BODY: &[u8] = &[
    0xab,                                           // u8
    0x02, 0x01,                                     // u16 LE
    0x04, 0x03, 0x02, 0x01,                         // u32 LE
    0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, // u64 LE
    0xfe, 0xff, 0xff, 0xff,                         // i32 -2, two's complement (no zigzag)
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // i64 -1
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf8, 0x3f, // f64 1.5, IEEE 754 bits LE
    0x01,                                           // true
    0x00,                                           // false
    3, 0, 0, 0, 0, 0, 0, 0, b'h', 0xc3, 0xa9,       // String: u64 byte length + UTF-8
    2, 0, 0, 0, 0, 0, 0, 0, 9, 8,                   // Vec<u8>: u64 length + bytes
    1, 0, 0, 0, 0, 0, 0, 0, 0x0b, 0x0a,             // Vec<u16>: u64 length + elements
    0x00,                                           // None
    0x01, 7, 0, 0, 0,                               // Some(7u32)
    1, 2, 3,                                        // [u8; 3]: no length
    4, 0x06, 0x05,                                  // (u8, u16): no length
    0x11, 0, 0, 0,                                  // newtype struct: its field
                                                    // (): nothing
    4, 0, 0, 0, 0, 0, 0, 0,                         // Vec<Shape>: 4 elements
    0, 0, 0, 0,                                     //   Unit: u32 variant index 0
    1, 0, 0, 0, 0x01, 0x02,                         //   Newtype(0x0201): index 1 + u16
    2, 0, 0, 0, 5, 6,                               //   Tuple(5, 6): index 2 + fields
    3, 0, 0, 0, 7,                                  //   Struct { a: 7 }: index 3 + fields
];

#[test]
fn every_serde_shape_has_the_specified_bytes() {
    let bytes = meta::encode(Kind::TableMeta, &sample()).unwrap();
    let body = &bytes[frame::HEADER_LEN..bytes.len() - frame::TRAILER_LEN];
    assert_eq!(body, GOLDEN_BODY);
    let (back, version): (Every, u16) = meta::decode(&bytes, Kind::TableMeta).unwrap();
    assert_eq!(back, sample());
    assert_eq!(version, 1);
}

fn decode_body(body: &[u8]) -> Result<Every, CodecError> {
    meta::decode::<Every>(&frame::encode(Kind::TableMeta, 0, body), Kind::TableMeta).map(|v| v.0)
}

/// Values outside a shape's domain are refused, so a body has exactly one
/// reading (the fuzz target `decode_meta` checks the same on random input).
#[test]
fn non_canonical_values_are_refused() {
    let bool_at = 35; // offset of `bool_true` in GOLDEN_BODY
    let option_at = GOLDEN_BODY.len() - 45; // offset of the `none` tag
    let string_at = 37; // first byte of the string's UTF-8
    let variant_at = GOLDEN_BODY.len() - 5; // variant index of Struct { a }
    assert_eq!(GOLDEN_BODY[bool_at], 1);
    assert_eq!(GOLDEN_BODY[option_at], 0);
    assert_eq!(GOLDEN_BODY[string_at + 8], b'h');
    assert_eq!(GOLDEN_BODY[variant_at], 3);
    for (at, value, what) in [
        (bool_at, 2u8, "bool 2"),
        (option_at, 2, "option tag 2"),
        (string_at + 9, 0xff, "invalid UTF-8"),
        (variant_at, 4, "variant index 4"),
    ] {
        let mut body = GOLDEN_BODY.to_vec();
        body[at] = value;
        assert!(
            matches!(
                decode_body(&body),
                Err(CodecError::InvalidField {
                    field: "metadata",
                    ..
                })
            ),
            "{what} accepted"
        );
    }
    // One byte too many, one too few.
    let mut long = GOLDEN_BODY.to_vec();
    long.push(0);
    assert_eq!(
        decode_body(&long),
        Err(CodecError::TrailingBytes { extra: 1 })
    );
    assert!(decode_body(&GOLDEN_BODY[..GOLDEN_BODY.len() - 1]).is_err());
}
