//! Reading keys, one per line, from a file or standard input.

use std::fs::File;
use std::io::{self, BufRead, BufReader, IsTerminal, Read};
use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};

/// Keys read per batch: a batch is one log record (17 bytes per key).
pub const BATCH_KEYS: usize = 4096;

/// The longest line read as a key: 1 MiB. A key is hashed, never stored,
/// so the store takes any length; the cap is the tool's, so that a file
/// that is not a key file (a binary file without a newline, say) is
/// refused with its line number instead of being read whole into memory.
pub const MAX_KEY_BYTES: usize = 1 << 20;

/// A source of keys: every line is a key, without its `\n` or `\r\n`; empty
/// lines are skipped. Keys are bytes: no encoding is assumed.
pub struct KeyReader {
    input: Box<dyn BufRead>,
    line: Vec<u8>,
    /// Number of the last line read (1-based).
    pub line_no: u64,
    progress: Option<ProgressBar>,
}

impl KeyReader {
    /// Opens `file`, or standard input when it is `None` or `-`. Shows a
    /// progress bar on standard error when that is a terminal.
    pub fn open(file: Option<&Path>) -> Result<KeyReader, String> {
        let tty = io::stderr().is_terminal();
        let (input, progress): (Box<dyn BufRead>, _) = match file {
            Some(p) if p != Path::new("-") => {
                let f = File::open(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
                let len = f.metadata().map(|m| m.len()).unwrap_or(0);
                let bar = tty.then(|| {
                    let b = ProgressBar::new(len);
                    b.set_style(
                        ProgressStyle::with_template(
                            "{bar:40} {bytes}/{total_bytes} {per_sec} eta {eta}",
                        )
                        .unwrap_or_else(|_| ProgressStyle::default_bar()),
                    );
                    b
                });
                let input: Box<dyn Read> = match &bar {
                    Some(b) => Box::new(b.wrap_read(f)),
                    None => Box::new(f),
                };
                (Box::new(BufReader::with_capacity(1 << 16, input)), bar)
            }
            _ => {
                let bar = tty.then(|| {
                    let b = ProgressBar::new_spinner();
                    b.set_style(
                        ProgressStyle::with_template("{spinner} {pos} keys {per_sec}")
                            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                    );
                    b
                });
                (
                    Box::new(BufReader::with_capacity(1 << 16, io::stdin())),
                    bar,
                )
            }
        };
        Ok(KeyReader {
            input,
            line: Vec::new(),
            line_no: 0,
            progress,
        })
    }

    /// Calls `f` with each key of the next batch (at most [`BATCH_KEYS`]) and
    /// its line number. Returns how many keys were read (0 at the end).
    pub fn next_batch(&mut self, mut f: impl FnMut(&[u8], u64)) -> Result<usize, String> {
        let mut n = 0;
        while n < BATCH_KEYS {
            self.line.clear();
            // At most the longest key, its CR and LF, and one byte more:
            // a line that is too long is never read whole.
            let read = (&mut self.input)
                .take(MAX_KEY_BYTES as u64 + 3)
                .read_until(b'\n', &mut self.line)
                .map_err(|e| format!("cannot read keys: {e}"))?;
            if read == 0 {
                break;
            }
            self.line_no += 1;
            let mut key = &self.line[..];
            if let Some(k) = key.strip_suffix(b"\n") {
                key = k;
            }
            if let Some(k) = key.strip_suffix(b"\r") {
                key = k;
            }
            if key.len() > MAX_KEY_BYTES {
                return Err(format!(
                    "line {}: a key longer than {} MiB; a key file holds one key per line (is this a key file?)",
                    self.line_no,
                    MAX_KEY_BYTES >> 20
                ));
            }
            if key.is_empty() {
                continue;
            }
            f(key, self.line_no);
            n += 1;
        }
        if let Some(b) = &self.progress {
            if b.length().is_none() {
                b.inc(n as u64);
            }
        }
        Ok(n)
    }

    /// Removes the progress bar.
    pub fn finish(&self) {
        if let Some(b) = &self.progress {
            b.finish_and_clear();
        }
    }
}
