//! Exchange messages: a whole filter, or the XOR of a filter against a base
//! version both sides hold, plain or entropy-coded. The byte layout is in
//! `docs/FORMAT.md` (§ Exchange messages); this file implements it.
//!
//! # Filter types (Mitzenmacher, "Compressed Bloom Filters")
//! A filter sized for lookups has about half its bits set and does not
//! compress; a filter sized for *transmission* is larger and sparser, with
//! fewer hash functions, and its entropy-coded size is what goes on the wire.
//! [`build_from_keys`] sizes the filter with [`optimize`](super::optimize)
//! for a target rate or a byte budget; [`encode_full`] and [`encode_delta`]
//! code any filter and fall back to the plain array whenever the coded one
//! would not be smaller, so every filter can always be sent.
//!
//! # Deltas
//! A delta carries `new XOR base` and both version ids. Between two versions
//! of a slowly changing key set few bits differ, so the XOR is sparse and
//! codes to a few bytes per changed bit. The receiver applies it only to the
//! base version it names ([`DecodedMessage::apply_to`]); anything else is a
//! typed error, never a silently wrong filter.
//!
//! # Decoding
//! Every check of the frame and descriptor applies. A plain full message is
//! queried in place ([`ReceivedFilter::Borrowed`], zero-copy); a coded one is
//! decoded into an owned filter. A coded payload can describe a huge sparse
//! array in a few bytes, so the decoder refuses arrays above a memory cap
//! ([`DEFAULT_MAX_BITS`], or [`decode_with_limit`]) before allocating.

use super::entropy::{self, EntropyError};
use super::optimize::{self, OptimizeError};
use crate::codec::filter_file::{Codec, CounterWidth, DescriptorV1, DESCRIPTOR_LEN};
use crate::codec::frame::{self, Kind};
use crate::codec::reader::ByteReader;
use crate::error::{CodecError, FilterError, ParamError};
use crate::filter::bloom::{check_compatible, BitFilter, BloomRead, FilterView};
use crate::filter::hash::{HashSpec, KeyHash};
use crate::filter::params::{FilterParams, Layout};
use thiserror::Error;

/// Bytes of a message that are not payload: the frame (24 + 4), the
/// descriptor (48) and the message fields (32).
pub const MESSAGE_OVERHEAD: usize = frame::OVERHEAD + DESCRIPTOR_LEN + MESSAGE_FIELDS_LEN;
const MESSAGE_FIELDS_LEN: usize = 32;

/// Largest array a received message may describe by default: 2^33 bits (1 GiB).
pub const DEFAULT_MAX_BITS: u64 = 1 << 33;

/// How to code the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CodecChoice {
    /// Entropy-code, unless the plain array is no larger (the paper's
    /// "filter types": always sendable, never worse than plain).
    #[default]
    Auto,
    /// Always the plain array.
    Plain,
}

/// Errors building or applying messages.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ExchangeError {
    /// The bytes are not a valid message.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// The filters are not compatible (delta against another shape or seed).
    #[error(transparent)]
    Filter(#[from] FilterError),
    /// Invalid filter parameters.
    #[error(transparent)]
    Param(#[from] ParamError),
    /// No filter satisfies the target or budget.
    #[error(transparent)]
    Optimize(#[from] OptimizeError),
    /// The entropy coder refused the array.
    #[error("entropy coding: {0}")]
    Entropy(#[from] EntropyError),
    /// A delta names another base version than the one held.
    #[error("delta applies to version {expected}, but the base held is version {held}: request a full message")]
    BaseVersionMismatch {
        /// Base version the delta was computed against.
        expected: u64,
        /// Version the receiver holds.
        held: u64,
    },
    /// A full message was given where a delta was expected, or the reverse.
    #[error("expected a {expected} message")]
    WrongMessageKind {
        /// What was expected.
        expected: &'static str,
    },
    /// The message's filter is larger than the receiver accepts.
    #[error("message describes {m} bits, more than the limit of {limit}")]
    TooLarge {
        /// Bits described.
        m: u64,
        /// Limit in force.
        limit: u64,
    },
    /// The budget cannot hold even the message header.
    #[error("budget of {budget} bytes is smaller than the {MESSAGE_OVERHEAD}-byte message header plus one byte")]
    BudgetTooSmall {
        /// Budget given.
        budget: u64,
    },
}

/// What a message is sized for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Target {
    /// A false-positive rate; the message is as small as the optimiser can make it.
    Fp(f64),
    /// A whole-message size in bytes (header included); the false-positive
    /// rate is as low as that allows. The message is never larger.
    Budget(u64),
}

/// Builds a filter of `keys` (standard layout, `n` keys expected) sized for
/// transmission, and encodes it as a full message of version `version`.
/// Returns the message and the filter (the sender keeps it as the base of
/// future deltas).
///
/// # Examples
/// ```
/// use filterstore::{build_message, decode_message, BloomRead, HashSpec, MessageTarget};
///
/// let keys: Vec<[u8; 4]> = (0u32..10_000).map(|i| i.to_le_bytes()).collect();
/// let (msg, sent) = build_message(&keys, MessageTarget::Fp(0.02), HashSpec::xxh3(3), 1)?;
/// // A sparse filter (k = 1, ~49.5 bits per key in memory) that codes to
/// // about 7 bits per key on the wire, where a filter sized for lookups at
/// // 2% needs 8.14.
/// assert_eq!((sent.params().k(), sent.params().m()), (1, 494_984));
/// let bits_per_key = msg.len() as f64 * 8.0 / 10_000.0;
/// assert!(bits_per_key < 7.2, "{bits_per_key}");
///
/// let received = decode_message(&msg)?.filter()?;
/// assert!(keys.iter().all(|k| received.contains(k)));
/// let fp = (10_000u32..110_000).filter(|i| received.contains(&i.to_le_bytes())).count();
/// assert!(fp < 2_000 + 5 * 45, "{fp} false positives in 100,000"); // 2% + 5σ
///
/// // A byte budget instead: the message never exceeds it.
/// let (msg, _) = build_message(&keys, MessageTarget::Budget(8_000), HashSpec::xxh3(3), 1)?;
/// assert!(msg.len() <= 8_000);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn build_from_keys<K: AsRef<[u8]>>(
    keys: &[K],
    target: Target,
    hash: HashSpec,
    version: u64,
) -> Result<(Vec<u8>, BitFilter), ExchangeError> {
    let n = (keys.len() as u64).max(1);
    let build = |plan: &optimize::Plan| -> Result<BitFilter, ExchangeError> {
        let params = FilterParams::new(Layout::Standard, plan.m_bits.max(64), plan.k, hash)?;
        let mut f = BitFilter::new(params)?;
        // Not shared yet: the bulk build with plain stores (same bits).
        f.insert_many_mut(keys);
        Ok(f)
    };
    match target {
        Target::Fp(fp) => {
            let plan = optimize::plan_for_fp(n, fp)?;
            let f = build(&plan)?;
            let msg = encode_full(&f, keys.len() as u64, version, CodecChoice::Auto)?;
            Ok((msg, f))
        }
        Target::Budget(budget) => {
            let payload_budget = budget
                .checked_sub(MESSAGE_OVERHEAD as u64 + 1)
                .ok_or(ExchangeError::BudgetTooSmall { budget })?;
            // The coded size varies by a few bytes around its expectation; plan
            // for the budget and, in the rare case the result is over, plan
            // again for a budget reduced by the overshoot.
            let mut bits = payload_budget * 8;
            for _ in 0..8 {
                let plan = optimize::plan_for_budget(n, bits)?;
                let f = build(&plan)?;
                let msg = encode_full(&f, keys.len() as u64, version, CodecChoice::Auto)?;
                if msg.len() as u64 <= budget {
                    return Ok((msg, f));
                }
                let over = msg.len() as u64 - budget;
                bits = bits.saturating_sub((over + 8) * 8);
            }
            Err(ExchangeError::BudgetTooSmall { budget })
        }
    }
}

/// Encodes `filter` as a full message (FORMAT.md § 12): entropy-coded when
/// that is smaller ([`CodecChoice::Auto`]), else the plain bit array.
///
/// # Examples
/// ```
/// use filterstore::{decode_message, encode_message, BitFilter, BloomRead, CodecChoice};
/// use filterstore::{FilterParams, HashSpec, Layout, MESSAGE_OVERHEAD};
///
/// // A sparse filter: 16,384 bits, 100 keys, k = 2 (about 1.2% of bits set).
/// let p = FilterParams::new(Layout::Standard, 16_384, 2, HashSpec::xxh3(8))?;
/// let f = BitFilter::new(p)?;
/// for i in 0u32..100 {
///     f.insert(&i.to_le_bytes());
/// }
/// let plain = encode_message(&f, 100, 1, CodecChoice::Plain)?;
/// assert_eq!(plain.len(), MESSAGE_OVERHEAD + 16_384 / 8);
/// let coded = encode_message(&f, 100, 1, CodecChoice::Auto)?;
/// assert!(coded.len() < MESSAGE_OVERHEAD + 250, "{}", coded.len());
///
/// let m = decode_message(&coded)?;
/// assert_eq!((m.version, m.ones, m.descriptor.codec.name()), (1, f.count_ones(), "rans"));
/// let received = m.filter()?;
/// assert!((0u32..100).all(|i| received.contains(&i.to_le_bytes())));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn encode_full(
    filter: &impl BloomRead,
    n: u64,
    version: u64,
    choice: CodecChoice,
) -> Result<Vec<u8>, ExchangeError> {
    let words: Vec<u64> = (0..filter.params().num_words())
        .map(|i| filter.word(i))
        .collect();
    encode(
        Kind::ExchangeFull,
        *filter.params(),
        n,
        version,
        0,
        &words,
        choice,
    )
}

/// Encodes `new XOR base` as a delta from version `base_version` to `version`
/// (FORMAT.md § 12). The receiver applies it with [`DecodedMessage::apply_to`].
///
/// # Examples
/// ```
/// use filterstore::{decode_message, encode_delta_message, BitFilter, BloomRead};
/// use filterstore::{CodecChoice, ExchangeError, FilterParams, HashSpec, Layout};
///
/// let p = FilterParams::for_capacity(1_000, 0.01, Layout::Standard, HashSpec::xxh3(2))?;
/// let (v1, v2) = (BitFilter::new(p)?, BitFilter::new(p)?);
/// for i in 0u32..1_000 {
///     v1.insert(&i.to_le_bytes());
///     v2.insert(&i.to_le_bytes());
/// }
/// for i in 1_000u32..1_010 {
///     v2.insert(&i.to_le_bytes()); // ten new keys in version 2
/// }
/// let delta = encode_delta_message(&v2, &v1, 1_010, 2, 1, CodecChoice::Auto)?;
/// // About 70 changed bits: a small fraction of the 1,198-byte array.
/// assert!(delta.len() < 250, "{}", delta.len());
///
/// let m = decode_message(&delta)?;
/// assert_eq!((m.version, m.base_version), (2, 1));
/// let rebuilt = m.apply_to(&v1, 1)?;
/// assert_eq!(rebuilt.to_words(), v2.to_words());
/// // Only onto the base it names.
/// assert!(matches!(m.apply_to(&v1, 7), Err(ExchangeError::BaseVersionMismatch { expected: 1, held: 7 })));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn encode_delta(
    new: &impl BloomRead,
    base: &impl BloomRead,
    n: u64,
    version: u64,
    base_version: u64,
    choice: CodecChoice,
) -> Result<Vec<u8>, ExchangeError> {
    check_compatible(new.params(), base.params())?;
    let words: Vec<u64> = (0..new.params().num_words())
        .map(|i| new.word(i) ^ base.word(i))
        .collect();
    encode(
        Kind::ExchangeDelta,
        *new.params(),
        n,
        version,
        base_version,
        &words,
        choice,
    )
}

fn encode(
    kind: Kind,
    params: FilterParams,
    n: u64,
    version: u64,
    base_version: u64,
    words: &[u64],
    choice: CodecChoice,
) -> Result<Vec<u8>, ExchangeError> {
    let ones: u64 = words.iter().map(|w| w.count_ones() as u64).sum();
    let raw_len = params.bit_bytes();
    let coded = match choice {
        CodecChoice::Plain => None,
        CodecChoice::Auto => {
            let used = params.m().div_ceil(64) as usize;
            let enc = entropy::encode_bits(&words[..used], params.m())?;
            ((enc.payload.len() as u64) < raw_len).then_some(enc.payload)
        }
    };
    let (codec, payload_len) = match &coded {
        Some(p) => (Codec::Rans, p.len() as u64),
        None => (Codec::Raw, raw_len),
    };
    let descriptor = DescriptorV1 {
        params,
        n,
        counter_width: CounterWidth::Bit,
        codec,
        payload_len,
    };
    let mut body = Vec::with_capacity(DESCRIPTOR_LEN + MESSAGE_FIELDS_LEN + payload_len as usize);
    body.extend_from_slice(&descriptor.to_bytes());
    body.extend_from_slice(&version.to_le_bytes());
    body.extend_from_slice(&base_version.to_le_bytes());
    body.extend_from_slice(&ones.to_le_bytes());
    body.extend_from_slice(&[0u8; 8]);
    match coded {
        Some(p) => body.extend_from_slice(&p),
        None => {
            for w in words {
                body.extend_from_slice(&w.to_le_bytes());
            }
        }
    }
    Ok(frame::encode(kind, 0, &body))
}

/// A decoded message, borrowing its payload.
#[derive(Clone, Copy, Debug)]
pub struct DecodedMessage<'a> {
    /// Full filter or delta.
    pub kind: Kind,
    /// The descriptor (shape, seed, codec, key count).
    pub descriptor: DescriptorV1,
    /// The version of the filter this message produces.
    pub version: u64,
    /// For a delta, the version it applies to; 0 for a full message.
    pub base_version: u64,
    /// One bits in the transmitted array (the filter, or the XOR).
    pub ones: u64,
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

/// Decodes a message, accepting arrays up to [`DEFAULT_MAX_BITS`]. Example
/// under [`encode_message`](crate::encode_message). A message that cannot be
/// decoded must be treated as "maybe" for every key.
pub fn decode(bytes: &[u8]) -> Result<DecodedMessage<'_>, ExchangeError> {
    decode_with_limit(bytes, DEFAULT_MAX_BITS)
}

/// Decodes a message, refusing arrays of more than `max_bits` bits.
///
/// The checks run in the order of `docs/FORMAT.md` § 12, every cheap check
/// of the header before the payload is looked at, and nothing is allocated:
/// a plain payload is checked in place, a coded one only when its filter is
/// asked for.
pub fn decode_with_limit(bytes: &[u8], max_bits: u64) -> Result<DecodedMessage<'_>, ExchangeError> {
    let f = frame::decode(bytes)?;
    check_message_frame(&f)?;
    let mut r = ByteReader::new(f.body);
    let descriptor = read_message_descriptor(&mut r, max_bits)?;
    let fields = read_message_fields(&mut r, f.kind, descriptor.params.m())?;
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
        payload,
    })
}

/// Kind 7 or 8, and no flags.
fn check_message_frame(f: &frame::Frame<'_>) -> Result<(), CodecError> {
    if f.kind != Kind::ExchangeFull && f.kind != Kind::ExchangeDelta {
        return Err(CodecError::WrongKind {
            expected: "exchange-full or exchange-delta",
            found: f.kind.name(),
        });
    }
    if f.flags != 0 {
        return Err(CodecError::InvalidField {
            field: "flags",
            reason: format!("{:#04x}: no flags are defined for messages", f.flags),
        });
    }
    Ok(())
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

    /// Bytes of payload (the message minus [`MESSAGE_OVERHEAD`]).
    pub fn payload_len(&self) -> usize {
        self.payload.len()
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

    /// Plain (borrowed) and coded (owned) messages give the same owned filter.
    #[test]
    fn into_owned_detaches_both_kinds() {
        let keys: Vec<[u8; 8]> = (0..500u64).map(|k| k.to_le_bytes()).collect();
        let (_, built) = build_from_keys(&keys, Target::Fp(0.01), HashSpec::xxh3(5), 1).unwrap();
        for choice in [CodecChoice::Plain, CodecChoice::Auto] {
            let bytes = encode_full(&built, 500, 1, choice).unwrap();
            let received = decode(&bytes).unwrap().filter().unwrap();
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
