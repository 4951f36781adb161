//! File primitives of the store's own files: positioned reads and writes
//! that loop until done, file and directory syncs, the rename, and the
//! seam that makes them fail on demand in tests ([`fault`]).

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
    fault::check(fault::Op::Write, None)?;
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

/// Bytes [`rewrite`] moves per read and write.
const REWRITE_STEP: u64 = 1 << 20;

/// Writes bytes `from..to` of `f` back where they are, as read (in steps of
/// 1 MiB), so that the next sync writes them. After a failed writeback
/// Linux marks the pages it could not write clean and keeps them readable
/// in the page cache: reading shows bytes the disk never got, and a later
/// `fdatasync` succeeds without writing them. Only a write makes such a
/// page dirty again. The writing open uses this on what it read and will
/// build on (`Generation::load`); a failure changes nothing the file says.
pub(crate) fn rewrite(f: &File, from: u64, to: u64) -> io::Result<()> {
    let mut buf = vec![0u8; to.saturating_sub(from).min(REWRITE_STEP) as usize];
    let mut at = from;
    while at < to {
        let n = (to - at).min(REWRITE_STEP) as usize;
        read_exact_at(f, &mut buf[..n], at)?;
        write_all_at(f, &buf[..n], at)?;
        at += n as u64;
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
    fault::check(fault::Op::Sync, None)?;
    f.sync_data()
}

/// `fsync` of a file (data and metadata).
pub(crate) fn sync_all(f: &File) -> io::Result<()> {
    fault::check(fault::Op::Sync, None)?;
    f.sync_all()
}

/// Renames `from` to `to` (atomic: on an error nothing was renamed).
pub(crate) fn rename(from: &Path, to: &Path) -> io::Result<()> {
    fault::check(fault::Op::Rename, Some(to))?;
    std::fs::rename(from, to)
}

/// Injected I/O failures, for tests: the crate's own (`cfg(test)`) and, with
/// feature `test-internals`, integration tests (`filterstore::__internals::fault`).
/// A plan, kept per thread (every table call runs its system calls on the
/// caller's thread), names the operation that fails, how many operations
/// of its kind pass first (or the one path it must concern), and the
/// operating system's error it fails with. The failure happens before the
/// system call, so nothing of the failed operation reaches the file:
/// a write that finds the disk full, a sync that reports a writeback error
/// (whose pages the kernel may then drop: the store must treat them as
/// lost), a rename that is refused. Without `cfg(test)` or the feature,
/// its check is an empty inline function.
#[cfg_attr(not(feature = "test-internals"), allow(unreachable_pub))]
pub mod fault {
    use std::io;
    use std::path::Path;

    /// What may fail.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Op {
        /// A positioned write of a store file (a log record, a counter page,
        /// a superblock, the catalog's new file).
        Write,
        /// An `fdatasync` or `fsync` of a file.
        Sync,
        /// An `fsync` of a directory (which makes the names in it durable).
        SyncDir,
        /// A rename (the catalog's commit point).
        Rename,
    }

    /// `EIO`: what a failed writeback reports.
    #[cfg(any(test, feature = "test-internals"))]
    pub const EIO: i32 = 5;
    /// `ENOSPC`: what a write to a full disk reports (used by the
    /// integration tests only, through `__internals`).
    #[cfg(feature = "test-internals")]
    pub const ENOSPC: i32 = 28;

    #[cfg(any(test, feature = "test-internals"))]
    mod plan {
        use super::Op;
        use std::cell::RefCell;
        use std::path::{Path, PathBuf};

        pub(super) struct Plan {
            pub(super) op: Op,
            /// Operations of the kind that pass first.
            pub(super) skip: u32,
            /// Only an operation on this path fails (a directory synced,
            /// the target of a rename).
            pub(super) path: Option<PathBuf>,
            pub(super) errno: i32,
            pub(super) fired: bool,
        }

        thread_local! {
            pub(super) static PLAN: RefCell<Option<Plan>> = const { RefCell::new(None) };
        }

        pub(super) fn matches(p: &Plan, op: Op, path: Option<&Path>) -> bool {
            !p.fired
                && p.op == op
                && match (&p.path, path) {
                    (None, _) => true,
                    (Some(want), Some(got)) => want == got,
                    (Some(_), None) => false,
                }
        }
    }

    /// Makes the `skip + 1`-th operation of kind `op` on this thread fail
    /// with OS error `errno` (once; later ones pass). Replaces any plan.
    #[cfg(any(test, feature = "test-internals"))]
    pub fn fail_after(op: Op, skip: u32, errno: i32) {
        plan::PLAN.with(|p| {
            *p.borrow_mut() = Some(plan::Plan {
                op,
                skip,
                path: None,
                errno,
                fired: false,
            })
        });
    }

    /// Makes the next operation of kind `op` on `path` (a directory's sync,
    /// a rename's target) on this thread fail with OS error `errno` (once).
    /// Replaces any plan. Used by the integration tests only (`__internals`).
    #[cfg(feature = "test-internals")]
    pub fn fail_on(op: Op, path: &Path, errno: i32) {
        plan::PLAN.with(|p| {
            *p.borrow_mut() = Some(plan::Plan {
                op,
                skip: 0,
                path: Some(path.to_path_buf()),
                errno,
                fired: false,
            })
        });
    }

    /// Unit tests: by store directory, the plan that the next fold in the
    /// background of that store runs under, on its own thread
    /// (`store::table::background`), and whether it made an operation fail
    /// there (keyed, so that tests running side by side do not meet).
    #[cfg(test)]
    type FoldPlans = std::collections::HashMap<std::path::PathBuf, (Option<plan::Plan>, bool)>;
    #[cfg(test)]
    static FOLD_PLANS: std::sync::Mutex<Option<FoldPlans>> = std::sync::Mutex::new(None);

    /// Unit tests: makes the `skip + 1`-th operation of kind `op` of the
    /// next fold that starts in the background in the store at `dir` fail
    /// with `errno`.
    #[cfg(test)]
    pub(crate) fn fail_in_next_background_fold(dir: &Path, op: Op, skip: u32, errno: i32) {
        let p = plan::Plan {
            op,
            skip,
            path: None,
            errno,
            fired: false,
        };
        let mut plans = FOLD_PLANS.lock().unwrap();
        plans
            .get_or_insert_with(Default::default)
            .insert(dir.to_path_buf(), (Some(p), false));
    }

    /// Unit tests: whether the plan of [`fail_in_next_background_fold`]
    /// for `dir` made an operation fail.
    #[cfg(test)]
    pub(crate) fn background_fold_failed(dir: &Path) -> bool {
        let plans = FOLD_PLANS.lock().unwrap();
        plans.as_ref().and_then(|m| m.get(dir)).is_some_and(|e| e.1)
    }

    /// Runs `f`, a fold in the background of the store at `dir`, under the
    /// plan of `fail_in_next_background_fold` if one waits (unit tests;
    /// `f` alone otherwise).
    pub(crate) fn in_background_fold<T>(dir: &Path, f: impl FnOnce() -> T) -> T {
        #[cfg(test)]
        {
            let taken = {
                let mut plans = FOLD_PLANS.lock().unwrap();
                plans
                    .as_mut()
                    .and_then(|m| m.get_mut(dir))
                    .and_then(|e| e.0.take())
            };
            let Some(p) = taken else {
                return f();
            };
            plan::PLAN.with(|cell| *cell.borrow_mut() = Some(p));
            let out = f();
            let fired = plan::PLAN.with(|cell| cell.borrow_mut().take().is_some_and(|p| p.fired));
            if let Some(e) = FOLD_PLANS
                .lock()
                .unwrap()
                .as_mut()
                .and_then(|m| m.get_mut(dir))
            {
                e.1 = fired;
            }
            out
        }
        #[cfg(not(test))]
        {
            let _ = dir;
            f()
        }
    }

    /// Removes this thread's plan; returns whether it made an operation fail.
    #[cfg(any(test, feature = "test-internals"))]
    pub fn clear() -> bool {
        plan::PLAN.with(|p| p.borrow_mut().take().is_some_and(|p| p.fired))
    }

    /// Fails if this thread's plan says so (see the module docs).
    #[inline]
    pub(crate) fn check(op: Op, path: Option<&Path>) -> io::Result<()> {
        #[cfg(any(test, feature = "test-internals"))]
        {
            let fail = plan::PLAN.with(|p| {
                let mut p = p.borrow_mut();
                let p = p.as_mut()?;
                if !plan::matches(p, op, path) {
                    return None;
                }
                if p.skip > 0 {
                    p.skip -= 1;
                    return None;
                }
                p.fired = true;
                Some(p.errno)
            });
            if let Some(errno) = fail {
                return Err(io::Error::from_raw_os_error(errno));
            }
        }
        let _ = (op, path);
        Ok(())
    }
}

/// `fsync` of a directory, which makes the names in it durable. Where a
/// directory cannot be opened as a file (Windows), there is nothing to do.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    fault::check(fault::Op::SyncDir, Some(dir))?;
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// Makes directory `dir` exist with a durable name: creates it and any
/// missing parents, then syncs the directory that holds each name created,
/// or, when `dir` existed already, the one that holds `dir` (a directory
/// made a moment ago by someone else may not be durable yet either). A file
/// is durable in a directory only once the directory's own name is: a
/// store that said "created" must not vanish with its directory's entry.
pub(crate) fn create_dir_durably(dir: &Path) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut at = dir;
    while !at.exists() {
        missing.push(at);
        match at.parent() {
            Some(p) if !p.as_os_str().is_empty() => at = p,
            _ => break,
        }
    }
    for d in missing.iter().rev() {
        match std::fs::create_dir(d) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
    }
    let named = if missing.is_empty() {
        vec![dir]
    } else {
        missing
    };
    for d in named {
        let parent = d
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        sync_dir(parent)?;
    }
    Ok(())
}
