//! The decoder: reads both lanes forward, with an unrolled fast path while
//! each lane has 8 words left, and checks everything the encoder guarantees.

use super::model::{DecTable, Model};
use super::{EntropyError, Layout, L};

/// Decompresses a payload produced by [`encode_bits`](super::encode_bits) for an array of
/// `m_bits` bits with `ones` one bits, returning exactly the original words.
///
/// `m_bits` is checked against [`MAX_BITS`](super::MAX_BITS) and `ones` against `m_bits` before
/// anything is allocated. Hostile input cannot make the decoder panic or loop:
/// it does exactly `⌈m_bits / 8⌉` constant-time steps and then checks that both
/// lanes returned to their initial state with all their words consumed, that
/// the padding bits are as the encoder writes them and that the popcount is
/// `ones`. Those checks catch every truncation in the tests, but not all
/// corruption: rANS resynchronises after a small error, so 2.5% of single-bit
/// flips decode to a *different* array with the right popcount. The message
/// framing must carry its own checksum (e.g. CRC32).
///
/// # Errors
///
/// [`EntropyError::TooManyBits`] and [`EntropyError::OnesExceedBits`] for an
/// impossible header; [`EntropyError::Truncated`],
/// [`EntropyError::TrailingBytes`], [`EntropyError::Corrupt`] and
/// [`EntropyError::CountMismatch`] for a payload that is not what
/// [`encode_bits`](super::encode_bits) produced for this `(m_bits, ones)`.
#[cfg(any(test, feature = "test-internals"))]
pub fn decode_bits(payload: &[u8], m_bits: u64, ones: u64) -> Result<Vec<u64>, EntropyError> {
    let layout = Layout::new(m_bits)?;
    let mut out = vec![0u64; layout.n_words];
    decode_bits_into(payload, m_bits, ones, |i, w| out[i] = w)?;
    Ok(out)
}

/// [`decode_bits`] without an array of its own: calls `emit(i, word)` for
/// the words of the array that may be non-zero (each at most once, in no
/// particular order, `i < ⌈m_bits / 64⌉`; the others are zero), so that the
/// receiver can decode straight into its filter. On an error, some words
/// may have been emitted: discard them.
///
/// # Errors
/// Those of [`decode_bits`].
pub fn decode_bits_into(
    payload: &[u8],
    m_bits: u64,
    ones: u64,
    emit: impl FnMut(usize, u64),
) -> Result<(), EntropyError> {
    let layout = Layout::new(m_bits)?;
    if ones > m_bits {
        return Err(EntropyError::OnesExceedBits { ones, m_bits });
    }
    if ones == 0 || ones == m_bits {
        return uniform(payload, &layout, ones == m_bits, emit);
    }
    let lanes = split_lanes(payload)?;
    let table = Model::new(m_bits, ones).decode_table();
    let mut sink = Sink::new(&layout, m_bits, ones, emit);
    decode_lanes(lanes, &table, &layout, &mut sink)?;
    sink.finish(ones)
}

/// The all-zeros or all-ones array, whose payload must be empty.
fn uniform(
    payload: &[u8],
    layout: &Layout,
    all_ones: bool,
    mut emit: impl FnMut(usize, u64),
) -> Result<(), EntropyError> {
    if !payload.is_empty() {
        return Err(EntropyError::TrailingBytes {
            extra: payload.len() as u64,
        });
    }
    if all_ones {
        for i in 0..layout.n_words {
            let last = i + 1 == layout.n_words;
            emit(
                i,
                if last {
                    layout.last_word_mask
                } else {
                    u64::MAX
                },
            );
        }
    }
    Ok(())
}

/// Where decoded words go: checks the padding of the last coded byte,
/// clears it, counts the ones, and passes each word on.
struct Sink<'l, F> {
    layout: &'l Layout,
    pad: u64,
    pad_bits: u64,
    found: u64,
    emit: F,
}

impl<'l, F: FnMut(usize, u64)> Sink<'l, F> {
    fn new(layout: &'l Layout, m_bits: u64, ones: u64, emit: F) -> Self {
        Sink {
            layout,
            pad: layout.pad_mask(m_bits, ones),
            pad_bits: layout.last_byte_pad_bits(m_bits),
            found: 0,
            emit,
        }
    }

    #[inline(always)]
    fn put(&mut self, i: usize, mut w: u64) -> Result<(), EntropyError> {
        if i == self.layout.pad_word {
            if w & self.pad_bits != self.pad {
                return Err(EntropyError::Corrupt {
                    what: "padding bits past m_bits",
                });
            }
            w &= !self.pad_bits;
        }
        self.found += u64::from(w.count_ones());
        (self.emit)(i, w);
        Ok(())
    }

    /// Checks the popcount against `ones`.
    fn finish(self, ones: u64) -> Result<(), EntropyError> {
        if self.found != ones {
            return Err(EntropyError::CountMismatch {
                expected: ones,
                found: self.found,
            });
        }
        Ok(())
    }
}

/// The two lanes of `varint(len(lane 0)) ‖ lane 0 ‖ lane 1`.
fn split_lanes(payload: &[u8]) -> Result<[DecLane<'_>; 2], EntropyError> {
    let (len0, rest) = read_varint(payload)?;
    let len0 = usize::try_from(len0).map_err(|_| EntropyError::Truncated)?;
    let (bytes0, bytes1) = rest.split_at_checked(len0).ok_or(EntropyError::Truncated)?;
    Ok([DecLane::new(bytes0)?, DecLane::new(bytes1)?])
}

/// Decodes every coded byte into `sink` (lane 0 the first `w0` words, lane 1
/// the rest) and checks that both lanes ended where the encoder started.
fn decode_lanes<F: FnMut(usize, u64)>(
    [mut lane0, mut lane1]: [DecLane<'_>; 2],
    table: &DecTable,
    layout: &Layout,
    sink: &mut Sink<'_, F>,
) -> Result<(), EntropyError> {
    let w0 = layout.w0;
    for i in 0..w0 {
        let (a, b) = match (lane0.peek8(), lane1.peek8()) {
            (Some(x0), Some(x1)) => Block::decode(table, [&mut lane0, &mut lane1], [x0, x1]),
            _ => (0..8).fold((0, 0), |(s0, s1), k| {
                let sym0 = u64::from(lane0.get(table));
                let sym1 = u64::from(lane1.get(table));
                (s0 | sym0 << (8 * k), s1 | sym1 << (8 * k))
            }),
        };
        sink.put(i, a)?;
        sink.put(w0 + i, b)?;
    }
    let mut next = 2 * w0;
    if layout.odd_word && next < layout.n_words {
        let w = (0..8).fold(0, |acc, k| acc | u64::from(lane1.get(table)) << (8 * k));
        sink.put(next, w)?;
        next += 1;
    }
    if layout.tail_bytes > 0 && next < layout.n_words {
        let w =
            (0..layout.tail_bytes).fold(0, |acc, k| acc | u64::from(lane1.get(table)) << (8 * k));
        sink.put(next, w)?;
    }
    lane0.finish()?;
    lane1.finish()
}

/// Fast-path decoding of 8 symbols per lane, given the next 8 words of each
/// lane: enough, since a symbol reads at most one word, to refill without
/// checking for the end of the lane.
struct Block<'a> {
    x: [u64; 2],
    /// Words used so far from `words`.
    read: [usize; 2],
    words: [&'a [u8; 32]; 2],
    /// The decoded array words, filled a byte at a time.
    out: [u64; 2],
}

impl<'a> Block<'a> {
    /// Decodes 8 symbols from each lane, given their next 8 words, and
    /// returns the two output words.
    #[inline(always)]
    fn decode(
        table: &DecTable,
        [lane0, lane1]: [&mut DecLane<'_>; 2],
        words: [&'a [u8; 32]; 2],
    ) -> (u64, u64) {
        let mut b = Block {
            x: [lane0.x, lane1.x],
            read: [0, 0],
            words,
            out: [0, 0],
        };
        // Unrolled by hand: LLVM keeps the equivalent loop rolled.
        b.step(table, 0);
        b.step(table, 8);
        b.step(table, 16);
        b.step(table, 24);
        b.step(table, 32);
        b.step(table, 40);
        b.step(table, 48);
        b.step(table, 56);
        lane0.advance(b.x[0], b.read[0]);
        lane1.advance(b.x[1], b.read[1]);
        (b.out[0], b.out[1])
    }

    /// Decodes one symbol from each lane into bits `shift..shift + 8` of
    /// the output words.
    #[inline(always)]
    fn step(&mut self, table: &DecTable, shift: u32) {
        let (s0, y0) = table.step(self.x[0]);
        let (s1, y1) = table.step(self.x[1]);
        (self.x[0], self.read[0]) = refill(y0, self.words[0], self.read[0]);
        (self.x[1], self.read[1]) = refill(y1, self.words[1], self.read[1]);
        self.out[0] |= u64::from(s0) << shift;
        self.out[1] |= u64::from(s1) << shift;
    }
}

/// `x ← x·2^32 + next word` if `x < L`. Whether a refill is due is close
/// to random, so it is blended in with a mask instead of branching (LLVM
/// turns a plain `if` here into a branch).
#[inline(always)]
fn refill(x: u64, words: &[u8; 32], read: usize) -> (u64, usize) {
    let take = x < L;
    let at = 4 * (read & 7);
    let next = match words.get(at..at + 4) {
        Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]),
        _ => 0,
    };
    let mask = 0u64.wrapping_sub(u64::from(take));
    let shifted = x << 32 | u64::from(next);
    (x ^ ((x ^ shifted) & mask), read + usize::from(take))
}

/// One decoder lane.
struct DecLane<'a> {
    x: u64,
    /// The lane's words, `4·n` bytes.
    words: &'a [u8],
    /// Byte offset of the next unread word.
    pos: usize,
}

impl<'a> DecLane<'a> {
    fn new(bytes: &'a [u8]) -> Result<Self, EntropyError> {
        let state_len = bytes.len().checked_sub(1).ok_or(EntropyError::Truncated)? % 4 + 1;
        let (state, words) = bytes.split_at(state_len);
        if state_len > 1 && state.last() == Some(&0) {
            return Err(EntropyError::Corrupt {
                what: "lane state has a leading zero byte",
            });
        }
        let x = state
            .iter()
            .rev()
            .fold(0u64, |acc, &b| acc << 8 | u64::from(b));
        let mut lane = DecLane { x, words, pos: 0 };
        lane.refill();
        Ok(lane)
    }

    /// The next 8 words, if the lane has that many left: enough for 8
    /// symbols, since each reads at most one.
    #[inline(always)]
    fn peek8(&self) -> Option<&'a [u8; 32]> {
        self.words.get(self.pos..self.pos + 32)?.try_into().ok()
    }

    /// Stores the state after a [`Self::peek8`] block that read `read` words.
    #[inline(always)]
    fn advance(&mut self, x: u64, read: usize) {
        self.x = x;
        self.pos += 4 * read;
    }

    /// Reads a word if the state is below `L` and the lane has words left.
    /// Once they are used up the lane is in its start-up phase, where the
    /// encoder (starting from state 1) emitted nothing.
    #[inline(always)]
    fn refill(&mut self) {
        if self.x < L {
            if let Some(&[a, b, c, d]) = self.words.get(self.pos..self.pos + 4) {
                self.x = self.x << 32 | u64::from(u32::from_le_bytes([a, b, c, d]));
                self.pos += 4;
            }
        }
    }

    /// Decodes one symbol outside the [`Self::peek8`] fast path.
    #[inline(always)]
    fn get(&mut self, table: &DecTable) -> u8 {
        let (sym, x) = table.step(self.x);
        self.x = x;
        self.refill();
        sym
    }

    /// Checks that the lane ended where the encoder started.
    fn finish(self) -> Result<(), EntropyError> {
        let extra = self.words.len() - self.pos;
        if extra > 0 {
            return Err(EntropyError::TrailingBytes {
                extra: extra as u64,
            });
        }
        if self.x != 1 {
            return Err(EntropyError::Corrupt {
                what: "coder state did not return to its initial value",
            });
        }
        Ok(())
    }
}

/// Reads a minimally encoded LEB128 varint, returning it and the rest.
fn read_varint(bytes: &[u8]) -> Result<(u64, &[u8]), EntropyError> {
    let mut v = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        let chunk = u64::from(b & 0x7F);
        if i == 9 && chunk > 1 {
            return Err(EntropyError::Corrupt {
                what: "varint overflows 64 bits",
            });
        }
        v |= chunk << (7 * i);
        if b & 0x80 == 0 {
            if i > 0 && b == 0 {
                return Err(EntropyError::Corrupt {
                    what: "varint is not minimally encoded",
                });
            }
            return Ok((v, &bytes[i + 1..]));
        }
    }
    if bytes.len() >= 10 {
        Err(EntropyError::Corrupt {
            what: "varint longer than 10 bytes",
        })
    } else {
        Err(EntropyError::Truncated)
    }
}
