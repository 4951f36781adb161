//! Pack files (store format 6, `docs/FORMAT.md` § 9a): the bytes of a
//! batch of sealed filters, written once, synced, and never changed. Each
//! filter is a bit-filter file of § 7, back to back after the pack's
//! header; the catalog record of each names its pack, offset and length.
//! A pack is deleted when no record names it any more.

use super::io::{self, le_u32, le_u64, read_exact_at, sync_dir, write_all_at};
use super::TABLES_DIR;
use std::fs::File;
use std::path::{Path, PathBuf};

/// The first bytes of a pack.
const MAGIC: [u8; 4] = *b"FSPK";
/// The pack's own container version.
const VERSION: u16 = 1;
/// Bytes of the header: magic, version, reserved, pack id, filter count,
/// CRC32 of the 20 bytes before it.
pub(crate) const HEADER: u64 = 24;

/// The path of pack `id` in store `dir`.
pub(crate) fn pack_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(TABLES_DIR).join(format!("{id:016x}.pack"))
}

/// The pack id of a file in [`TABLES_DIR`], if its name is one the store
/// gives packs.
pub(crate) fn parse_pack_file(name: &str) -> Option<u64> {
    let id = name.strip_suffix(".pack")?;
    (id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| u64::from_str_radix(id, 16).ok())
        .flatten()
}

fn header(id: u64, count: u32) -> [u8; HEADER as usize] {
    let mut h = [0u8; HEADER as usize];
    h[..4].copy_from_slice(&MAGIC);
    h[4..6].copy_from_slice(&VERSION.to_le_bytes());
    h[8..16].copy_from_slice(&id.to_le_bytes());
    h[16..20].copy_from_slice(&count.to_le_bytes());
    let crc = crc32fast::hash(&h[..20]);
    h[20..24].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Writes pack `id` holding `filters` (each a § 7 bit-filter file) in
/// store `dir`, syncs it and the directory that names it; returns each
/// filter's offset. On an error the file is removed (best effort; the next
/// writing open collects what is left, since no record names it).
pub(crate) fn write(dir: &Path, id: u64, filters: &[Vec<u8>]) -> std::io::Result<Vec<u64>> {
    let path = pack_path(dir, id);
    // Only a file this call made is removed on an error.
    let file = File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    let written = (|| {
        let count = u32::try_from(filters.len())
            .map_err(|_| std::io::Error::other("more than 2^32 filters in one pack"))?;
        let mut body = Vec::with_capacity(filters.iter().map(Vec::len).sum::<usize>() + 24);
        body.extend_from_slice(&header(id, count));
        let mut offsets = Vec::with_capacity(filters.len());
        for f in filters {
            offsets.push(body.len() as u64);
            body.extend_from_slice(f);
        }
        write_all_at(&file, &body, 0)?;
        io::sync_all(&file)?;
        sync_dir(&dir.join(TABLES_DIR))?;
        Ok(offsets)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&path);
    }
    written
}

/// An open pack, its header checked.
pub(crate) struct Pack {
    file: File,
    len: u64,
}

impl Pack {
    /// Opens pack `id` of store `dir` and checks its header; a header that
    /// is not pack `id`'s is `InvalidData`.
    pub(crate) fn open(dir: &Path, id: u64) -> std::io::Result<Pack> {
        let file = File::open(pack_path(dir, id))?;
        let len = file.metadata()?.len();
        let mut h = [0u8; HEADER as usize];
        read_exact_at(&file, &mut h, 0)?;
        let valid = h[..4] == MAGIC
            && u16::from_le_bytes([h[4], h[5]]) == VERSION
            && h[6..8] == [0, 0]
            && le_u64(&h, 8) == id
            && crc32fast::hash(&h[..20]) == le_u32(&h, 20);
        if !valid {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("pack {id:016x}: not a valid pack header"),
            ));
        }
        Ok(Pack { file, len })
    }

    /// The `len` bytes at `offset`, which must lie past the header and
    /// inside the file (checked before anything is allocated).
    pub(crate) fn read(&self, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
        let end = offset.checked_add(len);
        if offset < HEADER || end.is_none_or(|e| e > self.len) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "bytes {offset}..+{len} are not inside the pack's {} bytes",
                    self.len
                ),
            ));
        }
        let mut buf = vec![0u8; len as usize];
        read_exact_at(&self.file, &mut buf, offset)?;
        Ok(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_round_trip_and_refuse_what_is_not_theirs() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(TABLES_DIR)).unwrap();
        let filters = vec![vec![1u8; 10], vec![2u8; 30]];
        let offsets = write(dir.path(), 7, &filters).unwrap();
        assert_eq!(offsets, vec![24, 34]);
        let pack = Pack::open(dir.path(), 7).unwrap();
        assert_eq!(pack.read(34, 30).unwrap(), filters[1]);
        assert!(pack.read(34, 31).is_err());
        assert!(pack.read(0, 4).is_err());
        assert!(pack.read(u64::MAX, 2).is_err());
        // A second pack of the same id is refused, the first kept.
        assert!(write(dir.path(), 7, &filters).is_err());
        assert!(Pack::open(dir.path(), 7).is_ok());
        // Another id's name: its header does not match.
        std::fs::copy(pack_path(dir.path(), 7), pack_path(dir.path(), 8)).unwrap();
        assert!(Pack::open(dir.path(), 8).is_err());
        let name = pack_path(dir.path(), 0xab).file_name().unwrap().to_owned();
        assert_eq!(parse_pack_file(name.to_str().unwrap()), Some(0xab));
        assert_eq!(parse_pack_file("ab.pack"), None);
    }
}
