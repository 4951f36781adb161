//! `filterstore inspect`: every header field of a filter file and what its
//! payload implies.

use super::decode::{decode_filter, FilterBody};
use super::descriptor::DESCRIPTOR_LEN;
use crate::codec::frame;
use crate::error::CodecError;
use crate::filter::bloom::BloomRead;
use serde::Serialize;

/// Every header field of a filter file, plus what its payload implies, for
/// `filterstore inspect` (text through `Display`, JSON through `Serialize`).
/// Produced only for a file that passed every check of [`decode_filter`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Inspection {
    /// Total file size in bytes.
    pub file_len: u64,
    /// Format version the file was written with.
    pub format_version: u16,
    /// Oldest reader version that may read it.
    pub min_reader_version: u16,
    /// Frame kind name.
    pub kind: &'static str,
    /// Frame kind id.
    pub kind_id: u8,
    /// Frame flags (always 0 in format version 1).
    pub flags: u8,
    /// Frame body length in bytes (descriptor + payload).
    pub body_len: u64,
    /// The CRC32 stored in the file, verified against the contents.
    pub crc32: u32,
    /// Layout name.
    pub layout: &'static str,
    /// Layout id.
    pub layout_id: u8,
    /// Hash algorithm name.
    pub hash: &'static str,
    /// Hash algorithm id.
    pub hash_id: u8,
    /// Hash seed.
    pub seed: u64,
    /// Filter size in bits (positions).
    pub m: u64,
    /// Hash functions per key.
    pub k: u32,
    /// The writer's key count.
    pub n: u64,
    /// Bits per position (0 = bit filter, 4 = counting filter).
    pub counter_width: u8,
    /// Codec name.
    pub codec: &'static str,
    /// Codec id.
    pub codec_id: u8,
    /// Payload length in bytes.
    pub payload_len: u64,
    /// `m / n`, if `n > 0`.
    pub bits_per_key: Option<f64>,
    /// The layout model's false-positive rate after `n` keys.
    pub model_fp: f64,
    /// Positions set (non-zero counters for a counting filter).
    pub bits_set: u64,
    /// `bits_set / m`.
    pub fill_ratio: f64,
    /// The false-positive rate the current fill implies.
    pub estimated_fp: f64,
    /// Distinct keys estimated from the zero positions.
    pub estimated_keys: f64,
    /// Saturated (sticky) counters, for a counting filter.
    pub saturated_counters: Option<u64>,
}

/// Decodes `bytes` with every check of [`decode_filter`] and reports every
/// header field and what the payload implies.
///
/// # Examples
/// ```
/// use filterstore::{encode_bit_filter, inspect, BitFilter, FilterParams, HashSpec, Layout};
///
/// let p = FilterParams::new(Layout::Standard, 10_000, 7, HashSpec::xxh3(0x4d))?;
/// let f = BitFilter::new(p)?;
/// for i in 0u32..1_000 {
///     f.insert(&i.to_le_bytes());
/// }
/// let i = inspect(&encode_bit_filter(&f, 1_000))?;
/// assert_eq!((i.kind, i.layout, i.m, i.k, i.n), ("bit-filter", "standard", 10_000, 7, 1_000));
/// assert_eq!(i.file_len, 72 + 1_280 + 4);
/// assert_eq!(i.bits_per_key, Some(10.0));
/// // The fill predicts the keys and the false-positive rate.
/// assert!((i.estimated_keys - 1_000.0).abs() < 20.0, "{}", i.estimated_keys);
/// assert!((i.estimated_fp - 0.0082).abs() < 0.001, "{}", i.estimated_fp);
/// assert!(i.to_string().contains("k                  7"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn inspect(bytes: &[u8]) -> Result<Inspection, CodecError> {
    let d = decode_filter(bytes)?;
    let p = *d.params();
    let crc = bytes
        .len()
        .checked_sub(frame::TRAILER_LEN)
        .and_then(|at| bytes.get(at..))
        .map_or(0, |b| {
            let mut a = [0u8; 4];
            a.copy_from_slice(b);
            u32::from_le_bytes(a)
        });
    let (bits_set, estimated_fp, estimated_keys) = match &d.body {
        FilterBody::Bits(v) => (v.count_ones(), v.estimated_fp(), v.estimate_len()),
        FilterBody::Counters(c) => (c.count_ones(), c.estimated_fp(), c.estimate_len()),
    };
    let n = d.n();
    Ok(Inspection {
        file_len: bytes.len() as u64,
        format_version: d.version,
        min_reader_version: d.min_reader,
        kind: d.kind().name(),
        kind_id: d.kind().id(),
        flags: 0,
        body_len: (DESCRIPTOR_LEN as u64) + d.descriptor.payload_len,
        crc32: crc,
        layout: p.layout().name(),
        layout_id: p.layout().id(),
        hash: p.hash().algo.name(),
        hash_id: p.hash().algo.id(),
        seed: p.hash().seed,
        m: p.m(),
        k: p.k(),
        n,
        counter_width: d.descriptor.counter_width.id(),
        codec: d.descriptor.codec.name(),
        codec_id: d.descriptor.codec.id(),
        payload_len: d.descriptor.payload_len,
        bits_per_key: (n > 0).then(|| p.m() as f64 / n as f64),
        model_fp: p.expected_fp(n),
        bits_set,
        fill_ratio: bits_set as f64 / p.m() as f64,
        estimated_fp,
        estimated_keys,
        saturated_counters: d.counters().map(|c| c.saturated()),
    })
}

impl std::fmt::Display for Inspection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "file length        {} bytes", self.file_len)?;
        writeln!(
            f,
            "format version     {} (readable by version {} and newer)",
            self.format_version, self.min_reader_version
        )?;
        writeln!(f, "kind               {} ({})", self.kind, self.kind_id)?;
        writeln!(f, "flags              {:#04x}", self.flags)?;
        writeln!(f, "body length        {} bytes", self.body_len)?;
        writeln!(f, "crc32              {:#010x} (verified)", self.crc32)?;
        writeln!(f, "layout             {} ({})", self.layout, self.layout_id)?;
        writeln!(f, "hash               {} ({})", self.hash, self.hash_id)?;
        writeln!(f, "seed               {:#018x}", self.seed)?;
        writeln!(f, "m                  {} bits", self.m)?;
        writeln!(f, "k                  {}", self.k)?;
        writeln!(f, "n                  {}", self.n)?;
        writeln!(f, "counter width      {} bits", self.counter_width)?;
        writeln!(f, "codec              {} ({})", self.codec, self.codec_id)?;
        writeln!(f, "payload length     {} bytes", self.payload_len)?;
        match self.bits_per_key {
            Some(b) => writeln!(f, "bits per key       {b:.2}")?,
            None => writeln!(f, "bits per key       - (n = 0)")?,
        }
        writeln!(f, "model FP at n      {:.4}%", self.model_fp * 100.0)?;
        writeln!(
            f,
            "positions set      {} ({:.2}%)",
            self.bits_set,
            self.fill_ratio * 100.0
        )?;
        writeln!(f, "estimated FP now   {:.4}%", self.estimated_fp * 100.0)?;
        write!(f, "estimated keys     {:.0}", self.estimated_keys)?;
        if let Some(s) = self.saturated_counters {
            write!(f, "\nsaturated counters {s}")?;
        }
        Ok(())
    }
}
