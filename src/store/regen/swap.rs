//! The swap: a built generation's tail written, its catalog record
//! committed, and the generation put in force in memory (steps 2 to 4 of
//! the [module docs](super#regeneration); [`Build`] holds the counters).

use super::build::Build;
use super::source::build_from_source;
use super::{current_record, RegenOptions, RegenReport};
use crate::store::catalog::TableMeta;
use crate::store::disk::log::{LogFile, LogOp};
use crate::store::disk::pagefile::PageFile;
use crate::store::disk::remove_files;
use crate::store::error::StoreError;
use crate::store::table::{Generation, Table, Writer};
use std::sync::Arc;

impl Table {
    /// Steps 2 to 4 of the [module docs](super#regeneration): plan, count
    /// the source, replay the journal so far, write the new tree, then
    /// commit and swap.
    pub(super) fn build_and_swap<F, I, K, E>(
        &self,
        old: &Arc<Generation>,
        meta: &TableMeta,
        live_at_start: u64,
        source: F,
        options: &RegenOptions,
    ) -> Result<RegenReport, StoreError>
    where
        F: FnOnce() -> I,
        I: IntoIterator<Item = Result<K, E>>,
        K: AsRef<[u8]>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let same = (old.params.layout(), old.params.hash());
        let mut b = build_from_source(meta, old, live_at_start, options, same, source)?;
        // The journal so far, taken without holding the lock for the replay.
        let early = old.writer.lock().journal.drain();
        b.replay(&early, None);
        drop(early);
        let new_meta = b.new_meta(meta);
        let files = b.write_new_files(&self.inner.shared, &new_meta)?;
        self.commit_and_swap(old, new_meta, b, files)
    }

    /// Step 4: under the catalog lock, then the old writer lock (the lock
    /// order of the [store docs](crate::store#lock-order); writers wait from
    /// here to the swap), writes the journal's tail, writes the catalog
    /// record naming the new generation (the commit point), swaps the
    /// generation in memory and retires the old one.
    fn commit_and_swap(
        &self,
        old: &Arc<Generation>,
        new_meta: TableMeta,
        b: Build,
        files: (PageFile, LogFile),
    ) -> Result<RegenReport, StoreError> {
        let catalog = self.inner.shared.catalog.lock();
        let mut w = old.writer.lock();
        old.check_live()?;
        let tail = w.journal.finish();
        self.commit_locked(old, new_meta, b, files, &tail, (catalog, w))
    }

    /// Step 4 with the catalog lock and the old writer lock held (released
    /// here): writes the journal's `tail`, commits, swaps.
    pub(super) fn commit_locked(
        &self,
        old: &Arc<Generation>,
        new_meta: TableMeta,
        mut b: Build,
        (mut pages, log): (PageFile, LogFile),
        tail: &[LogOp],
        (mut catalog, mut w): (
            parking_lot::MutexGuard<'_, crate::store::catalog::Catalog>,
            parking_lot::MutexGuard<'_, Writer>,
        ),
    ) -> Result<RegenReport, StoreError> {
        let shared = &self.inner.shared;
        b.write_tail(&mut pages, shared, tail)?;
        let (bits, memory, saturated) = b.derive_bits(&new_meta.name)?;
        let new_meta = write_new_record(&mut catalog, old, &new_meta)?;
        // From here the new generation is in force on disk.
        let writer = Writer::empty(b.params, pages, log, b.live, saturated);
        let new_gen =
            Generation::assemble(shared, new_meta.clone(), b.params, bits, memory, writer);
        self.inner.gen.store(Arc::new(new_gen));
        old.retire(&mut w);
        drop(w);
        *self.inner.meta.lock() = new_meta;
        self.inner.observed.reset();
        drop(catalog);
        // Garbage from here on: collected at the next open if this fails.
        remove_files(&shared.dir, old.meta.id, old.meta.generation);
        Ok(b.report)
    }
}

/// The commit point: checks that the catalog still names the old generation
/// and writes the record naming the new one (the current record, which
/// `set_params` may have changed since the build started, with the new
/// generation's `m`, `k`, capacity and number), durably. Returns it. Call
/// under the catalog lock.
fn write_new_record(
    catalog: &mut crate::store::catalog::Catalog,
    old: &Generation,
    built: &TableMeta,
) -> Result<TableMeta, StoreError> {
    let record = current_record(catalog, &old.meta)?;
    if record.generation != old.meta.generation {
        return Err(StoreError::storage(
            "regenerating a table",
            format!(
                "the catalog names generation {} of table {:?}, expected {}",
                record.generation, built.name, old.meta.generation
            ),
        ));
    }
    let new_meta = TableMeta {
        layout: built.layout,
        hash_algo: built.hash_algo,
        seed: built.seed,
        m: built.m,
        k: built.k,
        expected_keys: built.expected_keys,
        generation: built.generation,
        ..record
    };
    old.shared
        .commit_catalog(catalog, |e| e.put(new_meta.clone()))?;
    Ok(new_meta)
}
