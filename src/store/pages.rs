//! Counter pages on disk, and the arithmetic that folds logged operations
//! into them.
//!
//! # Chunks
//! Counters are stored in *chunks* of [`CHUNK_BLOCKS`] = 16 counter blocks
//! (16 × 256 bytes = 4 KiB of packed 4-bit counters, the layout of
//! [`crate::counting`]): one sled value per chunk. One value per 256-byte block
//! would cost one sled write (≈ 9 µs) per touched block; a chunk amortises that
//! over 16 blocks. Larger chunks were rejected because sled keeps up to 16
//! values in a leaf node and writes a node larger than 128 KiB (its blob
//! threshold at the default 512 KiB segment size) as a separate blob file:
//! 16 × 4 KiB = 64 KiB stays inline. A chunk that was never written is all zeros,
//! so creating a table writes nothing.
//!
//! Chunk body (inside a [`Kind::CounterPage`] frame, little-endian):
//!
//! ```text
//! offset  size      field
//!      0     8      chunk index (u64)
//!      8     4      block count b (u32; 16, or fewer in the last chunk)
//!     12     4      reserved, zero
//!     16     256·b  packed 4-bit counters of blocks 16·index .. 16·index + b
//! ```
//!
//! Sled key: `0x01 ‖ chunk index (u64, big-endian)`.
//!
//! # Position entries
//! A fold (and an open) turns logged operations into *entries*, one `u64` per
//! distinct position of each key: `position << 24 | op_index << 1 | insert`.
//! Sorting the entries groups them by chunk and, within one position, keeps
//! the log's order — which matters, because a 15 is sticky: `14, +1, −1` ends
//! at 15, `14, −1, +1` at 14. 40 bits of position (m ≤ 2^40) and 23 bits of
//! operation index bound one fold pass to [`MAX_PASS_OPS`] operations.

use crate::codec::frame::{self, Kind};
use crate::counting::{nibble, COUNTER_BLOCK_BYTES};
use crate::error::CodecError;
use crate::hash::positions;
use crate::params::{FilterParams, BLOCK_BITS};

use super::wal::LogOp;

/// Counter blocks per chunk.
pub(crate) const CHUNK_BLOCKS: u64 = 16;
/// Counters per chunk.
pub(crate) const CHUNK_COUNTERS: u64 = CHUNK_BLOCKS * BLOCK_BITS;
/// Prefix byte of chunk keys.
pub(crate) const CHUNK_PREFIX: u8 = 1;
/// Bytes of the chunk body before the counters.
const CHUNK_HEADER: usize = 16;
/// The most operations one pass of a fold or an open sorts at once (23 bits).
pub(crate) const MAX_PASS_OPS: u64 = 1 << 23;

/// The sled key of chunk `idx`.
pub(crate) fn chunk_key(idx: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = CHUNK_PREFIX;
    k[1..].copy_from_slice(&idx.to_be_bytes());
    k
}

/// The chunk index of a chunk key.
pub(crate) fn chunk_of_key(key: &[u8]) -> Result<u64, CodecError> {
    match key {
        [CHUNK_PREFIX, rest @ ..] if rest.len() == 8 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(rest);
            Ok(u64::from_be_bytes(b))
        }
        _ => Err(CodecError::InvalidField {
            field: "chunk key",
            reason: format!(
                "{} bytes, expected 9 starting with {CHUNK_PREFIX}",
                key.len()
            ),
        }),
    }
}

/// Number of chunks of a filter.
pub(crate) fn chunk_count(p: &FilterParams) -> u64 {
    p.num_blocks().div_ceil(CHUNK_BLOCKS)
}

/// Number of blocks in chunk `idx` (`idx < chunk_count`).
pub(crate) fn blocks_in_chunk(p: &FilterParams, idx: u64) -> u64 {
    (p.num_blocks() - idx * CHUNK_BLOCKS).min(CHUNK_BLOCKS)
}

/// Encodes chunk `idx` holding `counters` (256 bytes per block).
pub(crate) fn encode_chunk(idx: u64, counters: &[u8]) -> Vec<u8> {
    let blocks = (counters.len() / COUNTER_BLOCK_BYTES) as u32;
    let mut body = Vec::with_capacity(CHUNK_HEADER + counters.len());
    body.extend_from_slice(&idx.to_le_bytes());
    body.extend_from_slice(&blocks.to_le_bytes());
    body.extend_from_slice(&[0u8; 4]);
    body.extend_from_slice(counters);
    frame::encode(Kind::CounterPage, 0, &body)
}

/// Decodes chunk `idx` of a filter with `params`, returning its counters.
pub(crate) fn decode_chunk<'a>(
    bytes: &'a [u8],
    idx: u64,
    p: &FilterParams,
) -> Result<&'a [u8], CodecError> {
    let body = frame::decode_kind(bytes, Kind::CounterPage)?.body;
    if body.len() < CHUNK_HEADER {
        return Err(CodecError::Truncated {
            needed: CHUNK_HEADER as u64,
            found: body.len() as u64,
        });
    }
    let mut b8 = [0u8; 8];
    b8.copy_from_slice(&body[0..8]);
    let stored_idx = u64::from_le_bytes(b8);
    let mut b4 = [0u8; 4];
    b4.copy_from_slice(&body[8..12]);
    let blocks = u32::from_le_bytes(b4) as u64;
    if body[12..16] != [0u8; 4] {
        return Err(CodecError::ReservedNotZero);
    }
    if stored_idx != idx {
        return Err(CodecError::InvalidField {
            field: "chunk index",
            reason: format!("{stored_idx} stored under the key of chunk {idx}"),
        });
    }
    if idx >= chunk_count(p) || blocks != blocks_in_chunk(p, idx) {
        return Err(CodecError::InvalidField {
            field: "chunk block count",
            reason: format!(
                "chunk {idx} holds {blocks} blocks; the table has {} blocks",
                p.num_blocks()
            ),
        });
    }
    let counters = &body[CHUNK_HEADER..];
    if counters.len() as u64 != blocks * COUNTER_BLOCK_BYTES as u64 {
        return Err(CodecError::InvalidField {
            field: "chunk counters",
            reason: format!("{} bytes for {blocks} blocks", counters.len()),
        });
    }
    Ok(counters)
}

/// Appends the entries of operation number `op_index` (see module docs).
#[inline]
pub(crate) fn push_entries(p: &FilterParams, op_index: u64, op: LogOp, out: &mut Vec<u64>) {
    debug_assert!(op_index < MAX_PASS_OPS);
    let tail = (op_index << 1) | op.insert as u64;
    for &pos in positions(p.layout(), p.m(), p.k(), op.hash).as_slice() {
        out.push((pos << 24) | tail);
    }
}

/// Position of an entry.
#[inline]
pub(crate) fn entry_pos(e: u64) -> u64 {
    e >> 24
}

/// Chunk of an entry.
#[inline]
pub(crate) fn entry_chunk(e: u64) -> u64 {
    entry_pos(e) / CHUNK_COUNTERS
}

/// Applies sorted `entries` (all inside the chunk whose first counter is
/// `base`) to `counters`. A decrement of a zero counter cannot come from a
/// validated log and is ignored (it leaves a zero, which can only drop bits
/// that no key holds).
pub(crate) fn apply_entries(counters: &mut [u8], base: u64, entries: &[u64]) {
    for &e in entries {
        let i = (entry_pos(e) - base) as usize;
        if e & 1 == 1 {
            nibble::inc(counters, i);
        } else {
            nibble::dec(counters, i);
        }
    }
}

/// Splits sorted entries into runs of one chunk each: `(chunk, entries)`.
pub(crate) fn by_chunk(entries: &[u64]) -> impl Iterator<Item = (u64, &[u64])> {
    let mut rest = entries;
    std::iter::from_fn(move || {
        let first = *rest.first()?;
        let chunk = entry_chunk(first);
        let end = rest.partition_point(|&e| entry_chunk(e) == chunk);
        let (run, tail) = rest.split_at(end);
        rest = tail;
        Some((chunk, run))
    })
}

/// The "counter > 0" word of 64 counters packed in 32 bytes: bit `j` is set
/// when counter `j` is non-zero. Branch-free: the two nibbles of each byte are
/// tested with a SWAR trick on 8 bytes at a time.
#[inline]
pub(crate) fn nonzero_word(bytes32: &[u8]) -> u64 {
    let mut w = 0u64;
    for (q, chunk) in bytes32.chunks_exact(8).enumerate() {
        let mut a = [0u8; 8];
        a.copy_from_slice(chunk);
        let x = u64::from_le_bytes(a);
        // Per byte: bit 0 = low nibble non-zero, bit 4 = high nibble non-zero.
        let lo = x & 0x0f0f_0f0f_0f0f_0f0f;
        let hi = (x >> 4) & 0x0f0f_0f0f_0f0f_0f0f;
        let lo_nz = ((lo + 0x0f0f_0f0f_0f0f_0f0f) >> 4) & 0x0101_0101_0101_0101;
        let hi_nz = ((hi + 0x0f0f_0f0f_0f0f_0f0f) >> 4) & 0x0101_0101_0101_0101;
        // Interleave: counter 2j is lo of byte j, counter 2j+1 is hi of byte j.
        let mut bits = 0u64;
        for j in 0..8 {
            bits |= ((lo_nz >> (8 * j)) & 1) << (2 * j);
            bits |= ((hi_nz >> (8 * j)) & 1) << (2 * j + 1);
        }
        w |= bits << (16 * q);
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::{HashSpec, KeyHash};
    use crate::params::Layout;

    #[test]
    fn nonzero_word_matches_the_core_definition() {
        let mut b = [0u8; 32];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..2000 {
            for byte in b.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Mostly zeros and small counters, some 15s.
                *byte = match x % 5 {
                    0 => (x >> 8) as u8,
                    1 => 0xf0,
                    2 => 0x0f,
                    _ => 0,
                };
            }
            assert_eq!(nonzero_word(&b), nibble::nonzero_word(&b), "round {round}");
        }
    }

    #[test]
    fn chunk_round_trip_and_checks() {
        let p = FilterParams::new(Layout::Blocked, 512 * 20, 3, HashSpec::xxh3(1)).unwrap();
        assert_eq!(chunk_count(&p), 2);
        assert_eq!(blocks_in_chunk(&p, 1), 4);
        let counters = vec![0x21u8; 4 * 256];
        let bytes = encode_chunk(1, &counters);
        assert_eq!(decode_chunk(&bytes, 1, &p).unwrap(), &counters[..]);
        // Stored under another key, or with the wrong size: refused.
        assert!(decode_chunk(&bytes, 0, &p).is_err());
        let wrong = encode_chunk(0, &counters);
        assert!(decode_chunk(&wrong, 0, &p).is_err());
        assert_eq!(chunk_of_key(&chunk_key(5)).unwrap(), 5);
        assert!(chunk_of_key(&[CHUNK_PREFIX]).is_err());
    }

    #[test]
    fn entries_keep_log_order_within_a_position() {
        let p = FilterParams::new(Layout::Blocked, 512, 1, HashSpec::xxh3(1)).unwrap();
        let h = KeyHash { h1: 3, h2: 5 };
        let mut e = Vec::new();
        // Counter at 14: insert then remove → 15 (sticky); remove then insert → 14.
        push_entries(
            &p,
            0,
            LogOp {
                insert: true,
                hash: h,
            },
            &mut e,
        );
        push_entries(
            &p,
            1,
            LogOp {
                insert: false,
                hash: h,
            },
            &mut e,
        );
        e.sort_unstable();
        let pos = entry_pos(e[0]) as usize;
        let mut c = vec![0u8; 256];
        nibble::set(&mut c, pos, 14);
        apply_entries(&mut c, 0, &e);
        assert_eq!(nibble::get(&c, pos), 15);
        let mut e = Vec::new();
        push_entries(
            &p,
            0,
            LogOp {
                insert: false,
                hash: h,
            },
            &mut e,
        );
        push_entries(
            &p,
            1,
            LogOp {
                insert: true,
                hash: h,
            },
            &mut e,
        );
        e.sort_unstable();
        nibble::set(&mut c, pos, 14);
        apply_entries(&mut c, 0, &e);
        assert_eq!(nibble::get(&c, pos), 14);
    }
}
