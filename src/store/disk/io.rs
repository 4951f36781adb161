//! File primitives of the store's own files: positioned reads and writes
//! that loop until done, directory syncs, and the store's lock.

use std::fs::File;
use std::io;
use std::path::Path;

/// The little-endian `u32` at `at` of `b` (`b` holds at least `at + 4`
/// bytes: callers check lengths first).
#[inline]
pub(crate) fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

/// The little-endian `u64` at `at` of `b` (see [`le_u32`]).
#[inline]
pub(crate) fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Reads exactly `buf.len()` bytes at `at`; a short file is
/// `UnexpectedEof`.
pub(crate) fn read_exact_at(f: &File, mut buf: &mut [u8], mut at: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match read_at(f, buf, at) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("the file ends before byte {}", at + buf.len() as u64),
                ))
            }
            Ok(n) => {
                buf = &mut buf[n..];
                at += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads up to `buf.len()` bytes at `at`, fewer only at the end of the
/// file; returns how many.
pub(crate) fn read_up_to(f: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match read_at(f, &mut buf[done..], at + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Writes all of `buf` at `at`.
pub(crate) fn write_all_at(f: &File, mut buf: &[u8], mut at: u64) -> io::Result<()> {
    fault::check(fault::Op::Write)?;
    while !buf.is_empty() {
        match write_at(f, buf, at) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "the file took no bytes",
                ))
            }
            Ok(n) => {
                buf = &buf[n..];
                at += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(unix)]
fn read_at(f: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(f, buf, at)
}

#[cfg(unix)]
fn write_at(f: &File, buf: &[u8], at: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::write_at(f, buf, at)
}

#[cfg(windows)]
fn read_at(f: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(f, buf, at)
}

#[cfg(windows)]
fn write_at(f: &File, buf: &[u8], at: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_write(f, buf, at)
}

/// `fdatasync` of a file (its data, and its size when that changed).
pub(crate) fn sync_data(f: &File) -> io::Result<()> {
    fault::check(fault::Op::Sync)?;
    f.sync_data()
}

/// `fsync` of a file (data and metadata).
pub(crate) fn sync_all(f: &File) -> io::Result<()> {
    fault::check(fault::Op::Sync)?;
    f.sync_all()
}

/// Tests: the store's writes and syncs fail on demand (on the calling
/// thread, which is where every table operation runs). A no-op outside the
/// crate's own tests.
pub(crate) mod fault {
    /// What may fail.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum Op {
        Write,
        Sync,
    }

    #[cfg(test)]
    thread_local! {
        /// The operation that fails and how many of its kind pass first.
        pub(crate) static PLAN: std::cell::Cell<Option<(Op, u32)>> =
            const { std::cell::Cell::new(None) };
    }

    /// Fails if the thread's plan says so (tests only).
    #[inline]
    pub(crate) fn check(op: Op) -> std::io::Result<()> {
        #[cfg(test)]
        if let Some((planned, n)) = PLAN.get() {
            if planned == op {
                if n == 0 {
                    PLAN.set(None);
                    return Err(std::io::Error::other(format!("injected {op:?} failure")));
                }
                PLAN.set(Some((planned, n - 1)));
            }
        }
        let _ = op;
        Ok(())
    }
}

/// `fsync` of a directory, which makes the names in it durable. Where a
/// directory cannot be opened as a file (Windows), there is nothing to do.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        sync_all(&File::open(dir)?)
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}
