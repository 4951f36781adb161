//! The write-ahead log of a table generation: records of key hashes.
//!
//! A record is one sled value holding whole batches — the unit of atomicity
//! and of durability. It carries the 128-bit hash of each key, not the key, so
//! a record costs 17 bytes per operation whatever the key length, and folding
//! it later needs no rehashing.
//!
//! The record's bytes and its key are specified in `docs/FORMAT.md` §10
//! ("Log record"); the key orders records by sequence number, so a prefix
//! scan returns them in the order they were written.

use super::keys::{self, LOG_PREFIX};
use crate::codec::frame::{self, Kind};
use crate::codec::reader::ByteReader;
use crate::error::CodecError;
use crate::filter::hash::KeyHash;

/// Bytes per operation in a record.
const OP_BYTES: usize = 17;
/// Bytes before the operations.
const HEADER: usize = 8;
/// The most operations one record (hence one batch) may carry: 1,048,576
/// (17 MiB). Larger batches are refused with a typed error.
pub const MAX_RECORD_OPS: usize = 1 << 20;

/// One logged operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LogOp {
    /// `true` for an insert, `false` for a remove.
    pub insert: bool,
    /// The key's hash under the table generation's hash spec.
    pub hash: KeyHash,
}

/// The sled key of record `seq`.
pub(crate) fn log_key(seq: u64) -> [u8; 9] {
    keys::numbered(LOG_PREFIX, seq)
}

/// The sequence number of a log key.
pub(crate) fn seq_of(key: &[u8]) -> Result<u64, CodecError> {
    keys::number_of(key, LOG_PREFIX, "log key")
}

/// Encodes a record.
pub(crate) fn encode(ops: &[LogOp]) -> Vec<u8> {
    let mut body = Vec::with_capacity(HEADER + ops.len() * OP_BYTES);
    body.extend_from_slice(&(ops.len() as u32).to_le_bytes());
    body.extend_from_slice(&[0u8; 4]);
    for op in ops {
        body.push(if op.insert { 1 } else { 2 });
        body.extend_from_slice(&op.hash.h1.to_le_bytes());
        body.extend_from_slice(&op.hash.h2.to_le_bytes());
    }
    frame::encode(Kind::LogRecord, 0, &body)
}

/// Decodes a record, calling `f` with each operation in order. The count is
/// checked against the bytes present before anything is done.
pub(crate) fn decode(bytes: &[u8], mut f: impl FnMut(LogOp)) -> Result<usize, CodecError> {
    let body = frame::decode_kind(bytes, Kind::LogRecord)?.body;
    if body.len() < HEADER {
        return Err(CodecError::Truncated {
            needed: HEADER as u64,
            found: body.len() as u64,
        });
    }
    let mut r = ByteReader::new(body);
    let count = r.u32()? as usize;
    r.reserved::<4>()?;
    let expected = HEADER as u64 + count as u64 * OP_BYTES as u64;
    if expected != body.len() as u64 {
        return Err(CodecError::InvalidField {
            field: "log op_count",
            reason: format!("{count} ops need {expected} bytes, body has {}", body.len()),
        });
    }
    for _ in 0..count {
        let insert = match r.u8()? {
            1 => true,
            2 => false,
            code => {
                return Err(CodecError::InvalidField {
                    field: "log op code",
                    reason: format!("{code}, expected 1 (insert) or 2 (remove)"),
                })
            }
        };
        let (h1, h2) = (r.u64()?, r.u64()?);
        f(LogOp {
            insert,
            hash: KeyHash { h1, h2 },
        });
    }
    r.finish()?;
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops() -> Vec<LogOp> {
        (0..5u64)
            .map(|i| LogOp {
                insert: i % 2 == 0,
                hash: KeyHash {
                    h1: i * 0x0101,
                    h2: u64::MAX - i,
                },
            })
            .collect()
    }

    #[test]
    fn round_trip_and_golden_header() {
        let bytes = encode(&ops());
        let body = &bytes[frame::HEADER_LEN..bytes.len() - frame::TRAILER_LEN];
        assert_eq!(&body[..9], &[5, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(body.len(), 8 + 5 * 17);
        let mut back = Vec::new();
        assert_eq!(decode(&bytes, |op| back.push(op)).unwrap(), 5);
        assert_eq!(back, ops());
    }

    #[test]
    fn bad_records_are_typed_errors() {
        let good = encode(&ops());
        let mut body = good[frame::HEADER_LEN..good.len() - frame::TRAILER_LEN].to_vec();
        // A count that claims more ops than present: refused before any work.
        body[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        let hostile = frame::encode(Kind::LogRecord, 0, &body);
        assert!(matches!(
            decode(&hostile, |_| panic!("no op may be delivered")),
            Err(CodecError::InvalidField { .. })
        ));
        body[0..4].copy_from_slice(&5u32.to_le_bytes());
        body[8] = 9;
        let bad_code = frame::encode(Kind::LogRecord, 0, &body);
        assert!(decode(&bad_code, |_| {}).is_err());
        let mut flipped = good.clone();
        flipped[frame::HEADER_LEN + 20] ^= 4;
        assert!(matches!(
            decode(&flipped, |_| {}),
            Err(CodecError::ChecksumMismatch { .. })
        ));
        assert_eq!(seq_of(&log_key(77)).unwrap(), 77);
        assert!(seq_of(&[LOG_PREFIX, 1]).is_err());
    }
}
