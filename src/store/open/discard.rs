//! Taking back a store that an open made for nothing: a command that
//! creates a store to make a table in it, and whose table is then refused
//! (invalid parameters, a filter file cut short), leaves the directory as it
//! found it ([`FilterStore::discard_if_new`]).

use super::take_back::{
    holds_only_a_new_store, io, remove_lock_and_dirs, remove_store_files, Made,
};
use super::FilterStore;
use crate::store::error::StoreError;
use std::sync::Arc;

impl FilterStore {
    /// Closes this handle; if its open made the store (the directory was
    /// missing or empty) and the store holds nothing yet — no table, no
    /// guard storage, nothing but the files a new store has — removes
    /// them, and the directories the open created, and returns `true`: the
    /// directory is as it was before the open. Otherwise removes nothing
    /// and returns `false` (so also while another clone of this handle is
    /// alive). For a command that creates a store to make one table in it:
    /// when the table is refused, no empty store is left behind.
    ///
    /// The store is taken down in an order that a crash at any point leaves
    /// either a store that opens (empty) or no store: the table directory
    /// and the catalog first, synced, then the marker, synced, then the
    /// lock and the directories. An error (`StoreError::Io`) says it
    /// stopped part way: the directory holds a store that opens empty, or,
    /// once the marker went, nothing but the empty lock file `LOCK`, which
    /// an open takes for an empty directory (a store may be made there).
    pub fn discard_if_new(self) -> Result<bool, StoreError> {
        let Ok(inner) = Arc::try_unwrap(self.inner) else {
            return Ok(false);
        };
        let dir = inner.shared.dir.clone();
        if inner.made == Made::Nothing
            || !inner.shared.catalog.lock().readable().0.is_empty()
            || !holds_only_a_new_store(&dir)?
        {
            return Ok(false);
        }
        let op = io("removing a store made for a refused table");
        remove_store_files(&dir).map_err(&op)?;
        let made = inner.made.clone();
        drop(inner); // releases the lock
        remove_lock_and_dirs(&dir, &made).map_err(&op)?;
        Ok(true)
    }
}
