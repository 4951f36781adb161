//! `kill -9` during a refresh: a child process (this test binary, running
//! the ignored test [`refresh_child`]) indexes a directory of files in
//! small batches and is killed at a random moment; the store it leaves is
//! then read as `docs/FORMAT.md` § 17 says (filter names, tags), and every
//! filter whose tag names a file's current version must hold every key of
//! that file. Between kills the files are rewritten, deleted and added.
//! A process kill, not a power cut: the store's own power-cut test
//! (`tests/crash/power_cut.rs`) covers its commits.

use super::{run, write_file};
use datafusion::datasource::listing::ListingTableUrl;
use datafusion::object_store::local::LocalFileSystem;
use datafusion::object_store::{ObjectMeta, ObjectStore};
use filterstore::FilterStore;
use filterstore_datafusion::{int_key, IndexOptions, IndexedParquetTable};
use futures::TryStreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const CHILD: &str = "FILTERSTORE_INDEX_CRASH_CHILD";
const ROUNDS: usize = 16;

/// The child: one refresh of the table at the directories `CHILD` names.
#[test]
#[ignore = "run by kills_during_refresh_never_leave_a_filter_missing_rows"]
fn refresh_child() {
    let Ok(dirs) = std::env::var(CHILD) else {
        return;
    };
    let (data, store) = dirs.split_once('|').unwrap();
    run(async {
        let ctx = datafusion::prelude::SessionContext::new();
        let options = IndexOptions::new(store)
            .column("id")
            .settle(Duration::ZERO)
            .commit_files(6)
            .concurrency(4);
        let url = format!("{data}/");
        let t = IndexedParquetTable::try_new(&ctx.state(), &url, options)
            .await
            .unwrap();
        t.refresh().await.unwrap();
    });
}

/// A filter's tag as `docs/FORMAT.md` § 17 gives it: size, modification
/// time in nanoseconds, ETag, version, path, column.
fn parse_tag(t: &[u8]) -> (u64, i64, Option<String>, Option<String>, String, String) {
    assert_eq!(t[0], 1, "tag version");
    let size = u64::from_le_bytes(t[1..9].try_into().unwrap());
    let time = i64::from_le_bytes(t[9..17].try_into().unwrap());
    let mut at = 17;
    let mut part = |optional: bool| -> Option<String> {
        let len = u16::from_le_bytes(t[at..at + 2].try_into().unwrap());
        at += 2;
        if optional && len == u16::MAX {
            return None;
        }
        let s = String::from_utf8(t[at..at + len as usize].to_vec()).unwrap();
        at += len as usize;
        Some(s)
    };
    let (e_tag, version) = (part(true), part(true));
    let (path, column) = (part(false).unwrap(), part(false).unwrap());
    (size, time, e_tag, version, path, column)
}

/// The index's prefix of the table at `data` (§ 17): `ix-`, the XXH3-64 of
/// its location URL in 16 hex digits, a dot.
fn prefix(data: &Path) -> String {
    let url = ListingTableUrl::parse(format!("{}/", data.display())).unwrap();
    format!(
        "ix-{:016x}.",
        xxhash_rust::xxh3::xxh3_64(url.as_str().as_bytes())
    )
}

async fn listing(data: &Path) -> HashMap<String, ObjectMeta> {
    let fs = LocalFileSystem::new();
    let prefix = datafusion::object_store::path::Path::from_filesystem_path(data).unwrap();
    let metas: Vec<ObjectMeta> = fs.list(Some(&prefix)).try_collect().await.unwrap();
    metas
        .into_iter()
        .map(|m| (m.location.to_string(), m))
        .collect()
}

/// Every filter naming a current file holds all its keys; returns how many
/// files are indexed in their current version.
async fn check(store_dir: &Path, data: &Path, files: &BTreeMap<String, Vec<i64>>) -> usize {
    let store = FilterStore::open(store_dir).unwrap();
    let infos = store.list_sealed(&prefix(data)).unwrap();
    let current = listing(data).await;
    let mut indexed = 0;
    for (info, loaded) in infos.iter().zip(store.load_sealed(&infos)) {
        let (size, time, e_tag, version, path, column) = parse_tag(info.tag());
        assert_eq!(column, "id");
        let Some(meta) = current.get(&path) else {
            continue; // a file deleted since: never listed, never skipped
        };
        let same = meta.size == size
            && meta.last_modified.timestamp_nanos_opt() == Some(time)
            && meta.e_tag == e_tag
            && meta.version == version;
        if !same {
            continue;
        }
        let filter = loaded.unwrap();
        let name = Path::new(&path).file_name().unwrap().to_str().unwrap();
        for id in &files[name] {
            assert!(
                filter.contains(&int_key(*id as u64)),
                "{path}: id {id} missing from its filter"
            );
        }
        indexed += 1;
    }
    indexed
}

fn ids(rng: &mut StdRng) -> Vec<i64> {
    (0..rng.gen_range(50..400))
        .map(|_| rng.gen_range(0..1_000_000))
        .collect()
}

#[test]
fn kills_during_refresh_never_leave_a_filter_missing_rows() {
    run(async {
        let tmp = tempfile::tempdir().unwrap();
        let data: PathBuf = tmp.path().join("data");
        let store = tmp.path().join("store");
        std::fs::create_dir(&data).unwrap();
        let mut rng = StdRng::seed_from_u64(7);
        let mut files = BTreeMap::new();
        for f in 0..150 {
            let name = format!("f{f:03}.parquet");
            let k = ids(&mut rng);
            write_file(&data.join(&name), &k, false);
            files.insert(name, k);
        }
        let exe = std::env::current_exe().unwrap();
        let mut partial = 0;
        for round in 0..ROUNDS {
            // Every other round starts from an empty store (a whole build to
            // cut); the others rewrite a quarter of the files.
            if round % 2 == 1 {
                std::fs::remove_dir_all(&store).unwrap();
            }
            for _ in 0..40 {
                let name = format!("f{:03}.parquet", rng.gen_range(0..150));
                std::thread::sleep(Duration::from_millis(6));
                let k = ids(&mut rng);
                write_file(&data.join(&name), &k, rng.gen_bool(0.5));
                files.insert(name, k);
            }
            let before = check(&store, &data, &files).await;
            let mut child = Command::new(&exe)
                .args([
                    "index::crash::refresh_child",
                    "--exact",
                    "--ignored",
                    "--test-threads=1",
                ])
                .env(CHILD, format!("{}|{}", data.display(), store.display()))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            tokio::time::sleep(Duration::from_millis(rng.gen_range(20..400))).await;
            let _ = child.kill();
            let status = child.wait().unwrap();
            let indexed = check(&store, &data, &files).await;
            println!(
                "round {round}: {status}, {before} then {indexed} of {} files indexed",
                files.len()
            );
            if indexed > before && indexed < files.len() {
                partial += 1;
            }
        }
        // Kills landed inside refreshes (some batches committed, not all),
        // not only before or after them.
        assert!(
            partial >= 3,
            "{partial} rounds were killed inside a refresh"
        );
    });
}
