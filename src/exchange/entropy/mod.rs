//! Entropy coding of a Bloom filter's bit array for transmission.
//!
//! Mitzenmacher, "Compressed Bloom Filters" (PODC 2001 / ToN 2002), shows that
//! a Bloom filter sent as a message should be sized for its *compressed* size
//! `z ≈ m·H(p)` (p = fraction of one bits) rather than its array size `m`. This
//! module is the compressor: it codes the array in within a few bytes of
//! `m·H(p̂)` bits, where `p̂` is the array's exact fraction of ones.
//!
//! # Side information
//!
//! The decoder needs `m_bits` and the exact number of one bits, [`Encoded::ones`];
//! the caller stores both in its message header (`ones` needs
//! `⌈log2(m_bits + 1)⌉` bits). Knowing the exact count lets both sides use the
//! empirical density `p̂ = ones / m_bits`: an i.i.d. model at `p̂` codes the array
//! in exactly `m·H(p̂)` bits (the maximum-likelihood code length), which by
//! Jensen's inequality is on average no worse than coding at the expected
//! density `1 − e^(−kn/m)`. The count also doubles as an integrity check: the
//! decoder fails with [`EntropyError::CountMismatch`] if the decoded array has a
//! different popcount.
//!
//! # Method
//!
//! rANS (Duda's asymmetric numeral systems, in the 64-bit-state / 32-bit-word
//! form of Giesen's `rans64`) over byte symbols — 8 filter bits per step — with
//! a static model `P(b) = p̂^popcount(b) · (1 − p̂)^(8 − popcount(b))` quantised to
//! a total of 2^24. At that precision the quantisation loss is below 10^-6 of
//! the entropy for 0.05 ≤ p̂ ≤ 0.95 (2·10^-4 at p̂ = 0.001); a 2^16 total would
//! lose 0.07% at p̂ = 0.06, more than the whole overhead budget of the paper's
//! 480,000-bit case. Densities above ½ need no special casing: the model is
//! symmetric, its most probable byte simply becomes `0xFF`.
//!
//! The bytes are split into two halves coded by two independent rANS *lanes*
//! run in lockstep, so that the CPU overlaps their dependency chains (roughly
//! doubling throughput). Each lane starts from state 1 rather than the usual
//! 2^31 and the decoder stops refilling a lane once its words are used up,
//! which saves ~1.8 bytes per lane over the usual start; the final state is
//! stored in its minimal 1–4 bytes. Measured over 1,000 filters of the
//! paper's 140,000-bit case, the payload averages 7.2 bytes over `m·H(p̂)/8`
//! (2 for the lane-length varint, ~2.6 per lane for the rANS start-up and
//! final state); the paper's simulations, using a Moffat–Neal–Witten
//! arithmetic coder, averaged 16 bytes over `m·H(p)/8`.
//!
//! Throughput, in MB/s of uncompressed filter: `cargo bench --bench
//! exchange` times whole messages (this coder, the frame and its CRC, the
//! receiver's filter) of a 2% filter of 1M keys (6.2 MB, p̂ ≈ 0.02) on the
//! thread's CPU clock: encode 300 (201–387 over 15 interleaved rounds),
//! decode 227 (213–273), on the 2-core AMD EPYC (Zen 4) VM under a
//! 1-minute load of 7.6 (at start and end) from other builds. The coder
//! alone is not timed separately.
//!
//! # Files
//! `model.rs` the byte model and the coder tables derived from it,
//! `encode.rs` and `decode.rs` the two directions, `tests.rs` the tests.
//!
//! # Payload format
//!
//! Specified byte by byte in `docs/FORMAT.md` § 12 (codec 1, rans): two lanes,
//! each a final state in 1–4 bytes and its `u32` words in decoding order, and a
//! model computed from `(m_bits, ones)` with correctly rounded IEEE-754
//! operations only, so every platform derives identical frequencies; changing
//! that computation changes the format.

use super::optimize::binary_entropy;
use thiserror::Error;

mod decode;
mod encode;
mod model;
#[cfg(test)]
mod tests;

#[cfg(any(test, feature = "test-internals"))]
pub use decode::decode_bits;
pub use decode::decode_bits_into;
pub use encode::encode_bits;

/// Largest bit array accepted: 2^36 bits (an 8 GiB array, 2^30 words).
///
/// The decoder allocates `⌈m_bits / 64⌉` words, and a very sparse array
/// legitimately compresses by a factor of ~10^5, so `m_bits` from an
/// untrusted header is the only thing bounding that allocation (and the
/// decoding time, ~40 s at 200 MB/s). Callers with a smaller memory budget
/// should reject larger `m_bits` themselves before calling [`decode_bits_into`].
pub const MAX_BITS: u64 = 1 << 36;

/// Lower end of the normalised rANS state interval `[L, 2^32·L)`.
const L: u64 = 1 << 31;

/// A compressed bit array and the side information needed to decode it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    /// Exact number of one bits in the array. The caller must transmit it (in
    /// the message header, next to `m_bits`) and pass it to [`decode_bits_into`].
    pub ones: u64,
    /// The coded bytes; empty when the array is all zeros or all ones.
    pub payload: Vec<u8>,
}

/// Why a bit array could not be encoded or a payload could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum EntropyError {
    /// `m_bits` exceeds the coder's limit of 2^36 bits (or this platform's address space), so
    /// the array is refused before anything is allocated.
    #[error("bit array of {m_bits} bits exceeds the limit of {max} bits")]
    TooManyBits {
        /// The requested array size in bits.
        m_bits: u64,
        /// The limit, 2^36 bits.
        max: u64,
    },
    /// The header claims more one bits than the array has bits.
    #[error("{ones} one bits cannot fit in a {m_bits}-bit array")]
    OnesExceedBits {
        /// Claimed number of one bits.
        ones: u64,
        /// Array size in bits.
        m_bits: u64,
    },
    /// The encoder was given a word slice whose length is not `⌈m_bits / 64⌉`.
    #[error("expected {expected} words for the bit array, got {found}")]
    WordCountMismatch {
        /// `⌈m_bits / 64⌉`.
        expected: u64,
        /// Length of the slice passed in.
        found: u64,
    },
    /// The encoder was given an array with bits set at or beyond `m_bits`.
    #[error("bits at or beyond bit {m_bits} are set")]
    BitsBeyondLength {
        /// Array size in bits.
        m_bits: u64,
    },
    /// The payload ends inside its own framing (the lane-length varint, or a
    /// lane boundary past the end of the payload).
    #[error("payload is truncated")]
    Truncated,
    /// Bytes are left over after every symbol has been decoded, or a payload
    /// is present where `ones` implies an empty one.
    #[error("payload has {extra} unused trailing bytes")]
    TrailingBytes {
        /// Number of unused bytes.
        extra: u64,
    },
    /// The payload is internally inconsistent: a coder lane did not return to
    /// its initial state, a state or varint is not minimally encoded, or the
    /// padding bits past `m_bits` are wrong. Bytes appended to or removed
    /// from a payload usually end up here, since lane boundaries are implied by
    /// the payload length.
    #[error("payload is corrupt: {what}")]
    Corrupt {
        /// Which consistency check failed.
        what: &'static str,
    },
    /// The decoded array's popcount differs from the `ones` side information.
    #[error("decoded array has {found} one bits, header says {expected}")]
    CountMismatch {
        /// `ones` as passed to the decoder.
        expected: u64,
        /// Popcount of the decoded array.
        found: u64,
    },
}

/// Expected payload size in bytes for an `m_bits` array with `ones` one
/// bits: `⌈m·H(p̂)/8⌉ + 7` (0 when the array is all zeros or all ones).
///
/// Every array with the same `(m_bits, ones)` has, up to quantisation, the
/// same probability under the coder's model, so the real payload is within a
/// few bytes of this: it overestimates by −1..+3 bytes on the paper's
/// 70,000- to 480,000-bit filters. The `+ 7` is the lane-length varint (2–3 bytes for 1 KiB–1 MiB
/// payloads) plus ~2.6 bytes per lane. Compare it with the plain size
/// `⌈m_bits/8⌉` to decide without encoding whether compression pays: it does
/// not near `p̂ = ½`, where `H(p̂) ≈ 1`.
#[must_use]
pub fn compressed_size_estimate(m_bits: u64, ones: u64) -> u64 {
    if ones == 0 || ones >= m_bits {
        return 0;
    }
    let m = m_bits as f64;
    let p = ones as f64 / m;
    let bits = m * binary_entropy(p);
    (bits / 8.0).ceil() as u64 + 7
}

/// How the array's bytes are split between the lanes.
struct Layout {
    /// `⌈m/64⌉` as stored in the word vector.
    n_words: usize,
    /// Same, as `u64`, for error reports.
    n_words_u64: u64,
    /// Words whose 8 bytes are all coded: `⌊n_sym / 8⌋`.
    n_full: usize,
    /// Coded bytes of word `n_full` (0..8).
    tail_bytes: usize,
    /// Full words in lane 0; lane 1 has `w0` or `w0 + 1`.
    w0: usize,
    /// Whether lane 1 has the extra full word `2·w0`.
    odd_word: bool,
    /// Word holding the last coded byte (`usize::MAX` if there is none).
    pad_word: usize,
    /// Valid bits of the last word.
    last_word_mask: u64,
}

impl Layout {
    fn new(m_bits: u64) -> Result<Self, EntropyError> {
        let too_many = EntropyError::TooManyBits {
            m_bits,
            max: MAX_BITS,
        };
        if m_bits > MAX_BITS {
            return Err(too_many);
        }
        let n_words_u64 = m_bits.div_ceil(64);
        let n_words = usize::try_from(n_words_u64).map_err(|_| too_many.clone())?;
        let n_sym = usize::try_from(m_bits.div_ceil(8)).map_err(|_| too_many)?;
        let n_full = n_sym / 8;
        let w0 = n_full / 2;
        let rem = m_bits % 64;
        Ok(Layout {
            n_words,
            n_words_u64,
            n_full,
            tail_bytes: n_sym % 8,
            w0,
            odd_word: n_full % 2 == 1,
            pad_word: n_sym.checked_sub(1).map_or(usize::MAX, |i| i / 8),
            last_word_mask: if rem == 0 { u64::MAX } else { (1 << rem) - 1 },
        })
    }

    /// Bits of the last coded byte that lie at or beyond `m_bits`.
    fn last_byte_pad_bits(&self, m_bits: u64) -> u64 {
        let used = m_bits % 8;
        if used == 0 {
            0
        } else {
            ((1u64 << (8 - used)) - 1) << (m_bits % 64)
        }
    }

    /// The value the encoder gives the padding bits: the more likely bit.
    fn pad_mask(&self, m_bits: u64, ones: u64) -> u64 {
        if ones > m_bits - ones {
            self.last_byte_pad_bits(m_bits)
        } else {
            0
        }
    }
}
