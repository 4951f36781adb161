//! Building a new generation from a key source and the journal, and the
//! swap that puts it in force (the steps of the [module docs](super)).

use super::super::catalog::{self, TableMeta};
use super::super::engine;
use super::super::error::StoreError;
use super::super::keys::STATE_KEY;
use super::super::pages::{self, CHUNK_BLOCKS};
use super::super::table::{sled_err, store_block_words, Generation, GenerationState, Table};
use super::super::wal::LogOp;
use super::super::StoreInner;
use super::health::parameters_changed;
use super::{current_record, RegenOptions, RegenReport};
use crate::filter::bloom::BitFilter;
use crate::filter::counting::{add_blocked_hashes, counter_bytes, nibble, COUNTER_BLOCK_BYTES};
use crate::filter::hash::{positions, HashSpec, KeyHash};
use crate::filter::params::{FilterParams, Layout, BLOCK_BITS};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// Keys of the source hashed per step (1 MiB of hashes).
const COUNT_STEP: usize = 1 << 16;

/// Counters being built, with the blocks the tail of the journal touched.
pub(super) struct Build {
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

    /// Writes the pages of chunks `chunks`, one sled call each (see
    /// [`engine`]), skipping all-zero ones unless `keep_zero` (a rewritten
    /// chunk must overwrite its earlier version). The tree is not named by
    /// the catalog yet, so the writes need no common atomicity.
    fn write_chunks(
        &self,
        tree: &engine::Tree,
        chunks: impl Iterator<Item = u64>,
        keep_zero: bool,
    ) -> Result<(), StoreError> {
        let chunk_bytes = CHUNK_BLOCKS as usize * COUNTER_BLOCK_BYTES;
        for idx in chunks {
            let at = idx as usize * chunk_bytes;
            let len = pages::blocks_in_chunk(&self.params, idx) as usize * COUNTER_BLOCK_BYTES;
            let c = &self.counters[at..at + len];
            if keep_zero || c.iter().any(|&b| b != 0) {
                tree.insert(pages::chunk_key(idx), pages::encode_chunk(idx, c))
                    .map_err(sled_err("writing counter pages"))?;
            }
        }
        Ok(())
    }
}

/// The capacity and parameters of the new generation (the sizing rules of
/// the [module docs](super#sizing)), in `layout` hashed by `hash`.
pub(super) fn plan(
    meta: &TableMeta,
    old: &Generation,
    live_at_start: u64,
    options: &RegenOptions,
    (layout, hash): (Layout, HashSpec),
) -> Result<(u64, FilterParams), StoreError> {
    let mut capacity = options
        .capacity
        .unwrap_or_else(|| (live_at_start as f64 * options.headroom.max(1.0)).ceil() as u64);
    if parameters_changed(meta, &old.params) {
        capacity = capacity.max(meta.expected_keys);
    }
    let capacity = capacity.max(1);
    let params = FilterParams::for_capacity(capacity, meta.target_fp, layout, hash)?;
    Ok((capacity, params))
}

impl Build {
    /// Zeroed counters for `params` (`m/2` bytes, allocated fallibly).
    pub(super) fn new(
        params: FilterParams,
        capacity: u64,
        old: &Generation,
        table: &str,
    ) -> Result<Build, StoreError> {
        let total = counter_bytes(&params);
        let mut counters = Vec::new();
        counters
            .try_reserve_exact(total)
            .map_err(|_| StoreError::OutOfMemory {
                table: table.to_string(),
                bytes: total as u64,
            })?;
        counters.resize(total, 0);
        Ok(Build {
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
        })
    }

    /// Step 2: counts every key of the source.
    pub(super) fn count_source<F, I, K, E>(
        &mut self,
        source: F,
        table: &str,
    ) -> Result<(), StoreError>
    where
        F: FnOnce() -> I,
        I: IntoIterator<Item = Result<K, E>>,
        K: AsRef<[u8]>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let spec = self.params.hash();
        // Hashed in steps, so that the blocked layout's counter blocks can be
        // prefetched ahead (`add_blocked_hashes`).
        let mut hashes = Vec::with_capacity(COUNT_STEP);
        let mut keys = source().into_iter();
        loop {
            hashes.clear();
            for key in keys.by_ref().take(COUNT_STEP) {
                let key = key.map_err(|e| StoreError::KeySource {
                    table: table.to_string(),
                    source: Box::new(e),
                })?;
                hashes.push(spec.hash(key.as_ref()));
            }
            if hashes.is_empty() {
                break;
            }
            self.report.keys_read += hashes.len() as u64;
            if self.params.layout() == Layout::Blocked {
                add_blocked_hashes(&mut self.counters, &self.params, &hashes, |_, _| {});
            } else {
                for &h in &hashes {
                    self.add(h, None);
                }
            }
        }
        self.live = self.report.keys_read as i64;
        Ok(())
    }

    /// Step 3: writes every non-zero chunk into a fresh tree `name` and
    /// flushes. A leftover tree of this generation number (a crash before its
    /// catalog write, not yet collected) is replaced, not merged. Flushed
    /// before the locks are taken: the flush under them then writes only the
    /// tail (writers wait milliseconds, not the seconds that `m/2` bytes of
    /// pages take to reach the disk).
    pub(super) fn write_new_tree(
        &self,
        db: &engine::Db,
        name: &str,
    ) -> Result<engine::Tree, StoreError> {
        db.drop_tree(name.as_bytes())
            .map_err(sled_err("clearing a partial generation"))?;
        let tree = db
            .open_tree(name)
            .map_err(sled_err("creating a generation"))?;
        self.write_chunks(&tree, 0..pages::chunk_count(&self.params), false)?;
        db.flush().map_err(sled_err("flushing a new generation"))?;
        Ok(tree)
    }

    /// Step 4, under the locks: replays the rest of the journal, rewrites the
    /// chunks it touched and writes the state record.
    fn write_tail(
        &mut self,
        tree: &engine::Tree,
        tail: &[LogOp],
        table: &str,
    ) -> Result<(), StoreError> {
        let mut touched = BTreeSet::new();
        self.replay(tail, Some(&mut touched));
        let chunks: BTreeSet<u64> = touched.iter().map(|blk| blk / CHUNK_BLOCKS).collect();
        self.write_chunks(tree, chunks.into_iter(), true)?;
        let state = GenerationState::settled(self.live, 0);
        tree.insert(STATE_KEY, state.encode(table)?)
            .map_err(sled_err("writing table state"))
    }

    /// The bit filter of the finished counters and their saturated count;
    /// releases the counters.
    fn derive_bits(&mut self, table: &str) -> Result<(BitFilter, u64), StoreError> {
        let params = self.params;
        let bits = BitFilter::new(params).map_err(|_| StoreError::OutOfMemory {
            table: table.to_string(),
            bytes: params.bit_bytes(),
        })?;
        for (blk, c) in self.counters.chunks_exact(COUNTER_BLOCK_BYTES).enumerate() {
            store_block_words(&bits, blk as u64, c);
        }
        let saturated = nibble::count_saturated(&self.counters);
        drop(std::mem::take(&mut self.counters));
        Ok((bits, saturated))
    }
}

impl Table {
    /// Steps 2 to 4 of the [module docs](super#regeneration): plan, count
    /// the source, replay the journal so far, write the new tree, then
    /// commit and swap.
    pub(super) fn build_and_swap<F, I, K, E>(
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
        let same = (old.params.layout(), old.params.hash());
        let (capacity, params) = plan(meta, old, live_at_start, options, same)?;
        let mut b = Build::new(params, capacity, old, &meta.name)?;
        b.count_source(source, &meta.name)?;
        // The journal so far, taken without holding the lock for the replay.
        let early = old.writer.lock().journal.drain();
        b.replay(&early, None);
        drop(early);
        let tree = b.write_new_tree(&self.inner.store.db, new_name)?;
        self.commit_and_swap(old, meta, b, tree)
    }

    /// Step 4: under the catalog lock, then the old writer lock (the lock
    /// order of the [store docs](super::super#lock-order); writers wait from
    /// here to the swap), writes the journal's tail, flushes, writes the
    /// catalog record naming the new generation (the commit point), swaps
    /// the generation in memory and retires the old one.
    fn commit_and_swap(
        &self,
        old: &Arc<Generation>,
        meta: &TableMeta,
        b: Build,
        tree: engine::Tree,
    ) -> Result<RegenReport, StoreError> {
        let catalog = self.inner.store.catalog_lock.lock();
        let mut w = old.writer.lock();
        old.check_live()?;
        let tail = w.journal.finish();
        self.commit_locked(old, meta, b, tree, &tail, catalog, w)
    }

    /// Step 4 with the catalog lock and the old writer lock held (released
    /// here): writes the journal's `tail`, flushes, commits, swaps.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn commit_locked(
        &self,
        old: &Arc<Generation>,
        meta: &TableMeta,
        mut b: Build,
        tree: engine::Tree,
        tail: &[LogOp],
        _catalog: parking_lot::MutexGuard<'_, ()>,
        mut w: parking_lot::MutexGuard<'_, super::super::table::Writer>,
    ) -> Result<RegenReport, StoreError> {
        let store = &self.inner.store;
        let db = &store.db;
        b.write_tail(&tree, tail, &meta.name)?;
        db.flush().map_err(sled_err("flushing a new generation"))?;
        let (bits, saturated) = b.derive_bits(&meta.name)?;
        let new_meta = write_new_record(store, old, meta, &b)?;
        // From here the new generation is in force in sled's view: swap even
        // if the flush fails (a crash then leaves one of the two complete
        // generations in force, both without false negatives).
        let new_gen = Generation::built(
            db,
            new_meta.clone(),
            store.config,
            b.params,
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

/// The commit point: checks that the catalog still names the old generation
/// and writes the record naming the new one. Call under the
/// catalog lock.
fn write_new_record(
    store: &StoreInner,
    old: &Generation,
    meta: &TableMeta,
    b: &Build,
) -> Result<TableMeta, StoreError> {
    let record = current_record(store, meta)?;
    if record.generation != old.meta.generation {
        return Err(StoreError::storage(
            "regenerating a table",
            format!(
                "the catalog names generation {} of table {:?}, expected {}",
                record.generation, meta.name, old.meta.generation
            ),
        ));
    }
    let new_meta = TableMeta {
        layout: b.params.layout().id(),
        hash_algo: b.params.hash().algo.id(),
        seed: b.params.hash().seed,
        m: b.params.m(),
        k: b.params.k(),
        expected_keys: b.report.capacity,
        generation: old.meta.generation + 1,
        ..record
    };
    store
        .catalog
        .insert(catalog::table_key(&meta.name), new_meta.encode()?)
        .map_err(sled_err("writing the catalog"))?;
    Ok(new_meta)
}
