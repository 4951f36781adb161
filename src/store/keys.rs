//! The key space of a table generation's sled tree: one prefix byte per
//! kind of record, then a big-endian number, so that a prefix scan returns
//! the records of one kind in numeric order.
//! The key table is in `docs/FORMAT.md` §10; the records are the state
//! (§11), counter pages ([`pages`](super::pages)) and log records
//! ([`wal`](super::wal)).

use crate::error::CodecError;

/// Key of the generation's state record.
pub(crate) const STATE_KEY: &[u8] = &[0];
/// Prefix byte of counter chunk keys.
pub(crate) const CHUNK_PREFIX: u8 = 1;
/// Prefix byte of log record keys.
pub(crate) const LOG_PREFIX: u8 = 2;

/// The key `prefix ‖ n (u64 BE)`.
pub(crate) fn numbered(prefix: u8, n: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = prefix;
    k[1..].copy_from_slice(&n.to_be_bytes());
    k
}

/// The number of a key made by [`numbered`] with `prefix`.
pub(crate) fn number_of(key: &[u8], prefix: u8, field: &'static str) -> Result<u64, CodecError> {
    match key {
        [p, rest @ ..] if *p == prefix && rest.len() == 8 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(rest);
            Ok(u64::from_be_bytes(b))
        }
        _ => Err(CodecError::InvalidField {
            field,
            reason: format!("{} bytes, expected 9 starting with {prefix}", key.len()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_keys_round_trip_and_sort_numerically() {
        assert_eq!(
            number_of(&numbered(LOG_PREFIX, 77), LOG_PREFIX, "k").unwrap(),
            77
        );
        assert!(number_of(&numbered(LOG_PREFIX, 77), CHUNK_PREFIX, "k").is_err());
        assert!(number_of(&[LOG_PREFIX, 1], LOG_PREFIX, "k").is_err());
        assert!(numbered(CHUNK_PREFIX, 255) < numbered(CHUNK_PREFIX, 256));
    }
}
