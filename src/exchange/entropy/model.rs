//! The static byte model for a density `ones / m_bits`, and the coder tables
//! derived from it (FORMAT.md § 12, "The model").

use super::L;

/// Probability precision: frequencies sum to `2^SCALE_BITS`.
pub(super) const SCALE_BITS: u32 = 24;
/// Frequency total.
pub(super) const TOTAL: u32 = 1 << SCALE_BITS;
/// Slot → symbol lookup resolution: `2^BUCKET_BITS` buckets of `2^14` slots
/// (see [`DecTable`]).
pub(super) const BUCKET_BITS: u32 = 10;
pub(super) const BUCKET_SHIFT: u32 = SCALE_BITS - BUCKET_BITS;

/// The static byte model for a density `ones / m_bits`.
pub(super) struct Model {
    /// Frequency of each byte value; sums to [`TOTAL`], each ≥ 1.
    pub(super) freq: [u32; 256],
    /// Start of each byte value's slot range.
    pub(super) cum: [u32; 256],
    /// Byte values by decreasing frequency (ties by value): the slot order.
    pub(super) order: [u8; 256],
}

impl Model {
    /// Builds the model; requires `0 < ones < m_bits`.
    ///
    /// Byte `b` gets `max(1, round(p̂^c·(1−p̂)^(8−c)·2^24))` with
    /// `c = popcount(b)`; the most probable byte (`0x00`, or `0xFF` when
    /// `p̂ > ½`) takes the remainder so the total is exactly 2^24. Its
    /// share is at least `2^24/256 − 255`, so the remainder is always positive.
    pub(super) fn new(m_bits: u64, ones: u64) -> Self {
        let m = m_bits as f64;
        let p = ones as f64 / m;
        let q = (m_bits - ones) as f64 / m;
        let mut p_pow = [1.0f64; 9];
        let mut q_pow = [1.0f64; 9];
        for i in 1..9 {
            p_pow[i] = p_pow[i - 1] * p;
            q_pow[i] = q_pow[i - 1] * q;
        }
        let mut class = [0u32; 9];
        for (c, f) in class.iter_mut().enumerate() {
            let target = (p_pow[c] * q_pow[8 - c] * f64::from(TOTAL)).round();
            *f = (target as u32).max(1);
        }
        let mps: u8 = if ones > m_bits - ones { 0xFF } else { 0x00 };
        let mut freq = [0u32; 256];
        for (b, f) in freq.iter_mut().enumerate() {
            *f = class[b.count_ones() as usize];
        }
        freq[usize::from(mps)] = 0;
        let others: u32 = freq.iter().sum();
        freq[usize::from(mps)] = TOTAL.saturating_sub(others).max(1);
        debug_assert_eq!(freq.iter().sum::<u32>(), TOTAL);

        let mut order: [u8; 256] = core::array::from_fn(|i| i as u8);
        order.sort_unstable_by_key(|&b| (core::cmp::Reverse(freq[usize::from(b)]), b));
        let mut cum = [0u32; 256];
        let mut start = 0u32;
        for &b in &order {
            cum[usize::from(b)] = start;
            start += freq[usize::from(b)];
        }
        Model { freq, cum, order }
    }

    /// Per-byte-value encoder entries.
    pub(super) fn encode_table(&self) -> [EncSym; 256] {
        core::array::from_fn(|b| EncSym::new(self.cum[b], self.freq[b]))
    }

    /// Slot lookup tables for the decoder (see [`DecTable`]).
    pub(super) fn decode_table(&self) -> DecTable {
        let mut rank_cum = [TOTAL; 258];
        let mut rank_entry = [0u64; 256];
        for (r, &b) in self.order.iter().enumerate() {
            let (cum, freq) = (self.cum[usize::from(b)], self.freq[usize::from(b)]);
            rank_cum[r] = cum;
            rank_entry[r] = u64::from(b) << 56 | u64::from(cum) << 32 | u64::from(freq);
        }
        let width = 1u32 << BUCKET_SHIFT;
        let mut rank = 0usize;
        let bucket = core::array::from_fn(|k| {
            let start = (k as u32) << BUCKET_SHIFT;
            while rank < 255 && rank_cum[rank + 1] <= start {
                rank += 1;
            }
            let first = rank_entry[rank];
            let end = rank_cum[rank + 1];
            let second = if end >= start + width {
                first
            } else if rank_cum[rank + 2] >= start + width {
                rank_entry[rank + 1]
            } else {
                (rank as u64 + 1) << 56 | u64::from(end) << 32
            };
            [first, second]
        });
        DecTable {
            bucket,
            rank_cum,
            rank_entry,
        }
    }
}

/// Encoder view of one symbol, with the division by `freq` replaced by a
/// multiplication (Granlund & Montgomery 1994, Thm 4.2 with N = 63): encoder
/// states are below `2^39·freq < 2^63`, where for `freq ≥ 2`
/// `⌊⌊x·rcp / 2^64⌋ / 2^shift⌋ = ⌊x / freq⌋` exactly with `l = ⌈log2 freq⌉`,
/// `shift = l − 1` and `rcp = ⌊2^(63+l) / freq⌋ + 1 < 2^64`. For `freq = 1`
/// (Giesen's trick) `rcp = 2^64 − 1`, `shift = 0` give `q = x − 1`, which the
/// bias `cum + 2^24 − 1` turns back into `x' = x·2^24 + cum`.
#[derive(Clone, Copy)]
pub(super) struct EncSym {
    /// Renormalise (emit 32 bits) when the state is at least this.
    pub(super) x_max: u64,
    /// Reciprocal of `freq` (see above).
    rcp: u64,
    /// Extra right shift after the 64-bit high product.
    shift: u32,
    /// Added to the state: `cum`, or `cum + 2^24 − 1` when `freq = 1`.
    bias: u32,
    /// `TOTAL − freq`.
    cmpl: u32,
}

impl EncSym {
    pub(super) fn new(cum: u32, freq: u32) -> Self {
        let x_max = ((L >> SCALE_BITS) << 32) * u64::from(freq);
        let cmpl = TOTAL - freq;
        if freq < 2 {
            return EncSym {
                x_max,
                rcp: u64::MAX,
                shift: 0,
                bias: cum + TOTAL - 1,
                cmpl,
            };
        }
        let log = 32 - (freq - 1).leading_zeros();
        let rcp = ((1u128 << (63 + log)) / u128::from(freq) + 1) as u64;
        EncSym {
            x_max,
            rcp,
            shift: log - 1,
            bias: cum,
            cmpl,
        }
    }

    /// `C(x) = ⌊x/f⌋·2^24 + (x mod f) + cum` for `1 ≤ x < x_max = 2^39·f`,
    /// so the result is below `2^63`.
    #[inline(always)]
    pub(super) fn code(&self, x: u64) -> u64 {
        let q = ((u128::from(x) * u128::from(self.rcp)) >> 64) as u64 >> self.shift;
        x + u64::from(self.bias) + q * u64::from(self.cmpl)
    }
}

/// Decoder tables. Symbols are described by packed entries
/// `freq | cum << 32 | sym << 56`. The slots are cut into 1,024 buckets of
/// 2^14; `bucket[k]` holds the entry of the symbol at the bucket's start and
/// that of the next symbol, whose `cum` says where the first one ends (equal
/// entries if the bucket lies within one symbol). A bucket crossed by three
/// or more symbols, which happens only among symbols of probability below
/// 2^-10, has instead a second entry with `freq = 0` and the rank to start a
/// short scan of `rank_cum` from: 1.5% of the bytes at p̂ = 0.13, 3.3% at
/// worst (p̂ ≈ 0.2), none above p̂ = 0.4. The table takes 16 KiB, half of
/// L1; with one entry per bucket, every symbol boundary inside a bucket would
/// need the scan (25% of the bytes at p̂ ≈ ½, where decoding was 40% slower).
pub(super) struct DecTable {
    bucket: [[u64; 2]; 1 << BUCKET_BITS],
    /// Start of each rank's slot range; `rank_cum[256] = rank_cum[257] = 2^24`.
    rank_cum: [u32; 258],
    /// Packed entry of each rank.
    rank_entry: [u64; 256],
}

impl DecTable {
    /// Decodes one symbol from state `x`, returning it and the previous
    /// state `freq·⌊x/2^24⌋ + (x mod 2^24) − cum`, which cannot overflow for
    /// any `x < 2^64` since `freq < 2^24`.
    #[inline(always)]
    pub(super) fn step(&self, x: u64) -> (u8, u64) {
        let slot = x & u64::from(TOTAL - 1);
        let [first, second] =
            self.bucket[(slot >> BUCKET_SHIFT) as usize & ((1 << BUCKET_BITS) - 1)];
        // A branch, but a predictable one within the 75–99% of buckets that
        // hold a single symbol; it measured faster than a forced select.
        let mut e = if slot < second >> 32 & u64::from(TOTAL - 1) {
            first
        } else {
            second
        };
        if e as u32 == 0 {
            e = self.scan(slot, usize::from((e >> 56) as u8));
        }
        let (freq, cum) = (u64::from(e as u32), e >> 32 & u64::from(TOTAL - 1));
        ((e >> 56) as u8, freq * (x >> SCALE_BITS) + slot - cum)
    }

    /// The packed entry of the symbol containing `slot`, searching up from
    /// `rank`.
    #[cold]
    #[inline(never)]
    fn scan(&self, slot: u64, mut rank: usize) -> u64 {
        while rank < 255 && u64::from(self.rank_cum[rank + 1]) <= slot {
            rank += 1;
        }
        self.rank_entry[rank]
    }
}
