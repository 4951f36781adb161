use super::*;
use datafusion::arrow::array::{
    Array, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int64Array, StringArray,
};
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::physical_expr::expressions::col;

fn acc_of(columns: &[ArrayRef]) -> KeyBounds {
    let types: Vec<DataType> = columns.iter().map(|c| c.data_type().clone()).collect();
    let mut acc = BoundsAcc::new(&types);
    acc.update(columns);
    acc.finish()
}

fn range(lo: ScalarValue, hi: ScalarValue) -> ColumnBounds {
    ColumnBounds::Range(lo, hi)
}

#[test]
fn bounds_hold_every_key_and_skip_nulls_and_floats() {
    let ints: ArrayRef = Arc::new(Int64Array::from(vec![Some(7), None, Some(-3), Some(12)]));
    let nulls: ArrayRef = Arc::new(Int64Array::from(vec![None::<i64>, None]));
    let floats: ArrayRef = Arc::new(Float64Array::from(vec![1.0, f64::NAN]));
    let b = acc_of(&[ints]);
    assert_eq!(
        b.0,
        vec![range(
            ScalarValue::Int64(Some(-3)),
            ScalarValue::Int64(Some(12))
        )]
    );
    assert_eq!(acc_of(&[nulls]).0, vec![ColumnBounds::Empty]);
    assert_eq!(acc_of(&[floats]).0, vec![ColumnBounds::Unknown]);
    // Two batches into one partition's bounds.
    let mut acc = BoundsAcc::new(&[DataType::Utf8]);
    acc.update(&[Arc::new(StringArray::from(vec!["m", "c"])) as ArrayRef]);
    acc.update(&[Arc::new(StringArray::from(vec!["x", "d"])) as ArrayRef]);
    let s = |v: &str| ScalarValue::Utf8(Some(v.into()));
    assert_eq!(acc.finish().0, vec![range(s("c"), s("x"))]);
}

#[test]
fn widening_holds_both_sides_and_unknown_wins() {
    let i = |v| ScalarValue::Int32(Some(v));
    let mut a = KeyBounds(vec![
        range(i(5), i(9)),
        ColumnBounds::Empty,
        range(i(1), i(2)),
    ]);
    a.widen(&KeyBounds(vec![
        range(i(-1), i(6)),
        range(i(3), i(3)),
        ColumnBounds::Unknown,
    ]));
    assert_eq!(
        a.0,
        vec![range(i(-1), i(9)), range(i(3), i(3)), ColumnBounds::Unknown]
    );
    // Ends of another type cannot be ordered: unknown, never narrower.
    let mut b = KeyBounds(vec![range(i(5), i(9))]);
    b.widen(&KeyBounds(vec![range(
        ScalarValue::Int64(Some(0)),
        ScalarValue::Int64(Some(1)),
    )]));
    assert_eq!(b.0, vec![ColumnBounds::Unknown]);
    // Another column count: every column unknown.
    let mut c = KeyBounds(vec![range(i(5), i(9))]);
    c.widen(&KeyBounds(vec![ColumnBounds::Empty, ColumnBounds::Empty]));
    assert_eq!(c.0, vec![ColumnBounds::Unknown]);
}

fn sample() -> KeyBounds {
    KeyBounds(vec![
        range(
            ScalarValue::Int32(Some(-4)),
            ScalarValue::Int32(Some(1 << 20)),
        ),
        range(
            ScalarValue::Utf8(Some("AAA".into())),
            ScalarValue::Utf8(Some("zz".into())),
        ),
        range(
            ScalarValue::Decimal128(Some(-5), 12, 2),
            ScalarValue::Decimal128(Some(990), 12, 2),
        ),
        range(
            ScalarValue::Date32(Some(10_000)),
            ScalarValue::Date32(Some(11_000)),
        ),
        ColumnBounds::Empty,
        ColumnBounds::Unknown,
    ])
}

#[test]
fn bounds_round_trip_and_every_cut_is_refused() {
    let b = sample();
    let bytes = b.encode().expect("encodes");
    assert_eq!(KeyBounds::decode(&bytes).expect("decodes"), b);
    for cut in 0..bytes.len() {
        assert!(
            KeyBounds::decode(&bytes[..cut]).is_err(),
            "a cut at {cut} decoded"
        );
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(KeyBounds::decode(&longer).is_err());
    // An absurd column count is refused before anything is reserved.
    assert!(KeyBounds::decode(&[0xff, 0xff, 0]).is_err());
    assert!(KeyBounds::decode(&[1, 0, 9]).is_err(), "an unknown tag");
}

#[test]
fn a_decoded_range_that_is_not_one_is_unknown() {
    let i = |v| ScalarValue::Int64(Some(v));
    for bad in [
        range(i(9), i(5)),
        range(i(1), ScalarValue::Int32(Some(2))),
        range(ScalarValue::Int64(None), i(2)),
        range(
            ScalarValue::Float64(Some(0.0)),
            ScalarValue::Float64(Some(1.0)),
        ),
    ] {
        // Encoded as it is (a peer that sent it), read as unknown.
        let bytes = KeyBounds(vec![bad.clone()]).encode().expect("encodes");
        assert_eq!(
            KeyBounds::decode(&bytes).unwrap().0,
            vec![ColumnBounds::Unknown],
            "{bad:?}"
        );
    }
    let long = "k".repeat(MAX_BOUNDS_BYTES);
    let s = ScalarValue::Utf8(Some(long));
    assert!(
        KeyBounds(vec![range(s.clone(), s)]).encode().is_none(),
        "over the cap"
    );
}

fn keep(pred: &Arc<dyn PhysicalExpr>, batch: &RecordBatch) -> Vec<bool> {
    let v = pred
        .evaluate(batch)
        .unwrap()
        .into_array(batch.num_rows())
        .unwrap();
    let v = v.as_any().downcast_ref::<BooleanArray>().unwrap();
    (0..v.len()).map(|i| v.is_valid(i) && v.value(i)).collect()
}

#[test]
fn the_predicate_keeps_every_key_within_the_bounds_and_nulls_where_they_pass() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int64, true),
        Field::new("d", DataType::Date32, true),
    ]));
    let a = Int64Array::from(vec![Some(1), Some(5), Some(9), None, Some(10)]);
    let d = Date32Array::from(vec![Some(3), Some(3), Some(4), Some(3), None]);
    let batch = RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(a), Arc::new(d)]).unwrap();
    let keys = vec![col("a", &schema).unwrap(), col("d", &schema).unwrap()];
    let types = vec![DataType::Int64, DataType::Date32];
    let b = KeyBounds(vec![
        range(ScalarValue::Int64(Some(5)), ScalarValue::Int64(Some(10))),
        range(ScalarValue::Date32(Some(3)), ScalarValue::Date32(Some(3))),
    ]);
    let drop_nulls = b.predicate(&keys, &types, false).unwrap();
    assert_eq!(
        keep(&drop_nulls, &batch),
        vec![false, true, false, false, false]
    );
    let pass_nulls = b.predicate(&keys, &types, true).unwrap();
    assert_eq!(
        keep(&pass_nulls, &batch),
        vec![false, true, false, true, true]
    );
    // A column of another type than planned, or unknown, gives no term.
    assert!(
        KeyBounds(vec![ColumnBounds::Unknown, ColumnBounds::Unknown])
            .predicate(&keys, &types, false)
            .is_none()
    );
    let wrong = vec![DataType::Int32, DataType::Date32];
    let only_d = b.predicate(&keys, &wrong, false).unwrap();
    assert_eq!(keep(&only_d, &batch), vec![true, true, false, true, false]);
    // No build key in a column: no row without a null joins.
    let empty = KeyBounds(vec![ColumnBounds::Empty, ColumnBounds::Unknown]);
    assert_eq!(
        keep(&empty.predicate(&keys, &types, false).unwrap(), &batch),
        vec![false; 5]
    );
    let dec: ArrayRef = Arc::new(
        Decimal128Array::from(vec![1_i128])
            .with_precision_and_scale(5, 1)
            .unwrap(),
    );
    assert!(matches!(acc_of(&[dec]).0[0], ColumnBounds::Range(..)));
}
