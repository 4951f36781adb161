//! Exchange messages: a whole filter, or the XOR of a filter against a base
//! version both sides hold, plain or entropy-coded. The byte layout is in
//! `docs/FORMAT.md` (§ Exchange messages); this file implements it.
//!
//! # Filter types (Mitzenmacher, "Compressed Bloom Filters")
//! A filter sized for lookups has about half its bits set and does not
//! compress; a filter sized for *transmission* is larger and sparser, with
//! fewer hash functions, and its entropy-coded size is what goes on the wire.
//! [`build_message`] sizes the filter with [`optimize`]
//! for a target rate or a byte budget; [`encode_message`] and [`encode_delta_message`]
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
//! # Build statistics
//! A message may carry the build side's row and distinct-key counts
//! ([`BuildStats`], format version 2: [`encode_message_with_stats`]), so
//! that the receiving site estimates the join's size from the bytes alone
//! ([`DecodedMessage::estimate_join_size`]). A message without them is
//! written at the lowest version its filter allows: 1, byte for byte what
//! version-1 readers read, unless its layout (split-block, 2) or hash
//! (XXH3-64, 4) needs a later one.
//!
//! # Decoding
//! Every check of the frame and descriptor applies. A plain full message is
//! queried in place ([`ReceivedFilter::Borrowed`], zero-copy); a coded one is
//! decoded into an owned filter. A coded payload can describe a huge sparse
//! array in a few bytes, so the decoder refuses arrays above a memory cap
//! ([`DEFAULT_MAX_MESSAGE_BITS`], or [`decode_message_with_limit`]) before allocating.

mod decode;

pub use decode::{decode_message, decode_message_with_limit, DecodedMessage, ReceivedFilter};

use super::entropy::{self, EntropyError};
use super::estimate::BuildStats;
use super::optimize::{self, OptimizeError};
use crate::codec::filter_file::{Codec, CounterWidth, DescriptorV1, DESCRIPTOR_LEN};
use crate::codec::frame::{self, Kind};
use crate::error::{CodecError, FilterError, ParamError};
use crate::filter::bloom::{check_compatible, BitFilter, BloomRead};
use crate::filter::hash::HashSpec;
use crate::filter::params::{FilterParams, Layout};
use thiserror::Error;

/// Bytes of a message that are not payload: the frame (24 + 4), the
/// descriptor (48) and the message fields (32). A message with build
/// statistics carries [`BUILD_STATS_LEN`] more.
pub const MESSAGE_OVERHEAD: usize = frame::OVERHEAD + DESCRIPTOR_LEN + MESSAGE_FIELDS_LEN;
const MESSAGE_FIELDS_LEN: usize = 32;

/// Bytes of the build statistics a message may carry after its fields
/// (FORMAT.md § 12, format version 2): the build side's rows and its
/// distinct keys, a `u64` each.
pub const BUILD_STATS_LEN: usize = 16;

/// Frame flag of a message that carries build statistics (format version 2).
const FLAG_BUILD_STATS: u8 = 0x01;

/// Largest array a received message may describe by default: 2^33 bits (1 GiB).
pub const DEFAULT_MAX_MESSAGE_BITS: u64 = 1 << 33;

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
    #[error("budget of {budget} bytes is smaller than the {MESSAGE_OVERHEAD}-byte message header ({} with build statistics) plus one byte", MESSAGE_OVERHEAD + BUILD_STATS_LEN)]
    BudgetTooSmall {
        /// Budget given.
        budget: u64,
    },
    /// A join-size estimate from a message that carries no build statistics
    /// (written without them, or by format version 1).
    #[error("the message carries no build statistics (rows and distinct keys of the build side); the sender must include them, or the receiver must supply them")]
    NoBuildStats,
}

/// What a message is sized for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MessageTarget {
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
pub fn build_message<K: AsRef<[u8]>>(
    keys: &[K],
    target: MessageTarget,
    hash: HashSpec,
    version: u64,
) -> Result<(Vec<u8>, BitFilter), ExchangeError> {
    build(keys, None, target, hash, version)
}

/// [`build_message`] for the distinct join `keys` of a build side with
/// `stats` (its rows, and `keys.len()` distinct keys), which the message
/// carries (format version 2, [`BUILD_STATS_LEN`] more bytes): the receiver
/// estimates the join's size from the message alone
/// ([`DecodedMessage::estimate_join_size`]). A budget counts those bytes.
///
/// # Errors
/// Those of [`build_message`]; [`ExchangeError::Codec`] with
/// [`CodecError::Encode`] when `stats` cannot describe a build side (more
/// distinct keys than rows, or rows without keys).
///
/// # Examples
/// ```
/// use filterstore::{build_message_with_stats, decode_message, BuildStats, HashSpec};
/// use filterstore::{BloomRead, MessageTarget};
///
/// // Build side: 1,000 customers with 3 orders each.
/// let customers: Vec<[u8; 4]> = (0u32..1_000).map(|c| c.to_le_bytes()).collect();
/// let stats = BuildStats { rows: 3_000, distinct_keys: 1_000 };
/// let (msg, _) =
///     build_message_with_stats(&customers, stats, MessageTarget::Fp(0.01), HashSpec::xxh3(1), 1)?;
///
/// // Probe side, from the bytes alone: 10,000 rows, one per key 0..10,000.
/// let m = decode_message(&msg)?;
/// assert_eq!(m.build_stats(), Some(stats));
/// let f = m.filter()?;
/// let passed = (0u32..10_000).filter(|k| f.contains(&k.to_le_bytes())).count() as u64;
/// let est = m.estimate_join_size(10_000, passed)?;
/// // 1,000 probe rows match, 3 build rows each: 3,000 join rows.
/// assert!((est.rows - 3_000.0).abs() < 5.0 * est.std_error.max(1.0), "{est:?}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn build_message_with_stats<K: AsRef<[u8]>>(
    keys: &[K],
    stats: BuildStats,
    target: MessageTarget,
    hash: HashSpec,
    version: u64,
) -> Result<(Vec<u8>, BitFilter), ExchangeError> {
    build(keys, Some(stats), target, hash, version)
}

fn build<K: AsRef<[u8]>>(
    keys: &[K],
    stats: Option<BuildStats>,
    target: MessageTarget,
    hash: HashSpec,
    version: u64,
) -> Result<(Vec<u8>, BitFilter), ExchangeError> {
    let n = (keys.len() as u64).max(1);
    let n_field = stats.map_or(keys.len() as u64, |s| s.distinct_keys);
    let encode = |f: &BitFilter| {
        let head = Head::full(*f.params(), n_field, version, stats);
        encode_words(&head, &words_of(f), CodecChoice::Auto)
    };
    let build = |plan: &optimize::TransmitPlan| -> Result<BitFilter, ExchangeError> {
        let params = FilterParams::new(Layout::Standard, plan.m_bits.max(64), plan.k, hash)?;
        let mut f = BitFilter::new(params)?;
        // Not shared yet: the bulk build with plain stores (same bits).
        f.insert_many_mut(keys);
        Ok(f)
    };
    match target {
        MessageTarget::Fp(fp) => {
            let plan = optimize::plan_for_fp(n, fp)?;
            let f = build(&plan)?;
            let msg = encode(&f)?;
            Ok((msg, f))
        }
        MessageTarget::Budget(budget) => {
            let overhead = MESSAGE_OVERHEAD + stats.map_or(0, |_| BUILD_STATS_LEN);
            let payload_budget = budget
                .checked_sub(overhead as u64 + 1)
                .ok_or(ExchangeError::BudgetTooSmall { budget })?;
            // The coded size varies by a few bytes around its expectation; plan
            // for the budget and, in the rare case the result is over, plan
            // again for a budget reduced by the overshoot.
            let mut bits = payload_budget * 8;
            for _ in 0..8 {
                let plan = optimize::plan_for_budget(n, bits)?;
                let f = build(&plan)?;
                let msg = encode(&f)?;
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
pub fn encode_message(
    filter: &impl BloomRead,
    n: u64,
    version: u64,
    choice: CodecChoice,
) -> Result<Vec<u8>, ExchangeError> {
    let head = Head::full(*filter.params(), n, version, None);
    encode_words(&head, &words_of(filter), choice)
}

/// [`encode_message`] with the build side's statistics: the message
/// carries `stats` (format version 2, [`BUILD_STATS_LEN`] more bytes), and
/// its descriptor's key count is `stats.distinct_keys`. The receiver reads
/// them with [`DecodedMessage::build_stats`] and estimates the join's size
/// with [`DecodedMessage::estimate_join_size`].
///
/// # Errors
/// Those of [`encode_message`]; [`ExchangeError::Codec`] with
/// [`CodecError::Encode`] when `stats` cannot describe a build side (more
/// distinct keys than rows, or rows without keys).
///
/// # Examples
/// ```
/// use filterstore::{decode_message, encode_message_with_stats, BitFilter, BuildStats};
/// use filterstore::{CodecChoice, FilterParams, HashSpec, Layout, BUILD_STATS_LEN, MESSAGE_OVERHEAD};
///
/// let p = FilterParams::for_capacity(100, 0.01, Layout::Blocked, HashSpec::xxh3(8))?;
/// let f = BitFilter::new(p)?;
/// for i in 0u32..100 {
///     f.insert(&i.to_le_bytes());
/// }
/// let stats = BuildStats { rows: 450, distinct_keys: 100 };
/// let msg = encode_message_with_stats(&f, stats, 1, CodecChoice::Plain)?;
/// assert_eq!(msg.len(), MESSAGE_OVERHEAD + BUILD_STATS_LEN + p.bit_bytes() as usize);
/// let m = decode_message(&msg)?;
/// assert_eq!((m.build_stats(), m.descriptor.n), (Some(stats), 100));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn encode_message_with_stats(
    filter: &impl BloomRead,
    stats: BuildStats,
    version: u64,
    choice: CodecChoice,
) -> Result<Vec<u8>, ExchangeError> {
    let head = Head::full(*filter.params(), stats.distinct_keys, version, Some(stats));
    encode_words(&head, &words_of(filter), choice)
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
pub fn encode_delta_message(
    new: &impl BloomRead,
    base: &impl BloomRead,
    n: u64,
    version: u64,
    base_version: u64,
    choice: CodecChoice,
) -> Result<Vec<u8>, ExchangeError> {
    let head = Head::delta(*new.params(), n, version, base_version, None);
    encode_delta(&head, new, base, choice)
}

/// [`encode_delta_message`] with the build statistics of the new version
/// (see [`encode_message_with_stats`]): the message carries `stats`, and its
/// descriptor's key count is `stats.distinct_keys`.
///
/// # Errors
/// Those of [`encode_delta_message`] and [`encode_message_with_stats`].
pub fn encode_delta_message_with_stats(
    new: &impl BloomRead,
    base: &impl BloomRead,
    stats: BuildStats,
    version: u64,
    base_version: u64,
    choice: CodecChoice,
) -> Result<Vec<u8>, ExchangeError> {
    let head = Head::delta(
        *new.params(),
        stats.distinct_keys,
        version,
        base_version,
        Some(stats),
    );
    encode_delta(&head, new, base, choice)
}

/// The words of `filter`'s bit array.
fn words_of(filter: &impl BloomRead) -> Vec<u64> {
    (0..filter.params().num_words())
        .map(|i| filter.word(i))
        .collect()
}

fn encode_delta(
    head: &Head,
    new: &impl BloomRead,
    base: &impl BloomRead,
    choice: CodecChoice,
) -> Result<Vec<u8>, ExchangeError> {
    check_compatible(new.params(), base.params())?;
    let words: Vec<u64> = (0..new.params().num_words())
        .map(|i| new.word(i) ^ base.word(i))
        .collect();
    encode_words(head, &words, choice)
}

/// What a message says besides its array (FORMAT.md § 12).
struct Head {
    kind: Kind,
    params: FilterParams,
    n: u64,
    version: u64,
    base_version: u64,
    stats: Option<BuildStats>,
}

impl Head {
    fn full(params: FilterParams, n: u64, version: u64, stats: Option<BuildStats>) -> Head {
        Head {
            kind: Kind::ExchangeFull,
            params,
            n,
            version,
            base_version: 0,
            stats,
        }
    }

    fn delta(
        params: FilterParams,
        n: u64,
        version: u64,
        base_version: u64,
        stats: Option<BuildStats>,
    ) -> Head {
        Head {
            kind: Kind::ExchangeDelta,
            base_version,
            ..Head::full(params, n, version, stats)
        }
    }

    /// The lowest format version that describes the message (FORMAT.md
    /// § 13), written as both its version and its min reader version: 1,
    /// unless it uses something a later version added (§ 15): build
    /// statistics (2), or parameters that need a later version
    /// (`params_version`: the split-block layout 2, the XXH3-64 hash 4,
    /// the XXH3-64 sectorized hash 6).
    fn format_version(&self) -> u16 {
        let mut v = crate::codec::filter_file::params_version(&self.params);
        if self.stats.is_some() {
            v = v.max(frame::VERSION_2);
        }
        v
    }

    /// The frame flags (§ 12): which optional parts the body holds.
    fn flags(&self) -> u8 {
        if self.stats.is_some() {
            FLAG_BUILD_STATS
        } else {
            0
        }
    }
}

/// Why `stats` cannot describe a build side, if it cannot: every distinct
/// key is on at least one row.
pub(super) fn stats_defect(stats: &BuildStats) -> Option<String> {
    if stats.distinct_keys > stats.rows {
        Some(format!(
            "{} distinct keys on {} rows: a build side has at least one row per distinct key",
            stats.distinct_keys, stats.rows
        ))
    } else if stats.rows > 0 && stats.distinct_keys == 0 {
        Some(format!("{} rows without a distinct key", stats.rows))
    } else {
        None
    }
}

fn encode_words(head: &Head, words: &[u64], choice: CodecChoice) -> Result<Vec<u8>, ExchangeError> {
    if let Some(reason) = head.stats.as_ref().and_then(stats_defect) {
        return Err(CodecError::Encode {
            what: "build statistics",
            reason,
        }
        .into());
    }
    let params = head.params;
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
        n: head.n,
        counter_width: CounterWidth::Bit,
        codec,
        payload_len,
    };
    let mut body = Vec::with_capacity(
        DESCRIPTOR_LEN + MESSAGE_FIELDS_LEN + BUILD_STATS_LEN + payload_len as usize,
    );
    body.extend_from_slice(&descriptor.to_bytes());
    body.extend_from_slice(&head.version.to_le_bytes());
    body.extend_from_slice(&head.base_version.to_le_bytes());
    body.extend_from_slice(&ones.to_le_bytes());
    body.extend_from_slice(&[0u8; 8]);
    if let Some(stats) = &head.stats {
        body.extend_from_slice(&stats.rows.to_le_bytes());
        body.extend_from_slice(&stats.distinct_keys.to_le_bytes());
    }
    match coded {
        Some(p) => body.extend_from_slice(&p),
        None => {
            for w in words {
                body.extend_from_slice(&w.to_le_bytes());
            }
        }
    }
    let v = head.format_version();
    Ok(frame::encode_versioned(
        head.kind,
        head.flags(),
        &body,
        v,
        v,
    ))
}
