//! The scan node's and the tap's bytes: a round trip, and every cut or
//! flipped byte refused without a panic.

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

fn tap_node(fit: Option<f64>) -> (Arc<dyn ExecutionPlan>, Arc<dyn ExecutionPlan>) {
    let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, true)]));
    let input: Arc<dyn ExecutionPlan> = Arc::new(EmptyExec::new(Arc::clone(&schema)));
    let params = FilterParams::new(Layout::Blocked, 512 * 96, 7, HashSpec::xxh3(3)).unwrap();
    let key = RunKey {
        scope: 4,
        token: [9; 16],
    };
    let tap = BloomTapExec::try_new(
        Arc::clone(&input),
        vec![col("a", &schema).unwrap()],
        (params, fit),
        0xabcd,
        (Some("http://127.0.0.1:1".into()), ScopeCell::fixed(key)),
        "join 1".into(),
    )
    .unwrap();
    (Arc::new(tap), input)
}

/// A tap's rate its partials are halved to and its read-ahead cross to the
/// worker (version 6); version 5, a rate outside (0, 1) and every cut are
/// refused.
#[test]
fn a_tap_carries_its_partial_rate_and_read_ahead_and_version_5_is_refused() {
    let conv = DefaultPhysicalProtoConverter {};
    let ctx = TaskContext::default();
    for (fit, ahead) in [(Some(0.01), 0), (None, 32 << 20)] {
        let (node, input) = tap_node(fit);
        let node = node.downcast_ref::<BloomTapExec>().unwrap().clone();
        let node = Arc::new(node.with_read_ahead(ahead));
        let mut buf = Vec::new();
        BloomCodec.try_encode(node, &mut buf, &conv).unwrap();
        let inputs = [input];
        let back = BloomCodec.try_decode(&buf, &inputs, &ctx, &conv).unwrap();
        let back = back.downcast_ref::<BloomTapExec>().expect("a tap");
        assert_eq!((back.fit_fp(), back.read_ahead()), (fit, ahead));
        assert_eq!((back.filter_id(), back.params().m()), (0xabcd, 512 * 96));
        for cut in 0..buf.len() {
            let cut = BloomCodec.try_decode(&buf[..cut], &inputs, &ctx, &conv);
            assert!(cut.is_err());
        }
        let mut old = buf.clone();
        old[4] = 5;
        let err = BloomCodec
            .try_decode(&old, &inputs, &ctx, &conv)
            .unwrap_err();
        assert!(err.to_string().contains("this build reads 6"), "{err}");
        // Version 5's layout (no read-ahead) under version 6 is a cut.
        let short = &buf[..buf.len() - 8];
        assert!(BloomCodec.try_decode(short, &inputs, &ctx, &conv).is_err());
        let at = buf.len() - 16;
        for bad in [1.5f64, -0.01, f64::NAN, 1.0] {
            let mut b = buf.clone();
            b[at..at + 8].copy_from_slice(&bad.to_bits().to_le_bytes());
            let err = BloomCodec.try_decode(&b, &inputs, &ctx, &conv).unwrap_err();
            assert!(err.to_string().contains("partial rate"), "{bad}: {err}");
        }
    }
}
