//! `export --output PATH` replaces a regular file atomically and clobbers
//! nothing else: not a device, not a pipe, not a symbolic link, not a file
//! that happens to sit where a temporary file would go. (Issue: as root,
//! `export --output /dev/null` renamed its temporary file over `/dev/null`,
//! leaving a regular file there, into which every later `>/dev/null` of the
//! machine wrote and from which every reader of `/dev/null` then read.)

use crate::cli_common;

use cli_common::*;
use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// A store with one table of 100 keys, and the bytes its export writes.
fn store_and_export(tmp: &Path) -> (PathBuf, Vec<u8>) {
    let db = tmp.join("db");
    ok(&run(&db, &["create", "t", "--expected", "1000"], b""));
    ok(&run(&db, &["insert", "t"], &lines(0..100)));
    let reference = tmp.join("reference.fsf");
    export(&db, &reference);
    let bytes = std::fs::read(&reference).unwrap();
    assert!(bytes.len() > 100, "an export of 100 keys");
    (db, bytes)
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `export t --output to`, which must succeed.
fn export(db: &Path, to: &Path) {
    ok(&run(db, &["export", "t", "--output", path_str(to)], b""));
}

/// What `p` itself is (a link is not followed).
fn kind(p: &Path) -> std::fs::FileType {
    std::fs::symlink_metadata(p).unwrap().file_type()
}

#[test]
fn export_to_dev_null_leaves_the_device() {
    let null = Path::new("/dev/null");
    if !std::fs::metadata(null).is_ok_and(|m| m.file_type().is_char_device()) {
        println!("skipped: /dev/null is not a character device here");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (db, _) = store_and_export(tmp.path());
    export(&db, null);
    assert!(
        kind(null).is_char_device(),
        "/dev/null was replaced by {:?}",
        kind(null)
    );
}

/// A named pipe is written in place: the reader gets the export's bytes and
/// the pipe is still a pipe.
#[test]
fn export_to_a_pipe_writes_through_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (db, want) = store_and_export(tmp.path());
    let fifo = tmp.path().join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .map(|s| s.success());
    if made.ok() != Some(true) {
        println!("skipped: mkfifo is not available");
        return;
    }
    // The test holds the reading end, opened without waiting for a writer;
    // the export (about 1 KB) fits in the pipe's buffer, so the export never
    // waits for the test and the test reads after it ended: no thread, no
    // way to hang. Had the export replaced the pipe, nothing would be read.
    let mut pipe = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap()
    };
    export(&db, &fifo);
    let mut got = Vec::new();
    pipe.read_to_end(&mut got).unwrap();
    assert_eq!(got, want);
    assert!(kind(&fifo).is_fifo());
}

/// Through a symbolic link, the file it names is replaced and the link stays.
#[test]
fn export_through_a_symlink_replaces_the_file_it_names() {
    let tmp = tempfile::tempdir().unwrap();
    let (db, want) = store_and_export(tmp.path());
    let real = tmp.path().join("real.fsf");
    std::fs::write(&real, b"old").unwrap();
    let link = tmp.path().join("link.fsf");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    export(&db, &link);
    assert!(kind(&link).is_symlink());
    assert_eq!(std::fs::read(&real).unwrap(), want);
}

/// Files beside the target, whatever their names, are left alone; an
/// existing regular target is replaced whole.
#[test]
fn export_leaves_neighbours_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let (db, want) = store_and_export(tmp.path());
    let out = tmp.path().join("out.fsf");
    std::fs::write(&out, b"previous export").unwrap();
    let neighbour = tmp.path().join("out.fsf.tmp");
    std::fs::write(&neighbour, b"keep me").unwrap();
    export(&db, &out);
    assert_eq!(std::fs::read(&out).unwrap(), want);
    assert_eq!(std::fs::read(&neighbour).unwrap(), b"keep me");
    let names: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp") && n != "out.fsf.tmp")
        .collect();
    assert!(names.is_empty(), "temporary files left: {names:?}");
}

/// A pipe that no process reads is an error at once, not a wait forever
/// (the export used to block in `open` until a reader came).
#[test]
fn export_to_a_pipe_without_a_reader_fails_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let (db, _) = store_and_export(tmp.path());
    let fifo = tmp.path().join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .map(|s| s.success());
    if made.ok() != Some(true) {
        println!("skipped: mkfifo is not available");
        return;
    }
    let t0 = std::time::Instant::now();
    let o = run(&db, &["export", "t", "--output", path_str(&fifo)], b"");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no process reads"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(t0.elapsed() < std::time::Duration::from_secs(60));
    assert!(kind(&fifo).is_fifo());
}

/// A dangling symbolic link is followed as documented: the file it names is
/// created, the link stays a link.
#[test]
fn export_through_a_dangling_symlink_creates_the_file_it_names() {
    let tmp = tempfile::tempdir().unwrap();
    let (db, want) = store_and_export(tmp.path());
    std::fs::create_dir(tmp.path().join("sub")).unwrap();
    let link = tmp.path().join("link.fsf");
    // Relative to the link's directory.
    std::os::unix::fs::symlink("sub/new.fsf", &link).unwrap();
    export(&db, &link);
    assert!(kind(&link).is_symlink());
    assert_eq!(std::fs::read(tmp.path().join("sub/new.fsf")).unwrap(), want);
}

/// The target's permissions are kept: a 0600 export stays 0600 (a new
/// temporary file would otherwise bring the umask's 0644).
#[test]
fn export_keeps_the_targets_mode() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let (db, want) = store_and_export(tmp.path());
    let out = tmp.path().join("private.fsf");
    std::fs::write(&out, b"old").unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o600)).unwrap();
    export(&db, &out);
    assert_eq!(std::fs::read(&out).unwrap(), want);
    let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}
