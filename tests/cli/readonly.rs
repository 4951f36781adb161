//! Read-only commands never create or modify anything, and a directory is a
//! store only with filterstore's marker (issue: `--db x list` used to replace
//! a user's `x/conf` with sled's, and `--db emptydir list` made a store).

use crate::cli_common;
use crate::store_fixture_common;

use cli_common::*;
use std::collections::BTreeMap;
use std::path::Path;

/// Every file under `dir` (relative path → contents), and the directories.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
            if e.file_type().unwrap().is_dir() {
                out.insert(format!("{rel}/"), Vec::new());
                stack.push(e.path());
            } else {
                out.insert(rel, std::fs::read(e.path()).unwrap());
            }
        }
    }
    out
}

const READ_ONLY: [&[&str]; 4] = [
    &["list"],
    &["stats"],
    &["query", "t"],
    &["export", "t", "--output", "/dev/null"],
];

/// Every read-only command fails with "not a filterstore database" and
/// leaves `dir` exactly as it was.
fn refused_untouched(dir: &Path) {
    let before = snapshot(dir);
    for args in READ_ONLY {
        let err = fails(&run(dir, args, b"k\n"));
        assert!(
            err.contains("not a filterstore database"),
            "{args:?}: {err}"
        );
        assert_eq!(snapshot(dir), before, "{args:?} changed {}", dir.display());
    }
}

#[test]
fn someone_elses_directory_is_refused_and_left_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let x = tmp.path().join("x");
    std::fs::create_dir(&x).unwrap();
    std::fs::write(x.join("conf"), "junk\n").unwrap();
    std::fs::write(x.join("blobs"), "keep\n").unwrap();
    refused_untouched(&x);
    // Writing commands refuse it too, before writing.
    let before = snapshot(&x);
    let err = fails(&run(&x, &["create", "t", "--expected", "10"], b""));
    assert!(err.contains("not a filterstore database"), "{err}");
    assert_eq!(snapshot(&x), before);
}

#[test]
fn another_programs_sled_database_is_refused_and_left_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("s");
    {
        let db = sled::open(&s).unwrap();
        db.insert(b"theirs", b"value").unwrap();
        db.flush().unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    refused_untouched(&s);
}

#[test]
fn an_empty_or_missing_directory_is_not_turned_into_a_store() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    refused_untouched(&empty);
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
    let missing = tmp.path().join("missing");
    for args in READ_ONLY {
        fails(&run(&missing, args, b"k\n"));
        assert!(!missing.exists(), "{args:?} created {}", missing.display());
    }
}

#[test]
fn a_store_is_marked_and_read_only_commands_leave_it_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    ok(&run(&db, &["create", "t", "--expected", "1000"], b""));
    ok(&run(&db, &["insert", "t"], &lines(0..100)));
    assert!(db.join(filterstore::MARKER_FILE).is_file());
    let before = snapshot(&db);
    let out = ok(&run(&db, &["list"], b""));
    assert_eq!(out.trim(), "t");
    let out = ok(&run(&db, &["query", "t"], b"key5\n"));
    assert_eq!(out, "key5\tmaybe\n");
    ok(&run(&db, &["stats", "t"], b""));
    ok(&run(&db, &["export", "t", "--output", "/dev/null"], b""));
    assert_eq!(
        snapshot(&db),
        before,
        "a read-only command changed the store"
    );
}

#[test]
fn a_store_from_before_the_marker_reads_and_gains_it_when_written() {
    let copy = store_fixture_common::copy_fixture();
    let dir = copy.path();
    assert!(!dir.join(filterstore::MARKER_FILE).exists());
    let before = snapshot(dir);
    let out = ok(&run(dir, &["list"], b""));
    assert_eq!(out, "blocked\nstandard\n");
    assert_eq!(snapshot(dir), before, "list changed the fixture copy");
    // A writing open adds the marker.
    let store = filterstore::FilterStore::open(dir).unwrap();
    drop(store);
    assert!(dir.join(filterstore::MARKER_FILE).is_file());
}
