//! A full disk, simulated with a file-size limit (`harness = false`: the
//! child mode is this binary's `main`, not a test that passes trivially):
//! the child process (this test binary in child mode) runs under `ulimit -f` with `SIGXFSZ` ignored,
//! so every write past the limit fails with `EFBIG`, as writes to a full
//! disk fail with `ENOSPC`. It writes durable batches until the store
//! returns an error, which must be typed (no panic, normal exit). The parent
//! then reopens the store without the limit: it must open, and every key of
//! every batch reported durable must be present.
//!
//! Then the same on a real full filesystem: a 20 MB tmpfs (mounting needs
//! root; elsewhere that part says so and is skipped). There sled 0.34.7 used
//! to hang in every command once the disk was full; now each call returns
//! within the store's I/O deadline, lookups of the open table keep working,
//! the process exits normally, a reopen on the full disk ends promptly, and
//! with space again every durable key is there.
//!
//! Also here: a read-only database directory (only meaningful when not
//! running as root; as root, permissions do not stop writes and that part
//! says so and is skipped).
use filterstore::{Durability, FilterStore, StoreConfig, StoreError, TableSpec, WriteBatch};
use std::process::Command;
use std::time::Duration;

use crate::common;

const CHILD_ENV: &str = "FILTERSTORE_DISK_FULL_CHILD";
const CHILD_MODE_ENV: &str = "FILTERSTORE_DISK_FULL_MODE";

fn batch(b: u32) -> WriteBatch {
    let mut w = WriteBatch::new();
    for i in 0..1000 {
        w.insert(format!("b{b}-{i}").as_bytes());
    }
    w
}

/// Each test may take this long before it counts as a hang.
const LIMIT: Duration = Duration::from_secs(600);

/// The tests, each with its time limit (run by `main`).
pub(crate) const TESTS: &[(&str, fn(), Duration)] = &[
    (
        "a_full_disk_is_a_typed_error_and_loses_nothing_durable",
        a_full_disk_is_a_typed_error_and_loses_nothing_durable,
        LIMIT,
    ),
    (
        "a_full_tmpfs_ends_every_call_promptly_and_loses_nothing_durable",
        a_full_tmpfs_ends_every_call_promptly_and_loses_nothing_durable,
        LIMIT,
    ),
    (
        "a_read_only_directory_is_a_typed_error",
        a_read_only_directory_is_a_typed_error,
        LIMIT,
    ),
];

/// Runs a child mode if the parent set its variable; returns whether it did
/// (then `main` is done).
pub(crate) fn child_mode() -> bool {
    match std::env::var(CHILD_ENV) {
        Ok(dir) if std::env::var(CHILD_MODE_ENV).as_deref() == Ok("reopen") => reopen_child(&dir),
        Ok(dir) => disk_full_child(&dir),
        Err(_) => return false,
    }
    true
}

/// Child mode (the parent sets the environment variable): durable batches
/// until the store refuses one.
/// The child's I/O deadline: short, so that a call sled never finishes
/// costs the test seconds.
const IO_TIMEOUT: Duration = Duration::from_secs(3);

fn disk_full_child(dir: &str) {
    let config = StoreConfig::default().io_timeout(IO_TIMEOUT);
    let store = match FilterStore::open_with(dir, config) {
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
                // Lookups of the open table need no disk.
                let lost = (0..b)
                    .flat_map(|d| (0..1000).map(move |i| format!("b{d}-{i}")))
                    .filter(|k| !t.contains(k.as_bytes()))
                    .count();
                println!("lookups after the error: {lost} lost");
                // Then the store is dropped and the process exits: must not hang.
                return;
            }
        }
    }
}

/// Child mode 2: open the store on the still-full disk and read a table.
fn reopen_child(dir: &str) {
    let config = StoreConfig::default().io_timeout(IO_TIMEOUT);
    match FilterStore::open_with(dir, config).and_then(|s| s.open_table("t").map(|t| (s, t))) {
        Ok((_s, t)) => println!("reopened: {} live keys", t.live_keys()),
        Err(e) => println!("error at reopen: {e}"),
    }
}

/// Runs this binary in child mode `mode` on `db`, killing it if it runs
/// longer than `limit` (a hang fails the test rather than stalling it).
fn run_child(mode: &str, db: &std::path::Path, limit: Duration) -> String {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(CHILD_ENV, db)
        .env(CHILD_MODE_ENV, mode)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut out = String::new();
            std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
            assert!(status.success(), "child {mode} ended with {status}: {out}");
            return out;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("child {mode} still running after {limit:?}: a hang");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Mounts a tmpfs of `mib` MiB at `at` (`None` when this machine does not
/// let us), or resizes it.
fn mount_tmpfs(at: &std::path::Path, mib: u32, remount: bool) -> bool {
    let size = format!("size={mib}m");
    let opts = if remount {
        format!("remount,{size}")
    } else {
        size
    };
    Command::new("mount")
        .args(["-t", "tmpfs", "-o", &opts, "tmpfs"])
        .arg(at)
        .status()
        .is_ok_and(|s| s.success())
}

fn a_full_tmpfs_ends_every_call_promptly_and_loses_nothing_durable() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    if !mount_tmpfs(&mnt, 20, false) {
        eprintln!("cannot mount a tmpfs here (not root?): full-filesystem case skipped");
        return;
    }
    let _unmount = Unmount(mnt.clone());
    let db = mnt.join("db");
    // Each call may take the deadline; a few calls around the error, then
    // the exit: far below this limit unless something hangs.
    let limit = Duration::from_secs(120);
    let out = run_child("fill", &db, limit);
    let error = out
        .lines()
        .find(|l| l.starts_with("error"))
        .unwrap_or_else(|| panic!("the disk never filled: {out}"));
    assert!(
        error.starts_with("error io:") || error.starts_with("error storage:"),
        "untyped error: {error}"
    );
    assert!(
        out.contains("lookups after the error: 0 lost"),
        "lookups of the open table failed: {out}"
    );
    let durable: Vec<u32> = out
        .lines()
        .filter_map(|l| l.strip_prefix("durable "))
        .map(|n| n.trim().parse().unwrap())
        .collect();
    assert!(durable.len() > 10, "too few durable batches: {out}");
    // A reopen on the still-full disk ends (either way) within the limit.
    let reopened = run_child("reopen", &db, limit);
    eprintln!(
        "tmpfs: {} durable batches, then {error}; reopen while full: {}",
        durable.len(),
        reopened.trim()
    );
    // With space again, every durable key is there and writes work.
    assert!(mount_tmpfs(&mnt, 80, true), "could not grow the tmpfs");
    let store = common::reopen(&db, "after the tmpfs filled");
    let t = store.open_table("t").unwrap();
    for &b in &durable {
        for i in 0..1000 {
            assert!(
                t.contains(format!("b{b}-{i}").as_bytes()),
                "durable key b{b}-{i} lost"
            );
        }
    }
    t.apply(&batch(1_000_000), Durability::Durable).unwrap();
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
    // As root, permissions stop no write: a read-only tmpfs does.
    let mut _unmount = None;
    if std::fs::write(ro.join("probe"), b"x").is_ok() {
        std::fs::remove_file(ro.join("probe")).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs"])
            .arg(&ro)
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            eprintln!(
                "directory permissions do not stop writes here (root) and no read-only tmpfs \
                 can be mounted: read-only case skipped"
            );
            return;
        }
        _unmount = Some(Unmount(ro.clone()));
        assert!(
            std::fs::write(ro.join("probe"), b"x").is_err(),
            "a read-only tmpfs took a write"
        );
    }
    match FilterStore::open(ro.join("db")) {
        Err(StoreError::Io { .. }) => {}
        other => panic!("{other:?}"),
    }
}

/// Unmounts its path when dropped.
struct Unmount(std::path::PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}
