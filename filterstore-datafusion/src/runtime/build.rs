//! The creation side: a filter of the keys one join side produces, built
//! from that side's own subtree of the distributed plan.
//!
//! Spark's shape: the subtree is run once more, as its own distributed
//! query, in the same tasks that feed the join (its stages were prepared for
//! them), with a [`BloomBuildExec`] on top in each task. Every task builds a
//! partial filter of one fixed shape (planned from statistics before the
//! run), so partial filters always merge, by OR, on the coordinator. There
//! is no distinct-key cap: a side with more keys than planned fills its
//! filter, whose false-positive rate then rises, and the rule re-takes its
//! decision on the rate reached.
//!
//! The side is computed twice (once here, once for the join); the rule only
//! builds where the side is small ([`super::RuntimeFilterConfig::max_creation_rows`])
//! and reports the time it took ([`super::rule::Verdict::Applied`]).

use crate::rowkey::{insert_rows, KeyColumns};
use datafusion::arrow::array::{Array, AsArray, BinaryArray, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{EmptyRelation, LogicalPlan};
use datafusion::physical_expr::{EquivalenceProperties, Partitioning, PhysicalExpr};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    collect, ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan,
    ExecutionPlanProperties, PlanProperties, ReplaceChildrenOptions,
};
use filterstore::{BitFilter, FilterParams};
use futures::StreamExt;
use std::fmt;
use std::sync::Arc;

/// Name of the node in plans.
pub const NAME: &str = "BloomBuildExec";

/// Builds one partial filter of its input's keys: one output row, one
/// BINARY column holding the filter's words (little-endian).
#[derive(Debug, Clone)]
pub struct BloomBuildExec {
    input: Arc<dyn ExecutionPlan>,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    params: FilterParams,
    properties: Arc<PlanProperties>,
}

/// The output schema: one BINARY column.
fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new(
        "bloom_words",
        DataType::Binary,
        false,
    )]))
}

impl BloomBuildExec {
    /// A partial filter of shape `params` over `keys` of a one-partition
    /// `input`.
    pub fn try_new(
        input: Arc<dyn ExecutionPlan>,
        keys: Vec<Arc<dyn PhysicalExpr>>,
        params: FilterParams,
    ) -> Result<Self> {
        let input: Arc<dyn ExecutionPlan> = if input.output_partitioning().partition_count() == 1 {
            input
        } else {
            Arc::new(CoalescePartitionsExec::new(input))
        };
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema()),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        Ok(BloomBuildExec {
            input,
            keys,
            params,
            properties,
        })
    }

    /// The key expressions over the input.
    pub fn keys(&self) -> &[Arc<dyn PhysicalExpr>] {
        &self.keys
    }

    /// The filter's shape.
    pub fn params(&self) -> &FilterParams {
        &self.params
    }
}

impl DisplayAs for BloomBuildExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let keys: Vec<String> = self.keys.iter().map(|k| k.to_string()).collect();
        write!(
            f,
            "{NAME}: keys=[{}], m={}, k={}",
            keys.join(", "),
            self.params.m(),
            self.params.k()
        )
    }
}

impl ExecutionPlan for BloomBuildExec {
    fn name(&self) -> &str {
        NAME
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        for k in &self.keys {
            if f(k)? == TreeNodeRecursion::Stop {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
        _options: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 {
            return Err(DataFusionError::Internal(format!("{NAME} takes one child")));
        }
        Ok(Arc::new(BloomBuildExec::try_new(
            children.swap_remove(0),
            self.keys.clone(),
            self.params,
        )?))
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.replace_children(
            children,
            ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute),
        )
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        if partition != 0 {
            return Err(DataFusionError::Internal(format!(
                "{NAME} has one partition, asked for {partition}"
            )));
        }
        let filter = BitFilter::new(self.params)
            .map_err(|e| DataFusionError::Execution(format!("{NAME}: {e}")))?;
        let mut input = self.input.execute(0, context)?;
        let keys = self.keys.clone();
        let out = futures::stream::once(async move {
            while let Some(batch) = input.next().await {
                let batch = batch?;
                let columns = keys
                    .iter()
                    .map(|k| k.evaluate(&batch)?.into_array(batch.num_rows()))
                    .collect::<Result<Vec<_>>>()?;
                insert_rows(&filter, &KeyColumns::new(&columns)?)?;
            }
            let words = BinaryArray::from_vec(vec![&filter.to_le_bytes()[..]]);
            Ok(RecordBatch::try_new(schema(), vec![Arc::new(words)])?)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema(), out)))
    }
}

/// ORs the partial filters (rows of [`BloomBuildExec`]'s output) into one
/// filter of shape `params`.
pub fn merge_partials(
    params: FilterParams,
    batches: &[RecordBatch],
    tasks: usize,
) -> Result<BitFilter> {
    let bad = |what: String| DataFusionError::Internal(format!("{NAME}: {what}"));
    let partials: usize = batches.iter().map(|b| b.num_rows()).sum();
    if partials != tasks {
        // A missing partial would be missing keys: never build from it.
        return Err(bad(format!(
            "{partials} partial filters from {tasks} tasks"
        )));
    }
    let filter = BitFilter::new(params).map_err(|e| bad(e.to_string()))?;
    let mut words = vec![0u64; params.num_words()];
    for batch in batches {
        let col = batch.column(0);
        let Some(bin) = col.as_binary_opt::<i32>() else {
            return Err(bad(format!("a partial of type {}", col.data_type())));
        };
        for i in 0..bin.len() {
            let bytes = bin.value(i);
            if bytes.len() != words.len() * 8 {
                return Err(bad(format!(
                    "a partial of {} bytes for a filter of {} words",
                    bytes.len(),
                    words.len()
                )));
            }
            for (w, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
                let mut b = [0u8; 8];
                b.copy_from_slice(chunk);
                *w = u64::from_le_bytes(b);
            }
            let part = BitFilter::from_words(params, &words).map_err(|e| bad(e.to_string()))?;
            filter.union_with(&part).map_err(|e| bad(e.to_string()))?;
        }
    }
    Ok(filter)
}

/// Runs `plan` (a distributed plan whose network boundaries are already in
/// place) as its own query on `state`'s cluster: the boundaries get fresh
/// stage identities and a `DistributedExec` on top, as datafusion-distributed
/// does for plans that bring their own boundaries.
pub async fn run_distributed(
    state: &datafusion::execution::SessionState,
    plan: Arc<dyn ExecutionPlan>,
) -> Result<Vec<RecordBatch>> {
    use datafusion::execution::SessionStateBuilder;
    use datafusion_distributed::SessionStateBuilderExt;
    let fixed = FixedPlanner(plan);
    let planner_state = SessionStateBuilder::new_from_existing(state.clone())
        .with_query_planner(Arc::new(fixed))
        .with_distributed_planner()
        .build();
    let empty = LogicalPlan::EmptyRelation(EmptyRelation {
        produce_one_row: false,
        schema: Arc::new(datafusion::common::DFSchema::empty()),
    });
    let physical = planner_state
        .query_planner()
        .create_physical_plan(&empty, &planner_state)
        .await?;
    collect(physical, planner_state.task_ctx()).await
}

/// A query planner that returns one prepared physical plan.
#[derive(Debug)]
struct FixedPlanner(Arc<dyn ExecutionPlan>);

#[async_trait::async_trait]
impl datafusion::execution::context::QueryPlanner for FixedPlanner {
    async fn create_physical_plan(
        &self,
        _logical_plan: &LogicalPlan,
        _session: &dyn datafusion::catalog::Session,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::clone(&self.0))
    }
}

/// Aggregate functions whose result does not depend on the order of their
/// input (for floats, `sum` and `avg` do: see [`creation_side_refusal`]).
const ORDER_FREE_AGGREGATES: [&str; 9] = [
    "count", "sum", "min", "max", "avg", "bool_and", "bool_or", "bit_and", "bit_or",
];

/// Why `other` cannot be run again as a creation side, or `None` when it
/// can. The filter must hold every key the join will see, so the second run
/// must produce the same keys as the first: nothing that depends on timing,
/// scheduling or the order rows arrive in (a limit or fetch, a window,
/// a volatile function, an order-sensitive aggregate, a float sum), and
/// nothing unbounded (the run would never end).
pub fn creation_side_refusal(other: &Arc<dyn ExecutionPlan>) -> Option<String> {
    use datafusion::common::tree_node::TreeNode;
    use datafusion::physical_expr_common::physical_expr::is_volatile;
    use datafusion::physical_plan::aggregates::AggregateExec;
    if other.boundedness().is_unbounded() {
        return Some("the creation side is unbounded".into());
    }
    let mut why = None;
    let _ = other.apply(|node| {
        let name = node.name();
        if node.fetch().is_some() || name.contains("Limit") {
            why = Some(format!("{name} with a limit on the creation side"));
        } else if name.contains("Window") {
            why = Some(format!("{name} on the creation side"));
        } else if let Some(a) = node.downcast_ref::<AggregateExec>() {
            why = order_dependent(a);
        }
        if why.is_none() {
            let _ = node.apply_expressions(&mut |e| {
                if is_volatile(e) {
                    why = Some(format!("a volatile expression ({e}) on the creation side"));
                    return Ok(TreeNodeRecursion::Stop);
                }
                Ok(TreeNodeRecursion::Continue)
            });
        }
        Ok(if why.is_some() {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    });
    why
}

fn order_dependent(a: &datafusion::physical_plan::aggregates::AggregateExec) -> Option<String> {
    let schema = a.input_schema();
    for f in a.aggr_expr() {
        let name = f.fun().name().to_lowercase();
        if !ORDER_FREE_AGGREGATES.contains(&name.as_str()) {
            return Some(format!("the aggregate {name} on the creation side"));
        }
        let float_input = f.expressions().iter().any(|e| {
            e.data_type(&schema)
                .map(|t| t.is_floating())
                .unwrap_or(true)
        });
        if float_input && (name == "sum" || name == "avg") {
            return Some(format!("a float {name} on the creation side"));
        }
    }
    None
}
