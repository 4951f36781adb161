//! One scope per execution of a plan with runtime filters.
//!
//! [`BloomQueryExec`] sits at the top of such a plan, on the coordinator
//! (above datafusion-distributed's `DistributedExec`, and above its analyze
//! node for `EXPLAIN ANALYZE`). Each time it executes it draws a fresh
//! scope, sets it in the plan's [`ScopeCell`] (shared by the plan's taps and
//! probe nodes on the coordinator) before anything is sent to a worker, so
//! every task plan of that execution carries it, and opens a run of every
//! filter for it. When its stream ends, or is dropped because the query was
//! cancelled, it closes those runs: a probe task still waiting for a filter
//! then passes every row at once.
//!
//! So a plan that runs twice (a cached plan) never mixes the keys of two
//! runs: a post or fetch names its scope. With the scope it draws the
//! execution's secret token (a [`RunKey`], carried in the task plans):
//! the rendezvous takes a frame from another process only with that token.

use super::rendezvous::{new_filter_id, RunKey, Scope, Slot};
use crate::node::{self, one_child_plan};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan};
use futures::{Stream, StreamExt};
use parking_lot::Mutex;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Name of the node in plans.
pub(super) const NAME: &str = "BloomRuntimeFiltersExec";

/// The current execution's scope and token of one plan (see the module
/// documentation).
#[derive(Debug, Default)]
pub struct ScopeCell(Mutex<RunKey>);

impl ScopeCell {
    /// A cell holding `key` (a worker's node, decoded from its plan).
    pub(crate) fn fixed(key: RunKey) -> Arc<ScopeCell> {
        Arc::new(ScopeCell(Mutex::new(key)))
    }

    /// The scope now.
    pub fn get(&self) -> Scope {
        self.0.lock().scope
    }

    /// The scope and token now (read together: never of two executions).
    pub(crate) fn key(&self) -> RunKey {
        *self.0.lock()
    }

    fn set(&self, key: RunKey) {
        *self.0.lock() = key;
    }
}

/// The top of a plan with runtime filters (see the module documentation).
#[derive(Debug)]
pub struct BloomQueryExec {
    input: Arc<dyn ExecutionPlan>,
    cell: Arc<ScopeCell>,
    slots: Vec<Arc<Slot>>,
}

impl BloomQueryExec {
    /// `input` with its filters' `slots`, whose nodes share `cell`.
    pub fn new(input: Arc<dyn ExecutionPlan>, cell: Arc<ScopeCell>, slots: Vec<Arc<Slot>>) -> Self {
        BloomQueryExec { input, cell, slots }
    }

    /// The plan below (datafusion-distributed's `DistributedExec`, or its
    /// analyze node).
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }
}

impl DisplayAs for BloomQueryExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{NAME}: {} filter(s)", self.slots.len())
    }
}

impl ExecutionPlan for BloomQueryExec {
    one_child_plan!(input_properties(NAME));
    one_child_plan!(input_statistics);

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let input = node::only_child(NAME, children)?;
        Ok(Arc::new(BloomQueryExec {
            input,
            cell: Arc::clone(&self.cell),
            slots: self.slots.clone(),
        }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        // Never 0: a decoded node with scope 0 would be a plan that was
        // never given one.
        let scope = (new_filter_id() as u64).max(1);
        let key = RunKey::fresh(scope).map_err(DataFusionError::Execution)?;
        self.cell.set(key);
        for s in &self.slots {
            s.open(key);
        }
        let input = self.input.execute(partition, context)?;
        Ok(Box::pin(Scoped {
            schema: input.schema(),
            input,
            slots: self.slots.clone(),
            scope,
        }))
    }
}

/// The input's stream; closes the scope's runs when it ends or is dropped.
struct Scoped {
    schema: SchemaRef,
    input: SendableRecordBatchStream,
    slots: Vec<Arc<Slot>>,
    scope: Scope,
}

impl Stream for Scoped {
    type Item = Result<datafusion::arrow::array::RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.input.poll_next_unpin(cx)
    }
}

impl RecordBatchStream for Scoped {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }
}

impl Drop for Scoped {
    fn drop(&mut self) {
        for s in &self.slots {
            s.close(self.scope);
        }
    }
}
