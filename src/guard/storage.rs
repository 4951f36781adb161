//! What a guard asks of its host: [`DiffStorage`], a base and a
//! differential file of [`Change`]s.

use crate::store::Durability;

/// A change recorded in the differential file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The record's new value.
    Put(Vec<u8>),
    /// The record was deleted.
    Delete,
}

/// What the host stores: a base and a differential file of changes.
/// Implemented inside the filter store's own database by
/// [`SledDiffStorage`](super::SledDiffStorage); any engine can implement it.
pub trait DiffStorage {
    /// The host's error type.
    type Error: std::error::Error + Send + Sync + 'static;
    /// A value as reads return it: `Vec<u8>`, or the engine's own shared
    /// buffer where it has one, so that a read need not copy it
    /// ([`GuardValue`](super::GuardValue) for [`SledDiffStorage`](super::SledDiffStorage)). A change's value read from
    /// the differential file becomes one through `From<Vec<u8>>`.
    type Value: AsRef<[u8]> + From<Vec<u8>>;
    /// Reads a record from the base.
    fn read_base(&self, key: &[u8]) -> Result<Option<Self::Value>, Self::Error>;
    /// Reads the change recorded for `key` in the differential file.
    fn read_diff(&self, key: &[u8]) -> Result<Option<Change>, Self::Error>;
    /// Commits changes to the differential file, durably, all or none. A
    /// guard calls it from several threads at once (never during a
    /// [`merge`](DiffStorage::merge)); calls that overlap may commit in
    /// either order.
    fn write_diff(&self, changes: &[(Vec<u8>, Change)]) -> Result<(), Self::Error>;
    /// [`write_diff`](DiffStorage::write_diff) at `durability`: a storage
    /// that can hold changes before they are durable makes a
    /// [`Durability::Buffered`] write readable at once and durable at its
    /// next [`flush_diff`](DiffStorage::flush_diff) or durable write (lost
    /// by a crash before that). The default writes durably whatever is
    /// asked, which every level allows.
    fn write_diff_with(
        &self,
        changes: &[(Vec<u8>, Change)],
        durability: Durability,
    ) -> Result<(), Self::Error> {
        let _ = durability;
        self.write_diff(changes)
    }
    /// Makes every change written so far durable (those written
    /// [`Durability::Buffered`]); the default has nothing to do.
    fn flush_diff(&self) -> Result<(), Self::Error> {
        Ok(())
    }
    /// Applies every change to the base and empties the differential file,
    /// atomically and durably. Returns the number of changes merged.
    fn merge(&self) -> Result<u64, Self::Error>;
    /// Whether the differential file holds no change.
    fn diff_is_empty(&self) -> Result<bool, Self::Error>;

    /// Reads the base records of `keys`, in order: one trip for a batch
    /// where the engine allows it (the default reads them one by one).
    fn read_base_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Self::Value>>, Self::Error> {
        keys.iter().map(|k| self.read_base(k)).collect()
    }

    /// Reads the changes recorded for `keys`, in order (see
    /// [`read_base_many`](DiffStorage::read_base_many)).
    fn read_diff_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Change>>, Self::Error> {
        keys.iter().map(|k| self.read_diff(k)).collect()
    }

    /// The keys with a change in the differential file, where the storage
    /// can list them cheaply (`None`: it cannot; the default). [`Guard::open`](super::Guard::open)
    /// makes sure the filter holds every one of them, so that no change can
    /// be hidden from reads by a filter that lost a key (a table restored
    /// from an older copy, or cleared by a build that did not know the
    /// storage's format).
    fn diff_keys(&self) -> Result<Option<Vec<Vec<u8>>>, Self::Error> {
        Ok(None)
    }
}
