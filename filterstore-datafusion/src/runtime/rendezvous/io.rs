//! The thread the rendezvous's calls from a worker process run on.
//!
//! A worker's tokio runtime is kept busy by its scan tasks: each poll of a
//! Parquet scan decodes a batch, and a worker runs several at once on as
//! many threads as it has cores. A post, fetch or acknowledgement spawned
//! there waits in the runtime's queues behind them: on the 2-core VM
//! (TPC-DS q52 on three worker processes) a tap's post took 6–30 ms to
//! reach the coordinator, 1–2 ms from a thread of its own. So these calls,
//! and what a probe task does with its filter when it comes
//! ([`super::super::probe::receive`]), run on one thread in a runtime of
//! their own ([`spawn`]); it is idle between calls. The connections
//! ([`super::service`]'s channels) are made there too, so they live as long
//! as the process, not as long as the runtime of the first query that
//! dialled the coordinator.
//!
//! Where that thread cannot be started, calls run on the caller's runtime
//! as before.

use std::future::Future;
use std::pin::Pin;
use std::sync::LazyLock;
use std::task::{Context, Poll};
use tokio::runtime::{Builder, Handle, Runtime};
use tokio::task::JoinHandle;

/// The calls' runtime: one worker thread, started on first use.
static CALLS: LazyLock<Option<Runtime>> = LazyLock::new(|| {
    Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("filterstore-rendezvous")
        .enable_all()
        .build()
        .ok()
});

/// A call running on the calls' runtime; aborted when dropped (a probe
/// task that ends before its filter, a post past its timeout).
pub(in crate::runtime) struct Spawned<T>(Option<JoinHandle<T>>);

impl<T> Future for Spawned<T> {
    type Output = Result<T, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(handle) = self.0.as_mut() else {
            return Poll::Ready(Err("no tokio runtime to run the call on".into()));
        };
        Pin::new(handle)
            .poll(cx)
            .map(|r| r.map_err(|e| format!("the call's task ended: {e}")))
    }
}

impl<T> Drop for Spawned<T> {
    fn drop(&mut self) {
        if let Some(handle) = &self.0 {
            handle.abort();
        }
    }
}

/// Starts `call` now on the calls' runtime (or the caller's, when that
/// runtime could not be built); the result is its output.
pub(in crate::runtime) fn spawn<F>(call: F) -> Spawned<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handle = match &*CALLS {
        Some(rt) => Some(rt.spawn(call)),
        None => Handle::try_current().ok().map(|h| h.spawn(call)),
    };
    Spawned(handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_call_runs_while_the_callers_runtime_is_blocked() {
        // The caller's only thread blocks in a receive until the call has
        // run: were the call queued on that runtime, it would never run,
        // and the receive would give up after 10 s.
        let (tx, rx) = std::sync::mpsc::channel();
        let call = spawn(async move {
            let _ = tx.send(std::thread::current().name().map(str::to_string));
        });
        let ran_on = rx.recv_timeout(std::time::Duration::from_secs(10));
        assert_eq!(
            ran_on.ok().flatten().as_deref(),
            Some("filterstore-rendezvous")
        );
        assert!(call.await.is_ok());
    }

    #[tokio::test]
    async fn a_dropped_call_is_aborted() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let call = spawn(async move {
            // Holds `tx` until aborted.
            std::future::pending::<()>().await;
            drop(tx);
        });
        drop(call);
        let closed = tokio::time::timeout(std::time::Duration::from_secs(10), rx).await;
        assert!(matches!(closed, Ok(Err(_))), "the sender was not dropped");
    }
}
