//! `filterstore demo`: the end-to-end tour a newcomer runs first.
//!
//! Each section builds on the library's public API only, prints what it did
//! and the figures it measured, and finishes in seconds.

use filterstore::FilterParams;
use filterstore::RegenOptions;
use filterstore::{build_message, decode_message, MessageTarget};
use filterstore::{probe, Refiner};
use filterstore::{BitFilter, BloomRead, HashSpec, Layout};
use filterstore::{Change, Guard, SledDiffStorage};
use filterstore::{Durability, FilterStore, Table, TableSpec, WriteBatch};
use std::error::Error;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `println!` for the tour: a reader that went away (`filterstore demo |
/// head`) ends it quietly, through [`ReaderGone`], instead of the panic of
/// `println!`.
macro_rules! say {
    ($($arg:tt)*) => {
        say(format_args!($($arg)*))?
    };
}

/// Standard output was closed by its reader: the tour stops, successfully.
#[derive(Debug)]
struct ReaderGone;

impl std::fmt::Display for ReaderGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("standard output was closed")
    }
}

impl Error for ReaderGone {}

/// Writes one line of the tour to standard output.
fn say(line: std::fmt::Arguments<'_>) -> Result<(), Box<dyn Error>> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_fmt(line).and_then(|()| out.write_all(b"\n")) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(Box::new(ReaderGone)),
        other => Ok(other?),
    }
}

/// Runs the demo; a reader that goes away ends it quietly.
pub fn run(db: Option<PathBuf>) -> Result<(), Box<dyn Error>> {
    match tour(db) {
        Err(e) if e.is::<ReaderGone>() => Ok(()),
        other => other,
    }
}

/// The tour. `db` names a directory for the on-disk parts (`--db`;
/// `FILTERSTORE_DB` is not used), which must not exist yet: the tour
/// creates tables of its own, and must never touch a database that holds a
/// user's. A temporary directory is used (and removed) when it is `None`.
fn tour(db: Option<PathBuf>) -> Result<(), Box<dyn Error>> {
    if let Some(dir) = db.as_deref().filter(|d| d.symlink_metadata().is_ok()) {
        return Err(format!(
            "the demo creates tables of its own, and {} exists; give --db a directory that does not exist yet, or no --db for a temporary one",
            dir.display()
        )
        .into());
    }
    let start = Instant::now();
    let tmp = TempDir::new()?;
    let dir = db.unwrap_or_else(|| tmp.0.join("demo.db"));
    say!("filterstore demo — database in {}\n", dir.display());
    core_filters()?;
    let store = FilterStore::open(&dir)?;
    tables(&store)?;
    guarded_reads(&store, &dir)?;
    semijoin(&store)?;
    drift(&store)?;
    drop(store);
    crash_safety(&dir)?;
    say!("done in {:.1} s", start.elapsed().as_secs_f64());
    Ok(())
}

/// 16-byte keys: a counter and a tag that keeps the absent keys disjoint from
/// the present ones.
fn key(i: u64, tag: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.to_le_bytes());
    k[8..].copy_from_slice(&tag.to_le_bytes());
    k
}

fn ns_per(start: Instant, n: u64) -> f64 {
    start.elapsed().as_nanos() as f64 / n as f64
}

/// Section 1: both layouts sized for 1% on one million keys, measured.
fn core_filters() -> Result<(), Box<dyn Error>> {
    const N: u64 = 1_000_000;
    const TARGET: f64 = 0.01;
    say!("1. In-memory filters: {N} keys of 16 bytes, sized for a {TARGET} false-positive rate");
    say!(
        "   {:<9} {:>10} {:>3} {:>9} {:>11} {:>11} {:>10} {:>10} {:>10}",
        "layout",
        "m (bits)",
        "k",
        "bits/key",
        "FP theory",
        "FP measured",
        "insert ns",
        "lookup ns",
        "batch ns"
    );
    for layout in [Layout::Standard, Layout::Blocked] {
        let params = FilterParams::for_capacity(N, TARGET, layout, HashSpec::random())?;
        let filter = BitFilter::new(params)?;
        let t = Instant::now();
        for i in 0..N {
            filter.insert(&key(i, 0));
        }
        let insert_ns = ns_per(t, N);
        let absent: Vec<[u8; 16]> = (0..N).map(|i| key(i, 1)).collect();
        let t = Instant::now();
        let false_positives = absent.iter().filter(|k| filter.contains(&k[..])).count();
        let lookup_ns = ns_per(t, N);
        let t = Instant::now();
        let batched = filter.contains_many(&absent);
        let batch_ns = ns_per(t, N);
        let batched_fp = batched.iter().filter(|b| **b).count();
        if batched_fp != false_positives {
            return Err("batched and single lookups disagree".into());
        }
        let present_missing = (0..N).filter(|&i| !filter.contains(&key(i, 0))).count();
        if present_missing != 0 {
            return Err(format!("{present_missing} false negatives").into());
        }
        say!(
            "   {:<9} {:>10} {:>3} {:>9.2} {:>10.3}% {:>10.3}% {:>10.1} {:>10.1} {:>10.1}",
            layout.name(),
            params.m(),
            params.k(),
            params.m() as f64 / N as f64,
            params.expected_fp(N) * 100.0,
            false_positives as f64 / N as f64 * 100.0,
            insert_ns,
            lookup_ns,
            batch_ns
        );
    }
    say!("   Every inserted key was found again: a Bloom filter never gives a false negative.");
    say!("   The blocked layout spends a few more bits to reach the same rate, and answers from one cache line.\n");
    Ok(())
}

/// Keys of the demo's customers table.
fn customer(i: u64) -> Vec<u8> {
    format!("customer:{i:08}").into_bytes()
}

/// Section 2: per-table filters in the store: counting filters in its own
/// files, bit filters in memory.
fn tables(store: &FilterStore) -> Result<(), Box<dyn Error>> {
    say!(
        "2. Per-table filters on disk: counting filter in the store's files, bit filter in memory"
    );
    let customers = store.create_table(
        "customers",
        TableSpec::new(200_000, 0.01).layout(Layout::Blocked),
    )?;
    let orders = store.create_table(
        "orders",
        TableSpec::new(100_000, 0.001).layout(Layout::Standard),
    )?;
    fill_tables(&customers, &orders)?;
    print_tables(&[&customers, &orders])?;
    let probes: Vec<Vec<u8>> = (200_000..300_000u64).map(customer).collect();
    let fp = customers
        .contains_many(&probes)
        .iter()
        .filter(|b| **b)
        .count();
    let gone = (0..10_000u64)
        .filter(|i| orders.contains(format!("order:{i:08}").as_bytes()))
        .count();
    say!(
        "   100,000 absent customers: {fp} answered \"maybe\" ({:.2}%); removed orders still answering \"maybe\": {gone} of 10,000 (false positives, never negatives)\n",
        fp as f64 / 1000.0
    );
    Ok(())
}

/// Section 2's writes: 200,000 customers in durable batches of 1,000;
/// 50,000 orders, 10,000 of them removed again.
fn fill_tables(customers: &Table, orders: &Table) -> Result<(), Box<dyn Error>> {
    let t = Instant::now();
    let mut batch = WriteBatch::new();
    for chunk in (0..200_000u64).collect::<Vec<_>>().chunks(1000) {
        batch.clear();
        for &i in chunk {
            batch.insert(&customer(i));
        }
        customers.apply(&batch, Durability::Durable)?;
    }
    let secs = t.elapsed().as_secs_f64();
    say!(
        "   inserted 200,000 customers in 200 durable batches of 1,000 ({:.0} keys/s, each batch flushed before returning)",
        200_000.0 / secs
    );
    batch.clear();
    for i in 0..50_000u64 {
        batch.insert(format!("order:{i:08}").as_bytes());
    }
    orders.apply(&batch, Durability::Durable)?;
    let mut removed = WriteBatch::new();
    for i in 0..10_000u64 {
        removed.remove(format!("order:{i:08}").as_bytes());
    }
    orders.apply(&removed, Durability::Durable)?;
    say!("   inserted 50,000 orders and removed 10,000 of them (a remove of a key never inserted is refused)");
    Ok(())
}

/// Section 2's table of parameters and estimated rates.
fn print_tables(tables: &[&Table]) -> Result<(), Box<dyn Error>> {
    say!(
        "   {:<10} {:>9} {:>10} {:>3} {:>10} {:>11} {:>12}",
        "table",
        "layout",
        "m (bits)",
        "k",
        "live keys",
        "target FP",
        "estimated FP"
    );
    for t in tables {
        let s = t.stats()?;
        say!(
            "   {:<10} {:>9} {:>10} {:>3} {:>10} {:>10.3}% {:>11.4}%",
            s.name,
            t.params().layout(),
            s.m_bits,
            s.k,
            s.live_keys,
            t.target_fp() * 100.0,
            s.estimated_fp * 100.0
        );
    }
    Ok(())
}

/// Section 4: a semi-join between two tables (survey §3.2).
fn semijoin(store: &FilterStore) -> Result<(), Box<dyn Error>> {
    say!("4. Semi-join: ship a compressed filter of one side's keys instead of the keys");
    let customers = store.open_table("customers")?;
    // Site A holds 20,000 "premium" customers; site B holds 300,000 order rows.
    let premium: Vec<Vec<u8>> = (0..200_000u64).step_by(10).map(customer).collect();
    let key_list: usize = premium.iter().map(|k| k.len() + 1).sum();
    let (msg, _) = build_message(&premium, MessageTarget::Fp(0.01), HashSpec::random(), 1)?;
    let received = decode_message(&msg)?;
    let filter = received.filter()?;
    let rows: Vec<(u64, Vec<u8>)> = (0..300_000u64)
        .map(|i| (i, customer((i * 7919) % 250_000)))
        .collect();
    let candidates: Vec<(u64, Vec<u8>)> = probe(&filter, &rows, |r| &r.1)
        .into_iter()
        .cloned()
        .collect();
    let refiner = Refiner::new(&premium);
    let (joined, stats) = refiner.refine(candidates, |r| &r.1);
    let exact = rows.iter().filter(|r| refiner.matches(&r.1)).count();
    say!(
        "   filter of {} premium customers: {} bytes ({}, k = {}) against {key_list} bytes for the key list ({:.1}x less)",
        premium.len(),
        msg.len(),
        received.descriptor.codec.name(),
        received.params().k(),
        key_list as f64 / msg.len() as f64
    );
    say!(
        "   300,000 order rows probed: {} sent back, {} false positives removed at the origin, {} joined = exact join {}",
        stats.received,
        stats.false_positives,
        joined.len(),
        if joined.len() == exact { "(checked)" } else { "(MISMATCH)" }
    );
    let all = customers.bloom();
    say!(
        "   estimated from filters alone: {:.0} customers in the table (true 200,000), {:.0} premium (true {})\n",
        all.estimate_len(),
        filter.estimate_len(),
        premium.len()
    );
    if joined.len() != exact {
        return Err("semi-join result differs from the exact join".into());
    }
    Ok(())
}

/// The table the crash demonstration writes.
const CRASH_TABLE: &str = "crash-demo";
/// Keys per durable batch in the crash demonstration.
const CRASH_BATCH: u64 = 500;

fn crash_key(batch: u64, j: u64) -> Vec<u8> {
    format!("crash:{batch:06}:{j:04}").into_bytes()
}

/// The child of the crash demonstration (`filterstore --db DIR demo-child`):
/// writes durable batches and reports each one on standard output once it is
/// durable, until it is killed (or after 20,000 batches).
pub fn crash_child(dir: &Path) -> Result<(), Box<dyn Error>> {
    let store = FilterStore::open(dir)?;
    let table = store.create_table(CRASH_TABLE, TableSpec::new(10_000_000, 0.01))?;
    let mut batch = WriteBatch::new();
    for b in 0..20_000u64 {
        batch.clear();
        for j in 0..CRASH_BATCH {
            batch.insert(&crash_key(b, j));
        }
        table.apply(&batch, Durability::Durable)?;
        say!("durable {b}");
    }
    Ok(())
}

/// Section 6: kill -9 a writer and check that every durable key survived.
fn crash_safety(dir: &Path) -> Result<(), Box<dyn Error>> {
    say!("6. Crash safety: a writer process is killed with SIGKILL mid-write");
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .arg("--db")
        .arg(dir)
        .arg("demo-child")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("no child stdout")?;
    let reader = std::thread::spawn(move || {
        let mut last = None;
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(n) = line
                .strip_prefix("durable ")
                .and_then(|n| n.parse::<u64>().ok())
            {
                last = Some(n);
            }
        }
        last
    });
    std::thread::sleep(Duration::from_millis(700));
    child.kill()?;
    child.wait()?;
    let last = reader.join().map_err(|_| "reader thread panicked")?;
    let Some(last) = last else {
        return Err("the writer reported no durable batch before it was killed".into());
    };
    let t = Instant::now();
    let store = FilterStore::open(dir)?;
    let table = store.open_table(CRASH_TABLE)?;
    let opened = t.elapsed();
    let mut missing = 0u64;
    for b in 0..=last {
        for j in 0..CRASH_BATCH {
            missing += !table.contains(&crash_key(b, j)) as u64;
        }
    }
    say!(
        "   the writer reported {} durable batches ({} keys) before kill -9; reopened in {:.0} ms; durable keys missing: {missing}",
        last + 1,
        (last + 1) * CRASH_BATCH,
        opened.as_secs_f64() * 1000.0
    );
    say!("   The promise: a key whose insert was durable is never reported absent, whatever the moment of the crash.");
    say!("   (A process kill, not a power loss; the host makes the filter insert durable before committing its record.)\n");
    if missing > 0 {
        return Err(format!("{missing} durable keys missing after the crash").into());
    }
    Ok(())
}

/// Section 3: guarding a differential file of changed records.
fn guarded_reads(store: &FilterStore, _dir: &Path) -> Result<(), Box<dyn Error>> {
    say!("3. Guarded reads: skip the differential file unless the filter says \"maybe\"");
    const RECORDS: u64 = 100_000;
    let table = store.create_table("changed", TableSpec::new(RECORDS / 10, 0.01))?;
    // The host's records live in the store's own database: one page cache,
    // one flusher.
    let storage = SledDiffStorage::open(store, "accounts")?;
    let guard = Guard::open(storage, table)?;
    guard
        .storage()
        .load_base((0..RECORDS).map(|i| (customer(i), &b"balance=100"[..])))?;
    let changes: Vec<(Vec<u8>, Change)> = (0..RECORDS)
        .step_by(10)
        .map(|i| (customer(i), Change::Put(b"balance=250".to_vec())))
        .collect();
    guard.write(&changes)?;
    let mut stale = 0u64;
    let t = Instant::now();
    for i in 0..RECORDS {
        let v = guard.read(&customer(i))?;
        let want: &[u8] = if i % 10 == 0 {
            b"balance=250"
        } else {
            b"balance=100"
        };
        stale += (v.as_deref() != Some(want)) as u64;
    }
    let secs = t.elapsed().as_secs_f64();
    let s = guard.stats();
    say!(
        "   {RECORDS} records in the base, {} changed in the differential file; {} reads in {:.2} s",
        changes.len(),
        s.reads,
        secs
    );
    say!(
        "   differential-file reads: {} instead of {} ({} saved, {} of them false positives), stale answers: {stale}",
        s.diff_reads,
        s.reads,
        s.diff_reads_avoided,
        s.false_positives
    );
    let merged = guard.merge()?;
    say!(
        "   merged {merged} changes into the base; the filter was cleared by one atomic generation swap (live keys now {})\n",
        guard.table().live_keys()
    );
    if stale > 0 {
        return Err(format!("{stale} stale reads").into());
    }
    Ok(())
}

/// Keys of the demo's events table (section 5).
fn event(i: u64) -> Vec<u8> {
    format!("event:{i:08}").into_bytes()
}

/// Section 5's overload: 160,000 inserts into a table sized for 20,000
/// keys, then 100,000 of them removed (60,000 live).
fn overload(table: &Table) -> Result<(), Box<dyn Error>> {
    let mut batch = WriteBatch::new();
    for i in 0..160_000u64 {
        batch.insert(&event(i));
    }
    table.apply(&batch, Durability::Durable)?;
    let mut gone = WriteBatch::new();
    for i in 0..100_000u64 {
        gone.remove(&event(i));
    }
    table.apply(&gone, Durability::Durable)?;
    Ok(())
}

/// Section 5: drift detection and online regeneration.
fn drift(store: &FilterStore) -> Result<(), Box<dyn Error>> {
    say!("5. Drift and regeneration: a table sized for 20,000 keys receives 8x that");
    let table = store.create_table("events", TableSpec::new(20_000, 0.01))?;
    overload(&table)?;
    let measure = |t: &filterstore::Table| {
        let probes: Vec<Vec<u8>> = (1_000_000..1_100_000u64).map(event).collect();
        t.contains_many(&probes).iter().filter(|b| **b).count() as f64 / 100_000.0
    };
    let before = table.health()?;
    say!(
        "   after 160,000 inserts and 100,000 removes: {} live keys, estimated FP {:.2}%, measured {:.2}%, {} saturated counters",
        before.signals.live_keys,
        before.signals.estimated_fp * 100.0,
        measure(&table) * 100.0,
        before.signals.saturated_counters
    );
    match before.reason() {
        Some(r) => say!("   needs regeneration: {r}"),
        None => say!("   (no drift detected)"),
    }
    let t = Instant::now();
    let report = table.regenerate(
        || (100_000..160_000u64).map(|i| Ok::<_, std::io::Error>(event(i))),
        &RegenOptions::default(),
    )?;
    let after = table.health()?;
    let missing = (100_000..160_000u64)
        .filter(|i| !table.contains(&event(*i)))
        .count();
    say!(
        "   regenerated from the table's {} keys in {:.2} s: generation {} -> {}, m = {} bits, k = {}, sized for {} keys",
        report.keys_read,
        t.elapsed().as_secs_f64(),
        report.old_generation,
        report.new_generation,
        report.m_bits,
        report.k,
        report.capacity
    );
    say!(
        "   now: estimated FP {:.3}%, measured {:.3}% (target 1%), {} saturated counters, needs regeneration: {}; live keys missing: {missing}\n",
        after.signals.estimated_fp * 100.0,
        measure(&table) * 100.0,
        after.signals.saturated_counters,
        after.needs_regeneration()
    );
    if missing > 0 {
        return Err(format!("{missing} live keys missing after regeneration").into());
    }
    Ok(())
}

/// A directory under the system's temporary directory, removed when dropped
/// (the demo's database when no `--db` is given).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> std::io::Result<TempDir> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!("filterstore-demo-{}-{nanos}", std::process::id());
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir(&path)?;
        Ok(TempDir(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
