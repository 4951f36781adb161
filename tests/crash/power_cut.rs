//! Power-cut test (`harness = false`; the child mode is this binary's
//! `main`). A child process (this binary, re-run in child mode) writes to a
//! store on [`powercut::MemFs`], a FUSE filesystem that loses at a cut what
//! a real one may lose (every synced byte is kept; of what was written since,
//! a random, page-granular, reordered subset, with an optional torn last
//! page; directory entries by one of three models), reporting each
//! operation before it starts and when it returned. The parent cuts the
//! power at a chosen moment (kills the child, then takes the image a cut
//! leaves), opens the store on a copy of the image and checks it against
//! what the child reported ([`powercut::model`]):
//!
//! * the store and every table that must exist open (a failure is a
//!   *failed open*);
//! * every key of every batch reported durable is present, unless a remove
//!   of that batch had started (batches written without a sync may be
//!   lost, in part or whole, but must not take a durable one with them);
//!   a table reported created or imported exists, one reported dropped
//!   does not, one whose create, import or drop was cut is either absent
//!   or whole; a guarded read returns the last value written (or, for a
//!   write that was cut, the one before);
//! * no table opens damaged: nothing rots in this model, so a table whose
//!   log lost a record that a later one says was durable means the store
//!   claimed durable what it had not made so (every lookup would answer
//!   "maybe" until a regeneration).
//!
//! One test per workload ([`powercut::workload::Workload`]): `mixed` (cuts
//! at random moments of inserts, removes, flushes, folds and
//! regenerations), `folds`, `bulk_load`, `import`, `change_layout`,
//! `tables` (creates and drops of other tables), `sealed` (batches of
//! sealed filters committed and removed: each filter reported committed
//! loads whole with every key of its batch, each reported removed is gone,
//! each whose batch was cut is wholly there or not), `migration` (from the
//! store-format-2 fixture, with guard storage), `guard` (the guard's
//! storage through `Guard`: writes, merges, and reopens whose recovery
//! merges the logs in the background), `new_store` (the store created in a fresh
//! subdirectory, cut during its creation and right after), `eio` (a sync
//! fails with EIO, its pages are dropped, later syncs succeed; the store
//! must not report durable what the next cut loses) and `eio_reopen` (the
//! same, the writer reopening the store after an error). Beside them,
//! `reopen_after_each_failed_sync_then_power_cut` runs the deterministic
//! scenarios of [`powercut::reopen`]: each sync of a durable insert, a
//! flush, a fold, a regeneration, a create, a drop and a reopen failed in
//! turn, the store reopened, durable writes, a cut (144 scenarios, 6 s).
//! Cuts rotate the three directory models of [`powercut::DirModel`] (a
//! chain's first cut too) and come in chains of three: the next cut's
//! filesystem starts from the last cut's image, so recovery from a cut is
//! itself cut; chains alternate between tables of the blocked and the
//! split-block layout.
//!
//! **60 cuts per workload by default** (660 in all, and the scenarios:
//! 76 s on the 2-core VM at load 4–4.5); `FILTERSTORE_POWER_CUTS` sets
//! another number (the bar is 1,000: 20 min 15 s at load 2.4–4.2).
//! A test name (or part of one) as argument runs that workload only. Each
//! workload ends with `RESULT powercut.<workload>.cuts`, `.lost` (durable
//! keys lost), `.lost_batches` (batches reported durable that a cut lost),
//! `.failed_opens` and `.unsynced_writes_kept` (pages that kept a write made
//! after their last sync: what makes the model honest); the EIO workloads
//! add `.failed_syncs` (cuts whose writer saw its sync fail).
//!
//! Needs root and `/dev/fuse` to mount; without them the test says so and
//! passes, unless `FILTERSTORE_REQUIRE_FUSE=1` (set by `.ci/run`).
use crate::powercut::child::Child;
use crate::powercut::model::{self, Model};
use crate::powercut::workload::{chain_of, layout_of, Plan, Workload, CHAIN};
use crate::powercut::{DirModel, MemFs, Trigger};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "FILTERSTORE_POWERCUT_CHILD";
/// How long one cut may take before it counts as a hang.
const CUT_LIMIT: Duration = Duration::from_secs(120);
/// Lines of the writer's after which the power goes if nothing else cut it.
const LINES: usize = 120;
/// Cuts per workload unless `FILTERSTORE_POWER_CUTS` says otherwise.
const DEFAULT_CUTS: u32 = 60;

macro_rules! tests {
    ($($name:ident: $w:expr,)*) => {
        $(fn $name() { run($w) })*
        /// The tests, each with its time limit (run by `main`).
        pub(crate) const TESTS: &[(&str, fn(), Duration)] = &[
            $((stringify!($name), $name, LIMIT),)*
            ("reopen_after_each_failed_sync_then_power_cut", reopen_after_each_failed_sync, LIMIT),
        ];
    };
}

tests! {
    power_cuts_mixed: Workload::Mixed,
    power_cuts_inside_folds: Workload::Folds,
    power_cuts_inside_bulk_loads: Workload::BulkLoad,
    power_cuts_inside_imports: Workload::Import,
    power_cuts_inside_layout_changes: Workload::ChangeLayout,
    power_cuts_inside_creates_and_drops: Workload::Tables,
    power_cuts_inside_sealed_batches: Workload::Sealed,
    power_cuts_inside_the_migration_from_format_2: Workload::Migration,
    power_cuts_inside_guard_writes_and_merges: Workload::Guard,
    power_cuts_during_store_creation: Workload::NewStore,
    failed_syncs_then_power_cuts: Workload::Eio,
    failed_syncs_reopens_then_power_cuts: Workload::EioReopen,
}

/// How long one workload may take before it counts as a hang.
const LIMIT: Duration = Duration::from_secs(6 * 3600);

/// Runs the child mode if the parent set its variable; returns whether it
/// did (then `main` is done).
pub(crate) fn child_mode() -> bool {
    match std::env::var(CHILD_ENV) {
        Ok(spec) => child(&spec),
        Err(_) => return false,
    }
    true
}

/// Child mode: `workload|dir|cut|inherited` (`Model::encode_for_child`).
fn child(spec: &str) {
    let mut parts = spec.splitn(4, '|');
    let (workload, dir, cut, inherited) = (
        Workload::parse(parts.next().unwrap()),
        PathBuf::from(parts.next().unwrap()),
        parts.next().unwrap().parse::<u32>().unwrap(),
        parts.next().unwrap(),
    );
    let tolerant = matches!(workload, Workload::Eio | Workload::EioReopen);
    let mut c = Child::new(dir, cut, inherited, tolerant);
    workload.run_child(&mut c, layout_of(cut));
}

fn cuts() -> u32 {
    std::env::var("FILTERSTORE_POWER_CUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CUTS)
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

/// The figures of one workload's cuts.
#[derive(Default)]
struct Tally {
    keys: u64,
    lost: u64,
    lost_batches: u64,
    failed_opens: u64,
    kept: u64,
    failed_syncs: u64,
    /// Cuts by the operation they fell in.
    stages: BTreeMap<String, u32>,
    failures: Vec<String>,
}

/// Whether a FUSE filesystem can be mounted here; says why not if not
/// (a failure if `FILTERSTORE_REQUIRE_FUSE` is set).
fn mountable() -> bool {
    let Some(why) = cannot_mount() else {
        return true;
    };
    assert!(
        std::env::var("FILTERSTORE_REQUIRE_FUSE").is_err(),
        "FILTERSTORE_REQUIRE_FUSE is set, but {why}"
    );
    println!("skipped: {why} (needs root and /dev/fuse)");
    false
}

/// The scenarios of [`powercut::reopen`]: every sync of each syncing
/// operation failed in turn, the store reopened in the same boot, durable
/// writes, a cut.
fn reopen_after_each_failed_sync() {
    if !mountable() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let (ran, failures) = crate::powercut::reopen::run(work.path());
    println!(
        "reopen_scenarios: {ran} scenarios, {} failed",
        failures.len()
    );
    println!("RESULT powercut.reopen_scenarios.runs {ran} scenarios");
    println!(
        "RESULT powercut.reopen_scenarios.failed {} scenarios",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {ran} scenarios failed: {failures:#?}",
        failures.len()
    );
}

fn run(w: Workload) {
    if !mountable() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let mut r = Runner {
        w,
        prepared: w.prepare(work.path()),
        work,
        rng: StdRng::seed_from_u64(0xC07 + w as u64),
        spans: HashMap::new(),
        tally: Tally::default(),
    };
    // What the previous cut of the chain left: its image and its model.
    let mut chain = None;
    for cut in 0..cuts() {
        chain = r.one_cut(cut, chain.take());
    }
    let t = &r.tally;
    report(w, t);
    if !t.failures.is_empty() {
        let _ = r.work.keep();
        panic!(
            "{} of {} cuts failed: {:#?}",
            t.failures.len(),
            cuts(),
            t.failures
        );
    }
}

/// One workload's cuts.
struct Runner {
    w: Workload,
    work: tempfile::TempDir,
    prepared: Option<PathBuf>,
    rng: StdRng,
    spans: Spans,
    tally: Tally,
}

impl Runner {
    /// Cut `cut`, from what the last cut of its chain left; returns what
    /// it left for the next, unless the check failed.
    fn one_cut(
        &mut self,
        cut: u32,
        chain: Option<(tempfile::TempDir, Model)>,
    ) -> Option<(tempfile::TempDir, Model)> {
        let (w, at) = (self.w, cut % CHAIN);
        // Chains start under each model in turn, as do their later cuts.
        let dir_model = [DirModel::Immediate, DirModel::OnSync, DirModel::Journal]
            [((chain_of(cut) + at) % 3) as usize];
        let fs = MemFs::new(dir_model);
        let mut model = match chain {
            Some((image, model)) if at != 0 => {
                fs.load(image.path()).unwrap();
                model
            }
            _ => w.initial(&fs, self.prepared.as_deref()),
        };
        let plan = w.plan(at == 0, &mut self.rng);
        let run = self.cut_once(&fs, cut, &model, plan);
        let t = &mut self.tally;
        *t.stages.entry(run.stage.clone()).or_default() += 1;
        t.kept += run.stats.unsynced_pages_kept + run.stats.torn_pages;
        t.failed_syncs += u64::from(run.failed_syncs > 0);
        run.lines.iter().for_each(|l| model.apply(l));
        // The check opens a copy: the next cut of the chain starts from the
        // image as the cut left it, so its own recovery can be cut.
        let copy = tempfile::tempdir_in(self.work.path()).unwrap();
        copy_dir(run.image.path(), copy.path());
        let extra = |s: &filterstore::FilterStore, out: &mut model::Checked| w.extra_check(s, out);
        let checked = model::check(&copy.path().join(w.store_dir(cut)), &model, &extra);
        t.keys += checked.keys;
        t.lost += checked.lost_keys;
        t.lost_batches += checked.lost_batches;
        t.failed_opens += u64::from(checked.failed_open);
        if checked.failures.is_empty() {
            return Some((run.image, checked.resolved));
        }
        let image = run.image.keep();
        let all_lines = image.with_extension("lines");
        std::fs::write(&all_lines, run.lines.join("\n")).unwrap();
        eprintln!(
            "cut {cut} ({dir_model:?}, {plan:?}, {:?}): {:?}; the image the cut left is kept \
             in {}, the child's lines in {}; its last lines: {:#?}",
            run.stats,
            checked.failures,
            image.display(),
            all_lines.display(),
            &run.lines[run.lines.len().saturating_sub(8)..]
        );
        let why = format!("cut {cut} ({dir_model:?}): {:?}", checked.failures);
        t.failures.push(why);
        None
    }

    /// Runs a writer on `fs` and cuts the power as `plan` says.
    fn cut_once(&mut self, fs: &MemFs, cut: u32, model: &Model, plan: Plan) -> Run {
        let mnt = tempfile::tempdir_in(self.work.path()).unwrap();
        let session = fs.mount(mnt.path()).unwrap();
        let mut writer = Writer::spawn(
            self.w,
            cut,
            &mnt.path().join(self.w.store_dir(cut)),
            model,
            self.work.path(),
        );
        match plan {
            Plan::At(trigger) => fs.arm(trigger),
            Plan::Eio { fail, .. } => fs.fail_sync(fail, self.rng.gen()),
            Plan::Inside { .. } => {}
        }
        let mut watch = Watch {
            plan,
            at: cut % CHAIN,
            started: HashMap::new(),
            stack: Vec::new(),
        };
        let mut lines = Vec::new();
        let mut failed_at: Option<usize> = None;
        while !fs.is_cut() && lines.len() < LINES {
            let Some(line) = writer.next_line(fs, cut, &lines) else {
                continue;
            };
            if watch.on_line(&line, fs, &mut self.spans, &mut self.rng) {
                writer.ack();
            }
            lines.push(line);
            if let Plan::Eio { after, .. } = plan {
                if fs.failed_syncs() > 0 {
                    let at = *failed_at.get_or_insert(lines.len());
                    if lines.len() >= at + after {
                        break;
                    }
                }
            }
        }
        fs.cut();
        for line in writer.stop() {
            watch.on_line(&line, fs, &mut HashMap::new(), &mut self.rng);
            lines.push(line);
        }
        let image = tempfile::tempdir_in(self.work.path()).unwrap();
        let tear = self.rng.gen_bool(0.5);
        let stats = fs.image_cut(image.path(), &mut self.rng, tear).unwrap();
        drop(session);
        Run {
            image,
            lines,
            stage: watch
                .stack
                .last()
                .cloned()
                .unwrap_or_else(|| "between".into()),
            stats,
            failed_syncs: fs.failed_syncs(),
        }
    }
}

fn report(w: Workload, t: &Tally) {
    let name = w.name();
    println!(
        "{name}: {} cuts (by the operation cut: {:?}), {} durable keys checked, {} lost \
         ({} batches), {} failed opens, {} failed cuts",
        cuts(),
        t.stages,
        t.keys,
        t.lost,
        t.lost_batches,
        t.failed_opens,
        t.failures.len()
    );
    println!("RESULT powercut.{name}.cuts {} cuts", cuts());
    println!("RESULT powercut.{name}.lost {} keys", t.lost);
    println!(
        "RESULT powercut.{name}.lost_batches {} batches",
        t.lost_batches
    );
    println!(
        "RESULT powercut.{name}.failed_opens {} opens",
        t.failed_opens
    );
    println!(
        "RESULT powercut.{name}.unsynced_writes_kept {} pages",
        t.kept
    );
    if matches!(w, Workload::Eio | Workload::EioReopen) {
        println!(
            "RESULT powercut.{name}.failed_syncs {} cuts",
            t.failed_syncs
        );
    }
}

/// One cut: the image it left, the writer's lines, the operation it fell
/// in, what it kept and how many syncs failed before it.
struct Run {
    image: tempfile::TempDir,
    lines: Vec<String>,
    stage: String,
    stats: crate::powercut::CutStats,
    failed_syncs: u64,
}

/// The filesystem operations and syncs of a stage's last run, by stage and
/// the cut's place in its chain (the first open of a chain migrates or
/// creates the store, a later one recovers it).
type Spans = HashMap<(String, u32), (u64, u64)>;

/// The writer process: its lines, and the word it waits for before each
/// operation.
struct Writer {
    child: std::process::Child,
    acks: std::process::ChildStdin,
    lines: mpsc::Receiver<String>,
    reader: std::thread::JoinHandle<()>,
    stderr: PathBuf,
    deadline: Instant,
}

impl Writer {
    fn spawn(w: Workload, cut: u32, dir: &Path, model: &Model, work: &Path) -> Writer {
        let spec = format!(
            "{}|{}|{cut}|{}",
            w.name(),
            dir.display(),
            model.encode_for_child()
        );
        let stderr = work.join(format!("child-{cut}.stderr"));
        let mut child = Command::new(std::env::current_exe().unwrap())
            .env(CHILD_ENV, spec)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let acks = child.stdin.take().unwrap();
        let (tx, rx) = mpsc::channel::<String>();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Writer {
            child,
            acks,
            lines: rx,
            reader,
            stderr,
            deadline: Instant::now() + CUT_LIMIT,
        }
    }

    /// The next line, or `None` after 5 ms without one or once the power
    /// is gone; a writer that stopped before that or hangs fails the test.
    fn next_line(&mut self, fs: &MemFs, cut: u32, so_far: &[String]) -> Option<String> {
        match self.lines.recv_timeout(Duration::from_millis(5)) {
            Ok(line) => Some(line),
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < self.deadline => None,
            Err(mpsc::RecvTimeoutError::Disconnected) if fs.is_cut() => None,
            Err(_) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "cut {cut}: the child stopped or hung after {} lines ({:?}): {}",
                    so_far.len(),
                    so_far.last(),
                    std::fs::read_to_string(&self.stderr).unwrap_or_default()
                );
            }
        }
    }

    /// Lets the writer start the operation it announced.
    fn ack(&mut self) {
        let _ = self.acks.write_all(b"\n").and_then(|()| self.acks.flush());
    }

    /// Kills the writer (the power is already gone); returns the lines it
    /// printed before that and that were still on their way.
    fn stop(mut self) -> Vec<String> {
        std::thread::sleep(Duration::from_millis(20));
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        drop(self.acks);
        self.reader.join().unwrap();
        self.lines.try_iter().collect()
    }
}

/// Follows the writer's operations: the one running, and when the plan's
/// comes, arms the cut inside it.
struct Watch {
    plan: Plan,
    /// The cut's place in its chain.
    at: u32,
    /// Per stage: filesystem operations and syncs at its last start, and
    /// how many times it started.
    started: HashMap<String, (u64, u64, usize)>,
    /// The operations running, innermost last.
    stack: Vec<String>,
}

impl Watch {
    /// Returns whether the line announced an operation (which then waits).
    fn on_line(&mut self, line: &str, fs: &MemFs, spans: &mut Spans, rng: &mut StdRng) -> bool {
        let mut words = line.split(' ');
        let (verb, stage) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let key = (stage.to_string(), self.at);
        match verb {
            "start" => {
                let (ops, syncs) = (fs.ops(), fs.syncs());
                let n = self.started.get(stage).map_or(0, |s| s.2) + 1;
                self.started.insert(stage.into(), (ops, syncs, n));
                self.stack.push(stage.into());
                if let Plan::Inside {
                    stage: target,
                    nth,
                    at_sync,
                    stretch,
                } = self.plan
                {
                    if target == stage && nth == n {
                        let (op_span, sync_span) = spans.get(&key).copied().unwrap_or((256, 4));
                        fs.arm(if at_sync {
                            Trigger::Syncs(syncs + rng.gen_range(1..=sync_span.max(1)))
                        } else {
                            let span = ((op_span.max(16) as f64) * stretch) as u64;
                            Trigger::Ops(ops + rng.gen_range(0..span))
                        });
                    }
                }
                true
            }
            "done" | "error" => {
                self.stack.pop();
                if let (Some(&(ops, syncs, _)), "done") = (self.started.get(stage), verb) {
                    spans.insert(key, (fs.ops() - ops, fs.syncs() - syncs));
                }
                false
            }
            _ => false,
        }
    }
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
