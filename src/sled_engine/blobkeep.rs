//! Keeps sled's blob files until the log that stops needing them is durable.
//!
//! sled 0.34.7 writes a value or node over its inline limit (a quarter of
//! the segment: 128 KiB in a store of format 1 or 2, 4 MiB in the guard's
//! database) to a
//! file `blobs/<lsn>` and logs a pointer to it. When a later log record
//! replaces that node, sled deletes the old file as soon as the record is
//! *stable* in its own sense (`segment.rs`: `active_to_inactive` runs the
//! deferred `remove_blob` once the segment is stabilized), and stable means
//! written with `sync_file_range` (`iobuf.rs` `write_to_log`), not synced:
//! after a power cut the log can still hold the old pointer while the file
//! is gone. sled's recovery then skips the pointer without a word
//! (`iterator.rs`, `LogRead::DanglingBlob`), so the node silently goes back
//! to an older state. (This comes from reading sled's code; the power-cut
//! test, `tests/crash/power_cut.rs`, has not caught it, but it caught the
//! neighbouring failure that step 2 below fixes: a synced log pointing at
//! a blob that was not synced yet.)
//!
//! The fix keeps a second name for every blob file, a hard link in
//! [`KEEP_DIR`], from the durability point after sled writes the file
//! until the durability point after sled deletes it. A durability point
//! ([`Db::flush`](super::Db::flush)) runs, on the engine's worker
//! and so with no sled writes in between:
//!
//! 1. sled's flush: every log buffer and blob file is written;
//! 2. [`keep_new`]: each blob file not yet kept is synced and linked into
//!    [`KEEP_DIR`], and both directories are synced — a blob, its name and
//!    its second name are durable before any durable log record points at
//!    it;
//! 3. the `fdatasync` of sled's log;
//! 4. [`release_deleted`]: the second names of blob files that sled has
//!    deleted are removed. sled deleted such a file only after writing the
//!    record that replaced it (step 1 of this or an earlier point), which
//!    step 3 made durable.
//!
//! Before sled opens a store, [`restore`] links every kept blob that is
//! missing back into `blobs/`. So every blob file that a durable log record
//! points at is there when sled recovers. The cost is disk space: a blob
//! deleted by sled keeps its bytes until the next durability point, and a
//! power cut between steps 3 and 4 (or a cut after the operating system
//! wrote back more of the log than was synced) restores blobs that nothing
//! points at any more; those stay on disk unused, at most the blobs that
//! sled deleted since the durability point before the cut.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, ErrorKind};
use std::path::Path;

/// The directory, beside sled's `blobs/`, of the second names.
pub(crate) const KEEP_DIR: &str = "blobs.kept";

/// The extension of a copy being made (where there are no hard links).
const PART: &str = "part";

/// The names in `dir`, none if it does not exist.
fn names(dir: &Path) -> io::Result<HashSet<OsString>> {
    match fs::read_dir(dir) {
        Ok(entries) => entries.map(|e| e.map(|e| e.file_name())).collect(),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(HashSet::new()),
        Err(e) => Err(e),
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Step 2 of a durability point: syncs and links every blob file of the
/// store at `dir` that is not kept yet (blob files are written once, so a
/// kept one was synced before), then syncs the directories.
pub(crate) fn keep_new(dir: &Path) -> io::Result<()> {
    let (blobs, keep) = (dir.join("blobs"), dir.join(KEEP_DIR));
    let kept = names(&keep)?;
    let mut new = 0usize;
    for name in names(&blobs)? {
        if kept.contains(&name) {
            continue;
        }
        if new == 0 && !keep.exists() {
            fs::create_dir(&keep)?;
            sync_dir(dir)?;
        }
        let file = blobs.join(&name);
        // sled may delete a blob from its own threads at any time: one gone
        // since the listing was replaced by a record that step 3 syncs.
        match File::open(&file)
            .and_then(|f| f.sync_data())
            .and_then(|()| link_or_copy(&file, &keep.join(&name)))
        {
            Ok(()) => new += 1,
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    if new > 0 {
        sync_dir(&keep)?;
        sync_dir(&blobs)?;
    }
    Ok(())
}

/// A second name for `from` at `to`; a synced copy where the filesystem
/// has no hard links.
fn link_or_copy(from: &Path, to: &Path) -> io::Result<()> {
    match fs::hard_link(from, to) {
        Ok(()) => Ok(()),
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::AlreadyExists) => Err(e),
        Err(_) => {
            // Under a name no blob has, until complete: a cut mid-copy
            // leaves a `.part` that restore skips and release removes.
            let part = to.with_extension(PART);
            fs::copy(from, &part)?;
            File::open(&part)?.sync_data()?;
            fs::rename(&part, to)
        }
    }
}

/// Step 4 of a durability point: drops the second names of the blob files
/// that sled has deleted.
pub(crate) fn release_deleted(dir: &Path) -> io::Result<()> {
    let keep = dir.join(KEEP_DIR);
    let kept = names(&keep)?;
    if kept.is_empty() {
        return Ok(());
    }
    let live = names(&dir.join("blobs"))?;
    let mut released = 0usize;
    for name in kept.difference(&live) {
        match fs::remove_file(keep.join(name)) {
            Ok(()) => released += 1,
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    if released > 0 {
        sync_dir(&keep)?;
    }
    Ok(())
}

/// Before sled opens the store at `dir`: links every kept blob that sled
/// deleted back into `blobs/`. Does nothing while another process holds
/// sled's lock (sled's open then reports it), nor for a store without kept
/// blobs. Returns how many blobs came back.
pub(crate) fn restore(dir: &Path) -> io::Result<usize> {
    let keep = dir.join(KEEP_DIR);
    let kept = names(&keep)?;
    if kept.is_empty() {
        return Ok(0);
    }
    let db = match File::open(dir.join("db")) {
        Ok(db) => db,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    match db.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => return Ok(0),
        Err(fs::TryLockError::Error(e)) => return Err(e),
    }
    let restored = put_back(&keep, &dir.join("blobs"), kept, link_or_copy)?;
    drop(db); // releases the lock, for sled to take
    Ok(restored)
}

/// For a copy of the store at `from` made in `to` without [`KEEP_DIR`]:
/// copies the kept blobs missing from `from`'s `blobs/` into `to`'s, as
/// [`restore`] would have linked them.
pub(crate) fn copy_restored(from: &Path, to: &Path) -> io::Result<()> {
    let keep = from.join(KEEP_DIR);
    let kept = names(&keep)?;
    let missing: HashSet<OsString> = kept
        .difference(&names(&from.join("blobs"))?)
        .cloned()
        .collect();
    put_back(&keep, &to.join("blobs"), missing, |a, b| {
        fs::copy(a, b).map(drop)
    })?;
    Ok(())
}

/// Puts each of `names` from `keep` into `blobs` with `put`, skipping
/// those already there; syncs `blobs` if anything came back.
fn put_back(
    keep: &Path,
    blobs: &Path,
    names: HashSet<OsString>,
    put: impl Fn(&Path, &Path) -> io::Result<()>,
) -> io::Result<usize> {
    let mut restored = 0usize;
    for name in names {
        if Path::new(&name).extension() == Some(PART.as_ref()) {
            continue;
        }
        let target = blobs.join(&name);
        if target.exists() {
            continue;
        }
        if restored == 0 {
            fs::create_dir_all(blobs)?;
        }
        match put(&keep.join(&name), &target) {
            Ok(()) => restored += 1,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    if restored > 0 {
        sync_dir(blobs)?;
    }
    Ok(restored)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with_blobs(names: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("db"), b"log").unwrap();
        fs::create_dir(dir.path().join("blobs")).unwrap();
        for n in names {
            fs::write(dir.path().join("blobs").join(n), n.as_bytes()).unwrap();
        }
        dir
    }

    fn listed(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = names(dir)
            .unwrap()
            .into_iter()
            .map(|n| n.into_string().unwrap())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_blob_deleted_before_the_log_sync_comes_back_and_is_released_after_it() {
        let store = store_with_blobs(&["10", "20"]);
        let (dir, blobs, keep) = (
            store.path(),
            store.path().join("blobs"),
            store.path().join(KEEP_DIR),
        );
        keep_new(dir).unwrap();
        assert_eq!(listed(&keep), ["10", "20"]);
        // sled replaces blob 10 with 30 and deletes 10; then the power goes.
        fs::write(blobs.join("30"), b"30").unwrap();
        fs::remove_file(blobs.join("10")).unwrap();
        assert_eq!(restore(dir).unwrap(), 1);
        assert_eq!(listed(&blobs), ["10", "20", "30"]);
        assert_eq!(fs::read(blobs.join("10")).unwrap(), b"10");
        // This time the durability point completes: 10 is released.
        fs::remove_file(blobs.join("10")).unwrap();
        keep_new(dir).unwrap();
        assert_eq!(listed(&keep), ["10", "20", "30"]);
        release_deleted(dir).unwrap();
        assert_eq!(listed(&keep), ["20", "30"]);
        assert_eq!(restore(dir).unwrap(), 0);
        assert_eq!(listed(&blobs), ["20", "30"]);
    }

    #[test]
    fn a_snapshot_copy_gets_the_missing_blobs() {
        let store = store_with_blobs(&["10", "20"]);
        keep_new(store.path()).unwrap();
        fs::remove_file(store.path().join("blobs").join("20")).unwrap();
        let copy = store_with_blobs(&["10"]);
        copy_restored(store.path(), copy.path()).unwrap();
        assert_eq!(listed(&copy.path().join("blobs")), ["10", "20"]);
        assert!(!copy.path().join(KEEP_DIR).exists());
        // The source is left as it was.
        assert_eq!(listed(&store.path().join("blobs")), ["10"]);
    }

    #[test]
    fn a_locked_store_is_left_to_sled() {
        let store = store_with_blobs(&["10"]);
        keep_new(store.path()).unwrap();
        fs::remove_file(store.path().join("blobs").join("10")).unwrap();
        let holder = File::open(store.path().join("db")).unwrap();
        holder.try_lock().unwrap();
        assert_eq!(restore(store.path()).unwrap(), 0);
        drop(holder);
        assert_eq!(restore(store.path()).unwrap(), 1);
    }

    #[test]
    fn where_there_are_no_hard_links_a_synced_copy_is_kept() {
        use std::os::unix::fs::MetadataExt;
        let store = store_with_blobs(&["10"]);
        let from = store.path().join("blobs/10");
        // No hard link crosses filesystems (EXDEV): /dev/shm is a tmpfs.
        let other =
            tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
        let to = other.path().join("10");
        link_or_copy(&from, &to).unwrap();
        assert_eq!(fs::read(&to).unwrap(), b"10");
        let (a, b) = (fs::metadata(&from).unwrap(), fs::metadata(&to).unwrap());
        if a.dev() != b.dev() {
            assert_ne!(a.ino(), b.ino(), "a copy, not a link");
            assert!(!to.with_extension(PART).exists());
        }
        assert!(link_or_copy(&from, &store.path().join("none/10")).is_err());
        // A leftover partial copy is never put back, and is released.
        fs::create_dir(store.path().join(KEEP_DIR)).unwrap();
        fs::write(store.path().join(KEEP_DIR).join("20.part"), b"2").unwrap();
        assert_eq!(restore(store.path()).unwrap(), 0);
        release_deleted(store.path()).unwrap();
        assert!(names(&store.path().join(KEEP_DIR)).unwrap().is_empty());
    }

    #[test]
    fn a_store_without_blobs_gets_no_keep_directory() {
        let store = store_with_blobs(&[]);
        keep_new(store.path()).unwrap();
        release_deleted(store.path()).unwrap();
        assert!(!store.path().join(KEEP_DIR).exists());
        assert_eq!(restore(store.path()).unwrap(), 0);
    }
}
