//! The scan node and the query node are their input as far as statistics
//! go: the rule's estimates for a join placed after another join's filter
//! reached a scan must be what they were before (a node that hid its
//! scan's statistics made TPC-H q9 and q10 place filters that statistics
//! would have skipped).

use super::*;
use crate::runtime::rendezvous::RunKey;
use crate::runtime::scope::{BloomQueryExec, ScopeCell};
use datafusion::arrow::array::{Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::stats::Precision;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::physical_expr::expressions::col;
use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};

#[test]
fn the_scan_and_query_nodes_keep_their_inputs_statistics() {
    let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, false)]));
    let column = Arc::new(Int64Array::from_iter_values(0..1000));
    let batch = RecordBatch::try_new(Arc::clone(&schema), vec![column]).unwrap();
    let scan = MemorySourceConfig::try_new_exec(&[vec![batch]], Arc::clone(&schema), None).unwrap();
    let scan: Arc<dyn ExecutionPlan> = scan;
    let filter = ScanFilterSpec {
        filter: 1,
        keys: vec![col("a", &schema).unwrap()],
        types: vec![DataType::Int64],
        nulls_pass: false,
    };
    let key = RunKey {
        scope: 1,
        token: [3; 16],
    };
    let cell = ScopeCell::fixed(key);
    let node: Arc<dyn ExecutionPlan> = Arc::new(BloomScanExec::new(
        Arc::clone(&scan),
        vec![filter],
        Arc::clone(&cell),
        std::time::Duration::from_millis(200),
    ));
    let query: Arc<dyn ExecutionPlan> =
        Arc::new(BloomQueryExec::new(Arc::clone(&node), cell, Vec::new()));
    let ctx = StatisticsContext::default();
    let expected = ctx.compute(scan.as_ref(), &StatisticsArgs::new()).unwrap();
    assert_eq!(expected.num_rows, Precision::Exact(1000));
    for plan in [&node, &query] {
        let got = ctx.compute(plan.as_ref(), &StatisticsArgs::new()).unwrap();
        assert_eq!(got.num_rows, expected.num_rows, "{}", plan.name());
        assert_eq!(
            got.column_statistics,
            expected.column_statistics,
            "{}",
            plan.name()
        );
    }
}
