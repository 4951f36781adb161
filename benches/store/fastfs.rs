//! A file system where `fdatasync` costs almost nothing: ext4 on a loop
//! device whose backing file lives in a tmpfs, made and mounted by the
//! bench itself when it runs as root (`mount`, `losetup`, `mkfs.ext4`).
//! There the durable batch's CPU part shows, which a slow disk hides
//! (`RESULT store.durable_batch_vs_fsync_bound.fast_sync`).
//!
//! Every step that succeeded is undone when the [`FastFs`] is dropped,
//! also when the bench panics (unwinding) or a later step of the setup
//! fails: the ext4 mount, the loop device, the tmpfs mount, the
//! directories. A run that cannot make it (not root, a tool missing, no
//! free loop device) says why and goes on without the figure.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The tmpfs size: room for the durable subject's table and log and the
/// bound's file (a few hundred MB), the rest never touched.
const TMPFS_SIZE: &str = "1g";
/// The backing file of the loop device (sparse in the tmpfs).
const BACKING_SIZE: u64 = 900 << 20;

/// The mounted file system; its mount point is [`FastFs::path`].
pub struct FastFs {
    root: PathBuf,
    tmpfs: bool,
    device: Option<String>,
    ext4: bool,
}

/// Runs `program` with `args`; its failure as one line.
fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{program} {}: {} {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl FastFs {
    /// Makes and mounts it, or says why it cannot.
    pub fn mount() -> Result<FastFs, String> {
        // SAFETY: geteuid takes no argument and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not running as root (mounting needs it)".into());
        }
        let root = std::env::temp_dir().join(format!("filterstore-fastfs-{}", std::process::id()));
        std::fs::create_dir_all(root.join("tmpfs")).map_err(|e| e.to_string())?;
        std::fs::create_dir_all(root.join("ext4")).map_err(|e| e.to_string())?;
        // From here on, dropping `fs` undoes what was done.
        let mut fs = FastFs {
            root,
            tmpfs: false,
            device: None,
            ext4: false,
        };
        let tmpfs = fs.root.join("tmpfs");
        let tmpfs = tmpfs.to_str().ok_or("a non-UTF-8 temporary directory")?;
        run(
            "mount",
            &[
                "-t",
                "tmpfs",
                "-o",
                &format!("size={TMPFS_SIZE}"),
                "tmpfs",
                tmpfs,
            ],
        )?;
        fs.tmpfs = true;
        let backing = format!("{tmpfs}/backing");
        std::fs::File::create(&backing)
            .and_then(|f| f.set_len(BACKING_SIZE))
            .map_err(|e| format!("the backing file: {e}"))?;
        fs.device = Some(run("losetup", &["--find", "--show", &backing])?);
        let device = fs.device.clone().unwrap_or_default();
        // Without a journal, as the VM's root file system: an fdatasync
        // writes the data and flushes the device, nothing else.
        run("mkfs.ext4", &["-q", "-F", "-O", "^has_journal", &device])?;
        let ext4 = fs.root.join("ext4");
        run("mount", &[&device, ext4.to_str().unwrap_or_default()])?;
        fs.ext4 = true;
        Ok(fs)
    }

    /// The mount point of the ext4 file system.
    pub fn path(&self) -> PathBuf {
        self.root.join("ext4")
    }

    /// What it is, for the bench's output.
    pub fn describe(&self) -> String {
        format!(
            "ext4 on {} backed by a {TMPFS_SIZE} tmpfs, mounted at {}",
            self.device.as_deref().unwrap_or("?"),
            self.path().display()
        )
    }
}

/// Unmounts `point`, lazily if it is still busy.
fn unmount(point: &Path) {
    let p = point.to_str().unwrap_or_default();
    if let Err(e) = run("umount", &[p]) {
        eprintln!("fast-sync file system: {e}; unmounting lazily");
        let _ = run("umount", &["-l", p]);
    }
}

impl Drop for FastFs {
    fn drop(&mut self) {
        if self.ext4 {
            unmount(&self.root.join("ext4"));
        }
        if let Some(device) = &self.device {
            if let Err(e) = run("losetup", &["-d", device]) {
                eprintln!("fast-sync file system: {e}");
            }
        }
        if self.tmpfs {
            unmount(&self.root.join("tmpfs"));
        }
        if let Err(e) = std::fs::remove_dir_all(&self.root) {
            eprintln!(
                "fast-sync file system: removing {}: {e}",
                self.root.display()
            );
        }
    }
}
