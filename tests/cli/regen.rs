//! The `regenerate` and `set` commands and the health figures of `stats`,
//! run as a separate process.

use crate::cli_common;

use std::path::Path;
use std::process::Output;

fn run(db: &Path, args: &[&str]) -> Output {
    cli_common::run(db, args, b"")
}

/// Standard output of a command that must succeed.
fn ok(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {err}", out.status);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(db: &Path) -> serde_json::Value {
    serde_json::from_str(&ok(&run(db, &["stats", "t", "--json"]))).unwrap()
}

#[test]
fn regenerate_set_and_health_in_stats() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let keys = dir.path().join("keys.txt");
    let text: String = (0..20_000).map(|i| format!("k{i}\n")).collect();
    std::fs::write(&keys, text).unwrap();
    let keys = keys.to_str().unwrap();
    ok(&run(
        &db,
        &["create", "t", "--expected", "2000", "--fp", "0.01"],
    ));
    ok(&run(&db, &["insert", "t", keys]));
    // Overloaded 10×: the drift is reported, in text and JSON.
    let v = json(&db);
    assert_eq!(v["needs_regeneration"], true, "{v}");
    assert!(v["reason"].as_str().unwrap().contains("saturated"), "{v}");
    assert_eq!(v["observed_trials"], 0);
    let text = ok(&run(&db, &["stats"]));
    assert!(text.contains("t: needs regeneration:"), "{text}");

    let out = ok(&run(&db, &["regenerate", "t", keys]));
    assert!(out.contains("generation 1 -> 2, 20000 keys read"), "{out}");
    assert!(!out.contains("note:"), "{out}");
    let v = json(&db);
    assert_eq!(v["needs_regeneration"], false, "{v}");
    assert_eq!(v["reason"], serde_json::Value::Null);
    assert_eq!(v["generation"], 2);
    assert_eq!(v["expected_keys"], 20_000);
    let q = ok(&run(&db, &["query", "t", keys, "--count"]));
    assert!(q.contains("absent\t0"), "no false negative: {q}");

    ok(&run(&db, &["set", "t", "--fp", "0.001"]));
    let v = json(&db);
    assert_eq!(v["needs_regeneration"], true);
    assert!(v["reason"].as_str().unwrap().contains("changed"), "{v}");
    // A key file that holds more keys than the table: said, in one line.
    let stale = dir.path().join("stale.txt");
    let text: String = (0..21_000).map(|i| format!("k{i}\n")).collect();
    std::fs::write(&stale, text).unwrap();
    let out = ok(&run(&db, &["regenerate", "t", stale.to_str().unwrap()]));
    assert!(
        out.contains("note: the key file held 21000 keys, the table counted 20000"),
        "{out}"
    );
    ok(&run(&db, &["regenerate", "t", keys]));
    assert_eq!(json(&db)["needs_regeneration"], false);

    // Errors: one line, non-zero status, nothing changed.
    let bad = run(&db, &["regenerate", "t", "/nonexistent/keys"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("cannot read"));
    let bad = run(&db, &["set", "t", "--fp", "3"]);
    assert!(!bad.status.success());
    assert_eq!(json(&db)["generation"], 4);
    assert_eq!(json(&db)["target_fp"], 0.001);
}
