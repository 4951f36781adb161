//! `EXPLAIN ANALYZE` with the runtime filters' decisions: the analyzed
//! plan's rows, then one more row (`plan_type` "Runtime filters") with the
//! decision and reason of every join side, as `EXPLAIN` prints them, and
//! what became of each filter while the query ran (written when the
//! analyzed plan has ended).
//!
//! DataFusion's `AnalyzeExec` (and datafusion-distributed's) output two
//! string columns, `plan_type` and `plan`, in one partition; this node runs
//! on the coordinator only, above them, and is never sent to a worker.

use super::report::RuntimeFilterReport;
use crate::node::{self, one_child_plan};
use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan};
use futures::StreamExt;
use std::fmt;
use std::sync::Arc;

/// Name of the node in plans.
const NAME: &str = "BloomReportExec";

/// The `plan_type` of the appended row.
pub(super) const REPORT_ROW: &str = "Runtime filters";

/// Appends the decisions to an analyze node's output.
#[derive(Debug)]
pub(super) struct BloomReportExec {
    input: Arc<dyn ExecutionPlan>,
    report: RuntimeFilterReport,
}

impl BloomReportExec {
    /// `analyze` with `report` appended, or `analyze` itself when its output
    /// is not the two string columns of an analyze node (nothing to append
    /// to, and nothing changed).
    pub(super) fn wrap(
        analyze: Arc<dyn ExecutionPlan>,
        report: RuntimeFilterReport,
    ) -> Arc<dyn ExecutionPlan> {
        let schema = analyze.schema();
        let strings = schema.fields().len() == 2
            && schema
                .fields()
                .iter()
                .all(|f| f.data_type() == &DataType::Utf8);
        if !strings || analyze.properties().partitioning.partition_count() != 1 {
            return analyze;
        }
        Arc::new(BloomReportExec {
            input: analyze,
            report,
        })
    }

    fn report_batch(schema: SchemaRef, report: &RuntimeFilterReport) -> Result<RecordBatch> {
        let text = report.to_string();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![REPORT_ROW])),
            Arc::new(StringArray::from(vec![text.trim_end().to_string()])),
        ];
        RecordBatch::try_new(schema, columns).map_err(DataFusionError::from)
    }
}

impl DisplayAs for BloomReportExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{NAME}")
    }
}

impl ExecutionPlan for BloomReportExec {
    one_child_plan!(input_properties(NAME));

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let input = node::only_child(NAME, children)?;
        Ok(BloomReportExec::wrap(input, self.report.clone()))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context)?;
        // Rendered after the input has ended, when the outcomes are known.
        let (schema, report) = (self.input.schema(), self.report.clone());
        let extra = futures::stream::once(async move { Self::report_batch(schema, &report) });
        let schema = self.schema();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            schema,
            input.chain(extra),
        )))
    }
}
