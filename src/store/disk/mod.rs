//! The store's own files (store format 8, `docs/FORMAT.md` §8-§11; the
//! log reader also reads format 3's records, and the page file format 4's
//! superblocks, for a read-only open and the migrations): the catalog file
//! and its log, per table generation a page file and a log, and the packs
//! of sealed filters. The table layer above drives them and owns a table's
//! in-memory state; the one piece of it this layer touches is the bit
//! filter's words, which [`chunks::store_block_words`] derives from counter
//! chunks when a table is opened, folded or rebuilt.
//!
//! ```text
//! <store>/FILTERSTORE                  marker (§8)
//! <store>/LOCK                         held by the process that has the store open
//! <store>/catalog                      the catalog (header, table and sealed-filter records)
//! <store>/catalog.log                  the catalog's changes since the file was written (format 6)
//! <store>/tables/<id>-<gen>.pages      a generation's counters (two slots per chunk)
//! <store>/tables/<id>-<gen>.log        its log of key hashes since the last fold
//! <store>/tables/<id>.pack             the bit filters of a batch of sealed filters (format 6)
//! <store>/guard-logs/<hex name>-<gen>.log  a guard storage's differential file (format 7)
//! <store>/guard/                       sled 0.34.7: only the guard's bases, opened on first use
//!                                      (`store/guard_db.rs`; formats 1 and 2 kept all in sled here)
//! ```

pub(crate) mod catalog_file;
pub(crate) mod catalog_log;
pub(crate) mod chunks;
pub(crate) mod guard_log;
pub(crate) mod io;
pub(crate) mod lock;
pub(crate) mod log;
pub(crate) mod log_read;
pub(crate) mod log_sync;
pub(crate) mod pack;
pub(crate) mod pagefile;
pub(crate) mod superblock;
#[allow(unsafe_code)]
pub(crate) mod sys;

use crate::filter::params::FilterParams;
use crate::store::error::StoreError;
pub(crate) use pack::parse_pack_file;
use pagefile::PageFile;
use std::fs::File;
use std::path::{Path, PathBuf};

/// Why a commit failed: a page file's fold ([`pagefile::Fold::commit`]) or
/// the catalog's replacement ([`catalog_file::write`]).
#[derive(Debug)]
pub(crate) enum CommitError {
    /// Before the commit point: nothing changed, the file in force is
    /// untouched and usable.
    Before(std::io::Error),
    /// At or after the commit point (the superblock's write, the catalog's
    /// rename), before it was known durable: whether the disk holds the
    /// old state or the new one is unknown, so nothing that either names
    /// may be deleted, and nothing more may be written.
    After(std::io::Error),
}

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

/// An I/O error of a table's files while doing `op` (`op` says what was
/// being done; the error does not name the table or its files).
pub(crate) fn io_err(op: &'static str) -> impl Fn(std::io::Error) -> StoreError {
    move |source| StoreError::Io { op, source }
}

/// The error of a page file read.
pub(crate) fn page_err<'a>(
    table: &'a str,
    op: &'static str,
) -> impl Fn(pagefile::PageError) -> StoreError + 'a {
    use pagefile::PageError;
    move |e| match e {
        PageError::Io(source) if source.kind() == std::io::ErrorKind::UnexpectedEof => {
            StoreError::corrupt(
                format!("page file of table {table:?}"),
                crate::error::CodecError::InvalidField {
                    field: "page file",
                    reason: format!("shorter than its table needs ({source})"),
                },
            )
        }
        PageError::Io(source) => StoreError::Io { op, source },
        PageError::Corrupt(what, e) => StoreError::corrupt(format!("{what} of table {table:?}"), e),
    }
}

/// Creates the files of generation `meta` in store `dir` (see
/// `Generation::create`): the log first, then the page file, whose creation
/// syncs the directory with both names.
pub(crate) fn create_files(
    dir: &std::path::Path,
    owner: pagefile::Owner,
    params: FilterParams,
) -> Result<(PageFile, log::LogFile), StoreError> {
    let tables = dir.join(TABLES_DIR);
    if !tables.is_dir() {
        std::fs::create_dir_all(&tables).map_err(io_err("creating the table directory"))?;
        io::sync_dir(dir).map_err(io_err("syncing the database directory"))?;
    }
    let (pages_path, log_path) = table_files(dir, owner.table_id, owner.generation);
    let log_file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&log_path)
        .and_then(|f| io::sync_all(&f).map(|()| f))
        .map_err(io_err("creating a table's log"))?;
    let pages = PageFile::create(&pages_path, params, owner, 0)
        .map_err(io_err("creating a table's page file"))?;
    let binding = log::Binding::Bound {
        table_id: owner.table_id,
        generation: owner.generation,
    };
    Ok((pages, log::LogFile::new(log_file, binding, (0, 0), 0)))
}

/// Deletes the files of generation `generation` of table `id` (a dropped
/// table, a retired generation, an abandoned build); what cannot be deleted
/// now is collected at the next open.
pub(crate) fn remove_files(dir: &std::path::Path, id: u64, generation: u64) {
    let (pages_path, log_path) = table_files(dir, id, generation);
    let _ = std::fs::remove_file(pages_path);
    let _ = std::fs::remove_file(log_path);
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
