//! (h) A store of 10,000 tables and of 10,000 sealed filters
//! (`FILTERSTORE_BENCH_ONLY=scale`; `FILTERSTORE_BENCH_SCALE` changes the
//! 10,000): create them, open the store, list them, look up across them,
//! drop them, each timed on the wall clock with the load beside it.
//!
//! Tables are created one by one (each one catalog-log record and its
//! files) and timed per thousand, to show whether a create costs more as
//! the store grows (store format 5 rewrote the whole catalog on every
//! change: O(n) bytes each). Sealed filters are committed in batches of
//! 500 (one pack file and one catalog record each), 1,000 keys each at the
//! rate an indexed table of 10,000 files gives them (0.1 / 65,536).

use filterstore::{
    BitFilter, FilterParams, FilterStore, HashSpec, Layout, NewSealed, SealedBatch, TableSpec,
};
use std::path::Path;
use std::time::Instant;

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Median of `runs` timings of `f`, in ms.
fn median_ms(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let t0 = Instant::now();
            f();
            t0.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[runs / 2]
}

/// Runs part (h) in `dir`; returns its RESULT lines.
pub fn scale(dir: &Path) -> Vec<String> {
    let n: usize = std::env::var("FILTERSTORE_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let mut out = tables(&dir.join("tables"), n);
    out.extend(sealed(&dir.join("sealed"), n));
    out
}

fn tables(dir: &Path, n: usize) -> Vec<String> {
    let store = FilterStore::open(dir).unwrap();
    let t0 = Instant::now();
    let mut per_thousand = Vec::new();
    let mut lap = Instant::now();
    for i in 0..n {
        let t = store
            .create_table(
                &format!("t{i:06}"),
                TableSpec::new(1_000, 0.01).seed(i as u64),
            )
            .unwrap();
        t.insert(format!("key-{i}").as_bytes()).unwrap();
        if (i + 1) % 1000 == 0 {
            per_thousand.push(lap.elapsed().as_secs_f64());
            lap = Instant::now();
        }
    }
    store.flush().unwrap();
    let create_s = t0.elapsed().as_secs_f64();
    drop(store);
    let open_ms = median_ms(5, || drop(FilterStore::open(dir).unwrap()));
    let store = FilterStore::open(dir).unwrap();
    let list_ms = median_ms(5, || assert_eq!(store.list_tables().unwrap().len(), n));
    // Each open table holds its page file and its log open: 10,000 open
    // at once would pass this machine's 20,000 file descriptors, so the
    // lookup across them opens 4,000 at a time.
    let (mut open_all_ms, mut probe_s, mut hits) = (0.0, 0.0, 0);
    for chunk in (0..n).collect::<Vec<_>>().chunks(4_000) {
        let t0 = Instant::now();
        let tables: Vec<_> = chunk
            .iter()
            .map(|i| store.open_table(&format!("t{i:06}")).unwrap())
            .collect();
        open_all_ms += t0.elapsed().as_secs_f64() * 1e3;
        let t0 = Instant::now();
        hits += tables
            .iter()
            .filter(|t| t.contains(b"key-7") || t.contains(b"absent"))
            .count();
        probe_s += t0.elapsed().as_secs_f64();
    }
    assert!(hits >= 1);
    let probe_ns = probe_s * 1e9 / (2 * n) as f64;
    let t0 = Instant::now();
    for i in 0..n {
        store.drop_table(&format!("t{i:06}")).unwrap();
    }
    let drop_s = t0.elapsed().as_secs_f64();
    println!(
        "(h) {n} tables: create {create_s:.1} s (per 1,000: first {:.2} s, last {:.2} s), open the store {open_ms:.1} ms, list {list_ms:.1} ms, open every table {open_all_ms:.0} ms, a lookup across them {probe_ns:.0} ns per table, drop all {drop_s:.1} s (load {})",
        per_thousand.first().copied().unwrap_or(0.0),
        per_thousand.last().copied().unwrap_or(0.0),
        load()
    );
    vec![
        format!("RESULT store.open_10k_tables_ms {open_ms:.1} ms"),
        format!("RESULT store.create_10k_tables_s {create_s:.2} s"),
        format!(
            "RESULT store.create_last_1k_over_first_1k {:.2} ratio",
            per_thousand.last().unwrap_or(&1.0) / per_thousand.first().unwrap_or(&1.0)
        ),
        format!("RESULT store.open_10k_tables_each_ms {open_all_ms:.0} ms"),
        format!("RESULT store.probe_tables_ns {probe_ns:.0} ns"),
        format!("RESULT store.drop_10k_tables_s {drop_s:.2} s"),
    ]
}

fn sealed(dir: &Path, n: usize) -> Vec<String> {
    let store = FilterStore::open(dir).unwrap();
    let fp = 0.1 / 65_536.0;
    let params = FilterParams::for_capacity(1_000, fp, Layout::Blocked, HashSpec::xxh3(9)).unwrap();
    let t0 = Instant::now();
    for b in 0..n.div_ceil(500) {
        let mut batch = SealedBatch::new();
        for i in b * 500..((b + 1) * 500).min(n) {
            let f = BitFilter::new(params).unwrap();
            for k in 0..1_000u64 {
                f.insert(&(i as u64 * 1_000 + k).to_le_bytes());
            }
            batch.put(NewSealed::new(format!("f{i:06}"), f, 1_000).target_fp(fp));
        }
        store.commit_sealed(batch).unwrap();
    }
    let create_s = t0.elapsed().as_secs_f64();
    drop(store);
    let open_ms = median_ms(5, || drop(FilterStore::open(dir).unwrap()));
    let store = FilterStore::open(dir).unwrap();
    let list_ms = median_ms(5, || assert_eq!(store.list_sealed("").unwrap().len(), n));
    let infos = store.list_sealed("").unwrap();
    let t0 = Instant::now();
    let loaded: Vec<_> = store
        .load_sealed(&infos)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let load_ms = t0.elapsed().as_secs_f64() * 1e3;
    let bytes: u64 = infos.iter().map(|i| i.bit_bytes()).sum();
    let probe_ns = {
        let h = params.hash().hash(&7u64.to_le_bytes());
        let t0 = Instant::now();
        let hits = loaded.iter().filter(|f| f.contains_hash(h)).count();
        assert!(hits >= 1);
        t0.elapsed().as_secs_f64() * 1e9 / n as f64
    };
    drop(loaded);
    let t0 = Instant::now();
    for b in 0..n.div_ceil(500) {
        let mut batch = SealedBatch::new();
        for i in b * 500..((b + 1) * 500).min(n) {
            batch.remove(format!("f{i:06}"));
        }
        store.commit_sealed(batch).unwrap();
    }
    let drop_s = t0.elapsed().as_secs_f64();
    println!(
        "(h) {n} sealed filters of 1,000 keys at {fp:.2e}: commit in batches of 500 {create_s:.2} s, open the store {open_ms:.1} ms, list {list_ms:.1} ms, load all {load_ms:.0} ms ({} MB of bits), a lookup across them {probe_ns:.1} ns per filter, drop all {drop_s:.2} s (load {})",
        bytes / 1_000_000,
        load()
    );
    vec![
        format!("RESULT store.open_10k_sealed_ms {open_ms:.1} ms"),
        format!("RESULT store.load_10k_sealed_ms {load_ms:.0} ms"),
        format!("RESULT store.commit_10k_sealed_s {create_s:.2} s"),
        format!("RESULT store.probe_sealed_ns {probe_ns:.1} ns"),
    ]
}
