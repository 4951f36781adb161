//! Store format 7 → 8: each page file's superblock says how far its log
//! was durable (`durable_seq`, frame version 5, `docs/FORMAT.md` § 11), so
//! that a log cut short (truncated, emptied) below what it had made durable
//! opens *damaged* instead of silently losing its last synced batches.
//!
//! Nothing on disk is rewritten by the step: it only switches the catalog
//! header's version to 8 (one catalog commit: a crash before it leaves a
//! format-7 store, after it a format-8 one). A format-7 superblock (frame
//! version 3 or 4) reads as claiming nothing past its chunks
//! (`durable_seq = folded_seq`: no check); each table's next fold, in the
//! background or on the writer's thread, and its next clean close after a
//! synced write, write a version-5 copy. After the switch a format-7 build
//! refuses the store (`StoreError::UnsupportedFormat`): it could not read
//! those copies.

use crate::store::catalog::{Catalog, StoreHeader};
use crate::store::error::{at_open, StoreError};

/// Switches `catalog` (of a format-7 store) to format 8.
pub(crate) fn v7_to_v8(catalog: &mut Catalog) -> Result<(), StoreError> {
    let header = StoreHeader {
        format_version: 8,
        ..catalog.header()
    };
    // The log made ready for appends as a writing open makes it (its torn
    // tail cut, its records written back): the switch is one of them.
    catalog.open_log()?;
    catalog.commit(|e| e.set_header(header)).map_err(at_open)
}
