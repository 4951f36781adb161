//! Health of a table and online regeneration.
//!
//! # Health
//! [`Table::health`] gathers the [`HealthSignals`] of [`crate::filter::drift`]: the
//! false-positive rate estimated from the live bit filter (per block for the
//! blocked layout), the rate observed from the host's feedback
//! ([`Table::report_lookup`], over a sliding window of
//! [`OBSERVED_WINDOW`](super::OBSERVED_WINDOW) trials per epoch), saturated
//! counters, and live keys against capacity; a [`DriftPolicy`] decides.
//!
//! "Parameters changed" is derived, not stored (the catalog record keeps its
//! v1 encoding): a generation built for `expected_keys` and `target_fp` has
//! exactly the `m` and `k` of [`FilterParams::for_capacity`] of those two;
//! [`Table::set_params`] changes them in the catalog without touching `m`
//! and `k`, so the mismatch marks the table until it is regenerated, and a
//! regeneration writes the capacity it sized for as `expected_keys`.
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
//! 3. apply the journal so far (rules below), derive the bits, write the
//!    counter pages into the new generation's own sled tree;
//! 4. under the catalog lock and the old writer lock (writers wait here, for
//!    two flushes; lookups never wait): apply the rest of the journal,
//!    rewrite the pages it touched, write the state record, flush, then write
//!    the catalog record naming generation + 1 with the new `m`, `k` and
//!    capacity, and flush again — **the commit point** — then swap the
//!    in-memory generation ([`arc_swap`]: a lookup sees the old or the new
//!    filter, each complete) and retire the old one, whose tree is then
//!    deleted.
//!
//! Memory during a rebuild: the new counters (`m/2` bytes) and bits
//! (`m/8`), plus the journal, 24 bytes per write made meanwhile, and a map
//! of journaled inserts (about 40 bytes each): a rebuild of a 10M-key table
//! at 1% (m = 99M bits) holds about 59 MiB plus 64 bytes per concurrent write.
//!
//! A crash before the catalog write leaves the old generation in force (the
//! new tree is named by no record and deleted at the next open); after it,
//! the new one, complete and flushed (the old tree is deleted at the next
//! open). A source error, or any other error before the commit point, stops
//! the journal, deletes the partial tree and leaves the old generation in
//! force with nothing lost (the journaled operations were applied to it too).
//!
//! **The hash seed is kept.** The journal holds key hashes (the keys
//! themselves are not kept by the write path), and replaying them into the
//! new generation needs the same seed. A fresh seed would defeat adversarial
//! keys, but would require journaling whole keys; left out.
//!
//! ## Consistency required of the key source
//! Let S be the moment the journal starts (inside `regenerate`, before the
//! source factory is called), T ≥ S the moment the source's view is taken,
//! and C the commit point. The source must yield **every key live at T** (a
//! snapshot taken after the factory is called; a scan that also sees later
//! changes is fine as long as it sees every key live at T: extra keys only
//! add false positives). And the snapshot must not split a host write from
//! its filter write, in either direction:
//!
//! * an insert applied to the filter before S whose record is committed
//!   after T is in neither the snapshot nor the journal: a false negative;
//! * a deletion committed before T whose filter remove is applied after C
//!   reaches the new generation, which never counted the key: it takes
//!   counts from other keys (a false negative, or [`StoreError::NotPresent`]).
//!
//! So: **take the snapshot under the lock that makes each (filter write,
//! record write) pair atomic** for it — the host's commit lock held across
//! the filter insert and the record commit, and across the record deletion
//! and the filter remove. `tests/store_regen.rs` does exactly this; without
//! the lock it fails now and then on a loaded machine, in both ways above.

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
//! ## Sizing
//! The new generation holds `n` = the table's live keys at S (inserts minus
//! removes, exact when the host removes only what it inserted); it is sized
//! for `⌈n·headroom⌉`, or the expected size set by [`Table::set_params`] if
//! larger. The default headroom is [`DEFAULT_HEADROOM`] = 1.0: the
//! ScyllaDB band is narrow (a filter at 80% of its capacity already has an
//! estimated rate below 75% of target, which the policy reports as
//! oversized), so a regenerated table is sized for what it holds, and
//! insert-heavy tables should pass a larger headroom along with a policy
//! that tolerates it.

use super::catalog::{self, TableMeta};
use super::error::StoreError;
use super::keys::STATE_KEY;
use super::pages::{self, CHUNK_BLOCKS};
use super::table::{sled_err, store_block_words, Generation, GenerationState, Table, TableInner};
use super::wal::LogOp;
use super::{FilterStore, StoreInner};
use crate::filter::bloom::BitFilter;
use crate::filter::counting::{counter_bytes, nibble, COUNTER_BLOCK_BYTES};
use crate::filter::drift::{Assessment, DriftPolicy, DriftReason, HealthSignals, ObservedCounts};
use crate::filter::hash::{positions, KeyHash};
use crate::filter::params::{FilterParams, BLOCK_BITS};
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Default headroom of a regenerated table: sized for exactly the keys it
/// holds (see the [module docs](self#sizing)).
pub const DEFAULT_HEADROOM: f64 = 1.0;

/// The callback of [`FilterStore::on_needs_regeneration`].
pub(crate) type RegenHook = Arc<dyn Fn(&str, &DriftReason) + Send + Sync>;

/// Chunks written per sled batch while a regeneration writes its pages
/// (256 × 16 KiB = 4 MiB per batch).
const CHUNKS_PER_BATCH: u64 = 256;

/// How a regeneration sizes the new generation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RegenOptions {
    /// Capacity as a multiple of the live keys (at least 1; default
    /// [`DEFAULT_HEADROOM`]).
    pub headroom: f64,
    /// A fixed capacity instead (still at least the expected size set by
    /// [`Table::set_params`] if that is larger).
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

/// Whether `meta`'s `m` and `k` are not what its target and expected size
/// give: `set_params` changed them since the generation was built.
fn parameters_changed(meta: &TableMeta, params: &FilterParams) -> bool {
    match FilterParams::for_capacity(
        meta.expected_keys,
        meta.target_fp,
        params.layout(),
        params.hash(),
    ) {
        Ok(p) => p.m() != params.m() || p.k() != params.k(),
        Err(_) => true,
    }
}

/// Counters being built, with the blocks the tail of the journal touched.
struct Build {
    params: FilterParams,
    counters: Vec<u8>,
    /// Unmatched journaled inserts per hash (see the module docs).
    inserts: HashMap<(u64, u64), u32>,
    live: i64,
    report: RegenReport,
}

impl Build {
    fn add(&mut self, h: KeyHash, touched: Option<&mut BTreeSet<u64>>) {
        let p = &self.params;
        let pos = positions(p.layout(), p.m(), p.k(), h);
        for &q in pos.as_slice() {
            nibble::inc(&mut self.counters, q as usize);
        }
        if let Some(t) = touched {
            t.extend(pos.as_slice().iter().map(|q| q / BLOCK_BITS));
        }
    }

    fn sub(&mut self, h: KeyHash, touched: &mut Option<&mut BTreeSet<u64>>) {
        let p = &self.params;
        let pos = positions(p.layout(), p.m(), p.k(), h);
        for &q in pos.as_slice() {
            // Never below 1 before: the cancelled insert counted here.
            nibble::dec(&mut self.counters, q as usize);
        }
        if let Some(t) = touched {
            t.extend(pos.as_slice().iter().map(|q| q / BLOCK_BITS));
        }
    }

    /// Applies journaled operations by the rules of the module docs.
    fn replay(&mut self, ops: &[LogOp], mut touched: Option<&mut BTreeSet<u64>>) {
        for op in ops {
            let key = (op.hash.h1, op.hash.h2);
            if op.insert {
                self.add(op.hash, touched.as_deref_mut());
                *self.inserts.entry(key).or_insert(0) += 1;
                self.live += 1;
                self.report.journaled_inserts += 1;
            } else {
                match self.inserts.get_mut(&key) {
                    Some(n) if *n > 0 => {
                        *n -= 1;
                        self.sub(op.hash, &mut touched);
                        self.live -= 1;
                        self.report.journaled_removes_applied += 1;
                    }
                    _ => self.report.journaled_removes_skipped += 1,
                }
            }
        }
    }

    /// The encoded pages of chunks `chunks`, skipping all-zero ones unless
    /// `keep_zero` (a rewritten chunk must overwrite its earlier version).
    fn write_chunks(
        &self,
        tree: &sled::Tree,
        chunks: impl Iterator<Item = u64>,
        keep_zero: bool,
        mut batch: sled::Batch,
    ) -> Result<sled::Batch, StoreError> {
        let chunk_bytes = CHUNK_BLOCKS as usize * COUNTER_BLOCK_BYTES;
        let mut in_batch = 0;
        for idx in chunks {
            let at = idx as usize * chunk_bytes;
            let len = pages::blocks_in_chunk(&self.params, idx) as usize * COUNTER_BLOCK_BYTES;
            let c = &self.counters[at..at + len];
            if keep_zero || c.iter().any(|&b| b != 0) {
                batch.insert(&pages::chunk_key(idx), pages::encode_chunk(idx, c));
                in_batch += 1;
            }
            if in_batch == CHUNKS_PER_BATCH {
                tree.apply_batch(std::mem::take(&mut batch))
                    .map_err(sled_err("writing counter pages"))?;
                in_batch = 0;
            }
        }
        Ok(batch)
    }
}

impl Table {
    /// Reports the outcome of one lookup whose slow read in the host
    /// database has finished: `filter_said_maybe` is what the filter
    /// answered, `key_was_present` what the read found. Lookups of absent
    /// keys are the trials of the observed false-positive rate (a "maybe"
    /// among them is a false positive, an "absent" a true negative); lookups
    /// of present keys say nothing about it and are ignored. Lock-free.
    pub fn report_lookup(&self, filter_said_maybe: bool, key_was_present: bool) {
        if !key_was_present {
            self.inner.observed.record_absent(filter_said_maybe);
            self.inner.count_for_check(1);
        }
    }

    /// The observed false positives and trials over the window.
    pub fn observed_fp(&self) -> ObservedCounts {
        self.inner.observed.counts()
    }

    /// Health signals and the verdict of `policy`. Folds the log (for an
    /// exact count of saturated counters) and reads the bit filter.
    pub fn health_with(&self, policy: &DriftPolicy) -> Result<HealthReport, StoreError> {
        let stats = self.stats()?;
        let meta = self.meta();
        let signals = HealthSignals {
            target_fp: meta.target_fp,
            estimated_fp: stats.estimated_fp,
            observed: self.observed_fp(),
            saturated_counters: stats.saturated_counters,
            live_keys: stats.live_keys,
            capacity: self.current().meta.expected_keys,
            parameters_changed: parameters_changed(&meta, &self.params()),
        };
        Ok(HealthReport {
            assessment: policy.assess(&signals),
            signals,
        })
    }

    /// [`health_with`](Table::health_with) the store's policy
    /// ([`FilterStore::set_drift_policy`], default [`DriftPolicy::default`]).
    pub fn health(&self) -> Result<HealthReport, StoreError> {
        let policy = *self.inner.store.policy.lock();
        self.health_with(&policy)
    }

    /// Whether the store's policy says the table should be regenerated.
    pub fn needs_regeneration(&self) -> Result<bool, StoreError> {
        Ok(self.health()?.needs_regeneration())
    }

    /// Changes the table's target false-positive rate and/or expected size
    /// (one durable catalog write). The filter is not rebuilt: the table is
    /// marked for regeneration ([`DriftReason::ParametersChanged`]) until
    /// [`regenerate`](Table::regenerate) builds one for the new figures.
    pub fn set_params(
        &self,
        expected_keys: Option<u64>,
        target_fp: Option<f64>,
    ) -> Result<(), StoreError> {
        let store = &self.inner.store;
        let _catalog = store.catalog_lock.lock();
        let mut meta = current_record(store, &self.meta())?;
        meta.expected_keys = expected_keys.unwrap_or(meta.expected_keys);
        meta.target_fp = target_fp.unwrap_or(meta.target_fp);
        // Validates the pair (the next regeneration sizes with it).
        FilterParams::for_capacity(
            meta.expected_keys,
            meta.target_fp,
            self.params().layout(),
            self.params().hash(),
        )?;
        write_record(store, &meta)?;
        *self.inner.meta.lock() = meta;
        Ok(())
    }

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
    /// return every key live at that moment or later (see the [module
    /// docs](self#consistency-required-of-the-key-source) for the exact
    /// obligation). An error from the source (or from storage) before the
    /// commit point leaves the old generation in force, unchanged, and the
    /// partial new one deleted.
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
        let old = inner.gen.load_full();
        let live_at_start = {
            let mut w = old.writer.lock();
            old.check_live()?;
            w.journal = Some(Vec::new());
            old.live_keys_locked(&w)
        };
        let meta = self.meta();
        let new_name = meta.tree_name(old.meta.generation + 1);
        let result = self.build_and_swap(&old, &meta, &new_name, live_at_start, source, options);
        if result.is_err() {
            // Stop journaling (unless the old generation was retired, which
            // only happens at the commit point), delete the partial tree.
            let mut w = old.writer.lock();
            if !old.retired.load(Ordering::Acquire) {
                w.journal = None;
                drop(w);
                let _ = inner.store.db.drop_tree(new_name.as_bytes());
            }
        }
        result
    }

    fn build_and_swap<F, I, K, E>(
        &self,
        old: &Arc<Generation>,
        meta: &TableMeta,
        new_name: &str,
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
        let store = &self.inner.store;
        let name = meta.name.clone();
        let mut capacity = options
            .capacity
            .unwrap_or_else(|| (live_at_start as f64 * options.headroom.max(1.0)).ceil() as u64);
        if parameters_changed(meta, &old.params) {
            capacity = capacity.max(meta.expected_keys);
        }
        let capacity = capacity.max(1);
        let params = FilterParams::for_capacity(
            capacity,
            meta.target_fp,
            old.params.layout(),
            old.params.hash(),
        )?;
        let total = counter_bytes(&params);
        let mut counters = Vec::new();
        counters
            .try_reserve_exact(total)
            .map_err(|_| StoreError::OutOfMemory {
                table: name.clone(),
                bytes: total as u64,
            })?;
        counters.resize(total, 0);
        let mut b = Build {
            params,
            counters,
            inserts: HashMap::new(),
            live: 0,
            report: RegenReport {
                keys_read: 0,
                old_generation: old.meta.generation,
                new_generation: old.meta.generation + 1,
                capacity,
                m_bits: params.m(),
                k: params.k(),
                journaled_inserts: 0,
                journaled_removes_applied: 0,
                journaled_removes_skipped: 0,
            },
        };
        let spec = params.hash();
        for key in source() {
            let key = key.map_err(|e| StoreError::KeySource {
                table: name.clone(),
                source: Box::new(e),
            })?;
            b.add(spec.hash(key.as_ref()), None);
            b.report.keys_read += 1;
        }
        b.live = b.report.keys_read as i64;
        // The journal so far, taken without holding the lock for the replay.
        let early = std::mem::take(old.writer.lock().journal.get_or_insert_with(Vec::new));
        b.replay(&early, None);
        drop(early);
        // A leftover tree of this generation number (a crash before its
        // catalog write, not yet collected) is replaced, not merged.
        let db = &store.db;
        db.drop_tree(new_name.as_bytes())
            .map_err(sled_err("clearing a partial generation"))?;
        let tree = db
            .open_tree(new_name)
            .map_err(sled_err("creating a generation"))?;
        let batch = b.write_chunks(
            &tree,
            0..pages::chunk_count(&params),
            false,
            sled::Batch::default(),
        )?;
        tree.apply_batch(batch)
            .map_err(sled_err("writing counter pages"))?;
        // Flushed before the locks are taken: the flush under them then
        // writes only the tail (writers wait milliseconds, not the seconds
        // that `m/2` bytes of pages take to reach the disk).
        db.flush().map_err(sled_err("flushing a new generation"))?;

        // The commit: catalog lock first (the order of drop_table), then the
        // old writer lock; writers wait from here to the swap.
        let _catalog = store.catalog_lock.lock();
        let mut w = old.writer.lock();
        old.check_live()?;
        let tail = w.journal.take().unwrap_or_default();
        let mut touched = BTreeSet::new();
        b.replay(&tail, Some(&mut touched));
        let chunks: BTreeSet<u64> = touched.iter().map(|blk| blk / CHUNK_BLOCKS).collect();
        let mut batch = b.write_chunks(&tree, chunks.into_iter(), true, sled::Batch::default())?;
        let state = GenerationState {
            live_keys: b.live,
            next_seq: 0,
        };
        batch.insert(STATE_KEY, state.encode(&name)?);
        tree.apply_batch(batch)
            .map_err(sled_err("writing counter pages"))?;
        db.flush().map_err(sled_err("flushing a new generation"))?;

        let bits = BitFilter::new(params).map_err(|_| StoreError::OutOfMemory {
            table: name.clone(),
            bytes: params.bit_bytes(),
        })?;
        for (blk, c) in b.counters.chunks_exact(COUNTER_BLOCK_BYTES).enumerate() {
            store_block_words(&bits, blk as u64, c);
        }
        let saturated = nibble::count_saturated(&b.counters);
        drop(std::mem::take(&mut b.counters));

        let record = current_record(store, meta)?;
        if record.generation != old.meta.generation {
            return Err(StoreError::Storage {
                op: "regenerating a table",
                detail: format!(
                    "the catalog names generation {} of table {name:?}, expected {}",
                    record.generation, old.meta.generation
                ),
            });
        }
        let new_meta = TableMeta {
            m: params.m(),
            k: params.k(),
            expected_keys: capacity,
            generation: old.meta.generation + 1,
            ..record
        };
        store
            .catalog
            .insert(catalog::table_key(&name), new_meta.encode()?)
            .map_err(sled_err("writing the catalog"))?;
        // From here the new generation is in force in sled's view: swap even
        // if the flush fails (a crash then leaves one of the two complete
        // generations in force, both without false negatives).
        let new_gen = Generation::built(
            db,
            new_meta.clone(),
            store.config,
            params,
            bits,
            tree,
            b.live,
            saturated,
        );
        self.inner.gen.store(Arc::new(new_gen));
        old.retire(&mut w);
        drop(w);
        *self.inner.meta.lock() = new_meta;
        self.inner.observed.reset();
        let flushed = db.flush().map_err(sled_err("flushing the catalog"));
        drop(_catalog);
        flushed?;
        // Garbage from here on: collected at the next open if this fails.
        let _ = db.drop_tree(old.meta.tree_name(old.meta.generation).as_bytes());
        Ok(b.report)
    }
}

/// The catalog record of the table of `meta` (same id), or
/// [`StoreError::NoSuchTable`] if it was dropped. Call under the catalog lock.
fn current_record(store: &StoreInner, meta: &TableMeta) -> Result<TableMeta, StoreError> {
    let key = catalog::table_key(&meta.name);
    let found = store
        .catalog
        .get(&key)
        .map_err(sled_err("reading the catalog"))?
        .map(|v| TableMeta::decode(&key, &v))
        .transpose()?;
    match found {
        Some(m) if m.id == meta.id => Ok(m),
        _ => Err(StoreError::NoSuchTable(meta.name.clone())),
    }
}

/// Writes and flushes one catalog record. Call under the catalog lock.
fn write_record(store: &StoreInner, meta: &TableMeta) -> Result<(), StoreError> {
    store
        .catalog
        .insert(catalog::table_key(&meta.name), meta.encode()?)
        .map_err(sled_err("writing the catalog"))?;
    store.db.flush().map_err(sled_err("flushing the catalog"))?;
    Ok(())
}

/// The automatic health check of one table: invokes the store's callback if
/// the table needs regeneration. Returns the reason found.
pub(crate) fn run_hook(inner: &Arc<TableInner>) -> Result<Option<DriftReason>, StoreError> {
    let Some(hook) = inner.store.regen_hook.lock().clone() else {
        return Ok(None);
    };
    let table = Table::new(Arc::clone(inner));
    let report = table.health()?;
    let reason = report.reason().cloned();
    if let Some(r) = &reason {
        hook(table.name(), r);
    }
    Ok(reason)
}

impl FilterStore {
    /// Registers `callback`, invoked with a table's name and the most urgent
    /// reason when an automatic health check finds that the table needs
    /// regeneration. Checks run after every `max(4096, expected/8)` writes
    /// or feedback reports of a table (never on the read path), on the
    /// thread that crossed the interval, outside any lock of the table: the
    /// callback may call [`Table::regenerate`] itself, or hand the work to
    /// another thread. [`check_health`](FilterStore::check_health) runs the
    /// checks on demand. Replaces any earlier callback.
    pub fn on_needs_regeneration(
        &self,
        callback: impl Fn(&str, &DriftReason) + Send + Sync + 'static,
    ) {
        *self.inner.regen_hook.lock() = Some(Arc::new(callback));
        self.inner.has_regen_hook.store(true, Ordering::Release);
    }

    /// The policy of [`Table::health`] for every table of this store.
    pub fn set_drift_policy(&self, policy: DriftPolicy) {
        *self.inner.policy.lock() = policy;
    }

    /// Assesses every open table now, invoking the callback of
    /// [`on_needs_regeneration`](FilterStore::on_needs_regeneration) for each
    /// that needs regeneration; returns those tables with their reasons.
    pub fn check_health(&self) -> Result<Vec<(String, DriftReason)>, StoreError> {
        let open: Vec<Arc<TableInner>> = self
            .inner
            .tables
            .lock()
            .values()
            .filter_map(std::sync::Weak::upgrade)
            .collect();
        let hook = self.inner.regen_hook.lock().clone();
        let mut found = Vec::new();
        for inner in open {
            let table = Table::new(inner);
            if let Some(r) = table.health()?.reason().cloned() {
                if let Some(h) = &hook {
                    h(table.name(), &r);
                }
                found.push((table.name().to_string(), r));
            }
        }
        Ok(found)
    }
}
