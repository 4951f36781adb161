//! Building a new generation from a key source and the journal, and the
//! swap that puts it in force (the steps of the [module docs](super)).

use super::super::catalog::{self, TableMeta};
use super::super::error::StoreError;
use super::super::keys::STATE_KEY;
use super::super::pages::{self, CHUNK_BLOCKS};
use super::super::table::{sled_err, store_block_words, Generation, GenerationState, Table};
use super::super::wal::LogOp;
use super::health::parameters_changed;
use super::{current_record, RegenOptions, RegenReport, CHUNKS_PER_BATCH};
use crate::filter::bloom::BitFilter;
use crate::filter::counting::{counter_bytes, nibble, COUNTER_BLOCK_BYTES};
use crate::filter::hash::{positions, KeyHash};
use crate::filter::params::{FilterParams, BLOCK_BITS};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

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
