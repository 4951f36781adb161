//! The memory a process may still take, from its control groups: cgroup v2
//! (`memory.max`) and cgroup v1 (`memory.limit_in_bytes`), whichever the
//! machine mounts (a hybrid machine mounts both), for the [memory
//! budget](super::budget).
//!
//! # Where the files are
//! `/proc/self/cgroup` names the process's group in each hierarchy: `0::<path>`
//! for v2, `<id>:<controllers>:<path>` for v1, where the memory controller's
//! line lists `memory`. `/proc/self/mountinfo` says where each hierarchy is
//! mounted (file system type `cgroup2`, or `cgroup` with the `memory` option)
//! and which of its groups the mount shows at its mount point (its root: `/`
//! on the host, the container's own group inside one). The group's
//! directory is the mount point joined with the path less that root.
//!
//! # What a group leaves
//! A limit binds the group and all its descendants, so every group from the
//! process's up to the mount point counts. At each, what this process may
//! still take is the limit less what the others charged to the group use:
//! the group's usage (`memory.current`, v1 `memory.usage_in_bytes`) less its
//! inactive page cache (`inactive_file` of `memory.stat`, v1
//! `total_inactive_file`: the kernel reclaims it before it fails an
//! allocation) less this process's own resident memory. The smallest over
//! the groups and the hierarchies is the process's limit. A group without a
//! limit (v2 `max`, v1 its largest page count) counts for nothing.

use std::path::{Path, PathBuf};

/// What a process may still take under its groups, and which kind of limit
/// bounds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limit {
    /// Bytes.
    pub(crate) bytes: u64,
    /// The limit that bounds it.
    pub(crate) source: &'static str,
}

/// The two kinds of hierarchy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

impl Version {
    /// The files of a group: its limit, its usage, and the key of its
    /// inactive page cache in `memory.stat`.
    fn files(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Version::V1 => (
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
                "total_inactive_file",
            ),
            Version::V2 => ("memory.max", "memory.current", "inactive_file"),
        }
    }

    fn source(self) -> &'static str {
        match self {
            Version::V1 => "cgroup v1 memory.limit_in_bytes",
            Version::V2 => "cgroup v2 memory.max",
        }
    }
}

/// The limit of the calling process (module docs), if any group has one.
pub(crate) fn process_limit() -> Option<Limit> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let groups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    limit_in(&mountinfo, &groups, own_resident())
}

/// This process's resident memory, from `/proc/self/statm` (0 where it
/// cannot be read: the others' usage is then overstated, never understated).
fn own_resident() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok());
    pages.map_or(0, |p| p.saturating_mul(4096))
}

/// The limit given the texts of `/proc/self/mountinfo` and
/// `/proc/self/cgroup` and the process's resident bytes `own`.
fn limit_in(mountinfo: &str, groups: &str, own: u64) -> Option<Limit> {
    let mut best: Option<Limit> = None;
    for (version, root, mount) in memory_mounts(mountinfo) {
        let Some(path) = group_path(groups, version) else {
            continue;
        };
        let relative = path.strip_prefix(root.as_str()).unwrap_or("");
        let mut dir = mount.join(relative.trim_start_matches('/'));
        loop {
            if let Some(bytes) = headroom(&dir, version, own) {
                if best.is_none_or(|b| bytes < b.bytes) {
                    best = Some(Limit {
                        bytes,
                        source: version.source(),
                    });
                }
            }
            if dir == mount || !dir.starts_with(&mount) || !dir.pop() {
                break;
            }
        }
    }
    best
}

/// The memory hierarchies mounted: version, the mount's root group and its
/// mount point.
fn memory_mounts(mountinfo: &str) -> Vec<(Version, String, PathBuf)> {
    let mut out = Vec::new();
    for line in mountinfo.lines() {
        // id parent dev root mount-point options [optional…] - type source super-options
        let Some((head, tail)) = line.split_once(" - ") else {
            continue;
        };
        let head: Vec<&str> = head.split(' ').collect();
        let tail: Vec<&str> = tail.split(' ').collect();
        let (Some(root), Some(point), Some(fstype)) = (head.get(3), head.get(4), tail.first())
        else {
            continue;
        };
        let version = match *fstype {
            "cgroup2" => Version::V2,
            "cgroup"
                if tail
                    .get(2)
                    .is_some_and(|o| o.split(',').any(|o| o == "memory")) =>
            {
                Version::V1
            }
            _ => continue,
        };
        out.push((version, unescape(root), PathBuf::from(unescape(point))));
    }
    out
}

/// mountinfo's octal escapes (`\040` for a space, …) undone.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let code = bytes.get(i + 1..i + 4).and_then(|d| {
            let s = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(s, 8).ok()
        });
        match (bytes[i], code) {
            (b'\\', Some(c)) => {
                out.push(c);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The process's group in the hierarchy of `version`.
fn group_path(groups: &str, version: Version) -> Option<&str> {
    groups.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let ours = match version {
            Version::V2 => id == "0" && controllers.is_empty(),
            Version::V1 => controllers.split(',').any(|c| c == "memory"),
        };
        ours.then_some(path)
    })
}

/// What group `dir` leaves this process (module docs); `None` without a
/// limit.
fn headroom(dir: &Path, version: Version, own: u64) -> Option<u64> {
    let (limit_file, usage_file, inactive_key) = version.files();
    let limit: u64 = read_number(&dir.join(limit_file))?;
    // v1 writes "no limit" as the largest page count (2^63 less a page).
    if limit >= 1 << 62 {
        return None;
    }
    let usage = read_number(&dir.join(usage_file)).unwrap_or(0);
    let inactive = std::fs::read_to_string(dir.join("memory.stat"))
        .ok()
        .and_then(|stat| {
            stat.lines().find_map(|l| {
                let (key, value) = l.split_once(' ')?;
                (key == inactive_key).then(|| value.trim().parse::<u64>().ok())?
            })
        })
        .unwrap_or(0);
    let others = usage.saturating_sub(inactive).saturating_sub(own);
    Some(limit.saturating_sub(others))
}

/// A file holding one decimal number (`max` and anything else: `None`).
fn read_number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A group directory with its files.
    fn group(dir: &Path, files: &[(&str, &str)]) {
        std::fs::create_dir_all(dir).unwrap();
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
    }

    #[test]
    fn a_v1_limit_on_the_path_bounds_the_process_less_what_others_use() {
        let t = tempfile::tempdir().unwrap();
        let mem = t.path().join("memory");
        let unlimited = "9223372036854771712\n";
        group(&mem, &[("memory.limit_in_bytes", unlimited)]);
        group(
            &mem.join("jobs"),
            &[
                ("memory.limit_in_bytes", "4294967296\n"),
                ("memory.usage_in_bytes", "1073741824\n"),
                ("memory.stat", "cache 5\ntotal_inactive_file 268435456\n"),
            ],
        );
        group(
            &mem.join("jobs/one"),
            &[
                ("memory.limit_in_bytes", "1610612736\n"),
                ("memory.usage_in_bytes", "10485760\n"),
                ("memory.stat", "total_inactive_file 0\n"),
            ],
        );
        let mountinfo = format!(
            "30 25 0:26 / {} rw,nosuid shared:9 - cgroup cgroup rw,memory\n\
             31 25 0:27 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n",
            mem.display()
        );
        let groups = "9:cpu:/\n4:memory:/jobs/one\n0::/\n";
        // The group's own limit less the others' 10 MiB - 4 MiB of ours.
        let l = limit_in(&mountinfo, groups, 4 << 20).unwrap();
        assert_eq!(l.bytes, 1_610_612_736 - (6 << 20));
        assert_eq!(l.source, "cgroup v1 memory.limit_in_bytes");
        // The parent's 4 GiB less its others' 1 GiB - 256 MiB of cache:
        // below the child's once its limit is raised.
        std::fs::write(mem.join("jobs/one/memory.limit_in_bytes"), unlimited).unwrap();
        let l = limit_in(&mountinfo, groups, 0).unwrap();
        assert_eq!(l.bytes, 4_294_967_296 - (768 << 20));
        // Unlimited everywhere: none.
        std::fs::write(mem.join("jobs/memory.limit_in_bytes"), unlimited).unwrap();
        assert_eq!(limit_in(&mountinfo, groups, 0), None);
    }

    #[test]
    fn a_v2_limit_and_a_container_root_and_an_escaped_mount_point() {
        let t = tempfile::tempdir().unwrap();
        let point = t.path().join("cg root");
        group(&point, &[("memory.max", "max\n")]);
        group(
            &point.join("app"),
            &[
                ("memory.max", "2147483648\n"),
                ("memory.current", "0\n"),
                ("memory.stat", "anon 0\ninactive_file 0\n"),
            ],
        );
        // The mount shows group /kube/pod as its root: the process's
        // /kube/pod/app is <mount point>/app.
        let escaped = point.display().to_string().replace(' ', "\\040");
        let mountinfo = format!("40 30 0:30 /kube/pod {escaped} rw - cgroup2 cgroup2 rw\n");
        let l = limit_in(&mountinfo, "0::/kube/pod/app\n", 0).unwrap();
        assert_eq!(
            l,
            Limit {
                bytes: 2_147_483_648,
                source: "cgroup v2 memory.max"
            }
        );
        // A hybrid machine whose v2 hierarchy has no memory files, and no
        // v1 memory line in /proc/self/cgroup: none.
        let hybrid = "41 30 0:31 / /nonexistent/unified rw - cgroup2 cgroup2 rw\n";
        assert_eq!(limit_in(hybrid, "0::/\n", 0), None);
    }

    #[test]
    fn this_machine_gives_a_plausible_answer() {
        // Whatever the machine: none, or a byte count of at least a MiB.
        if let Some(l) = process_limit() {
            assert!(l.bytes >= 1 << 20, "{l:?}");
        }
    }
}
