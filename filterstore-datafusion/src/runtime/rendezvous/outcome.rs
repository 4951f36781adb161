//! What became of a runtime filter at execution, as reports say it.

use std::time::Duration;

/// What became of one runtime filter at execution.
#[derive(Clone, Debug, PartialEq)]
pub enum FilterOutcome {
    /// Every task's partial arrived, the merged filter was shipped, and at
    /// least one probe task received and read it.
    Built {
        /// Probe tasks that received and read it (so far).
        delivered: u64,
        /// The compressed message sent to each probe task.
        message_bytes: usize,
        /// Distinct keys, estimated from the merged filter (when partials
        /// came halved, the fewer of that and the tasks' own estimates
        /// summed).
        keys: f64,
        /// The merged filter's false-positive rate, from its fill.
        fp: f64,
        /// The shipped filter's bits: the planned size, halved while the
        /// rate stayed within `SlotPolicy::fit_fp`.
        bits: u64,
        /// Partial filters merged (the join stage's tasks).
        partials: usize,
        /// Build rows the taps saw (null keys excluded).
        build_rows: u64,
        /// From the query's start to the filter being ready.
        ready_after: Duration,
    },
    /// The merged filter was shipped but no probe task has received and
    /// read it (yet): its probe side filtered nothing.
    Undelivered {
        /// Probe tasks that received it and could not read it.
        unreadable: u64,
        /// The compressed message sent.
        message_bytes: usize,
        /// Partial filters merged.
        partials: usize,
        /// From the query's start to the filter being ready.
        ready_after: Duration,
    },
    /// The probe side passes every row, and why.
    PassAll {
        /// Why no filter was shipped.
        reason: String,
        /// From the query's start to this decision.
        after: Duration,
    },
}

impl FilterOutcome {
    /// Whether a filter was shipped and received.
    pub fn is_built(&self) -> bool {
        matches!(self, FilterOutcome::Built { .. })
    }

    /// This outcome as of `received` probe tasks having read the filter
    /// and `unreadable` having failed to.
    pub(super) fn into_delivered(mut self, received: u64, unreadable: u64) -> FilterOutcome {
        if let FilterOutcome::Built {
            delivered,
            message_bytes,
            partials,
            ready_after,
            ..
        } = &mut self
        {
            if received == 0 {
                return FilterOutcome::Undelivered {
                    unreadable,
                    message_bytes: *message_bytes,
                    partials: *partials,
                    ready_after: *ready_after,
                };
            }
            *delivered = received;
        }
        self
    }
}

impl std::fmt::Display for FilterOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FilterOutcome::Built {
                delivered,
                message_bytes,
                keys,
                fp,
                bits,
                partials,
                build_rows,
                ready_after,
            } => write!(
                f,
                "built from {partials} task(s), {build_rows} build rows, ~{keys:.0} keys, fp {:.2}%, {bits} bits, {message_bytes} B message, ready after {:.1} ms, received by {delivered} probe task(s)",
                fp * 100.0,
                ready_after.as_secs_f64() * 1e3
            ),
            FilterOutcome::Undelivered {
                unreadable,
                message_bytes,
                partials,
                ready_after,
            } => write!(
                f,
                "undelivered: built from {partials} task(s), {message_bytes} B message, ready after {:.1} ms, but no probe task read it ({unreadable} could not)",
                ready_after.as_secs_f64() * 1e3
            ),
            FilterOutcome::PassAll { reason, after } => write!(
                f,
                "passed every row after {:.1} ms: {reason}",
                after.as_secs_f64() * 1e3
            ),
        }
    }
}
