//! The worker thread every sled write of the process runs on, the
//! deadlines of its calls, and what the handles of one database share
//! (the engine's module docs, "Deadlines").

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A job's state: queued, running, withdrawn by its caller.
const QUEUED: u8 = 0;
const RUNNING: u8 = 1;
const WITHDRAWN: u8 = 2;

struct Job {
    state: Arc<JobState>,
    run: Box<dyn FnOnce() + Send + 'static>,
}

struct JobState {
    state: AtomicU8,
    /// When the worker started it (valid once running).
    started: Mutex<Option<Instant>>,
    /// The deadline of its database.
    timeout: Duration,
}

/// What the worker is running: its start and deadline.
static CURRENT: Mutex<Option<(Instant, Duration)>> = parking_lot::const_mutex(None);

/// The sender of the process's sled worker; `None` until the first call.
static WORKER: Mutex<Option<mpsc::Sender<Job>>> = parking_lot::const_mutex(None);

fn submit(job: Job) -> Result<(), Job> {
    let mut worker = WORKER.lock();
    let tx = worker.get_or_insert_with(spawn_worker);
    tx.send(job).map_err(|e| {
        *worker = None;
        e.0
    })
}

/// Workers started so far (one per process unless its thread could not
/// start: a stuck worker is never replaced).
static SPAWNED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn spawn_worker() -> mpsc::Sender<Job> {
    SPAWNED.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = mpsc::channel::<Job>();
    let spawned = std::thread::Builder::new()
        .name("filterstore-sled".into())
        .spawn(move || {
            for job in rx {
                if job
                    .state
                    .state
                    .compare_exchange(QUEUED, RUNNING, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    continue; // withdrawn by its caller
                }
                let now = Instant::now();
                *job.state.started.lock() = Some(now);
                *CURRENT.lock() = Some((now, job.state.timeout));
                // A sled panic must not take the worker with it: the job's
                // reply channel is dropped, which its caller reports.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job.run));
                *CURRENT.lock() = None;
            }
        });
    // Without a thread the receiver is gone and every send fails: reported.
    drop(spawned);
    tx
}

/// Whether the worker's current call has run past its own deadline.
fn worker_held() -> bool {
    CURRENT
        .lock()
        .is_some_and(|(start, timeout)| start.elapsed() > timeout)
}

pub(super) fn io_error(kind: std::io::ErrorKind, msg: String) -> sled::Error {
    sled::Error::Io(std::io::Error::new(kind, msg))
}

/// Errors after which sled's database is not to be trusted with more calls.
fn is_fatal(e: &sled::Error) -> bool {
    matches!(
        e,
        sled::Error::Io(_) | sled::Error::Corruption { .. } | sled::Error::ReportableBug(_)
    )
}

/// What the handles of one database share.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) timeout: Duration,
    failed: AtomicBool,
    reason: Mutex<String>,
}

impl Shared {
    pub(super) fn new(timeout: Duration) -> Arc<Shared> {
        Arc::new(Shared {
            timeout,
            failed: AtomicBool::new(false),
            reason: Mutex::new(String::new()),
        })
    }

    pub(super) fn fail(&self, reason: String) {
        let mut r = self.reason.lock();
        if !self.failed.swap(true, Ordering::AcqRel) {
            *r = reason;
        }
    }

    pub(super) fn check(&self) -> sled::Result<()> {
        if self.failed.load(Ordering::Acquire) {
            return Err(io_error(
                std::io::ErrorKind::Other,
                format!(
                    "the database failed earlier ({}); reopen the store",
                    self.reason.lock()
                ),
            ));
        }
        Ok(())
    }

    /// Runs `job` on the worker; waits for it at most the deadline counted
    /// from its start (module docs, "Deadlines").
    pub(super) fn call<R: Send + 'static>(
        &self,
        job: impl FnOnce() -> sled::Result<R> + Send + 'static,
    ) -> sled::Result<R> {
        self.check()?;
        let (tx, rx) = mpsc::sync_channel(1);
        let state = Arc::new(JobState {
            state: AtomicU8::new(QUEUED),
            started: Mutex::new(None),
            timeout: self.timeout,
        });
        let sent = submit(Job {
            state: Arc::clone(&state),
            run: Box::new(move || {
                let _ = tx.send(job());
            }),
        });
        if sent.is_err() {
            return Err(io_error(
                std::io::ErrorKind::Other,
                "could not start the storage engine's thread".into(),
            ));
        }
        let poll = self.timeout.min(Duration::from_millis(20));
        loop {
            match rx.recv_timeout(poll) {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(e)) => {
                    if is_fatal(&e) {
                        self.fail(e.to_string());
                    }
                    return Err(e);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Some(e) = self.given_up(&state) {
                        return Err(e);
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let msg = "the storage engine panicked".to_string();
                    self.fail(msg.clone());
                    return Err(sled::Error::ReportableBug(msg));
                }
            }
        }
    }

    /// Whether a caller still waiting for `state`'s job gives up: its own
    /// deadline passed since the worker started it (the database fails), or
    /// it is still queued behind another database's call that passed its
    /// deadline (withdrawn; this database does not fail).
    fn given_up(&self, state: &JobState) -> Option<sled::Error> {
        let started = *state.started.lock();
        match started {
            Some(t) if t.elapsed() > self.timeout => {
                let msg = format!(
                    "the storage engine did not answer within {:?} (a full or failing disk?)",
                    self.timeout
                );
                self.fail(msg.clone());
                Some(io_error(std::io::ErrorKind::TimedOut, msg))
            }
            None if worker_held()
                && state
                    .state
                    .compare_exchange(QUEUED, WITHDRAWN, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok() =>
            {
                Some(io_error(
                    std::io::ErrorKind::WouldBlock,
                    "the storage worker is held by another store's call that passed its \
                     deadline; nothing was written, retry later"
                        .into(),
                ))
            }
            _ => None,
        }
    }

    /// Drops a handle on the worker (a drop may flush), or leaks it if the
    /// database failed (that flush may never return).
    pub(super) fn release<T: Send + 'static>(&self, handle: T) {
        if self.failed.load(Ordering::Acquire) {
            std::mem::forget(handle);
            return;
        }
        let job = Job {
            state: Arc::new(JobState {
                state: AtomicU8::new(QUEUED),
                started: Mutex::new(None),
                timeout: self.timeout,
            }),
            run: Box::new(move || drop(handle)),
        };
        if let Err(job) = submit(job) {
            std::mem::forget(job);
        }
    }
}

/// The error of a call on a handle being dropped (which no caller can make).
pub(super) fn dropped() -> sled::Error {
    sled::Error::ReportableBug("a storage handle was used while being dropped".into())
}

/// Tests that use the process's worker take this: one of them makes it
/// stuck on purpose.
#[cfg(test)]
pub(crate) static SERIAL: Mutex<()> = parking_lot::const_mutex(());

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(e: &sled::Error) -> Option<std::io::ErrorKind> {
        match e {
            sled::Error::Io(io) => Some(io.kind()),
            _ => None,
        }
    }

    #[test]
    fn a_stuck_call_fails_only_its_own_database_and_the_worker_stays_one() {
        let _serial = SERIAL.lock();
        let a = Shared::new(Duration::from_millis(100));
        let b = Shared::new(Duration::from_secs(20));
        assert_eq!(b.call(|| Ok(1)).unwrap(), 1);
        let spawned = SPAWNED.load(Ordering::Relaxed);
        // A's call is stuck (as sled on a full disk) until released.
        let (release, stuck) = mpsc::channel::<()>();
        let a2 = Arc::clone(&a);
        let waiter = std::thread::spawn(move || {
            a2.call(move || {
                let _ = stuck.recv_timeout(Duration::from_secs(60));
                Ok(())
            })
        });
        // Its caller gives up after A's deadline: TimedOut, A failed.
        let r = waiter.join().unwrap();
        assert_eq!(
            r.as_ref().err().and_then(kind),
            Some(std::io::ErrorKind::TimedOut)
        );
        assert!(a.failed.load(Ordering::Acquire));
        assert!(
            a.call(|| Ok(())).is_err(),
            "a failed database refuses calls"
        );
        // B, queued behind a call past its deadline, is withdrawn at once and
        // told so; B is not failed (its deadline, 20 s, counts nothing of
        // the queue).
        let t0 = Instant::now();
        let r = b.call(|| Ok(2));
        assert_eq!(
            r.as_ref().err().and_then(kind),
            Some(std::io::ErrorKind::WouldBlock)
        );
        assert!(t0.elapsed() < Duration::from_secs(5));
        assert!(!b.failed.load(Ordering::Acquire));
        // Once the stuck call returns, B's calls run on the same worker.
        release.send(()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let got = loop {
            match b.call(|| Ok(3)) {
                Ok(v) => break v,
                Err(e)
                    if kind(&e) == Some(std::io::ErrorKind::WouldBlock)
                        && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(got, 3);
        assert_eq!(
            SPAWNED.load(Ordering::Relaxed),
            spawned,
            "a second worker was started"
        );
    }
}
