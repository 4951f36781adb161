//! The filters themselves: sizing math, hashing, the bit and counting
//! filters in their three layouts, and the drift policy. Nothing here knows about
//! storage or the wire.

pub mod bloom;
pub mod counting;
pub mod drift;
pub mod geometry;
pub mod hash;
#[allow(unsafe_code)]
pub mod pages;
pub mod params;
#[allow(unsafe_code)]
pub(crate) mod simd;
pub mod split;
mod xxh64;
