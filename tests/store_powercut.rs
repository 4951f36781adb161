//! Power-cut test (`harness = false`; the child mode is this binary's
//! `main`). A child process (this binary, re-run in child mode) writes to a
//! table on [`powercut::MemFs`], a FUSE filesystem that keeps only what was
//! synced: durable insert batches, durable removes of earlier batches,
//! folds and regenerations, printing each step. The parent cuts the power
//! at a random step (kills the child, then takes the filesystem's durable
//! image), opens the store on the image and checks that
//!
//! * the store opens (an open failure fails the test),
//! * every key of every batch reported durable is present, unless a remove
//!   of that batch had started.
//!
//! Cuts alternate the two directory models of [`powercut::DirModel`], and
//! come in chains of three: the next cut's filesystem starts from the last
//! cut's image, so recovery from a cut is itself cut. 16 cuts by default;
//! `FILTERSTORE_POWER_CUTS` sets another number (the bar is 1,000).
//!
//! Needs root and `/dev/fuse` to mount; without them the test says so and
//! passes, unless `FILTERSTORE_REQUIRE_FUSE=1` (set by `.ci/run`).
#![cfg(all(feature = "store", target_os = "linux"))]

use filterstore::{
    Durability, FilterStore, RegenOptions, StoreError, Table, TableSpec, WriteBatch,
};
use powercut::{DirModel, MemFs, Trigger};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod common;
mod powercut;

const CHILD_ENV: &str = "FILTERSTORE_POWERCUT_CHILD";
const TABLE: &str = "cut";
const BATCH: u32 = 400;
/// How long one cut may take before it counts as a hang.
const CUT_LIMIT: Duration = Duration::from_secs(120);

fn main() {
    match std::env::var(CHILD_ENV) {
        Ok(spec) => child(&spec),
        Err(_) => common::run_main(
            &[(
                "power_cuts_never_lose_a_durable_key",
                power_cuts_never_lose_a_durable_key,
            )],
            Duration::from_secs(6 * 3600),
        ),
    }
}

/// A batch: the cut that wrote it and its number there.
type BatchId = (u32, u64);

fn key(b: BatchId, i: u32) -> Vec<u8> {
    format!("c{}-b{}-{i}", b.0, b.1).into_bytes()
}

fn batch(b: BatchId) -> impl Iterator<Item = Vec<u8>> {
    (0..BATCH).map(move |i| key(b, i))
}

fn encode(ids: &[BatchId]) -> String {
    let v: Vec<String> = ids.iter().map(|(c, b)| format!("{c}.{b}")).collect();
    v.join(",")
}

fn decode(s: &str) -> Vec<BatchId> {
    s.split(',')
        .filter(|x| !x.is_empty())
        .map(|x| {
            let (c, b) = x.split_once('.').unwrap();
            (c.parse().unwrap(), b.parse().unwrap())
        })
        .collect()
}

/// Child mode: `dir|cut|inherited batches`. Writes until killed; stdout
/// says what is durable.
fn child(spec: &str) {
    let mut parts = spec.splitn(3, '|');
    let (dir, cut, inherited) = (
        parts.next().unwrap(),
        parts.next().unwrap().parse::<u32>().unwrap(),
        decode(parts.next().unwrap()),
    );
    let store = FilterStore::open(dir).unwrap();
    let table = store
        .open_or_create_table(TABLE, TableSpec::new(100_000, 0.01).seed(3))
        .unwrap();
    table.flush().unwrap();
    println!("opened");
    let mut rng = StdRng::seed_from_u64(u64::from(cut));
    let mut live = inherited;
    let mut w = WriteBatch::new();
    for n in 0u64.. {
        match rng.gen_range(0..16) {
            0 | 1 if live.len() > 2 => {
                let gone = live.swap_remove(rng.gen_range(0..live.len()));
                println!("removing {}", encode(&[gone]));
                w.clear();
                batch(gone).for_each(|k| {
                    w.remove(&k);
                });
                table.apply(&w, Durability::Durable).unwrap();
            }
            2 => {
                println!("folding");
                table.fold().unwrap();
            }
            3 if !live.is_empty() => regenerate(&table, &live),
            _ => {
                let b = (cut, n);
                w.clear();
                batch(b).for_each(|k| {
                    w.insert(&k);
                });
                table.apply(&w, Durability::Durable).unwrap();
                println!("durable {}", encode(&[b]));
                live.push(b);
            }
        }
    }
}

fn regenerate(table: &Table, live: &[BatchId]) {
    println!("regenerating");
    let source = || {
        live.iter()
            .flat_map(|&b| batch(b))
            .map(Ok::<_, std::io::Error>)
    };
    table.regenerate(source, &RegenOptions::default()).unwrap();
    println!("regenerated");
}

fn cuts() -> u32 {
    std::env::var("FILTERSTORE_POWER_CUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16)
}

/// Why the test cannot run here, if it cannot.
fn cannot_mount() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("no /dev/fuse".into());
    }
    let probe = tempfile::tempdir().unwrap();
    match MemFs::new(DirModel::Immediate).mount(probe.path()) {
        Ok(session) => {
            drop(session);
            None
        }
        Err(e) => Some(format!("mounting a FUSE filesystem failed: {e}")),
    }
}

fn power_cuts_never_lose_a_durable_key() {
    if let Some(why) = cannot_mount() {
        assert!(
            std::env::var("FILTERSTORE_REQUIRE_FUSE").is_err(),
            "FILTERSTORE_REQUIRE_FUSE is set, but {why}"
        );
        println!("skipped: {why} (needs root and /dev/fuse)");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(0xC07);
    // What the previous cut of the chain left: its image and the batches
    // that must be there.
    let mut chain: Option<(tempfile::TempDir, Vec<BatchId>)> = None;
    let (mut checked, mut stages) = (0u64, [0u32; 4]);
    for cut in 0..cuts() {
        let model = if cut % 2 == 0 {
            DirModel::Immediate
        } else {
            DirModel::OnSync
        };
        let fs = MemFs::new(model);
        let inherited = match chain.take() {
            Some((image, must)) if cut % 3 != 0 => {
                fs.load(image.path()).unwrap();
                must
            }
            _ => Vec::new(),
        };
        let (image, must, stage, tail) = cut_once(&fs, work.path(), cut, &inherited, &mut rng);
        stages[stage] += 1;
        // The check recovers a copy: the next cut of the chain starts from
        // the image as the cut left it, so its own recovery can be cut.
        let copy = tempfile::tempdir_in(work.path()).unwrap();
        copy_dir(image.path(), copy.path());
        let verdict = std::panic::catch_unwind(|| check(copy.path(), &must, cut, model));
        match verdict {
            Ok(n) => checked += n,
            Err(panic) => {
                let kept = image.keep();
                eprintln!(
                    "cut {cut}: the image the cut left is kept in {}; the child's last steps: {:?}",
                    kept.display(),
                    &tail[..]
                );
                let _ = work.keep();
                std::panic::resume_unwind(panic);
            }
        }
        chain = Some((image, must));
    }
    println!(
        "{} cuts ({} while inserting, {} removing, {} folding, {} regenerating), \
         {checked} durable keys checked, 0 lost, 0 open failures",
        cuts(),
        stages[0],
        stages[1],
        stages[2],
        stages[3]
    );
}

/// Runs a child on `fs` and cuts the power at a random moment. Returns the
/// durable image, the batches that must be in it, the stage cut and the
/// child's last lines.
fn cut_once(
    fs: &MemFs,
    work: &Path,
    cut: u32,
    inherited: &[BatchId],
    rng: &mut StdRng,
) -> (tempfile::TempDir, Vec<BatchId>, usize, Vec<String>) {
    let mnt = tempfile::tempdir_in(work).unwrap();
    let session = fs.mount(mnt.path()).unwrap();
    let exe = std::env::current_exe().unwrap();
    let spec = format!("{}|{cut}|{}", mnt.path().display(), encode(inherited));
    let stderr_path = work.join(format!("child-{cut}.stderr"));
    let mut child = Command::new(exe)
        .env(CHILD_ENV, spec)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // The power goes after a random number of filesystem operations
    // (log-uniform up to 2^18), or right after the 1st to 64th unlink
    // (sled deleting a blob is the riskiest moment); if that has not come
    // within 60 steps, at the 60th.
    let trigger = if rng.gen_bool(0.5) {
        let scale = 1u64 << rng.gen_range(0..18);
        Trigger::Ops(scale + rng.gen_range(0..scale))
    } else {
        Trigger::Unlinks(rng.gen_range(1..=64))
    };
    fs.arm(trigger);
    let deadline = Instant::now() + CUT_LIMIT;
    let mut lines: Vec<String> = Vec::new();
    while !fs.is_cut() && lines.len() < 60 {
        match rx.recv_timeout(Duration::from_millis(5)) {
            Ok(line) => lines.push(line),
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "cut {cut}: the child stopped or hung after {} steps: {}",
                    lines.len(),
                    std::fs::read_to_string(&stderr_path).unwrap_or_default()
                );
            }
        }
    }
    fs.cut();
    // What the child printed before the cut is still on its way.
    std::thread::sleep(Duration::from_millis(20));
    child.kill().unwrap();
    child.wait().unwrap();
    reader.join().unwrap();
    lines.extend(rx.try_iter());
    let image = tempfile::tempdir_in(work).unwrap();
    fs.image(image.path(), false).unwrap();
    drop(session);
    let (must, stage) = must_have(inherited, &lines);
    let tail = lines[lines.len().saturating_sub(6)..].to_vec();
    (image, must, stage, tail)
}

/// The batches that must survive: inherited or reported durable, and not
/// being removed. And the stage the child was in when cut.
fn must_have(inherited: &[BatchId], lines: &[String]) -> (Vec<BatchId>, usize) {
    let mut must: BTreeSet<BatchId> = inherited.iter().copied().collect();
    let mut stage = 0;
    for line in lines {
        let (word, arg) = line.split_once(' ').unwrap_or((line, ""));
        stage = match word {
            "durable" => {
                must.extend(decode(arg));
                0
            }
            "removing" => {
                decode(arg).iter().for_each(|b| {
                    must.remove(b);
                });
                1
            }
            "folding" => 2,
            "regenerating" => 3,
            _ => 0,
        };
    }
    (must.into_iter().collect(), stage)
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir(&target).unwrap();
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Opens the store on `image` and counts the keys checked; panics on an open
/// failure or a lost key.
fn check(image: &Path, must: &[BatchId], cut: u32, model: DirModel) -> u64 {
    let store = FilterStore::open(image)
        .unwrap_or_else(|e| panic!("cut {cut} ({model:?}): the store does not open: {e}"));
    let table = match store.open_table(TABLE) {
        Ok(t) => t,
        Err(StoreError::NoSuchTable(_)) if must.is_empty() => return 0,
        Err(e) => panic!("cut {cut} ({model:?}): the table does not open: {e}"),
    };
    let mut lost = Vec::new();
    for &b in must {
        let missing = batch(b).filter(|k| !table.contains(k)).count();
        if missing > 0 {
            lost.push((b, missing));
        }
    }
    assert!(
        lost.is_empty(),
        "cut {cut} ({model:?}): durable keys lost (batch, keys): {lost:?}"
    );
    must.len() as u64 * u64::from(BATCH)
}
