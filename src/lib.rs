#![doc = include_str!("../README.md")]
#![deny(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod bloom;
pub mod codec;
pub mod counting;
pub mod demo;
pub mod drift;
pub mod error;
pub mod exchange;
pub mod guard;
pub mod hash;
pub mod params;
pub mod plot;
pub mod store;

pub use bloom::{BitFilter, BloomRead, BloomReadDyn, FilterView};
pub use counting::CountingFilter;
pub use error::{CodecError, FilterError, ParamError};
pub use hash::{HashAlgo, HashSpec, KeyHash};
pub use params::{FilterParams, Layout};
pub use store::{Durability, FilterStore, StoreConfig, StoreError, Table, TableSpec, WriteBatch};
