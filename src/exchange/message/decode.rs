//! Decoding a message (FORMAT.md § 12): every check of the header before
//! the payload is looked at, a plain payload queried in place, a coded one
//! decoded straight into the receiver's filter.

use super::{stats_defect, ExchangeError, DEFAULT_MAX_MESSAGE_BITS, FLAG_BUILD_STATS};
use crate::codec::filter_file::{Codec, CounterWidth, DescriptorV1};
use crate::codec::frame::{self, FrameKind, Kind};
use crate::codec::reader::ByteReader;
use crate::error::{CodecError, ParamError};
use crate::exchange::entropy;
use crate::exchange::estimate::{join_size_from_counts, BuildStats, JoinSizeEstimate};
use crate::filter::bloom::{check_compatible, BitFilter, BloomRead, FilterView};
use crate::filter::hash::KeyHash;
use crate::filter::params::{FilterParams, Layout};

/// A decoded message, borrowing its payload.
#[derive(Clone, Copy, Debug)]
pub struct DecodedMessage<'a> {
    /// Full filter or delta.
    pub kind: FrameKind,
    /// The descriptor (shape, seed, codec, key count).
    pub descriptor: DescriptorV1,
    /// The version of the filter this message produces.
    pub version: u64,
    /// For a delta, the version it applies to; 0 for a full message.
    pub base_version: u64,
    /// One bits in the transmitted array (the filter, or the XOR).
    pub ones: u64,
    stats: Option<BuildStats>,
    payload: &'a [u8],
}

/// A filter received in a message: borrowed from the message bytes when it
/// was sent plain, owned when it had to be decoded.
#[derive(Debug)]
pub enum ReceivedFilter<'a> {
    /// Queried in place over the message bytes.
    Borrowed(FilterView<'a>),
    /// Decoded from an entropy-coded payload.
    Owned(BitFilter),
}

impl ReceivedFilter<'_> {
    /// The filter as an owned [`BitFilter`], detached from the message bytes:
    /// what a receiver keeps beyond the message's lifetime (a cache of
    /// decoded filters shared by queries). A borrowed filter is copied once;
    /// an owned one is returned as is. Fails only if the copy cannot be
    /// allocated.
    pub fn into_owned(self) -> Result<BitFilter, ParamError> {
        match self {
            ReceivedFilter::Borrowed(v) => v.to_owned_filter(),
            ReceivedFilter::Owned(f) => Ok(f),
        }
    }
}

impl BloomRead for ReceivedFilter<'_> {
    fn params(&self) -> &FilterParams {
        match self {
            ReceivedFilter::Borrowed(v) => v.params(),
            ReceivedFilter::Owned(f) => f.params(),
        }
    }
    #[inline]
    fn word(&self, i: usize) -> u64 {
        match self {
            ReceivedFilter::Borrowed(v) => v.word(i),
            ReceivedFilter::Owned(f) => f.word(i),
        }
    }
    #[inline]
    fn prefetch_word(&self, i: usize) {
        match self {
            ReceivedFilter::Borrowed(v) => v.prefetch_word(i),
            ReceivedFilter::Owned(f) => f.prefetch_word(i),
        }
    }
    // The inner filter's own lookup (its compiled probe, its block reads),
    // not the default one word at a time through the match above.
    #[inline]
    fn contains_hash(&self, h: KeyHash) -> bool {
        match self {
            ReceivedFilter::Borrowed(v) => v.contains_hash(h),
            ReceivedFilter::Owned(f) => f.contains_hash(h),
        }
    }
    #[inline]
    fn contains_many_into<K: AsRef<[u8]>>(&self, keys: &[K], out: &mut [bool]) {
        match self {
            ReceivedFilter::Borrowed(v) => v.contains_many_into(keys, out),
            ReceivedFilter::Owned(f) => f.contains_many_into(keys, out),
        }
    }
}

/// Decodes a message, accepting arrays up to [`DEFAULT_MAX_MESSAGE_BITS`]. Example
/// under [`encode_message`](crate::encode_message). A message that cannot be
/// decoded must be treated as "maybe" for every key.
pub fn decode_message(bytes: &[u8]) -> Result<DecodedMessage<'_>, ExchangeError> {
    decode_message_with_limit(bytes, DEFAULT_MAX_MESSAGE_BITS)
}

/// Decodes a message, refusing arrays of more than `max_bits` bits.
///
/// The checks run in the order of `docs/FORMAT.md` § 12, every cheap check
/// of the header before the payload is looked at, and nothing is allocated:
/// a plain payload is checked in place, a coded one only when its filter is
/// asked for.
pub fn decode_message_with_limit(
    bytes: &[u8],
    max_bits: u64,
) -> Result<DecodedMessage<'_>, ExchangeError> {
    let f = frame::decode(bytes)?;
    let has_stats = check_message_frame(&f)?;
    let mut r = ByteReader::new(f.body);
    let descriptor = read_message_descriptor(&mut r, max_bits)?;
    descriptor.check_frame_version(f.version)?;
    let fields = read_message_fields(&mut r, f.kind, descriptor.params.m())?;
    let stats = if has_stats {
        Some(read_build_stats(&mut r)?)
    } else {
        None
    };
    let payload = r.take(descriptor.payload_len)?;
    r.finish()?;
    if descriptor.codec == Codec::Raw {
        check_plain_payload(&descriptor, payload, fields.ones)?;
    }
    Ok(DecodedMessage {
        kind: f.kind,
        descriptor,
        version: fields.version,
        base_version: fields.base_version,
        ones: fields.ones,
        stats,
        payload,
    })
}

/// Kind 7 or 8, and the flags its version defines: none in version 1;
/// from version 2, [`FLAG_BUILD_STATS`]. Returns whether that flag is set.
fn check_message_frame(f: &frame::Frame<'_>) -> Result<bool, CodecError> {
    if f.kind != Kind::ExchangeFull && f.kind != Kind::ExchangeDelta {
        return Err(CodecError::WrongKind {
            expected: "exchange-full or exchange-delta",
            found: f.kind.name(),
        });
    }
    let defined = if f.version >= frame::VERSION_2 {
        FLAG_BUILD_STATS
    } else {
        0
    };
    if f.flags & !defined != 0 {
        return Err(CodecError::InvalidField {
            field: "flags",
            reason: format!(
                "{:#04x}: format version {} defines {:#04x} for messages",
                f.flags, f.version, defined
            ),
        });
    }
    Ok(f.flags & FLAG_BUILD_STATS != 0)
}

/// The descriptor of a bit filter whose `m` is within the receiver's cap.
fn read_message_descriptor(
    r: &mut ByteReader<'_>,
    max_bits: u64,
) -> Result<DescriptorV1, ExchangeError> {
    let descriptor = DescriptorV1::read(r)?;
    if descriptor.counter_width != CounterWidth::Bit {
        return Err(CodecError::InvalidField {
            field: "counter width",
            reason: "messages carry bit filters (width 0)".into(),
        }
        .into());
    }
    let m = descriptor.params.m();
    if m > max_bits {
        return Err(ExchangeError::TooLarge { m, limit: max_bits });
    }
    Ok(descriptor)
}

/// The message fields after the descriptor (FORMAT.md § 12).
struct MessageFields {
    version: u64,
    base_version: u64,
    ones: u64,
}

/// Reads and checks the message fields: reserved zero, `ones ≤ m`, base
/// version 0 in a full message.
fn read_message_fields(
    r: &mut ByteReader<'_>,
    kind: Kind,
    m: u64,
) -> Result<MessageFields, CodecError> {
    let version = r.u64()?;
    let base_version = r.u64()?;
    let ones = r.u64()?;
    r.reserved::<8>()?;
    if ones > m {
        return Err(CodecError::InvalidField {
            field: "ones",
            reason: format!("{ones} one bits in an array of {m}"),
        });
    }
    if kind == Kind::ExchangeFull && base_version != 0 {
        return Err(CodecError::InvalidField {
            field: "base version",
            reason: "a full message has base version 0".into(),
        });
    }
    Ok(MessageFields {
        version,
        base_version,
        ones,
    })
}

/// Reads and checks the build statistics (FORMAT.md § 12): every distinct
/// key is on at least one row.
fn read_build_stats(r: &mut ByteReader<'_>) -> Result<BuildStats, CodecError> {
    let stats = BuildStats {
        rows: r.u64()?,
        distinct_keys: r.u64()?,
    };
    match stats_defect(&stats) {
        Some(reason) => Err(CodecError::InvalidField {
            field: "build statistics",
            reason,
        }),
        None => Ok(stats),
    }
}

/// Checks a plain payload in place, so that a borrowed view of it is valid:
/// nothing set past `m`, and exactly `ones` bits set.
fn check_plain_payload(
    descriptor: &DescriptorV1,
    payload: &[u8],
    ones: u64,
) -> Result<(), CodecError> {
    let view =
        FilterView::new(descriptor.params, payload).map_err(|e| CodecError::InvalidField {
            field: "payload",
            reason: e.to_string(),
        })?;
    let m = descriptor.params.m();
    let used = m.div_ceil(64) as usize;
    let mut count = 0u64;
    for i in 0..descriptor.params.num_words() {
        let w = view.word(i);
        if i + 1 == used && !m.is_multiple_of(64) {
            if w >> (m % 64) != 0 {
                return Err(padding_error(m));
            }
        } else if i >= used && w != 0 {
            return Err(padding_error(m));
        }
        count += w.count_ones() as u64;
    }
    if count != ones {
        return Err(CodecError::InvalidField {
            field: "ones",
            reason: format!("header says {ones}, the payload holds {count}"),
        });
    }
    Ok(())
}

fn padding_error(m: u64) -> CodecError {
    CodecError::InvalidField {
        field: "padding",
        reason: format!("bits past m = {m} must be zero"),
    }
}

impl<'a> DecodedMessage<'a> {
    /// The filter's parameters.
    pub fn params(&self) -> &FilterParams {
        &self.descriptor.params
    }

    /// Whether this is a delta.
    pub fn is_delta(&self) -> bool {
        self.kind == Kind::ExchangeDelta
    }

    /// Bytes of payload (the message minus [`MESSAGE_OVERHEAD`](super::MESSAGE_OVERHEAD),
    /// and minus [`BUILD_STATS_LEN`](super::BUILD_STATS_LEN) when it carries
    /// build statistics).
    pub fn payload_len(&self) -> usize {
        self.payload.len()
    }

    /// The build side's rows and distinct keys, when the sender included
    /// them (format version 2); `None` for a message without them, and for
    /// every version-1 message.
    pub fn build_stats(&self) -> Option<BuildStats> {
        self.stats
    }

    /// Estimates the rows of the semi-join from this message alone: the build
    /// statistics it carries and its filter's false-positive rate, with the
    /// probe side's counts (`probe_rows` probed, `passed` of them passed by
    /// this message's filter). The same estimate as
    /// [`estimate_join_size`](crate::estimate_join_size) given the decoded
    /// filter and [`build_stats`](Self::build_stats). For the standard
    /// layout the rate comes from the header (`ones`), without decoding the
    /// payload; other layouts decode it. Example under
    /// [`build_message_with_stats`](crate::build_message_with_stats).
    ///
    /// # Errors
    /// [`ExchangeError::WrongMessageKind`] for a delta (apply it, then call
    /// `estimate_join_size` with the new filter and these statistics),
    /// [`ExchangeError::NoBuildStats`] when the message carries none, and a
    /// coded payload's decoding errors.
    pub fn estimate_join_size(
        &self,
        probe_rows: u64,
        passed: u64,
    ) -> Result<JoinSizeEstimate, ExchangeError> {
        if self.is_delta() {
            return Err(ExchangeError::WrongMessageKind { expected: "full" });
        }
        let stats = self.stats.ok_or(ExchangeError::NoBuildStats)?;
        let p = self.descriptor.params;
        let fp = match p.layout() {
            // `BloomRead::estimated_fp` of the standard layout, from the
            // header's count of one bits (the payload's, when decoded).
            Layout::Standard => (self.ones as f64 / p.m() as f64).powi(p.k() as i32),
            _ => self.filter()?.estimated_fp(),
        };
        Ok(join_size_from_counts(fp, stats, probe_rows, passed))
    }

    /// Passes the transmitted array's words (the filter, or the XOR for a
    /// delta) to `emit(i, word)`: those that may be non-zero, each once.
    /// Decodes straight into the receiver's storage, so that a message
    /// costs its filter and nothing more.
    fn decode_words(&self, mut emit: impl FnMut(usize, u64)) -> Result<(), ExchangeError> {
        let p = self.descriptor.params;
        match self.descriptor.codec {
            Codec::Raw => {
                let v = FilterView::new(p, self.payload)?;
                for i in 0..p.num_words() {
                    emit(i, v.word(i));
                }
            }
            Codec::Rans => entropy::decode_bits_into(self.payload, p.m(), self.ones, emit)?,
        }
        Ok(())
    }

    /// The filter of a full message: borrowed when it was sent plain.
    pub fn filter(&self) -> Result<ReceivedFilter<'a>, ExchangeError> {
        if self.is_delta() {
            return Err(ExchangeError::WrongMessageKind { expected: "full" });
        }
        Ok(match self.descriptor.codec {
            Codec::Raw => {
                ReceivedFilter::Borrowed(FilterView::new(self.descriptor.params, self.payload)?)
            }
            _ => {
                let f = BitFilter::new(self.descriptor.params)?;
                self.decode_words(|i, w| f.store_word(i, w))?;
                ReceivedFilter::Owned(f)
            }
        })
    }

    /// Applies a delta to the base filter the receiver holds at version
    /// `held`, returning the new version's filter. Example under
    /// [`encode_delta_message`](crate::encode_delta_message).
    ///
    /// # Errors
    /// [`ExchangeError::WrongMessageKind`] for a full message,
    /// [`ExchangeError::BaseVersionMismatch`] unless `held` is the message's
    /// base version, [`ExchangeError::Filter`] unless `base` has the
    /// message's shape and seed, and a coded payload's decoding errors.
    pub fn apply_to(&self, base: &impl BloomRead, held: u64) -> Result<BitFilter, ExchangeError> {
        if !self.is_delta() {
            return Err(ExchangeError::WrongMessageKind { expected: "delta" });
        }
        if held != self.base_version {
            return Err(ExchangeError::BaseVersionMismatch {
                expected: self.base_version,
                held,
            });
        }
        check_compatible(base.params(), &self.descriptor.params)?;
        let f = BitFilter::new(self.descriptor.params)?;
        for i in 0..self.descriptor.params.num_words() {
            f.store_word(i, base.word(i));
        }
        self.decode_words(|i, x| f.store_word(i, f.word(i) ^ x))?;
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::message::{build_message, encode_message, CodecChoice, MessageTarget};
    use crate::filter::hash::HashSpec;

    /// Plain (borrowed) and coded (owned) messages give the same owned filter.
    #[test]
    fn into_owned_detaches_both_kinds() {
        let keys: Vec<[u8; 8]> = (0..500u64).map(|k| k.to_le_bytes()).collect();
        let (_, built) =
            build_message(&keys, MessageTarget::Fp(0.01), HashSpec::xxh3(5), 1).unwrap();
        for choice in [CodecChoice::Plain, CodecChoice::Auto] {
            let bytes = encode_message(&built, 500, 1, choice).unwrap();
            let received = decode_message(&bytes).unwrap().filter().unwrap();
            assert_eq!(
                matches!(received, ReceivedFilter::Borrowed(_)),
                choice == CodecChoice::Plain
            );
            let owned = received.into_owned().unwrap();
            drop(bytes);
            assert_eq!(owned.to_words(), built.to_words());
            assert!(keys.iter().all(|k| owned.contains(k)));
        }
    }
}
