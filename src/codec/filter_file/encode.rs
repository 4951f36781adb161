//! Writing filter files (FORMAT.md § 7).

use super::descriptor::{CounterWidth, DescriptorV1, DESCRIPTOR_LEN};
use crate::codec::frame;
use crate::filter::bloom::BloomRead;
use crate::filter::counting::CountingFilter;

/// Encodes any bit filter — a [`BitFilter`](crate::BitFilter), a table's
/// live filter (`Table::bloom()`), a decoded view or a received message — as
/// an exported file (FORMAT.md § 7); `n` is the writer's key count, stored
/// for information only.
///
/// # Examples
/// ```
/// use filterstore::{decode_filter, encode_bit_filter, BitFilter, BloomRead};
/// use filterstore::{FilterParams, HashSpec, Layout};
///
/// let p = FilterParams::for_capacity(1_000, 0.01, Layout::Blocked, HashSpec::xxh3(1))?;
/// let f = BitFilter::new(p)?;
/// for i in 0u32..1_000 {
///     f.insert(&i.to_le_bytes());
/// }
/// let file = encode_bit_filter(&f, 1_000);
/// // 72 bytes of header, the bit array (m/8 bytes in whole 64-byte blocks), 4 of CRC.
/// assert_eq!(p.m(), 10_240);
/// assert_eq!(file.len(), 72 + 10_240 / 8 + 4);
///
/// // A decoded file is a view over the file's bytes, itself a filter:
/// // encoding it again gives the same bytes.
/// let decoded = decode_filter(&file)?;
/// let filterstore::FilterBody::Bits(view) = decoded.body else { unreachable!() };
/// assert_eq!(encode_bit_filter(&view, decoded.n()), file);
/// assert!((0u32..1_000).all(|i| decoded.contains(&i.to_le_bytes())));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn encode_bit_filter(f: &impl BloomRead, n: u64) -> Vec<u8> {
    let params = *f.params();
    let d = DescriptorV1::raw(params, n, CounterWidth::Bit);
    encode_file(&d, |out| {
        for i in 0..params.num_words() {
            out.extend_from_slice(&f.word(i).to_le_bytes());
        }
    })
}

/// Encodes a counting filter as an exported file (FORMAT.md § 7); `n` is the
/// number of live keys, stored for information only.
///
/// # Examples
/// ```
/// use filterstore::{decode_filter, encode_counting_filter, CountingFilter};
/// use filterstore::{FilterParams, FrameKind, HashSpec, Layout};
///
/// let p = FilterParams::new(Layout::Blocked, 2048, 5, HashSpec::xxh3(77))?;
/// let mut c = CountingFilter::new(p)?;
/// for i in 0u32..100 {
///     c.insert(&i.to_le_bytes());
/// }
/// c.remove(&7u32.to_le_bytes())?;
/// let file = encode_counting_filter(&c, 99);
/// // 4 bits per position: 2048 positions are 1,024 bytes of counters.
/// assert_eq!(file.len(), 72 + 1_024 + 4);
///
/// let d = decode_filter(&file)?;
/// assert_eq!((d.kind(), d.n()), (FrameKind::CountingFilter, 99));
/// let counters = d.counters().expect("a counting filter");
/// assert_eq!(counters.min_count(&3u32.to_le_bytes()), 1);
/// assert!(d.contains(&3u32.to_le_bytes()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn encode_counting_filter(f: &CountingFilter, n: u64) -> Vec<u8> {
    let d = DescriptorV1::raw(*f.params(), n, CounterWidth::Four);
    encode_file(&d, |out| out.extend_from_slice(f.as_bytes()))
}

fn encode_file(d: &DescriptorV1, write_payload: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    // The payload length is bounded by 2^40 / 2 bytes: it fits in `usize` on the
    // 64-bit targets the crate supports.
    let body_len = DESCRIPTOR_LEN + d.payload_len as usize;
    let (kind, version) = (d.counter_width.file_kind(), d.format_version());
    frame::encode_with_version(kind, 0, body_len, version, |out| {
        out.extend_from_slice(&d.to_bytes());
        write_payload(out);
    })
}
