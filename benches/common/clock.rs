//! The clock of the interleaved benches: the calling thread's CPU time.
//!
//! On this shared 2-core machine a wall-clock segment also counts the time
//! the thread spent runnable but waiting for a CPU, which is what made the
//! spread of one subject 12–27 ns between runs. The thread's CPU time
//! (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`, nanoseconds, updated at each
//! read) leaves that out; contention for caches and memory from other
//! processes still counts, which is why the benches also interleave
//! subjects and print the load average. (`/proc/thread-self/schedstat`
//! was tried first: it advances only at scheduler ticks, so millisecond
//! segments read 0.) Before the first use the clock is checked against the
//! wall clock over a 5 ms spin (see [`source`]); if it fails, or where it
//! is missing, the wall clock is used and [`source`] says so.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The thread's CPU time, if the OS reports it.
fn thread_cpu() -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` writes one `timespec` through the pointer,
    // which points to a live, writable local of that type; it reads nothing
    // else of ours. A non-zero return (clock missing) leaves it unused.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// Whether the CPU clock passed the check against the wall clock: over a
/// 5 ms spin it must advance, and by no more than the wall clock (+1 ms).
fn cpu_clock_ok() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        let (Some(c0), w0) = (thread_cpu(), Instant::now()) else {
            return false;
        };
        while w0.elapsed() < Duration::from_millis(5) {
            std::hint::spin_loop();
        }
        let wall = w0.elapsed();
        match thread_cpu() {
            Some(c1) => c1 > c0 && c1 - c0 <= wall + Duration::from_millis(1),
            None => false,
        }
    })
}

/// A point on this thread's clock (CPU time, else wall time).
#[derive(Clone, Copy)]
pub enum Tick {
    Cpu(Duration),
    Wall(Instant),
}

impl Tick {
    pub fn now() -> Tick {
        match thread_cpu().filter(|_| cpu_clock_ok()) {
            Some(d) => Tick::Cpu(d),
            None => Tick::Wall(Instant::now()),
        }
    }

    /// Time on this thread's clock since `self`.
    pub fn elapsed(self) -> Duration {
        match self {
            Tick::Cpu(start) => thread_cpu().unwrap_or(start).saturating_sub(start),
            Tick::Wall(start) => start.elapsed(),
        }
    }
}

/// Which clock the figures use, for the bench's output.
pub fn source() -> &'static str {
    if cpu_clock_ok() {
        "thread CPU time (CLOCK_THREAD_CPUTIME_ID)"
    } else {
        "wall clock (no usable thread CPU clock)"
    }
}
