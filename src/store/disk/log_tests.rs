//! Tests of the log: its bytes, recovery as a prefix, and its sync state.

use super::*;

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
    let s = scan(f, first, u64::MAX, |op| got.push(op)).unwrap();
    (s, got)
}

#[test]
fn round_trip_and_golden_header() {
    let bytes = encode(7, &ops(5));
    let body = &bytes[frame::HEADER_LEN..bytes.len() - frame::TRAILER_LEN];
    assert_eq!(
        &body[..17],
        &[5, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 2]
    );
    assert_eq!(body.len(), 16 + 5 * 17);
    let mut back = Vec::new();
    assert_eq!(decode_body(body, |op| back.push(op)).unwrap(), (7, 5));
    assert_eq!(back, ops(5));
}

#[test]
fn recovery_is_the_prefix_of_whole_records_in_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let file = new_file(&path);
    let mut log = LogFile::new(file.try_clone().unwrap(), 0, 10);
    let mut ends = Vec::new();
    for n in 1..=4 {
        ends.push(log.append(&ops(n)).unwrap());
    }
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
    // A hole (zeros) too.
    bytes[ends[1] as usize + 30] ^= 1;
    bytes[ends[0] as usize..ends[1] as usize].fill(0);
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(scan_all(&file, 10).0.end, ends[0]);
}

#[test]
fn the_limit_stops_before_a_record_that_would_pass_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = new_file(&dir.path().join("log"));
    let mut log = LogFile::new(file, 0, 0);
    for n in [4, 4, 4] {
        log.append(&ops(n)).unwrap();
    }
    let s = scan(log.file(), 0, 9, |_| {}).unwrap();
    assert_eq!((s.ops, s.next_seq, s.stopped), (8, 2, true));
    // The first record is always taken, even past the limit.
    let s = scan(log.file(), 0, 1, |_| {}).unwrap();
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
    body.push(9); // no such op code
    body.extend_from_slice(&[0; 16]);
    std::fs::write(&path, frame::encode(Kind::LogRecord, 0, &body)).unwrap();
    let file = File::open(&path).unwrap();
    assert!(matches!(
        scan(&file, 0, u64::MAX, |_| {}),
        Err(CodecError::InvalidField { .. })
    ));
}

#[test]
fn a_failed_sync_is_sticky() {
    use super::super::io::fault::{self, Op, EIO};
    let dir = tempfile::tempdir().unwrap();
    let file = new_file(&dir.path().join("log"));
    let mut log = LogFile::new(file, 0, 0);
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
}

#[test]
fn sync_positions_survive_a_reset() {
    let dir = tempfile::tempdir().unwrap();
    let file = new_file(&dir.path().join("log"));
    let mut log = LogFile::new(file, 0, 0);
    let a = log.append(&ops(3)).unwrap();
    log.sync().sync_to(a).unwrap();
    let b = log.append(&ops(2)).unwrap();
    assert!(b > a);
    log.reset().unwrap();
    // Everything before the reset counts as synced; the log starts again
    // with an empty record numbered 2, and new records go on from there.
    assert_eq!(log.sync().synced.load(Ordering::Acquire), b);
    assert_eq!(first_seq(log.file()).unwrap(), Some(2));
    let c = log.append(&ops(1)).unwrap();
    assert!(c > b);
    assert_eq!(log.next_seq(), 4);
    let (s, got) = scan_all(log.file(), 2);
    assert_eq!((s.ops, s.next_seq, got.len()), (1, 4, 1));
}
