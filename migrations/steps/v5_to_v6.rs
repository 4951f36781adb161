//! Store format 5 → 6: the catalog's changes are appended to a log
//! (`catalog.log`, `docs/FORMAT.md` § 8) instead of rewriting the catalog
//! file on every change, and the catalog may hold sealed filters (§ 9a),
//! whose bytes live in pack files.
//!
//! Nothing else on disk changes: tables keep their page files and logs as
//! format 5 wrote them. The step writes the catalog file whole, with the
//! header's version raised to 6 and a reference to log 1 (the switch: one
//! atomic replacement), then makes log 1, empty. A crash before the switch
//! leaves a format-5 store; after it, a format-6 store whose log may be
//! missing, which the next writing open makes (and a read-only open reads
//! as empty). After the switch a format-5 build refuses the store
//! (`StoreError::UnsupportedFormat`) instead of missing the changes in its
//! log.

use crate::store::catalog::{Catalog, StoreHeader};
use crate::store::error::{at_open, StoreError};

/// Switches `catalog` (of a format-5 store) to format 6.
pub(crate) fn v5_to_v6(catalog: &mut Catalog) -> Result<(), StoreError> {
    let header = StoreHeader {
        format_version: 6,
        ..catalog.header()
    };
    catalog.switch_to_log(header).map_err(at_open)
}
