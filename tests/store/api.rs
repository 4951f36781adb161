//! The store's catalog and API contract: create / open / list / drop, name
//! and parameter validation, persistence across reopen, atomic batches,
//! refused removes, thread-safety of the handles, and typed errors for
//! unusable directories and corrupt records.

use crate::common;

use filterstore::{
    Durability, FilterStore, NameError, StoreConfig, StoreError, Table, TableSpec, WriteBatch,
};
use filterstore::{FrameKind, Layout};

fn keys(prefix: &str, n: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("{prefix}{i}").into_bytes())
        .collect()
}

/// The names of the store's tables, in catalog order.
fn names(store: &FilterStore) -> Vec<String> {
    store.list_tables().unwrap()
}

#[test]
fn handles_are_send_and_sync() {
    common::with_timeout(common::TEST_LIMIT, || {
        fn check<T: Send + Sync + Clone + 'static>() {}
        check::<FilterStore>();
        check::<Table>();
    })
}

#[test]
fn catalog_create_open_list_drop() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let store = FilterStore::open(dir.path()).unwrap();
        assert!(store.list_tables().unwrap().is_empty());
        let a = store
            .create_table("alpha", TableSpec::new(1000, 0.01))
            .unwrap();
        let b = store
            .create_table(
                "beta",
                TableSpec::new(5000, 0.001)
                    .layout(Layout::Standard)
                    .seed(42),
            )
            .unwrap();
        assert_eq!(a.params().layout(), Layout::Blocked, "blocked by default");
        assert_eq!(b.params().layout(), Layout::Standard);
        assert_eq!(b.params().hash().seed, 42);
        // Random seeds by default: two tables never share one by accident.
        let c = store
            .create_table("gamma", TableSpec::new(1000, 0.01))
            .unwrap();
        assert_ne!(a.params().hash().seed, c.params().hash().seed);
        assert!(matches!(
            store.create_table("alpha", TableSpec::new(10, 0.1)),
            Err(StoreError::TableExists(_))
        ));
        assert_eq!(names(&store), ["alpha", "beta", "gamma"]);
        // Handles of one table share state.
        let a2 = store.open_table("alpha").unwrap();
        a.insert(b"x").unwrap();
        assert!(a2.contains(b"x"));

        // Drop removes the table, its data, and refuses writes through old handles.
        c.insert(b"y").unwrap();
        store.drop_table("gamma").unwrap();
        assert!(matches!(
            store.open_table("gamma"),
            Err(StoreError::NoSuchTable(_))
        ));
        assert!(matches!(c.insert(b"z"), Err(StoreError::TableDropped(_))));
        assert!(matches!(
            store.drop_table("gamma"),
            Err(StoreError::NoSuchTable(_))
        ));
        // A new table of the same name starts empty.
        let c2 = store
            .create_table("gamma", TableSpec::new(1000, 0.01))
            .unwrap();
        assert!(!c2.contains(b"y"));
        assert_eq!(c2.live_keys(), 0);
        drop((a, a2, b, c, c2));
        drop(store);
        let store = FilterStore::open(dir.path()).unwrap();
        assert_eq!(store.list_tables().unwrap().len(), 3);
        assert!(store.open_table("alpha").unwrap().contains(b"x"));
        assert!(!store.open_table("gamma").unwrap().contains(b"y"));
    })
}

#[test]
fn names_and_parameters_are_validated() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let store = FilterStore::open(dir.path()).unwrap();
        for (name, why) in [
            ("", NameError::Empty),
            ("a b", NameError::InvalidByte { byte: b' ', at: 1 }),
            ("-x", NameError::BadFirstByte),
        ] {
            match store.create_table(name, TableSpec::new(10, 0.1)) {
                Err(StoreError::InvalidName { source, .. }) => assert_eq!(source, why),
                other => panic!("{name:?}: {other:?}"),
            }
            assert!(matches!(
                store.open_table(name),
                Err(StoreError::InvalidName { .. })
            ));
        }
        let long = "x".repeat(200);
        assert!(matches!(
            store.create_table(&long, TableSpec::new(10, 0.1)),
            Err(StoreError::InvalidName {
                source: NameError::TooLong { len: 200, .. },
                ..
            })
        ));
        assert!(matches!(
            store.create_table("t", TableSpec::new(0, 0.1)),
            Err(StoreError::Params(_))
        ));
        assert!(matches!(
            store.create_table("t", TableSpec::new(10, 1.5)),
            Err(StoreError::Params(_))
        ));
        assert!(
            store.list_tables().unwrap().is_empty(),
            "nothing was created"
        );
    })
}

#[test]
fn a_table_over_the_memory_limit_is_refused_before_anything_is_written() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        // 10,000 keys at 1%: a 12,416-byte bit filter, over a 10,000-byte limit.
        let cfg = StoreConfig::default().max_filter_bytes(Some(10_000));
        let store = FilterStore::open_with(dir.path(), cfg).unwrap();
        match store.create_table("big", TableSpec::new(10_000, 0.01)) {
            Err(StoreError::TooLarge { bytes, limit, .. }) => {
                assert!(bytes > limit && limit == 10_000, "{bytes} {limit}")
            }
            other => panic!("{other:?}"),
        }
        let small = store
            .create_table("small", TableSpec::new(1_000, 0.01))
            .unwrap();
        small.insert(b"k").unwrap();
        // An import of a filter over the limit is refused the same way.
        let other = tempfile::tempdir().unwrap();
        let big = FilterStore::open(other.path())
            .unwrap()
            .create_table("big", TableSpec::new(10_000, 0.01))
            .unwrap();
        let file = big.export(filterstore::ExportKind::Counting).unwrap();
        assert!(matches!(
            store.import("big", &file),
            Err(StoreError::TooLarge { .. })
        ));
        assert_eq!(names(&store), ["small"]);
        drop((store, small));
        let store = common::reopen(dir.path(), "after refused creates");
        assert_eq!(names(&store), ["small"], "nothing was left behind");
    })
}

#[test]
fn a_store_made_for_a_refused_table_is_taken_back_and_nothing_else_is() {
    // A host (the command line's `create` and `import`) that creates a store
    // to make a table in it, and whose table is refused, must not leave an
    // empty store behind that later opens as valid: `discard_if_new` takes
    // back what the open made — and nothing that it did not make.
    common::with_timeout(common::TEST_LIMIT, || {
        let root = tempfile::tempdir().unwrap();
        let listing = |p: &std::path::Path| -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(p)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        // A missing directory two levels deep: the open made both.
        let deep = root.path().join("a").join("db");
        let store = FilterStore::open(&deep).unwrap();
        assert!(matches!(
            store.create_table("t", TableSpec::new(0, 0.1)),
            Err(StoreError::Params(_))
        ));
        assert!(store.discard_if_new().unwrap());
        assert!(
            listing(root.path()).is_empty(),
            "{:?}",
            listing(root.path())
        );
        // An existing empty directory stays, empty; a refused import's
        // store goes too.
        let empty = root.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        let store = FilterStore::open(&empty).unwrap();
        assert!(store.import("t", b"not a filter file").is_err());
        assert!(store.discard_if_new().unwrap());
        assert!(listing(&empty).is_empty(), "{:?}", listing(&empty));
        // Not taken back: a store with a table, one this open did not make,
        // one that a clone still uses, one that holds a file not its own.
        let db = root.path().join("db");
        let store = FilterStore::open(&db).unwrap();
        store.create_table("t", TableSpec::new(10, 0.1)).unwrap();
        assert!(!store.discard_if_new().unwrap());
        let store = common::reopen(&db, "kept: it has a table");
        assert_eq!(names(&store), ["t"]);
        store.drop_table("t").unwrap();
        assert!(!store.discard_if_new().unwrap(), "an existing store");
        assert!(names(&common::reopen(&db, "kept: it existed")).is_empty());
        let other = root.path().join("other");
        let store = FilterStore::open(&other).unwrap();
        let clone = store.clone();
        assert!(!store.discard_if_new().unwrap(), "a clone is alive");
        std::fs::write(other.join("notes.txt"), b"mine").unwrap();
        assert!(!clone.discard_if_new().unwrap(), "a file not its own");
        assert!(other.join("notes.txt").is_file());
        assert!(names(&common::reopen(&other, "kept: not its own")).is_empty());
    })
}

#[test]
fn durable_writes_survive_reopen_and_stats_are_exact() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let cfg = StoreConfig::default().fold_threshold(3000);
        let all = keys("k", 10_000);
        {
            let store = FilterStore::open_with(dir.path(), cfg).unwrap();
            let t = store
                .create_table("t", TableSpec::new(10_000, 0.01).seed(7))
                .unwrap();
            for chunk in all.chunks(1000) {
                let mut b = WriteBatch::new();
                for k in chunk {
                    b.insert(k);
                }
                t.apply(&b, Durability::Durable).unwrap();
            }
            for k in &all[..2000] {
                t.remove(k).unwrap();
            }
            t.flush().unwrap();
            assert!(t.pending_log_ops() < 3000 + 4096);
        }
        let store = FilterStore::open_with(dir.path(), cfg).unwrap();
        let t = store.open_table("t").unwrap();
        assert!(all[2000..].iter().all(|k| t.contains(k)));
        let hits = t.contains_many(&all[2000..]);
        assert!(hits.iter().all(|&h| h));
        assert_eq!(t.live_keys(), 8000);
        let s = t.stats().unwrap();
        assert_eq!(s.live_keys, 8000);
        assert_eq!(s.generation, 1);
        assert_eq!(s.layout, filterstore::Layout::Blocked);
        assert_eq!(s.expected_keys, 10_000);
        assert_eq!(t.pending_log_ops(), 0, "stats folds the log");
        // The estimate follows the live keys: with 8,000 of the 10,000 keys the
        // table was sized for, the FP rate is below target.
        assert!(s.estimated_fp < 0.01, "{}", s.estimated_fp);
        // Measured FP on 100,000 absent keys agrees with the estimate within
        // 5σ of a binomial count (σ = sqrt(n·p)).
        let absent = keys("absent", 100_000);
        let fp = t.contains_many(&absent).iter().filter(|&&h| h).count() as f64;
        let expected = s.estimated_fp * 100_000.0;
        assert!(
            (fp - expected).abs() < 5.0 * expected.sqrt() + 5.0,
            "measured {fp}, estimated {expected}"
        );
        // The bits are exactly the non-zero counters.
        let counting = t.counting_snapshot().unwrap();
        let derived = counting.to_bit_filter().unwrap();
        use filterstore::BloomRead;
        for i in 0..t.params().num_words() {
            assert_eq!(t.bloom().word(i), derived.word(i));
        }
    })
}

#[test]
fn a_batch_with_a_bad_remove_changes_nothing() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let store = FilterStore::open(dir.path()).unwrap();
        let t = store
            .create_table("t", TableSpec::new(100_000, 0.001).seed(3))
            .unwrap();
        t.insert(b"present").unwrap();
        let before: Vec<u64> = {
            use filterstore::BloomRead;
            (0..t.params().num_words())
                .map(|i| t.bloom().word(i))
                .collect()
        };
        let mut b = WriteBatch::new();
        b.insert(b"new-1")
            .remove(b"present")
            .remove(b"never-inserted");
        match t.apply(&b, Durability::Durable) {
            Err(StoreError::NotPresent { index, table }) => {
                assert_eq!(index, Some(2));
                assert_eq!(table, "t");
            }
            other => panic!("{other:?}"),
        }
        assert!(t.contains(b"present"));
        assert!(!t.contains(b"new-1"));
        assert_eq!(t.live_keys(), 1);
        let after: Vec<u64> = {
            use filterstore::BloomRead;
            (0..t.params().num_words())
                .map(|i| t.bloom().word(i))
                .collect()
        };
        assert_eq!(before, after);
        assert!(matches!(
            t.remove(b"never-inserted"),
            Err(StoreError::NotPresent { index: None, .. })
        ));
        // Insert and remove of one key inside one batch is fine.
        let mut b = WriteBatch::new();
        b.insert(b"temp").remove(b"temp").remove(b"present");
        t.apply(&b, Durability::Durable).unwrap();
        assert_eq!(t.live_keys(), 0);
        assert!(!t.contains(b"present"));
        assert!(!t.contains(b"temp"));
    })
}

#[test]
fn unusable_directories_are_typed_errors() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        // A regular file where the directory should be.
        let file = dir.path().join("file");
        std::fs::write(&file, b"not a database").unwrap();
        assert!(matches!(
            FilterStore::open(&file),
            Err(StoreError::NotADirectory { .. })
        ));
        // A second open of a directory in use.
        let db = dir.path().join("db");
        let store = FilterStore::open(&db).unwrap();
        assert!(matches!(
            FilterStore::open(&db),
            Err(StoreError::AlreadyOpen { .. })
        ));
        drop(store);
        // A directory holding other files.
        let other = dir.path().join("other");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join("notes.txt"), b"mine").unwrap();
        assert!(matches!(
            FilterStore::open(&other),
            Err(StoreError::NotAFilterStore { .. })
        ));
        assert_eq!(
            std::fs::read_dir(&other).unwrap().count(),
            1,
            "nothing written"
        );
        // A sled database that is not a filterstore.
        let foreign = dir.path().join("foreign");
        {
            let db = sled::open(&foreign).unwrap();
            db.insert(b"k", b"v").unwrap();
            db.flush().unwrap();
        }
        // sled releases the foreign database's lock a moment after the drop.
        let result = common::open_with_retry(&foreign, filterstore::StoreConfig::default());
        assert!(
            matches!(result, Err(StoreError::NotAFilterStore { .. })),
            "{result:?}"
        );
    })
}

fn reopen_table(dir: &std::path::Path) -> Result<Table, StoreError> {
    reopen(dir).open_table("t")
}

#[test]
fn corrupt_records_are_typed_errors() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = FilterStore::open(dir.path()).unwrap();
            let t = store.create_table("t", TableSpec::new(1000, 0.01)).unwrap();
            for k in keys("k", 500) {
                t.insert(&k).unwrap();
            }
            t.fold().unwrap();
            t.flush().unwrap();
        }
        // A chunk in force was synced before its fold committed: a flipped
        // byte in it is damage, reported as such.
        let pages = table_file(dir.path(), "pages");
        let mut bytes = std::fs::read(&pages).unwrap();
        let slot = first_slot(&bytes);
        bytes[slot + 100] ^= 0x10;
        std::fs::write(&pages, &bytes).unwrap();
        match reopen_table(dir.path()) {
            Err(StoreError::Corrupt { what, source }) => {
                assert!(
                    what.contains("counter page") && what.contains("\"t\""),
                    "{what}"
                );
                assert!(matches!(
                    source,
                    filterstore::CodecError::ChecksumMismatch { .. }
                ));
            }
            other => panic!("{other:?}"),
        }
    })
}

#[test]
fn a_torn_log_tail_ends_the_log_there() {
    common::with_timeout(common::TEST_LIMIT, || {
        // A record that fails its checksum and that no later record says was
        // synced is what a cut leaves of a record written but not synced:
        // the log ends before it (docs/FORMAT.md §10), and the records before
        // it are all there.
        let dir = tempfile::tempdir().unwrap();
        {
            let store = FilterStore::open(dir.path()).unwrap();
            let t = store.create_table("t", TableSpec::new(1000, 0.01)).unwrap();
            let mut first = WriteBatch::new();
            for k in keys("a", 100) {
                first.insert(&k);
            }
            t.apply(&first, Durability::Durable).unwrap();
            let mut second = WriteBatch::new();
            for k in keys("b", 100) {
                second.insert(&k);
            }
            // Written, not synced.
            t.apply(&second, Durability::ProcessCrashSafe).unwrap();
        }
        let log = table_file(dir.path(), "log");
        let mut bytes = std::fs::read(&log).unwrap();
        // The records: the two batches; the second says that the first was
        // synced, so the close adds no seal.
        let starts = common::record_starts(&bytes);
        assert_eq!(starts.len(), 2, "{starts:?}");
        bytes[starts[1] + 30] ^= 1;
        std::fs::write(&log, &bytes).unwrap();
        let store = reopen(dir.path());
        let t = store.open_table("t").unwrap();
        assert!(keys("a", 100).iter().all(|k| t.contains(k)));
        assert_eq!(t.live_keys(), 100);
        // The writing open cut the torn tail away, durably.
        assert_eq!(std::fs::metadata(&log).unwrap().len(), starts[1] as u64);
        assert!(!t.health().unwrap().needs_regeneration());
    })
}

/// The page file or the log of the store's only table.
fn table_file(dir: &std::path::Path, ext: &str) -> std::path::PathBuf {
    let mut found: Vec<_> = std::fs::read_dir(dir.join("tables"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found.pop().unwrap()
}

/// The offset of the first chunk slot written (a frame of kind 5, "FSTR"
/// then version, then kind byte 5), after the two superblock copies.
fn first_slot(bytes: &[u8]) -> usize {
    (8192..bytes.len() - 9)
        .find(|&i| &bytes[i..i + 4] == b"FSTR" && bytes[i + 8] == 5)
        .expect("a written chunk")
}

#[test]
fn data_of_a_table_whose_drop_was_interrupted_is_collected() {
    common::with_timeout(common::TEST_LIMIT, || {
        // Simulate a crash between the catalog write (the commit point of a
        // drop) and the deletion of the table's files: drop the table, then
        // put its files back (docs/FORMAT.md §8). The next open deletes
        // the orphan files.
        let dir = tempfile::tempdir().unwrap();
        let tables = dir.path().join("tables");
        let aside = tempfile::tempdir().unwrap();
        {
            let store = FilterStore::open(dir.path()).unwrap();
            let t = store.create_table("t", TableSpec::new(1000, 0.01)).unwrap();
            t.insert(b"k").unwrap();
            t.flush().unwrap();
            store.create_table("kept", TableSpec::new(10, 0.1)).unwrap();
            for e in std::fs::read_dir(&tables).unwrap() {
                let e = e.unwrap();
                std::fs::copy(e.path(), aside.path().join(e.file_name())).unwrap();
            }
            drop(t);
            store.drop_table("t").unwrap();
        }
        let files = || std::fs::read_dir(&tables).unwrap().count();
        assert_eq!(files(), 2);
        for e in std::fs::read_dir(aside.path()).unwrap() {
            let e = e.unwrap();
            let to = tables.join(e.file_name());
            if !to.exists() {
                std::fs::copy(e.path(), to).unwrap();
            }
        }
        assert_eq!(files(), 4);
        assert_eq!(names(&reopen(dir.path())), ["kept"]);
        assert_eq!(files(), 2, "the orphan files were not collected");
    })
}

/// The (key, value) entries of a catalog file (docs/FORMAT.md §8).
fn catalog_entries(bytes: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    assert_eq!(&bytes[..4], b"FSCF");
    let count = u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
    let mut at = 12;
    let mut out = Vec::new();
    for _ in 0..count {
        let klen = u16::from_le_bytes(bytes[at..at + 2].try_into().unwrap()) as usize;
        let vlen = u32::from_le_bytes(bytes[at + 2..at + 6].try_into().unwrap()) as usize;
        let key = bytes[at + 10..at + 10 + klen].to_vec();
        let value = bytes[at + 10 + klen..at + 10 + klen + vlen].to_vec();
        out.push((key, value));
        at += 10 + klen + vlen;
    }
    assert_eq!(at, bytes.len());
    out
}

/// A catalog file holding `entries` (docs/FORMAT.md §8).
fn encode_catalog(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut out = b"FSCF\x01\x00\x00\x00".to_vec();
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for (k, v) in entries {
        out.extend_from_slice(&(k.len() as u16).to_le_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(k).to_le_bytes());
        out.extend_from_slice(k);
        out.extend_from_slice(v);
    }
    out
}

fn reopen(dir: &std::path::Path) -> FilterStore {
    common::reopen(dir, "reopen")
}

/// The catalog of format 6 as `docs/FORMAT.md` §8 gives it: a file holding
/// the header and the reference to its log, and the log holding one
/// record per commit (sequence numbers from 0, each op a put or a remove
/// of a catalog entry). A file without the reference is refused.
#[test]
fn the_catalog_file_and_its_log_read_as_the_format_says() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = FilterStore::open(dir.path()).unwrap();
            store.create_table("a", TableSpec::new(10, 0.1)).unwrap();
            store.create_table("b", TableSpec::new(10, 0.1)).unwrap();
            store.drop_table("a").unwrap();
        }
        let path = dir.path().join("catalog");
        let entries = catalog_entries(&std::fs::read(&path).unwrap());
        let keys: Vec<&[u8]> = entries.iter().map(|(k, _)| k.as_slice()).collect();
        assert_eq!(keys, [&b"\x00header"[..], b"\x00catalog-log"]);
        let log_ref = filterstore::decode_frame(&entries[1].1).unwrap();
        assert_eq!((log_ref.kind, log_ref.version), (FrameKind::Catalog, 4));
        assert_eq!(log_ref.body, 1u64.to_le_bytes());
        // The log: header (magic, version 1, reserved, id 1, reserved, CRC),
        // then records (body length, CRC of sequence number and body,
        // sequence number, body: op count, ops).
        let log = std::fs::read(dir.path().join("catalog.log")).unwrap();
        assert_eq!(&log[..8], b"FSCL\x01\x00\x00\x00");
        assert_eq!(log[8..16], 1u64.to_le_bytes());
        assert_eq!(log[20..24], crc32fast::hash(&log[..20]).to_le_bytes());
        let mut at = 24;
        let mut ops = Vec::new();
        for seq in 0..3u64 {
            let len = u32::from_le_bytes(log[at..at + 4].try_into().unwrap()) as usize;
            let crc = u32::from_le_bytes(log[at + 4..at + 8].try_into().unwrap());
            assert_eq!(crc, crc32fast::hash(&log[at + 8..at + 16 + len]));
            assert_eq!(log[at + 8..at + 16], seq.to_le_bytes());
            let body = &log[at + 16..at + 16 + len];
            let count = u32::from_le_bytes(body[..4].try_into().unwrap());
            let mut b = &body[4..];
            for _ in 0..count {
                let klen = u16::from_le_bytes([b[1], b[2]]) as usize;
                let vlen = u32::from_le_bytes(b[3..7].try_into().unwrap()) as usize;
                ops.push((b[0], b[7..7 + klen].to_vec()));
                b = &b[7 + klen + vlen..];
            }
            assert!(b.is_empty());
            at += 16 + len;
        }
        assert_eq!(at, log.len());
        let put = |k: &[u8]| (1u8, k.to_vec());
        assert_eq!(
            ops,
            [
                put(b"\x00header"),
                put(b"\x01a"),
                put(b"\x00header"),
                put(b"\x01b"),
                (2u8, b"\x01a".to_vec())
            ]
        );
        assert_eq!(names(&reopen(dir.path())), ["b"]);
        // The file without its log reference is not a catalog of format 6.
        std::fs::write(&path, encode_catalog(&entries[..1])).unwrap();
        match FilterStore::open(dir.path()) {
            Err(e @ StoreError::Corrupt { .. }) => {
                assert!(e.to_string().contains("log reference"), "{e}")
            }
            other => panic!("{other:?}"),
        }
    })
}
