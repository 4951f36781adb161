//! Creating a table from an exported counting filter (`filterstore import`).
//!
//! Only a **counting** filter can become a table: a table's removes must be
//! checked against its counters (a remove of a key whose counters include a
//! zero is refused) and decrement them, and a bit filter does not say how
//! many keys set each bit. Guessing 1 per set bit would let a remove clear a
//! bit that another key still needs — a false negative — so a bit filter is
//! refused with a message that says to export the counting filter instead.
//! Saturated (sticky) counters are imported as they are, so they stay
//! sticky.

use super::catalog::{self, TableMeta, HEADER_KEY};
use super::error::StoreError;
use super::keys::STATE_KEY;
use super::pages;
use super::table::GenerationState;
use super::{sled_err, validate_name, FilterStore, Table};
use crate::filter::counting::{CountingFilter, COUNTER_BLOCK_BYTES};

impl FilterStore {
    /// Creates table `name` holding exactly the counters of `counters`, with
    /// `live_keys` live keys (the file's `n`). The table's parameters (layout,
    /// `m`, `k`, hash and seed) are the filter's; it is recorded as sized for
    /// `live_keys` keys at the false-positive rate the layout model gives for
    /// that many. Durable when this returns; a crash before that leaves no
    /// table (the data written so far is collected at the next open).
    pub fn import_counting(
        &self,
        name: &str,
        counters: &CountingFilter,
        live_keys: u64,
    ) -> Result<Table, StoreError> {
        validate_name(name)?;
        let p = *counters.params();
        let _guard = self.inner.catalog_lock.lock();
        if self.read_meta(name)?.is_some() {
            return Err(StoreError::TableExists(name.to_string()));
        }
        let mut header = self.read_header("importing a table")?;
        let expected_keys = live_keys.max(1);
        let meta = TableMeta::new_table(
            header.next_table_id,
            name,
            &p,
            expected_keys,
            // Inside (0, 1) whatever n is, so the record stays valid.
            p.expected_fp(expected_keys).clamp(1e-12, 0.5),
        );
        // The data first, in a tree nothing names yet; the catalog write
        // below is the commit point.
        let tree_name = meta.tree_name(1);
        self.inner
            .db
            .drop_tree(tree_name.as_bytes())
            .map_err(sled_err("clearing table data"))?;
        let tree = self
            .inner
            .db
            .open_tree(&tree_name)
            .map_err(sled_err("opening table data"))?;
        let chunk_bytes = pages::CHUNK_BLOCKS as usize * COUNTER_BLOCK_BYTES;
        for (idx, chunk) in counters.as_bytes().chunks(chunk_bytes).enumerate() {
            // A chunk that is all zeros has no record (see `pages`).
            if chunk.iter().any(|&b| b != 0) {
                tree.insert(
                    pages::chunk_key(idx as u64),
                    pages::encode_chunk(idx as u64, chunk),
                )
                .map_err(sled_err("writing counter pages"))?;
            }
        }
        let state = GenerationState {
            live_keys: i64::try_from(live_keys).unwrap_or(i64::MAX),
            next_seq: 0,
        };
        tree.insert(STATE_KEY, state.encode(name)?)
            .map_err(sled_err("writing table state"))?;
        header.next_table_id += 1;
        let mut batch = sled::Batch::default();
        batch.insert(catalog::table_key(name), meta.encode()?);
        batch.insert(HEADER_KEY, header.encode()?);
        // One flush covers the pages and the catalog.
        self.commit_catalog(batch)?;
        self.load_table(&mut self.inner.tables.lock(), meta)
    }
}
