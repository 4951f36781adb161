//! The catalog log (store format 6): the catalog's changes since its file
//! was last written, one record per commit, appended and `fdatasync`ed.
//!
//! Before format 6 every change rewrote the whole catalog file (write, sync,
//! rename, directory sync): with `n` tables a change cost O(n) bytes and
//! two syncs, and `n` creates O(n²) bytes. Now a change costs one append of
//! its own entries and one `fdatasync`; the catalog file is rewritten (a
//! *checkpoint*) only when the log has grown past the file's own size, so
//! the bytes written stay linear in the changes. The file names the log it
//! continues by the log's id; a log of another id is one whose records the
//! file already holds (a checkpoint replaced it) and is ignored.
//!
//! Recovery reads the longest prefix of whole records with consecutive
//! sequence numbers. Commits are serialised under the catalog lock and
//! each returns only after its record's `fdatasync`; a failed sync stops the
//! store's writes. So only the last record can be unsynced, and a torn or
//! missing last record is a commit that never returned "done". The bytes:
//! `docs/FORMAT.md` § 8.

use super::io::{self, le_u32, le_u64, sync_dir, write_all_at};
use super::CommitError;
use std::fs::{self, File};
use std::path::Path;

/// The log's name in a store directory.
pub(crate) const LOG_FILE: &str = "catalog.log";
/// The name a new log is written under before it is renamed.
pub(crate) const NEW_LOG_FILE: &str = "catalog.log.new";
/// The first bytes of the file.
const MAGIC: [u8; 4] = *b"FSCL";
/// The log's own container version.
const VERSION: u16 = 1;
/// Bytes of the file header: magic, version, reserved, log id, reserved,
/// CRC32 of the 20 bytes before it.
pub(crate) const HEADER: usize = 24;
/// Bytes before a record's body: body length, CRC32, sequence number.
pub(crate) const RECORD_HEAD: usize = 16;
/// Op tags inside a record's body.
const PUT: u8 = 1;
const REMOVE: u8 = 2;

/// One change of a catalog entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// Sets `key` to `value` (a new entry, or a replacement).
    Put(Vec<u8>, Vec<u8>),
    /// Removes `key`.
    Remove(Vec<u8>),
}

/// What a log holds, as read.
#[derive(Debug, Default)]
pub(crate) struct Replay {
    /// The ops of each whole record, in order.
    pub(crate) records: Vec<Vec<Op>>,
    /// Where the valid prefix ends (the next record goes there).
    pub(crate) end: u64,
    /// The sequence number of the next record.
    pub(crate) next_seq: u64,
    /// The file's length (more than `end`: a torn tail).
    pub(crate) file_len: u64,
    /// Whether the file is there with a valid header naming the log id
    /// asked for.
    pub(crate) valid: bool,
}

/// The header of log `id`.
fn header(id: u64) -> [u8; HEADER] {
    header_with(MAGIC, id)
}

/// The header of log `id` of the kind whose files start with `magic` (the
/// catalog's log, or a guard's differential file: `guard_log`).
pub(crate) fn header_with(magic: [u8; 4], id: u64) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..4].copy_from_slice(&magic);
    h[4..6].copy_from_slice(&VERSION.to_le_bytes());
    h[8..16].copy_from_slice(&id.to_le_bytes());
    let crc = crc32fast::hash(&h[..20]);
    h[20..24].copy_from_slice(&crc.to_le_bytes());
    h
}

/// The log id its header names, `None` if the header is not a valid one
/// (the log is then one that a cut interrupted before its rename made it
/// this name's: see [`CatalogLog::create`]).
fn parse_header(magic: [u8; 4], bytes: &[u8]) -> Option<u64> {
    let h = bytes.get(..HEADER)?;
    let valid = h[..4] == magic
        && u16::from_le_bytes([h[4], h[5]]) == VERSION
        && h[6..8] == [0, 0]
        && h[16..20] == [0; 4]
        && crc32fast::hash(&h[..20]) == le_u32(h, 20);
    valid.then(|| le_u64(h, 8))
}

/// Encodes the record of `ops` with sequence number `seq`.
pub(crate) fn encode_record(seq: u64, ops: &[Op]) -> Vec<u8> {
    encode_record_from(
        seq,
        ops.iter().map(|op| match op {
            Op::Put(k, v) => (true, k.as_slice(), v.as_slice()),
            Op::Remove(k) => (false, k.as_slice(), &[][..]),
        }),
    )
}

/// Encodes the record of the ops `(put, key, value)` (a remove's value is
/// empty) with sequence number `seq`, copying each key and value once.
pub(crate) fn encode_record_from<'a, I>(seq: u64, ops: I) -> Vec<u8>
where
    I: ExactSizeIterator<Item = (bool, &'a [u8], &'a [u8])> + Clone,
{
    let mut out = Vec::new();
    encode_record_into(&mut out, seq, ops);
    out
}

/// [`encode_record_from`] into `out` (emptied first; its allocation is
/// reused).
pub(crate) fn encode_record_into<'a, I>(out: &mut Vec<u8>, seq: u64, ops: I)
where
    I: ExactSizeIterator<Item = (bool, &'a [u8], &'a [u8])> + Clone,
{
    let body_len: usize = 4 + ops
        .clone()
        .map(|(_, k, v)| 7 + k.len() + v.len())
        .sum::<usize>();
    out.clear();
    out.reserve(RECORD_HEAD + body_len);
    out.resize(RECORD_HEAD + 4, 0);
    let count = ops.len() as u32;
    encode_ops_into(out, ops);
    seal_record(out, seq, count);
}

/// Appends the ops `(put, key, value)` to `out` as a record's body holds
/// them (after its head and op count).
pub(crate) fn encode_ops_into<'a, I>(out: &mut Vec<u8>, ops: I)
where
    I: Iterator<Item = (bool, &'a [u8], &'a [u8])>,
{
    for (put, key, value) in ops {
        out.push(if put { PUT } else { REMOVE });
        out.extend_from_slice(&(key.len() as u16).to_le_bytes());
        out.extend_from_slice(&(value.len() as u32).to_le_bytes());
        out.extend_from_slice(key);
        out.extend_from_slice(value);
    }
}

/// Makes `record` (its first [`RECORD_HEAD`] + 4 bytes room for the head
/// and the op count, then `count` ops: [`encode_ops_into`]) whole: its
/// length, sequence number `seq`, op count and checksum.
pub(crate) fn seal_record(record: &mut [u8], seq: u64, count: u32) {
    let body_len = (record.len() - RECORD_HEAD) as u32;
    record[0..4].copy_from_slice(&body_len.to_le_bytes());
    record[8..16].copy_from_slice(&seq.to_le_bytes());
    record[RECORD_HEAD..RECORD_HEAD + 4].copy_from_slice(&count.to_le_bytes());
    let crc = crc32fast::hash(&record[8..]);
    record[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// Decodes a record's body; `None` if it is not a well-formed one.
fn decode_body(mut b: &[u8]) -> Option<Vec<Op>> {
    let count = le_u32(b.get(..4)?, 0) as usize;
    b = &b[4..];
    // Every op takes at least 7 bytes: a count the body cannot hold is
    // refused before anything is allocated for it.
    if count > b.len() / 7 {
        return None;
    }
    let mut ops = Vec::with_capacity(count);
    for _ in 0..count {
        let head = b.get(..7)?;
        let klen = u16::from_le_bytes([head[1], head[2]]) as usize;
        let vlen = le_u32(head, 3) as usize;
        let key = b.get(7..7 + klen)?.to_vec();
        let value = b.get(7 + klen..7 + klen + vlen)?;
        ops.push(match head[0] {
            PUT => Op::Put(key, value.to_vec()),
            REMOVE if vlen == 0 => Op::Remove(key),
            _ => return None,
        });
        b = &b[7 + klen + vlen..];
    }
    b.is_empty().then_some(ops)
}

/// Decodes the log in `bytes` if its header names log `id`: its longest
/// prefix of whole records with consecutive sequence numbers from 0. A log
/// of another id, or without a valid header, holds nothing for `id`.
pub(crate) fn decode(bytes: &[u8], id: u64) -> Replay {
    decode_with(MAGIC, bytes, id)
}

/// [`decode`] for a log of the kind whose files start with `magic`.
pub(crate) fn decode_with(magic: [u8; 4], bytes: &[u8], id: u64) -> Replay {
    let mut replay = Replay {
        file_len: bytes.len() as u64,
        ..Replay::default()
    };
    if parse_header(magic, bytes) != Some(id) {
        return replay;
    }
    replay.valid = true;
    let mut at = HEADER;
    while let Some(head) = bytes.get(at..at + RECORD_HEAD) {
        let len = le_u32(head, 0) as usize;
        let Some(body) = bytes.get(at + RECORD_HEAD..at + RECORD_HEAD + len) else {
            break;
        };
        let covered = &bytes[at + 8..at + RECORD_HEAD + len];
        if crc32fast::hash(covered) != le_u32(head, 4) || le_u64(head, 8) != replay.next_seq {
            break;
        }
        let Some(ops) = decode_body(body) else {
            break;
        };
        replay.records.push(ops);
        replay.next_seq += 1;
        at += RECORD_HEAD + len;
    }
    replay.end = at as u64;
    replay
}

/// Reads the log of the store in `dir` as log `id` ([`decode`]); an empty
/// replay if there is no log file.
pub(crate) fn read(dir: &Path, id: u64) -> std::io::Result<Replay> {
    match fs::read(dir.join(LOG_FILE)) {
        Ok(bytes) => Ok(decode(&bytes, id)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Replay::default()),
        Err(e) => Err(e),
    }
}

/// The log of a store open for writing, positioned after its last record.
#[derive(Debug)]
pub(crate) struct CatalogLog {
    file: File,
    id: u64,
    end: u64,
    next_seq: u64,
}

impl CatalogLog {
    /// Makes an empty log `id` the store's log: written as
    /// [`NEW_LOG_FILE`], synced, renamed over [`LOG_FILE`], and the
    /// directory synced. Any error leaves a log that recovery reads as it
    /// did before (the old one, or no valid header for `id`).
    pub(crate) fn create(dir: &Path, id: u64) -> std::io::Result<CatalogLog> {
        let new = dir.join(NEW_LOG_FILE);
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&new)?;
        write_all_at(&file, &header(id), 0)?;
        io::sync_all(&file)?;
        io::rename(&new, &dir.join(LOG_FILE))?;
        sync_dir(dir)?;
        Ok(CatalogLog {
            file,
            id,
            end: HEADER as u64,
            next_seq: 0,
        })
    }

    /// Log `id` as a writing open found it ([`read`]: `replay`, whose file
    /// is valid), made ready for appends: a torn tail cut off and synced,
    /// and the records before it written again where they are and synced.
    /// After a failed writeback Linux keeps the pages it could not write
    /// readable but clean (`io::rewrite`): without the rewrite a later sync
    /// would not write them, and a cut would lose every record after them.
    pub(crate) fn resume(dir: &Path, id: u64, replay: &Replay) -> std::io::Result<CatalogLog> {
        let file = File::options()
            .read(true)
            .write(true)
            .open(dir.join(LOG_FILE))?;
        if replay.file_len > replay.end {
            file.set_len(replay.end)?;
            io::sync_data(&file)?;
        }
        if replay.end > HEADER as u64 {
            io::rewrite(&file, HEADER as u64, replay.end)?;
            io::sync_data(&file)?;
        }
        Ok(CatalogLog {
            file,
            id,
            end: replay.end,
            next_seq: replay.next_seq,
        })
    }

    /// The log id.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Bytes of the log (header included).
    pub(crate) fn len(&self) -> u64 {
        self.end
    }

    /// Appends the record of `ops` and syncs it: the commit point. A failed
    /// write is [`CommitError::Before`] (the record is not whole, or not
    /// there: recovery stops before it, and the next append goes where it
    /// was); a failed sync is [`CommitError::After`].
    pub(crate) fn append(&mut self, ops: &[Op]) -> Result<(), CommitError> {
        let record = encode_record(self.next_seq, ops);
        write_all_at(&self.file, &record, self.end).map_err(CommitError::Before)?;
        io::sync_data(&self.file).map_err(CommitError::After)?;
        self.end += record.len() as u64;
        self.next_seq += 1;
        Ok(())
    }
}

/// Removes a `catalog.log.new` left by a cut before its rename (writing
/// opens only).
pub(crate) fn remove_leftover(dir: &Path) -> std::io::Result<()> {
    match fs::remove_file(dir.join(NEW_LOG_FILE)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(i: u8) -> Vec<Op> {
        vec![
            Op::Put(vec![1, i], vec![i; 30]),
            Op::Remove(vec![1, i.wrapping_add(1)]),
        ]
    }

    fn log_bytes(id: u64, records: u8) -> Vec<u8> {
        let mut b = header(id).to_vec();
        for i in 0..records {
            b.extend_from_slice(&encode_record(i as u64, &ops(i)));
        }
        b
    }

    #[test]
    fn records_round_trip_and_every_truncation_keeps_a_prefix() {
        let bytes = log_bytes(7, 3);
        let r = decode(&bytes, 7);
        assert_eq!(r.records, (0..3).map(ops).collect::<Vec<_>>());
        assert_eq!((r.end, r.next_seq), (bytes.len() as u64, 3));
        let bounds: Vec<usize> = (0..=3).map(|n| log_bytes(7, n).len()).collect();
        for len in 0..bytes.len() {
            let r = decode(&bytes[..len], 7);
            let whole = bounds
                .iter()
                .filter(|&&b| b <= len)
                .count()
                .saturating_sub(1);
            let whole = if len < HEADER { 0 } else { whole };
            assert_eq!(r.records.len(), whole, "{len}");
        }
    }

    #[test]
    fn another_log_or_a_damaged_record_ends_the_replay() {
        let bytes = log_bytes(7, 3);
        assert!(decode(&bytes, 8).records.is_empty());
        // Every flipped byte of the second record ends the replay before it.
        let first = log_bytes(7, 1).len();
        let second = log_bytes(7, 2).len();
        for at in first..second {
            let mut b = bytes.clone();
            b[at] ^= 0x40;
            assert_eq!(decode(&b, 7).records.len(), 1, "{at}");
        }
        // A record whose sequence number skips is not taken.
        let mut skip = log_bytes(7, 1);
        skip.extend_from_slice(&encode_record(5, &ops(1)));
        assert_eq!(decode(&skip, 7).records.len(), 1);
        // A hostile count is refused before anything is allocated.
        let mut body = u32::MAX.to_le_bytes().to_vec();
        body.push(PUT);
        assert_eq!(decode_body(&body), None);
    }

    #[test]
    fn appends_are_read_back_and_a_new_log_replaces_the_old() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = CatalogLog::create(dir.path(), 1).unwrap();
        log.append(&ops(0)).unwrap();
        log.append(&ops(1)).unwrap();
        let r = read(dir.path(), 1).unwrap();
        assert_eq!(r.records, vec![ops(0), ops(1)]);
        assert_eq!(r.end, log.len());
        CatalogLog::create(dir.path(), 2).unwrap();
        assert!(read(dir.path(), 1).unwrap().records.is_empty());
        assert!(read(dir.path(), 2).unwrap().records.is_empty());
        assert!(!dir.path().join(NEW_LOG_FILE).exists());
    }
}
