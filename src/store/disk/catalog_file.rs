//! The catalog file: the store header and one record per table and per
//! sealed filter, as (key, value) pairs like those the catalog tree of store
//! formats 1 and 2 held, in one file that is replaced whole at a checkpoint
//! (on every change before format 6; since, a change is a record of the
//! catalog log, `catalog_log`).
//!
//! A rewrite writes the new catalog to `catalog.new`, syncs it, renames it
//! over `catalog` and syncs the directory: a cut leaves either the old file
//! or the new one, each synced before its name could point at it (the
//! rename is the commit point; a failure of the directory sync after it
//! leaves unknown which one a cut would leave, [`CommitError::After`]).
//! The bytes: `docs/FORMAT.md` §8.

use super::io::{le_u32, sync_dir};
use super::CommitError;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

/// The catalog file's name in a store directory.
pub(crate) const CATALOG_FILE: &str = "catalog";
/// The name a new catalog is written under before it is renamed.
pub(crate) const NEW_FILE: &str = "catalog.new";
/// The first bytes of the file.
pub(crate) const MAGIC: [u8; 4] = *b"FSCF";
/// The container's own version.
const CONTAINER_VERSION: u16 = 1;
/// Bytes before the first entry.
const HEAD: usize = 12;
/// Bytes before an entry's key.
const ENTRY_HEAD: usize = 10;

/// Why a catalog file could not be read as a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadFile(pub String);

/// The entries of a catalog file, in file order.
pub(crate) type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Encodes `entries` as a catalog file.
pub(crate) fn encode(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(
        HEAD + entries
            .iter()
            .map(|(k, v)| ENTRY_HEAD + k.len() + v.len())
            .sum::<usize>(),
    );
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&CONTAINER_VERSION.to_le_bytes());
    out.extend_from_slice(&[0u8; 2]);
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for (k, v) in entries {
        out.extend_from_slice(&(k.len() as u16).to_le_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(k).to_le_bytes());
        out.extend_from_slice(k);
        out.extend_from_slice(v);
    }
    out
}

/// The length of the catalog file of `entries`.
pub(crate) fn encoded_len(entries: &[(Vec<u8>, Vec<u8>)]) -> u64 {
    (HEAD
        + entries
            .iter()
            .map(|(k, v)| ENTRY_HEAD + k.len() + v.len())
            .sum::<usize>()) as u64
}

/// Decodes a catalog file. The values are returned as they are (each is a
/// frame with its own checksum, checked by the caller); a key whose checksum
/// fails makes the whole file unreadable, since its record cannot be named.
pub(crate) fn decode(bytes: &[u8]) -> Result<Entries, BadFile> {
    let bad = |why: String| BadFile(why);
    if bytes.len() < HEAD || bytes[..4] != MAGIC {
        return Err(bad("not a catalog file (no FSCF header)".into()));
    }
    let version = u16::from_le_bytes([bytes[4], bytes[5]]);
    if version != CONTAINER_VERSION || bytes[6..8] != [0, 0] {
        return Err(bad(format!("catalog container version {version}")));
    }
    let count = le_u32(bytes, 8) as usize;
    let mut at = HEAD;
    // Every entry takes at least ENTRY_HEAD bytes: a count the file cannot
    // hold is refused before anything is allocated for it.
    if count > (bytes.len() - HEAD) / ENTRY_HEAD {
        return Err(bad(format!("{count} entries in {} bytes", bytes.len())));
    }
    let mut entries = Vec::with_capacity(count);
    for index in 0..count {
        let head = bytes
            .get(at..at + ENTRY_HEAD)
            .ok_or_else(|| bad(format!("entry {index} is cut short")))?;
        let klen = u16::from_le_bytes([head[0], head[1]]) as usize;
        let vlen = le_u32(head, 2) as usize;
        let crc = le_u32(head, 6);
        let start = at + ENTRY_HEAD;
        let key = bytes
            .get(start..start + klen)
            .ok_or_else(|| bad(format!("entry {index} is cut short")))?;
        let value = bytes
            .get(start + klen..start + klen + vlen)
            .ok_or_else(|| bad(format!("entry {index} is cut short")))?;
        if crc32fast::hash(key) != crc {
            return Err(bad(format!("the key of entry {index} fails its checksum")));
        }
        entries.push((key.to_vec(), value.to_vec()));
        at = start + klen + vlen;
    }
    if at != bytes.len() {
        return Err(bad(format!(
            "{} bytes after the last entry",
            bytes.len() - at
        )));
    }
    Ok(entries)
}

/// Reads the catalog file of the store in `dir`; `None` if there is none.
pub(crate) fn read(dir: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs::read(dir.join(CATALOG_FILE)) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Replaces the catalog file of the store in `dir` with `entries`, durably
/// (module docs). An error before the rename returned is
/// [`CommitError::Before`]: the old file is in force (a failed rename
/// renamed nothing). The directory sync after it is the one step whose
/// failure is [`CommitError::After`]: the new name is in the running
/// system's directory, but whether it survives a power cut is unknown (the
/// sync that failed may have dropped it), so the caller may not act as if
/// either file were the one in force.
pub(crate) fn write(dir: &Path, entries: &[(Vec<u8>, Vec<u8>)]) -> Result<(), CommitError> {
    let new = dir.join(NEW_FILE);
    let written = (|| {
        let mut f = File::create(&new)?;
        super::io::fault::check(super::io::fault::Op::Write, None)?;
        f.write_all(&encode(entries))?;
        super::io::sync_all(&f)?;
        drop(f);
        super::io::rename(&new, &dir.join(CATALOG_FILE))
    })();
    written.map_err(CommitError::Before)?;
    sync_dir(dir).map_err(CommitError::After)
}

/// Removes a `catalog.new` left by a cut before its rename (writing opens
/// only).
pub(crate) fn remove_leftover(dir: &Path) -> io::Result<()> {
    match fs::remove_file(dir.join(NEW_FILE)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries() -> Entries {
        vec![
            (b"\x00header".to_vec(), b"h".repeat(40)),
            (b"\x01orders".to_vec(), b"v".repeat(100)),
        ]
    }

    #[test]
    fn round_trip_and_every_truncation_refused() {
        let bytes = encode(&entries());
        assert_eq!(decode(&bytes).unwrap(), entries());
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_err(), "{len}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
    }

    #[test]
    fn a_bad_key_fails_the_file_a_bad_value_is_returned() {
        let bytes = encode(&entries());
        let mut key = bytes.clone();
        key[HEAD + ENTRY_HEAD] ^= 1;
        assert!(decode(&key).is_err());
        let mut value = bytes.clone();
        let last = value.len() - 1;
        value[last] ^= 1;
        let got = decode(&value).unwrap();
        assert_ne!(got[1].1, entries()[1].1);
        // A hostile count is refused before anything is allocated.
        let mut count = bytes;
        count[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&count).is_err());
    }

    #[test]
    fn written_files_replace_the_old_one_whole() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        write(dir.path(), &entries()).unwrap();
        write(dir.path(), &entries()[..1]).unwrap();
        let back = decode(&read(dir.path()).unwrap().unwrap()).unwrap();
        assert_eq!(back, entries()[..1]);
        assert!(!dir.path().join(NEW_FILE).exists());
    }
}
