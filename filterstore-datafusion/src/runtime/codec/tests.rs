//! The scan node's bytes: a round trip, and every cut or flipped byte
//! refused without a panic.

use super::*;
use crate::runtime::scope::ScopeCell;
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::physical_expr::expressions::col;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion_proto::physical_plan::DefaultPhysicalProtoConverter;

fn scan_node() -> (Arc<dyn ExecutionPlan>, Arc<dyn ExecutionPlan>) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
    ]));
    let input: Arc<dyn ExecutionPlan> = Arc::new(EmptyExec::new(Arc::clone(&schema)));
    let filters = vec![
        ScanFilterSpec {
            filter: 0x1234,
            keys: vec![col("a", &schema).unwrap()],
            types: vec![DataType::Int64],
            nulls_pass: false,
        },
        ScanFilterSpec {
            filter: 0x5678,
            keys: vec![col("s", &schema).unwrap(), col("a", &schema).unwrap()],
            types: vec![DataType::Utf8, DataType::Int64],
            nulls_pass: true,
        },
    ];
    let key = RunKey {
        scope: 9,
        token: [7; 16],
    };
    let wait = std::time::Duration::from_millis(250);
    let node = BloomScanExec::new(Arc::clone(&input), filters, ScopeCell::fixed(key), wait);
    (Arc::new(node), input)
}

#[test]
fn a_scan_node_round_trips_and_damaged_bytes_are_refused() {
    let (node, input) = scan_node();
    let conv = DefaultPhysicalProtoConverter {};
    let mut buf = Vec::new();
    BloomCodec
        .try_encode(Arc::clone(&node), &mut buf, &conv)
        .unwrap();
    let ctx = TaskContext::default();
    let inputs = [Arc::clone(&input)];
    let back = BloomCodec.try_decode(&buf, &inputs, &ctx, &conv).unwrap();
    let back = back.downcast_ref::<BloomScanExec>().expect("a scan node");
    let node = node.downcast_ref::<BloomScanExec>().unwrap();
    assert_eq!(back.run_key().scope, 9);
    assert_eq!(back.wait(), node.wait());
    assert_eq!(back.filters().len(), 2);
    for (a, b) in back.filters().iter().zip(node.filters()) {
        assert_eq!(
            (a.filter, a.nulls_pass, &a.types),
            (b.filter, b.nulls_pass, &b.types)
        );
        assert_eq!(a.keys, b.keys);
    }
    for cut in 0..buf.len() {
        assert!(
            BloomCodec
                .try_decode(&buf[..cut], &inputs, &ctx, &conv)
                .is_err(),
            "cut {cut}"
        );
    }
    for i in 4..buf.len() {
        let mut bad = buf.clone();
        bad[i] ^= 0x5a;
        // Some flips still decode (a key's name, an id): none may panic.
        let _ = BloomCodec.try_decode(&bad, &inputs, &ctx, &conv);
    }
    // Magic, version, flags, scope, token and wait: then the filter count.
    let mut absurd = buf[..38].to_vec();
    absurd.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(BloomCodec
        .try_decode(&absurd, &inputs, &ctx, &conv)
        .is_err());
}
