#![doc = include_str!("../README.md")]
#![deny(unsafe_code)]
#![warn(missing_docs)]
// `pub` marks the face only (rooms use `pub(crate)` / `pub(super)`). The
// items that are reachable only through `__internals` allow the lint
// without feature `test-internals`, where they are not.
#![warn(unreachable_pub)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

// Every module is private: the items below are the whole public API, each
// under one path. Layers, from the bottom: `filter` (sizing, hashing, the
// filters, drift policy) and `codec` (the byte formats of docs/FORMAT.md),
// then `exchange` (messages between sites) and, with the `store` feature,
// `sled_engine` (sled behind its bounds, on the ground floor beside
// `filter`), `store` (tables in the store's own files) and `guard` (the
// differential-file pattern, its base on sled);
// on top, `umbrella`, the one `Error` over every family. Data flows one way:
// nothing below imports anything above it.
mod codec;
mod error;
mod exchange;
mod filter;
#[cfg(feature = "store")]
mod guard;
// sled 0.34.7 behind its bounds: the guard's base and the migration of
// stores of format 1 and 2 (it knows no store type).
#[cfg(feature = "store")]
mod sled_engine;
#[cfg(feature = "store")]
mod store;
mod umbrella;

// Filters, their parameters and hashing.
pub use filter::bloom::{
    BatchStrategy, BitFilter, BloomRead, BloomReadDyn, FilterView, FrozenFilter,
    PARTITION_MIN_BYTES, PARTITION_MIN_KEYS,
};
pub use filter::counting::{counter_bytes, CountingFilter, InsertOutcome, COUNTER_MAX};
pub use filter::geometry::{
    Layout, BLOCK_BITS, MAX_K, MAX_M_BITS, MAX_SPLIT_BLOCKS, MIN_M_BITS, SPLIT_BLOCK_BITS, SPLIT_K,
};
pub use filter::hash::{positions, HashAlgo, HashSpec, KeyHash, Positions};
pub use filter::pages::{Pages, HUGE_PAGE_MIN_BYTES};
pub use filter::params::{
    counter_overflow_bound, fp_blocked, fp_for, fp_sectorized, fp_split_block, fp_standard,
    fp_standard_approx, optimal_k, space_lower_bound_bits, FilterParams,
};
pub use filter::split::{split_block_index, split_masks, SPLIT_SALTS};

// Drift: health signals and the regeneration policy.
pub use filter::drift::{
    Assessment, DriftPolicy, DriftReason, HealthSignals, ObservedCounts, ObservedFp,
};

// Filter files (FORMAT.md §3-7).
pub use codec::filter_file::{
    decode_filter, encode_bit_filter, encode_counting_filter, inspect, Codec, CounterView,
    CounterWidth, DecodedFilter, DescriptorV1, FilterBody, Inspection, FILE_EXTENSION,
};

// The frame every record and message is wrapped in (FORMAT.md §2): for tools
// that dispatch on a file's kind, or check one without decoding it.
pub use codec::frame::{
    decode as decode_frame, encode as encode_frame, Frame, FrameKind, FORMAT_VERSION,
    MIN_READ_VERSION,
};

// The semi-join exchange: messages, sizing, probing, refinement.
pub use exchange::entropy::{compressed_size_estimate, EntropyError};
pub use exchange::message::{
    build_message, build_message_with_stats, decode_message, decode_message_with_limit,
    encode_delta_message, encode_delta_message_with_stats, encode_message,
    encode_message_with_stats, CodecChoice, DecodedMessage, ExchangeError, MessageTarget,
    ReceivedFilter, BUILD_STATS_LEN, DEFAULT_MAX_MESSAGE_BITS, MESSAGE_OVERHEAD,
};
pub use exchange::optimize::{
    plan_for_budget, plan_for_fp, transmit_bits_per_key, OptimizeError, TransmitPlan,
};
pub use exchange::{
    estimate_join_size, estimate_join_size_from_filters, probe, BuildStats, JoinSizeEstimate,
    RefineStats, Refiner,
};

// Errors of the layers without storage, and the umbrella over every family.
pub use error::{CodecError, FilterError, ParamError};
pub use umbrella::Error;

// The persistent store (feature `store`).
#[cfg(feature = "store")]
pub use store::{
    Durability, ExportKind, FilterStore, HealthReport, NameError, NewSealed, RegenOptions,
    RegenReport, SealedBatch, SealedFilter, SealedInfo, StoreConfig, StoreError, Table, TableBloom,
    TableReader, TableSpec, TableStats, WriteBatch, DEFAULT_BUFFER_OPS, DEFAULT_CACHE_CAPACITY,
    DEFAULT_FILTER_MEMORY_SHARE, DEFAULT_FOLD_MEMORY, DEFAULT_HEADROOM, DEFAULT_IO_TIMEOUT,
    DEFAULT_MATERIALIZED_BLOCKS, MARKER_FILE, MAX_NAME_LEN, MAX_RECORD_OPS, MAX_SEALED_TAG,
    STORE_FORMAT_VERSION,
};

// The differential-file guard (feature `store`).
#[cfg(feature = "store")]
pub use guard::{
    Change, DiffStorage, Guard, GuardError, GuardStats, GuardValue, SledDiffError, SledDiffStorage,
};
// The guard storage's limits: the largest key and value, and the items per call.
#[cfg(feature = "store")]
pub use guard::{
    GUARD_GROUP, GUARD_PENDING_LIMIT, MAX_GUARD_KEY, MAX_GUARD_VALUE, MERGE_AT, WAIT_AT,
};

/// Unstable internals for the fuzz crate and the byte-level format tests
/// (feature `test-internals`): the raw frame and metadata encoders and the
/// entropy coder. Not part of the API; anything here may change in any
/// release.
#[cfg(feature = "test-internals")]
#[doc(hidden)]
pub mod __internals {
    pub use crate::codec::frame;
    #[cfg(feature = "store")]
    pub use crate::codec::meta;
    pub use crate::exchange::entropy;
    pub use crate::filter::hash::map_to_range;
    pub use crate::filter::simd::{
        block_has_all, scalar_block_has_all, scalar_split_has_all, split_has_all, uses_avx2,
    };
    /// Injected I/O failures of the store's files (tests only).
    #[cfg(feature = "store")]
    pub use crate::store::disk::io::fault;
}
