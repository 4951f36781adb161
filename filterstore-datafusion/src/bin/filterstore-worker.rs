//! `filterstore-worker`: a datafusion-distributed worker that knows
//! filterstore's SQL functions and runtime-filter plan nodes.
//!
//! ```text
//! filterstore-worker [--listen ADDR] [--exit-on-stdin-close]
//!     --listen ADDR           where to listen (default 127.0.0.1:0, any free port)
//!     --exit-on-stdin-close   also stop when standard input reaches its end
//! ```
//!
//! Prints `filterstore-worker listening on http://HOST:PORT` on standard
//! output once it accepts connections (bound to `0.0.0.0` or `::`, a note
//! on standard error that coordinators need one of the machine's addresses
//! and that the port must stay on a trusted network), then serves until Ctrl-C or SIGTERM,
//! whatever its standard input is: started in the background with stdin
//! `/dev/null`, or by a service manager, it keeps serving. With
//! `--exit-on-stdin-close` it also stops when its standard input reaches
//! its end, so that a worker started by a test or a supervisor holding its
//! stdin never outlives it.

use std::io::{Read, Write};
use std::net::SocketAddr;

fn main() {
    if let Err(e) = run() {
        eprintln!("filterstore-worker: {e}");
        std::process::exit(1);
    }
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The command line: where to listen, and whether the end of standard
/// input stops the worker.
struct Args {
    listen: SocketAddr,
    stdin_stops: bool,
}

fn run() -> Res<()> {
    let Some(args) = parse_args()? else {
        return Ok(());
    };
    tokio::runtime::Runtime::new()?.block_on(serve(args))
}

/// The arguments, or `None` once `--help` has printed the usage.
fn parse_args() -> Res<Option<Args>> {
    let mut parsed = Args {
        listen: "127.0.0.1:0".parse()?,
        stdin_stops: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--listen" => {
                let v = args
                    .next()
                    .ok_or("--listen needs an address, e.g. 127.0.0.1:50051")?;
                parsed.listen = v.parse().map_err(|e| format!("--listen {v}: {e}"))?;
            }
            "--exit-on-stdin-close" => parsed.stdin_stops = true,
            "-h" | "--help" => {
                println!(
                    "usage: filterstore-worker [--listen ADDR] [--exit-on-stdin-close]\n  \
                     --listen ADDR          where to listen (default 127.0.0.1:0)\n  \
                     --exit-on-stdin-close  also stop when standard input ends\n\
                     Serves until Ctrl-C or SIGTERM."
                );
                return Ok(None);
            }
            other => return Err(format!("unknown argument {other} (try --help)").into()),
        }
    }
    Ok(Some(parsed))
}

/// Listens, says where, and serves until [`shutdown`] completes.
async fn serve(args: Args) -> Res<()> {
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    let addr = listener.local_addr()?;
    let shutdown = shutdown(args.stdin_stops);
    println!("filterstore-worker listening on http://{addr}");
    if addr.ip().is_unspecified() {
        // Not an address a coordinator can dial; and every address of
        // this machine now takes plans.
        eprintln!(
            "filterstore-worker: listening on every address of this machine: give \
             coordinators one of them (http://HOST:{}); whoever reaches this port can run \
             plans here, so keep it on a network you trust",
            addr.port()
        );
    }
    std::io::stdout().flush()?;
    filterstore_datafusion::serve_worker(listener, shutdown).await?;
    Ok(())
}

/// Completes on Ctrl-C or SIGTERM, and when `stdin_stops`, at the end of
/// standard input.
fn shutdown(stdin_stops: bool) -> impl std::future::Future<Output = ()> {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    if stdin_stops {
        std::thread::spawn(move || {
            // The end of standard input is the parent's end.
            let mut sink = [0u8; 256];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
            let _ = stop.send(());
        });
    } else {
        // Never sent: only a signal stops the worker.
        std::mem::forget(stop);
    }
    async move {
        tokio::select! {
            _ = stopped => {}
            _ = tokio::signal::ctrl_c() => {}
            _ = terminated() => {}
        }
    }
}

#[cfg(unix)]
async fn terminated() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut s) => {
            s.recv().await;
        }
        Err(_) => std::future::pending::<()>().await,
    }
}

#[cfg(not(unix))]
async fn terminated() {
    std::future::pending::<()>().await
}
