//! What every table of a store shares below the store itself: its
//! directory, configuration, catalog, drift policy and health callback,
//! whether it may write, and whether an earlier failure stopped its writes.
//! The tables hold this, not the store: data flows down, from the store
//! (which opens tables) to the tables, never back up.

use super::catalog::Catalog;
use super::config::StoreConfig;
use super::disk::log::Binding;
use super::error::StoreError;
use crate::filter::drift::{DriftPolicy, DriftReason};
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The callback of [`FilterStore::on_needs_regeneration`](super::FilterStore::on_needs_regeneration).
pub(crate) type RegenHook = Arc<dyn Fn(&str, &DriftReason) + Send + Sync>;

/// The store-wide state below the store itself (see module docs).
pub(crate) struct Shared {
    /// The store directory.
    pub(crate) dir: PathBuf,
    pub(crate) config: StoreConfig,
    /// Opened read-only: every write is refused.
    pub(crate) read_only: bool,
    /// The catalog; its mutex is the catalog lock (level 3 of the lock
    /// order).
    pub(crate) catalog: Mutex<Catalog>,
    /// Called when an automatic health check finds a table that needs
    /// regeneration.
    pub(crate) regen_hook: Mutex<Option<RegenHook>>,
    /// Whether `regen_hook` is set (read on every write without the lock).
    pub(crate) has_regen_hook: AtomicBool,
    /// The policy of `Table::health`.
    pub(crate) policy: Mutex<DriftPolicy>,
    /// The store format of its files (the catalog header's): today's
    /// (`STORE_FORMAT_VERSION`), or an older one for a read-only open of a
    /// store of that format (or its migration).
    format: u32,
    failed: AtomicBool,
    reason: Mutex<String>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("dir", &self.dir)
            .field("read_only", &self.read_only)
            .finish()
    }
}

impl Shared {
    pub(crate) fn new(
        dir: PathBuf,
        config: StoreConfig,
        read_only: bool,
        catalog: Catalog,
    ) -> Shared {
        Shared {
            dir,
            config,
            read_only,
            format: catalog.header().format_version,
            catalog: Mutex::new(catalog),
            regen_hook: Mutex::new(None),
            has_regen_hook: AtomicBool::new(false),
            policy: Mutex::new(DriftPolicy::default()),
            failed: AtomicBool::new(false),
            reason: Mutex::new(String::new()),
        }
    }

    /// The store format of the store's files.
    pub(crate) fn format(&self) -> u32 {
        self.format
    }

    /// Whose records the log of the generation of `meta` holds, in this
    /// store's format (`docs/FORMAT.md` §10).
    pub(crate) fn binding(&self, meta: &super::catalog::TableMeta) -> Binding {
        if self.format >= 4 {
            Binding::Bound {
                table_id: meta.id,
                generation: meta.generation,
            }
        } else {
            Binding::Unbound
        }
    }

    /// Whether a write may start: not read-only, not stopped.
    pub(crate) fn check_writable(&self) -> Result<(), StoreError> {
        if self.read_only {
            return Err(StoreError::ReadOnly {
                path: self.dir.clone(),
            });
        }
        if self.failed.load(Ordering::Acquire) {
            return Err(StoreError::Degraded {
                path: self.dir.clone(),
                reason: self.reason.lock().clone(),
            });
        }
        Ok(())
    }

    /// Stops every later write: after a failed sync the kernel may have
    /// dropped pages it could not write, and after a commit that failed
    /// half-way the disk's state is unknown, so nothing more is written
    /// until the store is reopened (recovery then reads what is durable).
    pub(crate) fn fail(&self, reason: String) {
        let mut r = self.reason.lock();
        if !self.failed.swap(true, Ordering::AcqRel) {
            *r = reason;
        }
    }

    /// Commits `change` to `catalog` (the catalog of this store, locked:
    /// [`Catalog::commit`]); a commit whose outcome is unknown stops the
    /// store's writes.
    pub(crate) fn commit_catalog(
        &self,
        catalog: &mut Catalog,
        change: impl FnOnce(&mut super::catalog::CatalogEdit),
    ) -> Result<(), StoreError> {
        catalog.commit(change).inspect_err(|e| {
            if let StoreError::OutcomeUnknown { op, source, .. } = e {
                self.fail(format!("{op} failed, outcome unknown: {source}"));
            }
        })?;
        // The change is durable; a checkpoint that fails before its rename
        // leaves the log growing (the next commit tries again), one whose
        // outcome is unknown stops the store's writes.
        if let Err(StoreError::OutcomeUnknown { op, source, .. }) = catalog.checkpoint_if_due() {
            self.fail(format!("{op} failed, outcome unknown: {source}"));
        }
        Ok(())
    }

    /// [`StoreError::OutcomeUnknown`] of `op`, after stopping the store's
    /// writes (see [`Shared::fail`]).
    pub(crate) fn outcome_unknown(&self, op: &'static str, source: std::io::Error) -> StoreError {
        self.fail(format!("{op} failed, outcome unknown: {source}"));
        StoreError::OutcomeUnknown {
            op,
            path: self.dir.clone(),
            source,
        }
    }

    /// `e`, after stopping the store's writes (see [`Shared::fail`]).
    pub(crate) fn failed_with(&self, e: StoreError) -> StoreError {
        self.fail(e.to_string());
        e
    }
}
