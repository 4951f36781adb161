//! A full disk, simulated with a file-size limit (`harness = false`: the
//! child mode is this binary's `main`, not a test that passes trivially):
//! the child process (this test binary in child mode) runs under `ulimit -f` with `SIGXFSZ` ignored,
//! so every write past the limit fails with `EFBIG`, as writes to a full
//! disk fail with `ENOSPC`. It writes durable batches until the store
//! returns an error, which must be typed (no panic, normal exit). The parent
//! then reopens the store without the limit: it must open, and every key of
//! every batch reported durable must be present.
//!
//! Also here: a read-only database directory (only meaningful when not
//! running as root; as root, permissions do not stop writes and that part
//! says so and is skipped).
#![cfg(feature = "store")]

use filterstore::{Durability, FilterStore, StoreError, TableSpec, WriteBatch};
use std::process::Command;
use std::time::Duration;

mod common;

const CHILD_ENV: &str = "FILTERSTORE_DISK_FULL_CHILD";

fn batch(b: u32) -> WriteBatch {
    let mut w = WriteBatch::new();
    for i in 0..1000 {
        w.insert(format!("b{b}-{i}").as_bytes());
    }
    w
}

/// Each test may take this long before it counts as a hang.
const LIMIT: Duration = Duration::from_secs(600);

fn main() {
    match std::env::var(CHILD_ENV) {
        Ok(dir) => disk_full_child(&dir),
        Err(_) => common::run_main(
            &[
                (
                    "a_full_disk_is_a_typed_error_and_loses_nothing_durable",
                    a_full_disk_is_a_typed_error_and_loses_nothing_durable,
                ),
                (
                    "a_read_only_directory_is_a_typed_error",
                    a_read_only_directory_is_a_typed_error,
                ),
            ],
            LIMIT,
        ),
    }
}

/// Child mode (the parent sets the environment variable): durable batches
/// until the store refuses one.
fn disk_full_child(dir: &str) {
    let store = match FilterStore::open(dir) {
        Ok(s) => s,
        Err(e) => {
            println!("error at open: {e}");
            return;
        }
    };
    let t = match store.create_table("t", TableSpec::new(1_000_000, 0.01).seed(2)) {
        Ok(t) => t,
        Err(e) => {
            println!("error at create: {e}");
            return;
        }
    };
    for b in 0..100_000 {
        match t.apply(&batch(b), Durability::Durable) {
            Ok(()) => println!("durable {b}"),
            Err(e) => {
                let kind = match e {
                    StoreError::Io { .. } => "io",
                    StoreError::Storage { .. } => "storage",
                    _ => "other",
                };
                println!("error {kind}: {e}");
                return;
            }
        }
    }
}

fn a_full_disk_is_a_typed_error_and_loses_nothing_durable() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let exe = std::env::current_exe().unwrap();
    // 16 MiB in 512-byte blocks: room for the store to open and take a few
    // hundred durable batches, then writes fail.
    let script = format!("trap '' XFSZ; ulimit -f 32768; exec \"{}\"", exe.display());
    let out = Command::new("sh")
        .args(["-c", &script])
        .env(CHILD_ENV, &db)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the child must end normally, not panic or die: {}\n{stdout}\n{stderr}",
        out.status
    );
    let error = stdout
        .lines()
        .find(|l| l.contains("error"))
        .unwrap_or_else(|| panic!("the child never saw an error: {stdout}"));
    assert!(
        error.contains("error io:") || error.contains("error storage:"),
        "untyped error: {error}"
    );
    let durable: Vec<u32> = stdout
        .lines()
        .filter_map(|l| l.split("durable ").nth(1))
        .map(|n| n.trim().parse().unwrap())
        .collect();
    assert!(
        durable.len() > 10,
        "too few durable batches before the disk filled: {stdout}"
    );
    eprintln!("{} durable batches, then: {}", durable.len(), error);

    let store = common::reopen(&db, "after the disk filled");
    let t = store.open_table("t").unwrap();
    for &b in &durable {
        for i in 0..1000 {
            assert!(
                t.contains(format!("b{b}-{i}").as_bytes()),
                "durable key b{b}-{i} lost"
            );
        }
    }
    // With space again, the store takes writes.
    t.apply(&batch(1_000_000), Durability::Durable).unwrap();
}

fn a_read_only_directory_is_a_typed_error() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    if std::fs::write(ro.join("probe"), b"x").is_ok() {
        eprintln!(
            "running as root: directory permissions do not stop writes; read-only case skipped"
        );
        return;
    }
    match FilterStore::open(ro.join("db")) {
        Err(StoreError::Io { .. }) => {}
        other => panic!("{other:?}"),
    }
}
