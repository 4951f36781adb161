//! Exported filter files (`.fsf`, `docs/FORMAT.md` § 5 and § 7): a
//! [`DescriptorV1`] followed by the filter's raw payload, inside a frame of
//! kind 1 (bit filter) or 2 (counting filter). The layouts and the order of
//! the reader's checks are specified there, and pinned by golden tests; these
//! files implement them: `descriptor.rs` (§ 5), `encode.rs` and `decode.rs`
//! (§ 7), `inspect.rs` (`filterstore inspect`).
//!
//! # Decoding is zero-copy and allocation-free
//! [`decode_filter`] checks everything before it hands out views that borrow
//! the input: a `FilterView` for a bit filter, a [`CounterView`] for a
//! counting filter. A 1 GiB file is therefore verified and queried without a
//! second gigabyte; [`DecodedFilter::to_bit_filter`] copies when an owned,
//! mutable filter is wanted.
//!
//! Every failure is a typed `CodecError`. A filter that cannot be decoded
//! must be treated as "maybe" for every key, never as "absent".

mod decode;
mod descriptor;
mod encode;
mod inspect;
#[cfg(test)]
mod tests;

pub use decode::{decode_filter, CounterView, DecodedFilter, FilterBody};
pub(crate) use descriptor::params_version;
pub(crate) use descriptor::DESCRIPTOR_LEN;
pub use descriptor::{Codec, CounterWidth, DescriptorV1};
pub use encode::{encode_bit_filter, encode_counting_filter};
pub use inspect::{inspect, Inspection};

/// File name extension of exported filter files ("filterstore filter").
pub const FILE_EXTENSION: &str = "fsf";
