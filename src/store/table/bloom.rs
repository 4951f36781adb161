//! [`TableBloom`]: what [`Table::bloom`](super::Table::bloom) returns, a
//! named, read-only handle on the bit filter of one generation.

use super::Generation;
use crate::filter::bloom::BloomRead;
use crate::filter::hash::KeyHash;
use crate::filter::params::FilterParams;
use std::sync::Arc;

/// The bit filter of the generation that was in force when
/// [`Table::bloom`](crate::Table::bloom) was called, read-only: every
/// [`BloomRead`] query and estimator, without a lock or I/O.
///
/// It keeps that generation alive: a regeneration or a merge that swaps in
/// a new one meanwhile does not change what this handle answers, and the
/// old generation's memory is freed when the last handle is dropped. Keep it
/// in a struct, send it to another thread, or clone it (a reference count);
/// call `Table::bloom` again for the generation in force now. Writes go
/// through the [`Table`](crate::Table), never through this handle.
///
/// # Examples
/// ```
/// use filterstore::{BloomRead, FilterStore, TableBloom, TableSpec};
/// # fn main() -> Result<(), filterstore::Error> {
/// let dir = tempfile::tempdir().expect("temporary directory");
/// let store = FilterStore::open(dir.path())?;
/// let t = store.create_table("t", TableSpec::new(10_000, 0.01))?;
/// t.insert(b"k")?;
///
/// struct Snapshot {
///     filter: TableBloom,
/// }
/// let s = Snapshot { filter: t.bloom() };
/// assert!(s.filter.contains(b"k"));
/// assert_eq!(s.filter.generation(), t.generation());
/// // One key sets at most k bits (fewer when two of its positions coincide).
/// assert!((1..=u64::from(s.filter.params().k())).contains(&s.filter.count_ones()));
///
/// // A new generation (here an emptied filter) does not change the handle.
/// t.clear()?;
/// assert!(s.filter.contains(b"k"));
/// assert!(!t.bloom().contains(b"k"));
/// assert_eq!(t.bloom().generation(), s.filter.generation() + 1);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct TableBloom(pub(super) Arc<Generation>);

impl TableBloom {
    /// The generation this filter belongs to ([`Table::generation`](crate::Table::generation)
    /// when it was taken).
    pub fn generation(&self) -> u64 {
        self.0.meta.generation
    }
}

impl std::fmt::Debug for TableBloom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableBloom")
            .field("generation", &self.generation())
            .field("filter", &self.0.bits)
            .finish()
    }
}

// Every lookup is the inner filter's own (its compiled probe, its block
// reads), not the trait's default one word at a time.
impl BloomRead for TableBloom {
    fn params(&self) -> &FilterParams {
        self.0.bits.params()
    }
    #[inline]
    fn word(&self, i: usize) -> u64 {
        self.0.bits.word(i)
    }
    #[inline]
    fn prefetch_word(&self, i: usize) {
        self.0.bits.prefetch_word(i)
    }
    #[inline]
    fn contains_hash(&self, h: KeyHash) -> bool {
        self.0.bits.contains_hash(h)
    }
    #[inline]
    fn contains_many_into<K: AsRef<[u8]>>(&self, keys: &[K], out: &mut [bool]) {
        self.0.bits.contains_many_into(keys, out)
    }
}
