//! Moving a table to another layout ([`Table::change_layout`]): a rebuild
//! from the host's keys with writers held out.
//!
//! A regeneration keeps the table's hash because its journal holds key
//! hashes, not keys (module docs of [`super`]); a new layout may need a new
//! hash (the split-block layout hashes with XXH64, the others with seeded
//! XXH3-128), so the writes made during the build could not be replayed
//! into it. Instead the rebuild holds the table's writer lock from before
//! the key source is called to the swap: writes to the table wait (lookups
//! do not: they read the old generation until the swap), there is no
//! journal, and the source must yield every key live at that moment. The
//! catalog lock is held as long (the lock order of the store docs: 2 → 3
//! → 5), so creates, drops and regeneration commits of other tables wait
//! too. An error before the commit point leaves the old generation, and
//! everything in it, in force.

use super::source::build_from_source;
use super::{RegenOptions, RegenReport};
use crate::filter::hash::HashSpec;
use crate::filter::params::Layout;
use crate::store::disk::remove_files;
use crate::store::error::StoreError;
use crate::store::table::Table;
use std::sync::atomic::Ordering;

impl Table {
    /// Rebuilds the table in `layout` from `source`, which must yield every
    /// key live in the table (each as often as it is live); `options`
    /// sizes it as for [`Table::regenerate`] (capacity from the keys read
    /// times the headroom, or fixed), at the table's target rate. Writes to
    /// the table wait until it returns; lookups answer from the old filter
    /// until the swap. The new generation hashes with the layout's hash:
    /// XXH64 seed 0 for [`Layout::SplitBlock`], a fresh random seed of
    /// XXH3-128 for the others. On error (the source's, or storage's)
    /// nothing changed.
    ///
    /// # Examples
    /// ```
    /// use filterstore::{FilterStore, Layout, RegenOptions, TableSpec};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = tempfile::tempdir()?;
    /// let store = FilterStore::open(dir.path())?;
    /// let t = store.create_table("t", TableSpec::new(1_000, 0.01))?;
    /// let keys: Vec<Vec<u8>> = (0..1_000u32).map(|i| i.to_le_bytes().to_vec()).collect();
    /// for k in &keys {
    ///     t.insert(k)?;
    /// }
    /// let source = || keys.iter().map(Ok::<_, std::io::Error>);
    /// let report = t.change_layout(Layout::SplitBlock, source, &RegenOptions::default())?;
    /// assert_eq!((report.keys_read, report.new_generation), (1_000, 2));
    /// assert_eq!(t.params().layout(), Layout::SplitBlock);
    /// assert!(keys.iter().all(|k| t.contains(k)));
    /// # Ok(()) }
    /// ```
    pub fn change_layout<F, I, K, E>(
        &self,
        layout: Layout,
        source: F,
        options: &RegenOptions,
    ) -> Result<RegenReport, StoreError>
    where
        F: FnOnce() -> I,
        I: IntoIterator<Item = Result<K, E>>,
        K: AsRef<[u8]>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let inner = &self.inner;
        let _one = inner.regen_lock.lock();
        inner.shared.check_writable()?;
        let catalog = inner.shared.catalog.lock();
        let old = inner.gen.load_full();
        let w = old.writer.lock();
        old.check_live()?;
        let live = old.live_keys_locked(&w);
        let meta = self.meta();
        let hash = (layout, HashSpec::default_for(layout));
        let built = build_from_source(&meta, &old, live, options, hash, source).and_then(|b| {
            let new_meta = b.new_meta(&meta);
            let files = b.write_new_files(&inner.shared, &new_meta)?;
            Ok((b, new_meta, files))
        });
        let result = match built {
            Ok((b, new_meta, files)) => {
                self.commit_locked(&old, new_meta, b, files, &[], (catalog, w))
            }
            Err(e) => {
                drop((catalog, w));
                Err(e)
            }
        };
        // Before the commit point (the old generation not retired), the
        // partial files go; after it they are the table's, and so they may
        // be after a commit whose outcome is unknown.
        if matches!(&result, Err(e) if !e.is_outcome_unknown())
            && !old.retired.load(Ordering::Acquire)
        {
            remove_files(&inner.shared.dir, meta.id, old.meta.generation + 1);
        }
        result
    }
}
