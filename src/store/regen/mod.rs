//! Health of a table and online regeneration.
//!
//! # Health
//! [`Table::health`] gathers the [`HealthSignals`] of [`crate::filter::drift`]: the
//! false-positive rate estimated from the live bit filter (per block for the
//! blocked layout), the rate observed from the host's feedback
//! ([`Table::report_lookup`], over a sliding window of
//! `OBSERVED_WINDOW` = 65,536 trials per epoch, in `table/inner.rs`), saturated
//! counters, and live keys against capacity; a [`DriftPolicy`] decides.
//!
//! "Parameters changed" is derived, not stored (the catalog record keeps its
//! v1 encoding): a generation built for `expected_keys` and `target_fp` has
//! exactly the `m` and `k` of [`FilterParams::for_capacity`] of those two;
//! [`Table::set_params`] changes them in the catalog without touching `m`
//! and `k`, so the mismatch marks the table until it is regenerated, and a
//! regeneration writes the capacity it sized for as `expected_keys`.
//!
//! [`DriftPolicy`]: crate::filter::drift::DriftPolicy
//! [`FilterParams::for_capacity`]: crate::filter::params::FilterParams::for_capacity
//!
//! # Regeneration
//! [`Table::regenerate`] builds a new generation from a key source beside the
//! old one and swaps it in with one catalog write:
//!
//! 1. under the old generation's writer lock, start a **journal** of every
//!    operation applied to it from now on;
//! 2. call the source factory, then read every key, hashing it and counting
//!    it into in-memory counters sized for the new capacity (`m/2` bytes of
//!    the *new* `m`, plus its `m/8`-byte bit filter, during the build);
//! 3. apply the journal so far (rules below), write the counter pages into
//!    the new generation's own files and commit them (synced);
//! 4. under the catalog lock and the old writer lock (writers wait here,
//!    for one page-file commit and one catalog write; lookups never wait):
//!    apply the rest of the journal, rewrite the pages it touched and commit
//!    them with the live key count, derive the bits, then write the catalog
//!    naming generation + 1 with the new `m`, `k` and capacity — **the
//!    commit point** — then swap the in-memory generation ([`arc_swap`]: a
//!    lookup sees the old or the new filter, each complete) and retire the
//!    old one, whose files are then deleted.
//!
//! Memory during a rebuild: the source's key hashes, 16 bytes per key read,
//! until it ends (none with a fixed capacity: `source` module), the new
//! counters (`m/2` bytes) and bits (`m/8`), plus the journal, 24 bytes per
//! write made meanwhile, and a map of journaled inserts (about 40 bytes
//! each): a rebuild of a 10M-key table at 1% (m = 99M bits) holds at most
//! about 200 MiB (the hashes and the counters; 59 MiB, the counters and the
//! bits, with a fixed capacity) plus 64 bytes per concurrent write.
//!
//! A crash before the catalog write leaves the old generation in force (the
//! new files are named by no record and deleted at the next open); after it,
//! the new one, complete and synced (the old files are deleted at the next
//! open). A source error, or any other error before the commit point, stops
//! the journal, deletes the partial files and leaves the old generation in
//! force with nothing lost (the journaled operations were applied to it too).
//!
//! **The hash seed is kept.** The journal holds key hashes (the keys
//! themselves are not kept by the write path), and replaying them into the
//! new generation needs the same seed. A fresh seed would defeat adversarial
//! keys, but would require journaling whole keys; left out.
//!
//! The host's obligation is on [`Table::regenerate`] (§ Consistency
//! required of the key source), and the sizing rule on it too (§ Sizing).
//!
//! ## Why the journal's removes are only applied against journaled inserts
//! The danger is under-counting: a remove applied for a key the source did
//! not yield takes counts from other keys (false negatives). We cannot tell
//! whether a journaled remove happened before T (its key already absent from
//! the snapshot) or after (present). So a journaled remove is applied only
//! when it cancels an earlier *journaled* insert of the same hash, and is
//! skipped otherwise. For one key, with `L(T)` its live count at T (what the
//! source yields), `I` its journaled inserts, `R_after` its removes after T
//! and `P` the cancelled pairs, the true final count is
//! `L(T) + I_after − R_after` and ours is `L(T) + I − P`. Each pair's insert
//! precedes its remove, so a pair whose remove is before T has its insert
//! before T: `P ≤ I_before + R_after`, hence ours ≥ truth. Skipped removes
//! leave extra counts: false positives only, until the next regeneration.
//!

mod build;
mod health;
mod relayout;
mod source;
mod swap;

pub(crate) use health::run_hook;

use super::catalog::TableMeta;
use super::disk::remove_files;
use super::error::StoreError;
use super::table::Table;
use crate::filter::drift::{Assessment, DriftReason, HealthSignals};
use serde::Serialize;
use std::sync::atomic::Ordering;

/// Default headroom of a regenerated table: sized for exactly the keys it
/// holds (see [`Table::regenerate`], § Sizing).
pub const DEFAULT_HEADROOM: f64 = 1.0;

/// How a regeneration sizes the new generation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RegenOptions {
    /// Capacity as a multiple of the keys the source yields (at least 1;
    /// default [`DEFAULT_HEADROOM`]).
    pub headroom: f64,
    /// A fixed capacity instead (still at least the expected size set by
    /// [`Table::set_params`] if that is larger). The source is then counted
    /// as it streams; without it its key hashes are held until it ends (16
    /// bytes per key, under the memory budget) to size the filter for them.
    pub capacity: Option<u64>,
}

impl Default for RegenOptions {
    fn default() -> Self {
        RegenOptions {
            headroom: DEFAULT_HEADROOM,
            capacity: None,
        }
    }
}

/// What a regeneration did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RegenReport {
    /// Keys the source yielded.
    pub keys_read: u64,
    /// Live keys of the table when the rebuild began (inserts minus
    /// removes, as the table counted them). When it differs from
    /// [`keys_read`](RegenReport::keys_read) the source and the table
    /// disagree (see [`RegenReport::source_disagrees`]).
    pub live_keys_before: u64,
    /// Generation in force before.
    pub old_generation: u64,
    /// Generation in force now.
    pub new_generation: u64,
    /// Capacity the new generation was sized for (its `expected_keys`).
    pub capacity: u64,
    /// Bits of the new generation.
    pub m_bits: u64,
    /// Hash functions of the new generation.
    pub k: u32,
    /// Inserts made during the build, replayed into the new generation.
    pub journaled_inserts: u64,
    /// Removes made during the build that cancelled a journaled insert.
    pub journaled_removes_applied: u64,
    /// Removes made during the build that were skipped (their key may still
    /// count: false positives until the next regeneration).
    pub journaled_removes_skipped: u64,
}

impl RegenReport {
    /// Whether the source yielded another number of keys than the table
    /// held when the rebuild began. The store cannot tell why: the table
    /// lacked keys the host has (they are in the filter now, which is what
    /// a first build of a filter for an existing table wants), the host's
    /// key file is stale and yields keys the table removed (they are back,
    /// as false positives until the next regeneration from a current
    /// source), or writes happened between the start and the source's
    /// snapshot. The filter is sized for what the source yielded.
    pub fn source_disagrees(&self) -> bool {
        self.keys_read != self.live_keys_before
    }
}

/// Health figures and the policy's verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct HealthReport {
    /// The signals.
    pub signals: HealthSignals,
    /// The verdict.
    pub assessment: Assessment,
}

impl HealthReport {
    /// Whether the table should be regenerated.
    pub fn needs_regeneration(&self) -> bool {
        self.assessment.needs_regeneration()
    }
    /// The most urgent reason, if any.
    pub fn reason(&self) -> Option<&DriftReason> {
        self.assessment.reason()
    }
}

impl Table {
    /// Empties the table atomically and crash-safely: a regeneration from an
    /// empty key source, sized for the table's expected size. Inserts made
    /// while it runs are kept (they are journaled); removes made while it
    /// runs are skipped unless they cancel such an insert. A crash leaves
    /// either the old filter or the empty one in force.
    pub fn clear(&self) -> Result<RegenReport, StoreError> {
        let expected = self.meta().expected_keys;
        self.regenerate(
            std::iter::empty::<Result<&[u8], std::convert::Infallible>>,
            &RegenOptions {
                capacity: Some(expected),
                ..RegenOptions::default()
            },
        )
    }

    /// Rebuilds the table's filter from `source`, online: lookups never
    /// wait, writes go on (briefly serialised at the swap), and nothing they
    /// do is lost. `source` is called once the journal has started, and must
    /// return every key live at that moment or later (see [below](#consistency-required-of-the-key-source) for the exact
    /// obligation). An error from the source (or from storage) before the
    /// commit point leaves the old generation in force, unchanged, and the
    /// partial new one deleted.
    ///
    /// # Consistency required of the key source
    /// Let S be the moment the journal starts (inside `regenerate`, before the
    /// source factory is called), T ≥ S the moment the source's view is taken,
    /// and C the commit point. The source must yield **every key live at T** (a
    /// snapshot taken after the factory is called; a scan that also sees later
    /// changes is fine as long as it sees every key live at T: extra keys only
    /// add false positives). And the snapshot must not split a host write from
    /// its filter write, in either direction:
    ///
    /// * an insert applied to the filter before S whose record is committed
    ///   after T is in neither the snapshot nor the journal: a false negative;
    /// * a deletion committed before T whose filter remove is applied after C
    ///   reaches the new generation, which never counted the key: it takes
    ///   counts from other keys (a false negative, or [`StoreError::NotPresent`]).
    ///
    /// So: **take the snapshot under the lock that makes each (filter write,
    /// record write) pair atomic** for it — the host's commit lock held across
    /// the filter insert and the record commit, and across the record deletion
    /// and the filter remove. `tests/store/regen.rs` does exactly this; without
    /// the lock it fails now and then on a loaded machine, in both ways above.
    ///
    /// # Sizing
    /// The new generation holds `n` = the keys the source yields; it is sized
    /// for `⌈n·headroom⌉`, or for [`RegenOptions::capacity`] if given, and at
    /// least for the expected size set by [`Table::set_params`]. Without a
    /// capacity the source's key hashes are held until it ends (16 bytes per
    /// key, under the memory budget; a host whose table is too large for
    /// that passes its size as the capacity). The report says how many keys
    /// the source yielded and how many the table counted at S
    /// ([`RegenReport::source_disagrees`]). The default headroom is
    /// [`DEFAULT_HEADROOM`] = 1.0: the
    /// ScyllaDB band is narrow (a filter at 80% of its capacity already has an
    /// estimated rate below 75% of target, which the policy reports as
    /// oversized), so a regenerated table is sized for what it holds, and
    /// insert-heavy tables should pass a larger headroom along with a policy
    /// that tolerates it.
    ///
    /// # Examples
    /// ```
    /// use filterstore::{FilterStore, RegenOptions, TableSpec};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = tempfile::tempdir()?;
    /// let store = FilterStore::open(dir.path())?;
    /// // Sized for 1,000 keys, then given 8,000: far above its 1% target.
    /// let t = store.create_table("t", TableSpec::new(1_000, 0.01))?;
    /// let keys: Vec<Vec<u8>> = (0..8_000u32).map(|i| i.to_le_bytes().to_vec()).collect();
    /// for k in &keys {
    ///     t.insert(k)?;
    /// }
    /// assert!(t.health()?.needs_regeneration());
    /// // The host's keys (here a Vec) are the source; errors would abort it.
    /// let source = || keys.iter().map(Ok::<_, std::io::Error>);
    /// let report = t.regenerate(source, &RegenOptions::default())?;
    /// assert_eq!((report.keys_read, report.capacity), (8_000, 8_000));
    /// assert_eq!((report.old_generation, report.new_generation), (1, 2));
    /// assert_eq!(t.generation(), 2);
    /// assert!(keys.iter().all(|k| t.contains(k))); // no key lost
    /// assert!(t.stats()?.estimated_fp < 0.02); // back near its 1% target
    /// # Ok(()) }
    /// ```
    pub fn regenerate<F, I, K, E>(
        &self,
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
        let old = inner.gen.load_full();
        let live_at_start = {
            let mut w = old.writer.lock();
            old.check_live()?;
            w.journal.start();
            old.live_keys_locked(&w)
        };
        let meta = self.meta();
        let result = self.build_and_swap(&old, &meta, live_at_start, source, options);
        if let Err(e) = &result {
            // Stop journaling (unless the old generation was retired, which
            // only happens at the commit point), delete the partial files
            // unless the catalog on disk may name them (a commit whose
            // outcome is unknown: the store stopped writing).
            let mut w = old.writer.lock();
            if !old.retired.load(Ordering::Acquire) {
                w.journal.stop();
                drop(w);
                if !e.is_outcome_unknown() {
                    remove_files(&inner.shared.dir, meta.id, old.meta.generation + 1);
                }
            }
        }
        result
    }
}

/// The catalog record of the table of `meta` (same id), or
/// [`StoreError::NoSuchTable`] if it was dropped. Call under the catalog lock.
pub(super) fn current_record(
    catalog: &super::catalog::Catalog,
    meta: &TableMeta,
) -> Result<TableMeta, StoreError> {
    match catalog.get(&meta.name)? {
        Some(m) if m.id == meta.id => Ok(m),
        _ => Err(StoreError::NoSuchTable(meta.name.clone())),
    }
}

/// Writes one catalog record, durably. Call under the catalog lock.
pub(super) fn write_record(
    shared: &super::shared::Shared,
    catalog: &mut super::catalog::Catalog,
    meta: &TableMeta,
) -> Result<(), StoreError> {
    shared.commit_catalog(catalog, |e| e.put(meta.clone()))
}
