//! The catalog: the store header (format version, next table id) and one
//! metadata record per table, each framed and versioned by
//! [`codec::meta`](crate::codec::meta), kept under the keys the catalog tree
//! of formats 1 and 2 used. Since format 3 they live in the catalog file
//! ([`disk::catalog_file`](super::disk::catalog_file)), held in memory by
//! [`Catalog`] and rewritten whole on every change. The records are
//! specified in `docs/FORMAT.md` §8 (catalog) and §9 (table metadata); a
//! table generation's files in §10 and §11.
//!
//! All data of a table generation lives in its own files, so dropping a
//! table (or retiring a generation) is one catalog write followed by
//! deleting files; files that no catalog record names are garbage left by a
//! crash between the two and are removed when the store is opened.

use super::disk::{catalog_file, CommitError};
use super::error::{NameError, StoreError};
use crate::codec::frame::Kind;
use crate::codec::meta;
use crate::error::CodecError;
use crate::filter::hash::{HashAlgo, HashSpec};
use crate::filter::params::{FilterParams, Layout};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The store format version this build writes (kept in the catalog header).
/// Version 1: everything in one sled database; version 2: a generation's
/// state record may carry the marks of a fold under way; version 3: the
/// catalog, counter pages and logs in the store's own files, sled only for
/// the guard's storage; version 4: each log record names its table and
/// generation and says how far its log was durable; version 5: each page
/// file's superblock says where its log starts, so that a fold can run in
/// the background (`docs/FORMAT.md` §8-§11, §15). A store of version 3 or 4
/// is migrated when opened for writing and read as it is when opened
/// read-only.
pub const STORE_FORMAT_VERSION: u32 = 5;
/// The longest table name accepted, in bytes.
pub const MAX_NAME_LEN: usize = 128;

/// Name of the catalog tree (formats 1 and 2).
pub(crate) const CATALOG_TREE: &str = "filterstore/catalog";
/// Prefix of every per-generation data tree (formats 1 and 2).
pub(crate) const TABLE_TREE_PREFIX: &str = "filterstore/table/";
/// Key of the store header in the catalog.
pub(crate) const HEADER_KEY: &[u8] = b"\x00header";
/// Prefix byte of table records in the catalog.
pub(crate) const TABLE_PREFIX: u8 = 1;

fn now_unix_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Checks a table name (rules in [`NameError`]).
pub fn validate_name(name: &str) -> Result<(), StoreError> {
    let bad = |source| StoreError::InvalidName {
        name: name.chars().take(MAX_NAME_LEN + 8).collect(),
        source,
    };
    let bytes = name.as_bytes();
    if bytes.is_empty() {
        return Err(bad(NameError::Empty));
    }
    if bytes.len() > MAX_NAME_LEN {
        return Err(bad(NameError::TooLong {
            len: bytes.len(),
            max: MAX_NAME_LEN,
        }));
    }
    if let Some((at, &byte)) = bytes
        .iter()
        .enumerate()
        .find(|(_, b)| !(b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')))
    {
        return Err(bad(NameError::InvalidByte { byte, at }));
    }
    if matches!(bytes[0], b'.' | b'-') {
        return Err(bad(NameError::BadFirstByte));
    }
    Ok(())
}

/// The store-wide header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoreHeader {
    /// [`STORE_FORMAT_VERSION`] of the writer.
    pub format_version: u32,
    /// The id the next created table gets.
    pub next_table_id: u64,
}

impl StoreHeader {
    pub(crate) fn encode(&self) -> Result<Vec<u8>, StoreError> {
        meta::encode(Kind::Catalog, self).map_err(|e| StoreError::encode("store header", e))
    }

    /// Decodes a header of any format version (the migrations read it).
    pub(crate) fn decode_any(bytes: &[u8]) -> Result<StoreHeader, StoreError> {
        let (h, _): (StoreHeader, u16) = meta::decode(bytes, Kind::Catalog)
            .map_err(|e| StoreError::corrupt("store header", e))?;
        Ok(h)
    }
}

/// A table's catalog record: everything needed to rebuild its filter's
/// parameters, and which generation of its data is in force.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableMeta {
    /// Store-unique id; never reused, so a dropped and re-created table never
    /// meets the old one's data.
    pub id: u64,
    /// The table's name.
    pub name: String,
    /// Layout id ([`Layout::id`]).
    pub layout: u8,
    /// Bits (and counters).
    pub m: u64,
    /// Hash functions.
    pub k: u32,
    /// Hash algorithm id ([`HashAlgo::id`]).
    pub hash_algo: u8,
    /// Hash seed.
    pub seed: u64,
    /// Keys the table was sized for.
    pub expected_keys: u64,
    /// False-positive rate the table was sized for.
    pub target_fp: f64,
    /// The generation of the data in force (starts at 1).
    pub generation: u64,
    /// Creation time, seconds since the Unix epoch.
    pub created_unix_s: u64,
}

impl TableMeta {
    /// The record of a new table (generation 1, created now) with filter
    /// parameters `params`, sized for `expected_keys` at `target_fp`.
    pub(crate) fn new_table(
        id: u64,
        name: &str,
        params: &FilterParams,
        expected_keys: u64,
        target_fp: f64,
    ) -> TableMeta {
        TableMeta {
            id,
            name: name.to_string(),
            layout: params.layout().id(),
            m: params.m(),
            k: params.k(),
            hash_algo: params.hash().algo.id(),
            seed: params.hash().seed,
            expected_keys,
            target_fp,
            generation: 1,
            created_unix_s: now_unix_s(),
        }
    }

    /// The filter parameters, validated (a record that does not describe a
    /// valid filter is corrupt).
    pub fn params(&self) -> Result<FilterParams, StoreError> {
        let corrupt = |reason: String| {
            StoreError::corrupt(
                format!("catalog record of table {:?}", self.name),
                crate::error::CodecError::InvalidField {
                    field: "table parameters",
                    reason,
                },
            )
        };
        let layout = Layout::from_id(self.layout)
            .ok_or_else(|| corrupt(format!("unknown layout id {}", self.layout)))?;
        let algo = HashAlgo::from_id(self.hash_algo)
            .ok_or_else(|| corrupt(format!("unknown hash id {}", self.hash_algo)))?;
        FilterParams::new(
            layout,
            self.m,
            self.k,
            HashSpec {
                algo,
                seed: self.seed,
            },
        )
        .map_err(|e| corrupt(e.to_string()))
    }

    /// Name of the sled tree that held generation `generation` of this
    /// table (formats 1 and 2).
    pub(crate) fn tree_name(&self, generation: u64) -> String {
        tree_name(self.id, generation)
    }

    /// The record's frame: version 1, version 2 for a split-block table
    /// (layout id 3 is new in format version 2, so a version-1 reader
    /// refuses the record with "upgrade filterstore" instead of misreading
    /// it; `docs/FORMAT.md` § 9), version 4 for a table hashed with XXH3-64
    /// (hash id 3, new in version 4).
    pub(crate) fn encode(&self) -> Result<Vec<u8>, StoreError> {
        meta::encode_versioned(Kind::TableMeta, self, self.format_version())
            .map_err(|e| StoreError::encode(format!("catalog record of {:?}", self.name), e))
    }

    /// The lowest format version that describes this record (read from
    /// its ids, which `decode` validates after this check).
    fn format_version(&self) -> u16 {
        use crate::codec::frame::{VERSION_1, VERSION_2, VERSION_4};
        if self.hash_algo == HashAlgo::Xxh3_64.id() {
            VERSION_4
        } else if self.layout == Layout::SplitBlock.id() {
            VERSION_2
        } else {
            VERSION_1
        }
    }

    pub(crate) fn decode(key: &[u8], bytes: &[u8]) -> Result<TableMeta, StoreError> {
        let what = || format!("catalog record {:?}", String::from_utf8_lossy(key));
        let (m, version): (TableMeta, u16) =
            meta::decode(bytes, Kind::TableMeta).map_err(|e| StoreError::corrupt(what(), e))?;
        if version < m.format_version() {
            return Err(StoreError::corrupt(
                what(),
                crate::error::CodecError::InvalidField {
                    field: "layout",
                    reason: format!(
                        "layout id {}, hash id {} in a frame of version {version}",
                        m.layout, m.hash_algo
                    ),
                },
            ));
        }
        if key.get(1..) != Some(m.name.as_bytes()) {
            return Err(StoreError::corrupt(
                what(),
                crate::error::CodecError::InvalidField {
                    field: "name",
                    reason: format!("record names {:?}", m.name),
                },
            ));
        }
        Ok(m)
    }
}

/// The catalog key of table `name`.
pub(crate) fn table_key(name: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + name.len());
    k.push(TABLE_PREFIX);
    k.extend_from_slice(name.as_bytes());
    k
}

/// Name of the data tree of table `id`, generation `generation` (formats 1
/// and 2).
pub(crate) fn tree_name(id: u64, generation: u64) -> String {
    format!("{TABLE_TREE_PREFIX}{id:016x}/gen/{generation:016x}")
}

/// A catalog record as read: decoded, or the bytes that failed to decode
/// (kept, so that the table can still be dropped and the rest of the
/// catalog rewritten unchanged).
#[derive(Clone, Debug)]
enum Record {
    Table(TableMeta),
    Damaged { value: Vec<u8>, error: String },
}

/// The catalog of a store of format 3 or 4: in memory, and in its file.
#[derive(Clone, Debug)]
pub(crate) struct Catalog {
    dir: PathBuf,
    header: StoreHeader,
    tables: BTreeMap<String, Record>,
}

/// A catalog file that is not a valid one.
fn bad_catalog(reason: String) -> StoreError {
    StoreError::corrupt(
        "catalog file",
        CodecError::InvalidField {
            field: "catalog",
            reason,
        },
    )
}

impl Catalog {
    /// The catalog of the store in `dir`, `None` if it has no catalog file.
    /// A damaged table record is kept aside (reported when the table is
    /// opened); a damaged header or container fails the whole catalog.
    pub(crate) fn load(dir: &Path) -> Result<Option<Catalog>, StoreError> {
        let bytes = catalog_file::read(dir).map_err(|source| StoreError::Io {
            op: "reading the catalog",
            source,
        })?;
        let Some(bytes) = bytes else {
            return Ok(None);
        };
        Catalog::decode(dir, &bytes).map(Some)
    }

    /// The catalog of a store whose catalog tree (formats 1 and 2) or file
    /// held `entries`.
    pub(crate) fn decode(dir: &Path, bytes: &[u8]) -> Result<Catalog, StoreError> {
        let entries = catalog_file::decode(bytes).map_err(|e| bad_catalog(e.0))?;
        Catalog::from_entries(dir, entries)
    }

    /// The catalog holding `entries` (the header and table records under
    /// their catalog keys).
    pub(crate) fn from_entries(
        dir: &Path,
        entries: catalog_file::Entries,
    ) -> Result<Catalog, StoreError> {
        let mut header = None;
        let mut tables = BTreeMap::new();
        for (key, value) in entries {
            if key == HEADER_KEY {
                let (h, _): (StoreHeader, u16) = meta::decode(&value, Kind::Catalog)
                    .map_err(|e| StoreError::corrupt("store header of the catalog", e))?;
                header = Some(h);
                continue;
            }
            if key.first() != Some(&TABLE_PREFIX) {
                // Unknown keys are ignored, as the catalog tree's were (§8).
                continue;
            }
            let Ok(name) = std::str::from_utf8(&key[1..]) else {
                return Err(bad_catalog("a table key is not UTF-8".into()));
            };
            let record = match TableMeta::decode(&key, &value) {
                Ok(m) => Record::Table(m),
                Err(e) => Record::Damaged {
                    value,
                    error: e.to_string(),
                },
            };
            tables.insert(name.to_string(), record);
        }
        let header = header.ok_or_else(|| bad_catalog("the store header is missing".into()))?;
        Ok(Catalog {
            dir: dir.to_path_buf(),
            header,
            tables,
        })
    }

    /// A new, empty catalog (not yet written).
    pub(crate) fn new(dir: &Path) -> Catalog {
        Catalog {
            dir: dir.to_path_buf(),
            header: StoreHeader {
                format_version: STORE_FORMAT_VERSION,
                next_table_id: 1,
            },
            tables: BTreeMap::new(),
        }
    }

    /// The store header.
    pub(crate) fn header(&self) -> StoreHeader {
        self.header
    }

    /// Table `name`'s record; [`StoreError::Corrupt`] if it is damaged.
    pub(crate) fn get(&self, name: &str) -> Result<Option<TableMeta>, StoreError> {
        match self.tables.get(name) {
            None => Ok(None),
            Some(Record::Table(m)) => Ok(Some(m.clone())),
            Some(Record::Damaged { error, .. }) => Err(damaged(name, error)),
        }
    }

    /// Whether a record (damaged or not) of `name` exists.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.tables.contains_key(name)
    }

    /// Every table record, sorted by name; [`StoreError::Corrupt`] if one
    /// is damaged.
    pub(crate) fn records(&self) -> Result<Vec<TableMeta>, StoreError> {
        self.tables
            .iter()
            .map(|(name, r)| match r {
                Record::Table(m) => Ok(m.clone()),
                Record::Damaged { error, .. } => Err(damaged(name, error)),
            })
            .collect()
    }

    /// Every readable record, and whether some record is damaged.
    pub(crate) fn readable(&self) -> (Vec<TableMeta>, bool) {
        let mut damaged = false;
        let mut out = Vec::new();
        for r in self.tables.values() {
            match r {
                Record::Table(m) => out.push(m.clone()),
                Record::Damaged { .. } => damaged = true,
            }
        }
        (out, damaged)
    }

    /// The (key, value) pairs of this catalog, header first.
    pub(crate) fn entries(&self) -> Result<catalog_file::Entries, StoreError> {
        let mut entries = vec![(HEADER_KEY.to_vec(), self.header.encode()?)];
        for (name, r) in &self.tables {
            let value = match r {
                Record::Table(m) => m.encode()?,
                Record::Damaged { value, .. } => value.clone(),
            };
            entries.push((table_key(name), value));
        }
        Ok(entries)
    }

    /// Applies `change` to a copy of this catalog, writes the copy's file
    /// durably (the commit point), then makes the copy this catalog. An
    /// error before the rename ([`StoreError::Io`]) changed nothing, in
    /// memory or on disk. A failed directory sync after it is
    /// [`StoreError::OutcomeUnknown`]: the copy becomes this catalog (it is
    /// the file the running system now holds), but a power cut could still
    /// bring back the old one, so the caller must delete nothing that
    /// either names and must stop the store's writes
    /// ([`Shared::commit_catalog`](super::shared::Shared::commit_catalog)
    /// does).
    pub(crate) fn commit(
        &mut self,
        change: impl FnOnce(&mut CatalogEdit),
    ) -> Result<(), StoreError> {
        let mut next = CatalogEdit(self.clone());
        change(&mut next);
        match catalog_file::write(&self.dir, &next.0.entries()?) {
            Ok(()) => {
                *self = next.0;
                Ok(())
            }
            Err(CommitError::Before(source)) => Err(StoreError::Io {
                op: "writing the catalog",
                source,
            }),
            Err(CommitError::After(source)) => {
                *self = next.0;
                Err(StoreError::OutcomeUnknown {
                    op: "committing the catalog (the directory sync after its rename)",
                    path: self.dir.clone(),
                    source,
                })
            }
        }
    }
}

/// The error of a damaged record of table `name`.
fn damaged(name: &str, error: &str) -> StoreError {
    StoreError::corrupt(
        format!("catalog record of table {name:?}"),
        CodecError::InvalidField {
            field: "table record",
            reason: error.to_string(),
        },
    )
}

/// Changes to a catalog, made inside [`Catalog::commit`].
pub(crate) struct CatalogEdit(Catalog);

impl CatalogEdit {
    /// Adds or replaces table `meta.name`'s record.
    pub(crate) fn put(&mut self, meta: TableMeta) {
        self.0.tables.insert(meta.name.clone(), Record::Table(meta));
    }

    /// Removes table `name`'s record.
    pub(crate) fn remove(&mut self, name: &str) {
        self.0.tables.remove(name);
    }

    /// Sets the header.
    pub(crate) fn set_header(&mut self, header: StoreHeader) {
        self.0.header = header;
    }

    /// The header as edited so far.
    pub(crate) fn header(&self) -> StoreHeader {
        self.0.header
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated_with_typed_errors() {
        for ok in [
            "a",
            "orders",
            "Orders_2024-01.v2",
            "_x",
            &"n".repeat(MAX_NAME_LEN),
        ] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        let err = |n: &str| match validate_name(n) {
            Err(StoreError::InvalidName { source, .. }) => source,
            other => panic!("{n:?}: {other:?}"),
        };
        assert_eq!(err(""), NameError::Empty);
        assert_eq!(
            err(&"n".repeat(MAX_NAME_LEN + 1)),
            NameError::TooLong {
                len: MAX_NAME_LEN + 1,
                max: MAX_NAME_LEN
            }
        );
        assert_eq!(err("a/b"), NameError::InvalidByte { byte: b'/', at: 1 });
        assert_eq!(err("a b"), NameError::InvalidByte { byte: b' ', at: 1 });
        assert_eq!(err("é"), NameError::InvalidByte { byte: 0xc3, at: 0 });
        assert_eq!(err(".hidden"), NameError::BadFirstByte);
        assert_eq!(err("-flag"), NameError::BadFirstByte);
    }

    #[test]
    fn meta_round_trips_and_checks_its_key() {
        let m = TableMeta {
            id: 3,
            name: "t".into(),
            layout: Layout::Blocked.id(),
            m: 1024,
            k: 5,
            hash_algo: HashAlgo::Xxh3_128.id(),
            seed: 9,
            expected_keys: 100,
            target_fp: 0.01,
            generation: 1,
            created_unix_s: 0,
        };
        let bytes = m.encode().unwrap();
        assert_eq!(TableMeta::decode(&table_key("t"), &bytes).unwrap(), m);
        assert!(TableMeta::decode(&table_key("u"), &bytes).is_err());
        assert_eq!(m.params().unwrap().k(), 5);
        let bad = TableMeta { layout: 9, ..m };
        assert!(matches!(bad.params(), Err(StoreError::Corrupt { .. })));
    }
}
