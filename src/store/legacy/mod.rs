//! The sled-era wing of the store: everything of store formats 1 and 2,
//! which kept the catalog and the tables in sled 0.34.7, and sled itself,
//! which formats 3 and later keep for one thing only, the guard's storage in
//! `<store>/guard/` ([`guard_db`]). The live path of today's format
//! (catalog, page files, logs) is the rest of `store/`: of this wing, only the open
//! (`open/mod.rs`, `open/marker.rs`: recognising, copying and migrating an old store;
//! the guard's database handle) and the guard's storage
//! ([`SledDiffStorage`](crate::SledDiffStorage), over sled's adapter
//! `src/sled_engine/`: sled behind its bounds, which knows no store type) use
//! anything, and nothing here imports the open.
//!
//! * [`open_sled`]: sled opened with a store's configuration, its errors
//!   the store's;
//! * [`guard_db`]: the guard's database, opened on first use;
//! * [`sled_dir`]: a store directory of format 1 or 2 — recognised without
//!   opening sled, copied privately for a read-only open, its sled files
//!   removed once migrated;
//! * [`generation`] and [`migrate`]: reading a table generation of format 1
//!   or 2, and the migration to format 3 (then
//!   `store/open/migrate.rs` takes it on from there).

mod generation;
pub(crate) mod guard_db;
pub(crate) mod migrate;
pub(crate) mod sled_dir;

use crate::sled_engine::{self as engine, OpenError};
use crate::store::config::StoreConfig;
use crate::store::error::StoreError;

/// Opens sled in `path` with the cache size and the write deadline of
/// `config` ([`engine::open_with_retry`]); a lock still held after the wait
/// is [`StoreError::Locked`].
pub(crate) fn open_sled(
    path: &std::path::Path,
    config: &StoreConfig,
    segment_size: usize,
) -> Result<engine::Db, StoreError> {
    engine::open_with_retry(path, config.cache_capacity, config.io_timeout, segment_size).map_err(
        |e| match e {
            OpenError::Locked => StoreError::Locked {
                path: path.to_path_buf(),
            },
            OpenError::Sled(e) => StoreError::sled("opening the database", e),
        },
    )
}
