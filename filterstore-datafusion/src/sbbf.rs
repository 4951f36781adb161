//! Parquet split-block Bloom filters (the parquet crate's [`Sbbf`]).
//!
//! A Parquet SBBF hashes a value's plain encoding with XXH64, seed 0, picks a
//! 256-bit block from the hash's high 32 bits and sets one bit in each of the
//! block's eight 32-bit words, from the low 32 bits times eight fixed odd
//! "salts". filterstore's split-block layout ([`Layout::SplitBlock`]) is that
//! filter bit for bit: its bit array is the SBBF bitset, so
//! [`export_bit_filter`] turns a split-block filter into an [`Sbbf`] that
//! answers exactly as the filter does, and [`import_sbbf`] /
//! [`import_sbbf_split_block`] turn a serialized SBBF (as a Parquet file
//! stores it, or [`Sbbf::write`] writes it) into a split-block filter that
//! answers exactly as arrow-rs's `Sbbf::check` does (`tests/sql/sbbf.rs`: 1M
//! keys, present and absent, both ways, and a filter from a Parquet file
//! written by arrow-rs).
//!
//! [`SbbfArrowWriter`] writes a Parquet file with arrow-rs's `ArrowWriter`
//! and stores split-block filters ([`ColumnSbbf`]) as the Bloom filters of
//! named columns, which Parquet readers (DataFusion among them) then use to
//! skip row groups: one filter you built for the whole file (it refuses a
//! batch holding a value the filter lacks), or one per row group that it
//! builds from the row group's values ([`SbbfGranularity`] says what each
//! means for pruning).
//!
//! The other layouts (standard, blocked) hash with seeded XXH3-128 and place
//! `k` bits in a 512-bit block or anywhere: a bit of theirs cannot be moved
//! into an SBBF without the key it came from, so they refuse conversion with
//! a typed error; build a split-block filter (or [`sbbf_from_keys`]) instead.
//!
//! With this crate's key encoding ([`crate::int_key`]) the filters answer for
//! `BIGINT`, `BYTEA`/`VARCHAR` and fixed-size binary columns as the filter in
//! a Parquet file's column chunk does; for a Parquet `INT32` column the writer
//! hashes 4 bytes where this crate hashes 8, and the two do not agree.
//!
//! **Sizes.** The specification allows any number of blocks `z`, `1 ≤ z <
//! 2^31`, and so does the split-block layout. The Thrift header stores the
//! bitset's length as an `i32`, so an export is refused above `2^31 − 32`
//! bytes; arrow-rs writes at most 128 MiB and a power of two, and parquet-mr
//! reads at most 128 MiB, so a filter meant for other readers should keep
//! to that.

mod writer;
pub use writer::{ColumnSbbf, SbbfArrowWriter, SbbfGranularity};

use crate::error::{BloomUdfError, Result};
use crate::keys::{self, KeyVisitor};
use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, BooleanBufferBuilder};
use datafusion::parquet::bloom_filter::Sbbf;
use filterstore::{BitFilter, BloomRead, FilterParams, HashSpec, Layout};

const FN: &str = "sbbf";

/// The largest bitset an SBBF header can describe: its length is an `i32`,
/// in whole 32-byte blocks.
pub const MAX_SBBF_BYTES: usize = i32::MAX as usize / 32 * 32;

/// Why `params` cannot be expressed as an SBBF: not the split-block layout.
fn incompatible(params: &FilterParams) -> BloomUdfError {
    BloomUdfError::Sbbf(format!(
        "a {} filter hashed with {} (seed {:#x}), k = {}, cannot be converted bit for bit: an SBBF hashes with XXH64 seed 0 and sets k = 8 bits in 256-bit blocks by Parquet's salts, which is filterstore's split-block layout; build the filter with Layout::SplitBlock, or an SBBF from the keys with sbbf_from_keys",
        params.layout(),
        params.hash().algo.name(),
        params.hash().seed,
        params.k()
    ))
}

/// The bytes of the SBBF bitset a filter of `p` exports as: refused unless
/// `p` is the split-block layout and the bitset fits an SBBF header
/// ([`MAX_SBBF_BYTES`]). Reads no word of the filter.
fn sbbf_bytes(p: &FilterParams) -> Result<usize> {
    if p.layout() != Layout::SplitBlock {
        return Err(incompatible(p).into());
    }
    let len = usize::try_from(p.m() / 8).unwrap_or(usize::MAX);
    if len > MAX_SBBF_BYTES {
        return Err(BloomUdfError::Sbbf(format!(
            "a split-block filter of {len} bytes is larger than an SBBF header can describe ({MAX_SBBF_BYTES} bytes); Parquet readers expect at most 128 MiB"
        ))
        .into());
    }
    Ok(len)
}

/// Exports a split-block filter as a Parquet [`Sbbf`] with the same bits
/// (it answers every key as the filter does); any other layout is refused
/// with the reason, and so is a bitset larger than an SBBF header can
/// describe ([`MAX_SBBF_BYTES`]).
pub fn export_bit_filter(filter: &impl BloomRead) -> Result<Sbbf> {
    let len = sbbf_bytes(filter.params())?;
    let mut bitset = Vec::new();
    bitset
        .try_reserve_exact(len)
        .map_err(|_| BloomUdfError::Sbbf(format!("could not allocate {len} bytes for the SBBF")))?;
    for i in 0..len.div_ceil(8) {
        bitset.extend_from_slice(&filter.word(i).to_le_bytes());
    }
    // A filter of an odd block count has half a line of padding.
    bitset.truncate(len);
    Ok(Sbbf::new(&bitset))
}

/// The bitset of a serialized SBBF (Thrift header and bitset, as a Parquet
/// file holds it): refused when it does not parse, when the header's length
/// is not a positive multiple of 32 bytes, or holds more than
/// [`MAX_SBBF_BYTES`]. Allocates no more than the input's length.
fn sbbf_bitset(bytes: &[u8]) -> Result<Vec<u8>> {
    let malformed =
        |why: String| BloomUdfError::Sbbf(format!("malformed split-block Bloom filter: {why}"));
    let sbbf = Sbbf::from_bytes(bytes).map_err(|e| malformed(e.to_string()))?;
    // `from_bytes` checked that the header's length is the rest of the input
    // and read whole 32-byte blocks of it; a length that is not a multiple
    // of 32 leaves a remainder that arrow-rs ignores, and that shows as a
    // bitset that is not the input's tail.
    let mut bitset = Vec::new();
    sbbf.write_bitset(&mut bitset)
        .map_err(|e| malformed(e.to_string()))?;
    if bitset.is_empty() || !bytes.ends_with(&bitset) {
        return Err(
            malformed("the bitset length is not a positive multiple of 32 bytes".into()).into(),
        );
    }
    if bitset.len() > MAX_SBBF_BYTES {
        return Err(malformed(format!("{} bytes of bitset", bitset.len())).into());
    }
    Ok(bitset)
}

/// Imports a serialized Parquet SBBF (Thrift header and bitset, as
/// [`Sbbf::write`] writes it and a Parquet file stores it) as a split-block
/// filter with `params`, which must be [`Layout::SplitBlock`] with
/// `m = 8 × the bitset's bytes` (see [`import_sbbf_split_block`], which
/// derives them). A malformed SBBF is reported first; other layouts are
/// refused with the reason.
pub fn import_sbbf(bytes: &[u8], params: &FilterParams) -> Result<BitFilter> {
    let bitset = sbbf_bitset(bytes)?;
    if params.layout() != Layout::SplitBlock {
        return Err(incompatible(params).into());
    }
    if params.m() != 8 * bitset.len() as u64 {
        return Err(BloomUdfError::Sbbf(format!(
            "the SBBF holds {} bytes ({} blocks), the parameters ask for m = {} bits",
            bitset.len(),
            bitset.len() / 32,
            params.m()
        ))
        .into());
    }
    bit_filter_of(*params, &bitset)
}

/// Imports a serialized Parquet SBBF as a split-block filter of its own
/// size: `m = 8 ×` its bitset's bytes, `k = 8`, XXH64 seed 0. It answers
/// every key exactly as arrow-rs's `Sbbf::check` does on the same bytes.
pub fn import_sbbf_split_block(bytes: &[u8]) -> Result<BitFilter> {
    let bitset = sbbf_bitset(bytes)?;
    let params = FilterParams::new(
        Layout::SplitBlock,
        8 * bitset.len() as u64,
        8,
        HashSpec::xxh64(),
    )
    .map_err(|e| BloomUdfError::Sbbf(e.to_string()))?;
    bit_filter_of(params, &bitset)
}

/// A split-block filter holding `bitset` (its length checked by the caller).
fn bit_filter_of(params: FilterParams, bitset: &[u8]) -> Result<BitFilter> {
    let mut words = Vec::new();
    words
        .try_reserve_exact(params.num_words())
        .map_err(|_| BloomUdfError::Sbbf("could not allocate the filter".into()))?;
    words.extend(bitset.chunks(8).map(|c| {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        u64::from_le_bytes(w)
    }));
    words.resize(params.num_words(), 0);
    Ok(BitFilter::from_words(params, &words).map_err(|e| BloomUdfError::Sbbf(e.to_string()))?)
}

/// An SBBF of the non-null keys of `keys`, sized for `ndv` distinct values
/// at false-positive rate `fpp`.
pub fn sbbf_from_keys(keys: &ArrayRef, ndv: u64, fpp: f64) -> Result<Sbbf> {
    let sbbf = Sbbf::new_with_ndv_fpp(ndv, fpp).map_err(|e| BloomUdfError::Sbbf(e.to_string()))?;
    let mut v = Insert {
        sbbf,
        nulls: keys.logical_nulls(),
    };
    keys::visit(FN, keys, &mut v)?;
    Ok(v.sbbf)
}

/// Whether each key may be in `sbbf`; null keys give null.
pub fn sbbf_contains(sbbf: &Sbbf, keys: &ArrayRef) -> Result<BooleanArray> {
    let mut v = Check {
        sbbf,
        out: BooleanBufferBuilder::new(keys.len()),
    };
    keys::visit(FN, keys, &mut v)?;
    Ok(BooleanArray::new(v.out.finish(), keys.nulls().cloned()))
}

struct Insert {
    sbbf: Sbbf,
    nulls: Option<datafusion::arrow::buffer::NullBuffer>,
}

impl Insert {
    fn valid(&self, i: usize) -> bool {
        self.nulls.as_ref().is_none_or(|n| n.is_valid(i))
    }
}

impl KeyVisitor for Insert {
    fn ints(&mut self, len: usize, get: impl Fn(usize) -> u64) {
        for i in 0..len {
            if self.valid(i) {
                self.sbbf.insert(&keys::int_key(get(i))[..]);
            }
        }
    }
    fn bytes<'a>(&mut self, len: usize, get: impl Fn(usize) -> &'a [u8]) {
        for i in 0..len {
            if self.valid(i) {
                self.sbbf.insert(get(i));
            }
        }
    }
}

struct Check<'s> {
    sbbf: &'s Sbbf,
    out: BooleanBufferBuilder,
}

impl KeyVisitor for Check<'_> {
    fn ints(&mut self, len: usize, get: impl Fn(usize) -> u64) {
        for i in 0..len {
            self.out.append(self.sbbf.check(&keys::int_key(get(i))[..]));
        }
    }
    fn bytes<'a>(&mut self, len: usize, get: impl Fn(usize) -> &'a [u8]) {
        for i in 0..len {
            self.out.append(self.sbbf.check(get(i)));
        }
    }
}
