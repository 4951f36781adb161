//! A sealed filter's catalog record (store format 6, `docs/FORMAT.md`
//! § 9a): an immutable bit filter, its bytes in a pack file
//! (`store::sealed`), its parameters and the caller's tag here.

use super::{validate_name, StoreError};
use crate::codec::frame::{self, Kind};
use crate::codec::meta;
use crate::error::CodecError;
use crate::filter::hash::{HashAlgo, HashSpec};
use crate::filter::params::{FilterParams, Layout};
use serde::{Deserialize, Serialize};

/// Prefix byte of sealed-filter records in the catalog.
pub(crate) const SEALED_PREFIX: u8 = 2;
/// The longest tag a sealed filter carries, in bytes.
pub const MAX_SEALED_TAG: usize = 4096;

/// A sealed filter's catalog record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct SealedMeta {
    /// The filter's name (the rules of table names).
    pub name: String,
    /// Layout id ([`Layout::id`]).
    pub layout: u8,
    /// Bits.
    pub m: u64,
    /// Hash functions.
    pub k: u32,
    /// Hash algorithm id ([`HashAlgo::id`]).
    pub hash_algo: u8,
    /// Hash seed.
    pub seed: u64,
    /// Keys the filter holds (as its writer counted them).
    pub keys: u64,
    /// The false-positive rate it was sized for.
    pub target_fp: f64,
    /// The pack file that holds its bytes.
    pub pack: u64,
    /// Where its filter file (`docs/FORMAT.md` § 7) starts in the pack.
    pub offset: u64,
    /// Its length in bytes.
    pub len: u64,
    /// Creation time, seconds since the Unix epoch.
    pub created_unix_s: u64,
    /// The caller's bytes (at most [`MAX_SEALED_TAG`]).
    pub tag: Vec<u8>,
}

/// The catalog key of sealed filter `name`.
pub(crate) fn sealed_key(name: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + name.len());
    k.push(SEALED_PREFIX);
    k.extend_from_slice(name.as_bytes());
    k
}

fn invalid(what: String, field: &'static str, reason: String) -> StoreError {
    StoreError::corrupt(what, CodecError::InvalidField { field, reason })
}

impl SealedMeta {
    /// The filter parameters, validated.
    pub(crate) fn params(&self) -> Result<FilterParams, StoreError> {
        let bad = |reason: String| {
            invalid(
                format!("catalog record of sealed filter {:?}", self.name),
                "filter parameters",
                reason,
            )
        };
        let layout = Layout::from_id(self.layout)
            .ok_or_else(|| bad(format!("unknown layout id {}", self.layout)))?;
        let algo = HashAlgo::from_id(self.hash_algo)
            .ok_or_else(|| bad(format!("unknown hash id {}", self.hash_algo)))?;
        let hash = HashSpec {
            algo,
            seed: self.seed,
        };
        FilterParams::new(layout, self.m, self.k, hash).map_err(|e| bad(e.to_string()))
    }

    /// The record's frame: kind 11, version 4, or version 6 for a filter
    /// hashed with XXH3-64 sectorized (hash id 4, new in version 6;
    /// `docs/FORMAT.md` § 9a).
    pub(crate) fn encode(&self) -> Result<Vec<u8>, StoreError> {
        meta::encode_versioned(Kind::SealedMeta, self, self.format_version()).map_err(|e| {
            StoreError::encode(
                format!("catalog record of sealed filter {:?}", self.name),
                e,
            )
        })
    }

    /// The lowest format version that describes this record (read from
    /// its hash id, which `decode` validates after this check).
    fn format_version(&self) -> u16 {
        if self.hash_algo == HashAlgo::Xxh3_64Sectorized.id() {
            frame::VERSION_6
        } else {
            frame::VERSION_4
        }
    }

    /// Decodes the record under catalog key `key`, checking that it names
    /// the key, a valid name, a valid filter, a tag within its limit, and
    /// a frame version that can name its hash.
    pub(crate) fn decode(key: &[u8], bytes: &[u8]) -> Result<SealedMeta, StoreError> {
        let what = || format!("catalog record {:?}", String::from_utf8_lossy(key));
        let (m, version): (SealedMeta, u16) =
            meta::decode(bytes, Kind::SealedMeta).map_err(|e| StoreError::corrupt(what(), e))?;
        if version < m.format_version() {
            return Err(invalid(
                what(),
                "hash algorithm",
                format!("hash id {} in a frame of version {version}", m.hash_algo),
            ));
        }
        if key.get(1..) != Some(m.name.as_bytes()) || validate_name(&m.name).is_err() {
            return Err(invalid(
                what(),
                "name",
                format!("record names {:?}", m.name),
            ));
        }
        if m.tag.len() > MAX_SEALED_TAG {
            return Err(invalid(what(), "tag", format!("{} bytes", m.tag.len())));
        }
        m.params()?;
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> SealedMeta {
        SealedMeta {
            name: "t.0.ab".into(),
            layout: Layout::Blocked.id(),
            m: 4096,
            k: 7,
            hash_algo: HashAlgo::Xxh3_128.id(),
            seed: 5,
            keys: 300,
            target_fp: 1e-3,
            pack: 9,
            offset: 24,
            len: 588,
            created_unix_s: 1,
            tag: b"path".to_vec(),
        }
    }

    /// The body's fields at the offsets `docs/FORMAT.md` § 9a gives.
    #[test]
    fn the_record_body_is_laid_out_as_the_format_says() {
        let m = meta();
        let bytes = m.encode().unwrap();
        let b = &bytes[24..bytes.len() - 4];
        let n = m.name.len();
        let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
        assert_eq!(u64_at(0), n as u64);
        assert_eq!(&b[8..8 + n], m.name.as_bytes());
        assert_eq!(b[8 + n], m.layout);
        assert_eq!(u64_at(9 + n), m.m);
        assert_eq!(
            u32::from_le_bytes(b[17 + n..21 + n].try_into().unwrap()),
            m.k
        );
        assert_eq!(b[21 + n], m.hash_algo);
        assert_eq!(u64_at(22 + n), m.seed);
        assert_eq!(u64_at(30 + n), m.keys);
        assert_eq!(f64::from_bits(u64_at(38 + n)), m.target_fp);
        assert_eq!(
            (u64_at(46 + n), u64_at(54 + n), u64_at(62 + n)),
            (9, 24, 588)
        );
        assert_eq!(u64_at(70 + n), m.created_unix_s);
        assert_eq!(u64_at(78 + n), m.tag.len() as u64);
        assert_eq!(&b[86 + n..], m.tag.as_slice());
    }

    #[test]
    fn records_round_trip_as_version_4_and_check_their_key() {
        let m = meta();
        let bytes = m.encode().unwrap();
        let f = crate::codec::frame::decode(&bytes).unwrap();
        assert_eq!((f.kind, f.version, f.min_reader), (Kind::SealedMeta, 4, 4));
        assert_eq!(
            SealedMeta::decode(&sealed_key("t.0.ab"), &bytes).unwrap(),
            m
        );
        assert!(SealedMeta::decode(&sealed_key("t.0.ac"), &bytes).is_err());
        let long = SealedMeta {
            tag: vec![0; MAX_SEALED_TAG + 1],
            ..meta()
        };
        let bytes = long.encode().unwrap();
        assert!(SealedMeta::decode(&sealed_key("t.0.ab"), &bytes).is_err());
        let bad = SealedMeta { k: 0, ..meta() };
        let bytes = bad.encode().unwrap();
        assert!(SealedMeta::decode(&sealed_key("t.0.ab"), &bytes).is_err());
    }

    /// A sealed filter hashed with XXH3-64 sectorized (hash id 4) is framed
    /// as version 6, min reader 6; re-framed as version 4 (or 5) it is
    /// refused, naming the hash.
    #[test]
    fn sectorized_records_are_version_6() {
        let m = SealedMeta {
            k: 8,
            hash_algo: HashAlgo::Xxh3_64Sectorized.id(),
            ..meta()
        };
        let bytes = m.encode().unwrap();
        let f = crate::codec::frame::decode(&bytes).unwrap();
        assert_eq!((f.version, f.min_reader), (6, 6));
        let key = sealed_key("t.0.ab");
        assert_eq!(SealedMeta::decode(&key, &bytes).unwrap(), m);
        assert_eq!(m.params().unwrap().hash().algo, HashAlgo::Xxh3_64Sectorized);
        for v in [frame::VERSION_4, frame::VERSION_5] {
            let old = meta::encode_versioned(Kind::SealedMeta, &m, v).unwrap();
            match SealedMeta::decode(&key, &old) {
                Err(StoreError::Corrupt { source, .. }) => assert!(
                    matches!(
                        source,
                        CodecError::InvalidField {
                            field: "hash algorithm",
                            ..
                        }
                    ),
                    "version {v}: {source:?}"
                ),
                other => panic!("version {v}: {other:?}"),
            }
        }
    }
}
