//! A network that costs, for the tests and the benchmarks: a network
//! namespace of its own whose loopback is rate-limited by a token bucket
//! (`tc qdisc … tbf`), in which this very binary runs again (the
//! coordinator), so that its worker processes (its children) inherit the
//! namespace. Every byte between the coordinator and the workers, and
//! between workers, then crosses one rate-limited link: the whole cluster
//! shares the rate, as machines behind one switch port would (a harsher
//! network than one link per machine).
//!
//! Needs root (`ip netns`, `tc`); where it cannot run, [`Netns::create`]
//! says why and the caller skips.

#![allow(dead_code)]

use std::process::{Command, Output};

/// Set inside the namespace: the run that was started by [`Netns::run_self`].
pub const INSIDE: &str = "FILTERSTORE_NETNS_INSIDE";

/// A network namespace with a rate-limited loopback, deleted when dropped.
pub struct Netns {
    name: String,
    /// The rate, as `tc` takes it (`1gbit`, `100mbit`).
    pub rate: String,
}

fn run(args: &[&str]) -> Result<Output, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out)
}

impl Netns {
    /// Creates namespace `fs-<tag>-<pid>`, brings its loopback up and
    /// limits it to `rate` (a bucket of 256 KiB, four times loopback's
    /// 64 KiB MTU; packets wait at most 50 ms for tokens, then drop, and
    /// TCP backs off). Refused unless root.
    pub fn create(tag: &str, rate: &str) -> Result<Netns, String> {
        // The effective user id, from /proc (no libc call).
        let root = std::fs::read_to_string("/proc/self/status")
            .map(|s| {
                s.lines()
                    .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
            })
            .unwrap_or(false);
        if !root {
            return Err("not root: a network namespace and tc need root".into());
        }
        let name = format!("fs-{tag}-{}", std::process::id());
        run(&["ip", "netns", "add", &name])?;
        let ns = Netns {
            name,
            rate: rate.to_string(),
        };
        run(&["ip", "-n", &ns.name, "link", "set", "lo", "up"])?;
        run(&[
            "tc", "-n", &ns.name, "qdisc", "add", "dev", "lo", "root", "tbf", "rate", rate,
            "burst", "256kb", "latency", "50ms",
        ])?;
        Ok(ns)
    }

    /// What `tc` says of the loopback's queue (the limit, and bytes sent
    /// and dropped through it so far).
    pub fn qdisc(&self) -> String {
        run(&["tc", "-s", "-n", &self.name, "qdisc", "show", "dev", "lo"])
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|e| e)
    }

    /// Bytes sent through the loopback's queue so far (`Sent` of
    /// [`Netns::qdisc`]); an error names what `tc` said instead.
    pub fn sent_bytes(&self) -> Result<u64, String> {
        let queue = self.qdisc();
        queue
            .split_whitespace()
            .skip_while(|w| *w != "Sent")
            .nth(1)
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("no byte count in {queue:?}"))
    }

    /// Runs this binary again inside the namespace with `args` and the
    /// environment of this process plus `env` and [`INSIDE`]; its standard
    /// output and error are this process's.
    pub fn run_self(&self, args: &[String], env: &[(&str, &str)]) -> Result<(), String> {
        let exe = std::env::current_exe().map_err(|e| format!("this binary: {e}"))?;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name]).arg(exe).args(args);
        cmd.env(INSIDE, &self.rate);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let status = cmd
            .status()
            .map_err(|e| format!("ip netns exec {}: {e}", self.name))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("the run inside {} failed: {status}", self.name))
        }
    }
}

/// A test that runs again inside a namespace limited to `rate` (its name,
/// `name`, as `--exact` takes it). Outside one, makes the namespace, runs
/// the test there, and returns the namespace for its queue's figures, or
/// `None` when it cannot be made (said on standard error; a failure when
/// `FILTERSTORE_REQUIRE_NETNS` is set). Inside it (the run [`INSIDE`]
/// marks), runs `body` on a runtime of two threads, failing past `limit`,
/// and returns `None`.
pub fn test_inside<F: std::future::Future<Output = ()>>(
    (tag, rate): (&str, &str),
    name: &str,
    limit: std::time::Duration,
    body: impl FnOnce() -> F,
) -> Option<Netns> {
    if std::env::var(INSIDE).is_ok() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            tokio::time::timeout(limit, body())
                .await
                .unwrap_or_else(|_| panic!("{name} ran past {limit:?} inside the namespace"))
        });
        return None;
    }
    let ns = match Netns::create(tag, rate) {
        Ok(ns) => ns,
        Err(why) if std::env::var("FILTERSTORE_REQUIRE_NETNS").is_err() => {
            eprintln!("skipped, no rate-limited network: {why}");
            return None;
        }
        Err(why) => panic!("FILTERSTORE_REQUIRE_NETNS is set and: {why}"),
    };
    let args = [name, "--exact", "--nocapture", "--test-threads=1"].map(String::from);
    ns.run_self(&args, &[]).unwrap();
    Some(ns)
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run(&["ip", "netns", "delete", &self.name]);
    }
}
