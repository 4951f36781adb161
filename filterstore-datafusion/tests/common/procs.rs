//! A cluster of worker processes on localhost for the tests and the
//! benchmark: `filterstore-worker` binaries started on free ports, stopped
//! when the [`Workers`] value is dropped (also when a test panics), and a
//! coordinator session that reaches them over gRPC.
//!
//! A worker started here (`--exit-on-stdin-close`) also exits by itself
//! when its standard input closes, which is when this process ends, however
//! it ends: no worker outlives its test.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use url::Url;

/// How long a worker may take to say it listens.
const START: Duration = Duration::from_secs(60);

/// Running worker processes.
pub struct Workers {
    children: Vec<Child>,
    /// Where each listens.
    pub urls: Vec<Url>,
}

/// The worker binary of this package (cargo builds it for the tests).
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_filterstore-worker")
}

impl Workers {
    /// Starts `n` workers; fails (after stopping those started) when one
    /// does not report its address within a minute.
    pub fn start(n: usize) -> Result<Workers, String> {
        Workers::start_on(&vec!["127.0.0.1"; n])
    }

    /// Starts one worker on each of `hosts` (loopback addresses), each on
    /// a free port.
    pub fn start_on(hosts: &[&str]) -> Result<Workers, String> {
        Workers::start_env(hosts, &[])
    }

    /// Starts one worker on each of `hosts`, each with `env` added to its
    /// environment (the test seams a worker reads from it).
    pub fn start_env(hosts: &[&str], env: &[(&str, &str)]) -> Result<Workers, String> {
        let mut w = Workers {
            children: Vec::new(),
            urls: Vec::new(),
        };
        for host in hosts {
            let url = w.spawn_one(host, env)?;
            w.urls.push(url);
        }
        Ok(w)
    }

    fn spawn_one(&mut self, host: &str, env: &[(&str, &str)]) -> Result<Url, String> {
        let listen = format!("{host}:0");
        let mut child = Command::new(binary())
            .args(["--listen", &listen, "--exit-on-stdin-close"])
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", binary()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        self.children.push(child);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(START)
            .map_err(|_| format!("a worker did not start within {START:?}"))?;
        let url = line
            .trim()
            .rsplit(' ')
            .next()
            .ok_or_else(|| format!("unexpected worker output {line:?}"))?;
        Url::parse(url).map_err(|e| format!("worker address {url:?}: {e}"))
    }

    /// Process ids, for checks that they are gone.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
        }
        for c in &mut self.children {
            let _ = c.wait();
        }
    }
}

/// Whether process `pid` still exists (Linux: its /proc entry).
pub fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false)
}
