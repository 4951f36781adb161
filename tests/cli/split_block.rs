//! `filterstore create --layout split-block`: a table of Parquet's SBBF,
//! whose export is a version-2 file of the split-block layout; a seed is
//! refused with one line.

use crate::cli_common;

use cli_common::*;

#[test]
fn create_a_split_block_table_and_export_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let args = [
        "create",
        "t",
        "--expected",
        "5000",
        "--layout",
        "split-block",
    ];
    let out = ok(&run(&db, &args, b""));
    assert!(out.contains("split-block layout"), "{out}");
    ok(&run(&db, &["insert", "t"], &lines(0..5000)));
    let out = ok(&run(&db, &["query", "t", "--count"], &lines(0..5000)));
    assert!(
        out.contains("maybe\t5000") && out.contains("absent\t0"),
        "{out}"
    );
    let file = dir.path().join("t.fsf");
    ok(&run(
        &db,
        &["export", "t", "--output", file.to_str().unwrap()],
        b"",
    ));
    let bytes = std::fs::read(&file).unwrap();
    assert_eq!(&bytes[4..8], &[2, 0, 2, 0], "version 2, min reader 2");
    let d = filterstore::decode_filter(&bytes).unwrap();
    assert_eq!(d.params().layout(), filterstore::Layout::SplitBlock);
    assert!((0..5000).all(|i| d.contains(format!("key{i}").as_bytes())));
    let err = fails(&run(
        &db,
        &[
            "create",
            "u",
            "--expected",
            "10",
            "--layout",
            "split-block",
            "--seed",
            "3",
        ],
        b"",
    ));
    assert!(err.contains("xxh64 seed 0"), "{err}");
}
