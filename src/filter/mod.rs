//! The filters themselves: sizing math, hashing, the bit and counting
//! filters in their three layouts, and the drift policy. Nothing here knows about
//! storage or the wire.

#[allow(unsafe_code)]
mod barrier;
pub(crate) mod bloom;
pub(crate) mod counting;
pub(crate) mod drift;
pub(crate) mod geometry;
pub(crate) mod hash;
#[allow(unsafe_code)]
pub(crate) mod pages;
pub(crate) mod params;
#[allow(unsafe_code)]
pub(crate) mod simd;
pub(crate) mod split;
mod xxh64;
