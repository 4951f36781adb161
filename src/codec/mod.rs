//! Versioned, checksummed encodings of everything filterstore persists or
//! sends. `docs/FORMAT.md` is the byte-level specification; this module is
//! its implementation, and knows nothing of sled.

pub mod filter_file;
pub mod frame;
#[cfg(feature = "store")]
pub mod meta;
pub mod reader;
