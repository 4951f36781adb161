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

/// `docs/FORMAT.md` § 11: a superblock is written as frame version 5, min
/// reader 5, with `log_start` at byte 64 of its body and `durable_seq` at
/// byte 72; a copy of version 3 (a store of format 5 to 7) reads as
/// claiming nothing past its chunks (`durable_seq = folded_seq`), and one
/// of version 1 (a store of format 3 or 4), whose byte 64 holds the chunk
/// count, as a log that starts at byte 0 too.
#[test]
fn superblock_version_5_holds_durable_seq_and_older_ones_read_as_folded_seq() {
    let p = params(5);
    let sb = Superblock {
        fold: 2,
        folded_seq: 7,
        live_keys: -3,
        log_start: 0x1234,
        durable_seq: 9,
        slots: vec![Slot::Second],
    };
    let bytes = sb.encode(OWNER, &p);
    assert_eq!(&bytes[4..8], &[5, 0, 5, 0]);
    let body = &bytes[frame::HEADER_LEN..bytes.len() - frame::TRAILER_LEN];
    assert_eq!(body.len(), 81);
    assert_eq!(&body[40..48], &2u64.to_le_bytes());
    assert_eq!(&body[48..56], &7u64.to_le_bytes());
    assert_eq!(&body[56..64], &(-3i64).to_le_bytes());
    assert_eq!(&body[64..72], &0x1234u64.to_le_bytes());
    assert_eq!(&body[72..80], &9u64.to_le_bytes());
    assert_eq!(body[80], 2);
    assert_eq!(Superblock::decode(&bytes, OWNER, &p).unwrap(), sb);
    // A claim below `folded_seq` is refused.
    let mut low = body.to_vec();
    low[72..80].copy_from_slice(&6u64.to_le_bytes());
    let bad = frame::encode_versioned(Kind::TableState, 0, &low, 5, 5);
    assert!(Superblock::decode(&bad, OWNER, &p).is_err());
    // The same body as formats 5 to 7 wrote it: version 3, no claim.
    let v3: Vec<u8> = [&body[..72], &body[80..]].concat();
    let old = frame::encode_versioned(Kind::TableState, 0, &v3, 3, 3);
    let read = Superblock::decode(&old, OWNER, &p).unwrap();
    assert_eq!(
        read,
        Superblock {
            durable_seq: 7,
            ..sb.clone()
        }
    );
    // As format 4 wrote it: version 1, the chunk count (1) at byte 64.
    let mut v1 = v3.clone();
    v1[64..72].copy_from_slice(&1u64.to_le_bytes());
    let old = frame::encode_versioned(Kind::TableState, 0, &v1, 1, 1);
    let read = Superblock::decode(&old, OWNER, &p).unwrap();
    let want = Superblock {
        log_start: 0,
        durable_seq: 7,
        ..sb
    };
    assert_eq!(read, want);
    // A version-1 copy whose chunk count is wrong is refused.
    v1[64..72].copy_from_slice(&2u64.to_le_bytes());
    let bad = frame::encode_versioned(Kind::TableState, 0, &v1, 1, 1);
    assert!(Superblock::decode(&bad, OWNER, &p).is_err());
}

/// A table whose slot map ends within 8 bytes of its copy's 4,096-byte
/// space has no room for `durable_seq`: its superblocks stay version 3 (or
/// 4), claim nothing past the chunks, and a claim writes nothing.
#[test]
fn a_superblock_without_room_for_the_claim_stays_version_3() {
    // 28 + 72 + ⌈chunks/4⌉ = 4,090: chunks/4 = 3,990.
    let p = params(CHUNK_BLOCKS * 3_990 * 4);
    assert!(!super::has_durable_seq(&p));
    assert!(super::has_durable_seq(&params(CHUNK_BLOCKS * 3_980 * 4)));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p");
    let mut f = PageFile::create(&path, p, OWNER, 4).unwrap();
    f.claim_durable(9).unwrap();
    assert_eq!((f.sb.fold, f.sb.durable_seq), (0, 4));
    let bytes = f.sb.encode(OWNER, &p);
    assert_eq!(&bytes[4..8], &[3, 0, 3, 0]);
    assert_eq!(Superblock::decode(&bytes, OWNER, &p).unwrap(), f.sb);
}

/// A claim is a fold that writes no chunk: the copy not in force, fold
/// number + 1, synced; torn, the copy before stays in force with its own
/// (smaller) claim. A claim that would not grow writes nothing.
#[test]
fn a_durable_claim_commits_the_other_copy_and_a_torn_one_leaves_the_one_before() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p");
    let p = params(3);
    let mut f = PageFile::create(&path, p, OWNER, 5).unwrap();
    let mut fold = f.begin_fold();
    fold.write_chunk(0, &chunk(&p, 0, 5)).unwrap();
    fold.claim_durable(8);
    fold.commit(6, 1, 100).unwrap();
    assert_eq!((f.sb.fold, f.sb.durable_seq), (1, 8));
    f.claim_durable(8).unwrap();
    assert_eq!(f.sb.fold, 1, "a claim that does not grow writes nothing");
    f.claim_durable(11).unwrap();
    let sb = f.sb.clone();
    assert_eq!((sb.fold, sb.folded_seq, sb.log_start), (2, 6, 100));
    assert_eq!((sb.live_keys, sb.durable_seq), (1, 11));
    drop(f);
    let f = PageFile::open(&path, p, OWNER, false).unwrap();
    assert_eq!(f.sb, sb);
    let mut out = Vec::new();
    f.read_chunk(0, &mut out).unwrap();
    assert_eq!(out, chunk(&p, 0, 5));
    drop(f);
    // Tear the claim's copy (copy 0): fold 1 is in force, claiming 8.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[60] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let f = PageFile::open(&path, p, OWNER, false).unwrap();
    assert_eq!((f.sb.fold, f.sb.durable_seq, f.sb.folded_seq), (1, 8, 6));
}

/// A table hashed with XXH3-64 sectorized (hash id 4, `docs/FORMAT.md`
/// § 11) writes its superblocks as version 6, min reader 6: with
/// `durable_seq` where the copy has room (version 5's fields), without it
/// where it has none (version 3's). Re-framed as version 5 or 3 the same
/// bytes are corrupt; a table hashed with XXH3-64 (hash 3) still writes 5.
#[test]
fn a_sectorized_table_writes_version_6_superblocks() {
    let sectorized = |blocks: u64| {
        FilterParams::new(
            Layout::Blocked,
            512 * blocks,
            8,
            HashSpec::xxh3_64_sectorized(7),
        )
        .unwrap()
    };
    let sb = Superblock {
        fold: 2,
        folded_seq: 7,
        live_keys: 3,
        log_start: 0x40,
        durable_seq: 9,
        slots: vec![Slot::First],
    };
    let p = sectorized(5);
    let bytes = sb.encode(OWNER, &p);
    assert_eq!(&bytes[4..8], &[6, 0, 6, 0]);
    let body = &bytes[frame::HEADER_LEN..bytes.len() - frame::TRAILER_LEN];
    assert_eq!((body.len(), &body[72..80]), (81, &9u64.to_le_bytes()[..]));
    assert_eq!(Superblock::decode(&bytes, OWNER, &p).unwrap(), sb);
    for v in [5, 4] {
        let old = frame::encode_versioned(Kind::TableState, 0, body, v, v);
        assert!(Superblock::decode(&old, OWNER, &p).is_err(), "version {v}");
    }
    let xxh3_64 = FilterParams::new(Layout::Blocked, 512 * 5, 8, HashSpec::xxh3_64(7)).unwrap();
    assert_eq!(&sb.encode(OWNER, &xxh3_64)[4..8], &[5, 0, 5, 0]);
    // No room for the claim: version 6 with version 3's fields.
    let p = sectorized(CHUNK_BLOCKS * 3_990 * 4);
    assert!(!super::has_durable_seq(&p));
    let sb = Superblock {
        durable_seq: 7,
        slots: vec![Slot::None; chunk_count(&p) as usize],
        ..sb
    };
    let bytes = sb.encode(OWNER, &p);
    assert_eq!(&bytes[4..8], &[6, 0, 6, 0]);
    assert_eq!(Superblock::decode(&bytes, OWNER, &p).unwrap(), sb);
    let body = &bytes[frame::HEADER_LEN..bytes.len() - frame::TRAILER_LEN];
    assert_eq!(body.len(), 72 + 3_990);
    let old = frame::encode_versioned(Kind::TableState, 0, body, 3, 3);
    assert!(Superblock::decode(&old, OWNER, &p).is_err());
}
