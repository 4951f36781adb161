//! A guard storage's differential file (store format 7): append-only logs
//! of checksummed records, one record per group of
//! [`write_diff`](crate::DiffStorage::write_diff) calls (those that queued
//! while the record before was written, and the buffered changes), each
//! made durable by one `fdatasync` before those calls return. The record framing is the
//! catalog log's ([`catalog_log`]): a header naming the
//! log's generation, then records numbered 0, 1, 2, … whose body is a list
//! of puts and removes. Only the magic differs (`FSGL`). The bytes:
//! `docs/FORMAT.md` § 8b.
//!
//! A storage has one log being appended to (the *active* one) and the logs
//! a merge is moving into the base (`guard::diff_log`); each log is a file
//! of its own, `<store>/guard-logs/<name>-<generation>.log` (the storage's
//! name in hexadecimal, the generation in 16 hexadecimal digits), never
//! reused: a new one is created for every generation, and a merged one is
//! deleted.
//!
//! # What a read of a log can say
//! Records are written one at a time, each synced before the next is
//! written (writers that arrive meanwhile are grouped into the next
//! record: `guard::diff_log`); after a failed write or sync the log takes
//! no more. So at most the last record can be unacknowledged, and recovery
//! takes the longest prefix of
//! whole records numbered in order ([`catalog_log::decode_with`]). A whole
//! record found *after* the prefix with a number at or past the prefix's
//! next one cannot come from a torn tail: it says an acknowledged record
//! before it was damaged, and the log is refused ([`ReadError::Damaged`])
//! rather than read short. A file whose header is not whole is a creation
//! a cut interrupted before its sync returned (nothing was ever appended to
//! it) only if it is no longer than a header; a longer one is damage too.

use super::catalog_log::{self, decode_with, header_with, seal_record, Replay, HEADER};
use super::io::{self, le_u32, le_u64, sync_dir, write_all_at};
use super::CommitError;
use std::fs::File;
use std::path::{Path, PathBuf};

/// The first bytes of a guard log.
const MAGIC: [u8; 4] = *b"FSGL";
/// The directory of guard logs in a store directory.
pub(crate) const GUARD_LOG_DIR: &str = "guard-logs";
/// The largest record body a log reads (a larger length is damage, refused
/// before anything is allocated for it). A `write_diff` whose record would
/// be larger is refused before anything is written.
pub(crate) const MAX_RECORD: usize = 64 << 20;

/// The file of generation `generation` of the storage whose names start
/// with `stem` (a hex encoding of the storage's name) in `dir`.
pub(crate) fn log_path(dir: &Path, stem: &str, generation: u64) -> PathBuf {
    dir.join(format!("{stem}-{generation:016x}.log"))
}

/// The generations of the logs of `stem` in `dir`, oldest first (none if
/// the directory is missing).
pub(crate) fn generations(dir: &Path, stem: &str) -> std::io::Result<Vec<u64>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut found = Vec::new();
    for e in entries {
        let name = e?.file_name();
        let Some(name) = name.to_str() else { continue };
        let parsed = name
            .strip_suffix(".log")
            .and_then(|n| n.strip_prefix(stem))
            .and_then(|n| n.strip_prefix('-'))
            .filter(|g| g.len() == 16)
            .and_then(|g| u64::from_str_radix(g, 16).ok());
        if let Some(generation) = parsed {
            found.push(generation);
        }
    }
    found.sort_unstable();
    Ok(found)
}

/// Why a log could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The file could not be read.
    Io(std::io::Error),
    /// The log holds bytes recovery cannot take as a torn tail: a damaged
    /// header, or a whole record after the readable prefix.
    Damaged(String),
}

/// Reads generation `generation` of `stem`: its records (the longest
/// prefix), or why it cannot be trusted. A file that is only an unfinished
/// creation reads as no records, with `valid` false.
pub(crate) fn read(dir: &Path, stem: &str, generation: u64) -> Result<Replay, ReadError> {
    let path = log_path(dir, stem, generation);
    let bytes = std::fs::read(&path).map_err(ReadError::Io)?;
    let replay = decode_with(MAGIC, &bytes, generation);
    if !replay.valid {
        if bytes.len() <= HEADER {
            return Ok(replay);
        }
        return Err(ReadError::Damaged(format!(
            "{}: the header of a {}-byte guard log is damaged",
            path.display(),
            bytes.len()
        )));
    }
    if let Some(at) = record_past(&bytes, replay.end as usize, replay.next_seq) {
        return Err(ReadError::Damaged(format!(
            "{}: a whole record at byte {at} follows a damaged one at byte {} \
             (acknowledged changes would be lost if it were read short)",
            path.display(),
            replay.end
        )));
    }
    Ok(replay)
}

/// Where, after byte `from`, a whole record numbered `next_seq` or later
/// starts, if one does. Only offsets whose sequence field is in range have
/// their checksum computed, so random bytes cost a comparison each.
fn record_past(bytes: &[u8], from: usize, next_seq: u64) -> Option<usize> {
    let head = catalog_log::RECORD_HEAD;
    let limit = next_seq.saturating_add(1 << 32);
    (from + 1..bytes.len().saturating_sub(head - 1)).find(|&at| {
        let seq = le_u64(bytes, at + 8);
        if seq < next_seq || seq > limit {
            return false;
        }
        let len = le_u32(bytes, at) as usize;
        len <= MAX_RECORD
            && bytes
                .get(at + 8..at + head + len)
                .is_some_and(|covered| crc32fast::hash(covered) == le_u32(bytes, at + 4))
    })
}

/// A log open for appends.
#[derive(Debug)]
pub(crate) struct GuardLog {
    file: File,
    generation: u64,
    end: u64,
    next_seq: u64,
    /// A write or sync failed: no more appends (see the module docs).
    failed: bool,
    /// `fdatasync`s of records.
    syncs: u64,
}

impl GuardLog {
    /// Creates the empty log of generation `generation` of `stem` in `dir`:
    /// its header written and synced, then the directory synced. Fails if
    /// the file exists (a generation is never reused).
    pub(crate) fn create(dir: &Path, stem: &str, generation: u64) -> std::io::Result<GuardLog> {
        let path = log_path(dir, stem, generation);
        let file = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        let made = (|| {
            write_all_at(&file, &header_with(MAGIC, generation), 0)?;
            io::sync_all(&file)?;
            sync_dir(dir)
        })();
        if let Err(e) = made {
            // Not named anywhere yet: a later open reads it as an
            // unfinished creation, or finds it gone.
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
        Ok(GuardLog {
            file,
            generation,
            end: HEADER as u64,
            next_seq: 0,
            failed: false,
            syncs: 0,
        })
    }

    /// The log's generation.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Bytes of the log, header included.
    pub(crate) fn len(&self) -> u64 {
        self.end
    }

    /// Bytes the record of `ops` takes.
    pub(crate) fn record_len<'a, I>(ops: I) -> usize
    where
        I: Iterator<Item = (bool, &'a [u8], &'a [u8])>,
    {
        catalog_log::RECORD_HEAD + 4 + ops.map(|(_, k, v)| 7 + k.len() + v.len()).sum::<usize>()
    }

    /// Refuses, once an earlier write or sync failed (the log takes no
    /// more changes).
    pub(crate) fn refuse_if_failed(&self) -> std::io::Result<()> {
        if self.failed {
            return Err(std::io::Error::other(
                "an earlier write or sync of this guard log failed: it takes no more \
                 changes until the storage is opened again",
            ));
        }
        Ok(())
    }

    /// `fdatasync`s of records so far.
    #[cfg(test)]
    pub(crate) fn syncs(&self) -> u64 {
        self.syncs
    }

    /// Appends the record of the ops `(put, key, value)` (a remove's value
    /// empty) and syncs it ([`commit`](GuardLog::commit)); returns the
    /// record's bytes.
    #[cfg(test)]
    pub(crate) fn append<'a, I>(&mut self, ops: I) -> Result<Vec<u8>, CommitError>
    where
        I: ExactSizeIterator<Item = (bool, &'a [u8], &'a [u8])> + Clone,
    {
        let mut record = Vec::new();
        catalog_log::encode_record_into(&mut record, self.next_seq, ops);
        let count = u32::from_le_bytes([record[16], record[17], record[18], record[19]]);
        self.commit(&mut record, count)?;
        Ok(record)
    }

    /// Appends `record` (room for a record's head and op count, then
    /// `count` ops: `catalog_log::encode_ops_into`), made whole with the
    /// log's next sequence number, and syncs it: the commit point. A failed
    /// write is [`CommitError::Before`] (recovery stops before the record);
    /// a failed sync is [`CommitError::After`] (the record may or may not
    /// be durable). After either, every later append fails at once.
    pub(crate) fn commit(&mut self, record: &mut [u8], count: u32) -> Result<(), CommitError> {
        self.refuse_if_failed().map_err(CommitError::Before)?;
        seal_record(record, self.next_seq, count);
        if let Err(e) = write_all_at(&self.file, record, self.end) {
            self.failed = true;
            return Err(CommitError::Before(e));
        }
        self.syncs += 1;
        if let Err(e) = io::sync_data(&self.file) {
            self.failed = true;
            return Err(CommitError::After(e));
        }
        self.end += record.len() as u64;
        self.next_seq += 1;
        Ok(())
    }
}

/// Deletes generation `generation` of `stem` (merged into the base), and
/// syncs the directory so that the deletion is durable before the next
/// log's is begun: logs are deleted oldest first, and a newer log must
/// never be gone while an older one of the same keys is still there.
pub(crate) fn remove(dir: &Path, stem: &str, generation: u64) -> std::io::Result<()> {
    match std::fs::remove_file(log_path(dir, stem, generation)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::disk::catalog_log::Op;

    fn ops(i: u8) -> Vec<Op> {
        vec![Op::Put(vec![1, i], vec![i; 30]), Op::Remove(vec![2, i])]
    }

    fn slices(ops: &[Op]) -> impl ExactSizeIterator<Item = (bool, &[u8], &[u8])> + Clone {
        ops.iter().map(|op| match op {
            Op::Put(k, v) => (true, k.as_slice(), v.as_slice()),
            Op::Remove(k) => (false, k.as_slice(), &[][..]),
        })
    }

    #[test]
    fn appends_read_back_and_every_cut_reads_a_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = GuardLog::create(dir.path(), "ab", 3).unwrap();
        let mut ends = vec![log.len()];
        for i in 0..4 {
            log.append(slices(&ops(i))).unwrap();
            assert_eq!(
                log.len() - ends[ends.len() - 1],
                GuardLog::record_len(slices(&ops(i))) as u64
            );
            ends.push(log.len());
        }
        assert!(
            GuardLog::create(dir.path(), "ab", 3).is_err(),
            "never reused"
        );
        assert_eq!(generations(dir.path(), "ab").unwrap(), vec![3]);
        assert!(generations(dir.path(), "a").unwrap().is_empty());
        let path = log_path(dir.path(), "ab", 3);
        let bytes = std::fs::read(&path).unwrap();
        for len in 0..=bytes.len() {
            std::fs::write(&path, &bytes[..len]).unwrap();
            match read(dir.path(), "ab", 3) {
                Ok(r) => {
                    let whole = ends.iter().filter(|&&e| e <= len as u64).count();
                    assert_eq!(r.records.len(), whole.saturating_sub(1), "{len}");
                    assert_eq!(
                        r.records,
                        (0..r.records.len() as u8).map(ops).collect::<Vec<_>>()
                    );
                }
                Err(e) => panic!("a cut at {len} is a torn tail, not damage: {e:?}"),
            }
        }
    }

    #[test]
    fn a_damaged_record_before_a_whole_one_is_refused_not_read_short() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = GuardLog::create(dir.path(), "ab", 0).unwrap();
        let first_end = {
            log.append(slices(&ops(0))).unwrap();
            log.len()
        };
        log.append(slices(&ops(1))).unwrap();
        log.append(slices(&ops(2))).unwrap();
        let path = log_path(dir.path(), "ab", 0);
        let bytes = std::fs::read(&path).unwrap();
        // Every byte of the second record flipped: the third is still
        // whole, so the log is damage, never a two-record-short read.
        for at in first_end as usize..(first_end as usize + GuardLog::record_len(slices(&ops(1)))) {
            let mut b = bytes.clone();
            b[at] ^= 0x40;
            std::fs::write(&path, &b).unwrap();
            assert!(
                matches!(read(dir.path(), "ab", 0), Err(ReadError::Damaged(_))),
                "{at}"
            );
        }
        // A damaged header on a log with records is damage; a bare header
        // cut short is an unfinished creation.
        let mut b = bytes.clone();
        b[0] ^= 1;
        std::fs::write(&path, &b).unwrap();
        assert!(matches!(
            read(dir.path(), "ab", 0),
            Err(ReadError::Damaged(_))
        ));
        std::fs::write(&path, &bytes[..HEADER - 3]).unwrap();
        assert!(read(dir.path(), "ab", 0).unwrap().records.is_empty());
        remove(dir.path(), "ab", 0).unwrap();
        remove(dir.path(), "ab", 0).unwrap();
        assert!(generations(dir.path(), "ab").unwrap().is_empty());
    }
}
