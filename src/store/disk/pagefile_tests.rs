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
    fold.commit(12, 40).unwrap();
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
    fold.commit(1, 1).unwrap();
    let mut fold = f.begin_fold();
    fold.write_chunk(0, &chunk(&p, 0, 6)).unwrap();
    fold.commit(2, 2).unwrap();
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
    fold.commit(1, 1).unwrap();
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
