//! Store format 2 → 3: the catalog and the tables leave sled for the
//! store's own files (`docs/FORMAT.md` §8-§11).
//!
//! For every table, the generation in force is read from its sled tree —
//! its chunks with every log record applied in order, under the fold marks
//! of its state record (a fold cut short by a crash is finished here) — and
//! written into a new page file (one fold, committed and synced) with an
//! empty log. The guard storage's trees, if any, are copied into the
//! guard's own database (`guard/`, sled with 16 MiB segments:
//! `src/sled_engine/mod.rs`). Then the catalog's pairs are written, as they
//! were, into the catalog file with the header's version raised to 3: that
//! file is the switch. A crash before it leaves the version-2 store intact
//! (files written so far are overwritten when the step runs again); after
//! it, the store is at version 3 and the old sled database is removed (now,
//! or by the next writing open).

use super::{copy_guard_trees, write_table_files, StopAt};
use crate::sled_engine as engine;
use crate::store::catalog::{Catalog, StoreHeader};
use crate::store::config::StoreConfig;
use crate::store::error::{at_open, StoreError};
use std::path::Path;

/// Builds the format-3 files and switches to them; returns the catalog in
/// force (version 3, or version 2 when a test stops before the switch).
pub(super) fn v2_to_v3(
    db: &engine::Db,
    tree: &engine::Tree,
    dir: &Path,
    config: &StoreConfig,
    stop: StopAt,
) -> Result<Catalog, StoreError> {
    let mut entries = Vec::new();
    for item in tree.iter() {
        let (k, v) = item.map_err(|e| StoreError::sled("reading the catalog", e))?;
        entries.push((k.to_vec(), v.to_vec()));
    }
    let mut catalog = Catalog::from_entries(dir, entries)?;
    write_table_files(db, &catalog, dir, config)?;
    copy_guard_trees(db, dir, config)?;
    if stop == StopAt::BeforeSwitch {
        return Ok(catalog);
    }
    let header = StoreHeader {
        format_version: 3,
        ..catalog.header()
    };
    catalog.commit(|e| e.set_header(header)).map_err(at_open)?;
    Ok(catalog)
}
