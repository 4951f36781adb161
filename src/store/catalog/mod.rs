//! The catalog: the store header (format version, next table id), one
//! metadata record per table and (format 6) one per sealed filter, each
//! framed and versioned by [`codec::meta`](crate::codec::meta), kept under
//! the keys the catalog tree of formats 1 and 2 used. Since format 3 they
//! live in the catalog file ([`disk::catalog_file`](super::disk::catalog_file)),
//! held in memory by [`Catalog`]. Up to format 5 the file was rewritten
//! whole on every change; since format 6 a change is one record appended
//! to the catalog log ([`disk::catalog_log`](super::disk::catalog_log)) and
//! the file is rewritten only at a checkpoint (`commit.rs`). The records
//! are specified in `docs/FORMAT.md` §8 (catalog), §9 (table metadata) and
//! §9a (sealed filters); a table generation's files in §10 and §11.
//!
//! All data of a table generation lives in its own files, so dropping a
//! table (or retiring a generation) is one catalog write followed by
//! deleting files; files that no catalog record names are garbage left by a
//! crash between the two and are removed when the store is opened.
//!
//! Where things live: `mod.rs` the header and table records; `sealed.rs`
//! sealed-filter records; `records.rs` the catalog in memory and how it is
//! read; `commit.rs` how it changes (edits, the log, checkpoints).

mod commit;
#[cfg(test)]
mod commit_tests;
mod records;
mod sealed;

pub(crate) use commit::CatalogEdit;
pub(crate) use records::Catalog;
pub use sealed::MAX_SEALED_TAG;
pub(crate) use sealed::{sealed_key, SealedMeta};

use super::error::{NameError, StoreError};
use crate::codec::frame::Kind;
use crate::codec::meta;
use crate::filter::hash::{HashAlgo, HashSpec};
use crate::filter::params::{FilterParams, Layout};
use serde::{Deserialize, Serialize};

/// The store format version this build writes (kept in the catalog header).
/// Version 1: everything in one sled database; version 2: a generation's
/// state record may carry the marks of a fold under way; version 3: the
/// catalog, counter pages and logs in the store's own files, sled only for
/// the guard's storage; version 4: each log record names its table and
/// generation and says how far its log was durable; version 5: each page
/// file's superblock says where its log starts, so that a fold can run in
/// the background; version 6: the catalog's changes are appended to a
/// log, and sealed filters (immutable bit filters, packed) have records of
/// their own; version 7: a guard storage's differential file is a log of
/// the store's own format; version 8: each page file's superblock says how
/// far its log was durable, so that a log cut short opens damaged
/// (`docs/FORMAT.md` §8-§11, §15). A store of version 3 to 7 is migrated
/// when opened for writing and read as it is when opened read-only.
pub const STORE_FORMAT_VERSION: u32 = 8;
/// The longest table name accepted, in bytes.
pub const MAX_NAME_LEN: usize = 128;

/// Name of the catalog tree (formats 1 and 2).
pub(crate) const CATALOG_TREE: &str = "filterstore/catalog";
/// Prefix of every per-generation data tree (formats 1 and 2).
pub(crate) const TABLE_TREE_PREFIX: &str = "filterstore/table/";
/// Key of the store header in the catalog.
pub(crate) const HEADER_KEY: &[u8] = b"\x00header";
/// Key of the catalog file's reference to its log (format 6).
pub(crate) const LOG_REF_KEY: &[u8] = b"\x00catalog-log";
/// Prefix byte of table records in the catalog.
pub(crate) const TABLE_PREFIX: u8 = 1;

fn now_unix_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Checks a table name (rules in [`NameError`]).
pub(crate) fn validate_name(name: &str) -> Result<(), StoreError> {
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
pub(crate) struct TableMeta {
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
    pub(crate) fn params(&self) -> Result<FilterParams, StoreError> {
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
    /// (hash id 3, new in version 4), version 6 for one hashed with XXH3-64
    /// sectorized (hash id 4, new in version 6).
    pub(crate) fn encode(&self) -> Result<Vec<u8>, StoreError> {
        meta::encode_versioned(Kind::TableMeta, self, self.format_version())
            .map_err(|e| StoreError::encode(format!("catalog record of {:?}", self.name), e))
    }

    /// The lowest format version that describes this record (read from
    /// its ids, which `decode` validates after this check).
    fn format_version(&self) -> u16 {
        use crate::codec::frame::{VERSION_1, VERSION_2, VERSION_4, VERSION_6};
        if self.hash_algo == HashAlgo::Xxh3_64Sectorized.id() {
            VERSION_6
        } else if self.hash_algo == HashAlgo::Xxh3_64.id() {
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

    /// A table record is framed with the version its hash needs
    /// (`docs/FORMAT.md` § 9): 1 for XXH3-128, 4 for XXH3-64, 6 for XXH3-64
    /// sectorized; re-framed one version lower it is corrupt.
    #[test]
    fn meta_frames_name_the_version_of_their_hash() {
        use crate::codec::frame;
        for (spec, k, version) in [
            (HashSpec::xxh3(9), 5, frame::VERSION_1),
            (HashSpec::xxh3_64(9), 5, frame::VERSION_4),
            (HashSpec::xxh3_64_sectorized(9), 8, frame::VERSION_6),
        ] {
            let p = FilterParams::new(Layout::Blocked, 1024, k, spec).unwrap();
            let m = TableMeta::new_table(3, "t", &p, 100, 0.01);
            let bytes = m.encode().unwrap();
            let f = frame::decode(&bytes).unwrap();
            assert_eq!((f.version, f.min_reader), (version, version), "{spec:?}");
            assert_eq!(TableMeta::decode(&table_key("t"), &bytes).unwrap(), m);
            assert_eq!(m.params().unwrap(), p);
            if version > frame::VERSION_1 {
                let old = meta::encode_versioned(Kind::TableMeta, &m, version - 1).unwrap();
                assert!(
                    matches!(
                        TableMeta::decode(&table_key("t"), &old),
                        Err(StoreError::Corrupt { .. })
                    ),
                    "{spec:?} in a frame of version {}",
                    version - 1
                );
            }
        }
    }
}
