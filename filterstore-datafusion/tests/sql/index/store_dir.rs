//! An index whose store directory is deleted, damaged, read-only or locked
//! by another process: the table answers as the `ListingTable` does, reads
//! what its filters cannot vouch for, says why in `EXPLAIN` and in one log
//! line.

use super::{explain, register_listing, rows, run, session, write_file};
use datafusion::prelude::SessionContext;
use filterstore_datafusion::{IndexOptions, IndexedParquetTable};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Every warning logged, for the "says so once" checks.
static LOGGED: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.level() <= log::Level::Warn
    }
    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) {
            LOGGED.lock().unwrap().push(r.args().to_string());
        }
    }
    fn flush(&self) {}
}

fn capture_logs() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        static CAPTURE: Capture = Capture;
        log::set_logger(&CAPTURE).unwrap();
        log::set_max_level(log::LevelFilter::Warn);
    });
}

/// Waits (10 s at most) until no handle of this process holds the store
/// at `dir` open: an open of our own then succeeds (and is closed again).
fn wait_until_closed(dir: &Path) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match filterstore::FilterStore::open(dir) {
            Ok(s) => return drop(s),
            Err(filterstore::StoreError::AlreadyOpen { .. })
                if std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("the store at {} stays open: {e}", dir.display()),
        }
    }
}

/// Warnings logged that name `dir`.
fn warnings_about(dir: &Path) -> usize {
    let needle = dir.display().to_string();
    LOGGED
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains(&needle))
        .count()
}

/// A data directory of 12 files (ids `100·f .. 100·f + 50`) and a store
/// path beside it.
fn data(tmp: &Path) -> (PathBuf, PathBuf) {
    let data = tmp.join("data");
    std::fs::create_dir(&data).unwrap();
    for f in 0..12i64 {
        let ids: Vec<i64> = (100 * f..100 * f + 50).collect();
        write_file(&data.join(format!("f{f:02}.parquet")), &ids, false);
    }
    (data, tmp.join("store"))
}

fn options(store: &Path) -> IndexOptions {
    IndexOptions::new(store).column("id").settle(Duration::ZERO)
}

const LOOKUPS: [&str; 4] = [
    "SELECT id, grp FROM t WHERE id = 305",
    "SELECT count(*) FROM t WHERE id IN (7, 1150, 99999)",
    "SELECT id FROM t WHERE id = 99999",
    "SELECT id FROM t WHERE k32 = 501 AND id = 501",
];

/// Each lookup answers as the listing table's.
async fn same_answers(ctx: &SessionContext) {
    for q in LOOKUPS {
        assert_eq!(
            rows(ctx, q).await,
            rows(ctx, &q.replace("FROM t", "FROM l")).await,
            "{q}"
        );
    }
}

async fn table(ctx: &SessionContext, data: &Path, store: &Path) -> IndexedParquetTable {
    let url = format!("{}/", data.display());
    let t = IndexedParquetTable::register(ctx, "t", &url, options(store))
        .await
        .unwrap();
    register_listing(ctx, "l", data).await;
    t
}

#[test]
fn a_deleted_store_keeps_answering_and_refuses_to_refresh() {
    run(async {
        let tmp = tempfile::tempdir().unwrap();
        let (data, store) = data(tmp.path());
        let ctx = session();
        let t = table(&ctx, &data, &store).await;
        t.refresh().await.unwrap();
        std::fs::remove_dir_all(&store).unwrap();
        write_file(&data.join("f99.parquet"), &[99999], false);
        same_answers(&ctx).await;
        assert!(t.refresh().await.is_err(), "a refresh into a deleted store");
        same_answers(&ctx).await;
        // While it is open, another table of the same directory shares the
        // open store: its packs are gone, so it reads every file.
        let other = session();
        let u = table(&other, &data, &store).await;
        assert!(
            u.limitation().unwrap().contains("cannot be used"),
            "{:?}",
            u.limitation()
        );
        same_answers(&other).await;
        // Once closed, a new table on the missing directory makes a new store.
        // A refresh that a scan above started in the background holds the
        // store until it ends (here at once: the store is gone), so the
        // store may still be open for a moment after the tables are dropped:
        // a table made then shares it and says so, and its answers are
        // still right. Wait for it to close (at most 30 s).
        drop((t, u, ctx, other));
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let (ctx, t) = loop {
            let ctx = session();
            let t = table(&ctx, &data, &store).await;
            if t.limitation().is_none() || std::time::Instant::now() > deadline {
                break (ctx, t);
            }
            drop((t, ctx));
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(t.limitation(), None);
        same_answers(&ctx).await;
    });
}

#[test]
fn a_damaged_store_is_not_used_and_says_so_once() {
    run(async {
        capture_logs();
        let tmp = tempfile::tempdir().unwrap();
        let (data, store) = data(tmp.path());
        table(&session(), &data, &store)
            .await
            .refresh()
            .await
            .unwrap();
        // A damaged pack: its filters are not used, their files are read.
        let pack = std::fs::read_dir(store.join("tables"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "pack"))
            .unwrap();
        let mut bytes = std::fs::read(&pack).unwrap();
        let last = bytes.len() - 10;
        bytes[last] ^= 0xff;
        std::fs::write(&pack, &bytes).unwrap();
        let ctx = session();
        let t = table(&ctx, &data, &store).await;
        assert!(
            t.limitation().unwrap().contains("cannot be used"),
            "{:?}",
            t.limitation()
        );
        same_answers(&ctx).await;
        drop((t, ctx));
        // The store's last handle may be dropped a moment later (by a task
        // of the session just dropped): until then a new table would share
        // the open store, and its close could write the catalog again.
        wait_until_closed(&store);
        // A damaged catalog: the store is not opened, every file is read.
        std::fs::write(store.join("catalog"), b"not a catalog").unwrap();
        let ctx = session();
        let t = table(&ctx, &data, &store).await;
        let why = t.limitation().unwrap();
        assert!(why.contains("cannot be opened"), "{why}");
        let before = warnings_about(&store);
        same_answers(&ctx).await;
        let plan = explain(&ctx, LOOKUPS[0]).await;
        assert!(
            plan.contains("skipped_by_index=0") && plan.contains("cannot be opened"),
            "{plan}"
        );
        assert_eq!(
            warnings_about(&store) - before,
            1,
            "said once, not per scan"
        );
    });
}

#[test]
fn a_store_locked_by_another_process_is_not_used() {
    run(async {
        let tmp = tempfile::tempdir().unwrap();
        let (data, store) = data(tmp.path());
        table(&session(), &data, &store)
            .await
            .refresh()
            .await
            .unwrap();
        let mut holder = Command::new("flock")
            .arg("-x")
            .arg(store.join("LOCK"))
            .args(["sleep", "60"])
            .stdout(Stdio::null())
            .spawn()
            .expect("util-linux flock");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let ctx = session();
        let t = table(&ctx, &data, &store).await;
        let why = t.limitation();
        let _ = holder.kill();
        let _ = holder.wait();
        assert!(why.as_deref().unwrap_or("").contains("locked"), "{why:?}");
        same_answers(&ctx).await;
        assert!(explain(&ctx, LOOKUPS[0])
            .await
            .contains("skipped_by_index=0"));
    });
}

/// A store on a file system mounted read-only (a tmpfs remounted `ro`, as
/// root; elsewhere this test says it cannot run and passes): its filters
/// guard reads, a refresh is refused, a new file is read.
#[test]
fn a_read_only_store_guards_reads_without_refreshing() {
    run(async {
        let tmp = tempfile::tempdir().unwrap();
        let (data, _) = data(tmp.path());
        let store = tmp.path().join("ro");
        std::fs::create_dir(&store).unwrap();
        let mount = |args: &[&str]| {
            Command::new("mount")
                .args(args)
                .status()
                .is_ok_and(|s| s.success())
        };
        let dir = store.to_str().unwrap();
        if !mount(&["-t", "tmpfs", "-o", "size=64m", "tmpfs", dir]) {
            assert!(!euid_is_root(), "root could not mount a tmpfs");
            eprintln!("skipped: mounting a tmpfs needs root");
            return;
        }
        let inner = store.join("s");
        table(&session(), &data, &inner)
            .await
            .refresh()
            .await
            .unwrap();
        let remounted = mount(&["-o", "remount,ro", dir]);
        let ctx = session();
        let result = async {
            assert!(remounted, "remount read-only");
            let t = table(&ctx, &data, &inner).await;
            let why = t.limitation().unwrap_or_default();
            assert!(why.contains("read-only"), "{why}");
            assert!(t.refresh().await.is_err());
            write_file(&data.join("f99.parquet"), &[99999], false);
            same_answers(&ctx).await;
            let plan = explain(&ctx, LOOKUPS[2]).await;
            assert!(
                plan.contains("skipped_by_index=12") && plan.contains("unindexed=1"),
                "{plan}"
            );
        };
        let outcome = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(result)).await;
        drop(ctx);
        Command::new("umount").arg(dir).status().unwrap();
        if let Err(p) = outcome {
            std::panic::resume_unwind(p);
        }
    });
}

/// Whether this process runs as root (its effective uid, from `/proc`).
fn euid_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}
