//! Store format 6 → 7: a guard storage's differential file is an
//! append-only log of the store's own format (`guard-logs/`, `docs/FORMAT.md`
//! § 8b) instead of a sled tree beside its base.
//!
//! Nothing on disk is rewritten by the step: it only switches the catalog
//! header's version to 7 (one catalog commit: a crash before it leaves a
//! format-6 store, after it a format-7 one). What a format-6 guard storage
//! left in its sled differential-file tree is moved into its base by the
//! storage's first open in format 7 (`SledDiffStorage::open`), a group of
//! changes per sled transaction, so a cut there leaves each change either
//! still in the tree or in the base, and the next open goes on. After the
//! switch a format-6 build refuses the store (`StoreError::UnsupportedFormat`):
//! it would read none of the changes in the logs, and its guard would clear
//! a filter that still has to answer for them.

use crate::store::catalog::{Catalog, StoreHeader};
use crate::store::error::{at_open, StoreError};

/// Switches `catalog` (of a format-6 store) to format 7.
pub(crate) fn v6_to_v7(catalog: &mut Catalog) -> Result<(), StoreError> {
    let header = StoreHeader {
        format_version: 7,
        ..catalog.header()
    };
    // The log made ready for appends as a writing open makes it (its torn
    // tail cut, its records written back): the switch is one of them.
    catalog.open_log()?;
    catalog.commit(|e| e.set_header(header)).map_err(at_open)
}
