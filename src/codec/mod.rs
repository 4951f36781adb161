//! Versioned, checksummed encodings of everything filterstore persists or
//! sends. `docs/FORMAT.md` is the byte-level specification; this module is
//! its implementation, and knows nothing of sled.

pub mod frame;
pub mod meta;
