//! The catalog in memory, and how it is read: the catalog file's entries,
//! then (format 6) the records of the log the file names, applied in order.

use super::sealed::{SealedMeta, SEALED_PREFIX};
use super::{StoreHeader, TableMeta, HEADER_KEY, LOG_REF_KEY, STORE_FORMAT_VERSION, TABLE_PREFIX};
use crate::codec::frame::{self, Kind};
use crate::codec::meta;
use crate::error::CodecError;
use crate::store::disk::catalog_file;
use crate::store::disk::catalog_log::{self, CatalogLog, Op, Replay};
use crate::store::error::StoreError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A catalog record as read: decoded, or the bytes that failed to decode
/// (kept, so that the record can still be dropped and the rest of the
/// catalog written unchanged).
#[derive(Clone, Debug)]
pub(super) enum Record<T> {
    Ok(T),
    Damaged { value: Vec<u8>, error: String },
}

impl<T> Record<T> {
    fn read(value: Vec<u8>, decode: impl FnOnce(&[u8]) -> Result<T, StoreError>) -> Record<T> {
        match decode(&value) {
            Ok(m) => Record::Ok(m),
            Err(e) => Record::Damaged {
                value,
                error: e.to_string(),
            },
        }
    }
}

/// The body of the catalog file's entry [`LOG_REF_KEY`] (format 6): the id
/// of the log whose records come after the file's (`docs/FORMAT.md` § 8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct LogRef {
    pub(super) log_id: u64,
}

impl LogRef {
    pub(super) fn encode(self) -> Result<Vec<u8>, StoreError> {
        meta::encode_versioned(Kind::Catalog, &self, frame::VERSION_4)
            .map_err(|e| StoreError::encode("catalog log reference", e))
    }
}

/// How the catalog's changes are written.
#[derive(Debug)]
pub(crate) enum LogSlot {
    /// Formats 3 to 5: every commit replaces the whole file.
    Whole,
    /// Format 6, as read: the file names log `id`, found on disk as
    /// `replay` says (`None`: not read). Not open for appending (a
    /// read-only open, or before [`Catalog::open_log`]).
    Named { id: u64, replay: Option<Replay> },
    /// Format 6: the file names log `id`, which must be made (empty) before
    /// the next record is appended.
    Missing(u64),
    /// Format 6, open for appending.
    Open(CatalogLog),
}

/// The catalog of a store of format 3 or later: in memory, and in its
/// file (and log).
#[derive(Debug)]
pub(crate) struct Catalog {
    pub(super) dir: PathBuf,
    pub(super) header: StoreHeader,
    pub(super) tables: BTreeMap<String, Record<TableMeta>>,
    pub(super) sealed: BTreeMap<String, Record<SealedMeta>>,
    /// How a change is written: the whole file (formats 3 to 5), or a
    /// record of the log (format 6).
    pub(super) log: LogSlot,
    /// Bytes of the catalog file as last read or written: a checkpoint is
    /// due when the log has grown past them.
    pub(super) file_bytes: u64,
}

/// A catalog file that is not a valid one.
pub(super) fn bad_catalog(reason: String) -> StoreError {
    StoreError::corrupt(
        "catalog file",
        CodecError::InvalidField {
            field: "catalog",
            reason,
        },
    )
}

/// The error of a damaged record `name`.
fn damaged(what: &str, name: &str, error: &str) -> StoreError {
    StoreError::corrupt(
        format!("catalog record of {what} {name:?}"),
        CodecError::InvalidField {
            field: "catalog record",
            reason: error.to_string(),
        },
    )
}

impl Catalog {
    /// The catalog of the store in `dir`, `None` if it has no catalog file:
    /// the file, and in format 6 the log it names applied on top (how the
    /// log is then written is decided by [`Catalog::open_log`]). A damaged
    /// table or sealed-filter record is kept aside (reported when it is
    /// used); a damaged header or container fails the whole catalog.
    pub(crate) fn load(dir: &Path) -> Result<Option<Catalog>, StoreError> {
        let io = |op| move |source| StoreError::Io { op, source };
        let Some(bytes) = catalog_file::read(dir).map_err(io("reading the catalog"))? else {
            return Ok(None);
        };
        let mut catalog = Catalog::decode(dir, &bytes)?;
        if let LogSlot::Named { id, .. } = catalog.log {
            let mut replay = catalog_log::read(dir, id).map_err(io("reading the catalog log"))?;
            for ops in std::mem::take(&mut replay.records) {
                for op in ops {
                    match op {
                        Op::Put(k, v) => catalog.set_entry(k, Some(v))?,
                        Op::Remove(k) => catalog.set_entry(k, None)?,
                    }
                }
            }
            catalog.log = LogSlot::Named {
                id,
                replay: Some(replay),
            };
        }
        Ok(Some(catalog))
    }

    /// The catalog whose file holds `bytes`.
    pub(crate) fn decode(dir: &Path, bytes: &[u8]) -> Result<Catalog, StoreError> {
        let entries = catalog_file::decode(bytes).map_err(|e| bad_catalog(e.0))?;
        let mut catalog = Catalog::from_entries(dir, entries)?;
        catalog.file_bytes = bytes.len() as u64;
        Ok(catalog)
    }

    /// The catalog holding `entries` (the header, the log reference and the
    /// records under their catalog keys).
    pub(crate) fn from_entries(
        dir: &Path,
        entries: catalog_file::Entries,
    ) -> Result<Catalog, StoreError> {
        let mut catalog = Catalog::empty(dir, None);
        let mut log_id = None;
        for (key, value) in entries {
            if key == LOG_REF_KEY {
                let (r, _): (LogRef, u16) = meta::decode(&value, Kind::Catalog)
                    .map_err(|e| StoreError::corrupt("catalog log reference", e))?;
                log_id = Some(r.log_id);
                continue;
            }
            catalog.set_entry(key, Some(value))?;
        }
        if catalog.header.format_version == 0 {
            return Err(bad_catalog("the store header is missing".into()));
        }
        catalog.log = match (catalog.header.format_version >= 6, log_id) {
            (false, _) => LogSlot::Whole,
            (true, Some(id)) => LogSlot::Named { id, replay: None },
            (true, None) => return Err(bad_catalog("the log reference is missing".into())),
        };
        Ok(catalog)
    }

    /// A catalog with no header yet (format 0) and no records.
    fn empty(dir: &Path, header: Option<StoreHeader>) -> Catalog {
        Catalog {
            dir: dir.to_path_buf(),
            header: header.unwrap_or(StoreHeader {
                format_version: 0,
                next_table_id: 0,
            }),
            tables: BTreeMap::new(),
            sealed: BTreeMap::new(),
            log: LogSlot::Whole,
            file_bytes: 0,
        }
    }

    /// A new, empty catalog of this build's format, not yet written
    /// ([`Catalog::create`] writes it).
    pub(crate) fn new(dir: &Path) -> Catalog {
        let mut c = Catalog::empty(
            dir,
            Some(StoreHeader {
                format_version: STORE_FORMAT_VERSION,
                next_table_id: 1,
            }),
        );
        c.log = LogSlot::Missing(1);
        c
    }

    /// Sets (or, with `None`, removes) the entry under `key`, as the file
    /// and the log hold it. Unknown keys are ignored, as the catalog tree's
    /// were (§8).
    pub(super) fn set_entry(
        &mut self,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    ) -> Result<(), StoreError> {
        if key == HEADER_KEY {
            let value = value.ok_or_else(|| bad_catalog("the store header is removed".into()))?;
            let (h, _): (StoreHeader, u16) = meta::decode(&value, Kind::Catalog)
                .map_err(|e| StoreError::corrupt("store header of the catalog", e))?;
            self.header = h;
            return Ok(());
        }
        let Some((&prefix, name)) = key.split_first() else {
            return Ok(());
        };
        if prefix != TABLE_PREFIX && prefix != SEALED_PREFIX {
            return Ok(());
        }
        let Ok(name) = std::str::from_utf8(name) else {
            return Err(bad_catalog("a record key is not UTF-8".into()));
        };
        let name = name.to_string();
        match (prefix, value) {
            (TABLE_PREFIX, Some(v)) => {
                let r = Record::read(v, |v| TableMeta::decode(&key, v));
                self.tables.insert(name, r);
            }
            (TABLE_PREFIX, None) => {
                self.tables.remove(&name);
            }
            (_, Some(v)) => {
                let r = Record::read(v, |v| SealedMeta::decode(&key, v));
                self.sealed.insert(name, r);
            }
            (_, None) => {
                self.sealed.remove(&name);
            }
        }
        Ok(())
    }

    /// The store header.
    pub(crate) fn header(&self) -> StoreHeader {
        self.header
    }

    /// Table `name`'s record; [`StoreError::Corrupt`] if it is damaged.
    pub(crate) fn get(&self, name: &str) -> Result<Option<TableMeta>, StoreError> {
        match self.tables.get(name) {
            None => Ok(None),
            Some(Record::Ok(m)) => Ok(Some(m.clone())),
            Some(Record::Damaged { error, .. }) => Err(damaged("table", name, error)),
        }
    }

    /// Whether a table record (damaged or not) of `name` exists.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.tables.contains_key(name)
    }

    /// Every table record, sorted by name; [`StoreError::Corrupt`] if one
    /// is damaged.
    pub(crate) fn records(&self) -> Result<Vec<TableMeta>, StoreError> {
        self.tables
            .iter()
            .map(|(name, r)| match r {
                Record::Ok(m) => Ok(m.clone()),
                Record::Damaged { error, .. } => Err(damaged("table", name, error)),
            })
            .collect()
    }

    /// Every readable table record, and whether some record (of a table or
    /// of a sealed filter) is damaged.
    pub(crate) fn readable(&self) -> (Vec<TableMeta>, bool) {
        let damaged = self
            .sealed
            .values()
            .any(|r| matches!(r, Record::Damaged { .. }));
        let mut out = Vec::new();
        let mut any = damaged;
        for r in self.tables.values() {
            match r {
                Record::Ok(m) => out.push(m.clone()),
                Record::Damaged { .. } => any = true,
            }
        }
        (out, any)
    }

    /// The sealed filters whose names start with `prefix`, sorted by name:
    /// each record, or the error of a damaged one.
    pub(crate) fn sealed_with_prefix<'a>(
        &'a self,
        prefix: &'a str,
    ) -> impl Iterator<Item = (&'a str, Result<&'a SealedMeta, StoreError>)> + 'a {
        self.sealed
            .range(prefix.to_string()..)
            .take_while(move |(name, _)| name.starts_with(prefix))
            .map(|(name, r)| {
                let r = match r {
                    Record::Ok(m) => Ok(m),
                    Record::Damaged { error, .. } => Err(damaged("sealed filter", name, error)),
                };
                (name.as_str(), r)
            })
    }

    /// The pack files the readable sealed records name, with how many
    /// records name each.
    pub(crate) fn packs(&self) -> BTreeMap<u64, u64> {
        let mut packs = BTreeMap::new();
        for r in self.sealed.values() {
            if let Record::Ok(m) = r {
                *packs.entry(m.pack).or_insert(0) += 1;
            }
        }
        packs
    }

    /// The (key, value) pairs of the catalog file: the header first, then
    /// (format 6) the reference to log `log_id`, the table records and the
    /// sealed-filter records.
    pub(super) fn entries(&self, log_id: Option<u64>) -> Result<catalog_file::Entries, StoreError> {
        let mut entries = vec![(HEADER_KEY.to_vec(), self.header.encode()?)];
        if let Some(log_id) = log_id {
            entries.push((LOG_REF_KEY.to_vec(), LogRef { log_id }.encode()?));
        }
        for (name, r) in &self.tables {
            let value = match r {
                Record::Ok(m) => m.encode()?,
                Record::Damaged { value, .. } => value.clone(),
            };
            entries.push((super::table_key(name), value));
        }
        for (name, r) in &self.sealed {
            let value = match r {
                Record::Ok(m) => m.encode()?,
                Record::Damaged { value, .. } => value.clone(),
            };
            entries.push((super::sealed_key(name), value));
        }
        Ok(entries)
    }
}
