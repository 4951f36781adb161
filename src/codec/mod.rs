//! Versioned, checksummed encodings of everything filterstore persists or
//! sends. `docs/FORMAT.md` is the byte-level specification; this module is
//! its implementation, and knows nothing of sled.

pub mod filter_file;
pub mod frame;
pub mod meta;
pub mod reader;

pub use filter_file::{
    decode_filter, encode_bit_filter, encode_counting_filter, inspect, CounterView, DecodedFilter,
    DescriptorV1, FilterBody, Inspection,
};
pub use reader::ByteReader;
