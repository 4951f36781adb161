//! Running a test body under a time limit, so that a hang is a failure.
//! Apart from `mod.rs` because it needs nothing of the store: the filter
//! layer's test binary, built without it, includes this file alone.

use std::sync::mpsc;
use std::time::Duration;

/// Runs `body` on its own thread and returns its result; re-raises its
/// panic; panics if it has not finished within `limit` (the stuck thread is
/// abandoned, and the test fails instead of hanging).
pub fn with_timeout<T, F>(limit: Duration, body: F) -> T
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .name("test-body".into())
        .spawn(move || {
            let value = body();
            let _ = tx.send(());
            value
        })
        .expect("spawning the test thread");
    match rx.recv_timeout(limit) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => match handle.join() {
            Ok(value) => value,
            Err(panic) => std::panic::resume_unwind(panic),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("the test did not finish within {limit:?}: it hangs")
        }
    }
}
