//! A filesystem that forgets, at a power cut, everything not yet synced:
//! an in-memory FUSE filesystem (the `fuser` crate, mounted with the mount
//! syscall, so it needs root and `/dev/fuse`) that keeps, beside the live
//! state, a *durable image* of every file (its bytes as of its last
//! `fsync`/`fdatasync`) and of every directory.
//!
//! Directories follow one of two models, since POSIX leaves it open when a
//! name becomes durable and real filesystems differ:
//!
//! * [`DirModel::Immediate`]: every create, link, unlink and rename is
//!   durable at once. This is the harsh model for deletions (a file deleted
//!   before the log that stops pointing at it is synced is gone).
//! * [`DirModel::OnSync`]: a directory's entries become durable only when
//!   the directory itself is synced. This is the harsh model for creations
//!   (a synced file whose directory was not synced is lost).
//!
//! Writes use direct I/O, so each write reaches the filesystem at once and
//! the kernel's page cache keeps nothing the image does not see;
//! `sync_file_range` never reaches a FUSE filesystem, so it makes nothing
//! durable here. A cut is: kill the writer, then [`MemFs::image`] the
//! durable state into an ordinary directory and open the store there.
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

/// When a directory entry becomes durable (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirModel {
    Immediate,
    OnSync,
}

type Entries = BTreeMap<OsString, u64>;

enum Node {
    File { live: Vec<u8>, durable: Vec<u8> },
    Dir { live: Entries, durable: Entries },
}

struct State {
    /// Every inode ever made: a node stays reachable from a durable
    /// directory after it is unlinked live, so none is ever freed.
    nodes: HashMap<u64, Node>,
    next: u64,
    model: DirModel,
}

/// When the power goes, counted in filesystem operations.
#[derive(Clone, Copy, Debug)]
pub enum Trigger {
    /// After this many operations of any kind.
    Ops(u64),
    /// Right after this many unlinks.
    Unlinks(u64),
}

struct Shared {
    state: Mutex<State>,
    /// Operations so far, and how many may run before the power goes.
    ops: AtomicU64,
    ops_allowed: AtomicU64,
    unlinks: AtomicU64,
    unlinks_allowed: AtomicU64,
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

    /// Names `ino` as `name` in `parent` (replacing what had that name).
    fn bind(&mut self, parent: u64, name: &OsStr, ino: u64) -> Result<(), Errno> {
        let immediate = self.model == DirModel::Immediate;
        let (live, durable) = self.dir(parent)?;
        live.insert(name.to_owned(), ino);
        if immediate {
            durable.insert(name.to_owned(), ino);
        }
        Ok(())
    }

    fn unbind(&mut self, parent: u64, name: &OsStr) -> Result<u64, Errno> {
        let immediate = self.model == DirModel::Immediate;
        let (live, durable) = self.dir(parent)?;
        let ino = live.remove(name).ok_or(Errno::ENOENT)?;
        if immediate {
            durable.remove(name);
        }
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
            }),
            ops: AtomicU64::new(0),
            ops_allowed: AtomicU64::new(u64::MAX),
            unlinks: AtomicU64::new(0),
            unlinks_allowed: AtomicU64::new(u64::MAX),
        }))
    }

    /// Cuts the power when `trigger` is reached.
    pub fn arm(&self, trigger: Trigger) {
        match trigger {
            Trigger::Ops(n) => self.0.ops_allowed.store(n, Ordering::SeqCst),
            Trigger::Unlinks(n) => self.0.unlinks_allowed.store(n, Ordering::SeqCst),
        }
    }

    /// Cuts the power now: every later operation fails with `EIO`, and
    /// nothing durable changes any more.
    pub fn cut(&self) {
        self.0
            .ops_allowed
            .fetch_min(self.0.ops.load(Ordering::SeqCst), Ordering::SeqCst);
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

    /// Writes what a power cut now would leave (or, with `live`, what a
    /// process kill leaves) under `to`, as ordinary files.
    pub fn image(&self, to: &Path, live: bool) -> std::io::Result<()> {
        fn walk(s: &State, ino: u64, to: &Path, live: bool) -> std::io::Result<()> {
            std::fs::create_dir_all(to)?;
            let Some(Node::Dir {
                live: l,
                durable: d,
            }) = s.nodes.get(&ino)
            else {
                return Ok(());
            };
            for (name, child) in if live { l } else { d } {
                match s.nodes.get(child) {
                    Some(Node::File {
                        live: l,
                        durable: d,
                    }) => std::fs::write(to.join(name), if live { l } else { d })?,
                    Some(Node::Dir { .. }) => walk(s, *child, &to.join(name), live)?,
                    None => {}
                }
            }
            Ok(())
        }
        let s = self.0.state.lock().unwrap();
        walk(&s, ROOT, to, live)
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

    /// `fsync` of a file or a directory: its durable image becomes its live
    /// state.
    fn sync(&self, ino: INodeNo, reply: ReplyEmpty) {
        let synced = self.with(|s| {
            match s.nodes.get_mut(&ino.0) {
                Some(Node::File { live, durable }) => durable.clone_from(live),
                Some(Node::Dir { live, durable }) => durable.clone_from(live),
                None => return Err(Errno::ENOENT),
            }
            Ok(())
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
            if let (Some(size), Node::File { live, .. }) = (size, &mut *n) {
                live.resize(size as usize, 0);
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
            Some(Node::File { live, .. }) => {
                let at = offset as usize;
                if live.len() < at + data.len() {
                    live.resize(at + data.len(), 0);
                }
                live[at..at + data.len()].copy_from_slice(data);
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
            let ino = s.unbind(parent.0, name)?;
            s.bind(newparent.0, newname, ino)
        });
        match renamed {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}
