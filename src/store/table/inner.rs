//! The shared state of an open table ([`TableInner`]): what every
//! [`Table`](super::Table) handle of it reaches, and what outlives a
//! generation swap.

use super::generation::Generation;
use crate::filter::drift::ObservedFp;
use crate::filter::params::FilterParams;
use crate::store::batch::Durability;
use crate::store::catalog::TableMeta;
use crate::store::disk::log::{LogOp, MAX_RECORD_OPS};
use crate::store::error::StoreError;
use crate::store::shared::Shared;
use arc_swap::ArcSwap;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The automatic health check of a table (`regen::run_hook`); a failed
/// assessment (an I/O error) is not the writer's error: the next interval
/// tries again, so it returns nothing.
pub(crate) type HealthCheck = fn(&Arc<TableInner>);

/// The shared state of one open table: the generation in force, swapped
/// atomically by a regeneration ([`arc_swap::ArcSwap`]: a lookup loads the
/// pointer without a lock and never waits), and what outlives generations.
pub(crate) struct TableInner {
    /// The generation in force.
    pub(crate) gen: ArcSwap<Generation>,
    /// The table's catalog record in force (`set` changes the target and the
    /// expected size without building a new generation).
    pub(crate) meta: Mutex<TableMeta>,
    /// What the store's tables share (catalog, its lock, the policy and
    /// the health callback).
    pub(crate) shared: Arc<Shared>,
    /// The automatic health check, run when the check interval is crossed
    /// (given by the store: the regeneration layer above tables).
    check: HealthCheck,
    /// Feedback of the host about lookups of absent keys.
    pub(crate) observed: ObservedFp,
    /// One regeneration at a time per table.
    pub(crate) regen_lock: Mutex<()>,
    /// Writes and feedback reports since the last automatic health check.
    pub(crate) since_check: AtomicU64,
}

impl TableInner {
    /// Opens a table in its generation in force.
    pub(crate) fn load(
        shared: &Arc<Shared>,
        meta: TableMeta,
        check: HealthCheck,
    ) -> Result<TableInner, StoreError> {
        let gen = Generation::load(shared, meta.clone())?;
        Ok(TableInner::new(shared, meta, gen, check))
    }

    /// The shared state of a table whose generation in force is `gen`.
    pub(crate) fn new(
        shared: &Arc<Shared>,
        meta: TableMeta,
        gen: Generation,
        check: HealthCheck,
    ) -> TableInner {
        TableInner {
            gen: ArcSwap::from_pointee(gen),
            meta: Mutex::new(meta),
            shared: Arc::clone(shared),
            check,
            observed: ObservedFp::new(OBSERVED_WINDOW),
            regen_lock: Mutex::new(()),
            since_check: AtomicU64::new(0),
        }
    }

    /// Marks the table dropped; afterwards no write touches its trees. Called
    /// under the catalog lock, as every generation swap is, so the generation
    /// marked is the last one.
    pub(crate) fn mark_dropped(&self) {
        self.gen.load().mark_dropped();
    }

    /// Makes every write to the generation in force durable.
    pub(crate) fn flush(&self) -> Result<(), StoreError> {
        self.gen.load().flush()
    }

    /// Applies the operations `ops_for` derives from the keys under the
    /// parameters of the generation in force. A generation is retired at
    /// most once per regeneration, so the loop turns at most once per
    /// concurrent regeneration; the operations are derived again when the
    /// new generation hashes differently (a layout change,
    /// `regen::relayout`: a key hashed for the old one would land on other
    /// positions in the new one).
    pub(super) fn apply_ops<O: AsRef<[LogOp]>>(
        self: &Arc<Self>,
        ops_for: impl Fn(&FilterParams) -> O,
        durability: Durability,
    ) -> Result<(), StoreError> {
        let mut g = self.gen.load_full();
        let mut ops = ops_for(&g.params);
        let len = ops.as_ref().len();
        if len > MAX_RECORD_OPS {
            return Err(StoreError::BatchTooLarge {
                len,
                max: MAX_RECORD_OPS,
            });
        }
        while !g.apply_ops(ops.as_ref(), durability)? {
            let hashed_for = g.params.hash();
            g = self.gen.load_full();
            if g.params.hash() != hashed_for {
                ops = ops_for(&g.params);
            }
        }
        self.count_for_check(len as u64);
        Ok(())
    }

    /// Counts writes and reports towards the next automatic health check,
    /// and runs it (outside any lock) when the interval is crossed.
    pub(crate) fn count_for_check(self: &Arc<Self>, n: u64) {
        // An atomic, not the hook's mutex: every write of every table passes here.
        if !self.shared.has_regen_hook.load(Ordering::Relaxed) {
            return;
        }
        let before = self.since_check.fetch_add(n, Ordering::Relaxed);
        let interval = self.check_interval();
        if before + n >= interval
            && self
                .since_check
                .compare_exchange(before + n, 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            // A failed assessment (an I/O error) is not the writer's error:
            // the next interval tries again.
            (self.check)(self);
        }
    }

    /// Operations between automatic health checks: a check reads the whole
    /// bit filter (`m/8` bytes) and folds the log, so it is spread over at
    /// least an eighth of the capacity (and at least 4,096 operations):
    /// amortised, a few bytes read per write.
    fn check_interval(&self) -> u64 {
        (self.meta.lock().expected_keys / 8).max(4096)
    }
}

/// Trials per epoch of the observed false-positive window (see
/// [`ObservedFp`]): at a 1% target, 65,536 trials expect 655 false positives
/// (σ ≈ 25), enough to tell 1.25% from 1% by 10σ.
pub(super) const OBSERVED_WINDOW: u64 = 1 << 16;
