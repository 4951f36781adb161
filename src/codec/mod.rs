//! Versioned, checksummed encodings of everything filterstore persists or
//! sends. `docs/FORMAT.md` is the byte-level specification; this module is
//! its implementation, and knows nothing of sled.

pub(crate) mod filter_file;
#[cfg_attr(not(feature = "test-internals"), allow(unreachable_pub))]
pub mod frame;
#[cfg(feature = "store")]
#[cfg_attr(not(feature = "test-internals"), allow(unreachable_pub))]
pub mod meta;
pub(crate) mod reader;
