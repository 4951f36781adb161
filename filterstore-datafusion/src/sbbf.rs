//! Parquet split-block Bloom filters (the parquet crate's [`Sbbf`]).
//!
//! A Parquet SBBF hashes a value's plain encoding with XXH64, seed 0, picks a
//! 256-bit block from the hash's high 32 bits and sets one bit in each of the
//! block's eight 32-bit words, from the low 32 bits times eight fixed odd
//! "salts". A filterstore bit filter hashes with seeded XXH3-128 and places
//! `k` bits in a 512-bit block (blocked layout) or anywhere (standard). A bit
//! of one cannot be moved into the other without the key it came from, so
//! **no filterstore filter's bits convert to an SBBF, or back**: the hash
//! algorithm, the block size and the bit rule all differ.
//! [`export_bit_filter`] and [`import_sbbf`] check the parameters and say so
//! with a typed error; converting bits would need the core to gain an
//! SBBF-compatible layout (XXH64 seed 0, 256-bit blocks, k = 8, Parquet's
//! salts), which it does not have.
//!
//! What does work is building an SBBF from the keys, with this crate's key
//! encoding ([`crate::keys`]): [`sbbf_from_keys`] and [`sbbf_contains`]. For
//! `BIGINT`, `BYTEA`/`VARCHAR` and fixed-size binary columns these are the
//! bytes Parquet's writer hashes, so the filter answers like the one in a
//! Parquet file's column chunk; for a Parquet `INT32` column the writer
//! hashes 4 bytes where this crate hashes 8, and the two do not agree.

use crate::error::{BloomUdfError, Result};
use crate::keys::{self, KeyVisitor};
use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, BooleanBufferBuilder};
use datafusion::parquet::bloom_filter::Sbbf;
use filterstore::{BitFilter, BloomRead, FilterParams};

const FN: &str = "sbbf";

/// Why `params` cannot be expressed as an SBBF (always, for the layouts the
/// core has today).
fn incompatible(params: &FilterParams) -> BloomUdfError {
    BloomUdfError::Sbbf(format!(
        "a {} filter hashed with {} (seed {:#x}), k = {}, cannot be converted bit for bit: an SBBF hashes with XXH64 seed 0 and sets k = 8 bits in 256-bit blocks by Parquet's salts; build one from the keys with sbbf_from_keys",
        params.layout(),
        params.hash().algo.name(),
        params.hash().seed,
        params.k()
    ))
}

/// Exports a bit filter as a Parquet SBBF when its parameters allow; with
/// the core's layouts they never do, and this says why.
pub fn export_bit_filter(filter: &impl BloomRead) -> Result<Sbbf> {
    Err(incompatible(filter.params()).into())
}

/// Imports a serialized Parquet SBBF (Thrift header and bitset, as
/// [`Sbbf::write`] writes it) as a bit filter with `params`, when they allow;
/// with the core's layouts they never do. A malformed SBBF is reported first.
pub fn import_sbbf(bytes: &[u8], params: &FilterParams) -> Result<BitFilter> {
    Sbbf::from_bytes(bytes)
        .map_err(|e| BloomUdfError::Sbbf(format!("malformed split-block Bloom filter: {e}")))?;
    Err(incompatible(params).into())
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
