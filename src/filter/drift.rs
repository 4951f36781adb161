//! Drift detection: when has a table's filter strayed far enough from its
//! false-positive target that it should be regenerated?
//!
//! Signals, per table ([`HealthSignals`]):
//! * the **estimated** rate from the live bit filter's fill (per block for the
//!   blocked layout, [`crate::BloomRead::estimated_fp`]): what a random absent
//!   key experiences now, whatever mix of inserts and removes got it there;
//! * the **observed** rate from the host's feedback ([`ObservedFp`]): every
//!   lookup of a key that turned out to be absent is a trial, and it is a false
//!   positive when the filter had said "maybe". True negatives (the filter said
//!   "absent") count too, otherwise the rate would be inflated. Counted over a
//!   sliding window so that old behaviour fades out;
//! * **saturated** counters (sticky at 15: their bits can never clear);
//! * **live keys** against the capacity the filter was sized for.
//!
//! [`DriftPolicy::assess`] turns them into a decision with a reason. The band
//! follows ScyllaDB, which rebuilds a filter whose rate leaves 75%–125% of the
//! target; both ends are configurable. The observed rate only counts when the
//! evidence is significant: the count of false positives must lie more than
//! `z` standard deviations (binomial, default 4) outside the band, so a handful
//! of unlucky lookups never triggers an expensive regeneration.
//!
//! Regenerating costs a scan of the whole table (seed `004`: "a rare event"),
//! so the policy is deliberately conservative.

use std::sync::atomic::{AtomicU64, Ordering};

/// Why a table should be regenerated.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum DriftReason {
    /// The false-positive rate estimated from the fill is above the band.
    EstimatedFpHigh {
        /// Estimated rate.
        estimated: f64,
        /// Upper edge of the band.
        limit: f64,
    },
    /// The estimated rate is below the band: the filter is oversized for the
    /// keys it holds now (e.g. after mass deletes) and wastes memory.
    EstimatedFpLow {
        /// Estimated rate.
        estimated: f64,
        /// Lower edge of the band.
        limit: f64,
    },
    /// The host's feedback shows significantly more false positives than the band allows.
    ObservedFpHigh {
        /// Observed rate.
        observed: f64,
        /// Trials it is based on.
        trials: u64,
        /// Upper edge of the band.
        limit: f64,
    },
    /// Too many counters are stuck at 15.
    SaturatedCounters {
        /// Saturated counters.
        saturated: u64,
        /// The most tolerated.
        limit: u64,
    },
    /// More live keys than the filter was sized for, by more than the tolerated factor.
    Overloaded {
        /// Live keys.
        live: u64,
        /// Capacity the filter was sized for.
        capacity: u64,
    },
    /// The table's target rate or expected size was changed.
    ParametersChanged,
    /// The table lost writes it had acknowledged (its open found its log
    /// damaged): it answers "maybe" for every key until it is rebuilt.
    Damaged {
        /// What its open found.
        reason: String,
    },
}

impl std::fmt::Display for DriftReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DriftReason::EstimatedFpHigh { estimated, limit } => write!(
                f,
                "estimated false-positive rate {estimated:.3e} is above {limit:.3e}"
            ),
            DriftReason::EstimatedFpLow { estimated, limit } => write!(
                f,
                "estimated false-positive rate {estimated:.3e} is below {limit:.3e}: the filter is oversized"
            ),
            DriftReason::ObservedFpHigh {
                observed,
                trials,
                limit,
            } => write!(
                f,
                "observed false-positive rate {observed:.3e} over {trials} absent lookups is above {limit:.3e}"
            ),
            DriftReason::SaturatedCounters { saturated, limit } => {
                write!(f, "{saturated} saturated counters (more than {limit})")
            }
            DriftReason::Overloaded { live, capacity } => {
                write!(f, "{live} live keys against a capacity of {capacity}")
            }
            DriftReason::ParametersChanged => {
                write!(f, "target false-positive rate or expected size changed")
            }
            DriftReason::Damaged { reason } => {
                write!(f, "lost writes it had acknowledged ({reason}): answers \"maybe\" for every key")
            }
        }
    }
}

/// When to regenerate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DriftPolicy {
    /// Lower edge of the band, as a fraction of the target (default 0.75).
    pub band_low: f64,
    /// Upper edge of the band, as a fraction of the target (default 1.25).
    pub band_high: f64,
    /// Standard deviations by which the observed false-positive count must
    /// exceed the band before it counts (default 4).
    pub z: f64,
    /// Saturated counters tolerated (default 0: one stuck counter already means
    /// the table left the regime the 4-bit bound assumes).
    pub max_saturated: u64,
    /// Live keys tolerated as a multiple of capacity before the table counts
    /// as overloaded regardless of the estimate (default 1.5).
    pub max_load: f64,
    /// Whether an oversized filter (estimate below the band) triggers
    /// regeneration (default false: a table still filling up towards its
    /// expected size has an estimate far below the band too, and the signals
    /// cannot tell it from a table emptied by deletes; enable it for tables
    /// known to be full, or shrink them explicitly).
    pub shrink: bool,
}

impl Default for DriftPolicy {
    fn default() -> Self {
        DriftPolicy {
            band_low: 0.75,
            band_high: 1.25,
            z: 4.0,
            max_saturated: 0,
            max_load: 1.5,
            shrink: false,
        }
    }
}

/// The health figures of one table at one moment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HealthSignals {
    /// The table's target false-positive rate.
    pub target_fp: f64,
    /// The rate estimated from the bit filter's fill.
    pub estimated_fp: f64,
    /// False positives and trials reported by the host in the window.
    pub observed: ObservedCounts,
    /// Counters stuck at 15.
    pub saturated_counters: u64,
    /// Keys inserted minus keys removed.
    pub live_keys: u64,
    /// Keys the current generation was sized for.
    pub capacity: u64,
    /// Whether the target or the expected size changed since the last build.
    pub parameters_changed: bool,
}

/// The policy's verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Assessment {
    /// Every reason found, most urgent first; empty when healthy.
    pub reasons: Vec<DriftReason>,
}

impl Assessment {
    /// Whether the table should be regenerated.
    pub fn needs_regeneration(&self) -> bool {
        !self.reasons.is_empty()
    }
    /// The most urgent reason.
    pub fn reason(&self) -> Option<&DriftReason> {
        self.reasons.first()
    }
}

impl DriftPolicy {
    /// Decides whether the table should be regenerated, and why.
    ///
    /// # Examples
    /// ```
    /// use filterstore::{DriftPolicy, DriftReason, HealthSignals, ObservedCounts};
    /// let healthy = HealthSignals {
    ///     target_fp: 0.01,
    ///     estimated_fp: 0.011,
    ///     observed: ObservedCounts { false_positives: 110, trials: 10_000 },
    ///     saturated_counters: 0,
    ///     live_keys: 1_000,
    ///     capacity: 1_000,
    ///     parameters_changed: false,
    /// };
    /// let policy = DriftPolicy::default(); // band 75%..125% of the target
    /// assert!(!policy.assess(&healthy).needs_regeneration());
    /// // 1.3% is above 125% of 1%.
    /// let drifted = HealthSignals { estimated_fp: 0.013, ..healthy };
    /// let verdict = policy.assess(&drifted);
    /// assert!(matches!(
    ///     verdict.reason(),
    ///     Some(DriftReason::EstimatedFpHigh { limit, .. }) if (*limit - 0.0125).abs() < 1e-12
    /// ));
    /// ```
    pub fn assess(&self, s: &HealthSignals) -> Assessment {
        let mut reasons = Vec::new();
        if s.parameters_changed {
            reasons.push(DriftReason::ParametersChanged);
        }
        if s.saturated_counters > self.max_saturated {
            reasons.push(DriftReason::SaturatedCounters {
                saturated: s.saturated_counters,
                limit: self.max_saturated,
            });
        }
        let high = s.target_fp * self.band_high;
        let low = s.target_fp * self.band_low;
        if s.estimated_fp > high {
            reasons.push(DriftReason::EstimatedFpHigh {
                estimated: s.estimated_fp,
                limit: high,
            });
        }
        let trials = s.observed.trials;
        if trials > 0 {
            // Significant only if the count exceeds the band's expectation by
            // z binomial standard deviations.
            let expected = trials as f64 * high;
            let sigma = (expected * (1.0 - high)).sqrt();
            if (s.observed.false_positives as f64) > expected + self.z * sigma.max(1.0) {
                reasons.push(DriftReason::ObservedFpHigh {
                    observed: s.observed.rate(),
                    trials,
                    limit: high,
                });
            }
        }
        if s.capacity > 0 && s.live_keys as f64 > s.capacity as f64 * self.max_load {
            reasons.push(DriftReason::Overloaded {
                live: s.live_keys,
                capacity: s.capacity,
            });
        }
        if self.shrink && s.estimated_fp < low && s.estimated_fp > 0.0 && s.live_keys > 0 {
            reasons.push(DriftReason::EstimatedFpLow {
                estimated: s.estimated_fp,
                limit: low,
            });
        }
        Assessment { reasons }
    }
}

/// False positives and trials of lookups of absent keys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObservedCounts {
    /// Lookups answered "maybe" whose slow read found nothing.
    pub false_positives: u64,
    /// All lookups of keys that turned out to be absent ("maybe" or "absent").
    pub trials: u64,
}

impl ObservedCounts {
    /// The observed rate, 0 when there were no trials.
    pub fn rate(&self) -> f64 {
        if self.trials == 0 {
            0.0
        } else {
            self.false_positives as f64 / self.trials as f64
        }
    }
}

/// Lock-free sliding-window counter of the host's feedback.
///
/// Two epochs: the current one collects reports; when it holds `window`
/// trials it becomes the previous one and a new epoch starts. The reported
/// counts are current + previous, so they always cover between `window` and
/// `2·window` recent trials once warmed up, and old behaviour (before a
/// regeneration, say) fades out within two windows.
#[derive(Debug)]
pub struct ObservedFp {
    window: u64,
    cur_fp: AtomicU64,
    cur_trials: AtomicU64,
    prev_fp: AtomicU64,
    prev_trials: AtomicU64,
}

impl ObservedFp {
    /// A counter whose window holds `window` trials (at least 1).
    pub fn new(window: u64) -> Self {
        ObservedFp {
            window: window.max(1),
            cur_fp: AtomicU64::new(0),
            cur_trials: AtomicU64::new(0),
            prev_fp: AtomicU64::new(0),
            prev_trials: AtomicU64::new(0),
        }
    }

    /// Records one lookup of a key that turned out to be absent: `filter_said_maybe`
    /// is what the filter answered (true = a false positive).
    pub fn record_absent(&self, filter_said_maybe: bool) {
        if filter_said_maybe {
            self.cur_fp.fetch_add(1, Ordering::Relaxed);
        }
        let t = self.cur_trials.fetch_add(1, Ordering::Relaxed) + 1;
        if t >= self.window {
            // One thread wins the rotation; the others keep counting into the
            // (new) current epoch. Counts racing the swap may land in either
            // epoch: the window is approximate, the totals are not lost.
            if self
                .cur_trials
                .compare_exchange(t, 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                let fp = self.cur_fp.swap(0, Ordering::Relaxed);
                self.prev_fp.store(fp, Ordering::Relaxed);
                self.prev_trials.store(t, Ordering::Relaxed);
            }
        }
    }

    /// The counts over the window.
    pub fn counts(&self) -> ObservedCounts {
        ObservedCounts {
            false_positives: self.cur_fp.load(Ordering::Relaxed)
                + self.prev_fp.load(Ordering::Relaxed),
            trials: self.cur_trials.load(Ordering::Relaxed)
                + self.prev_trials.load(Ordering::Relaxed),
        }
    }

    /// Forgets everything (after a regeneration).
    pub fn reset(&self) {
        for a in [
            &self.cur_fp,
            &self.cur_trials,
            &self.prev_fp,
            &self.prev_trials,
        ] {
            a.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn healthy() -> HealthSignals {
        HealthSignals {
            target_fp: 0.01,
            estimated_fp: 0.0095,
            observed: ObservedCounts::default(),
            saturated_counters: 0,
            live_keys: 1000,
            capacity: 1000,
            parameters_changed: false,
        }
    }

    #[test]
    fn healthy_table_needs_nothing() {
        let a = DriftPolicy::default().assess(&healthy());
        assert!(!a.needs_regeneration(), "{a:?}");
    }

    #[test]
    fn a_table_filling_up_is_not_flagged_by_default() {
        // A quarter full: the estimate is far below the band, as after mass
        // deletes; only an opted-in shrink policy reports it.
        let s = HealthSignals {
            estimated_fp: 1e-5,
            live_keys: 250,
            ..healthy()
        };
        assert!(!DriftPolicy::default().assess(&s).needs_regeneration());
        let shrink = DriftPolicy {
            shrink: true,
            ..DriftPolicy::default()
        };
        assert!(shrink.assess(&s).needs_regeneration());
    }

    type Case = (HealthSignals, fn(&DriftReason) -> bool);

    #[test]
    fn each_signal_names_its_reason() {
        let p = DriftPolicy {
            shrink: true,
            ..DriftPolicy::default()
        };
        let cases: Vec<Case> = vec![
            (
                HealthSignals {
                    estimated_fp: 0.02,
                    ..healthy()
                },
                |r| matches!(r, DriftReason::EstimatedFpHigh { .. }),
            ),
            (
                HealthSignals {
                    estimated_fp: 0.001,
                    ..healthy()
                },
                |r| matches!(r, DriftReason::EstimatedFpLow { .. }),
            ),
            (
                HealthSignals {
                    saturated_counters: 3,
                    ..healthy()
                },
                |r| matches!(r, DriftReason::SaturatedCounters { .. }),
            ),
            (
                HealthSignals {
                    live_keys: 2000,
                    ..healthy()
                },
                |r| matches!(r, DriftReason::Overloaded { .. }),
            ),
            (
                HealthSignals {
                    parameters_changed: true,
                    ..healthy()
                },
                |r| matches!(r, DriftReason::ParametersChanged),
            ),
            (
                HealthSignals {
                    observed: ObservedCounts {
                        false_positives: 300,
                        trials: 10_000,
                    },
                    ..healthy()
                },
                |r| matches!(r, DriftReason::ObservedFpHigh { .. }),
            ),
        ];
        for (signals, is_expected) in cases {
            let a = p.assess(&signals);
            assert!(a.needs_regeneration(), "{signals:?}");
            assert!(a.reasons.iter().any(is_expected), "{a:?}");
        }
    }

    #[test]
    fn observed_rate_needs_significant_evidence() {
        let p = DriftPolicy::default();
        // 3 false positives in 100 trials is 3% against a 1.25% limit, but the
        // band expects 1.25 ± 1.1: not significant at 4σ.
        let s = HealthSignals {
            observed: ObservedCounts {
                false_positives: 3,
                trials: 100,
            },
            ..healthy()
        };
        assert!(!p.assess(&s).needs_regeneration());
    }

    #[test]
    fn window_rotates_and_keeps_recent_counts() {
        let w = ObservedFp::new(100);
        for i in 0..250 {
            w.record_absent(i % 10 == 0);
        }
        let c = w.counts();
        // Epochs of 100: previous holds trials 100..200, current 200..250.
        assert_eq!(c.trials, 150);
        assert_eq!(c.false_positives, 15);
        assert!((c.rate() - 0.1).abs() < 1e-12);
        w.reset();
        assert_eq!(w.counts(), ObservedCounts::default());
    }
}
