//! A filesystem that loses, at a power cut, what a real one may lose: an
//! in-memory FUSE filesystem (the `fuser` crate, mounted with the mount
//! syscall, so it needs root and `/dev/fuse`) that keeps, beside the live
//! state of every file, its *durable* bytes (as of its last `fsync` or
//! `fdatasync`) and every write and size change made since, and beside the
//! live entries of every directory its durable entries and the directory
//! operations not yet synced.
//!
//! # What a cut keeps ([`MemFs::image_cut`])
//! * **File data**: every 4 KiB page that a write or a size change touched
//!   since the file's last sync ends up, independently of the other pages, in
//!   one of its states since that sync, chosen at random: as synced, or as
//!   after its first, second, … last change. So a random subset of the
//!   unsynced writes persists, page by page and in any order (a later page
//!   without an earlier one, a later write of one page without an earlier
//!   write of another). `sync_file_range` (sled's "stable") reaches no FUSE
//!   filesystem (writes use direct I/O and reach this one at once), so it
//!   makes nothing durable here: its pages are exactly these "may be
//!   persisted" pages. Optionally (one cut in two), the last written page is
//!   **torn**: each of its 512-byte sectors comes from the state before or
//!   after the last write.
//! * **Punched holes** (`fallocate(PUNCH_HOLE | KEEP_SIZE)`, how a fold in
//!   the background gives back a log's folded prefix) are changes like
//!   writes of zeros: a cut keeps or drops each punched page as above, so
//!   cuts fall inside folds that punch, the path ext4, XFS and tmpfs users
//!   run. (Before the model punched, `punch_prefix` returned "cannot punch"
//!   and every such fold was followed by one on the writer's thread: a
//!   mutant that punched one page past the `log_start` in force passed
//!   every cut, 660 in a review and 60 of the folds workload here; it now
//!   fails that workload at its first cut.) Other modes are refused as
//!   unsupported.
//! * **File size**: the size after a random one of the unsynced changes (or
//!   the synced size). Pages within it that kept no write read as zeros
//!   beyond the synced size (holes).
//! * **Directories** follow one of three models, since POSIX leaves open when
//!   a name becomes durable and real filesystems differ
//!   ([`DirModel`]): every operation durable at once; durable only when the
//!   directory is synced; or, as on a journaling filesystem, operations
//!   durable in the order they were made, a random prefix of the unsynced
//!   ones surviving a cut (a directory sync makes it and everything before it
//!   durable).
//!
//! A cut is: kill the writer, then [`MemFs::image_cut`] the state a power cut
//! leaves into an ordinary directory and open the store there.
//!
//! # A failed sync ([`MemFs::fail_sync`], the EIO model)
//! One chosen `fsync`/`fdatasync` of a file returns `EIO`, as Linux's does
//! when writeback fails: of the pages it was to write, a random part reached
//! the disk and the rest are **dropped** — still readable (the page cache
//! keeps them, clean) but never written by a later sync, which succeeds and
//! writes only pages dirtied after the failure. So what the failed sync
//! covered is lost at the next cut unless rewritten, while every later sync
//! reports success: the one report of the loss is that `EIO`. A failed
//! directory sync makes nothing durable.
#![allow(dead_code)]

use fuser::Errno;
use fuser::{Config, FileAttr, FileType, INodeNo, MountOption, ReplyEmpty};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use image::{cut_file, write_tree, Unsynced};

/// The FUSE operations.
mod fuse;
/// What a cut leaves of a file, and writing an image.
mod image;

/// The writer that runs on the mount (child mode).
pub mod child;
/// The migration workload's fixture.
mod fixture;
/// What a cut must leave, and the check of an image.
pub mod model;
/// Reopening after each failed sync of an operation, then a cut.
pub mod reopen;
/// The workloads and where they are cut.
pub mod workload;

/// When a directory entry becomes durable (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirModel {
    /// Every create, link, unlink and rename is durable at once: the harsh
    /// model for deletions (a file deleted before the log that stops
    /// pointing at it is synced is gone).
    Immediate,
    /// An operation is durable only when a directory it changed is synced:
    /// the harsh model for creations (a synced file whose directory was not
    /// synced is lost).
    OnSync,
    /// Operations are durable in the order they were made: a directory sync
    /// makes every operation up to its directory's last one durable, and a
    /// cut keeps a random prefix of the rest (a journaling filesystem).
    Journal,
}

type Entries = BTreeMap<OsString, u64>;

/// A change to a file since its last sync.
#[derive(Clone, Debug)]
enum Change {
    Write { at: u64, data: Vec<u8> },
    SetLen(u64),
}

enum Node {
    File {
        live: Vec<u8>,
        durable: Vec<u8>,
        /// The page cache's bytes at the last sync, on which `pending` was
        /// made, where they differ from `durable` (after a failed sync).
        base: Option<Vec<u8>>,
        /// Changes since the last sync, in order.
        pending: Vec<Change>,
    },
    Dir {
        live: Entries,
        durable: Entries,
    },
}

/// One directory operation not yet durable: its entry changes (a rename has
/// two), applied together.
#[derive(Clone, Debug)]
struct DirOp {
    changes: Vec<(u64, OsString, Option<u64>)>,
}

impl DirOp {
    fn touches(&self, dir: u64) -> bool {
        self.changes.iter().any(|(d, _, _)| *d == dir)
    }
}

struct State {
    /// Every inode ever made: a node stays reachable from a durable
    /// directory after it is unlinked live, so none is ever freed.
    nodes: HashMap<u64, Node>,
    next: u64,
    model: DirModel,
    /// Directory operations not yet durable, in order (not `Immediate`).
    dir_log: Vec<DirOp>,
    /// Which pages a failed sync wrote.
    rng: StdRng,
}

/// The page a cut keeps or loses as a whole (sector tears aside).
pub const PAGE: usize = 4096;
/// The unit a torn page is made of.
const SECTOR: usize = 512;

/// What one cut kept of what was not synced.
#[derive(Clone, Copy, Debug, Default)]
pub struct CutStats {
    /// Pages that kept a state newer than their synced one.
    pub unsynced_pages_kept: u64,
    /// Pages whose unsynced changes were all lost.
    pub unsynced_pages_lost: u64,
    /// Pages torn between two states.
    pub torn_pages: u64,
    /// Unsynced directory operations kept.
    pub dir_ops_kept: u64,
    /// Unsynced directory operations lost.
    pub dir_ops_lost: u64,
}

/// When the power goes, counted in filesystem operations.
#[derive(Clone, Copy, Debug)]
pub enum Trigger {
    /// After this many operations of any kind.
    Ops(u64),
    /// Right after this many unlinks.
    Unlinks(u64),
    /// At this many `fsync`s (files or directories): that sync fails and
    /// the power goes, with everything written before it still unsynced —
    /// the moment a missing sync would show.
    Syncs(u64),
}

struct Shared {
    state: Mutex<State>,
    /// Operations so far, and how many may run before the power goes.
    ops: AtomicU64,
    ops_allowed: AtomicU64,
    unlinks: AtomicU64,
    unlinks_allowed: AtomicU64,
    syncs: AtomicU64,
    syncs_allowed: AtomicU64,
    /// The sync that fails with `EIO` (without a cut), and how many did.
    failing_sync: AtomicU64,
    failed_syncs: AtomicU64,
}

/// The filesystem; clones share it (one is mounted, one images).
#[derive(Clone)]
pub struct MemFs(Arc<Shared>);

const ROOT: u64 = 1;
const TTL: Duration = Duration::from_secs(0);

fn attr(ino: u64, n: &Node) -> FileAttr {
    let (kind, size, perm) = match n {
        Node::File { live, .. } => (FileType::RegularFile, live.len() as u64, 0o644),
        Node::Dir { .. } => (FileType::Directory, 0, 0o755),
    };
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: size.div_ceil(512),
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind,
        perm,
        nlink: 1,
        uid: 0,
        gid: 0,
        rdev: 0,
        flags: 0,
        blksize: 4096,
    }
}

impl State {
    fn dir(&mut self, ino: u64) -> Result<(&mut Entries, &mut Entries), Errno> {
        match self.nodes.get_mut(&ino) {
            Some(Node::Dir { live, durable }) => Ok((live, durable)),
            Some(Node::File { .. }) => Err(Errno::ENOTDIR),
            None => Err(Errno::ENOENT),
        }
    }

    /// Applies entry changes to the live directories, and to the durable
    /// ones or the log of unsynced operations as the model says.
    fn change_dirs(&mut self, changes: Vec<(u64, OsString, Option<u64>)>) -> Result<(), Errno> {
        for (dir, name, target) in &changes {
            let (live, _) = self.dir(*dir)?;
            match target {
                Some(ino) => live.insert(name.clone(), *ino),
                None => live.remove(name),
            };
        }
        if self.model == DirModel::Immediate {
            self.apply_durably(&DirOp { changes })
        } else {
            self.dir_log.push(DirOp { changes });
            Ok(())
        }
    }

    fn apply_durably(&mut self, op: &DirOp) -> Result<(), Errno> {
        for (dir, name, target) in &op.changes {
            let (_, durable) = self.dir(*dir)?;
            match target {
                Some(ino) => durable.insert(name.clone(), *ino),
                None => durable.remove(name),
            };
        }
        Ok(())
    }

    /// `fsync` of directory `dir`: its unsynced operations become durable
    /// (and, on a journal, every operation made before its last one).
    fn sync_dir(&mut self, dir: u64) -> Result<(), Errno> {
        let log = std::mem::take(&mut self.dir_log);
        let last = log.iter().rposition(|op| op.touches(dir));
        for (i, op) in log.into_iter().enumerate() {
            let durable_now = match self.model {
                DirModel::Journal => last.is_some_and(|l| i <= l),
                _ => op.touches(dir),
            };
            if durable_now {
                self.apply_durably(&op)?;
            } else {
                self.dir_log.push(op);
            }
        }
        Ok(())
    }

    /// Names `ino` as `name` in `parent` (replacing what had that name).
    fn bind(&mut self, parent: u64, name: &OsStr, ino: u64) -> Result<(), Errno> {
        self.change_dirs(vec![(parent, name.to_owned(), Some(ino))])
    }

    fn unbind(&mut self, parent: u64, name: &OsStr) -> Result<u64, Errno> {
        let ino = *self.dir(parent)?.0.get(name).ok_or(Errno::ENOENT)?;
        self.change_dirs(vec![(parent, name.to_owned(), None)])?;
        Ok(ino)
    }

    fn add(&mut self, parent: u64, name: &OsStr, node: Node) -> Result<FileAttr, Errno> {
        if self.dir(parent)?.0.contains_key(name) {
            return Err(Errno::EEXIST);
        }
        let ino = self.next;
        self.next += 1;
        let a = attr(ino, &node);
        self.nodes.insert(ino, node);
        self.bind(parent, name, ino)?;
        Ok(a)
    }
}

impl MemFs {
    pub fn new(model: DirModel) -> MemFs {
        let mut nodes = HashMap::new();
        let root = Node::Dir {
            live: Entries::new(),
            durable: Entries::new(),
        };
        nodes.insert(ROOT, root);
        MemFs(Arc::new(Shared {
            state: Mutex::new(State {
                nodes,
                next: ROOT + 1,
                model,
                dir_log: Vec::new(),
                rng: StdRng::seed_from_u64(0),
            }),
            ops: AtomicU64::new(0),
            ops_allowed: AtomicU64::new(u64::MAX),
            unlinks: AtomicU64::new(0),
            unlinks_allowed: AtomicU64::new(u64::MAX),
            syncs: AtomicU64::new(0),
            syncs_allowed: AtomicU64::new(u64::MAX),
            failing_sync: AtomicU64::new(u64::MAX),
            failed_syncs: AtomicU64::new(0),
        }))
    }

    /// Cuts the power when `trigger` is reached.
    pub fn arm(&self, trigger: Trigger) {
        match trigger {
            Trigger::Ops(n) => self.0.ops_allowed.store(n, Ordering::SeqCst),
            Trigger::Unlinks(n) => self.0.unlinks_allowed.store(n, Ordering::SeqCst),
            Trigger::Syncs(n) => self.0.syncs_allowed.store(n, Ordering::SeqCst),
        }
    }

    /// Cuts the power now: every later operation fails with `EIO`, and
    /// nothing durable changes any more.
    pub fn cut(&self) {
        self.0
            .ops_allowed
            .fetch_min(self.0.ops.load(Ordering::SeqCst), Ordering::SeqCst);
    }

    /// Makes the `n`th `fsync` from now (1 = the next) fail with `EIO`
    /// without a cut (module docs); `seed` draws the pages it wrote.
    pub fn fail_sync(&self, n: u64, seed: u64) {
        self.0.state.lock().unwrap().rng = StdRng::seed_from_u64(seed);
        let at = self.0.syncs.load(Ordering::SeqCst) + n;
        self.0.failing_sync.store(at, Ordering::SeqCst);
    }

    /// Syncs that failed with `EIO` ([`MemFs::fail_sync`]).
    pub fn failed_syncs(&self) -> u64 {
        self.0.failed_syncs.load(Ordering::SeqCst)
    }

    /// Filesystem operations so far.
    pub fn ops(&self) -> u64 {
        self.0.ops.load(Ordering::SeqCst)
    }

    /// `fsync`s so far.
    pub fn syncs(&self) -> u64 {
        self.0.syncs.load(Ordering::SeqCst)
    }

    pub fn is_cut(&self) -> bool {
        self.0.ops.load(Ordering::SeqCst) >= self.0.ops_allowed.load(Ordering::SeqCst)
    }

    /// Counts an operation; `EIO` once the power is gone.
    fn powered(&self) -> Result<(), Errno> {
        let n = self.0.ops.fetch_add(1, Ordering::SeqCst);
        if n >= self.0.ops_allowed.load(Ordering::SeqCst) {
            self.0.ops.fetch_sub(1, Ordering::SeqCst);
            return Err(Errno::EIO);
        }
        Ok(())
    }

    /// Mounts a clone at `at` (an empty directory); dropping the session
    /// unmounts it.
    pub fn mount(&self, at: &Path) -> std::io::Result<fuser::BackgroundSession> {
        let mut cfg = Config::default();
        cfg.mount_options = vec![MountOption::FSName("filterstore-powercut".into())];
        fuser::spawn_mount(self.clone(), at, &cfg)
    }

    /// Writes what a process kill leaves (the live state) under `to`, as
    /// ordinary files.
    pub fn image_live(&self, to: &Path) -> std::io::Result<()> {
        let s = self.0.state.lock().unwrap();
        let mut contents = HashMap::new();
        for (&ino, n) in &s.nodes {
            if let Node::File { live, .. } = n {
                contents.insert(ino, live.clone());
            }
        }
        let dirs = |ino: u64| match s.nodes.get(&ino) {
            Some(Node::Dir { live, .. }) => Some(live.clone()),
            _ => None,
        };
        write_tree(&dirs, &contents, ROOT, to)
    }

    /// Writes what a power cut now leaves under `to`, as ordinary files: the
    /// durable state plus a random part of what was not synced (module
    /// docs), drawn from `rng`; `tear` allows the last written page of a
    /// file to be torn. Returns what was kept and lost.
    pub fn image_cut(&self, to: &Path, rng: &mut StdRng, tear: bool) -> std::io::Result<CutStats> {
        let s = self.0.state.lock().unwrap();
        let mut stats = CutStats::default();
        // Directories: the durable entries, plus a random prefix of the
        // unsynced operations on a journal.
        let mut dirs: HashMap<u64, Entries> = HashMap::new();
        for (&ino, n) in &s.nodes {
            if let Node::Dir { durable, .. } = n {
                dirs.insert(ino, durable.clone());
            }
        }
        let kept = match s.model {
            DirModel::Journal => rng.gen_range(0..=s.dir_log.len()),
            _ => 0,
        };
        for op in &s.dir_log[..kept] {
            for (dir, name, target) in &op.changes {
                let entries = dirs.entry(*dir).or_default();
                match target {
                    Some(ino) => entries.insert(name.clone(), *ino),
                    None => entries.remove(name),
                };
            }
        }
        stats.dir_ops_kept = kept as u64;
        stats.dir_ops_lost = (s.dir_log.len() - kept) as u64;
        let mut contents = HashMap::new();
        for (&ino, n) in &s.nodes {
            if let Node::File {
                durable,
                base,
                pending,
                ..
            } = n
            {
                let file = Unsynced {
                    durable,
                    base: base.as_deref().unwrap_or(durable),
                    pending,
                };
                contents.insert(ino, cut_file(file, rng, tear, &mut stats));
            }
        }
        let lookup = |ino: u64| dirs.get(&ino).cloned();
        write_tree(&lookup, &contents, ROOT, to)?;
        Ok(stats)
    }

    /// Fills the (new) filesystem with the files under `from`, all durable.
    pub fn load(&self, from: &Path) -> std::io::Result<()> {
        fn walk(s: &mut State, dir: u64, from: &Path) -> std::io::Result<()> {
            for entry in std::fs::read_dir(from)? {
                let entry = entry?;
                let name = entry.file_name();
                let node = if entry.file_type()?.is_dir() {
                    Node::Dir {
                        live: Entries::new(),
                        durable: Entries::new(),
                    }
                } else {
                    let bytes = std::fs::read(entry.path())?;
                    Node::File {
                        live: bytes.clone(),
                        durable: bytes,
                        base: None,
                        pending: Vec::new(),
                    }
                };
                let is_dir = matches!(node, Node::Dir { .. });
                let err = |e: Errno| std::io::Error::from_raw_os_error(i32::from(e));
                let ino = s.add(dir, &name, node).map_err(err)?.ino.0;
                let (live, durable) = s.dir(dir).map_err(err)?;
                durable.clone_from(live);
                if is_dir {
                    walk(s, ino, &entry.path())?;
                }
            }
            Ok(())
        }
        walk(&mut self.0.state.lock().unwrap(), ROOT, from)
    }

    /// `fsync` of a file or a directory: its durable state becomes its live
    /// state (for a directory, by the model's rule), or for the sync chosen
    /// to fail, a random part of it (module docs).
    fn sync(&self, ino: INodeNo, reply: ReplyEmpty) {
        let n = self.0.syncs.fetch_add(1, Ordering::SeqCst) + 1;
        if n >= self.0.syncs_allowed.load(Ordering::SeqCst) {
            self.cut();
            return reply.error(Errno::EIO);
        }
        let fails = n == self.0.failing_sync.load(Ordering::SeqCst);
        let synced = self.with(|s| {
            let State { nodes, rng, .. } = &mut *s;
            match nodes.get_mut(&ino.0) {
                Some(Node::File {
                    live,
                    durable,
                    base,
                    pending,
                }) => {
                    if fails || base.is_some() {
                        let file = Unsynced {
                            durable,
                            base: base.as_deref().unwrap_or(durable),
                            pending,
                        };
                        *durable = if fails {
                            let sized = rng.gen_bool(0.5);
                            image::synced(file, live, |_| rng.gen_bool(0.5), sized)
                        } else {
                            image::synced(file, live, |_| true, true)
                        };
                        *base = Some(live.clone());
                    } else {
                        durable.clone_from(live);
                    }
                    pending.clear();
                    Ok(!fails)
                }
                Some(Node::Dir { .. }) if fails => Ok(false),
                Some(Node::Dir { .. }) => s.sync_dir(ino.0).map(|()| true),
                None => Err(Errno::ENOENT),
            }
        });
        match synced {
            Ok(true) => reply.ok(),
            Ok(false) => {
                self.0.failed_syncs.fetch_add(1, Ordering::SeqCst);
                reply.error(Errno::EIO)
            }
            Err(e) => reply.error(e),
        }
    }

    /// Runs `f` on the state if the power is on.
    fn with<T>(&self, f: impl FnOnce(&mut State) -> Result<T, Errno>) -> Result<T, Errno> {
        self.powered()?;
        f(&mut self.0.state.lock().unwrap())
    }
}
