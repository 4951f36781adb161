//! An asymmetric memory barrier: a [`light`] side that costs a thread
//! nothing but a compiler barrier, and a [`heavy`] side, the Linux
//! `membarrier(2)` system call, that makes every light side of the process
//! act as a full barrier. One of the four modules with `unsafe` (with
//! `filter::pages`, `filter::simd` and `store::disk::sys`): one FFI call,
//! `syscall(SYS_membarrier, ...)`, audited below. Tested against the safe
//! path by every test of a biased insert (`bloom::bias`): the same bits as
//! the locked inserts of a filter no thread holds.
//!
//! # What it guarantees
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` returns only once every
//! running thread of the calling process has passed through a state where
//! its memory accesses match program order; a thread that is not running
//! is in that state already (its last context switch was a full barrier).
//! So a thread that writes `a`, passes a [`light`] barrier, then reads `b`,
//! and a thread that writes `b`, calls [`heavy`], then reads `a`, cannot
//! both read the old value: the pair is Dekker's, with the light side's
//! hardware fence replaced by the heavy side's interrupt (`man 2
//! membarrier`, whose own example pairs a compiler barrier with the call;
//! liburcu and folly's `asymmetricHeavyBarrier` use it the same way). The
//! light side is what makes a biased filter's key-by-key insert free of
//! locked instructions (`bloom::bias`); the heavy one runs once per filter
//! whose key-by-key writer a second thread revokes.
//!
//! # When it is there
//! The private expedited command needs Linux 4.14 and a registration of the
//! process, done once, by the first caller of [`available`] (the first
//! key-by-key insert into a shared filter): a `QUERY` for the command,
//! then the registration. In a process with several threads the kernel
//! waits for an RCU grace period to register (14.4 ms measured here with
//! five threads, once per process; at once with one thread). Where either fails
//! (another OS, an older kernel, a seccomp filter that denies the call),
//! [`available`] says no and stays no, and `bloom::bias` never biases a
//! filter: every shared insert takes its block's lock, as before.

use std::sync::atomic::{compiler_fence, AtomicU8, Ordering};

/// [`available`] not asked yet.
const UNKNOWN: u8 = 0;
/// The process is registered: [`heavy`] works.
const READY: u8 = 1;
/// No heavy barrier in this process.
const ABSENT: u8 = 2;

/// Whether this process registered for the heavy barrier.
static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);

/// The light side: orders this thread's accesses around it in the compiled
/// code only (no instruction); [`heavy`] orders them in the hardware.
#[inline(always)]
pub(crate) fn light() {
    compiler_fence(Ordering::SeqCst);
}

/// Whether [`heavy`] works in this process: registers it on the first call
/// (once; concurrent first calls may each register, which the kernel
/// allows). Once true, always true.
#[inline]
pub(crate) fn available() -> bool {
    match STATE.load(Ordering::Acquire) {
        READY => true,
        ABSENT => false,
        _ => register(),
    }
}

/// The first [`available`]: registers, and records the answer.
#[cold]
fn register() -> bool {
    let ready = sys::register();
    STATE.store(if ready { READY } else { ABSENT }, Ordering::Release);
    ready
}

/// The heavy side: returns once every thread of this process has passed a
/// full barrier since the call began. Only after [`available`] said yes.
pub(crate) fn heavy() {
    debug_assert_eq!(STATE.load(Ordering::Relaxed), READY);
    sys::heavy();
}

#[cfg(target_os = "linux")]
mod sys {
    /// `linux/membarrier.h`: ask which commands the kernel has.
    const CMD_QUERY: libc::c_int = 0;
    /// `MEMBARRIER_CMD_GLOBAL` (was `SHARED`, Linux 4.3): a barrier on every
    /// thread of every process, slow (an RCU grace period), no registration.
    const CMD_GLOBAL: libc::c_int = 1;
    /// `MEMBARRIER_CMD_PRIVATE_EXPEDITED` (Linux 4.14).
    const CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
    /// `MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED` (Linux 4.14).
    const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

    /// `membarrier(cmd, 0, 0)`: its return value (−1 on error).
    fn membarrier(cmd: libc::c_int) -> libc::c_long {
        // SAFETY: `membarrier` takes three integers (command, flags, CPU
        // id) and touches no memory of ours; an unknown command or one the
        // kernel or a seccomp filter refuses returns −1 (EINVAL, ENOSYS,
        // EPERM), which every caller checks.
        unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                cmd,
                0 as libc::c_uint,
                0 as libc::c_int,
            )
        }
    }

    /// Whether the kernel has the private expedited command and registered
    /// this process for it.
    pub(super) fn register() -> bool {
        let cmds = membarrier(CMD_QUERY);
        cmds >= 0
            && cmds & libc::c_long::from(CMD_PRIVATE_EXPEDITED) != 0
            && membarrier(CMD_REGISTER_PRIVATE_EXPEDITED) == 0
    }

    /// The private expedited barrier. Once the process is registered it
    /// does not fail (`man 2 membarrier`: EINVAL for an unknown command or
    /// flags, ENOSYS, EPERM without registration). A child of `fork` that
    /// the kernel did not keep registered gets EPERM: it registers again;
    /// were that to fail, the global command (a superset: every thread of
    /// every process) is the fallback, and that failing too is retried
    /// rather than returned, because a revocation that went on without a
    /// barrier could lose a bit.
    pub(super) fn heavy() {
        while membarrier(CMD_PRIVATE_EXPEDITED) != 0
            && !(register() && membarrier(CMD_PRIVATE_EXPEDITED) == 0)
            && membarrier(CMD_GLOBAL) != 0
        {
            std::thread::yield_now();
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    /// No heavy barrier on this OS.
    pub(super) fn register() -> bool {
        false
    }

    /// Never called: [`super::available`] is false.
    pub(super) fn heavy() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's kernel (Linux 6.x) has the command; once registered,
    /// the barrier returns, again and again, from several threads at once.
    #[test]
    #[cfg(target_os = "linux")]
    fn the_heavy_barrier_is_there_and_returns() {
        assert!(available(), "membarrier private expedited on this kernel");
        assert!(available(), "and stays available");
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| (0..100).for_each(|_| heavy()));
            }
        });
    }
}
