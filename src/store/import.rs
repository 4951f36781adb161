//! Filter files in and out of the store: [`Table::export`] writes a table's
//! filter as a filter file (`docs/FORMAT.md` §3-7), [`FilterStore::import`]
//! creates a table from a counting filter file.
//!
//! Only a **counting** filter can become a table: a table's removes must be
//! checked against its counters (a remove of a key whose counters include a
//! zero is refused) and decrement them, and a bit filter does not say how
//! many keys set each bit. Guessing 1 per set bit would let a remove clear a
//! bit that another key still needs — a false negative — so a bit filter is
//! refused with a message that says to export the counting filter instead.
//! Saturated (sticky) counters are imported as they are, so they stay
//! sticky.

use super::budget;
use super::catalog::{validate_name, TableMeta};
use super::error::StoreError;
use super::pages;
use super::table::Generation;
use super::{FilterStore, Table};
use crate::codec::filter_file::{decode_filter, encode_bit_filter, encode_counting_filter};
use crate::error::CodecError;
use crate::filter::counting::{CountingFilter, COUNTER_BLOCK_BYTES};

/// Which filter [`Table::export`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportKind {
    /// The bit filter (`m/8` bytes): for lookups elsewhere; it cannot become
    /// a table again.
    Bits,
    /// The counting filter (`m/2` bytes, 4-bit counters): what
    /// [`FilterStore::import`] takes to make a table with the same counters.
    Counting,
}

impl Table {
    /// The table's filter as a filter file (`docs/FORMAT.md` §3-7), with its
    /// live key count as `n`: the bytes `filterstore export` writes. The
    /// counting export folds the log first and holds the counters in memory
    /// (`m/2` bytes) while it encodes them.
    ///
    /// # Examples
    /// ```
    /// use filterstore::{decode_filter, ExportKind, FilterStore, StoreError, TableSpec};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = tempfile::tempdir()?;
    /// let store = FilterStore::open(dir.path())?;
    /// let t = store.create_table("t", TableSpec::new(1_000, 0.01))?;
    /// for i in 0..500u32 {
    ///     t.insert(&i.to_le_bytes())?;
    /// }
    /// let bits = t.export(ExportKind::Bits)?;
    /// let counting = t.export(ExportKind::Counting)?;
    /// let m = t.params().m() as usize;
    /// assert!(bits.len() > m / 8 && bits.len() < m / 8 + 256); // m/8 bytes plus headers
    /// assert!(counting.len() > m / 2 && counting.len() < m / 2 + 256);
    /// assert_eq!(decode_filter(&bits)?.n(), 500);
    ///
    /// // A counting file becomes a table with the same counters and seed.
    /// let copy = store.import("copy", &counting)?;
    /// assert_eq!((copy.live_keys(), copy.params()), (500, t.params()));
    /// assert!((0..500u32).all(|i| copy.contains(&i.to_le_bytes())));
    /// assert_eq!(copy.export(ExportKind::Counting)?, counting);
    /// // A bit filter cannot become a table.
    /// assert!(matches!(store.import("bits", &bits), Err(StoreError::NotCounting)));
    /// # Ok(()) }
    /// ```
    pub fn export(&self, kind: ExportKind) -> Result<Vec<u8>, StoreError> {
        match kind {
            ExportKind::Counting => {
                let counters = self.counting_snapshot()?;
                Ok(encode_counting_filter(&counters, self.live_keys()))
            }
            ExportKind::Bits => {
                let g = self.current();
                Ok(encode_bit_filter(&g.bits, self.live_keys()))
            }
        }
    }
}

impl FilterStore {
    /// Creates table `name` from a counting filter file (what
    /// [`Table::export`] writes with [`ExportKind::Counting`]): same
    /// parameters, seed and counters, `n` live keys. A bit filter file is
    /// refused with [`StoreError::NotCounting`] (see the module docs for
    /// why), bytes that are not a valid filter file with
    /// [`StoreError::BadFilterFile`]. Durable when this returns.
    pub fn import(&self, name: &str, file: &[u8]) -> Result<Table, StoreError> {
        validate_name(name)?;
        let d = decode_filter(file).map_err(StoreError::BadFilterFile)?;
        let view = d.counters().ok_or(StoreError::NotCounting)?;
        let counters = view.to_counting_filter().map_err(|e| {
            StoreError::BadFilterFile(CodecError::InvalidField {
                field: "counters",
                reason: e.to_string(),
            })
        })?;
        self.import_counting(name, &counters, d.n())
    }

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
        self.inner.shared.check_writable()?;
        let p = *counters.params();
        let mut catalog = self.inner.catalog.lock();
        if catalog.contains(name) {
            return Err(StoreError::TableExists(name.to_string()));
        }
        self.check_filter_memory(name, &p)?;
        let expected_keys = live_keys.max(1);
        let meta = TableMeta::new_table(
            catalog.header().next_table_id,
            name,
            &p,
            expected_keys,
            // Inside (0, 1) whatever n is, so the record stays valid.
            p.expected_fp(expected_keys).clamp(1e-12, 0.5),
        );
        // Memory first, then the files (named by nothing yet), then the
        // catalog record: the commit point.
        let (bits, memory) = budget::bit_filter(name, p)?;
        let gen = Generation::create(&self.inner.shared, meta, bits, memory)?;
        let bytes = counters.as_bytes();
        let chunk_bytes = pages::CHUNK_BLOCKS as usize * COUNTER_BLOCK_BYTES;
        let filled = gen.fill(
            i64::try_from(live_keys).unwrap_or(i64::MAX),
            &mut |idx, buf| {
                let at = idx as usize * chunk_bytes;
                let len = pages::blocks_in_chunk(&p, idx) as usize * COUNTER_BLOCK_BYTES;
                buf.extend_from_slice(&bytes[at..at + len]);
                Ok(())
            },
        );
        if let Err(e) = filled {
            gen.mark_dropped();
            let (id, generation) = (gen.meta.id, gen.meta.generation);
            drop(gen);
            super::table::remove_files(&self.inner.shared.dir, id, generation);
            return Err(e);
        }
        self.commit_new_table(&mut catalog, gen)
    }
}
