//! Corruption of a format-3 store's own files, byte by byte: the catalog
//! file, a page file's superblock copy in force and its chunk slots, the
//! log. Every damaged byte that the store reads must give a typed error
//! (`Corrupt`, naming the file and the table where it can), never a panic
//! and never a table that opens and answers from damaged data — with one
//! exception by design: a log record that fails its checksum is what a cut
//! leaves of a record written but not synced, so the log ends before it
//! (docs/FORMAT.md §10; tested in `store_api.rs`).
//!
//! Bytes are sampled (every header byte, one payload byte in 37);
//! `FILTERSTORE_CORRUPTION_FULL=1` flips all of them.
#![cfg(feature = "store")]

mod common;

use filterstore::{Durability, FilterStore, StoreError, TableSpec, WriteBatch};
use std::path::{Path, PathBuf};

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:05}").into_bytes()
}

/// A store with tables "a" (folded, then 200 keys in its log) and "b".
fn make(dir: &Path) {
    let store = FilterStore::open(dir).unwrap();
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
    }
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
        // Table "a" made one fold: copy 1 holds fold 1, in force; copy 0
        // holds fold 0 (its creation), whose log records the fold emptied
        // away. Damage to copy 1 leaves copy 0 valid but stale, and the log
        // that starts past it says so. Copy 0 is not read: flips there are
        // harmless.
        // (The frame of a copy is 28 + 72 + 2 bytes here; the rest of its
        // 4 KiB is never read.)
        let n = flip_each(
            |d| file_of_a(d, "pages"),
            |_| 4096..4096 + 102,
            "superblock",
        );
        assert_eq!(
            n,
            sampled(102).len(),
            "a flip of the superblock in force was accepted"
        );
        assert_eq!(
            flip_each(|d| file_of_a(d, "pages"), |_| 0..102, "superblock"),
            0
        );
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
    // table's is framed as version 2 (docs/FORMAT.md § 11, § 13), and one
    // that says version 1 (its CRC made to hold) is corrupt.
    use filterstore::Layout;
    let dir = tempfile::tempdir().unwrap();
    {
        let store = FilterStore::open(dir.path()).unwrap();
        let spec = TableSpec::new(20_000, 0.01).layout(Layout::SplitBlock);
        store.create_table("a", spec).unwrap();
    }
    let path = file_of_a(dir.path(), "pages");
    let mut bytes = std::fs::read(&path).unwrap();
    // Copy 0, the one in force (no fold yet), framed 2/2.
    assert_eq!(&bytes[4..8], &[2, 0, 2, 0]);
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
