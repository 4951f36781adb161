//! Store format 4 → 5: a page file's superblock says where its log starts
//! (`log_start`, frame version 3; `docs/FORMAT.md` § 11, § 15), so that a
//! fold in the background can commit while the writer goes on appending
//! after the records it folded.
//!
//! Nothing on disk needs rewriting: a superblock of frame version 1 or 2
//! reads as `log_start` 0, which is where a format-4 log starts. A table's
//! superblock is written as version 3 by its next fold. The step only
//! writes the catalog with the header's version raised to 5, in one atomic
//! replacement (the switch): a crash before it leaves a format-4 store,
//! after it a format-5 one. After the switch a format-4 build refuses the
//! store (`StoreError::UnsupportedFormat`) instead of meeting a version-3
//! superblock it cannot read in one of its tables.

use crate::store::catalog::{Catalog, StoreHeader};
use crate::store::error::{at_open, StoreError};

/// Switches `catalog` (of a format-4 store) to format 5.
pub(crate) fn v4_to_v5(catalog: &mut Catalog) -> Result<(), StoreError> {
    let header = StoreHeader {
        format_version: 5,
        ..catalog.header()
    };
    catalog.commit(|e| e.set_header(header)).map_err(at_open)
}
