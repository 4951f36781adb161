//! Generated benchmark data kept between runs: under
//! `$CARGO_TARGET_DIR/<name>/sf<SF>/`, written to a temporary directory
//! beside it and renamed into place only when complete, with a marker of the
//! layout it was written for, so that neither an interrupted generation nor
//! data of an older layout is ever used.

#![allow(dead_code)]

use datafusion::error::{DataFusionError, Result};
use std::future::Future;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// The marker file, written last: its presence with the expected content
/// means the directory is complete and of this layout.
const MARKER: &str = "LAYOUT";

/// Where generated data is kept: `$CARGO_TARGET_DIR/<name>/sf<SF>`, or the
/// workspace's `target/` when the variable is unset (as cargo does).
pub fn data_dir(name: &str, sf: f64) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join(name).join(format!("sf{sf}"))
}

/// Whether `dir` holds complete data of `layout`.
pub fn is_complete(dir: &Path, layout: &str) -> bool {
    std::fs::read_to_string(dir.join(MARKER)).is_ok_and(|s| s == layout)
}

/// Makes `dir` hold complete data of `layout`: returns `false` when it
/// already does, else runs `generate` on an empty temporary directory beside
/// `dir` (every file it writes must be synced), marks it and renames it into
/// place (`true`). Data of another layout is replaced. Two processes may
/// generate at once: each into its own directory, and the first rename wins.
pub async fn generate_once<F, Fut>(dir: &Path, layout: &str, generate: F) -> Result<bool>
where
    F: FnOnce(PathBuf) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    if is_complete(dir, layout) {
        return Ok(false);
    }
    let parent = dir
        .parent()
        .ok_or_else(|| DataFusionError::Plan(format!("{dir:?} has no parent")))?;
    std::fs::create_dir_all(parent)?;
    let sibling = |what: &str| {
        let name = dir.file_name().unwrap_or_default().to_string_lossy();
        parent.join(format!("{name}.{what}-{}", std::process::id()))
    };
    let tmp = sibling("tmp");
    remove_dir(&tmp)?;
    std::fs::create_dir_all(&tmp)?;
    if let Err(e) = generate(tmp.clone()).await {
        remove_dir(&tmp)?;
        return Err(e);
    }
    write_synced(&tmp.join(MARKER), layout.as_bytes())?;
    sync_dir(&tmp)?;
    if dir.exists() && !is_complete(dir, layout) {
        // Incomplete or of another layout (never written by this function
        // without its marker): moved aside, then removed.
        let stale = sibling("stale");
        std::fs::rename(dir, &stale)?;
        remove_dir(&stale)?;
    }
    match std::fs::rename(&tmp, dir) {
        Ok(()) => sync_dir(parent)?,
        // Another process renamed its complete copy first.
        Err(_) if is_complete(dir, layout) => remove_dir(&tmp)?,
        Err(e) => return Err(e.into()),
    }
    Ok(true)
}

/// Creates `path` with `bytes` and syncs it.
pub fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut f = std::fs::File::create(path)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    Ok(())
}

/// Syncs a directory's entries (the names of the files renamed into it).
pub fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

fn remove_dir(dir: &Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(e.into()),
        _ => Ok(()),
    }
}
