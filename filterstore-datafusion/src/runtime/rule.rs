//! The rule: where runtime filters go in a distributed plan.
//!
//! `BloomRuntimeFilterRule` visits every join of the final, distributed
//! plan, children first. For each partitioned hash join it decides
//! ([`super::decide`]) whether the probe side gets a filter of the build
//! side's keys; if so it inserts a tap ([`super::tap::BloomTapExec`]) above
//! the build input and a filter node ([`super::exec::BloomFilterExec`]) at
//! each place the key's lineage reaches below the probe side's shuffle
//! ([`super::lineage`]), and registers the filter's meeting point on the
//! coordinator ([`super::rendezvous::Slot`]).
//!
//! Where it places none, the join's build side may get a filter of the
//! probe side's keys instead ([`super::reverse`]): the tap then goes above
//! the probe input, reading it ahead of the join, and the filter nodes on
//! the build side.
//!
//! Planning only inserts nodes and reads statistics: nothing runs until
//! the query does, and `EXPLAIN` runs nothing.

use super::config::RuntimeFilterConfig;
use super::decide::{decide, ProbePlan};
use super::exec::ProbeSpec;
use super::place::{capacity, likely_keys, plan_params, probe, tap};
use super::rendezvous::{new_filter_id, Slot};
use super::report::{FilterHandle, JoinDecision, RuntimeFilterReport, SkipReason, Verdict};
use super::reverse::decide_reverse;
use super::scope::{BloomQueryExec, ScopeCell};
use super::stats::Stats;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::JoinSide;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode, SortMergeJoinExec};
use datafusion::physical_plan::{ChildrenPropertiesMode, ExecutionPlan, ReplaceChildrenOptions};
use std::sync::Arc;
use std::time::Duration;

/// The physical rule (see the module documentation). Applied by
/// [`super::BloomRuntimeFilterPlanner`] to the plan datafusion-distributed
/// returns, where the shuffles are.
#[derive(Debug, Clone)]
pub struct BloomRuntimeFilterRule {
    config: RuntimeFilterConfig,
}

struct Walk<'a> {
    config: &'a RuntimeFilterConfig,
    report: RuntimeFilterReport,
    joins: usize,
    cell: Arc<ScopeCell>,
    slots: Vec<Arc<Slot>>,
    stats: Stats,
}

/// A plan with its filters placed, before [`BloomQueryExec`] goes on top.
pub struct Placed {
    /// The plan.
    pub plan: Arc<dyn ExecutionPlan>,
    /// Every decision.
    pub report: RuntimeFilterReport,
    /// The plan's execution scope, shared by its nodes.
    pub cell: Arc<ScopeCell>,
    /// The filters' meeting points.
    pub slots: Vec<Arc<Slot>>,
}

impl Placed {
    /// `top` (the plan, or a node above it such as an analyze node) under
    /// the [`BloomQueryExec`] that scopes each execution; the plan itself
    /// when no filter was placed.
    pub fn scoped(
        self,
        top: Arc<dyn ExecutionPlan>,
    ) -> (Arc<dyn ExecutionPlan>, RuntimeFilterReport) {
        if self.slots.is_empty() {
            return (top, self.report);
        }
        let exec = BloomQueryExec::new(top, self.cell, self.slots);
        (Arc::new(exec), self.report)
    }
}

impl BloomRuntimeFilterRule {
    /// A rule with these settings.
    pub fn new(config: RuntimeFilterConfig) -> Self {
        BloomRuntimeFilterRule { config }
    }

    /// The rule's name, as reports show it.
    pub fn name(&self) -> &str {
        "bloom_runtime_filters"
    }

    /// The settings.
    pub fn config(&self) -> &RuntimeFilterConfig {
        &self.config
    }

    /// Places the filters on `plan` (a `DistributedExec`; any other plan is
    /// single-node and returned unchanged), says why for every join side, and
    /// puts the plan under a [`BloomQueryExec`] when it has filters.
    pub fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
    ) -> Result<(Arc<dyn ExecutionPlan>, RuntimeFilterReport)> {
        let placed = self.place(plan)?;
        let plan = Arc::clone(&placed.plan);
        Ok(placed.scoped(plan))
    }

    /// [`Self::optimize`] without the scoping node on top.
    pub fn place(&self, plan: Arc<dyn ExecutionPlan>) -> Result<Placed> {
        let mut walk = Walk {
            config: &self.config,
            report: RuntimeFilterReport::default(),
            joins: 0,
            cell: Arc::default(),
            slots: Vec::new(),
            stats: Stats::default(),
        };
        let plan = if plan.is::<datafusion_distributed::DistributedExec>() {
            walk.rewrite(plan, false)?
        } else {
            walk.skip_every_join(&plan, SkipReason::SingleNode)?;
            plan
        };
        Ok(Placed {
            plan,
            report: walk.report,
            cell: walk.cell,
            slots: walk.slots,
        })
    }
}

/// A join's label in plans and reports: number in plan order, type, keys.
fn label(join: &HashJoinExec, n: usize) -> String {
    let on: Vec<String> = join
        .on()
        .iter()
        .map(|(l, r)| format!("{l} = {r}"))
        .collect();
    format!("join #{n} {} on [{}]", join.join_type(), on.join(", "))
}

impl Walk<'_> {
    fn push(&mut self, join: &str, side: JoinSide, verdict: Verdict) {
        self.report.decisions.push(JoinDecision {
            join: join.to_string(),
            side,
            verdict,
        });
    }

    fn skip_both(&mut self, join: &str, reason: SkipReason) {
        self.push(join, JoinSide::Left, Verdict::Skipped(reason.clone()));
        self.push(join, JoinSide::Right, Verdict::Skipped(reason));
    }

    fn skip_every_join(&mut self, plan: &Arc<dyn ExecutionPlan>, reason: SkipReason) -> Result<()> {
        let mut labels = Vec::new();
        let mut n = self.joins;
        plan.apply(|node| {
            if let Some(j) = node.downcast_ref::<HashJoinExec>() {
                n += 1;
                labels.push(label(j, n));
            } else if node.is::<SortMergeJoinExec>() {
                n += 1;
                labels.push(format!("join #{n} (sort-merge)"));
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
        self.joins = n;
        for l in labels {
            self.skip_both(&l, reason.clone());
        }
        Ok(())
    }

    /// Children first, then the node. Below a `ChildrenIsolatorUnionExec`
    /// a join runs in fewer tasks than its stage: joins there are skipped.
    fn rewrite(
        &mut self,
        node: Arc<dyn ExecutionPlan>,
        isolated: bool,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let isolated = isolated || node.name() == "ChildrenIsolatorUnionExec";
        let node = self.rewrite_children(node, isolated)?;
        if node.is::<SortMergeJoinExec>() {
            self.joins += 1;
            let l = format!("join #{} (sort-merge)", self.joins);
            self.skip_both(&l, SkipReason::SortMerge);
            return Ok(node);
        }
        let Some(join) = node.downcast_ref::<HashJoinExec>() else {
            return Ok(node);
        };
        self.joins += 1;
        let name = label(join, self.joins);
        if isolated {
            self.skip_both(&name, SkipReason::IsolatedUnion);
            return Ok(node);
        }
        let Some((plan, side, other)) = self.choose(join, &name) else {
            return Ok(node);
        };
        // Anything that fails while placing leaves the join as planned.
        let (new_join, verdict) = match self.place(&node, join, &plan, (&name, side)) {
            Ok(placed) => placed,
            Err(e) => (node, Verdict::Skipped(SkipReason::Failed(e.to_string()))),
        };
        let other = Verdict::Skipped(other);
        let (left, right) = match side {
            JoinSide::Left => (verdict, other),
            _ => (other, verdict),
        };
        self.push(&name, JoinSide::Left, left);
        self.push(&name, JoinSide::Right, right);
        Ok(new_join)
    }

    /// The filter to place on `join`, the side it filters, and why the
    /// other side gets none; `None` (both sides' reasons pushed) when
    /// neither side gets one. A filter of the build side's keys on the probe
    /// side where one is allowed and may pay; else one of the probe side's
    /// keys on the build side ([`super::reverse`]), which is also preferred
    /// where the build side holds every key of its table and statistics
    /// cannot tell whether the probe key lies within them.
    fn choose(
        &mut self,
        join: &HashJoinExec,
        name: &str,
    ) -> Option<(ProbePlan, JoinSide, SkipReason)> {
        let failed = |e: DataFusionError| Err(SkipReason::Failed(e.to_string()));
        let reverse = |w: &Self| decide_reverse(join, w.config, &w.stats).unwrap_or_else(failed);
        match decide(join, self.config, &self.stats).unwrap_or_else(failed) {
            Ok(plan) if plan.whole_build && !self.config.force => match reverse(self) {
                Ok(r) => Some((r, JoinSide::Left, SkipReason::WholeBuildSide)),
                Err(_) => Some((plan, JoinSide::Right, SkipReason::BuildSide)),
            },
            Ok(plan) => {
                let build = if *join.partition_mode() == PartitionMode::CollectLeft {
                    SkipReason::Broadcast
                } else {
                    SkipReason::BuildSide
                };
                Some((plan, JoinSide::Right, build))
            }
            Err(reason) => match reverse(self) {
                Ok(r) => Some((r, JoinSide::Left, reason)),
                Err(left) => {
                    self.push(name, JoinSide::Left, Verdict::Skipped(left));
                    self.push(name, JoinSide::Right, Verdict::Skipped(reason));
                    None
                }
            },
        }
    }

    /// `node` over its children rewritten (itself when none changed).
    fn rewrite_children(
        &mut self,
        node: Arc<dyn ExecutionPlan>,
        isolated: bool,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let mut changed = false;
        let mut children = Vec::new();
        for c in node.children() {
            let new = self.rewrite(Arc::clone(c), isolated)?;
            changed |= !Arc::ptr_eq(&new, c);
            children.push(new);
        }
        if !changed {
            return Ok(node);
        }
        // The children changed only by nodes that keep their input's
        // properties (taps and filters): the node's stay as they are, and
        // recomputing them (equivalences, orderings) would be most of the
        // rule's cost.
        let opts = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep);
        node.replace_children(children, opts)
    }

    /// The filter of `plan` on `join`: on its probe side (`side` right), or
    /// on its build side (`side` left, a reverse filter whose tap reads the
    /// probe side ahead).
    fn place(
        &mut self,
        node: &Arc<dyn ExecutionPlan>,
        join: &HashJoinExec,
        plan: &ProbePlan,
        (name, side): (&str, JoinSide),
    ) -> Result<(Arc<dyn ExecutionPlan>, Verdict)> {
        let cfg = self.config;
        let (source, build) = (plan.build_source_rows, plan.build_rows);
        let params = plan_params(cfg, capacity(source, build), likely_keys(source, build))?;
        let slot = Slot::register(
            new_filter_id(),
            params,
            cfg.slot_policy(plan.probe_distinct),
        );
        let spec = self.probe_spec(&slot, plan, name);
        let points: Vec<_> = plan.points.iter().cloned().enumerate().collect();
        let reverse = side == JoinSide::Left;
        let (probed, tapped) = if reverse {
            (join.left(), join.right())
        } else {
            (join.right(), join.left())
        };
        // A reverse filter comes when the probe side has been read: its
        // build side's scans open at once, and prune only the files they
        // open after it came.
        let wait = cfg
            .scan_wait()
            .map(|w| if reverse { Duration::ZERO } else { w });
        let (probed, scans) = probe(probed, &points, &spec, wait)?;
        let ahead = if reverse { cfg.read_ahead_bytes } else { 0 };
        let keys = plan.build_keys.clone();
        let tapped = tap(tapped, keys, &slot, (cfg, &self.cell), (name, ahead))?;
        let children = if reverse {
            vec![probed, tapped]
        } else {
            vec![tapped, probed]
        };
        let opts = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep);
        let new_join = Arc::clone(node).replace_children(children, opts)?;
        self.slots.push(Arc::clone(&slot));
        let verdict = Verdict::Placed {
            points: plan.points.len(),
            scans,
            probe_rows: plan.probe_rows,
            build_rows: plan.build_rows,
            pass: plan.pass,
            m: params.m(),
            k: params.k(),
            filter: FilterHandle::new(slot),
        };
        Ok((new_join, verdict))
    }

    /// What the probes of `slot`'s filter, named `name`, are built from
    /// (its first point; [`probe`] numbers the others).
    fn probe_spec(&self, slot: &Slot, plan: &ProbePlan, name: &str) -> ProbeSpec {
        ProbeSpec {
            filter: slot.id(),
            point: 0,
            params: *slot.params(),
            nulls_pass: plan.nulls_pass,
            label: name.to_string(),
            policy: self.config.probe_policy(),
            rendezvous: self.config.rendezvous.clone(),
            scope: Arc::clone(&self.cell),
        }
    }
}
