//! The encoder: two rANS lanes run in lockstep, coding the array in reverse.

use super::model::{EncSym, Model};
use super::{Encoded, EntropyError, Layout};

/// Compresses a Bloom filter bit array.
///
/// `words` holds bit `i` in bit `i % 64` of `words[i / 64]`; it must have
/// exactly `⌈m_bits / 64⌉` words and no bit set at or beyond `m_bits`. Returns
/// the payload together with the one-bit count the decoder needs.
///
/// The payload is about `m·H(p̂)/8 + 7` bytes for `p̂ = ones / m_bits` (see
/// [`compressed_size_estimate`](super::compressed_size_estimate)); for the paper's `n = 10,000, m = 140,000,
/// k = 2` filters that is 9,911 bytes on average, against 17,500 plain. Near
/// `p̂ = ½` it is a few bytes *larger* than the plain array, so callers should
/// send whichever is shorter.
///
/// # Errors
///
/// [`EntropyError::TooManyBits`] if `m_bits >` [`MAX_BITS`](super::MAX_BITS),
/// [`EntropyError::WordCountMismatch`] if `words.len() ≠ ⌈m_bits / 64⌉` and
/// [`EntropyError::BitsBeyondLength`] if a bit at or past `m_bits` is set.
pub fn encode_bits(words: &[u64], m_bits: u64) -> Result<Encoded, EntropyError> {
    let layout = checked_layout(words, m_bits)?;
    let ones: u64 = words.iter().map(|w| u64::from(w.count_ones())).sum();
    if ones == 0 || ones == m_bits {
        return Ok(Encoded {
            ones,
            payload: Vec::new(),
        });
    }
    let table = Model::new(m_bits, ones).encode_table();
    let pad = layout.pad_mask(m_bits, ones);
    let lanes = code_lanes(words, &layout, &table, pad);
    Ok(Encoded {
        ones,
        payload: serialize(lanes),
    })
}

/// The lane layout of an `m_bits` array, after checking that `words` is one.
fn checked_layout(words: &[u64], m_bits: u64) -> Result<Layout, EntropyError> {
    let layout = Layout::new(m_bits)?;
    let found = u64::try_from(words.len()).unwrap_or(u64::MAX);
    if found != layout.n_words_u64 {
        return Err(EntropyError::WordCountMismatch {
            expected: layout.n_words_u64,
            found,
        });
    }
    if let Some(&last) = words.last() {
        if last & !layout.last_word_mask != 0 {
            return Err(EntropyError::BitsBeyondLength { m_bits });
        }
    }
    Ok(layout)
}

/// Codes the array's bytes into the two lanes, the bits of the last coded
/// byte past `m_bits` set to `pad`.
fn code_lanes(words: &[u64], layout: &Layout, table: &[EncSym; 256], pad: u64) -> [EncLane; 2] {
    // The padded copy of the word holding the last coded byte.
    let word = |j: usize| -> u64 {
        let w = words.get(j).copied().unwrap_or(0);
        if j == layout.pad_word {
            w | pad
        } else {
            w
        }
    };
    let mut lanes = [EncLane::new(), EncLane::new()];
    // rANS encodes in reverse decoding order: lane 1's tail first...
    if layout.tail_bytes > 0 {
        lanes[1].put_word(table, word(layout.n_full), layout.tail_bytes);
    }
    if layout.odd_word {
        lanes[1].put_word(table, word(2 * layout.w0), 8);
    }
    // ...then both lanes in lockstep, a word at a time, so that the CPU
    // overlaps their dependency chains.
    for j in (0..layout.w0).rev() {
        let [l0, l1] = &mut lanes;
        let (a, b) = (word(j), word(layout.w0 + j));
        l0.reserve8();
        l1.reserve8();
        let (mut x0, mut n0, mut x1, mut n1) = (l0.x, l0.len, l1.x, l1.len);
        for k in (0..8).rev() {
            (x0, n0) = put(table, &mut l0.out, x0, n0, byte_of(a, k));
            (x1, n1) = put(table, &mut l1.out, x1, n1, byte_of(b, k));
        }
        (l0.x, l0.len, l1.x, l1.len) = (x0, n0, x1, n1);
    }
    lanes
}

/// The payload: `varint(len(lane 0)) ‖ lane 0 ‖ lane 1`.
fn serialize(lanes: [EncLane; 2]) -> Vec<u8> {
    let [lane0, lane1] = lanes.map(EncLane::finish);
    let mut payload = Vec::with_capacity(10 + lane0.len() + lane1.len());
    write_varint(&mut payload, lane0.len() as u64);
    payload.extend_from_slice(&lane0);
    payload.extend_from_slice(&lane1);
    payload
}

/// Byte `k` (little-endian) of `w`.
#[inline(always)]
fn byte_of(w: u64, k: usize) -> u8 {
    (w >> (8 * k)) as u8
}

/// Codes `sym` into state `x` of a lane that has emitted `len` words into
/// `out`, first shifting 32 bits out if coding would leave `[L, 2^32·L)`.
/// Returns the new state and word count.
///
/// Whether a symbol emits is close to random, so nothing here branches: the
/// word is stored unconditionally (into room made by [`EncLane::reserve8`])
/// and kept only if needed, and the shift is blended in with a mask (LLVM
/// turns an `if` here into a branch). Starting from `x = 1` the
/// state stays below `L < x_max` until it has absorbed ~31 bits, so nothing
/// is emitted during that start-up phase.
#[inline(always)]
fn put(table: &[EncSym; 256], out: &mut [u32], x: u64, len: usize, sym: u8) -> (u64, usize) {
    let e = &table[usize::from(sym)];
    let emit = x >= e.x_max;
    if let Some(slot) = out.get_mut(len) {
        *slot = x as u32;
    }
    let mask = 0u64.wrapping_sub(u64::from(emit));
    let x = x ^ ((x ^ (x >> 32)) & mask);
    (e.code(x), len + usize::from(emit))
}

/// One encoder lane: its state and the words it has emitted (in encoding
/// order, the reverse of decoding order).
struct EncLane {
    x: u64,
    out: Vec<u32>,
    /// Number of words emitted; `out` is kept at least 8 words longer so a
    /// word's 8 symbols can be coded without capacity checks.
    len: usize,
}

impl EncLane {
    fn new() -> Self {
        EncLane {
            x: 1,
            out: Vec::new(),
            len: 0,
        }
    }

    /// Makes room for the up to 8 words that the next 8 symbols can emit.
    #[inline(always)]
    fn reserve8(&mut self) {
        if self.out.len() < self.len + 8 {
            self.out.resize(2 * self.out.len() + 64, 0);
        }
    }

    /// Codes the low `bytes` bytes of `w`, most significant first.
    fn put_word(&mut self, table: &[EncSym; 256], w: u64, bytes: usize) {
        self.reserve8();
        for k in (0..bytes).rev() {
            (self.x, self.len) = put(table, &mut self.out, self.x, self.len, byte_of(w, k));
        }
    }

    /// Serialises the lane: the final state (after moving its low word into
    /// the stream if it has more than 32 bits) in its minimal 1–4 bytes, then
    /// the words in decoding order.
    fn finish(mut self) -> Vec<u8> {
        self.out.truncate(self.len);
        if self.x > u64::from(u32::MAX) {
            self.out.push(self.x as u32);
            self.x >>= 32;
        }
        let state_len = (8 - self.x.leading_zeros() as usize / 8).clamp(1, 4);
        let mut bytes = Vec::with_capacity(state_len + 4 * self.out.len());
        bytes.extend_from_slice(&self.x.to_le_bytes()[..state_len]);
        for w in self.out.iter().rev() {
            bytes.extend_from_slice(&w.to_le_bytes());
        }
        bytes
    }
}

/// Appends `v` as an unsigned LEB128 varint.
fn write_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}
