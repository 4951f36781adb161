//! DuckDB reading a Parquet file that filterstore wrote: which row groups
//! its Bloom filters let DuckDB skip for a key (`parquet_bloom_probe`, the
//! check DuckDB's scan makes before reading a row group), and the rows its
//! scan returns.
//!
//! DuckDB runs through its Python package (`scripts/install-duckdb.sh`
//! installs it; `FILTERSTORE_DUCKDB_PYTHONPATH` says where). Without
//! `python3` or the package the caller's checks are skipped, saying so,
//! unless `FILTERSTORE_REQUIRE_DUCKDB=1` (set by `.ci/run`): then that is a
//! failure.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Per key: the row groups DuckDB's Bloom filter check keeps, and the rows
/// of `SELECT count(*) ... WHERE column = key`.
const PROBE: &str = r#"
import sys, duckdb
path, column = sys.argv[1], sys.argv[2]
con = duckdb.connect()
print("version", duckdb.__version__)
for line in sys.stdin:
    k = int(line)
    kept = con.execute(
        "SELECT row_group_id FROM parquet_bloom_probe(?, ?, ?) "
        "WHERE NOT bloom_filter_excludes ORDER BY 1", [path, column, k]).fetchall()
    rows = con.execute(
        f'SELECT count(*) FROM read_parquet(?) WHERE "{column}" = ?', [path, k]).fetchone()[0]
    print(rows, *[r[0] for r in kept])
"#;

/// Longest a DuckDB run may take before the test fails (it takes about a
/// second for a hundred keys).
const TIMEOUT: Duration = Duration::from_secs(120);

/// What DuckDB found for each key.
pub(crate) struct Probed {
    /// `duckdb.__version__`.
    pub(crate) version: String,
    /// Per key: the row groups kept (not excluded by their filter).
    pub(crate) kept: Vec<Vec<usize>>,
    /// Per key: the rows DuckDB's scan returned.
    pub(crate) rows: Vec<u64>,
}

fn python() -> Command {
    let mut cmd = Command::new("python3");
    if let Some(path) = std::env::var_os("FILTERSTORE_DUCKDB_PYTHONPATH") {
        cmd.env("PYTHONPATH", path);
    }
    cmd
}

/// Whether DuckDB can run here: `None` (after saying why) when it cannot
/// and is not required; a failure when it is required.
fn available() -> Option<()> {
    let ok = python()
        .args(["-c", "import duckdb"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        return Some(());
    }
    let why = "DuckDB's Python package is not importable (scripts/install-duckdb.sh installs it)";
    assert!(
        std::env::var_os("FILTERSTORE_REQUIRE_DUCKDB").is_none(),
        "FILTERSTORE_REQUIRE_DUCKDB is set, but {why}"
    );
    eprintln!("skipped: the DuckDB checks: {why}");
    None
}

/// DuckDB's findings for `keys` in the Int64 `column` of the Parquet file
/// at `path`; `None` when DuckDB cannot run here and is not required.
pub(crate) fn probe(path: &Path, column: &str, keys: &[i64]) -> Option<Probed> {
    available()?;
    let mut child = python()
        .args(["-c", PROBE])
        .arg(path)
        .arg(column)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 starts");
    // Both pipes drained on threads of their own, so that neither side
    // waits for the other to read.
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            pipe.read_to_string(&mut text).map(|_| text)
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let input: String = keys.iter().map(|k| format!("{k}\n")).collect();
    // A failed write (DuckDB's process already gone) shows in its status
    // and error output below.
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(input.as_bytes());
    drop(stdin);
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("DuckDB did not finish within {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (out, err) = (out.join().unwrap().unwrap(), err.join().unwrap().unwrap());
    assert!(status.success(), "DuckDB failed: {err}");
    Some(parse(&out, keys.len()))
}

fn parse(out: &str, keys: usize) -> Probed {
    let mut lines = out.lines();
    let version = lines
        .next()
        .and_then(|l| l.strip_prefix("version "))
        .expect("DuckDB's version first")
        .to_string();
    let (mut kept, mut rows) = (Vec::new(), Vec::new());
    for line in lines {
        let mut fields = line.split_whitespace().map(|f| f.parse::<u64>().unwrap());
        rows.push(fields.next().expect("a row count"));
        kept.push(fields.map(|g| g as usize).collect());
    }
    assert_eq!(rows.len(), keys, "one line per key: {out}");
    Probed {
        version,
        kept,
        rows,
    }
}
