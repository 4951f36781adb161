//! The store's own files (store format 3, `docs/FORMAT.md` §8, §10): the
//! catalog file, and per table generation a page file and a log. Nothing
//! here knows a table's in-memory state; the table layer above drives it.
//!
//! ```text
//! <store>/FILTERSTORE                  marker (§8)
//! <store>/LOCK                         held by the process that has the store open
//! <store>/catalog                      the catalog (header and table records)
//! <store>/tables/<id>-<gen>.pages      a generation's counters (two slots per chunk)
//! <store>/tables/<id>-<gen>.log        its log of key hashes since the last fold
//! <store>/db, conf, blobs/ ...         sled: only the guard's storage, opened on use
//! ```

pub(crate) mod catalog_file;
pub(crate) mod chunks;
pub(crate) mod io;
pub(crate) mod lock;
pub(crate) mod log;
pub(crate) mod pagefile;

use std::path::{Path, PathBuf};

/// The directory of the table files in a store directory.
pub(crate) const TABLES_DIR: &str = "tables";

/// The page file and the log of generation `generation` of table `id`.
pub(crate) fn table_files(dir: &Path, id: u64, generation: u64) -> (PathBuf, PathBuf) {
    let base = dir
        .join(TABLES_DIR)
        .join(format!("{id:016x}-{generation:016x}"));
    (base.with_extension("pages"), base.with_extension("log"))
}

/// The table id and generation a file in [`TABLES_DIR`] belongs to, if its
/// name is one the store makes.
pub(crate) fn parse_table_file(name: &str) -> Option<(u64, u64)> {
    let stem = name
        .strip_suffix(".pages")
        .or_else(|| name.strip_suffix(".log"))?;
    let (id, generation) = stem.split_once('-')?;
    if id.len() != 16 || generation.len() != 16 {
        return None;
    }
    Some((
        u64::from_str_radix(id, 16).ok()?,
        u64::from_str_radix(generation, 16).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_file_names_round_trip() {
        let (p, l) = table_files(Path::new("/s"), 3, 0x1f);
        for f in [&p, &l] {
            let name = f.file_name().unwrap().to_str().unwrap();
            assert_eq!(parse_table_file(name), Some((3, 0x1f)), "{name}");
        }
        assert_eq!(
            parse_table_file("0000000000000003-000000000000001f.new"),
            None
        );
        assert_eq!(parse_table_file("3-1f.pages"), None);
    }
}
