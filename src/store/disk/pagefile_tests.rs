//! Tests of the page file: folds in force after their commit only, torn
//! superblocks, another table's file, bad slots.

use super::*;
use crate::filter::hash::HashSpec;
use crate::filter::params::Layout;

fn params(blocks: u64) -> FilterParams {
    FilterParams::new(Layout::Blocked, 512 * blocks, 3, HashSpec::xxh3(7)).unwrap()
}

const OWNER: Owner = Owner {
    table_id: 3,
    generation: 1,
};

fn chunk(p: &FilterParams, idx: u64, fill: u8) -> Vec<u8> {
    vec![fill; blocks_in_chunk(p, idx) as usize * COUNTER_BLOCK_BYTES]
}

#[test]
fn a_fold_is_in_force_after_its_commit_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p");
    let p = params(CHUNK_BLOCKS + 5);
    let mut f = PageFile::create(&path, p, OWNER, 9).unwrap();
    let mut out = Vec::new();
    f.read_chunk(1, &mut out).unwrap();
    assert_eq!(out, chunk(&p, 1, 0));
    // Fold 1 writes chunk 1, commits.
    let mut fold = f.begin_fold();
    fold.write_chunk(1, &chunk(&p, 1, 0x11)).unwrap();
    fold.commit(12, 40, 0).unwrap();
    // Fold 2 writes chunks 0 and 1 but does not commit.
    let mut fold = f.begin_fold();
    fold.write_chunk(0, &chunk(&p, 0, 0x22)).unwrap();
    fold.write_chunk(1, &chunk(&p, 1, 0x22)).unwrap();
    drop(fold);
    drop(f);
    let f = PageFile::open(&path, p, OWNER, false).unwrap();
    assert_eq!((f.sb.fold, f.sb.folded_seq, f.sb.live_keys), (1, 12, 40));
    f.read_chunk(0, &mut out).unwrap();
    assert_eq!(out, chunk(&p, 0, 0));
    f.read_chunk(1, &mut out).unwrap();
    assert_eq!(out, chunk(&p, 1, 0x11));
}

#[test]
fn a_torn_superblock_leaves_the_one_before() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p");
    let p = params(3);
    let mut f = PageFile::create(&path, p, OWNER, 0).unwrap();
    let mut fold = f.begin_fold();
    fold.write_chunk(0, &chunk(&p, 0, 5)).unwrap();
    fold.commit(1, 1, 0).unwrap();
    let mut fold = f.begin_fold();
    fold.write_chunk(0, &chunk(&p, 0, 6)).unwrap();
    fold.commit(2, 2, 0).unwrap();
    drop(f);
    // Copy 0 holds fold 2: tear it; fold 1 (copy 1) is in force again,
    // naming the slot it wrote, which fold 2 did not touch.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[40] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let f = PageFile::open(&path, p, OWNER, false).unwrap();
    assert_eq!(f.sb.fold, 1);
    let mut out = Vec::new();
    f.read_chunk(0, &mut out).unwrap();
    assert_eq!(out, chunk(&p, 0, 5));
    // Both copies torn: a typed error.
    let at = sb_bytes(&p) as usize + 40;
    bytes[at] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    assert!(matches!(
        PageFile::open(&path, p, OWNER, false),
        Err(PageError::Corrupt(..))
    ));
}

#[test]
fn another_tables_file_or_a_bad_slot_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p");
    let p = params(3);
    let mut f = PageFile::create(&path, p, OWNER, 0).unwrap();
    let mut fold = f.begin_fold();
    fold.write_chunk(0, &chunk(&p, 0, 5)).unwrap();
    fold.commit(1, 1, 0).unwrap();
    drop(f);
    let other = Owner {
        table_id: 4,
        ..OWNER
    };
    assert!(PageFile::open(&path, p, other, false).is_err());
    assert!(PageFile::open(&path, params(4), OWNER, false).is_err());
    // Flip a counter byte of the slot in force: the chunk is corrupt.
    let mut bytes = std::fs::read(&path).unwrap();
    let at = slot_offset(&p, 0, Slot::First) as usize + 60;
    bytes[at] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let f = PageFile::open(&path, p, OWNER, false).unwrap();
    assert!(matches!(
        f.read_chunk(0, &mut Vec::new()),
        Err(PageError::Corrupt(..))
    ));
}

/// `docs/FORMAT.md` § 11: a superblock is written as frame version 3, min
/// reader 3, with `log_start` at byte 64 of its body; a copy of version 1
/// (a store of format 3 or 4), whose byte 64 holds the chunk count, reads
/// as a log that starts at byte 0.
#[test]
fn superblock_version_3_holds_log_start_and_version_1_reads_as_zero() {
    let p = params(5);
    let sb = Superblock {
        fold: 2,
        folded_seq: 7,
        live_keys: -3,
        log_start: 0x1234,
        slots: vec![Slot::Second],
    };
    let bytes = sb.encode(OWNER, &p);
    assert_eq!(&bytes[4..8], &[3, 0, 3, 0]);
    let body = &bytes[frame::HEADER_LEN..bytes.len() - frame::TRAILER_LEN];
    assert_eq!(body.len(), 73);
    assert_eq!(&body[40..48], &2u64.to_le_bytes());
    assert_eq!(&body[48..56], &7u64.to_le_bytes());
    assert_eq!(&body[56..64], &(-3i64).to_le_bytes());
    assert_eq!(&body[64..72], &0x1234u64.to_le_bytes());
    assert_eq!(body[72], 2);
    assert_eq!(Superblock::decode(&bytes, OWNER, &p).unwrap(), sb);
    // The same body as format 4 wrote it: version 1, the chunk count (1)
    // at byte 64.
    let mut v1 = body.to_vec();
    v1[64..72].copy_from_slice(&1u64.to_le_bytes());
    let old = frame::encode_versioned(Kind::TableState, 0, &v1, 1, 1);
    let read = Superblock::decode(&old, OWNER, &p).unwrap();
    assert_eq!(read, Superblock { log_start: 0, ..sb });
    // A version-1 copy whose chunk count is wrong is refused.
    v1[64..72].copy_from_slice(&2u64.to_le_bytes());
    let bad = frame::encode_versioned(Kind::TableState, 0, &v1, 1, 1);
    assert!(Superblock::decode(&bad, OWNER, &p).is_err());
}
