//! Metadata records: a serde value encoded with bincode 2.0.1 in one pinned
//! configuration (little-endian, fixed-width integers, at most
//! [`META_LIMIT`] bytes), inside a [`frame`]. Bincode is kept
//! behind this file and `docs/FORMAT.md`: the bytes are specified there field by
//! field, so the encoder can be replaced without changing a byte.

use super::frame::{self, Kind};
use crate::error::CodecError;
use serde::{de::DeserializeOwned, Serialize};

/// The largest metadata body accepted (decoding never allocates more).
pub const META_LIMIT: usize = 64 * 1024;

fn config() -> impl bincode::config::Config {
    bincode::config::standard()
        .with_little_endian()
        .with_fixed_int_encoding()
        .with_limit::<META_LIMIT>()
}

/// Encodes `value` as a framed record of `kind`.
///
/// # Errors
/// [`CodecError::Encode`] if the value cannot be encoded (its encoding
/// exceeds [`META_LIMIT`], or serde refuses it): a writer's limit, never a
/// sign of corruption.
pub fn encode<T: Serialize>(kind: Kind, value: &T) -> Result<Vec<u8>, CodecError> {
    encode_versioned(kind, value, frame::VERSION_1)
}

/// [`encode`] as a frame of `version` (its version and min reader version):
/// a record naming what a later version added, e.g. the catalog record of a
/// split-block table (version 2).
pub fn encode_versioned<T: Serialize>(
    kind: Kind,
    value: &T,
    version: u16,
) -> Result<Vec<u8>, CodecError> {
    let body = bincode::serde::encode_to_vec(value, config()).map_err(|e| CodecError::Encode {
        what: "metadata record",
        reason: e.to_string(),
    })?;
    // bincode applies its limit only when decoding: without this check a
    // record could be written that no reader accepts.
    if body.len() > META_LIMIT {
        return Err(CodecError::Encode {
            what: "metadata record",
            reason: format!("{} bytes, limit {META_LIMIT}", body.len()),
        });
    }
    Ok(frame::encode_versioned(kind, 0, &body, version, version))
}

/// Decodes a framed record of `kind`, returning the value and the format
/// version it was written with.
pub fn decode<T: DeserializeOwned>(bytes: &[u8], kind: Kind) -> Result<(T, u16), CodecError> {
    let f = frame::decode_kind(bytes, kind)?;
    if f.flags != 0 {
        return Err(CodecError::InvalidField {
            field: "flags",
            reason: format!(
                "{:#04x}: no flags are defined for metadata records",
                f.flags
            ),
        });
    }
    if f.body.len() > META_LIMIT {
        return Err(CodecError::InvalidField {
            field: "metadata",
            reason: format!("{} bytes, limit {META_LIMIT}", f.body.len()),
        });
    }
    let (value, used): (T, usize) =
        bincode::serde::decode_from_slice(f.body, config()).map_err(|e| {
            CodecError::InvalidField {
                field: "metadata",
                reason: e.to_string(),
            }
        })?;
    if used != f.body.len() {
        return Err(CodecError::TrailingBytes {
            extra: (f.body.len() - used) as u64,
        });
    }
    Ok((value, f.version))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Example {
        name: String,
        n: u64,
        k: u32,
        flag: bool,
    }

    #[test]
    fn golden_body_is_fixed_width_little_endian() {
        let v = Example {
            name: "t".into(),
            n: 258,
            k: 3,
            flag: true,
        };
        let bytes = encode(Kind::TableMeta, &v).unwrap();
        // String = u64 length + bytes; u64 and u32 fixed-width LE; bool one byte.
        assert_eq!(
            &bytes[frame::HEADER_LEN..bytes.len() - frame::TRAILER_LEN],
            &[1, 0, 0, 0, 0, 0, 0, 0, b't', 2, 1, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 1]
        );
        let (back, version): (Example, u16) = decode(&bytes, Kind::TableMeta).unwrap();
        assert_eq!(back, v);
        assert_eq!(version, frame::VERSION_1);
        assert!(decode::<Example>(&bytes, Kind::Catalog).is_err());
        let flagged = frame::encode(
            Kind::TableMeta,
            1,
            &bytes[frame::HEADER_LEN..bytes.len() - frame::TRAILER_LEN],
        );
        assert!(matches!(
            decode::<Example>(&flagged, Kind::TableMeta),
            Err(CodecError::InvalidField { field: "flags", .. })
        ));
    }

    #[test]
    fn an_oversized_value_is_an_encoding_error_not_corruption() {
        let v = Example {
            name: "x".repeat(META_LIMIT),
            n: 1,
            k: 1,
            flag: false,
        };
        let e = encode(Kind::TableMeta, &v).unwrap_err();
        assert!(
            matches!(
                e,
                CodecError::Encode {
                    what: "metadata record",
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("nothing was written"), "{e}");
    }

    #[test]
    fn hostile_string_length_is_refused_without_allocating() {
        let v = Example {
            name: "t".into(),
            n: 1,
            k: 1,
            flag: false,
        };
        let bytes = encode(Kind::TableMeta, &v).unwrap();
        let mut body = bytes[frame::HEADER_LEN..bytes.len() - frame::TRAILER_LEN].to_vec();
        body[0..8].copy_from_slice(&(u64::MAX / 2).to_le_bytes());
        let hostile = frame::encode(Kind::TableMeta, 0, &body);
        assert!(decode::<Example>(&hostile, Kind::TableMeta).is_err());
    }
}
