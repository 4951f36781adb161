//! Point lookups over N Parquet files on an object store with 20 ms per
//! request: DataFusion's `ListingTable` (without Bloom filters; with
//! Parquet's own Bloom filters and pruning, cold and warm) against an
//! [`IndexedParquetTable`] (cold: its store opened from disk; warm).
//!
//! `cargo bench -p filterstore-datafusion --bench lookup`. The files are a
//! local directory behind `object_store`'s `ThrottledStore` (`LOOKUP_LATENCY_MS`
//! per GET and per LIST, default 20) and a wrapper that counts requests
//! (`lookup/counting.rs`). Each file holds `LOOKUP_ROWS` rows (default
//! 1,000) of a random 64-bit key `id` (`Int64`; unique, unclustered: the files' min
//! and max prune nothing), a string and a float, one row group, and a
//! Parquet Bloom filter on `id` sized for its rows at the rate the index
//! gives each file (`IndexOptions::file_fp`): both subjects are built for
//! the same false positives. `LOOKUP_FILES` (default `1000,10000`) the
//! file counts; `LOOKUP_RUNS` (default 3) the runs per warm figure, cold
//! ones run once, from 5,000 files up (DataFusion's take minutes); every
//! session has 16 target partitions. `LOOKUP_SMOKE=1`: 100 files of 100
//! rows at 1 ms, one run (what CI runs). `LOOKUP_TRACE` (any value): print
//! every GET.
//!
//! Workloads: a present key, an absent key, an `IN` list of 100 present
//! keys. Every answer is compared across subjects and with the keys the
//! files hold. Subjects are interleaved per run; cold ones drop the page
//! cache first where the bench runs as root (and say whether it did).
//! Requests are counted apart for LIST (every scan lists, as a
//! `ListingTable` without its list-files cache does) and GET/HEAD.
//!
//! Ends with `RESULT` lines: `lookup.requests_ratio.cold`,
//! `lookup.wall_ratio.cold`, `lookup.wall_ratio.warm` (the index over
//! DataFusion with Parquet Bloom filters; lower is better),
//! `lookup.requests.present` and `lookup.requests.absent` (GET/HEAD of a
//! warm indexed lookup, LIST apart), `lookup.index_bytes_ratio` (the bits a
//! lookup probes over the bytes of the files' own Bloom filters), and
//! `lookup.refresh_1pct_ratio` (a refresh after 1% new files over the full
//! build), and `lookup.wall_ms.<subject>.<workload>` per subject and
//! workload, each for the last file count of `LOOKUP_FILES`.

#[path = "lookup/counting.rs"]
mod counting;
#[path = "lookup/data.rs"]
mod data;
#[path = "lookup/subjects.rs"]
mod subjects;

use data::Lake;
use subjects::{Figure, Subject, Workload};

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let smoke = std::env::var_os("LOOKUP_SMOKE").is_some();
    let files: Vec<usize> = match smoke {
        true => vec![100],
        false => std::env::var("LOOKUP_FILES")
            .unwrap_or_else(|_| "1000,10000".into())
            .split(',')
            .filter_map(|s| s.trim().parse().ok())
            .collect(),
    };
    let rows: usize = if smoke {
        100
    } else {
        env("LOOKUP_ROWS", 1_000)
    };
    let latency: u64 = if smoke {
        1
    } else {
        env("LOOKUP_LATENCY_MS", 20)
    };
    let runs: usize = if smoke { 1 } else { env("LOOKUP_RUNS", 3) };
    println!(
        "lookup: {files:?} files of {rows} rows, {latency} ms per GET and per LIST, {runs} warm runs, 16 target partitions, load {}",
        loadavg()
    );
    let mut results = Vec::new();
    for n in files {
        let lake = Lake::prepare(n, rows, latency).await;
        results = run_one(&lake, runs, n >= 5_000).await;
        lake.cleanup();
    }
    for r in results {
        println!("{r}");
    }
}

/// Every subject and workload on `lake`; returns its RESULT lines.
async fn run_one(lake: &Lake, runs: usize, cold_once: bool) -> Vec<String> {
    let (build, refresh) = lake.build_index().await;
    let cold_runs = if cold_once { 1 } else { runs };
    let mut figures: Vec<Figure> = Vec::new();
    for run in 0..runs {
        for w in Workload::ALL {
            for s in Subject::ALL {
                if s.is_cold() && run >= cold_runs {
                    continue;
                }
                let f = subjects::measure(lake, s, w).await;
                println!("{}", f.line(lake.files, loadavg()));
                figures.push(f);
            }
        }
    }
    subjects::check_answers(&figures);
    let index_bytes = lake.index_bytes().await;
    let parquet_bytes = lake.parquet_bloom_bytes();
    println!(
        "lookup: {} files: full index build {:.2} s, refresh after 1% new files {:.3} s; filters {} bytes against Parquet's Bloom filters {} bytes (load {})",
        lake.files,
        build.as_secs_f64(),
        refresh.as_secs_f64(),
        index_bytes,
        parquet_bytes,
        loadavg()
    );
    let mut out = subjects::results(&figures);
    out.push(format!(
        "RESULT lookup.index_bytes_ratio {:.3} ratio",
        index_bytes as f64 / parquet_bytes as f64
    ));
    out.push(format!(
        "RESULT lookup.refresh_1pct_ratio {:.3} ratio",
        refresh.as_secs_f64() / build.as_secs_f64()
    ));
    out
}
