//! The health of a table (its drift signals and the policy's verdict), the
//! host's feedback, parameter changes, and the automatic health check.

use super::{current_record, write_record, HealthReport};
use crate::filter::drift::{DriftPolicy, DriftReason, HealthSignals, ObservedCounts};
use crate::filter::params::FilterParams;
use crate::store::catalog::TableMeta;
use crate::store::error::StoreError;
use crate::store::open::FilterStore;
use crate::store::table::{Table, TableInner};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Whether `meta`'s `m` and `k` are not what its target and expected size
/// give: `set_params` changed them since the generation was built.
pub(super) fn parameters_changed(meta: &TableMeta, params: &FilterParams) -> bool {
    match FilterParams::for_capacity(
        meta.expected_keys,
        meta.target_fp,
        params.layout(),
        params.hash(),
    ) {
        Ok(p) => p.m() != params.m() || p.k() != params.k(),
        Err(_) => true,
    }
}

impl Table {
    /// Reports the outcome of one lookup whose slow read in the host
    /// database has finished: `filter_said_maybe` is what the filter
    /// answered, `key_was_present` what the read found. Lookups of absent
    /// keys are the trials of the observed false-positive rate (a "maybe"
    /// among them is a false positive, an "absent" a true negative); lookups
    /// of present keys say nothing about it and are ignored. Lock-free.
    pub fn report_lookup(&self, filter_said_maybe: bool, key_was_present: bool) {
        if !key_was_present {
            self.inner.observed.record_absent(filter_said_maybe);
            self.inner.count_for_check(1);
        }
    }

    /// [`report_lookup`](Table::report_lookup) of `trials` lookups of keys
    /// that were absent, `false_positives` of which the filter answered
    /// "maybe": the guard reports its reads in groups.
    pub(crate) fn report_absent_many(&self, false_positives: u64, trials: u64) {
        self.inner
            .observed
            .record_absent_many(false_positives, trials);
        self.inner.count_for_check(trials);
    }

    /// The observed false positives and trials over the window.
    pub fn observed_fp(&self) -> ObservedCounts {
        self.inner.observed.counts()
    }

    /// Health signals and the verdict of `policy`. Folds the log (for an
    /// exact count of saturated counters) and reads the bit filter.
    pub fn health_with(&self, policy: &DriftPolicy) -> Result<HealthReport, StoreError> {
        let stats = self.stats()?;
        let meta = self.meta();
        let signals = HealthSignals {
            target_fp: meta.target_fp,
            estimated_fp: stats.estimated_fp,
            observed: self.observed_fp(),
            saturated_counters: stats.saturated_counters,
            live_keys: stats.live_keys,
            capacity: self.current().meta.expected_keys,
            parameters_changed: parameters_changed(&meta, &self.params()),
        };
        let mut assessment = policy.assess(&signals);
        if let Some(reason) = &self.current().damaged {
            let reason = reason.clone();
            assessment
                .reasons
                .insert(0, DriftReason::Damaged { reason });
        }
        Ok(HealthReport {
            assessment,
            signals,
        })
    }

    /// [`health_with`](Table::health_with) the store's policy
    /// ([`FilterStore::set_drift_policy`], default [`DriftPolicy::default`]).
    pub fn health(&self) -> Result<HealthReport, StoreError> {
        let policy = *self.inner.shared.policy.lock();
        self.health_with(&policy)
    }

    /// Whether the store's policy says the table should be regenerated.
    pub fn needs_regeneration(&self) -> Result<bool, StoreError> {
        Ok(self.health()?.needs_regeneration())
    }

    /// Changes the table's target false-positive rate and/or expected size
    /// (one durable catalog write). The filter is not rebuilt: the table is
    /// marked for regeneration ([`DriftReason::ParametersChanged`]) until
    /// [`regenerate`](Table::regenerate) builds one for the new figures.
    pub fn set_params(
        &self,
        expected_keys: Option<u64>,
        target_fp: Option<f64>,
    ) -> Result<(), StoreError> {
        let shared = &self.inner.shared;
        shared.check_writable()?;
        let mut catalog = shared.catalog.lock();
        let mut meta = current_record(&catalog, &self.meta())?;
        meta.expected_keys = expected_keys.unwrap_or(meta.expected_keys);
        meta.target_fp = target_fp.unwrap_or(meta.target_fp);
        // Validates the pair (the next regeneration sizes with it).
        FilterParams::for_capacity(
            meta.expected_keys,
            meta.target_fp,
            self.params().layout(),
            self.params().hash(),
        )?;
        write_record(shared, &mut catalog, &meta)?;
        *self.inner.meta.lock() = meta;
        Ok(())
    }
}

/// The automatic health check of one table: invokes the store's callback if
/// the table needs regeneration. Returns the reason found.
pub(crate) fn run_hook(inner: &Arc<TableInner>) {
    // A failed assessment (an I/O error) is not the writer's error: the
    // next interval tries again.
    let _ = assess_and_call(inner);
}

/// The health check of [`run_hook`]: the reason the hook was called with.
fn assess_and_call(inner: &Arc<TableInner>) -> Result<Option<DriftReason>, StoreError> {
    let Some(hook) = inner.shared.regen_hook.lock().clone() else {
        return Ok(None);
    };
    let table = Table::new(Arc::clone(inner));
    let report = table.health()?;
    let reason = report.reason().cloned();
    if let Some(r) = &reason {
        hook(table.name(), r);
    }
    Ok(reason)
}

impl FilterStore {
    /// Registers `callback`, invoked with a table's name and the most urgent
    /// reason when an automatic health check finds that the table needs
    /// regeneration. Checks run after every `max(4096, expected/8)` writes
    /// or feedback reports of a table (never on the read path), on the
    /// thread that crossed the interval, outside any lock of the table: the
    /// callback may call [`Table::regenerate`] itself, or hand the work to
    /// another thread. [`check_health`](FilterStore::check_health) runs the
    /// checks on demand. Replaces any earlier callback.
    pub fn on_needs_regeneration(
        &self,
        callback: impl Fn(&str, &DriftReason) + Send + Sync + 'static,
    ) {
        *self.inner.shared.regen_hook.lock() = Some(Arc::new(callback));
        self.inner
            .shared
            .has_regen_hook
            .store(true, Ordering::Release);
    }

    /// The policy of [`Table::health`] for every table of this store.
    pub fn set_drift_policy(&self, policy: DriftPolicy) {
        *self.inner.shared.policy.lock() = policy;
    }

    /// Assesses every open table now, invoking the callback of
    /// [`on_needs_regeneration`](FilterStore::on_needs_regeneration) for each
    /// that needs regeneration; returns those tables with their reasons.
    pub fn check_health(&self) -> Result<Vec<(String, DriftReason)>, StoreError> {
        let open: Vec<Arc<TableInner>> = self
            .inner
            .tables
            .lock()
            .values()
            .filter_map(std::sync::Weak::upgrade)
            .collect();
        let hook = self.inner.shared.regen_hook.lock().clone();
        let mut found = Vec::new();
        for inner in open {
            let table = Table::new(inner);
            if let Some(r) = table.health()?.reason().cloned() {
                if let Some(h) = &hook {
                    h(table.name(), &r);
                }
                found.push((table.name().to_string(), r));
            }
        }
        Ok(found)
    }
}
