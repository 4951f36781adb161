//! Prototype power-cut harness: an in-memory FUSE filesystem whose "durable
//! image" of a file changes only on fsync, and power cuts during durable
//! filterstore writes. See README.md.
use fuser::*;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

#[derive(Clone)]
enum Node {
    File { data: Vec<u8>, durable: Vec<u8> },
    Dir { children: BTreeMap<OsString, u64> },
}

#[derive(Default)]
struct State {
    nodes: BTreeMap<u64, Node>,
    next: u64,
}

#[derive(Clone)]
struct Mem(Arc<Mutex<State>>);

const TTL: Duration = Duration::from_secs(0);

fn attr(ino: u64, n: &Node) -> FileAttr {
    let (kind, size, perm) = match n {
        Node::File { data, .. } => (FileType::RegularFile, data.len() as u64, 0o644),
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

impl Mem {
    fn new() -> Mem {
        let mut s = State::default();
        s.nodes.insert(
            1,
            Node::Dir {
                children: BTreeMap::new(),
            },
        );
        s.next = 2;
        Mem(Arc::new(Mutex::new(s)))
    }
    fn add(&self, parent: u64, name: &OsStr, node: Node) -> Result<FileAttr, Errno> {
        let mut s = self.0.lock().unwrap();
        let ino = s.next;
        s.next += 1;
        let a = attr(ino, &node);
        s.nodes.insert(ino, node);
        match s.nodes.get_mut(&parent) {
            Some(Node::Dir { children }) => {
                children.insert(name.to_owned(), ino);
            }
            _ => return Err(Errno::ENOTDIR),
        }
        Ok(a)
    }
    /// The durable image, written under `to`.
    fn image(&self, to: &std::path::Path) {
        let s = self.0.lock().unwrap();
        fn walk(s: &State, ino: u64, to: &std::path::Path) {
            if let Some(Node::Dir { children }) = s.nodes.get(&ino) {
                std::fs::create_dir_all(to).unwrap();
                for (name, c) in children {
                    match s.nodes.get(c) {
                        Some(Node::File { durable, data }) => std::fs::write(
                            to.join(name),
                            if std::env::var("PL_VOLATILE").is_ok() {
                                data
                            } else {
                                durable
                            },
                        )
                        .unwrap(),
                        Some(Node::Dir { .. }) => walk(s, *c, &to.join(name)),
                        None => {}
                    }
                }
            }
        }
        walk(&s, 1, to);
    }
}

impl Filesystem for Mem {
    fn lookup(&self, _r: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let s = self.0.lock().unwrap();
        let ino = match s.nodes.get(&parent.0) {
            Some(Node::Dir { children }) => children.get(name).copied(),
            _ => None,
        };
        match ino.and_then(|i| s.nodes.get(&i).map(|n| attr(i, n))) {
            Some(a) => reply.entry(&TTL, &a, Generation(0)),
            None => reply.error(Errno::ENOENT),
        }
    }
    fn getattr(&self, _r: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let s = self.0.lock().unwrap();
        match s.nodes.get(&ino.0) {
            Some(n) => reply.attr(&TTL, &attr(ino.0, n)),
            None => reply.error(Errno::ENOENT),
        }
    }
    fn setattr(
        &self,
        _r: &Request,
        ino: INodeNo,
        _m: Option<u32>,
        _u: Option<u32>,
        _g: Option<u32>,
        size: Option<u64>,
        _a: Option<TimeOrNow>,
        _mt: Option<TimeOrNow>,
        _c: Option<std::time::SystemTime>,
        _fh: Option<FileHandle>,
        _cr: Option<std::time::SystemTime>,
        _ch: Option<std::time::SystemTime>,
        _b: Option<std::time::SystemTime>,
        _f: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut s = self.0.lock().unwrap();
        match s.nodes.get_mut(&ino.0) {
            Some(n) => {
                if let (Some(sz), Node::File { data, .. }) = (size, &mut *n) {
                    data.resize(sz as usize, 0);
                }
                let a = attr(ino.0, n);
                reply.attr(&TTL, &a)
            }
            None => reply.error(Errno::ENOENT),
        }
    }
    fn mkdir(
        &self,
        _r: &Request,
        parent: INodeNo,
        name: &OsStr,
        _m: u32,
        _u: u32,
        reply: ReplyEntry,
    ) {
        match self.add(
            parent.0,
            name,
            Node::Dir {
                children: BTreeMap::new(),
            },
        ) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }
    fn create(
        &self,
        _r: &Request,
        parent: INodeNo,
        name: &OsStr,
        _m: u32,
        _u: u32,
        _f: i32,
        reply: ReplyCreate,
    ) {
        match self.add(
            parent.0,
            name,
            Node::File {
                data: Vec::new(),
                durable: Vec::new(),
            },
        ) {
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
    fn open(&self, _r: &Request, _ino: INodeNo, _f: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO)
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
        let s = self.0.lock().unwrap();
        match s.nodes.get(&ino.0) {
            Some(Node::File { data, .. }) => {
                let o = (offset as usize).min(data.len());
                let e = (o + size as usize).min(data.len());
                reply.data(&data[o..e])
            }
            _ => reply.error(Errno::EISDIR),
        }
    }
    fn write(
        &self,
        _r: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        d: &[u8],
        _w: WriteFlags,
        _f: OpenFlags,
        _l: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut s = self.0.lock().unwrap();
        match s.nodes.get_mut(&ino.0) {
            Some(Node::File { data, .. }) => {
                let o = offset as usize;
                if data.len() < o + d.len() {
                    data.resize(o + d.len(), 0);
                }
                data[o..o + d.len()].copy_from_slice(d);
                if std::env::var("PL_TRACE").is_ok() {
                    eprintln!(
                        "TRACE write ino={} off={} len={} t={:?}",
                        ino.0,
                        offset,
                        d.len(),
                        std::time::SystemTime::now()
                            .duration_since(UNIX_EPOCH)
                            .unwrap()
                            .as_millis()
                    );
                }
                reply.written(d.len() as u32)
            }
            _ => reply.error(Errno::EISDIR),
        }
    }
    fn fsync(&self, _r: &Request, ino: INodeNo, _fh: FileHandle, _ds: bool, reply: ReplyEmpty) {
        let mut s = self.0.lock().unwrap();
        if let Some(Node::File { data, durable }) = s.nodes.get_mut(&ino.0) {
            *durable = data.clone();
            if std::env::var("PL_TRACE").is_ok() {
                eprintln!(
                    "TRACE fsync ino={} len={} t={:?}",
                    ino.0,
                    data.len(),
                    std::time::SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .unwrap()
                        .as_millis()
                );
            }
        }
        reply.ok()
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
        _fl: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok()
    }
    fn fsyncdir(&self, _r: &Request, _ino: INodeNo, _fh: FileHandle, _ds: bool, reply: ReplyEmpty) {
        reply.ok()
    }
    fn opendir(&self, _r: &Request, _ino: INodeNo, _f: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::empty())
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
        let s = self.0.lock().unwrap();
        if let Some(Node::Dir { children }) = s.nodes.get(&ino.0) {
            let mut entries: Vec<(u64, FileType, OsString)> = vec![
                (ino.0, FileType::Directory, ".".into()),
                (1, FileType::Directory, "..".into()),
            ];
            for (n, c) in children {
                let k = match s.nodes.get(c) {
                    Some(Node::Dir { .. }) => FileType::Directory,
                    _ => FileType::RegularFile,
                };
                entries.push((*c, k, n.clone()));
            }
            for (i, (c, k, n)) in entries.into_iter().enumerate().skip(offset as usize) {
                if reply.add(INodeNo(c), (i + 1) as u64, k, n) {
                    break;
                }
            }
            reply.ok()
        } else {
            reply.error(Errno::ENOTDIR)
        }
    }
    fn unlink(&self, _r: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut s = self.0.lock().unwrap();
        let ino = match s.nodes.get_mut(&parent.0) {
            Some(Node::Dir { children }) => children.remove(name),
            _ => None,
        };
        match ino {
            Some(i) => {
                s.nodes.remove(&i);
                reply.ok()
            }
            None => reply.error(Errno::ENOENT),
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
        np: INodeNo,
        nn: &OsStr,
        _f: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let mut s = self.0.lock().unwrap();
        let ino = match s.nodes.get_mut(&parent.0) {
            Some(Node::Dir { children }) => children.remove(name),
            _ => None,
        };
        let Some(ino) = ino else {
            return reply.error(Errno::ENOENT);
        };
        let old = match s.nodes.get_mut(&np.0) {
            Some(Node::Dir { children }) => children.insert(nn.to_owned(), ino),
            _ => None,
        };
        if let Some(o) = old {
            s.nodes.remove(&o);
        }
        reply.ok()
    }
}

fn key(b: u64, i: u64) -> Vec<u8> {
    format!("b{b}-{i}").into_bytes()
}

fn child(dir: &str) {
    use filterstore::{Durability, FilterStore, TableSpec, WriteBatch};
    let store = FilterStore::open(dir).unwrap();
    let t = store
        .open_or_create_table("t", TableSpec::new(200_000, 0.01).seed(3))
        .unwrap();
    let mut b = WriteBatch::new();
    for n in 0.. {
        b.clear();
        for i in 0..500 {
            b.insert(&key(n, i));
        }
        t.apply(&b, Durability::Durable).unwrap();
        println!("durable {n}");
        if n % 40 == 39 {
            t.fold().unwrap();
        }
        if std::env::var("PL_STOP_AFTER")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            == Some(n)
        {
            println!("idle");
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }
}

fn main() {
    if let Ok(d) = std::env::var("PL_CHILD") {
        return child(&d);
    }
    let cuts: u32 = std::env::args()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let (mut lost_total, mut open_fail) = (0u64, 0u32);
    for cut in 0..cuts {
        let mnt = std::path::PathBuf::from(format!("/tmp/plmnt-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&mnt);
        let fs = Mem::new();
        let mut cfg = Config::default();
        cfg.mount_options = vec![MountOption::FSName("pl".into())];
        let session = match spawn_mount(fs.clone(), &mnt, &cfg) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("mount: {e}");
                return;
            }
        };
        let db = mnt.join("db");
        let mut ch = std::process::Command::new(std::env::current_exe().unwrap())
            .env("PL_CHILD", &db)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let ms = std::env::var("PL_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(300 + (cut as u64 * 7919) % 1500);
        std::thread::sleep(Duration::from_millis(ms));
        unsafe {
            libc::kill(ch.id() as i32, libc::SIGKILL);
        }
        let out = ch.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let durable: Vec<u64> = stdout
            .lines()
            .filter_map(|l| l.strip_prefix("durable "))
            .map(|n| n.parse().unwrap())
            .collect();
        let img = std::path::PathBuf::from(format!("/var/tmp/plimg-{cut}"));
        let _ = std::fs::remove_dir_all(&img);
        fs.image(&img.join("x"));
        if std::env::var("PL_BOTH").is_ok() {
            std::env::set_var("PL_VOLATILE", "1");
            fs.image(&img.join("v"));
            std::env::remove_var("PL_VOLATILE");
            let _ = std::fs::rename(&img, "/var/tmp/plboth");
        }
        drop(session);
        let img = if std::env::var("PL_BOTH").is_ok() {
            std::path::PathBuf::from("/var/tmp/plboth")
        } else {
            img
        };
        let store = filterstore::FilterStore::open(img.join("x").join("db"));
        match store.and_then(|s| s.open_table("t").map(|t| (s, t))) {
            Ok((_s, t)) => {
                let lost: u64 = durable
                    .iter()
                    .map(|&b| (0..500).filter(|&i| !t.contains(&key(b, i))).count() as u64)
                    .sum();
                lost_total += lost;
                println!(
                    "cut {cut} at {ms} ms: {} durable batches, lost keys {lost}",
                    durable.len()
                );
            }
            Err(e) => {
                open_fail += 1;
                println!(
                    "cut {cut} at {ms} ms: {} durable batches, OPEN FAILED: {e}",
                    durable.len()
                );
                let _ = std::fs::rename(&img, format!("/var/tmp/plfail-{cut}"));
                continue;
            }
        }
        let _ = std::fs::remove_dir_all(&img);
    }
    println!("RESULT cuts {cuts} lost_keys {lost_total} open_failures {open_fail}");
}
