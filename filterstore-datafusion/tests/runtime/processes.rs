//! A cluster of three `filterstore-worker` processes on localhost: the
//! coordinator plans runtime filters, the taps in the worker processes post
//! their partial filters to the coordinator's rendezvous over gRPC, the probe
//! tasks fetch the merged filter from it; answers as single-node
//! DataFusion's. The workers are stopped when the test ends, also when it
//! panics.

use crate::common::cluster::partitioned_join_config;
use crate::common::metrics::{executed_plan, is_bloom_filter, is_tap, sum_metric};
use crate::common::netns;
use crate::common::procs::{alive, Workers};
use crate::common::tpch;
use datafusion::physical_plan::collect;
use datafusion::prelude::SessionContext;
use filterstore_datafusion::{last_report, FilterOutcome, RuntimeFilterConfig};
use filterstore_datafusion::{remote_cluster, RemoteCluster};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_processes_build_ship_and_apply_filters() {
    tokio::time::timeout(Duration::from_secs(600), body())
        .await
        .expect("the process-cluster test timed out");
}

async fn body() {
    let workers = Workers::start(3).unwrap();
    let pids = workers.pids();
    let coordinator = filter_across(&workers, "127.0.0.1:0", None).await;
    drop(coordinator);
    drop(workers);
    for pid in pids {
        assert!(!alive(pid), "worker {pid} outlived its test");
    }
}

/// Workers whose acknowledgements each take a second (a test seam of the
/// `test-hooks` build, `FILTERSTORE_TEST_ACK_DELAY_MS`) still report every
/// filter they read as built when the query returns: a probe task filters
/// while its acknowledgement travels, and its partitions end only once it
/// is in. (Sent and never awaited, the acknowledgements would come after
/// the queries, and every filter would be reported undelivered.)
#[cfg(feature = "test-hooks")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_is_reported_built_when_the_query_returns_however_slow_its_acknowledgement() {
    let body = async {
        let env = [("FILTERSTORE_TEST_ACK_DELAY_MS", "1000")];
        let workers = Workers::start_env(&["127.0.0.1"; 3], &env).unwrap();
        filter_across(&workers, "127.0.0.1:0", None).await;
    };
    tokio::time::timeout(Duration::from_secs(600), body)
        .await
        .expect("the slow-acknowledgement test timed out");
}

/// A coordinator over `workers` with its rendezvous on `bind`, advertised
/// as `advertise`, runs six TPC-H queries (SF 0.05) with runtime filters:
/// the answers are single-node DataFusion's, at least four filters are
/// built from one partial per join task, every post is taken, taps halve
/// their partials before they post (planned from estimates with headroom),
/// and the filters drop rows in the worker processes.
async fn filter_across(workers: &Workers, bind: &str, advertise: Option<&str>) -> RemoteCluster {
    let dir = tempfile::tempdir().unwrap();
    tpch::generate(dir.path(), 0.05).unwrap();
    let single = SessionContext::new();
    tpch::register(&single, dir.path()).await.unwrap();
    let rule = RuntimeFilterConfig {
        min_filtered_rows: 1_000,
        advertise: advertise.map(str::to_string),
        ..RuntimeFilterConfig::default()
    };
    let coordinator = remote_cluster(
        workers.urls.clone(),
        partitioned_join_config(3).unwrap(),
        Some(rule),
        bind.parse().unwrap(),
    )
    .await
    .unwrap();
    let ctx = &coordinator.ctx;
    tpch::register(ctx, dir.path()).await.unwrap();
    let (mut built, mut dropped, mut halvings) = (0, 0, 0);
    for q in [3, 5, 10, 12, 17, 18] {
        let stmts = tpch::statements(q);
        let expected = tpch::rows(&tpch::run(&single, &stmts).await.unwrap());
        let (select, setup) = stmts.split_last().unwrap();
        for s in setup {
            ctx.sql(s).await.unwrap().collect().await.unwrap();
        }
        let plan = ctx
            .sql(select)
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        let got = collect(Arc::clone(&plan), ctx.task_ctx())
            .await
            .unwrap_or_else(|e| panic!("q{q}: {e}"));
        if let Some(d) = tpch::diff(&expected, &tpch::rows(&got)) {
            panic!("q{q} on worker processes differs from single-node DataFusion: {d}");
        }
        let report = last_report(ctx).unwrap();
        // Every post and fetch of the query's own tasks carried its token.
        assert_eq!(report.refused_posts(), 0, "q{q}\n{report}");
        for f in report.filters() {
            if let Some(FilterOutcome::Built { partials, .. }) = f.outcome() {
                assert_eq!(partials, 3, "q{q}: one partial per join task\n{report}");
                built += 1;
            }
        }
        let plan = executed_plan(&plan).await.unwrap();
        let rows_in = sum_metric(&plan, "rows_in", is_bloom_filter).unwrap();
        let rows_out = sum_metric(&plan, "output_rows", is_bloom_filter).unwrap();
        dropped += rows_in - rows_out;
        halvings += sum_metric(&plan, "partial_halvings", is_tap).unwrap();
    }
    assert!(built >= 4, "{built} filters built across processes");
    let stats = coordinator.rendezvous.as_ref().unwrap().stats();
    assert_eq!((stats.posts_refused, stats.fetches_refused), (0, 0));
    assert!(stats.posts_taken >= 3 * built as u64, "{stats:?}");
    assert!(
        dropped > 0,
        "the filters dropped no row in the worker processes"
    );
    assert!(halvings > 0, "no tap halved its partial before it posted");
    coordinator
}

/// Workers on 127.0.0.3, .4 and .5; the coordinator's rendezvous on
/// 127.0.0.2, advertised as a forwarder on 127.0.0.6 (a port of its own, as
/// behind a NAT or a proxy): every filter built reaches every probe task
/// through the advertised address (the forwarder carries the workers'
/// connections), and the answers are single-node DataFusion's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_and_workers_on_distinct_addresses_filter_by_the_advertised_rendezvous() {
    tokio::time::timeout(Duration::from_secs(600), distinct_addresses())
        .await
        .expect("the distinct-address test timed out");
}

async fn distinct_addresses() {
    let workers = Workers::start_on(&["127.0.0.3", "127.0.0.4", "127.0.0.5"]).unwrap();
    for (url, host) in workers
        .urls
        .iter()
        .zip(["127.0.0.3", "127.0.0.4", "127.0.0.5"])
    {
        assert_eq!(url.host_str(), Some(host), "{url}");
    }
    // The rendezvous's port is known once it is bound: take a free one on
    // 127.0.0.2 first, then forward 127.0.0.6 to it.
    let port = std::net::TcpListener::bind("127.0.0.2:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let target: SocketAddr = format!("127.0.0.2:{port}").parse().unwrap();
    let forwarder = tokio::net::TcpListener::bind("127.0.0.6:0").await.unwrap();
    let advertised = forwarder.local_addr().unwrap().to_string();
    let carried = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&carried);
    let forwarding = tokio::spawn(async move {
        while let Ok((mut inbound, _)) = forwarder.accept().await {
            counted.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    let coordinator = filter_across(&workers, &target.to_string(), Some(&advertised)).await;
    let url = coordinator.rendezvous.as_ref().unwrap().url();
    assert_eq!(url, format!("http://{target}"));
    assert!(
        carried.load(Ordering::Relaxed) > 0,
        "no worker reached the rendezvous by its advertised address {advertised}"
    );
    forwarding.abort();
}

/// A rendezvous on an unspecified address without an advertised host is
/// refused before anything is bound: workers would be sent
/// `http://0.0.0.0:…`, which dials nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rendezvous_on_every_address_without_an_advertised_host_is_refused() {
    for any in ["0.0.0.0:0", "[::]:0"] {
        let refused = remote_cluster(
            Vec::new(),
            partitioned_join_config(3).unwrap(),
            Some(RuntimeFilterConfig::default()),
            any.parse().unwrap(),
        )
        .await;
        let Err(e) = refused else {
            panic!("{any}: a rendezvous workers cannot dial was started");
        };
        assert!(
            e.to_string().contains("RuntimeFilterConfig::advertise"),
            "{any}: {e}"
        );
    }
}

/// The process cluster on a network that costs: this test runs again
/// inside a network namespace whose loopback is limited to 100 Mbit/s
/// (`tests/common/netns.rs`), where the coordinator starts its three
/// workers; the answers are single-node DataFusion's and the filters are
/// built, applied and refused nothing, as on a free loopback. The
/// namespace's queue must have carried the run's traffic. Needs root: else
/// skipped, and said (`FILTERSTORE_REQUIRE_NETNS=1` makes that a failure).
#[test]
fn worker_processes_on_a_rate_limited_network_filter_as_on_loopback() {
    const NAME: &str =
        "processes::worker_processes_on_a_rate_limited_network_filter_as_on_loopback";
    let limit = Duration::from_secs(600);
    let Some(ns) = netns::test_inside(("test", "100mbit"), NAME, limit, || async {
        let workers = Workers::start(3).unwrap();
        drop(filter_across(&workers, "127.0.0.1:0", None).await);
    }) else {
        return;
    };
    let queue = ns.qdisc();
    let sent = ns.sent_bytes().unwrap();
    eprintln!("the limited loopback's queue after the run: {queue}");
    assert!(
        sent > 1 << 20,
        "{sent} bytes through the limited loopback: the run did not cross it ({queue})"
    );
}

#[test]
fn workers_are_stopped_when_a_test_panics() {
    let (tx, rx) = std::sync::mpsc::channel();
    let panicked = std::thread::spawn(move || {
        let workers = Workers::start(2).unwrap();
        tx.send(workers.pids()).unwrap();
        panic!("a failing test");
    })
    .join();
    assert!(panicked.is_err());
    for pid in rx.recv().unwrap() {
        assert!(!alive(pid), "worker {pid} outlived a panicking test");
    }
}

/// A worker started as a user starts one in the background (stdin
/// `/dev/null`, no `--exit-on-stdin-close`) keeps serving, and SIGTERM
/// stops it promptly with exit status 0. It once printed "listening" and
/// exited 0 at once, its standard input being at its end.
#[test]
fn a_worker_with_stdin_at_its_end_serves_until_sigterm() {
    use std::io::{BufRead, BufReader};
    use std::process::{Child, Command, Stdio};
    /// Kills the worker if the test ends early (a panic, a timeout): it
    /// would otherwise serve on after the test binary exits.
    struct KillOnDrop(Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut guard = KillOnDrop(
        Command::new(crate::common::procs::binary())
            .args(["--listen", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let child = &mut guard.0;
    // Its first line, read on a thread of its own, at most 60 s: a worker
    // that never printed it would otherwise hold the test forever.
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the worker printed no line within 60 s");
    assert!(line.contains("listening on http://127.0.0.1:"), "{line:?}");
    let addr = line.trim().rsplit("http://").next().unwrap().to_string();
    std::thread::sleep(Duration::from_millis(500));
    let running = child.try_wait().unwrap();
    let reachable = std::net::TcpStream::connect(&addr).is_ok();
    // SIGTERM, then at most 10 s for it to end (kill -9 after, so no
    // worker outlives the test).
    send_sigterm(child.id());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        running.is_none(),
        "the worker exited on its own: {running:?}"
    );
    assert!(
        reachable,
        "the worker did not accept a connection at {addr}"
    );
    let status = status.expect("the worker did not stop within 10 s of SIGTERM");
    assert!(status.success(), "SIGTERM ended the worker with {status}");
}

/// Sends SIGTERM with the `kill` command (no `unsafe` in the tests).
fn send_sigterm(pid: u32) {
    let ok = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -TERM {pid} failed");
}
