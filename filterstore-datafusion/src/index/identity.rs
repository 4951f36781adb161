//! What a data file is, to the index: its path and the version the object
//! store reports (size, ETag, version, modification time), kept in the tag
//! of each of its filters, and the names those filters have in the store.
//!
//! A filter answers only for the version it was built from: a file whose
//! listing differs from the tag in anything (a rewrite in place changes its
//! modification time, and usually its size and ETag) is scanned until it
//! is indexed again. The identity is taken from the listing *before* the
//! file is read, so a rewrite during its indexing leaves a tag older than
//! the file, which the next listing tells apart.

use datafusion::object_store::ObjectMeta;
use xxhash_rust::xxh3::{xxh3_128, xxh3_64};

/// The tag's first byte: the encoding's version.
const TAG_VERSION: u8 = 1;
/// The longest path indexed (a longer one is scanned, never skipped).
pub(crate) const MAX_PATH: usize = 2048;

/// A data file's identity as a listing reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FileIdentity {
    pub(crate) path: String,
    pub(crate) size: u64,
    pub(crate) modified_ns: i64,
    pub(crate) e_tag: Option<String>,
    pub(crate) version: Option<String>,
}

impl FileIdentity {
    pub(crate) fn of(meta: &ObjectMeta) -> FileIdentity {
        FileIdentity {
            path: meta.location.to_string(),
            size: meta.size,
            modified_ns: meta
                .last_modified
                .timestamp_nanos_opt()
                .unwrap_or(meta.last_modified.timestamp_micros().saturating_mul(1000)),
            e_tag: meta.e_tag.clone(),
            version: meta.version.clone(),
        }
    }

    /// The tag of this file's filter of column `column`: version, size,
    /// modification time, then ETag, version, path and column, each as a
    /// `u16` length and its bytes (`None` if a part is too long to keep).
    pub(crate) fn tag(&self, column: &str) -> Option<Vec<u8>> {
        if self.path.len() > MAX_PATH {
            return None;
        }
        let mut t = vec![TAG_VERSION];
        t.extend_from_slice(&self.size.to_le_bytes());
        t.extend_from_slice(&self.modified_ns.to_le_bytes());
        for part in [
            self.e_tag.as_deref().map(str::as_bytes),
            self.version.as_deref().map(str::as_bytes),
        ] {
            match part {
                None => t.extend_from_slice(&u16::MAX.to_le_bytes()),
                Some(p) => push(&mut t, p)?,
            }
        }
        push(&mut t, self.path.as_bytes())?;
        push(&mut t, column.as_bytes())?;
        (t.len() <= filterstore::MAX_SEALED_TAG).then_some(t)
    }

    /// The identity and column a tag holds; `None` if it is not one of ours.
    pub(crate) fn from_tag(tag: &[u8]) -> Option<(FileIdentity, String)> {
        let (&version, mut rest) = tag.split_first()?;
        if version != TAG_VERSION {
            return None;
        }
        let size = u64::from_le_bytes(take(&mut rest, 8)?.try_into().ok()?);
        let modified_ns = i64::from_le_bytes(take(&mut rest, 8)?.try_into().ok()?);
        let e_tag = optional(&mut rest)?;
        let version = optional(&mut rest)?;
        let path = String::from_utf8(string(&mut rest)?).ok()?;
        let column = String::from_utf8(string(&mut rest)?).ok()?;
        rest.is_empty().then_some((
            FileIdentity {
                path,
                size,
                modified_ns,
                e_tag,
                version,
            },
            column,
        ))
    }
}

fn push(t: &mut Vec<u8>, part: &[u8]) -> Option<()> {
    let len = u16::try_from(part.len()).ok().filter(|&l| l < u16::MAX)?;
    t.extend_from_slice(&len.to_le_bytes());
    t.extend_from_slice(part);
    Some(())
}

fn take<'a>(rest: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    let (head, tail) = (rest.get(..n)?, rest.get(n..)?);
    *rest = tail;
    Some(head)
}

fn string(rest: &mut &[u8]) -> Option<Vec<u8>> {
    let len = u16::from_le_bytes(take(rest, 2)?.try_into().ok()?);
    Some(take(rest, len as usize)?.to_vec())
}

fn optional(rest: &mut &[u8]) -> Option<Option<String>> {
    let len = u16::from_le_bytes(rest.get(..2)?.try_into().ok()?);
    if len == u16::MAX {
        *rest = &rest[2..];
        return Some(None);
    }
    Some(Some(String::from_utf8(string(rest)?).ok()?))
}

/// The prefix of the names of every filter of the index of the table at
/// `location` (so that several tables share a store): `ix-` and 16 hex
/// digits of the location's hash, then a dot.
pub(crate) fn index_prefix(location: &str) -> String {
    format!("ix-{:016x}.", xxh3_64(location.as_bytes()))
}

/// The name of the filter of column `column` of file `path`: the index's
/// prefix, 8 hex digits of the column name's hash, a dot, 32 of the path's.
/// Two paths (or columns) whose hashes meet would share a name: the tag
/// (which holds both) tells them apart, and the file is then scanned.
pub(crate) fn filter_name(prefix: &str, column: &str, path: &str) -> String {
    format!(
        "{prefix}{:08x}.{:032x}",
        xxh3_64(column.as_bytes()) as u32,
        xxh3_128(path.as_bytes())
    )
}

/// The hash seed of the index at `location`: fixed by the location, so that
/// every session computes the same key hashes (a key is hashed once per
/// lookup and probed against every file's filter).
pub(crate) fn index_seed(location: &str) -> u64 {
    xxh3_64(format!("filterstore index seed {location}").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(e_tag: Option<&str>) -> FileIdentity {
        FileIdentity {
            path: "data/part-1.parquet".into(),
            size: 1234,
            modified_ns: -5,
            e_tag: e_tag.map(String::from),
            version: None,
        }
    }

    #[test]
    fn tags_round_trip_and_refuse_what_is_not_one() {
        for e in [None, Some(""), Some("abc-1")] {
            let tag = id(e).tag("k").unwrap();
            assert_eq!(FileIdentity::from_tag(&tag), Some((id(e), "k".into())));
            for len in 0..tag.len() {
                assert_eq!(FileIdentity::from_tag(&tag[..len]), None, "{len}");
            }
            let mut longer = tag.clone();
            longer.push(0);
            assert_eq!(FileIdentity::from_tag(&longer), None);
        }
        let long = FileIdentity {
            path: "p".repeat(MAX_PATH + 1),
            ..id(None)
        };
        assert_eq!(long.tag("k"), None);
    }

    #[test]
    fn names_are_valid_store_names_and_tell_columns_and_paths_apart() {
        let p = index_prefix("file:///data/t/");
        let a = filter_name(&p, "id", "a.parquet");
        assert!(a.len() <= 128 && a.starts_with("ix-"));
        assert!(a
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-'));
        assert_ne!(a, filter_name(&p, "name", "a.parquet"));
        assert_ne!(a, filter_name(&p, "id", "b.parquet"));
        assert_ne!(p, index_prefix("file:///data/u/"));
    }
}
