//! Fault injection for the tests of waiting, by filter: a test plans its
//! query, takes the filter ids from the report, and injects faults into
//! those filters only (other queries of the process are untouched). In
//! effect where the taps and probe tasks run in this process (the in-memory
//! cluster); a worker process reads its one seam,
//! `FILTERSTORE_TEST_ACK_DELAY_MS`, from its environment. Compiled only
//! with the `test-hooks` feature (`tests/runtime/waits.rs`); without it no
//! seam is in the build. Not a stable API.

use super::rendezvous::FilterId;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::LazyLock;
use std::time::Duration;

/// What taps do when they would post.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TapFault {
    /// Post as usual.
    #[default]
    None,
    /// Post a failure instead of the filter.
    Fail,
    /// Never post.
    Never,
}

/// The faults of one filter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// What its taps do.
    pub tap: TapFault,
    /// How late its taps post.
    pub post_delay: Duration,
    /// A delay before each batch its probe partitions filter.
    pub probe_batch_delay: Duration,
    /// Its probe partitions read nothing before the filter comes or their
    /// deadline passes (so their scans open every file after it).
    pub probe_waits_first: bool,
}

static ANY: AtomicBool = AtomicBool::new(false);
static FAULTS: LazyLock<Mutex<HashMap<FilterId, Faults>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Injects `faults` into filter `id`.
pub fn inject(id: FilterId, faults: Faults) {
    FAULTS.lock().insert(id, faults);
    ANY.store(true, Ordering::SeqCst);
}

/// Removes filter `id`'s faults.
pub fn clear(id: FilterId) {
    let mut f = FAULTS.lock();
    f.remove(&id);
    ANY.store(!f.is_empty(), Ordering::SeqCst);
}

/// Filter `id`'s faults (none, at the cost of one atomic load, when no
/// test injected any).
pub fn of(id: FilterId) -> Faults {
    if !ANY.load(Ordering::Relaxed) {
        return Faults::default();
    }
    FAULTS.lock().get(&id).copied().unwrap_or_default()
}

/// How long this process's probe tasks wait before each acknowledgement
/// they send to a coordinator: `FILTERSTORE_TEST_ACK_DELAY_MS` in its
/// environment (read once; none when unset or not a number). For the test
/// of slow acknowledgements on worker processes (`tests/runtime/processes.rs`).
pub(crate) fn ack_delay() -> Duration {
    static DELAY: LazyLock<Duration> = LazyLock::new(|| {
        std::env::var("FILTERSTORE_TEST_ACK_DELAY_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(Duration::ZERO, Duration::from_millis)
    });
    *DELAY
}
