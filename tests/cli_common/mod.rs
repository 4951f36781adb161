//! Running the `filterstore` binary in tests: shared by `tests/cli.rs` and
//! `tests/cli_files.rs`.
#![allow(dead_code)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_filterstore"));
    c.env_remove("FILTERSTORE_DB");
    c
}

pub fn run(db: &Path, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = bin()
        .arg("--db")
        .arg(db)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A command that fails before reading its input closes the pipe: that
    // is the command's outcome to check, not a test error.
    if let Err(e) = child.stdin.take().unwrap().write_all(stdin) {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
    }
    child.wait_with_output().unwrap()
}

pub fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "status {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// A failure: non-zero status, one line on stderr, no panic.
pub fn fails(out: &Output) -> String {
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr.clone()).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.starts_with("filterstore: "), "{err}");
    err
}

pub fn lines(range: std::ops::Range<u32>) -> Vec<u8> {
    range
        .map(|i| format!("key{i}\n"))
        .collect::<String>()
        .into_bytes()
}
