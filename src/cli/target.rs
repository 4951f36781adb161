//! Where an export goes: a file written atomically (never half a file,
//! nothing else clobbered), a device or pipe written in place, or standard
//! output unless it is a terminal.

use super::failure::{Failure, Outcome};
use super::output::Out;
use std::path::Path;

/// Writes `what` (a phrase for the messages: "the bit filter of table t")
/// to `output` atomically, or to standard output unless it is a terminal,
/// which is refused, `form` saying why ("binary", "an SVG image"). `write`
/// writes the bytes into the writer it is given; it is called only once
/// the target is known to be acceptable, so that a refusal costs nothing.
pub fn write_output(
    output: Option<&Path>,
    what: &str,
    form: &str,
    out: &mut Out,
    write: &mut dyn FnMut(&mut dyn std::io::Write) -> Result<(), Failure>,
) -> Outcome {
    match output {
        Some(path) if path != Path::new("-") => {
            let n = write_atomically(path, write)?;
            // stdout stays free for the data when no file is named.
            eprintln!(
                "filterstore: wrote {what} to {} ({n} bytes)",
                path.display()
            );
            Ok(())
        }
        _ => {
            use std::io::IsTerminal;
            if std::io::stdout().is_terminal() {
                return Err(Failure(format!(
                    "{what} is {form}: write it to a file with -o FILE, or redirect standard output"
                )));
            }
            let mut buf = Vec::new();
            write(&mut buf)?;
            out.bytes(&buf)
        }
    }
}

/// Counts the bytes that pass through it.
struct Counted<W> {
    inner: W,
    n: u64,
}

impl<W: std::io::Write> std::io::Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// A pipe opened without blocking (so that one without a reader is an
/// error, not a hang), written as a blocking writer would: a full pipe is
/// waited for, in short sleeps.
struct Pipe(std::fs::File);

impl std::io::Write for Pipe {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        loop {
            match self.0.write(buf) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                other => return other,
            }
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Writes to `path` so that a reader never sees half a file and nothing
/// else is clobbered; returns the bytes written:
///
/// * a path that names something other than a regular file (`/dev/null`, a
///   pipe) is written in place: renaming a file over it would replace the
///   device node or the pipe itself (as root, `--output /dev/null` used to
///   turn `/dev/null` into a regular file). It is opened without blocking: a
///   pipe that no process reads is an error at once, not a wait forever;
/// * a symbolic link is followed, dangling or not: the file it names is
///   written (created if missing), the link stays;
/// * otherwise the bytes go to a new temporary file beside the target
///   (created exclusively, so no existing file is truncated, with the
///   existing target's permissions), which is synced and renamed over the
///   target, and the directory is synced: the new file is durable, under its
///   name, when this returns.
fn write_atomically(
    path: &Path,
    write: &mut dyn FnMut(&mut dyn std::io::Write) -> Result<(), Failure>,
) -> Result<u64, Failure> {
    let fail = |e: std::io::Error| Failure(format!("cannot write {}: {e}", path.display()));
    let target = resolve_links(path).map_err(fail)?;
    let existing = std::fs::metadata(&target);
    if existing.as_ref().is_ok_and(|m| !m.is_file()) {
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&target)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ENXIO) => Failure(format!(
                    "cannot write {}: it is a pipe that no process reads; start its reader first",
                    path.display()
                )),
                _ => fail(e),
            })?;
        let mut w = Counted {
            inner: Pipe(f),
            n: 0,
        };
        write(&mut w)?;
        return Ok(w.n);
    }
    let mut tmp_name = target.as_os_str().to_owned();
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp_name);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(fail)?;
    let mut w = Counted {
        inner: std::io::BufWriter::with_capacity(1 << 16, f),
        n: 0,
    };
    let written = write(&mut w).and_then(|()| {
        let f = w.inner.into_inner().map_err(|e| fail(e.into_error()))?;
        if let Ok(m) = &existing {
            f.set_permissions(m.permissions()).map_err(fail)?;
        }
        f.sync_all()
            .and_then(|()| std::fs::rename(&tmp, &target))
            .and_then(|()| sync_parent(&target))
            .map_err(fail)
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map(|()| w.n)
}

/// The path `path` names after following symbolic links (a dangling link's
/// target path, relative to the link's directory); `path` itself when it is
/// not a link.
fn resolve_links(path: &Path) -> std::io::Result<std::path::PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let next = std::fs::read_link(&p)?;
                p = match p.parent() {
                    Some(dir) if next.is_relative() => dir.join(next),
                    _ => next,
                };
            }
            _ => return Ok(p),
        }
    }
    Err(std::io::Error::other("too many levels of symbolic links"))
}

/// `fsync` of the directory holding `file`: its new name becomes durable.
fn sync_parent(file: &Path) -> std::io::Result<()> {
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::File::open(dir)?.sync_all()
}
