//! (f) Loading `n` keys into a new table, durable when the call returns:
//! the library's `Table::bulk_load` (16-byte keys from an iterator) and
//! `filterstore insert` of a file of `n` keys, one per line (only when the
//! bench is built with the `cli` feature, which builds the binary). Each is
//! run `RUNS` times on a fresh table; the figure is the median elapsed
//! time, with the CPU time of the loading process and the 1-minute load
//! average beside it.

use filterstore::{FilterStore, TableSpec};
use std::io::Write;
use std::path::Path;
use std::time::Instant;

const RUNS: usize = 3;

/// CPU time, in seconds, of this process (`children == false`) or of its
/// children that were waited for, from `/proc/self/stat` (fields 14–17, in
/// USER_HZ ticks, which Linux fixes at 100 per second for this interface):
/// 10 ms resolution, enough for loads of a second or more.
fn cpu_s(children: bool) -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name, which is in parentheses.
    let fields: Vec<f64> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .unwrap_or("")
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(f64::NAN))
        .collect();
    // `rest` starts at field 3 (state): utime is field 14, at index 11.
    let at = if children { 13 } else { 11 };
    match fields.get(at..at + 2) {
        Some([user, system]) => (user + system) / 100.0,
        _ => f64::NAN,
    }
}

fn load1() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    load.split_whitespace().next().unwrap_or("?").to_string()
}

/// Median of `RUNS` runs of `load` (which returns elapsed and CPU seconds).
fn median_run(name: &str, mut load: impl FnMut(&Path) -> (f64, f64)) -> (f64, f64) {
    let mut runs = Vec::new();
    for _ in 0..RUNS {
        let dir = tempfile::tempdir().unwrap();
        runs.push(load(dir.path()));
    }
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let list: Vec<String> = runs
        .iter()
        .map(|(e, c)| format!("{e:.2} s ({c:.2} s CPU)"))
        .collect();
    println!("{name}: {}; load1 {}", list.join(", "), load1());
    runs[RUNS / 2]
}

/// Runs (f); returns its `RESULT` lines.
pub fn bulk_loads(n: u64, key16: fn(u64, u64) -> [u8; 16]) -> Vec<String> {
    let mut out = Vec::new();
    let (lib_s, lib_cpu) = median_run("Table::bulk_load", |dir| {
        let store = FilterStore::open(dir).unwrap();
        let t = store.create_table("bulk", TableSpec::new(n, 0.01)).unwrap();
        let (t0, c0) = (Instant::now(), cpu_s(false));
        let loaded = t.bulk_load((0..n).map(|i| key16(i, 3))).unwrap();
        let run = (t0.elapsed().as_secs_f64(), cpu_s(false) - c0);
        assert_eq!(loaded, n);
        assert!((0..1000).all(|i| t.contains(&key16(i * 9973 % n, 3))));
        run
    });
    out.push(format!("RESULT store_bulk_load_s.lib {lib_s:.3} s"));
    out.push(format!("RESULT store_bulk_load_cpu_s.lib {lib_cpu:.3} s"));
    let Some(bin) = option_env!("CARGO_BIN_EXE_filterstore") else {
        println!("filterstore insert: skipped (bench built without the cli feature)");
        return out;
    };
    let keys = tempfile::NamedTempFile::new().unwrap();
    {
        let mut w = std::io::BufWriter::new(keys.as_file());
        for i in 0..n {
            writeln!(w, "key-{i:012}").unwrap();
        }
        w.flush().unwrap();
    }
    let (cli_s, cli_cpu) = median_run("filterstore insert FILE", |dir| {
        let db = dir.join("db");
        let run = |args: &[&str]| {
            let s = std::process::Command::new(bin)
                .arg("--db")
                .arg(&db)
                .args(args)
                .stdout(std::process::Stdio::null())
                .status()
                .unwrap();
            assert!(s.success(), "filterstore {args:?}");
        };
        run(&["create", "bulk", "--expected", &n.to_string()]);
        let (t0, c0) = (Instant::now(), cpu_s(true));
        run(&["insert", "bulk", &keys.path().to_string_lossy()]);
        (t0.elapsed().as_secs_f64(), cpu_s(true) - c0)
    });
    out.push(format!("RESULT store_bulk_load_s.cli {cli_s:.3} s"));
    out.push(format!("RESULT store_bulk_load_cpu_s.cli {cli_cpu:.3} s"));
    out
}
