//! When a runtime filter is placed, how it is sized, how long a probe task
//! waits for it, and when it stops being checked.

use super::probe::ProbePolicy;
use super::rendezvous::SlotPolicy;
use std::time::Duration;

/// The rule's settings (the defaults are what a user would leave on).
///
/// The filter is nearly free to build (its keys come from the rows the join
/// reads anyway), so the decision is about the probe side: rows checked
/// against rows saved. Planning skips only what statistics show will not
/// pay; the rest is decided when the query runs, from the built filter and
/// from what it drops.
///
/// ```
/// use filterstore_datafusion::RuntimeFilterConfig;
/// use std::time::Duration;
///
/// // Probe tasks wait at most 1 s for their filter, then pass rows unfiltered.
/// let config = RuntimeFilterConfig {
///     wait: Duration::from_secs(1),
///     ..RuntimeFilterConfig::default()
/// };
/// assert_eq!(config.probe_policy().wait, Duration::from_secs(1));
/// assert!(!config.force); // by default a filter is placed only where it pays
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeFilterConfig {
    /// Target false-positive rate of each filter. Default 1%.
    pub fp: f64,
    /// Before a built filter ships, halve it while its rate, from its fill,
    /// stays within `fp`: a filter is sized from estimates (four times the
    /// build side's estimated rows) and may hold far fewer keys. Every key
    /// stays in the halved filter. Default true.
    pub fit_filters: bool,
    /// With [`RuntimeFilterConfig::fit_filters`], a build task halves its
    /// partial filter before it posts it (in a worker process or in the
    /// coordinator's alike, so that both ship the same filter), while the
    /// merged filter would stay within `fp` if every task held as many keys
    /// as this one: fewer bytes to encode, send, decode and OR. A task
    /// holding more keys than the others loses none: the coordinator
    /// spreads a halved partial over the merged filter's size, where it
    /// keeps the rate it had. Default true.
    pub fit_partials: bool,
    /// At most this many bytes of filter. Past it a filter is sized for the
    /// budget and its rate rises. Default 1 MiB: a filter is sized before
    /// its build side runs, from estimates that run high (four times the
    /// estimated rows), and every byte of it is built, shipped, merged and
    /// probed in every task. TPC-H SF 1 on worker processes (one run each):
    /// wall sum 0.670 at 4 MiB, 0.645 at 1 MiB, 0.622 at 256 KiB (two of
    /// 49 filters then not applied); q12's 4 MiB filter of 29K keys
    /// made it 1.23x slower, 0.90x at 1 MiB (`docs/BENCHMARKS.md`).
    pub max_filter_bytes: u64,
    /// Skip a side that statistics say sends fewer rows than this into its
    /// shuffle. Default 100,000.
    pub min_filtered_rows: u64,
    /// Skip a side expected to keep more than this share of its rows, from
    /// statistics before the query and from the built filter after its
    /// build side ended. Default 0.8.
    pub max_pass_fraction: f64,
    /// A built filter whose false-positive rate (from its fill) is above
    /// this passes every row instead (a build side far larger than its
    /// statistics said). Default 0.25.
    pub max_fp: f64,
    /// The longest a probe task waits for its filter; then its rows pass
    /// unfiltered until the filter arrives. Default 5 s.
    pub wait: Duration,
    /// The most bytes of rows each probe partition reads ahead and holds
    /// while its filter has not come (reserved in the task's memory pool);
    /// when full, they pass unfiltered. 0: rows never wait for the filter.
    /// Default 64 MiB (TPC-H SF 1 on worker processes: 16 MiB filled in 38
    /// partitions and let 17% of the probe rows pass unfiltered, 64 MiB in 5
    /// and 0.8%; `docs/BENCHMARKS.md`).
    pub probe_buffer_bytes: u64,
    /// Hand each filter to the Parquet scans below its probe places, as a
    /// predicate their statistics prune by once the filter has arrived
    /// (the build keys' bounds), and that drops rows in the scan where
    /// `datafusion.execution.parquet.pushdown_filters` is on. Default true.
    pub scan_filters: bool,
    /// The longest a probe task's Parquet scan waits for its filters before
    /// it opens a file (with [`RuntimeFilterConfig::scan_filters`]). A file
    /// opened after the filter came skips the row groups outside the build
    /// keys' bounds; one opened before reads them all. Zero: scans open at
    /// once; at most [`RuntimeFilterConfig::wait`]. Default 200 ms (TPC-DS SF 1 on worker processes, two
    /// interleaved pairs: rows leaving the scans, build sides included,
    /// 0.68 → 0.55 of those without the rule, wall sum 0.29 → 0.28; TPC-H unchanged;
    /// 500 ms and 1 s pruned no more in one run each;
    /// `docs/BENCHMARKS.md`).
    pub scan_wait: Duration,
    /// Where no filter of the build side's keys is placed, place one of the
    /// probe side's keys on the build side (`docs/DATAFUSION.md`, "Reverse
    /// filters"): the join's probe side is then read ahead of its build
    /// side, up to [`RuntimeFilterConfig::read_ahead_bytes`]. Default true.
    pub reverse_filters: bool,
    /// The most bytes of rows each partition of a reverse filter's probe
    /// side reads ahead of the join and holds (reserved in the task's
    /// memory pool); past it the filter is abandoned and its build side
    /// passes every row. Default 32 MiB.
    pub read_ahead_bytes: u64,
    /// Rows a probe task checks before it judges the filter. Default 65,536.
    pub check_window: u64,
    /// A filter that drops less than this share of the rows checked stops
    /// being checked. Default 0.1 (a row checked costs about a tenth of a
    /// row shuffled, hashed and probed).
    pub min_drop: f64,
    /// The coordinator's rendezvous address (`http://host:port`, from
    /// [`crate::RendezvousServer::url`]) for joins that run in worker
    /// processes. `None`: taps post in their own process, which is the
    /// coordinator's in an in-memory cluster.
    pub rendezvous: Option<String>,
    /// The host (`10.0.0.5`, `coordinator.internal`) or `host:port` that
    /// worker processes reach the coordinator's rendezvous by, when
    /// [`crate::remote_cluster`] serves it on an unspecified address
    /// (`0.0.0.0` or `::`), which no worker can dial. Without a port, the
    /// port the rendezvous was bound to. `None` (default): the bound
    /// address itself, which must then be a specific one.
    pub advertise: Option<String>,
    /// Place, ship and check every filter the decision table allows,
    /// whatever statistics and the built filter say (tests, measurements;
    /// never changes an answer either).
    pub force: bool,
}

impl Default for RuntimeFilterConfig {
    fn default() -> Self {
        RuntimeFilterConfig {
            fp: 0.01,
            fit_filters: true,
            fit_partials: true,
            max_filter_bytes: 1 << 20,
            min_filtered_rows: 100_000,
            max_pass_fraction: 0.8,
            max_fp: 0.25,
            wait: Duration::from_secs(5),
            probe_buffer_bytes: 64 << 20,
            scan_filters: true,
            scan_wait: Duration::from_millis(200),
            reverse_filters: true,
            read_ahead_bytes: 32 << 20,
            check_window: 65_536,
            min_drop: 0.1,
            rendezvous: None,
            advertise: None,
            force: false,
        }
    }
}

impl RuntimeFilterConfig {
    /// How probe tasks wait and check.
    pub fn probe_policy(&self) -> ProbePolicy {
        ProbePolicy {
            wait: self.wait,
            check_window: self.check_window,
            min_drop: self.min_drop,
            force: self.force,
            buffer_bytes: self.probe_buffer_bytes,
        }
    }

    /// How long the scans a filter reaches wait for it before they open a
    /// file; `None` when filters are not handed to scans.
    pub(crate) fn scan_wait(&self) -> Option<Duration> {
        // Never longer than a probe task waits for its filter.
        self.scan_filters.then_some(self.scan_wait.min(self.wait))
    }

    /// The rate build tasks in worker processes halve their partials to;
    /// `None`: they post them at the planned size.
    pub(crate) fn partial_fit(&self) -> Option<f64> {
        (self.fit_filters && self.fit_partials).then_some(self.fp)
    }

    /// How the coordinator judges a built filter.
    pub fn slot_policy(&self, probe_distinct: Option<f64>) -> SlotPolicy {
        SlotPolicy {
            max_fp: self.max_fp,
            max_pass: self.max_pass_fraction,
            probe_distinct,
            force: self.force,
            fit_fp: self.fit_filters.then_some(self.fp),
        }
    }
}
