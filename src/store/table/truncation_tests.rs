//! A log cut short (issue 36, gap 3): a table's log truncated at every
//! length, from empty to whole, never opens answering "absent" for a key
//! whose batch was acknowledged durable. The page file's superblock says how
//! far the log was durable (`durable_seq`, `docs/FORMAT.md` § 11), written
//! by every fold and by a clean close: a log whose whole records end before
//! it opens *damaged* ("maybe" for every key). Each image below is cut at
//! every byte; every open, read-only and for writing, must either answer
//! every acknowledged key with the table sound, or be damaged, and it is
//! damaged exactly when an acknowledged record was cut away (never
//! spuriously).

use super::background::gate;
use crate::store::{Durability, FilterStore, StoreConfig, Table, TableSpec, WriteBatch};
use std::path::{Path, PathBuf};

/// Keys per batch: a record of 8 operations is 204 bytes.
const BATCH: u32 = 8;

fn key(i: u32) -> Vec<u8> {
    format!("cut-{i:05}").into_bytes()
}

/// Batch `b`: inserts of its `BATCH` keys.
fn batch(b: u32) -> WriteBatch {
    let mut w = WriteBatch::new();
    for i in b * BATCH..(b + 1) * BATCH {
        w.insert(&key(i));
    }
    w
}

fn open(dir: &Path, background: bool) -> (FilterStore, Table) {
    let config = StoreConfig::default()
        .fold_threshold(if background {
            3 * BATCH as u64
        } else {
            1 << 20
        })
        .background_folds(background);
    let store = FilterStore::open_with(dir, config).unwrap();
    let t = store
        .create_table("t", TableSpec::new(2_000, 0.01).seed(3))
        .unwrap();
    (store, t)
}

/// The superblock in force: (fold, `folded_seq`, `log_start`, `durable_seq`).
fn superblock(t: &Table) -> (u64, u64, u64, u64) {
    let g = t.inner.gen.load_full();
    let w = g.writer.lock();
    let sb = w.pages.superblock();
    (sb.fold, sb.folded_seq, sb.log_start, sb.durable_seq)
}

/// Durable empty writes (each takes in a fold that finished in the
/// background) until the superblock in force has a log that starts past
/// byte 0.
fn await_background_fold(t: &Table) {
    for _ in 0..1_000 {
        if superblock(t).2 > 0 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
        t.apply(&WriteBatch::new(), Durability::Durable).unwrap();
    }
    panic!(
        "no fold in the background was taken in: {:?}",
        superblock(t)
    );
}

/// Copies the store's files (not its lock) into `to`: what a crash of the
/// process leaves when `from` is open, or a closed store.
pub(super) fn image(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            image(&e.path(), &target);
        } else if e.file_name() != "LOCK" {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

fn log_of(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir.join("tables"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "log"))
        .unwrap()
}

/// The end of the last record in `log` that holds operations (every
/// acknowledged batch lies before it).
fn acknowledged_end(log: &[u8]) -> usize {
    let mut end = 0;
    for at in 0..log.len().saturating_sub(28) {
        if &log[at..at + 4] != b"FSTR" || log[at + 8] != 9 {
            continue;
        }
        let body = u64::from_le_bytes(log[at + 12..at + 20].try_into().unwrap()) as usize;
        let ops = u32::from_le_bytes(log[at + 24..at + 28].try_into().unwrap());
        if at + 28 + body <= log.len() && ops > 0 {
            end = end.max(at + 28 + body);
        }
    }
    end
}

/// What the opens of one image cut at every length found.
#[derive(Debug, Default)]
struct Counts {
    opens: u32,
    whole: u32,
    damaged: u32,
    /// Opens of a sound table that answered "absent" for an acknowledged
    /// key: silent false negatives.
    silent: u32,
    /// Damaged opens with every acknowledged record there.
    spurious: u32,
}

impl Counts {
    /// One open of a table cut at byte `cut`, `acked` acknowledged batches.
    fn add(&mut self, t: &Table, acked: u32, whole_from: usize, cut: usize) {
        self.opens += 1;
        let damaged = t.health().unwrap().needs_regeneration();
        let all = (0..acked * BATCH).all(|i| t.contains(&key(i)));
        match (damaged, all) {
            (true, _) => self.damaged += 1,
            (false, true) => self.whole += 1,
            (false, false) => self.silent += 1,
        }
        if damaged && cut >= whole_from {
            self.spurious += 1;
        }
    }
}

/// Cuts the log of the store image `base` (`acked` batches acknowledged)
/// at every length from 0 to its whole size and opens each cut copy,
/// read-only then for writing.
fn cut_at_every_length(base: &Path, acked: u32, what: &str) -> Counts {
    let bytes = std::fs::read(log_of(base)).unwrap();
    let whole_from = acknowledged_end(&bytes);
    let mut counts = Counts::default();
    for cut in 0..=bytes.len() {
        let dir = tempfile::tempdir().unwrap();
        image(base, dir.path());
        let log = log_of(dir.path());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&log)
            .unwrap()
            .set_len(cut as u64)
            .unwrap();
        {
            let snapshot = FilterStore::open_snapshot(dir.path()).unwrap();
            let t = snapshot.open_table("t").unwrap();
            counts.add(&t, acked, whole_from, cut);
        }
        let store = FilterStore::open(dir.path()).unwrap();
        let t = store.open_table("t").unwrap();
        counts.add(&t, acked, whole_from, cut);
    }
    eprintln!(
        "{what}: {} bytes cut at every length: {counts:?}",
        bytes.len()
    );
    assert_eq!(
        counts.silent, 0,
        "{what}: silent false negatives: {counts:?}"
    );
    assert_eq!(
        counts.spurious, 0,
        "{what}: damaged with nothing lost: {counts:?}"
    );
    // Every cut before the last acknowledged record's end lost one: all
    // damaged; every cut after it, whole.
    assert_eq!(counts.damaged, 2 * whole_from as u32, "{what}: {counts:?}");
    assert_eq!(
        counts.whole,
        2 * (bytes.len() + 1 - whole_from) as u32,
        "{what}: {counts:?}"
    );
    counts
}

/// Six durable batches, then a clean close: the close's superblock claims
/// them (the log starts at byte 0, nothing folded).
#[test]
fn a_log_cut_after_a_clean_close_is_damaged_never_short() {
    let base = tempfile::tempdir().unwrap();
    {
        let (_store, t) = open(base.path(), false);
        for b in 0..6 {
            t.apply(&batch(b), Durability::Durable).unwrap();
        }
        let (_, folded_seq, _, durable_seq) = superblock(&t);
        assert_eq!(durable_seq, folded_seq, "no claim before the close");
    }
    let counts = cut_at_every_length(base.path(), 6, "closed");
    assert!(counts.damaged > 0);
}

/// Three durable batches, a fold on the writer's thread (the log emptied),
/// three more, a clean close.
#[test]
fn a_log_cut_after_a_fold_and_a_clean_close_is_damaged_never_short() {
    let base = tempfile::tempdir().unwrap();
    {
        let (_store, t) = open(base.path(), false);
        for b in 0..3 {
            t.apply(&batch(b), Durability::Durable).unwrap();
        }
        t.fold().unwrap();
        for b in 3..6 {
            t.apply(&batch(b), Durability::Durable).unwrap();
        }
    }
    cut_at_every_length(base.path(), 6, "folded, closed");
}

/// Durable batches across a fold in the background (the log kept past its
/// folded records, which are punched where the file system can), more
/// after it, a clean close.
#[test]
fn a_log_cut_after_a_background_fold_and_a_clean_close_is_damaged_never_short() {
    let base = tempfile::tempdir().unwrap();
    {
        let (_store, t) = open(base.path(), true);
        for b in 0..4 {
            t.apply(&batch(b), Durability::Durable).unwrap();
        }
        await_background_fold(&t);
        for b in 4..6 {
            t.apply(&batch(b), Durability::Durable).unwrap();
        }
    }
    cut_at_every_length(base.path(), 6, "background fold, closed");
}

/// No clean close: the process dies after a fold in the background whose
/// superblock claims the durable batches appended while it ran (held at
/// its start until they were synced). A log cut below that claim is
/// damaged. (Batches synced after the fold's commit, with no close to
/// claim them, are the residual of `docs/KNOWN_ISSUES.md`.)
#[test]
fn a_log_cut_below_a_background_folds_claim_after_a_crash_is_damaged_never_short() {
    let base = tempfile::tempdir().unwrap();
    let crashed = tempfile::tempdir().unwrap();
    let (_store, t) = open(base.path(), true);
    let dir = t.inner.gen.load_full().shared.dir.clone();
    let go = gate::close(&dir);
    for b in 0..3 {
        t.apply(&batch(b), Durability::Durable).unwrap();
    }
    // Batch 3 starts the fold (held at the gate), then is appended and
    // synced, as is batch 4, before the fold reads anything.
    for b in 3..5 {
        t.apply(&batch(b), Durability::Durable).unwrap();
    }
    go.send(()).unwrap();
    await_background_fold(&t);
    let (_, folded_seq, _, durable_seq) = superblock(&t);
    assert_eq!(
        (folded_seq, durable_seq),
        (3, 5),
        "the fold claims batches 3 and 4"
    );
    image(base.path(), crashed.path());
    let counts = cut_at_every_length(crashed.path(), 5, "background fold, crashed");
    assert!(counts.damaged > 0);
}

/// Flips a byte of superblock copy `fold % 2` of the one table in `dir`
/// (4 KiB copies): its CRC fails.
fn damage_superblock(dir: &Path, fold: u64) {
    let pages = log_of(dir).with_extension("pages");
    let mut bytes = std::fs::read(&pages).unwrap();
    bytes[(fold % 2) as usize * 4096 + 40] ^= 0x40;
    std::fs::write(&pages, &bytes).unwrap();
}

/// The fallback copy's claim is consistent: after a fold in the background
/// whose superblock claims batches 3 and 4 and a clean close whose copy
/// claims batch 5 too, damage to the close's copy brings back the fold's,
/// which opens whole and sound on the whole log (it claims nothing the log
/// lacks), and damaged on the log emptied (its claim still guards).
#[test]
fn the_fallback_copys_claim_opens_whole_and_still_guards() {
    let base = tempfile::tempdir().unwrap();
    let fold = {
        let (_store, t) = open(base.path(), true);
        let go = gate::close(&t.inner.gen.load_full().shared.dir);
        for b in 0..5 {
            t.apply(&batch(b), Durability::Durable).unwrap();
        }
        go.send(()).unwrap();
        await_background_fold(&t);
        t.apply(&batch(5), Durability::Durable).unwrap();
        let (fold, folded_seq, _, durable_seq) = superblock(&t);
        assert_eq!((folded_seq, durable_seq), (3, 5));
        fold
    };
    damage_superblock(base.path(), fold + 1);
    for emptied in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        image(base.path(), dir.path());
        if emptied {
            std::fs::write(log_of(dir.path()), b"").unwrap();
        }
        let store = FilterStore::open(dir.path()).unwrap();
        let t = store.open_table("t").unwrap();
        assert_eq!(superblock(&t).0, fold, "the fold's copy is in force");
        assert_eq!(t.health().unwrap().needs_regeneration(), emptied);
        assert!(
            (0..6 * BATCH).all(|i| t.contains(&key(i))),
            "emptied: {emptied}"
        );
    }
}
