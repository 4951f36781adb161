//! Corruption of a store's own files, byte by byte: the catalog file, a
//! page file's superblock copy in force and its chunk slots, the log. Every
//! damaged byte that the store reads must give a typed error (`Corrupt`,
//! naming the file and the table where it can), never a panic and never a
//! table that opens and answers "absent" from damaged data. The log is
//! read differently by design: a record that fails its checksum is what a
//! cut leaves of a record written but not synced, so the log ends before it
//! (docs/FORMAT.md §10; tested in `api.rs`) — unless a later record
//! says it was synced, or a record belongs to another table's log: then
//! the table opens *damaged*, answering "maybe" for every key until it is
//! regenerated (tested here).
//!
//! Bytes are sampled (every header byte, one payload byte in 37);
//! `FILTERSTORE_CORRUPTION_FULL=1` flips all of them.

use crate::common;

use filterstore::{
    DriftReason, Durability, FilterStore, RegenOptions, StoreError, Table, TableSpec, WriteBatch,
};
use std::path::{Path, PathBuf};

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:05}").into_bytes()
}

/// A store with tables "a" (folded, then 200 keys in its log) and "b",
/// closed cleanly: each table's close commits a superblock copy that claims
/// its log's 200 keys (`docs/FORMAT.md` § 11).
fn make(dir: &Path) {
    drop(make_open(dir));
}

/// The store of [`make`] as a crash leaves it: its files copied while it
/// and its tables are open (no close, so no claim: the fold's superblock
/// copy is in force).
fn make_crashed(dir: &Path) {
    let open = tempfile::tempdir().unwrap();
    let store = make_open(open.path());
    copy_dir(open.path(), dir);
    drop(store);
}

/// The writes of [`make`], the store and its tables left open (a table's
/// last handle dropped closes it).
fn make_open(dir: &Path) -> (FilterStore, Vec<Table>) {
    let store = FilterStore::open(dir).unwrap();
    let mut tables = Vec::new();
    for name in ["a", "b"] {
        let t = store
            .create_table(name, TableSpec::new(20_000, 0.01).seed(9))
            .unwrap();
        let mut w = WriteBatch::new();
        for i in 0..1000 {
            w.insert(&key(i));
        }
        t.apply(&w, Durability::Durable).unwrap();
        t.fold().unwrap();
        let mut w = WriteBatch::new();
        for i in 1000..1200 {
            w.insert(&key(i));
        }
        t.apply(&w, Durability::Durable).unwrap();
        tables.push(t);
    }
    (store, tables)
}

fn sampled(len: usize) -> Vec<usize> {
    let full = std::env::var_os("FILTERSTORE_CORRUPTION_FULL").is_some();
    (0..len)
        .filter(|&i| full || i < 96 || i % 37 == 0)
        .collect()
}

/// The file of table "a" with extension `ext`.
fn file_of_a(dir: &Path, ext: &str) -> PathBuf {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("tables"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v.remove(0) // table "a" has the smaller id
}

/// Opens the damaged copy: `true` if the store and both tables opened with
/// every key, `false` if the store or a table was refused with a typed
/// error naming `word`; panics on anything else (a panic inside the store,
/// a table answering from damaged data, an untyped error).
fn outcome(dir: &Path, word: &str) -> bool {
    let opened = FilterStore::open(dir).and_then(|s| {
        let a = s.open_table("a")?;
        let b = s.open_table("b")?;
        Ok((a, b))
    });
    match opened {
        Ok((a, b)) => {
            for i in 0..1200 {
                assert!(
                    a.contains(&key(i)),
                    "{word}: table a answers without key {i}"
                );
                assert!(
                    b.contains(&key(i)),
                    "{word}: table b answers without key {i}"
                );
            }
            true
        }
        Err(e @ (StoreError::Corrupt { .. } | StoreError::UnsupportedFormat { .. })) => {
            let text = e.to_string();
            assert!(
                text.contains(word) || matches!(e, StoreError::UnsupportedFormat { .. }),
                "{text}"
            );
            assert!(!text.contains('\n'), "{text}");
            false
        }
        Err(other) => panic!("{word}: untyped outcome {other:?}"),
    }
}

/// Flips each sampled byte of `file` (chosen in a fresh store), returning
/// how many flips were refused.
fn flip_each(
    file: impl Fn(&Path) -> PathBuf,
    range: impl Fn(usize) -> std::ops::Range<usize>,
    word: &str,
) -> usize {
    flip_each_of(make, file, range, word)
}

/// [`flip_each`] in a store made by `make`.
fn flip_each_of(
    make: fn(&Path),
    file: impl Fn(&Path) -> PathBuf,
    range: impl Fn(usize) -> std::ops::Range<usize>,
    word: &str,
) -> usize {
    let base = tempfile::tempdir().unwrap();
    make(base.path());
    let bytes = std::fs::read(file(base.path())).unwrap();
    let mut refused = 0;
    let r = range(bytes.len());
    for i in sampled(r.len()).into_iter().map(|i| r.start + i) {
        let copy = tempfile::tempdir().unwrap();
        copy_dir(base.path(), copy.path());
        let target = file(copy.path());
        let mut b = bytes.clone();
        b[i] ^= 0x5a;
        std::fs::write(&target, &b).unwrap();
        if !outcome(copy.path(), word) {
            refused += 1;
        }
    }
    refused
}

fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

#[test]
fn every_damaged_byte_of_the_catalog_file_is_refused() {
    common::with_timeout(common::TEST_LIMIT, || {
        // Every byte of the catalog file is read: the container's header,
        // lengths and key checksums, and the framed records.
        let n = flip_each(|d| d.join("catalog"), |len| 0..len, "catalog");
        let total = {
            let d = tempfile::tempdir().unwrap();
            make(d.path());
            sampled(std::fs::read(d.path().join("catalog")).unwrap().len()).len()
        };
        assert_eq!(n, total, "some flips of the catalog file were accepted");
    })
}

#[test]
fn a_damaged_superblock_in_force_is_refused() {
    common::with_timeout(common::TEST_LIMIT, || {
        // As a crash leaves table "a" after its fold: copy 1 holds fold 1,
        // in force; copy 0 holds fold 0 (its creation), whose log records
        // the fold emptied away. Damage to copy 1 leaves copy 0 valid but
        // stale, and the log that starts past it says so. Copy 0 is not
        // read: flips there are harmless.
        // (The frame of a copy is 28 + 80 + 2 bytes here; the rest of its
        // 4 KiB is never read.)
        let pages = |d: &Path| file_of_a(d, "pages");
        let n = flip_each_of(make_crashed, pages, |_| 4096..4096 + 110, "superblock");
        assert_eq!(
            n,
            sampled(110).len(),
            "a flip of the superblock in force was accepted"
        );
        assert_eq!(
            flip_each_of(make_crashed, pages, |_| 0..110, "superblock"),
            0
        );
    })
}

/// After a clean close, copy 0 holds the close's claim (fold 2: the fold's
/// copy with `durable_seq` past its log's 200 keys), in force, and copy 1
/// the fold. Damage to the claim brings back the fold's copy, whose log is
/// all there: every key answers. Damage to copy 1 is not read.
#[test]
fn a_damaged_claim_of_a_clean_close_falls_back_to_the_fold_losing_nothing() {
    common::with_timeout(common::TEST_LIMIT, || {
        let pages = |d: &Path| file_of_a(d, "pages");
        assert_eq!(flip_each(pages, |_| 0..110, "superblock"), 0);
        assert_eq!(flip_each(pages, |_| 4096..4096 + 110, "superblock"), 0);
    })
}

#[test]
fn a_damaged_chunk_in_force_is_refused() {
    common::with_timeout(common::TEST_LIMIT, || {
        let pages = |d: &Path| file_of_a(d, "pages");
        let base = tempfile::tempdir().unwrap();
        make(base.path());
        let bytes = std::fs::read(pages(base.path())).unwrap();
        // The first written slot after the two superblock copies.
        let slot = (8192..bytes.len() - 9)
            .find(|&i| &bytes[i..i + 4] == b"FSTR" && bytes[i + 8] == 5)
            .unwrap();
        let n = flip_each(pages, |_| slot..slot + 400, "counter page");
        assert!(n >= sampled(400).len() - 2, "only {n} flips refused");
    })
}

#[test]
fn a_truncated_page_file_is_refused() {
    common::with_timeout(common::TEST_LIMIT, || {
        let base = tempfile::tempdir().unwrap();
        make(base.path());
        let len = std::fs::metadata(file_of_a(base.path(), "pages"))
            .unwrap()
            .len();
        for cut in [0, 100, 4096, 8192 + 50, len / 2, len - 1] {
            let copy = tempfile::tempdir().unwrap();
            copy_dir(base.path(), copy.path());
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(file_of_a(copy.path(), "pages"))
                .unwrap();
            f.set_len(cut).unwrap();
            drop(f);
            assert!(!outcome(copy.path(), "page file"), "cut at {cut} accepted");
        }
    })
}

#[test]
fn a_split_block_superblock_relabelled_as_version_1_is_refused() {
    // The superblock names the table's layout and hash: a split-block
    // table's needs a reader of version 2 at least (docs/FORMAT.md § 11,
    // § 13; it is written as version 5, which says where the log starts
    // and how far it was durable), and one that says version 1 (its CRC
    // made to hold) is corrupt.
    use filterstore::Layout;
    let dir = tempfile::tempdir().unwrap();
    {
        let store = FilterStore::open(dir.path()).unwrap();
        let spec = TableSpec::new(20_000, 0.01).layout(Layout::SplitBlock);
        store.create_table("a", spec).unwrap();
    }
    let path = file_of_a(dir.path(), "pages");
    let mut bytes = std::fs::read(&path).unwrap();
    // Copy 0, the one in force (no fold yet), framed 5/5.
    assert_eq!(&bytes[4..8], &[5, 0, 5, 0]);
    let body = u64::from_le_bytes(bytes[12..20].try_into().unwrap()) as usize;
    bytes[4..8].copy_from_slice(&[1, 0, 1, 0]);
    let crc = crc32fast::hash(&bytes[..24 + body]);
    bytes[24 + body..28 + body].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let store = FilterStore::open(dir.path()).unwrap();
    match store.open_table("a") {
        Err(e @ StoreError::Corrupt { .. }) => assert!(e.to_string().contains("version"), "{e}"),
        other => panic!("{other:?}"),
    }
}

/// Defect 8 of issue 28: a log record that was synced and later rots
/// ended recovery as a torn tail does, and the table opened without it and
/// without every acknowledged record after it. Every sampled byte of table
/// "a"'s log (a fold's empty record, a durable batch of 200 keys, the seal
/// of the close) flipped: the table opens answering every key, or is
/// refused with a typed error.
#[test]
fn a_synced_log_record_that_rots_is_never_a_false_negative() {
    common::with_timeout(common::TEST_LIMIT, || {
        flip_each(|d| file_of_a(d, "log"), |len| 0..len, "log");
    })
}

/// Defect 8, what the damaged table does: answers "maybe" for every key
/// (measured on absent keys), says it needs regeneration and why, refuses
/// writes and counting exports with a typed error, keeps the evidence
/// across reopens, and is healed by a regeneration from its keys.
#[test]
fn a_damaged_log_leaves_a_table_that_answers_maybe_until_regenerated() {
    common::with_timeout(common::TEST_LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        make(dir.path());
        let log = file_of_a(dir.path(), "log");
        let mut bytes = std::fs::read(&log).unwrap();
        let starts = common::record_starts(&bytes);
        assert_eq!(starts.len(), 3, "{starts:?}");
        // An operation's byte inside the batch of 200 keys.
        bytes[starts[1] + 24 + 40 + 17 * 100 + 3] ^= 0x5a;
        std::fs::write(&log, &bytes).unwrap();
        for round in 0..2 {
            let store = common::reopen(dir.path(), "a damaged log");
            let a = store.open_table("a").unwrap();
            assert!((0..1200).all(|i| a.contains(&key(i))), "round {round}");
            let maybe = (0..1000)
                .filter(|i| a.contains(format!("absent-{i}").as_bytes()))
                .count();
            assert_eq!(maybe, 1000, "every lookup answers maybe");
            let h = a.health().unwrap();
            assert!(
                matches!(h.reason(), Some(DriftReason::Damaged { reason }) if reason.contains("durable")),
                "{h:?}"
            );
            assert!(matches!(
                a.insert(b"new"),
                Err(StoreError::NeedsRegeneration { .. })
            ));
            assert!(matches!(
                a.counting_snapshot(),
                Err(StoreError::NeedsRegeneration { .. })
            ));
            // The other table is not touched.
            let b = store.open_table("b").unwrap();
            b.insert(b"new").unwrap();
            assert!(!b.health().unwrap().needs_regeneration());
        }
        let store = common::reopen(dir.path(), "before the regeneration");
        let a = store.open_table("a").unwrap();
        let keys: Vec<Vec<u8>> = (0..1200).map(key).collect();
        let source = || keys.iter().map(Ok::<_, std::io::Error>);
        let r = a.regenerate(source, &RegenOptions::default()).unwrap();
        assert_eq!(r.keys_read, 1200);
        assert!(!a.health().unwrap().needs_regeneration());
        a.insert(b"new").unwrap();
        a.flush().unwrap();
        drop((a, store));
        let store = common::reopen(dir.path(), "after the regeneration");
        let a = store.open_table("a").unwrap();
        assert!((0..1200).all(|i| a.contains(&key(i))) && a.contains(b"new"));
        let maybe = (0..1000)
            .filter(|i| a.contains(format!("absent-{i}").as_bytes()))
            .count() as f64;
        // Back to its rate: within 5 sigma of what its parameters give.
        let e = a.params().expected_fp(1201) * 1000.0;
        assert!(
            maybe <= e + 5.0 * e.sqrt(),
            "{maybe} of 1000 absent keys answer maybe"
        );
    })
}

/// Records bound to their table and generation (issue 28): a log record
/// copied from another table's log (same parameters, same seed, same
/// sequence numbers) was taken as the table's own: its keys appeared, and
/// the table's own records, overwritten, vanished without a word (a false
/// negative for every one of its keys). Now such a record is never
/// applied: the table answers "maybe" until it is regenerated.
#[test]
fn a_log_record_of_another_table_is_refused() {
    common::with_timeout(common::TEST_LIMIT, || {
        for splice in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            {
                let store = FilterStore::open(dir.path()).unwrap();
                for name in ["x", "y"] {
                    let t = store
                        .create_table(name, TableSpec::new(10_000, 0.01).seed(4))
                        .unwrap();
                    let mut w = WriteBatch::new();
                    for i in 0..100 {
                        w.insert(format!("{name}-{i}").as_bytes());
                    }
                    t.apply(&w, Durability::Durable).unwrap();
                }
            }
            let logs: Vec<PathBuf> = {
                let mut v: Vec<PathBuf> = std::fs::read_dir(dir.path().join("tables"))
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .filter(|p| p.extension().is_some_and(|e| e == "log"))
                    .collect();
                v.sort();
                v
            };
            let theirs = std::fs::read(&logs[1]).unwrap();
            let copied = if splice {
                // y's second record (its seal, numbered 1) after x's first.
                let mine = std::fs::read(&logs[0]).unwrap();
                let (m, t) = (common::record_starts(&mine), common::record_starts(&theirs));
                [&mine[..m[1]], &theirs[t[1]..]].concat()
            } else {
                theirs
            };
            std::fs::write(&logs[0], copied).unwrap();
            let store = common::reopen(dir.path(), "a copied log");
            let x = store.open_table("x").unwrap();
            assert!(
                (0..100).all(|i| x.contains(format!("x-{i}").as_bytes())),
                "splice {splice}: x answers without one of its keys"
            );
            assert!(
                x.needs_regeneration().unwrap(),
                "splice {splice}: a record of y taken for x's"
            );
        }
    })
}
