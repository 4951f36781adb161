//! Opening the database: the store's configuration from the command line,
//! and the three ways a command opens it (creating it, only if it exists,
//! read-only).

use super::failure::Failure;
use filterstore::{FilterStore, StoreConfig};
use std::path::Path;

/// `--memory-budget` (`u64::MAX`: not given).
pub static MEMORY_BUDGET: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(u64::MAX);

/// The configuration every command opens its store with: the default, with
/// `--memory-budget` when given.
pub fn config() -> StoreConfig {
    let b = MEMORY_BUDGET.load(std::sync::atomic::Ordering::Relaxed);
    StoreConfig::default().memory_budget((b != u64::MAX).then_some(b))
}

/// Opens (or creates) the store in `dir` for a command that makes a table.
pub fn open_or_create(dir: &Path) -> Result<FilterStore, Failure> {
    Ok(FilterStore::open_with(dir, config())?)
}

/// Runs `make` (a table in `store`, opened by
/// [`open_or_create`]); when it fails, takes back the store if this command
/// made it for nothing ([`FilterStore::discard_if_new`]): a refused table
/// (invalid parameters, a damaged file) leaves no empty database behind.
pub fn or_discard<T>(
    store: FilterStore,
    make: impl FnOnce(&FilterStore) -> Result<T, Failure>,
) -> Result<(FilterStore, T), Failure> {
    match make(&store) {
        Ok(t) => Ok((store, t)),
        Err(f) => match store.discard_if_new() {
            Ok(_) => Err(f),
            Err(e) => Err(Failure(format!(
                "{}; the new database this command made could not be removed: {e}",
                f.0
            ))),
        },
    }
}

/// Opens a store that must already exist (only `create` makes a new one, so
/// that a mistyped `--db` does not leave an empty database behind).
pub fn open_existing(dir: &Path) -> Result<FilterStore, Failure> {
    if !dir.exists() {
        return Err(Failure(format!(
            "no database at {}; create a table first with `filterstore create`, or set --db / FILTERSTORE_DB",
            dir.display()
        )));
    }
    Ok(FilterStore::open_with(dir, config())?)
}

/// Opens an existing store for a command that only reads it: read-only, so
/// that nothing in `dir` is created or modified, and a directory that is not
/// a filterstore database is refused untouched.
pub fn open_read_only(dir: &Path) -> Result<FilterStore, Failure> {
    if !dir.exists() {
        return open_existing(dir);
    }
    Ok(FilterStore::open_snapshot_with(dir, config())?)
}
