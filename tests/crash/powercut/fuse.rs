//! The FUSE operations of [`MemFs`]: each runs on the live state and
//! records what a cut may lose (see the parent module).

use super::{attr, Change, Entries, MemFs, Node, ROOT, TTL};
use fuser::Errno;
use fuser::{
    BsdFileFlags, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use std::ffi::{OsStr, OsString};
use std::sync::atomic::Ordering;

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
            base: None,
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

    /// `fallocate(PUNCH_HOLE | KEEP_SIZE)`, what the store's background
    /// fold gives back a log's folded prefix with: the range reads as
    /// zeros at once, and until the file is synced a cut may keep or drop
    /// the punch page by page, as it does a write of zeros (on ext4 and XFS
    /// a punch is journaled metadata; a page the cut keeps unpunched holds
    /// its old bytes, one it keeps punched holds zeros). The size stays.
    /// Any other mode is refused as unsupported (the store then takes its
    /// fallback, as on a filesystem without holes).
    fn fallocate(
        &self,
        _r: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if mode != libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE {
            return reply.error(Errno::EOPNOTSUPP);
        }
        let punched = self.with(|s| match s.nodes.get_mut(&ino.0) {
            Some(Node::File { live, pending, .. }) => {
                let from = (offset as usize).min(live.len());
                let to = (offset.saturating_add(length) as usize).min(live.len());
                if from < to {
                    live[from..to].fill(0);
                    pending.push(Change::Write {
                        at: from as u64,
                        data: vec![0; to - from],
                    });
                }
                Ok(())
            }
            _ => Err(Errno::EISDIR),
        });
        match punched {
            Ok(()) => reply.ok(),
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
