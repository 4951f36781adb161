//! Store format migrations: bringing a store written by an older format
//! version up to [`STORE_FORMAT_VERSION`](crate::store::STORE_FORMAT_VERSION) when
//! it is opened for writing.
//!
//! Formats 1 and 2 kept everything in sled; their migration to format 3
//! lives in [`from_sled`]. Formats
//! 3 and 4 keep the catalog and the tables in the store's own files; 4
//! binds each log record to its table and generation; 5 has each page
//! file's superblock say where its log starts. The 3 → 4 step, here,
//! folds every log and empties it, then switches the catalog header: a
//! crash at any point leaves a store that opens as format 3 or as format 4.
//! The 4 → 5 step only switches the header (format-4 superblocks read as
//! logs that start at byte 0); 5 → 6 writes the catalog file with a
//! reference to its new log, and makes the log; 6 → 7 switches the header
//! (guard storages keep their differential file as a log from then on);
//! 7 → 8 switches the header (format-7 superblocks read as claiming no
//! durable log record past their chunks; each table's next fold or close
//! writes the claim).
//!
//! Each step lives in `migrations/steps/v<N>_to_v<N+1>.rs`, next to the
//! fixtures it is tested on (`tests/store/fixture.rs`: those are bytes on
//! users' disks, kept forever), and is compiled in by a `#[path]` include.

pub(crate) mod from_sled;
mod sled_generation;

pub(crate) use from_sled::upgrade_legacy;

#[path = "../../../../migrations/steps/v3_to_v4.rs"]
mod v3_to_v4;
#[path = "../../../../migrations/steps/v4_to_v5.rs"]
mod v4_to_v5;
#[path = "../../../../migrations/steps/v5_to_v6.rs"]
mod v5_to_v6;
#[path = "../../../../migrations/steps/v6_to_v7.rs"]
mod v6_to_v7;
#[path = "../../../../migrations/steps/v7_to_v8.rs"]
mod v7_to_v8;

pub(crate) use v3_to_v4::v3_to_v4;
use v4_to_v5::v4_to_v5;
use v5_to_v6::v5_to_v6;
use v6_to_v7::v6_to_v7;
use v7_to_v8::v7_to_v8;

/// Runs every step from the version of `catalog` (of the store in `dir`,
/// opened for writing), if it is 3 or later, to the current one.
pub(crate) fn from_format_3(
    dir: &std::path::Path,
    config: &crate::store::config::StoreConfig,
    catalog: &mut crate::store::catalog::Catalog,
) -> Result<(), crate::store::error::StoreError> {
    if catalog.header().format_version == 3 {
        v3_to_v4(dir, config, catalog)?;
    }
    if catalog.header().format_version == 4 {
        v4_to_v5(catalog)?;
    }
    if catalog.header().format_version == 5 {
        v5_to_v6(catalog)?;
    }
    if catalog.header().format_version == 6 {
        v6_to_v7(catalog)?;
    }
    if catalog.header().format_version == 7 {
        v7_to_v8(catalog)?;
    }
    Ok(())
}
