//! Store format 3 → 4: log records name the table and generation they
//! belong to and say how far their log was durable when they were appended
//! (`docs/FORMAT.md` §10, §15). Only the logs change.
//!
//! For every table whose catalog record is readable, its generation in
//! force is opened with the format-3 reader and its log folded into its
//! page file — a fold like any other, committed by the page file's
//! superblock, so the store is a valid format-3 store before and after it
//! — and the log file is emptied and synced. Then the catalog is written
//! with the header's version raised to 4: the switch. A crash before it
//! leaves a format-3 store whose tables are folded (the step runs again,
//! finding less or nothing to fold); after it, a format-4 store whose logs
//! are empty, which no format-3 record can enter. A table whose files fail
//! their checks (`StoreError::Corrupt`) is left as it was: opened after the
//! switch it is refused as corrupt, or its format-3 records, read as
//! format 4, are found to be another log's and the table answers "maybe"
//! until it is rebuilt; it never answers "absent" for a key it holds.

use crate::store::catalog::{Catalog, StoreHeader, TableMeta};
use crate::store::config::StoreConfig;
use crate::store::disk::{io, io_err};
use crate::store::error::{at_open, StoreError};
use crate::store::shared::Shared;
use crate::store::table::Generation;
use std::path::Path;
use std::sync::Arc;

/// Folds and empties every table's log, then switches `catalog` (of a
/// format-3 store in `dir`) to format 4.
pub(crate) fn v3_to_v4(
    dir: &Path,
    config: &StoreConfig,
    catalog: &mut Catalog,
) -> Result<(), StoreError> {
    let shared = Arc::new(Shared::new(
        dir.to_path_buf(),
        *config,
        false,
        catalog.detached_copy(),
    ));
    let (records, _) = catalog.readable();
    for meta in records {
        match fold_and_empty(&shared, meta) {
            Ok(()) | Err(StoreError::Corrupt { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let header = StoreHeader {
        format_version: 4,
        ..catalog.header()
    };
    catalog.commit(|e| e.set_header(header)).map_err(at_open)
}

/// Folds the log of the generation of `meta` into its page file (read as
/// format 3) and empties the log, durably.
fn fold_and_empty(shared: &Arc<Shared>, meta: TableMeta) -> Result<(), StoreError> {
    let gen = Generation::load(shared, meta)?;
    {
        let mut w = gen.writer.lock();
        gen.fold(&mut w)?;
        let log = w.log.file();
        log.set_len(0)
            .and_then(|()| io::sync_all(log))
            .map_err(io_err("emptying a log to migrate it"))?;
    }
    // Nothing more is written to its files (no seal when it is dropped).
    gen.mark_dropped();
    Ok(())
}
