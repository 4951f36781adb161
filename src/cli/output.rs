//! Standard output: buffered, and quiet when the reader goes away (`| head`).

use super::failure::{Failure, Outcome};
use filterstore::{FilterStore, Table, TableStats};
use serde::Serialize;
use std::io::{self, BufWriter, ErrorKind, Write};

/// Buffered standard output. A closed pipe ends the output silently (as
/// `head` expects), any other write error is a failure.
pub struct Out {
    w: BufWriter<io::Stdout>,
    closed: bool,
}

impl Out {
    pub fn stdout() -> Out {
        Out {
            w: BufWriter::with_capacity(1 << 16, io::stdout()),
            closed: false,
        }
    }

    fn check(&mut self, r: io::Result<()>) -> Outcome {
        match r {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(())
            }
            Err(e) => Err(Failure(format!("cannot write output: {e}"))),
        }
    }

    /// Writes `s` and a newline.
    pub fn line(&mut self, s: &str) -> Outcome {
        if self.closed {
            return Ok(());
        }
        let r = writeln!(self.w, "{s}");
        self.check(r)
    }

    /// Writes `key<TAB>maybe` or `key<TAB>absent`: the key's bytes as read,
    /// except that a backslash, TAB, CR or LF in the key is written as `\\`,
    /// `\t`, `\r` or `\n`, so the first TAB of a line always ends the key.
    pub fn key_answer(&mut self, key: &[u8], maybe: bool) -> Outcome {
        if self.closed {
            return Ok(());
        }
        let escaped;
        let key = if key
            .iter()
            .any(|b| matches!(b, b'\\' | b'\t' | b'\r' | b'\n'))
        {
            escaped = escape_key(key);
            &escaped[..]
        } else {
            key
        };
        let r = self.w.write_all(key).and_then(|()| {
            self.w
                .write_all(if maybe { b"\tmaybe\n" } else { b"\tabsent\n" })
        });
        self.check(r)
    }

    /// Writes `key` (its bytes as read) and a newline.
    pub fn key_line(&mut self, key: &[u8]) -> Outcome {
        if self.closed {
            return Ok(());
        }
        let r = self.w.write_all(key).and_then(|()| self.w.write_all(b"\n"));
        self.check(r)
    }

    /// Writes `bytes` as they are (binary output).
    pub fn bytes(&mut self, bytes: &[u8]) -> Outcome {
        if self.closed {
            return Ok(());
        }
        let r = self.w.write_all(bytes);
        self.check(r)
    }

    /// Flushes.
    pub fn finish(mut self) -> Outcome {
        if self.closed {
            return Ok(());
        }
        let r = self.w.flush();
        self.check(r)
    }
}

/// `filterstore stats`: a readable table, or JSON.
pub fn stats(store: &FilterStore, table: Option<String>, json: bool, out: &mut Out) -> Outcome {
    let names: Vec<String> = match &table {
        Some(t) => vec![t.clone()],
        None => store.list_tables()?,
    };
    let mut all: Vec<StatsRow> = Vec::with_capacity(names.len());
    for n in &names {
        all.push(StatsRow::of(&store.open_table(n)?)?);
    }
    if json {
        let text = match (&table, all.first()) {
            (Some(_), Some(one)) => serde_json::to_string(one)?,
            _ => serde_json::to_string(&all)?,
        };
        return out.line(&text);
    }
    if all.is_empty() {
        return out.line("no tables");
    }
    print_table(&all, out)?;
    for row in &all {
        if let Some(reason) = &row.reason {
            out.line(&format!("{}: needs regeneration: {reason}", row.stats.name))?;
        }
    }
    Ok(())
}

/// The columns of `stats` without `--json`.
const STATS_HEADER: [&str; 12] = [
    "name",
    "layout",
    "m_bits",
    "k",
    "live_keys",
    "expected",
    "target_fp",
    "est_fp",
    "saturated",
    "gen",
    "memory",
    "regenerate",
];

/// One row of `stats` without `--json`.
fn stats_cells(row: &StatsRow) -> [String; 12] {
    let s = &row.stats;
    [
        s.name.clone(),
        s.layout.name().to_string(),
        s.m_bits.to_string(),
        s.k.to_string(),
        s.live_keys.to_string(),
        s.expected_keys.to_string(),
        format!("{:.4}%", 100.0 * s.target_fp),
        format!("{:.4}%", 100.0 * s.estimated_fp),
        s.saturated_counters.to_string(),
        s.generation.to_string(),
        format!("{} KiB", s.bit_bytes.div_ceil(1024)),
        if row.needs_regeneration { "yes" } else { "no" }.to_string(),
    ]
}

/// Prints the rows as aligned columns: names left-aligned, figures right.
fn print_table(all: &[StatsRow], out: &mut Out) -> Outcome {
    let rows: Vec<[String; 12]> = all.iter().map(stats_cells).collect();
    let mut widths = STATS_HEADER.map(str::len);
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    let fmt_row = |cells: &[&str]| {
        cells
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i < 2 {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    out.line(&fmt_row(&STATS_HEADER))?;
    for r in &rows {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        out.line(&fmt_row(&cells))?;
    }
    Ok(())
}

/// One table's statistics with its health, as `stats` prints them.
#[derive(Serialize)]
struct StatsRow {
    #[serde(flatten)]
    stats: TableStats,
    /// The drift policy's verdict.
    needs_regeneration: bool,
    /// Its most urgent reason.
    reason: Option<String>,
    /// Observed false-positive rate of this process's feedback (a fresh
    /// process has none: 0 over 0 trials).
    observed_fp: f64,
    /// Trials behind `observed_fp`.
    observed_trials: u64,
}

impl StatsRow {
    fn of(t: &Table) -> Result<StatsRow, Failure> {
        let health = t.health()?;
        Ok(StatsRow {
            stats: t.stats()?,
            needs_regeneration: health.needs_regeneration(),
            reason: health.reason().map(ToString::to_string),
            observed_fp: health.signals.observed.rate(),
            observed_trials: health.signals.observed.trials,
        })
    }
}

/// `key` with backslash, TAB, CR and LF written as two-byte escapes.
fn escape_key(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 8);
    for &b in key {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\n' => out.extend_from_slice(b"\\n"),
            _ => out.push(b),
        }
    }
    out
}
