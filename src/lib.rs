#![doc = include_str!("../README.md")]
#![deny(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod codec;
pub mod error;
pub mod exchange;
pub mod filter;
pub mod guard;
pub mod store;

// Old paths of the filter modules, kept for this commit only (the files moved unedited).
pub use filter::{bloom, counting, drift, hash, params};

pub use bloom::{BitFilter, BloomRead, BloomReadDyn, FilterView};
pub use counting::CountingFilter;
pub use error::{CodecError, FilterError, ParamError};
pub use hash::{HashAlgo, HashSpec, KeyHash};
pub use params::{FilterParams, Layout};
pub use store::{Durability, FilterStore, StoreConfig, StoreError, Table, TableSpec, WriteBatch};
