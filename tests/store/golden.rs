//! The records of the v1 store fixture, byte for byte, against bytes written
//! by hand from `docs/FORMAT.md` §§ 2, 8–11: the store header, both table
//! records, the generation states, the counter pages (against an in-memory
//! counting filter fed the same operations) and the log records (against the
//! keys' hashes). The CRC is computed here with `crc32fast` over the bytes
//! this test builds, not taken from the encoder.

use crate::common;

use crate::store_fixture_common;

use filterstore::{FilterParams, HashSpec, Layout};
use store_fixture_common::*;

/// A frame (§ 2) of format version 1, min reader 1, flags 0.
fn frame(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut f = b"FSTR".to_vec();
    f.extend_from_slice(&1u16.to_le_bytes());
    f.extend_from_slice(&1u16.to_le_bytes());
    f.extend_from_slice(&[kind, 0, 0, 0]);
    f.extend_from_slice(&(body.len() as u64).to_le_bytes());
    f.extend_from_slice(&[0; 4]);
    f.extend_from_slice(body);
    let crc = crc32fast::hash(&f);
    f.extend_from_slice(&crc.to_le_bytes());
    f
}

fn tree_name(id: u64) -> String {
    format!("filterstore/table/{id:016x}/gen/{:016x}", 1)
}

#[test]
fn v1_store_records_are_the_specified_bytes() {
    common::with_timeout(
        common::TEST_LIMIT,
        v1_store_records_are_the_specified_bytes_body,
    )
}

fn v1_store_records_are_the_specified_bytes_body() {
    let copy = copy_fixture();
    let db = sled::open(copy.path()).unwrap();
    let catalog = db.open_tree("filterstore/catalog").unwrap();

    // § 8: format_version u32 = 1, next_table_id u64 = 3.
    let mut body = 1u32.to_le_bytes().to_vec();
    body.extend_from_slice(&3u64.to_le_bytes());
    assert_eq!(
        catalog.get(b"\x00header").unwrap().unwrap().to_vec(),
        frame(3, &body)
    );

    // (id, name, layout id, m, k): § 9's fields at their offsets.
    let tables = [
        (1u64, "blocked", 2u8, 4096u64, 7u32),
        (2, "standard", 1, 3838, 7),
    ];
    for (id, name, layout, m, k) in tables {
        let value = catalog
            .get([&[1u8][..], name.as_bytes()].concat())
            .unwrap()
            .unwrap();
        let n = name.len();
        // created_unix_s (offset 62 + N of the body) is the one field not
        // fixed by the inputs: taken from the bytes, checked to be 2025–2100.
        let at = 24 + 62 + n;
        let created = u64::from_le_bytes(value[at..at + 8].try_into().unwrap());
        assert!(
            (1_735_689_600..4_102_444_800).contains(&created),
            "{created}"
        );
        let mut body = Vec::new();
        body.extend_from_slice(&id.to_le_bytes());
        body.extend_from_slice(&(n as u64).to_le_bytes());
        body.extend_from_slice(name.as_bytes());
        body.push(layout);
        body.extend_from_slice(&m.to_le_bytes());
        body.extend_from_slice(&k.to_le_bytes());
        body.push(1); // xxh3-128
        body.extend_from_slice(&SEED.to_le_bytes());
        body.extend_from_slice(&400u64.to_le_bytes());
        body.extend_from_slice(&0.01f64.to_le_bytes());
        body.extend_from_slice(&1u64.to_le_bytes());
        body.extend_from_slice(&created.to_le_bytes());
        assert_eq!(body.len(), 70 + n);
        assert_eq!(value.to_vec(), frame(4, &body), "{name}");

        let tree = db.open_tree(tree_name(id)).unwrap();
        let layout = if layout == 2 {
            Layout::Blocked
        } else {
            Layout::Standard
        };
        let p = FilterParams::new(layout, m, k, HashSpec::xxh3(SEED)).unwrap();

        // § 10: one chunk (8 blocks < 64) under key 0x01 ‖ 0 (BE).
        // Counters of the folded operations only (the log is not in the pages).
        let counters = model(p, false).as_bytes().to_vec();
        assert_eq!(counters.len(), 8 * 256);
        let mut body = 0u64.to_le_bytes().to_vec();
        body.extend_from_slice(&8u32.to_le_bytes());
        body.extend_from_slice(&[0; 4]);
        body.extend_from_slice(&counters);
        let page_key = [&[1u8][..], &0u64.to_be_bytes()].concat();
        assert_eq!(
            tree.get(&page_key).unwrap().unwrap().to_vec(),
            frame(5, &body)
        );

        // § 10: log records in sequence order hold the 50 late inserts.
        let spec = HashSpec::xxh3(SEED);
        let mut expected = logged_inserts()
            .into_iter()
            .map(|k| spec.hash(k.as_bytes()));
        let mut first_seq = None;
        for kv in tree.scan_prefix([2u8]) {
            let (key, value) = kv.unwrap();
            assert_eq!(key.len(), 9);
            first_seq.get_or_insert(u64::from_be_bytes(key[1..].try_into().unwrap()));
            let count = u32::from_le_bytes(value[24..28].try_into().unwrap());
            let mut body = count.to_le_bytes().to_vec();
            body.extend_from_slice(&[0; 4]);
            for _ in 0..count {
                let h = expected.next().expect("more ops logged than made");
                body.push(1);
                body.extend_from_slice(&h.h1.to_le_bytes());
                body.extend_from_slice(&h.h2.to_le_bytes());
            }
            assert_eq!(value.to_vec(), frame(9, &body), "{name}");
        }
        assert!(expected.next().is_none(), "{name}: logged ops missing");

        // § 11: live_keys i64 = 266 folded; records logged after the fold
        // are numbered from next_seq on.
        let state = tree.get([0u8]).unwrap().unwrap();
        let next_seq = u64::from_le_bytes(state[32..40].try_into().unwrap());
        assert!(first_seq.unwrap() >= next_seq, "{first_seq:?} {next_seq}");
        let mut body = 266i64.to_le_bytes().to_vec();
        body.extend_from_slice(&next_seq.to_le_bytes());
        assert_eq!(state.to_vec(), frame(10, &body), "{name}");
        // The tree holds nothing else.
        assert_eq!(
            tree.len(),
            2 + tree.scan_prefix([2u8]).count(),
            "{name}: unexpected records"
        );
    }
}

/// A log record's body (docs/FORMAT.md § 10) holding inserts of `hashes`:
/// store format 4 with `bound` = (table id, generation, synced below), or
/// format 3 without it.
fn log_body(seq: u64, bound: Option<(u64, u64, u64)>, hashes: &[filterstore::KeyHash]) -> Vec<u8> {
    let mut body = (hashes.len() as u32).to_le_bytes().to_vec();
    body.extend_from_slice(&[0; 4]);
    body.extend_from_slice(&seq.to_le_bytes());
    if let Some((id, generation, synced_below)) = bound {
        body.extend_from_slice(&id.to_le_bytes());
        body.extend_from_slice(&generation.to_le_bytes());
        body.extend_from_slice(&synced_below.to_le_bytes());
    }
    for h in hashes {
        body.push(1);
        body.extend_from_slice(&h.h1.to_le_bytes());
        body.extend_from_slice(&h.h2.to_le_bytes());
    }
    body
}

/// § 10 in store format 4: the log of a table (id 1, generation 1) after a
/// durable batch of two inserts, a durable batch of one, and a clean close:
/// each record names the table and generation and says how far the log
/// was durable when it was appended; the close's empty record says that
/// both were.
#[test]
fn format_4_log_records_are_the_specified_bytes() {
    use filterstore::{Durability, FilterStore, TableSpec, WriteBatch};
    let dir = tempfile::tempdir().unwrap();
    {
        let store = FilterStore::open(dir.path()).unwrap();
        let t = store
            .create_table("t", TableSpec::new(1_000, 0.01).seed(SEED))
            .unwrap();
        let mut b = WriteBatch::new();
        b.insert(b"a").insert(b"b");
        t.apply(&b, Durability::Durable).unwrap();
        let mut b = WriteBatch::new();
        b.insert(b"c");
        t.apply(&b, Durability::Durable).unwrap();
    }
    let spec = HashSpec::xxh3(SEED);
    let h = |k: &[u8]| spec.hash(k);
    let mut want = frame(9, &log_body(0, Some((1, 1, 0)), &[h(b"a"), h(b"b")]));
    want.extend(frame(9, &log_body(1, Some((1, 1, 1)), &[h(b"c")])));
    want.extend(frame(9, &log_body(2, Some((1, 1, 2)), &[])));
    let log = dir
        .path()
        .join("tables/0000000000000001-0000000000000001.log");
    assert_eq!(std::fs::read(log).unwrap(), want);
}

/// § 10 in store format 3: the log of table `blocked` of the store-v3
/// fixture, byte for byte: the empty record its fold left, then its three
/// durable batches of 200 inserts (`key-0600` …).
#[test]
fn store_v3_fixture_log_records_are_the_specified_bytes() {
    let log = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations/fixtures/store-v3/tables/0000000000000001-0000000000000001.log");
    let bytes = std::fs::read(log).unwrap();
    // The first record's number is the fold's: read, the rest follows.
    let first = u64::from_le_bytes(bytes[32..40].try_into().unwrap());
    let spec = HashSpec::xxh3(0xF11E_5EED_0000_0003);
    let mut want = frame(9, &log_body(first, None, &[]));
    for part in 0..3u64 {
        let hashes: Vec<_> = (600 + part * 200..800 + part * 200)
            .map(|i| spec.hash(format!("key-{i:04}").as_bytes()))
            .collect();
        want.extend(frame(9, &log_body(first + 1 + part, None, &hashes)));
    }
    assert_eq!(bytes, want);
}
