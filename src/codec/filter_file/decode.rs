//! Reading filter files (FORMAT.md § 7): every check, then views that borrow
//! the input.

use super::descriptor::{raw_payload_len, Codec, CounterWidth, DescriptorV1};
use crate::codec::frame::{self, FrameKind, Kind};
use crate::codec::reader::ByteReader;
use crate::error::{CodecError, ParamError};
use crate::filter::bloom::{BitFilter, BloomRead, FilterView};
use crate::filter::counting::{nibble, CountingFilter};
use crate::filter::params::{FilterParams, BLOCK_BITS};

/// A read-only counting filter over borrowed packed counters (the payload of
/// a decoded file, or a counter page read from disk). As a [`BloomRead`] it is
/// the bit filter the counters imply — bit `i` set exactly when counter `i` is
/// non-zero — so every query and estimator works on it without a copy.
#[derive(Clone, Copy, Debug)]
pub struct CounterView<'a> {
    params: FilterParams,
    bytes: &'a [u8],
}

impl<'a> CounterView<'a> {
    /// A view of `bytes`, which must hold exactly the counters of `params`.
    pub fn new(params: FilterParams, bytes: &'a [u8]) -> Result<Self, CodecError> {
        let expected = raw_payload_len(&params, CounterWidth::Four);
        if bytes.len() as u64 != expected {
            return Err(CodecError::InvalidField {
                field: "counters",
                reason: format!("{} bytes, parameters need {expected}", bytes.len()),
            });
        }
        Ok(CounterView { params, bytes })
    }

    /// The packed counters.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Counter at position `pos`.
    ///
    /// # Panics
    /// If `pos` is not below the padded number of positions (a caller bug;
    /// every position derived from a key with these parameters is below `m`).
    pub fn counter(&self, pos: u64) -> u8 {
        nibble::get(self.bytes, pos as usize)
    }

    /// Number of saturated (sticky) counters.
    pub fn saturated(&self) -> u64 {
        nibble::count_saturated(self.bytes)
    }

    /// The smallest of `key`'s counters: an upper bound on how many times the
    /// key is present (inserts minus removes; 15 means 15 or more), and 0
    /// exactly when it is definitely absent.
    pub fn min_count(&self, key: &[u8]) -> u8 {
        let p = self.params;
        p.positions(p.hash().hash(key))
            .as_slice()
            .iter()
            .map(|&i| self.counter(i))
            .min()
            .unwrap_or(0)
    }

    /// An owned counting filter with the same counters.
    pub fn to_counting_filter(&self) -> Result<CountingFilter, ParamError> {
        let mut counters = Vec::new();
        counters
            .try_reserve_exact(self.bytes.len())
            .map_err(|_| ParamError::AllocationFailed {
                bytes: self.bytes.len() as u64,
            })?;
        counters.extend_from_slice(self.bytes);
        CountingFilter::from_bytes(self.params, counters).map_err(|_| {
            // Unreachable: `new` checked the length against the same rule.
            ParamError::AllocationFailed {
                bytes: self.bytes.len() as u64,
            }
        })
    }
}

impl BloomRead for CounterView<'_> {
    fn params(&self) -> &FilterParams {
        &self.params
    }
    #[inline]
    fn word(&self, i: usize) -> u64 {
        // 64 counters of 4 bits per word of bits.
        self.bytes
            .get(i * 32..i * 32 + 32)
            .map_or(0, nibble::nonzero_word)
    }
}

/// The payload of a decoded filter file, borrowed from the input.
#[derive(Clone, Copy, Debug)]
pub enum FilterBody<'a> {
    /// A bit filter.
    Bits(FilterView<'a>),
    /// A counting filter.
    Counters(CounterView<'a>),
}

/// A decoded, fully validated filter file, borrowing its payload.
#[derive(Clone, Copy, Debug)]
pub struct DecodedFilter<'a> {
    /// The format version the file was written with.
    pub version: u16,
    /// The oldest reader version the writer allowed.
    pub min_reader: u16,
    /// The descriptor.
    pub descriptor: DescriptorV1,
    /// The payload.
    pub body: FilterBody<'a>,
}

impl<'a> DecodedFilter<'a> {
    /// The filter's parameters.
    pub fn params(&self) -> &FilterParams {
        &self.descriptor.params
    }

    /// The writer's key count.
    pub fn n(&self) -> u64 {
        self.descriptor.n
    }

    /// [`FrameKind::BitFilter`] or [`FrameKind::CountingFilter`].
    pub fn kind(&self) -> FrameKind {
        self.descriptor.counter_width.file_kind()
    }

    /// Whether `key` may be in the set. `false` means definitely absent.
    pub fn contains(&self, key: &[u8]) -> bool {
        match &self.body {
            FilterBody::Bits(v) => v.contains(key),
            FilterBody::Counters(c) => BloomRead::contains(c, key),
        }
    }

    /// The counters, if this is a counting filter.
    pub fn counters(&self) -> Option<CounterView<'a>> {
        match self.body {
            FilterBody::Bits(_) => None,
            FilterBody::Counters(c) => Some(c),
        }
    }

    /// An owned bit filter with the same answers (for a counting filter, bit
    /// `i` is set exactly when counter `i` is non-zero).
    pub fn to_bit_filter(&self) -> Result<BitFilter, ParamError> {
        match &self.body {
            FilterBody::Bits(v) => v.to_owned_filter(),
            FilterBody::Counters(c) => {
                let f = BitFilter::new(c.params)?;
                for i in 0..c.params.num_words() {
                    f.store_word(i, c.word(i));
                }
                Ok(f)
            }
        }
    }
}

/// Decodes and fully validates an exported filter file, in the order of
/// checks of `docs/FORMAT.md` § 7; nothing is allocated.
///
/// # Examples
/// ```
/// use filterstore::{decode_filter, encode_bit_filter, BitFilter, BloomRead};
/// use filterstore::{FilterParams, FrameKind, HashSpec, Layout};
///
/// let p = FilterParams::new(Layout::Blocked, 1024, 4, HashSpec::xxh3(7))?;
/// let f = BitFilter::new(p)?;
/// f.insert(b"apple");
/// f.insert(b"pear");
/// let file = encode_bit_filter(&f, 2);
/// // 24-byte frame header, 48-byte descriptor, 128 bytes of bits, CRC32.
/// assert_eq!(file.len(), 24 + 48 + 128 + 4);
///
/// let d = decode_filter(&file)?;
/// assert_eq!(d.kind(), FrameKind::BitFilter);
/// assert_eq!((d.params().m(), d.params().k(), d.n()), (1024, 4, 2));
/// assert!(d.contains(b"apple") && d.contains(b"pear"));
/// assert_eq!(d.to_bit_filter()?.count_ones(), f.count_ones());
///
/// // One flipped bit anywhere is refused, never read as "absent".
/// let mut bad = file.clone();
/// bad[100] ^= 1;
/// assert!(decode_filter(&bad).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn decode_filter(bytes: &[u8]) -> Result<DecodedFilter<'_>, CodecError> {
    let f = frame::decode(bytes)?;
    let width = width_of_kind(&f)?;
    let mut r = ByteReader::new(f.body);
    let descriptor = read_file_descriptor(&mut r, f.kind, width)?;
    descriptor.check_frame_version(f.version)?;
    let payload = r.take(descriptor.payload_len)?;
    r.finish()?;
    let params = descriptor.params;
    check_padding(&params, width, payload)?;
    let body = match width {
        CounterWidth::Bit => FilterBody::Bits(FilterView::new(params, payload).map_err(|e| {
            CodecError::InvalidField {
                field: "payload",
                reason: e.to_string(),
            }
        })?),
        CounterWidth::Four => FilterBody::Counters(CounterView::new(params, payload)?),
    };
    Ok(DecodedFilter {
        version: f.version,
        min_reader: f.min_reader,
        descriptor,
        body,
    })
}

/// The counter width a file's kind implies, after checking that the frame
/// is a filter file without flags.
fn width_of_kind(f: &frame::Frame<'_>) -> Result<CounterWidth, CodecError> {
    let width = match f.kind {
        Kind::BitFilter => CounterWidth::Bit,
        Kind::CountingFilter => CounterWidth::Four,
        other => {
            return Err(CodecError::WrongKind {
                expected: "bit-filter or counting-filter",
                found: other.name(),
            })
        }
    };
    if f.flags != 0 {
        return Err(CodecError::InvalidField {
            field: "flags",
            reason: format!(
                "{:#04x}: no flags are defined for {} files",
                f.flags,
                f.kind.name()
            ),
        });
    }
    Ok(width)
}

/// Reads the descriptor and checks what a file adds to its own rules: a raw
/// payload, and the counter width of the file's kind.
fn read_file_descriptor(
    r: &mut ByteReader<'_>,
    kind: Kind,
    width: CounterWidth,
) -> Result<DescriptorV1, CodecError> {
    let descriptor = DescriptorV1::read(r)?;
    if descriptor.codec != Codec::Raw {
        return Err(CodecError::UnknownId {
            what: "codec",
            found: descriptor.codec.id().into(),
            supported: "0 (raw) in filter files; compressed filters travel as exchange messages",
        });
    }
    if descriptor.counter_width != width {
        return Err(CodecError::InvalidField {
            field: "counter width",
            reason: format!(
                "{} bits in a {} file, which needs {}",
                descriptor.counter_width.id(),
                kind.name(),
                width.id()
            ),
        });
    }
    Ok(descriptor)
}

/// Refuses a payload with anything set past position `m`. Writers never set
/// the padding (every layout pads storage to whole 512-bit blocks), so a set
/// padding bit means corruption the CRC did not see or a foreign writer; and a
/// canonical payload makes decode → encode the identity, which the fuzz
/// targets check.
fn check_padding(p: &FilterParams, width: CounterWidth, payload: &[u8]) -> Result<(), CodecError> {
    // Bits per position in the payload, and the first bit past the last position.
    let bits_per = match width {
        CounterWidth::Bit => 1,
        CounterWidth::Four => 4,
    };
    let first = p.m() * bits_per;
    let first_byte = (first / 8) as usize;
    let partial = (first % 8) as u32;
    let mut tail = payload.get(first_byte..).unwrap_or(&[]);
    if partial != 0 {
        if let Some((&b, rest)) = tail.split_first() {
            if b >> partial != 0 {
                return Err(padding_error(p, first_byte));
            }
            tail = rest;
        }
    }
    match tail.iter().position(|&b| b != 0) {
        None => Ok(()),
        Some(i) => Err(padding_error(p, first_byte + i + (partial != 0) as usize)),
    }
}

fn padding_error(p: &FilterParams, byte: usize) -> CodecError {
    CodecError::InvalidField {
        field: "padding",
        reason: format!(
            "payload byte {byte} holds positions past m = {} (storage is padded to {}-bit blocks) and must be zero",
            p.m(),
            BLOCK_BITS
        ),
    }
}
