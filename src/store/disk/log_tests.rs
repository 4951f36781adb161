//! Tests of the log: its bytes, recovery as a prefix, the binding of records
//! to their generation, durability claims and what lies past the prefix.

use super::*;
use crate::store::disk::log_read::{check_tail, first_seq, scan, Scanned};

/// The binding of the tests' log: table 3, generation 1.
const BIND: Binding = Binding::Bound {
    table_id: 3,
    generation: 1,
};

fn ops(n: u64) -> Vec<LogOp> {
    (0..n)
        .map(|i| LogOp {
            insert: i % 3 != 0,
            hash: KeyHash {
                h1: i * 0x0101,
                h2: u64::MAX - i,
            },
        })
        .collect()
}

fn new_file(path: &std::path::Path) -> File {
    File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .unwrap()
}

fn scan_all(f: &File, first: u64) -> (Scanned, Vec<LogOp>) {
    let mut got = Vec::new();
    let s = scan(f, BIND, first, u64::MAX, |op| got.push(op)).unwrap();
    (s, got)
}

/// A log of generation `BIND` in a new file `log` of `dir`, its first
/// record numbered `first`.
fn new_log(dir: &tempfile::TempDir, first: u64) -> LogFile {
    LogFile::new(new_file(&dir.path().join("log")), BIND, (0, first), first)
}

#[test]
fn round_trip_and_golden_header() {
    let bytes = encode(7, BIND, 5, &ops(5));
    let body = &bytes[frame::HEADER_LEN..bytes.len() - frame::TRAILER_LEN];
    let mut want = vec![5, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0];
    want.extend_from_slice(&3u64.to_le_bytes()); // table id
    want.extend_from_slice(&1u64.to_le_bytes()); // generation
    want.extend_from_slice(&5u64.to_le_bytes()); // synced below
    want.push(2); // the first operation: a remove
    assert_eq!(&body[..41], &want[..]);
    assert_eq!(body.len(), 40 + 5 * 17);
    let mut back = Vec::new();
    assert_eq!(decode_body(body, BIND, |op| back.push(op)).unwrap(), (7, 5));
    assert_eq!(back, ops(5));
    // Store format 3: sequence number, then the operations.
    let v3 = encode(7, Binding::Unbound, 5, &ops(5));
    let body = &v3[frame::HEADER_LEN..v3.len() - frame::TRAILER_LEN];
    assert_eq!(
        &body[..17],
        &[5, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 2]
    );
    let mut back = Vec::new();
    assert_eq!(
        decode_body(body, Binding::Unbound, |op| back.push(op)).unwrap(),
        (7, 5)
    );
    assert_eq!(back, ops(5));
}

#[test]
fn recovery_is_the_prefix_of_whole_records_in_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let mut log = new_log(&dir, 10);
    let mut ends = Vec::new();
    for n in 1..=4 {
        ends.push(log.append(&ops(n)).unwrap());
    }
    let file = File::open(&path).unwrap();
    let (s, got) = scan_all(&file, 10);
    assert_eq!((s.end, s.next_seq, s.ops), (ends[3], 14, 10));
    assert_eq!(got.len(), 10);
    // Another first number: nothing (records of an earlier life).
    assert_eq!(scan_all(&file, 11).0.ops, 0);
    // A torn third record ends the log after the second, whatever follows.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[ends[1] as usize + 30] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let (s, _) = scan_all(&file, 10);
    assert_eq!((s.end, s.next_seq, s.ops), (ends[1], 12, 3));
    // Nothing was synced: the records after the gap say so, it is a tail.
    assert_eq!(check_tail(&file, &s, BIND).unwrap(), None);
    // A hole (zeros) too.
    bytes[ends[1] as usize + 30] ^= 1;
    bytes[ends[0] as usize..ends[1] as usize].fill(0);
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(scan_all(&file, 10).0.end, ends[0]);
}

#[test]
fn records_of_another_generation_are_never_taken() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let mut log = new_log(&dir, 0);
    log.append(&ops(2)).unwrap();
    let end = log.append(&ops(3)).unwrap();
    // The same records, numbered alike, of table 3 generation 2 and of
    // table 4 generation 1: copied over this log, they are not its records.
    for other in [
        Binding::Bound {
            table_id: 3,
            generation: 2,
        },
        Binding::Bound {
            table_id: 4,
            generation: 1,
        },
    ] {
        let mut bytes = encode(0, other, 0, &ops(2));
        bytes.extend(encode(1, other, 1, &ops(3)));
        assert_eq!(bytes.len() as u64, end);
        std::fs::write(&path, &bytes).unwrap();
        let file = File::open(&path).unwrap();
        let (s, got) = scan_all(&file, 0);
        assert_eq!((s.end, s.ops, got.len()), (0, 0, 0), "{other:?}");
        assert_eq!(first_seq(&file, 0, BIND).unwrap(), None);
        let found = check_tail(&file, &s, BIND).unwrap();
        assert!(found.is_some_and(|f| f.contains("a record of table")));
    }
}

#[test]
fn a_synced_record_lost_before_a_record_that_says_so_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let mut log = new_log(&dir, 0);
    let a = log.append(&ops(2)).unwrap();
    let b = log.append(&ops(3)).unwrap();
    log.sync().sync_to(b).unwrap();
    // Appended after the sync: says records 0 and 1 are durable.
    let c = log.append(&ops(1)).unwrap();
    let file = File::open(&path).unwrap();
    assert_eq!(scan_all(&file, 0).0.claimed, 2);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[a as usize + 40] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let (s, _) = scan_all(&file, 0);
    assert_eq!((s.end, s.next_seq), (a, 1));
    let found = check_tail(&file, &s, BIND).unwrap().expect("the loss");
    assert!(found.contains("records below 2 were durable"), "{found}");
    // The same damage to the last record, which nothing after it claims,
    // is a tail: that is what a cut leaves of a record not synced.
    bytes[a as usize + 40] ^= 1;
    bytes[b as usize + 40] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let (s, _) = scan_all(&file, 0);
    assert_eq!((s.end, check_tail(&file, &s, BIND).unwrap()), (b, None));
    assert!(c > b);
}

#[test]
fn a_seal_claims_what_was_synced_last() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let mut log = new_log(&dir, 0);
    let a = log.append(&ops(2)).unwrap();
    log.sync().sync_to(a).unwrap();
    // Synced, nothing appended since: a seal says so.
    log.seal().unwrap();
    let sealed = log.sync().written();
    assert!(sealed > a);
    // Nothing new synced: no second seal.
    log.seal().unwrap();
    assert_eq!(log.sync().written(), sealed);
    // The last data record rots: the seal finds it missing.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[40] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let file = File::open(&path).unwrap();
    let (s, _) = scan_all(&file, 0);
    assert_eq!(s.end, 0);
    assert!(check_tail(&file, &s, BIND).unwrap().is_some());
    // Format 3 has no claims: no seal.
    let mut v3 = LogFile::new(
        new_file(&dir.path().join("v3")),
        Binding::Unbound,
        (0, 0),
        0,
    );
    let p = v3.append(&ops(1)).unwrap();
    v3.sync().sync_to(p).unwrap();
    v3.seal().unwrap();
    assert_eq!(v3.sync().written(), p);
}

#[test]
fn the_limit_stops_before_a_record_that_would_pass_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(&dir, 0);
    for n in [4, 4, 4] {
        log.append(&ops(n)).unwrap();
    }
    let s = scan(log.file(), BIND, 0, 9, |_| {}).unwrap();
    assert_eq!((s.ops, s.next_seq, s.stopped), (8, 2, true));
    // The first record is always taken, even past the limit.
    let s = scan(log.file(), BIND, 0, 1, |_| {}).unwrap();
    assert_eq!((s.ops, s.stopped), (4, true));
}

#[test]
fn a_whole_frame_with_a_bad_body_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let mut body = Vec::new();
    body.extend_from_slice(&1u32.to_le_bytes());
    body.extend_from_slice(&[0; 4]);
    body.extend_from_slice(&0u64.to_le_bytes());
    body.extend_from_slice(&3u64.to_le_bytes());
    body.extend_from_slice(&1u64.to_le_bytes());
    body.extend_from_slice(&0u64.to_le_bytes());
    body.push(9); // no such op code
    body.extend_from_slice(&[0; 16]);
    std::fs::write(&path, frame::encode(Kind::LogRecord, 0, &body)).unwrap();
    let file = File::open(&path).unwrap();
    assert!(matches!(
        scan(&file, BIND, 0, u64::MAX, |_| {}),
        Err(CodecError::InvalidField { .. })
    ));
}

#[test]
fn a_failed_sync_is_sticky() {
    use crate::store::disk::io::fault::{self, Op, EIO};
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(&dir, 0);
    let a = log.append(&ops(3)).unwrap();
    log.sync().sync_to(a).unwrap();
    let b = log.append(&ops(2)).unwrap();
    fault::fail_after(Op::Sync, 0, EIO);
    assert!(log.sync().sync_to(b).is_err());
    assert!(fault::clear());
    // The file would sync now; what the failed sync covered is not durable
    // all the same, nor is anything after it; what was synced before is.
    assert!(log.sync().sync_to(b).is_err());
    let c = log.append(&ops(1)).unwrap();
    assert!(log.sync().sync_to(c).is_err());
    assert!(log.sync().sync_to(a).is_ok());
    assert_eq!(log.sync().synced.load(Ordering::Acquire), a);
    // And no record claims more than was synced before the failure.
    assert_eq!(log.sync().synced_seq.load(Ordering::Acquire), 1);
}

#[test]
fn sync_positions_survive_a_reset() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(&dir, 0);
    let a = log.append(&ops(3)).unwrap();
    log.sync().sync_to(a).unwrap();
    let b = log.append(&ops(2)).unwrap();
    assert!(b > a);
    log.reset().unwrap();
    // Everything before the reset counts as synced; the log starts again
    // with an empty record numbered 2, and new records go on from there.
    assert_eq!(log.sync().synced.load(Ordering::Acquire), b);
    assert_eq!(log.sync().synced_seq.load(Ordering::Acquire), 2);
    assert_eq!(first_seq(log.file(), 0, BIND).unwrap(), Some(2));
    let c = log.append(&ops(1)).unwrap();
    assert!(c > b);
    assert_eq!(log.next_seq(), 4);
    let (s, got) = scan_all(log.file(), 2);
    assert_eq!((s.ops, s.next_seq, got.len(), s.claimed), (1, 4, 1, 2));
}

/// What a writing open must write back after a failed sync: the records
/// from the last one that says every record before it was durable.
#[test]
fn the_records_known_durable_end_where_the_last_claim_of_its_own_number_starts() {
    use crate::store::disk::io::fault;
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(&dir, 0);
    // Record 0 says records below 0 were durable: nothing is known beyond.
    let a = log.append(&ops(3)).unwrap();
    assert_eq!(scan_all(log.file(), 0).0.durable_bytes, 0);
    log.sync().sync_to(a).unwrap();
    // Record 1, after the sync, says record 0 was durable.
    log.append(&ops(2)).unwrap();
    // Record 2 too (no sync since): record 1 is not known durable.
    let c = log.append(&ops(1)).unwrap();
    let (s, _) = scan_all(log.file(), 0);
    assert_eq!((s.durable_bytes, s.claimed, s.end), (a, 1, c));
    // A failed sync: nothing later claims more, however many are appended.
    fault::fail_after(fault::Op::Sync, 0, fault::EIO);
    assert!(log.sync().sync_to(c).is_err());
    fault::clear();
    let d = log.append(&ops(4)).unwrap();
    assert!(log.sync().sync_to(d).is_err());
    let (s, _) = scan_all(log.file(), 0);
    assert_eq!((s.durable_bytes, s.end), (a, d));
    // A reset: the empty record it starts with says the folded records are
    // durable (in the page file); the log is known durable from there.
    let mut log = new_log(&dir, 0);
    let e = log.append(&ops(2)).unwrap();
    log.reset().unwrap();
    let f = log.append(&ops(1)).unwrap();
    let (s, _) = scan_all(log.file(), 1);
    assert_eq!((s.durable_bytes, s.next_seq), (0, 3));
    assert_eq!(s.end, f - e, "the log was emptied");
    // Format 3 records claim nothing.
    let mut v3 = LogFile::new(
        new_file(&dir.path().join("v3")),
        Binding::Unbound,
        (0, 0),
        0,
    );
    let g = v3.append(&ops(1)).unwrap();
    v3.sync().sync_to(g).unwrap();
    v3.append(&ops(1)).unwrap();
    let s = scan(v3.file(), Binding::Unbound, 0, u64::MAX, |_| {}).unwrap();
    assert_eq!(s.durable_bytes, 0);
}
