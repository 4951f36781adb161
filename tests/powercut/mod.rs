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
#![allow(dead_code)]

use fuser::Errno;
use fuser::{
    BsdFileFlags, Config, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, LockOwner, MountOption, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use rand::rngs::StdRng;
use rand::Rng;

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
            }),
            ops: AtomicU64::new(0),
            ops_allowed: AtomicU64::new(u64::MAX),
            unlinks: AtomicU64::new(0),
            unlinks_allowed: AtomicU64::new(u64::MAX),
            syncs: AtomicU64::new(0),
            syncs_allowed: AtomicU64::new(u64::MAX),
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
                durable, pending, ..
            } = n
            {
                contents.insert(ino, cut_file(durable, pending, rng, tear, &mut stats));
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
    /// state (for a directory, by the model's rule).
    fn sync(&self, ino: INodeNo, reply: ReplyEmpty) {
        let n = self.0.syncs.fetch_add(1, Ordering::SeqCst) + 1;
        if n >= self.0.syncs_allowed.load(Ordering::SeqCst) {
            self.cut();
            return reply.error(Errno::EIO);
        }
        let synced = self.with(|s| match s.nodes.get_mut(&ino.0) {
            Some(Node::File {
                live,
                durable,
                pending,
            }) => {
                durable.clone_from(live);
                pending.clear();
                Ok(())
            }
            Some(Node::Dir { .. }) => s.sync_dir(ino.0),
            None => Err(Errno::ENOENT),
        });
        match synced {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    /// Runs `f` on the state if the power is on.
    fn with<T>(&self, f: impl FnOnce(&mut State) -> Result<T, Errno>) -> Result<T, Errno> {
        self.powered()?;
        f(&mut self.0.state.lock().unwrap())
    }
}

impl Filesystem for MemFs {
    fn lookup(&self, _r: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let found = self.with(|s| {
            let ino = *s.dir(parent.0)?.0.get(name).ok_or(Errno::ENOENT)?;
            s.nodes.get(&ino).map(|n| attr(ino, n)).ok_or(Errno::ENOENT)
        });
        match found {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _r: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.with(|s| {
            s.nodes
                .get(&ino.0)
                .map(|n| attr(ino.0, n))
                .ok_or(Errno::ENOENT)
        }) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _r: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let a = self.with(|s| {
            let n = s.nodes.get_mut(&ino.0).ok_or(Errno::ENOENT)?;
            if let (Some(size), Node::File { live, pending, .. }) = (size, &mut *n) {
                live.resize(size as usize, 0);
                pending.push(Change::SetLen(size));
            }
            Ok(attr(ino.0, n))
        });
        match a {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        _r: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let node = Node::Dir {
            live: Entries::new(),
            durable: Entries::new(),
        };
        match self.with(|s| s.add(parent.0, name, node)) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        _r: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let node = Node::File {
            live: Vec::new(),
            durable: Vec::new(),
            pending: Vec::new(),
        };
        match self.with(|s| s.add(parent.0, name, node)) {
            Ok(a) => reply.created(
                &TTL,
                &a,
                Generation(0),
                FileHandle(0),
                FopenFlags::FOPEN_DIRECT_IO,
            ),
            Err(e) => reply.error(e),
        }
    }

    fn link(
        &self,
        _r: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let linked = self.with(|s| {
            if s.dir(newparent.0)?.0.contains_key(newname) {
                return Err(Errno::EEXIST);
            }
            let a = s
                .nodes
                .get(&ino.0)
                .map(|n| attr(ino.0, n))
                .ok_or(Errno::ENOENT)?;
            s.bind(newparent.0, newname, ino.0)?;
            Ok(a)
        });
        match linked {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _r: &Request, _ino: INodeNo, _f: OpenFlags, reply: ReplyOpen) {
        match self.powered() {
            Ok(()) => reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _r: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _f: OpenFlags,
        _l: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let data = self.with(|s| match s.nodes.get(&ino.0) {
            Some(Node::File { live, .. }) => {
                let from = (offset as usize).min(live.len());
                let to = (from + size as usize).min(live.len());
                Ok(live[from..to].to_vec())
            }
            _ => Err(Errno::EISDIR),
        });
        match data {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _r: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _w: WriteFlags,
        _f: OpenFlags,
        _l: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let written = self.with(|s| match s.nodes.get_mut(&ino.0) {
            Some(Node::File { live, pending, .. }) => {
                let at = offset as usize;
                if live.len() < at + data.len() {
                    live.resize(at + data.len(), 0);
                }
                live[at..at + data.len()].copy_from_slice(data);
                pending.push(Change::Write {
                    at: offset,
                    data: data.to_vec(),
                });
                Ok(data.len() as u32)
            }
            _ => Err(Errno::EISDIR),
        });
        match written {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn fsync(&self, _r: &Request, ino: INodeNo, _fh: FileHandle, _ds: bool, reply: ReplyEmpty) {
        self.sync(ino, reply)
    }

    fn fsyncdir(&self, _r: &Request, ino: INodeNo, _fh: FileHandle, _ds: bool, reply: ReplyEmpty) {
        self.sync(ino, reply)
    }

    fn flush(
        &self,
        _r: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _l: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok()
    }

    fn release(
        &self,
        _r: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _f: OpenFlags,
        _l: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok()
    }

    fn opendir(&self, _r: &Request, _ino: INodeNo, _f: OpenFlags, reply: ReplyOpen) {
        match self.powered() {
            Ok(()) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn releasedir(
        &self,
        _r: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _f: OpenFlags,
        reply: ReplyEmpty,
    ) {
        reply.ok()
    }

    fn readdir(
        &self,
        _r: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let listed = self.with(|s| {
            let names: Vec<(OsString, u64)> = s
                .dir(ino.0)?
                .0
                .iter()
                .map(|(n, i)| (n.clone(), *i))
                .collect();
            let mut entries = vec![
                (ino.0, FileType::Directory, OsString::from(".")),
                (ROOT, FileType::Directory, OsString::from("..")),
            ];
            for (name, child) in names {
                let kind = match s.nodes.get(&child) {
                    Some(Node::Dir { .. }) => FileType::Directory,
                    _ => FileType::RegularFile,
                };
                entries.push((child, kind, name));
            }
            Ok(entries)
        });
        let entries = match listed {
            Ok(entries) => entries,
            Err(e) => return reply.error(e),
        };
        for (i, (child, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(child), (i + 1) as u64, kind, name) {
                break;
            }
        }
        reply.ok()
    }

    fn unlink(&self, _r: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.with(|s| s.unbind(parent.0, name)) {
            Ok(_) => {
                let n = self.0.unlinks.fetch_add(1, Ordering::SeqCst) + 1;
                if n >= self.0.unlinks_allowed.load(Ordering::SeqCst) {
                    self.cut();
                }
                reply.ok()
            }
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, r: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.unlink(r, parent, name, reply)
    }

    fn rename(
        &self,
        _r: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        _f: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let renamed = self.with(|s| {
            let ino = *s.dir(parent.0)?.0.get(name).ok_or(Errno::ENOENT)?;
            s.dir(newparent.0)?;
            s.change_dirs(vec![
                (parent.0, name.to_owned(), None),
                (newparent.0, newname.to_owned(), Some(ino)),
            ])
        });
        match renamed {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}

/// Writes the tree under directory `ino` (entries from `dirs`, file bytes
/// from `contents`) under `to`.
fn write_tree(
    dirs: &dyn Fn(u64) -> Option<Entries>,
    contents: &HashMap<u64, Vec<u8>>,
    ino: u64,
    to: &Path,
) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    let Some(entries) = dirs(ino) else {
        return Ok(());
    };
    for (name, child) in entries {
        if let Some(bytes) = contents.get(&child) {
            std::fs::write(to.join(&name), bytes)?;
        } else if dirs(child).is_some() {
            write_tree(dirs, contents, child, &to.join(&name))?;
        }
    }
    Ok(())
}

/// The bytes of a file after a cut (module docs): `durable` with, page by
/// page, a random number of the unsynced `pending` changes applied, the
/// size after a random one of them.
fn cut_file(
    durable: &[u8],
    pending: &[Change],
    rng: &mut StdRng,
    tear: bool,
    stats: &mut CutStats,
) -> Vec<u8> {
    if pending.is_empty() {
        return durable.to_vec();
    }
    // The live size after each change.
    let mut sizes = Vec::with_capacity(pending.len());
    let mut size = durable.len() as u64;
    for c in pending {
        size = match c {
            Change::Write { at, data } => size.max(at + data.len() as u64),
            Change::SetLen(n) => *n,
        };
        sizes.push(size);
    }
    // The changes touching each page, in order.
    let mut by_page: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    let mut before = durable.len() as u64;
    for (i, c) in pending.iter().enumerate() {
        let (from, to) = match c {
            Change::Write { at, data } => (*at, at + data.len() as u64),
            Change::SetLen(n) => ((*n).min(before), (*n).max(before)),
        };
        if to > from {
            for page in from / PAGE as u64..=(to - 1) / PAGE as u64 {
                by_page.entry(page).or_default().push(i);
            }
        }
        before = sizes[i];
    }
    let size_pick = rng.gen_range(0..=pending.len());
    let final_size = if size_pick == 0 {
        durable.len()
    } else {
        sizes[size_pick - 1] as usize
    };
    let mut out = durable.to_vec();
    let span = by_page
        .keys()
        .next_back()
        .map_or(0, |p| (p + 1) as usize * PAGE);
    out.resize(out.len().max(span).max(final_size), 0);
    let last = pending.len() - 1;
    let torn_page = match &pending[last] {
        Change::Write { at, .. } if tear && rng.gen_bool(0.5) => Some(at / PAGE as u64),
        _ => None,
    };
    for (&page, changes) in &by_page {
        let v = rng.gen_range(0..=changes.len());
        let at = page as usize * PAGE;
        let state = |n: usize| page_state(durable, pending, changes, page, n);
        let bytes = if torn_page == Some(page) {
            // Each sector from the state before or after the last change.
            let (old, new) = (state(changes.len() - 1), state(changes.len()));
            stats.torn_pages += 1;
            let mut mixed = old;
            for s in 0..PAGE / SECTOR {
                if rng.gen_bool(0.5) {
                    mixed[s * SECTOR..(s + 1) * SECTOR]
                        .copy_from_slice(&new[s * SECTOR..(s + 1) * SECTOR]);
                }
            }
            mixed
        } else {
            if v > 0 {
                stats.unsynced_pages_kept += 1;
            } else {
                stats.unsynced_pages_lost += 1;
            }
            state(v)
        };
        out[at..at + PAGE].copy_from_slice(&bytes);
    }
    out.truncate(final_size);
    out
}

/// Page `page` after the first `n` of its `changes` (indices into
/// `pending`), starting from its synced bytes.
fn page_state(
    durable: &[u8],
    pending: &[Change],
    changes: &[usize],
    page: u64,
    n: usize,
) -> Vec<u8> {
    let start = page as usize * PAGE;
    let mut bytes = vec![0u8; PAGE];
    if start < durable.len() {
        let end = durable.len().min(start + PAGE);
        bytes[..end - start].copy_from_slice(&durable[start..end]);
    }
    for &i in &changes[..n] {
        match &pending[i] {
            Change::Write { at, data } => {
                let (from, to) = (*at as usize, *at as usize + data.len());
                let (lo, hi) = (from.max(start), to.min(start + PAGE));
                if lo < hi {
                    bytes[lo - start..hi - start].copy_from_slice(&data[lo - from..hi - from]);
                }
            }
            Change::SetLen(len) => {
                let len = *len as usize;
                if len < start + PAGE {
                    bytes[len.saturating_sub(start)..].fill(0);
                }
            }
        }
    }
    bytes
}
