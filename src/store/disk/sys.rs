//! The store's calls into the OS that std does not offer, Linux only (no-ops
//! elsewhere): giving a log's folded prefix back to the file system
//! (`fallocate` with `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`), and
//! starting the writeback of a durable record before its `fdatasync`
//! (`sync_file_range` with `SYNC_FILE_RANGE_WRITE`). The one module of the
//! store with `unsafe` (two FFI calls, each argued where it is made).
//!
//! After a fold in the background the superblock in force names the byte
//! where the log's first unfolded record starts (`docs/FORMAT.md` § 11),
//! and nothing reads the log before it. Punching those bytes out frees
//! their blocks without moving the records after them (the file keeps its
//! size: offsets stay valid). Where the file system cannot punch (another
//! OS, or `EOPNOTSUPP`), the bytes stay until a fold in the foreground
//! empties the log (`store::table::background`).

use std::fs::File;
use std::io;

/// Frees the blocks of bytes `0..to` of `file` (rounded down to whole 4 KiB
/// pages; the bytes read as zeros afterwards, the size is unchanged).
/// `Ok(false)` when the file system or the OS cannot punch.
#[cfg(target_os = "linux")]
pub(crate) fn punch_prefix(file: &File, to: u64) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    let len = to - to % 4096;
    let Ok(len) = libc::off_t::try_from(len) else {
        return Ok(false);
    };
    if len == 0 {
        return Ok(true);
    }
    // SAFETY: `fallocate` takes a file descriptor and three integers and
    // touches no memory of this process. The descriptor is valid for the
    // whole call: `file` is borrowed, so it cannot be closed meanwhile.
    // Punching changes only the file's bytes `0..len`, which the caller
    // says nothing reads any more.
    let rc = unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            0,
            len,
        )
    };
    if rc == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => Ok(false),
        _ => Err(e),
    }
}

/// No punching off Linux: the bytes stay until the log is emptied.
#[cfg(not(target_os = "linux"))]
pub(crate) fn punch_prefix(_file: &File, _to: u64) -> io::Result<bool> {
    Ok(false)
}

/// Starts writing back bytes `from..from + len` of `file` without waiting
/// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`): a durable append's record
/// is on its way to the disk while the writer sets its bits, and the
/// `fdatasync` after waits for less (measured: durable batches went from
/// 0.80 to 0.96-1.01 of the `fdatasync` bound on the VM's disk, `cargo
/// bench --bench store`, docs/BENCHMARKS.md). Durability is unchanged: only
/// that `fdatasync` says durable. Without `SYNC_FILE_RANGE_WAIT_*` the call
/// neither waits nor checks the file's writeback errors, so it consumes
/// none of them: the `fdatasync` still reports a failed writeback (the
/// kernel's errseq is checked only by the waiting flags and by `fsync`).
#[cfg(target_os = "linux")]
pub(crate) fn start_writeback(file: &File, from: u64, len: u64) {
    use std::os::fd::AsRawFd;
    let (Ok(from), Ok(len)) = (libc::off64_t::try_from(from), libc::off64_t::try_from(len)) else {
        return;
    };
    // SAFETY: `sync_file_range` takes a file descriptor and three integers
    // and touches no memory of this process; `file` is borrowed, so the
    // descriptor stays open for the call. Its result is ignored: it only
    // starts writeback.
    unsafe {
        libc::sync_file_range(file.as_raw_fd(), from, len, libc::SYNC_FILE_RANGE_WRITE);
    }
}

/// Nothing to start off Linux.
#[cfg(not(target_os = "linux"))]
pub(crate) fn start_writeback(_file: &File, _from: u64, _len: u64) {}

#[cfg(test)]
mod tests {
    use super::punch_prefix;
    use std::io::{Read, Write};

    /// Against the safe path (the bytes written as zeros by hand): the
    /// same size and the same bytes, the part past the punch untouched.
    #[test]
    fn punched_bytes_read_as_zeros_and_the_rest_stays() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8 + 1).collect();
        let path = dir.path().join("log");
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&data)
            .unwrap();
        let f = std::fs::File::options()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let punched = punch_prefix(&f, 9_000).unwrap();
        let mut expect = data.clone();
        if punched {
            expect[..8192].fill(0);
        }
        let mut got = Vec::new();
        std::fs::File::open(&path)
            .unwrap()
            .read_to_end(&mut got)
            .unwrap();
        assert_eq!(got.len(), data.len());
        assert!(got == expect, "bytes differ from the safe path's");
        assert!(
            punch_prefix(&f, 100).unwrap(),
            "nothing to punch is no failure"
        );
    }

    /// Starting writeback changes no byte and no size (the safe path: not
    /// calling it), also for a range past the end.
    #[test]
    fn starting_writeback_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 13) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let f = std::fs::File::options().write(true).open(&path).unwrap();
        super::start_writeback(&f, 4_000, 5_000);
        super::start_writeback(&f, 9_000, 1 << 40);
        drop(f);
        assert!(std::fs::read(&path).unwrap() == data);
    }
}
