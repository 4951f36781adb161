//! The rule: which join sides get a runtime filter, and why.
//!
//! `BloomRuntimeFilterRule` visits every `HashJoinExec` of the final,
//! distributed plan, children first, and decides for each side separately.
//! A side may be filtered only when dropping one of its rows whose key is
//! not on the other side can never change the join's output:
//!
//! | join type | left side | right side |
//! |---|---|---|
//! | `Inner` | filtered by the right's keys | filtered by the left's keys |
//! | `LeftSemi`, `RightSemi` | yes | yes (a row of either side without a partner is never output) |
//! | `Left` (outer) | never (preserved) | yes |
//! | `Right` (outer) | yes | never (preserved) |
//! | `Full` | never | never |
//! | `LeftAnti`, `RightAnti`, `LeftMark`, `RightMark`, null-aware joins | never | never (a false positive would keep a row out of the answer that must be in it, or change a mark) |
//!
//! A broadcast (`CollectLeft`) join and a single-node plan are never
//! filtered: there DataFusion's own dynamic filter prunes the probe side
//! exactly, in the same process. Keys are the join's `on` expressions (its
//! coercions included), on both sides; a key of a type without an encoding
//! ([`crate::rowkey`]), or whose two sides encode differently, is skipped.
//! With `NullEqualsNull`, rows with a null key pass the filter.
//!
//! Then statistics decide where it pays (each threshold is in
//! [`super::RuntimeFilterConfig`]): the side must cross a network shuffle
//! below the join (the filter goes below it, [`super::lineage`]), be large,
//! its creation side small, and the filter selective; after the creation
//! side has run, the filter's own key count and fill re-take the last
//! decision before anything is shipped.

use super::build::{creation_side_refusal, merge_partials, run_distributed, BloomBuildExec};
use super::lineage::{reach, Keys, Point};
use super::place::{key_types, place, plan_params, points_rows, rows, source_rows};
use super::report::{JoinDecision, RuntimeFilterReport, SkipReason, Verdict};
use super::RuntimeFilterConfig;
use datafusion::common::{JoinSide, NullEquality};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::SessionState;
use datafusion::logical_expr::JoinType;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::execution_plan::reset_plan_states;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::{ChildrenPropertiesMode, ExecutionPlan, ReplaceChildrenOptions};
use datafusion_distributed::{NetworkBoundaryExt, NetworkCoalesceExec};
use filterstore::{encode_message, BloomRead, CodecChoice};
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Instant;

/// The outcome for one side: the side's new subtree and the verdict, or why
/// not.
type Outcome = std::result::Result<(Arc<dyn ExecutionPlan>, Verdict), SkipReason>;

/// One join side being decided: filter `target` by the keys of `other`.
struct Candidate<'a> {
    join: &'a HashJoinExec,
    target: &'a Arc<dyn ExecutionPlan>,
    other: &'a Arc<dyn ExecutionPlan>,
    other_keys: Keys,
    points: Vec<Point>,
    /// Tasks of the stage the join runs in.
    tasks: usize,
    name: &'a str,
}

/// What statistics say of a candidate (the force mode may build without).
#[derive(Clone, Copy)]
struct Estimates {
    side_rows: u64,
    creation_rows: u64,
    source_rows: u64,
}

/// The physical rule (see the module documentation). It runs the creation
/// sides, so it is async and applied by
/// [`super::BloomRuntimeFilterPlanner`] to the plan datafusion-distributed
/// returns.
#[derive(Debug, Clone)]
pub struct BloomRuntimeFilterRule {
    config: RuntimeFilterConfig,
}

struct Ctx<'a> {
    rule: &'a BloomRuntimeFilterRule,
    state: &'a SessionState,
    report: parking_lot::Mutex<RuntimeFilterReport>,
    joins: std::sync::atomic::AtomicUsize,
}

impl BloomRuntimeFilterRule {
    /// A rule with these thresholds.
    pub fn new(config: RuntimeFilterConfig) -> Self {
        BloomRuntimeFilterRule { config }
    }

    /// The rule's name, as reports show it.
    pub fn name(&self) -> &str {
        "bloom_runtime_filters"
    }

    /// Places the filters that pay on `plan` (a `DistributedExec` or a
    /// single-node plan, which is returned unchanged).
    pub async fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        state: &SessionState,
    ) -> Result<(Arc<dyn ExecutionPlan>, RuntimeFilterReport)> {
        let ctx = Ctx {
            rule: self,
            state,
            report: parking_lot::Mutex::new(RuntimeFilterReport::default()),
            joins: std::sync::atomic::AtomicUsize::new(0),
        };
        if !plan.is::<datafusion_distributed::DistributedExec>() {
            ctx.skip_every_join(&plan, SkipReason::SingleNode)?;
            return Ok((plan, ctx.report.into_inner()));
        }
        let plan = rewrite(plan, &ctx, 1, false).await?;
        Ok((plan, ctx.report.into_inner()))
    }
}

/// Children first, then the node; `tasks` is the task count of the stage
/// the node runs in. Below a `ChildrenIsolatorUnionExec` a child runs in
/// fewer tasks than its stage, which the creation side could not reproduce:
/// joins there are skipped (`isolated`).
fn rewrite<'a>(
    node: Arc<dyn ExecutionPlan>,
    ctx: &'a Ctx<'a>,
    tasks: usize,
    isolated: bool,
) -> BoxFuture<'a, Result<Arc<dyn ExecutionPlan>>> {
    Box::pin(async move {
        let (child_tasks, child_isolated) = match node.as_network_boundary() {
            Some(b) => (b.input_stage().task_count(), false),
            None => (
                tasks,
                isolated || node.name() == "ChildrenIsolatorUnionExec",
            ),
        };
        let mut changed = false;
        let mut children = Vec::new();
        for c in node.children() {
            let new = rewrite(Arc::clone(c), ctx, child_tasks, child_isolated).await?;
            changed |= !Arc::ptr_eq(&new, c);
            children.push(new);
        }
        let node = if changed {
            let opts = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute);
            node.replace_children(children, opts)?
        } else {
            node
        };
        if node.is::<HashJoinExec>() {
            return ctx.join(node, tasks, isolated).await;
        }
        Ok(node)
    })
}

/// Whether `side` of a join of this type may be filtered, or why not.
pub fn side_allowed(join: &HashJoinExec, side: JoinSide) -> std::result::Result<(), SkipReason> {
    use JoinType::*;
    if join.null_aware {
        return Err(SkipReason::JoinType("null-aware join".into()));
    }
    let t = *join.join_type();
    let ok = match t {
        Inner | LeftSemi | RightSemi => true,
        Left => side == JoinSide::Right,
        Right => side == JoinSide::Left,
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(SkipReason::JoinType(format!(
            "a {t} join keeps this side's rows"
        )))
    }
}

fn label(join: &HashJoinExec, n: usize) -> String {
    let on: Vec<String> = join
        .on()
        .iter()
        .map(|(l, r)| format!("{l} = {r}"))
        .collect();
    format!("join #{n} {} on [{}]", join.join_type(), on.join(", "))
}

impl Ctx<'_> {
    fn push(&self, join: String, side: JoinSide, verdict: Verdict) {
        self.report.lock().decisions.push(JoinDecision {
            join,
            side,
            verdict,
        });
    }

    fn skip_every_join(&self, plan: &Arc<dyn ExecutionPlan>, reason: SkipReason) -> Result<()> {
        use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
        plan.apply(|node| {
            if let Some(j) = node.downcast_ref::<HashJoinExec>() {
                let n = self
                    .joins
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                    + 1;
                for side in [JoinSide::Left, JoinSide::Right] {
                    self.push(label(j, n), side, Verdict::Skipped(reason.clone()));
                }
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
        Ok(())
    }

    async fn join(
        &self,
        node: Arc<dyn ExecutionPlan>,
        tasks: usize,
        isolated: bool,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let Some(join) = node.downcast_ref::<HashJoinExec>() else {
            return Ok(node);
        };
        let n = self
            .joins
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let name = label(join, n);
        let mut left = Arc::clone(join.left());
        let mut right = Arc::clone(join.right());
        for side in [JoinSide::Right, JoinSide::Left] {
            let (target, other) = match side {
                JoinSide::Left => (&left, &right),
                _ => (&right, &left),
            };
            let verdict = if isolated {
                Err(SkipReason::IsolatedUnion)
            } else {
                // Anything that fails while deciding or building leaves this
                // side as DataFusion planned it: a filter is an optimisation.
                match self.side(join, side, (target, other), tasks, &name).await {
                    Ok(v) => v,
                    Err(e) => Err(SkipReason::Failed(e.to_string())),
                }
            };
            match verdict {
                Ok((new, v)) => {
                    self.push(name.clone(), side, v);
                    if side == JoinSide::Left {
                        left = new;
                    } else {
                        right = new;
                    }
                }
                Err(reason) => self.push(name.clone(), side, Verdict::Skipped(reason)),
            }
        }
        if Arc::ptr_eq(&left, join.left()) && Arc::ptr_eq(&right, join.right()) {
            return Ok(node);
        }
        let opts = ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep);
        node.replace_children(vec![left, right], opts)
    }

    /// The static checks, the statistics, the build and the runtime check
    /// for filtering `target` by the keys of `other`.
    async fn side(
        &self,
        join: &HashJoinExec,
        side: JoinSide,
        (target, other): (&Arc<dyn ExecutionPlan>, &Arc<dyn ExecutionPlan>),
        tasks: usize,
        name: &str,
    ) -> Result<Outcome> {
        if let Err(r) = side_allowed(join, side) {
            return Ok(Err(r));
        }
        let (target_keys, other_keys): (Keys, Keys) = join
            .on()
            .iter()
            .map(|(l, r)| match side {
                JoinSide::Left => (Arc::clone(l), Arc::clone(r)),
                _ => (Arc::clone(r), Arc::clone(l)),
            })
            .unzip();
        if let Some(r) = static_refusal(join, (&target_keys, target), (&other_keys, other)) {
            return Ok(Err(r));
        }
        let found = reach(target, target_keys)?;
        let points: Vec<Point> = found.points.into_iter().filter(|p| p.depth > 0).collect();
        if points.is_empty() {
            return Ok(Err(SkipReason::NoShuffle(found.stops)));
        }
        let estimates = Estimates {
            side_rows: points_rows(target, &points).unwrap_or(0),
            creation_rows: rows(other).unwrap_or(0),
            source_rows: source_rows(other, &other_keys)?.unwrap_or(0),
        };
        if !self.rule.config.force {
            if let Some(r) = self.by_statistics(estimates) {
                return Ok(Err(r));
            }
        }
        let c = Candidate {
            join,
            target,
            other,
            other_keys,
            points,
            tasks,
            name,
        };
        self.build_and_place(&c, estimates).await
    }

    /// The decision from statistics, before anything runs.
    fn by_statistics(&self, e: Estimates) -> Option<SkipReason> {
        let cfg = &self.rule.config;
        if e.side_rows == 0 || e.creation_rows == 0 || e.source_rows == 0 {
            let what = "row counts of the side, its creation side or the key's source";
            return Some(SkipReason::NoStatistics(what.into()));
        }
        if e.side_rows < cfg.min_filtered_rows {
            return Some(SkipReason::SmallSide { rows: e.side_rows });
        }
        if e.creation_rows > cfg.max_creation_rows {
            return Some(SkipReason::LargeCreation {
                rows: e.creation_rows,
            });
        }
        let pass = pass_fraction(e.creation_rows as f64, e.source_rows, cfg.fp);
        (pass > cfg.max_pass_fraction).then_some(SkipReason::NotSelective { pass, built: false })
    }

    /// Runs the creation side, re-takes the decision on the built filter,
    /// and places it.
    async fn build_and_place(&self, c: &Candidate<'_>, e: Estimates) -> Result<Outcome> {
        let cfg = &self.rule.config;
        let params = plan_params(cfg, e.creation_rows)?;
        let started = Instant::now();
        // A copy with fresh execution state: the plan keeps `other` for the
        // join, and a node such as RepartitionExec runs only once.
        let fresh = reset_plan_states(Arc::clone(c.other))?;
        let build = BloomBuildExec::try_new(fresh, c.other_keys.clone(), params)?;
        let stage = NetworkCoalesceExec::try_new(Arc::new(build), c.tasks.max(1), 1)?;
        let head = Arc::new(CoalescePartitionsExec::new(Arc::new(stage)));
        let partials = run_distributed(self.state, head).await?;
        let filter = merge_partials(params, &partials, c.tasks.max(1))?;
        let creation_ms = started.elapsed().as_secs_f64() * 1e3;
        let keys = filter.estimate_len();
        let fp = filter.estimated_fp();
        let pass = pass_fraction(keys, e.source_rows, fp);
        if !cfg.force && pass > cfg.max_pass_fraction {
            return Ok(Err(SkipReason::NotSelective { pass, built: true }));
        }
        let message = encode_message(&filter, keys.round() as u64, 0, CodecChoice::Auto)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        let message = Arc::new(message);
        let nulls_pass = c.join.null_equality() == NullEquality::NullEqualsNull;
        let placed = place(c.target, &c.points, &message, nulls_pass, c.name)?;
        Ok(Ok((
            placed,
            Verdict::Applied {
                message_bytes: message.len(),
                keys,
                fp,
                pass,
                points: c.points.len(),
                side_rows: e.side_rows,
                creation_ms,
            },
        )))
    }
}

/// The share of a side's rows a filter of `keys` keys lets pass, when the
/// side's keys spread evenly over the `source` rows the keys come from (a
/// foreign key into the table the build side filters): the keys' share,
/// plus false positives among the rest. Unknown `source` (0) counts as all.
fn pass_fraction(keys: f64, source: u64, fp: f64) -> f64 {
    let s = if source == 0 {
        1.0
    } else {
        (keys / source as f64).min(1.0)
    };
    s + fp * (1.0 - s)
}

/// The checks that need no statistics: broadcast joins, key types, and a
/// creation side that could not be run again with the same keys.
fn static_refusal(
    join: &HashJoinExec,
    (target_keys, target): (&Keys, &Arc<dyn ExecutionPlan>),
    (other_keys, other): (&Keys, &Arc<dyn ExecutionPlan>),
) -> Option<SkipReason> {
    if *join.partition_mode() == PartitionMode::CollectLeft {
        return Some(SkipReason::Broadcast);
    }
    if let Err(r) = key_types(target_keys, target, other_keys, other) {
        return Some(r);
    }
    creation_side_refusal(other).map(SkipReason::CreationSide)
}
