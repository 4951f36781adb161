//! The decision's rules one by one, on hand-built plans and values: the
//! join-type table, the statistics rule for a foreign key, which key
//! expressions may fail and which casts cannot.

use super::*;
use datafusion::arrow::datatypes::{Field, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::physical_expr::expressions::{binary, col, lit};
use datafusion::physical_plan::empty::EmptyExec;

fn schema(t: DataType) -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("k", t, true)]))
}

fn side(t: DataType) -> Arc<dyn ExecutionPlan> {
    Arc::new(EmptyExec::new(schema(t)))
}

fn join_of(
    left: DataType,
    right: DataType,
    join_type: JoinType,
    mode: PartitionMode,
    null_aware: bool,
) -> HashJoinExec {
    let (l, r) = (side(left), side(right));
    let on = vec![(
        col("k", &l.schema()).unwrap(),
        col("k", &r.schema()).unwrap(),
    )];
    HashJoinExec::try_new(
        l,
        r,
        on,
        None,
        &join_type,
        None,
        mode,
        NullEquality::NullEqualsNothing,
        null_aware,
    )
    .unwrap()
}

fn join(join_type: JoinType) -> HashJoinExec {
    let (t, mode) = (DataType::Int64, PartitionMode::Partitioned);
    join_of(t.clone(), t, join_type, mode, false)
}

fn skip(j: &HashJoinExec) -> SkipReason {
    match decide(j, &RuntimeFilterConfig::default(), &Stats::default()).unwrap() {
        Ok(_) => panic!("placed a filter on {j:?}"),
        Err(r) => r,
    }
}

#[test]
fn probe_side_allowed_exactly_where_the_table_says() {
    use JoinType::*;
    for t in [Inner, Left, LeftSemi, RightSemi, LeftAnti, LeftMark] {
        assert_eq!(side_allowed(&join(t), JoinSide::Right), Ok(()), "{t}");
    }
    for t in [Right, Full, RightAnti, RightMark] {
        let r = side_allowed(&join(t), JoinSide::Right);
        assert!(matches!(r, Err(SkipReason::JoinType(_))), "{t}: {r:?}");
    }
    let (i64, mode) = (DataType::Int64, PartitionMode::Partitioned);
    let not_in = join_of(i64.clone(), i64, LeftAnti, mode, true);
    assert!(matches!(
        side_allowed(&not_in, JoinSide::Right),
        Err(SkipReason::JoinType(why)) if why.contains("NOT IN")
    ));
}

/// The build side (a reverse filter's) is filtered exactly where its
/// unmatched rows are never output: the table in `super::reverse`.
#[test]
fn build_side_allowed_exactly_where_the_reverse_table_says() {
    use JoinType::*;
    for t in [Inner, LeftSemi, RightSemi, Right, RightAnti, RightMark] {
        assert_eq!(side_allowed(&join(t), JoinSide::Left), Ok(()), "{t}");
    }
    for t in [Left, LeftAnti, LeftMark, Full] {
        let r = side_allowed(&join(t), JoinSide::Left);
        assert!(matches!(r, Err(SkipReason::JoinType(_))), "{t}: {r:?}");
    }
}

#[test]
fn decide_skips_broadcast_wrong_type_bad_keys_and_no_shuffle() {
    let (i64, utf8) = (DataType::Int64, DataType::Utf8);
    let collect = join_of(
        i64.clone(),
        i64.clone(),
        JoinType::Inner,
        PartitionMode::CollectLeft,
        false,
    );
    assert_eq!(skip(&collect), SkipReason::Broadcast);
    assert!(matches!(
        skip(&join(JoinType::Full)),
        SkipReason::JoinType(_)
    ));
    // Int64 hashes 8 bytes, a string its UTF-8 bytes: never one filter.
    let mixed = join_of(
        i64,
        utf8,
        JoinType::Inner,
        PartitionMode::Partitioned,
        false,
    );
    assert!(
        matches!(skip(&mixed), SkipReason::KeyType(_)),
        "{:?}",
        skip(&mixed)
    );
    // A probe side with no network shuffle below it has nowhere to go.
    assert!(matches!(
        skip(&join(JoinType::Inner)),
        SkipReason::NoShuffle(_)
    ));
}

#[test]
fn feeds_build_only_along_a_build_child() {
    let inner: Arc<dyn ExecutionPlan> = Arc::new(join(JoinType::Inner));
    let at = |path: Vec<usize>| Point {
        path,
        keys: vec![],
        depth: 1,
    };
    assert!(feeds_build(&inner, &at(vec![0])));
    assert!(!feeds_build(&inner, &at(vec![1])));
    assert!(!feeds_build(&inner, &at(vec![])));
    assert!(!feeds_build(&inner, &at(vec![5])), "a path past the leaves");
}

fn range(lo: i64, hi: i64) -> Range {
    (ScalarValue::Int64(Some(lo)), ScalarValue::Int64(Some(hi)))
}

#[test]
fn foreign_key_pass_is_the_build_share_plus_false_positives() {
    let fp = 0.01;
    let (probe, build) = (range(10, 90), range(1, 100));
    let pass = foreign_key_pass((Some(100), Some(1_000)), (Some(&probe), Some(&build)), fp);
    let expected = 0.1 + fp * 0.9;
    assert!((pass.unwrap() - expected).abs() < 1e-12, "{pass:?}");
    // A build side of every key passes everything (capped at 1).
    let all = foreign_key_pass((Some(5_000), Some(1_000)), (Some(&probe), Some(&build)), fp);
    assert_eq!(all, Some(1.0));
    // Probe keys outside the build table's range: not a foreign key.
    let outside = range(0, 200);
    assert_eq!(
        foreign_key_pass((Some(100), Some(1_000)), (Some(&outside), Some(&build)), fp),
        None
    );
    // Missing statistics or an empty table: decided at run time.
    assert_eq!(
        foreign_key_pass((None, Some(1_000)), (Some(&probe), Some(&build)), fp),
        None
    );
    assert_eq!(
        foreign_key_pass((Some(1), Some(0)), (Some(&probe), Some(&build)), fp),
        None
    );
    assert_eq!(
        foreign_key_pass((Some(1), Some(10)), (None, Some(&build)), fp),
        None
    );
}

#[test]
fn fallible_finds_division_and_narrowing_casts() {
    let s = Schema::new(vec![
        Field::new("v", DataType::Int64, true),
        Field::new("w", DataType::Int32, true),
    ]);
    let v = || col("v", &s).unwrap();
    let w = || col("w", &s).unwrap();
    assert_eq!(fallible(&v(), &s), None);
    let plus = binary(v(), Operator::Plus, lit(1_i64), &s).unwrap();
    assert_eq!(fallible(&plus, &s), None);
    let div = binary(lit(1_000_000_i64), Operator::Divide, v(), &s).unwrap();
    assert!(
        fallible(&div, &s).is_some(),
        "a division may divide by zero"
    );
    let rem = binary(v(), Operator::Modulo, lit(7_i64), &s).unwrap();
    assert!(fallible(&rem, &s).is_some());
    let unsafe_cast = |e, t| -> Arc<dyn PhysicalExpr> { Arc::new(CastExpr::new(e, t, None)) };
    assert_eq!(fallible(&unsafe_cast(w(), DataType::Int64), &s), None);
    assert!(fallible(&unsafe_cast(v(), DataType::Int32), &s).is_some());
    let nested = binary(
        unsafe_cast(v(), DataType::Int16),
        Operator::Plus,
        lit(1_i16),
        &s,
    )
    .unwrap();
    assert!(fallible(&nested, &s).is_some(), "found below a safe node");
}

#[test]
fn lossless_casts() {
    use DataType::*;
    for (from, to) in [
        (Int32, Int64),
        (Int8, Int16),
        (UInt32, Int64),
        (UInt8, UInt64),
        (Int64, Float64),
        (UInt64, Float32),
        (Float32, Float64),
        (Date32, Date64),
        (Int64, Utf8),
        (Float64, LargeUtf8),
        (Utf8, Utf8),
    ] {
        assert!(lossless(&from, &to), "{from} -> {to}");
    }
    for (from, to) in [
        (Int64, Int32),
        (UInt32, Int32),
        (Int32, UInt64),
        (Int8, UInt8),
        (Float64, Float32),
        (Float64, Int64),
        (Utf8, Int64),
        (Date64, Date32),
    ] {
        assert!(!lossless(&from, &to), "{from} -> {to}");
    }
}
