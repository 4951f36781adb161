//! [`SledDiffStorage`]: the guard's host side inside the filter store's
//! directory, on sled.

use super::value::{GuardValue, Repr};
use super::{Change, DiffStorage};
use crate::store::legacy::engine;
use crate::store::{FilterStore, StoreError};
use thiserror::Error;

/// [`DiffStorage`] inside the filter store's directory: the base and the
/// differential file are two trees of a sled database there, opened on
/// first use. The storage engine stays an implementation detail: no engine
/// type appears in this API, and engine errors are the
/// [`source`](std::error::Error::source) of a [`StoreError`].
///
/// Reads run on the caller's thread and never wait for another store;
/// writes run through the store's sled worker in calls of at most eight
/// items, each flushed (`src/store/legacy/engine/mod.rs` proves from sled's code why
/// this keeps sled 0.34.7's writer deadlock from closing). Hence its
/// limits: a key of at most [`MAX_GUARD_KEY`] bytes and a value of at most
/// [`MAX_GUARD_VALUE`] (larger ones are refused with
/// [`SledDiffError::TooLarge`], before anything is written: sled would store
/// them as blob files, whose names a power cut can lose); and
/// [`write_diff`](DiffStorage::write_diff), [`merge`](DiffStorage::merge),
/// [`load_base`](SledDiffStorage::load_base) and
/// [`clear`](SledDiffStorage::clear) are atomic per group of
/// [`GUARD_GROUP`] changes (a crash in a larger one leaves a prefix of its
/// groups done: each key is either wholly old or wholly new, which is all a
/// guarded read needs; see [`Guard`](super::Guard) for the order that keeps reads right).
/// Every operation is durable against power loss when it returns.
///
/// Measured by `cargo bench --bench diffguard`: reads through it against
/// sled's own gets on the same data (`RESULT guard.reads_vs_raw_sled_get`).
///
/// A change is stored as a tag byte (1 = put, 0 = delete) followed by the
/// value.
#[derive(Clone, Debug)]
pub struct SledDiffStorage {
    store: FilterStore,
    base: engine::Tree,
    diff: engine::Tree,
}

/// The longest key [`SledDiffStorage`] takes, in bytes.
pub const MAX_GUARD_KEY: usize = engine::MAX_KEY;
/// The longest value [`SledDiffStorage`] takes, in bytes.
pub const MAX_GUARD_VALUE: usize = engine::MAX_VALUE - 1;
/// Changes that [`SledDiffStorage`] writes atomically together.
pub const GUARD_GROUP: usize = engine::MAX_CALL_ITEMS;

/// Refuses a record over the limits, before anything is written.
fn check_size(key: &[u8], value_len: usize) -> Result<(), SledDiffError> {
    if key.len() > MAX_GUARD_KEY || value_len > MAX_GUARD_VALUE {
        return Err(SledDiffError::TooLarge {
            key: key.len(),
            value: value_len,
        });
    }
    Ok(())
}

impl SledDiffStorage {
    /// Opens (or creates) the base and differential file named `name` (the
    /// rules of table names, [`NameError`](crate::NameError)) in `store`.
    /// They live beside the store's tables and never collide with them.
    ///
    /// # Examples
    /// ```
    /// use filterstore::{Change, DiffStorage, FilterStore, Guard, SledDiffStorage, TableSpec};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = tempfile::tempdir()?;
    /// let store = FilterStore::open(dir.path())?;
    /// let storage = SledDiffStorage::open(&store, "accounts")?;
    /// storage.load_base([(b"alice".to_vec(), b"10".to_vec()), (b"bob".to_vec(), b"20".to_vec())])?;
    /// let changed = store.open_or_create_table("accounts-changed", TableSpec::new(1_000, 0.01))?;
    /// let guard = Guard::open(storage, changed)?;
    ///
    /// guard.write(&[(b"bob".to_vec(), Change::Put(b"25".to_vec()))])?;
    /// assert_eq!(guard.read(b"bob")?.as_deref(), Some(&b"25"[..])); // from the differential file
    /// assert_eq!(guard.read(b"alice")?.as_deref(), Some(&b"10"[..])); // the filter skipped the diff
    /// assert_eq!(guard.stats().reads, 2);
    /// assert_eq!(guard.stats().diff_reads_avoided + guard.stats().diff_reads, 2);
    ///
    /// assert_eq!(guard.merge()?, 1); // one change merged into the base
    /// assert_eq!(guard.storage().read_base(b"bob")?.as_deref(), Some(&b"25"[..]));
    /// assert_eq!(guard.table().live_keys(), 0); // and the filter cleared
    /// # Ok(()) }
    /// ```
    pub fn open(store: &FilterStore, name: &str) -> Result<Self, StoreError> {
        let (base, diff) = store.guard_trees(name)?;
        Ok(SledDiffStorage {
            store: store.clone(),
            base,
            diff,
        })
    }

    /// Writes `records` into the base, unguarded (a bulk load before the
    /// guard is used, or by the host's own merge), in atomic groups of
    /// [`GUARD_GROUP`], all durable before this returns. Every record is
    /// checked against the size limits before the first is written.
    pub fn load_base<K, V>(
        &self,
        records: impl IntoIterator<Item = (K, V)>,
    ) -> Result<(), SledDiffError>
    where
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let records: Vec<(K, V)> = records.into_iter().collect();
        for (k, v) in &records {
            check_size(k.as_ref(), v.as_ref().len())?;
        }
        for group in records.chunks(GUARD_GROUP) {
            let mut batch = engine::Batch::default();
            for (k, v) in group {
                batch.insert(k.as_ref(), v.as_ref());
            }
            self.base
                .apply_batch(batch)
                .map_err(sled_err("loading the base"))?;
        }
        self.flush()
    }

    /// Empties the base and the differential file (durable when this
    /// returns). The guard's table is the caller's to clear.
    pub fn clear(&self) -> Result<(), SledDiffError> {
        for (tree, op) in [
            (&self.base, "clearing the base"),
            (&self.diff, "clearing the differential file"),
        ] {
            loop {
                let keys: Vec<engine::IVec> = tree
                    .iter()
                    .take(GUARD_GROUP)
                    .map(|kv| kv.map(|(k, _)| k))
                    .collect::<Result<_, _>>()
                    .map_err(sled_err(op))?;
                if keys.is_empty() {
                    break;
                }
                let mut batch = engine::Batch::default();
                for k in keys {
                    batch.remove(k);
                }
                tree.apply_batch(batch).map_err(sled_err(op))?;
            }
        }
        self.flush()
    }

    /// Records in the base.
    pub fn base_len(&self) -> Result<usize, SledDiffError> {
        self.base.len().map_err(sled_err("counting the base"))
    }

    /// Changes in the differential file.
    pub fn diff_len(&self) -> Result<usize, SledDiffError> {
        self.diff
            .len()
            .map_err(sled_err("counting the differential file"))
    }

    fn flush(&self) -> Result<(), SledDiffError> {
        self.store.flush_storage().map_err(SledDiffError::Store)
    }
}

fn sled_err(op: &'static str) -> impl Fn(sled::Error) -> SledDiffError {
    move |e| SledDiffError::Store(StoreError::sled(op, e))
}

/// Errors of [`SledDiffStorage`].
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SledDiffError {
    /// A key or value over [`SledDiffStorage`]'s limits; nothing was written.
    #[error("a record with a {key}-byte key and a {value}-byte value is over the guard storage's limits ({MAX_GUARD_KEY}-byte keys, {MAX_GUARD_VALUE}-byte values); nothing was written")]
    TooLarge {
        /// Bytes of the key.
        key: usize,
        /// Bytes of the value.
        value: usize,
    },
    /// The storage failed (the engine's error is this error's source).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A differential-file record is not a valid change (corrupt, or written
    /// by something else): nothing was merged.
    #[error("differential-file record is corrupt (first byte {0:?}); nothing was merged")]
    BadRecord(Option<u8>),
}

fn decode_change(v: &[u8]) -> Result<Change, SledDiffError> {
    match v.split_first() {
        Some((1, rest)) => Ok(Change::Put(rest.to_vec())),
        Some((0, [])) => Ok(Change::Delete),
        other => Err(SledDiffError::BadRecord(other.map(|(t, _)| *t))),
    }
}

impl DiffStorage for SledDiffStorage {
    type Error = SledDiffError;
    type Value = GuardValue;

    /// The base's record, in the engine's own buffer (not copied).
    fn read_base(&self, key: &[u8]) -> Result<Option<GuardValue>, SledDiffError> {
        Ok(self
            .base
            .get(key)
            .map_err(sled_err("reading the base"))?
            .map(|v| GuardValue(Repr::Engine(v))))
    }

    fn read_diff(&self, key: &[u8]) -> Result<Option<Change>, SledDiffError> {
        self.diff
            .get(key)
            .map_err(sled_err("reading the differential file"))?
            .map(|v| decode_change(&v))
            .transpose()
    }

    /// Commits `changes` in atomic groups of [`GUARD_GROUP`] (see the type's
    /// docs), all durable when this returns; every change is checked
    /// against the size limits before the first is written.
    fn write_diff(&self, changes: &[(Vec<u8>, Change)]) -> Result<(), SledDiffError> {
        for (key, change) in changes {
            let len = match change {
                Change::Put(v) => v.len(),
                Change::Delete => 0,
            };
            check_size(key, len)?;
        }
        for group in changes.chunks(GUARD_GROUP) {
            let mut batch = engine::Batch::default();
            for (key, change) in group {
                match change {
                    Change::Put(v) => {
                        let mut value = Vec::with_capacity(v.len() + 1);
                        value.push(1);
                        value.extend_from_slice(v);
                        batch.insert(key.as_slice(), value);
                    }
                    Change::Delete => batch.insert(key.as_slice(), &[0u8][..]),
                }
            }
            self.diff
                .apply_batch(batch)
                .map_err(sled_err("writing the differential file"))?;
        }
        self.flush()
    }

    /// Moves every change into the base, a group of [`GUARD_GROUP`] / 2 at a
    /// time (each group one transaction: its base writes and its removal
    /// from the differential file), durable when this returns. A crash
    /// leaves each change either still in the differential file or in the
    /// base, never lost.
    fn merge(&self) -> Result<u64, SledDiffError> {
        use sled::transaction::ConflictableTransactionError;
        let mut n = 0u64;
        loop {
            let changes: Vec<(engine::IVec, engine::IVec)> = self
                .diff
                .iter()
                .take(GUARD_GROUP / 2)
                .collect::<Result<_, _>>()
                .map_err(sled_err("reading the differential file"))?;
            if changes.is_empty() {
                break;
            }
            n += changes.len() as u64;
            let keys = changes.iter().map(|(k, _)| k.clone()).collect();
            self.base
                .transaction2(&self.diff, keys, move |base, diff| {
                    for (key, value) in &changes {
                        match decode_change(value) {
                            Ok(Change::Put(v)) => {
                                base.insert(key, v)?;
                            }
                            Ok(Change::Delete) => {
                                base.remove(key)?;
                            }
                            Err(e) => return Err(ConflictableTransactionError::Abort(e)),
                        }
                        diff.remove(key)?;
                    }
                    Ok(())
                })
                .map_err(sled_err("merging the differential file"))??;
        }
        self.flush()?;
        Ok(n)
    }

    fn read_base_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<GuardValue>>, SledDiffError> {
        let keys = keys.iter().map(|k| engine::IVec::from(*k)).collect();
        Ok(self
            .base
            .get_many(keys)
            .map_err(sled_err("reading the base"))?
            .into_iter()
            .map(|v| v.map(|v| GuardValue(Repr::Engine(v))))
            .collect())
    }

    fn read_diff_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Change>>, SledDiffError> {
        let keys = keys.iter().map(|k| engine::IVec::from(*k)).collect();
        self.diff
            .get_many(keys)
            .map_err(sled_err("reading the differential file"))?
            .into_iter()
            .map(|v| v.map(|v| decode_change(&v)).transpose())
            .collect()
    }

    fn diff_is_empty(&self) -> Result<bool, SledDiffError> {
        self.diff
            .is_empty()
            .map_err(sled_err("reading the differential file"))
    }
}
