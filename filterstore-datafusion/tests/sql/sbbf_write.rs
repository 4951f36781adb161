//! `SbbfArrowWriter`: a filterstore filter written as a Parquet column's
//! Bloom filter. DataFusion skips row groups by it (its bloom-filter pruning
//! metric), arrow-rs's reader reads it back answering as ours (1M keys
//! present, 1M absent); a value the filter lacks and a column or filter it
//! cannot serve are refused with typed errors. The rest of the file, and a
//! failing output: `sbbf_write_file.rs`.

use crate::sbbf::{agree, bloom_filters, key, N};
use datafusion::arrow::array::{
    ArrayRef, FixedSizeBinaryArray, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
    StructArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::error::DataFusionError;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::bloom_filter::{Sbbf, BITSET_MAX_LENGTH};
use datafusion::parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::physical_plan::metrics::MetricValue;
use datafusion::physical_plan::{collect, ExecutionPlan};
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use filterstore::{BitFilter, BloomRead, FilterParams, HashSpec, Layout};
use filterstore_datafusion::int_key;
use filterstore_datafusion::sbbf::{ColumnSbbf, SbbfArrowWriter};
use filterstore_datafusion::BloomUdfError;
use std::sync::Arc;

pub(crate) fn split_block(n: u64) -> BitFilter {
    let p = FilterParams::for_capacity(n, 0.01, Layout::SplitBlock, HashSpec::xxh64()).unwrap();
    BitFilter::new(p).unwrap()
}

pub(crate) fn udf_error(e: &DataFusionError) -> &BloomUdfError {
    match e {
        DataFusionError::External(b) => b.downcast_ref().expect("a BloomUdfError"),
        other => panic!("not a BloomUdfError: {other}"),
    }
}

/// A file of `batches` written by `SbbfArrowWriter` with `filters`.
pub(crate) fn ours(
    schema: &SchemaRef,
    props: WriterProperties,
    filters: Vec<ColumnSbbf>,
    batches: &[RecordBatch],
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = SbbfArrowWriter::try_new(&mut out, schema.clone(), Some(props), filters).unwrap();
    for b in batches {
        w.write(b).unwrap();
    }
    w.close().unwrap();
    out
}

/// The same with arrow-rs's `ArrowWriter`.
pub(crate) fn plain(
    schema: &SchemaRef,
    props: WriterProperties,
    batches: &[RecordBatch],
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, schema.clone(), Some(props)).unwrap();
    for b in batches {
        w.write(b).unwrap();
    }
    w.close().unwrap();
    out
}

/// The footer of a Parquet file held in memory.
pub(crate) fn footer(file: &[u8]) -> (ParquetMetaData, usize) {
    let n = file.len();
    assert_eq!(&file[n - 4..], b"PAR1");
    let len = u32::from_le_bytes(file[n - 8..n - 4].try_into().unwrap()) as usize;
    let start = n - 8 - len;
    (
        ParquetMetaDataReader::decode_metadata(&file[start..n - 8]).unwrap(),
        start,
    )
}

/// Every byte between the leading magic and the footer belongs to exactly
/// one thing the footer references (column chunk, Bloom filter, column or
/// offset index; a shared filter counts once): no dead filter, no gap.
pub(crate) fn assert_every_byte_referenced(file: &[u8]) {
    let (meta, footer_start) = footer(file);
    let mut spans = Vec::new();
    for rg in meta.row_groups() {
        for c in rg.columns() {
            let start = c.dictionary_page_offset().unwrap_or(c.data_page_offset());
            spans.push((start as u64, c.compressed_size() as u64));
            let extra = [
                (c.bloom_filter_offset(), c.bloom_filter_length()),
                (c.column_index_offset(), c.column_index_length()),
                (c.offset_index_offset(), c.offset_index_length()),
            ];
            for (at, len) in extra {
                if let (Some(at), Some(len)) = (at, len) {
                    spans.push((at as u64, len as u64));
                }
            }
        }
    }
    spans.sort_unstable();
    spans.dedup();
    let mut end = 4;
    for (at, len) in spans {
        assert_eq!(at, end, "a gap or an overlap at byte {end}");
        end = at + len;
    }
    assert_eq!(
        end, footer_start as u64,
        "unreferenced bytes before the footer"
    );
}

// --- DataFusion prunes by the filter -------------------------------------

const GROUPS: i64 = 8;
const PER_GROUP: i64 = 2_000;

/// Row `j` of row group `g` holds key `2(jG + g)` and `s = "s<key>"`: every
/// row group spans the whole key range, so its statistics rule out no key
/// inside it, and the odd keys are absent.
fn interleaved(schema: &SchemaRef, g: i64) -> RecordBatch {
    let k: Vec<i64> = (0..PER_GROUP).map(|j| 2 * (j * GROUPS + g)).collect();
    let s = StringArray::from_iter_values(k.iter().map(|k| format!("s{k}")));
    RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(Int64Array::from(k)), Arc::new(s)],
    )
    .unwrap()
}

/// `(pruned, matched)` of DataFusion's `row_groups_pruned_bloom_filter`.
pub(crate) fn bloom_pruning(plan: &dyn ExecutionPlan) -> (usize, usize) {
    let mut acc = (0, 0);
    for m in plan.metrics().iter().flat_map(|m| m.iter()) {
        if let MetricValue::PruningMetrics {
            name,
            pruning_metrics,
        } = m.value()
            && name == "row_groups_pruned_bloom_filter"
        {
            acc.0 += pruning_metrics.pruned();
            acc.1 += pruning_metrics.matched();
        }
    }
    for c in plan.children() {
        let (p, m) = bloom_pruning(c.as_ref());
        acc = (acc.0 + p, acc.1 + m);
    }
    acc
}

/// Rows answered, and the bloom-filter pruning of the scan.
pub(crate) async fn run(ctx: &SessionContext, sql: &str) -> (usize, (usize, usize)) {
    let df = ctx.sql(sql).await.unwrap();
    let plan = df.create_physical_plan().await.unwrap();
    let rows = collect(plan.clone(), ctx.task_ctx()).await.unwrap();
    let rows = rows.iter().map(|b| b.num_rows()).sum();
    (rows, bloom_pruning(plan.as_ref()))
}

#[tokio::test]
async fn datafusion_skips_row_groups_by_a_written_filter() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("s", DataType::Utf8, false),
    ]));
    let batches: Vec<_> = (0..GROUPS).map(|g| interleaved(&schema, g)).collect();
    let n = (GROUPS * PER_GROUP) as u64;
    let (mut kf, mut sf) = (split_block(n), split_block(n));
    let present: Vec<i64> = (0..n as i64).map(|i| 2 * i).collect();
    kf.insert_many_mut(
        &present
            .iter()
            .map(|&k| int_key(k as u64))
            .collect::<Vec<_>>(),
    );
    sf.insert_many_mut(&present.iter().map(|k| format!("s{k}")).collect::<Vec<_>>());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.parquet");
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(PER_GROUP as usize))
        .build();
    let filters = vec![
        ColumnSbbf::new("k", &kf).unwrap(),
        ColumnSbbf::new("s", &sf).unwrap(),
    ];
    std::fs::write(&path, ours(&schema, props, filters, &batches)).unwrap();

    let ctx = SessionContext::new();
    let path = path.to_str().unwrap();
    ctx.register_parquet("t", path, ParquetReadOptions::default())
        .await
        .unwrap();
    let groups = GROUPS as usize;
    // Absent keys the filters rule out, inside every row group's range: all
    // row groups skipped by the filter, none read.
    let absent = (0..).map(|i| n as i64 + 2 * i + 1);
    let absent_k: Vec<i64> = absent
        .clone()
        .filter(|&k| !kf.contains(&int_key(k as u64)))
        .take(5)
        .collect();
    let absent_s: Vec<i64> = absent
        .filter(|&k| !sf.contains(format!("s{k}").as_bytes()))
        .take(5)
        .collect();
    for (k, s) in absent_k.into_iter().zip(absent_s) {
        let q = format!("SELECT k FROM t WHERE k = {k}");
        assert_eq!(run(&ctx, &q).await, (0, (groups, 0)), "{q}");
        let q = format!("SELECT k FROM t WHERE s = 's{s}'");
        assert_eq!(run(&ctx, &q).await, (0, (groups, 0)), "{q}");
    }
    // A present key is never skipped (the filter is the whole column's: it
    // matches in every row group), and its row is found.
    for g in 0..GROUPS {
        let k = 2 * ((PER_GROUP / 2) * GROUPS + g);
        let q = format!("SELECT k FROM t WHERE k = {k}");
        assert_eq!(run(&ctx, &q).await, (1, (0, groups)), "{q}");
        let q = format!("SELECT k FROM t WHERE s = 's{k}'");
        assert_eq!(run(&ctx, &q).await, (1, (0, groups)), "{q}");
    }
    // As EXPLAIN ANALYZE prints it.
    let absent = (n as i64..)
        .find(|&k| k % 2 == 1 && !kf.contains(&int_key(k as u64)))
        .unwrap();
    let q = format!("EXPLAIN ANALYZE SELECT k FROM t WHERE k = {absent}");
    let text = pretty_format_batches(&ctx.sql(&q).await.unwrap().collect().await.unwrap())
        .unwrap()
        .to_string();
    assert!(
        text.contains("row_groups_pruned_bloom_filter=8 total → 0 matched"),
        "{text}"
    );
}

// --- arrow-rs reads it back ------------------------------------------------

/// 1M 16-byte keys in four row groups: each row group's filter, as
/// arrow-rs's reader loads it, is the filterstore filter's bitset and
/// answers every one of 1M present and 1M absent keys as the filter does.
#[test]
fn arrow_rs_reads_back_a_filter_that_answers_as_ours() {
    let keys: Vec<[u8; 16]> = (0..N).map(|i| key(i, true)).collect();
    let mut f = split_block(N);
    f.insert_many_mut(&keys);
    let schema = Arc::new(Schema::new(vec![Field::new(
        "key",
        DataType::FixedSizeBinary(16),
        false,
    )]));
    let column: ArrayRef = Arc::new(FixedSizeBinaryArray::try_from_iter(keys.iter()).unwrap());
    let batch = RecordBatch::try_new(schema.clone(), vec![column]).unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(N as usize / 4))
        .build();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.parquet");
    // The cost, printed beside ArrowWriter's without a filter (not asserted:
    // timings belong to benchmarks).
    let t = std::time::Instant::now();
    let file = std::fs::File::create(dir.path().join("plain.parquet")).unwrap();
    let mut w = ArrowWriter::try_new(file, schema.clone(), Some(props.clone())).unwrap();
    w.write(&batch).unwrap();
    w.into_inner().unwrap().sync_all().unwrap();
    let plain = t.elapsed();
    let t = std::time::Instant::now();
    let file = std::fs::File::create(&path).unwrap();
    let filters = vec![ColumnSbbf::new("key", &f).unwrap()];
    let mut w = SbbfArrowWriter::try_new(file, schema, Some(props), filters).unwrap();
    w.write(&batch).unwrap();
    w.into_inner().unwrap().sync_all().unwrap();
    eprintln!(
        "1M keys, {} KiB filter: SbbfArrowWriter {:?}, ArrowWriter without a filter {plain:?} (write, close, sync)",
        f.params().m() / 8 / 1024,
        t.elapsed()
    );

    let meta = footer(&std::fs::read(&path).unwrap()).0;
    assert_eq!(meta.num_row_groups(), 4);
    let filters: Vec<Sbbf> = (0..4)
        .map(|rg| bloom_filters(&path, rg).remove(0).expect("a filter"))
        .collect();
    let mut bitset = Vec::new();
    filters[0].write_bitset(&mut bitset).unwrap();
    assert_eq!(bitset, f.to_le_bytes()[..(f.params().m() / 8) as usize]);
    for other in &filters[1..] {
        let mut b = Vec::new();
        other.write_bitset(&mut b).unwrap();
        assert_eq!(b, bitset);
    }
    let (found, fp) = agree(&f, &filters[0]);
    assert_eq!(found, N, "a false negative");
    // Sized for 1%: 10,000 expected of 1M, sigma 100.
    assert!(fp < 12_000, "{fp} false positives of {N}");
}

// --- refusals ---------------------------------------------------------------

/// A writer of `schema` with `f` as column `k`'s filter.
fn writer_on_k<'a>(
    out: &'a mut Vec<u8>,
    schema: &SchemaRef,
    f: &BitFilter,
) -> SbbfArrowWriter<&'a mut Vec<u8>> {
    let filters = vec![ColumnSbbf::new("k", f).unwrap()];
    SbbfArrowWriter::try_new(out, schema.clone(), None, filters).unwrap()
}

fn nullable_keys(schema: &SchemaRef, keys: Vec<Option<i64>>) -> RecordBatch {
    RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(keys))]).unwrap()
}

#[test]
fn a_batch_with_a_value_the_filter_lacks_is_refused_and_nothing_of_it_is_written() {
    let f = split_block(1_000);
    for k in 0..1_000u64 {
        f.insert(&int_key(k));
    }
    let absent = (1_000u64..).find(|&k| !f.contains(&int_key(k))).unwrap();
    let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]));
    let mut out = Vec::new();
    let mut w = writer_on_k(&mut out, &schema, &f);
    let mut keys: Vec<Option<i64>> = (0..1_000).map(Some).collect();
    keys[3] = None;
    keys[700] = Some(absent as i64);
    let err = w.write(&nullable_keys(&schema, keys.clone())).unwrap_err();
    match udf_error(&err) {
        BloomUdfError::KeyNotInFilter { column, row } => assert_eq!((&**column, *row), ("k", 700)),
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("nothing of the batch was written"));
    // Nulls are never checked (Parquet's writer hashes none); the writer
    // goes on, and the refused batch is not in the file.
    keys[700] = None;
    w.write(&nullable_keys(&schema, keys)).unwrap();
    let meta = w.close().unwrap();
    assert_eq!(meta.file_metadata().num_rows(), 1_000);
    assert_every_byte_referenced(&out);
}

/// A `BloomRead` of a split-block filter one block over Parquet's limit,
/// which fails the test if a word of it is read.
struct OverLimit(FilterParams);

impl BloomRead for OverLimit {
    fn params(&self) -> &FilterParams {
        &self.0
    }
    fn word(&self, _: usize) -> u64 {
        panic!("a word of a filter that must be refused by its size was read")
    }
}

#[test]
fn what_a_filter_cannot_serve_is_refused_before_a_byte_is_written() {
    let inner = Fields::from(vec![Field::new("a", DataType::Int64, false)]);
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("n32", DataType::Int32, false),
        Field::new("x", DataType::Float64, false),
        Field::new("st", DataType::Struct(inner.clone()), false),
    ]));
    let f = split_block(100);
    let refused = |filters: Vec<ColumnSbbf>| {
        let mut out = Vec::new();
        let err = SbbfArrowWriter::try_new(&mut out, schema.clone(), None, filters)
            .err()
            .expect("refused");
        assert!(out.is_empty(), "bytes written before the refusal");
        assert!(matches!(
            udf_error(&err),
            BloomUdfError::ParquetColumn { .. }
        ));
        err.to_string()
    };
    for (column, says) in [
        ("n32", "4-byte values"),
        ("x", "no key encoding"),
        ("st", "no key encoding"),
        ("absent", "no such top-level column"),
    ] {
        let err = refused(vec![ColumnSbbf::new(column, &f).unwrap()]);
        assert!(err.contains(column) && err.contains(says), "{err}");
    }
    let twice = vec![ColumnSbbf::new("k", &f).unwrap(); 2];
    assert!(refused(twice).contains("two filters"));

    // Filters: another layout, and a split-block one over 128 MiB.
    let blocked =
        FilterParams::for_capacity(100, 0.01, Layout::Blocked, HashSpec::xxh3(1)).unwrap();
    let err = ColumnSbbf::new("k", &BitFilter::new(blocked).unwrap()).unwrap_err();
    assert!(err.to_string().contains("Layout::SplitBlock"), "{err}");
    let m = 8 * (BITSET_MAX_LENGTH as u64 + 32);
    let huge = OverLimit(FilterParams::new(Layout::SplitBlock, m, 8, HashSpec::xxh64()).unwrap());
    let err = ColumnSbbf::new("k", &huge).unwrap_err().to_string();
    assert!(err.contains("128 MiB"), "{err}");

    // Batches that do not match the writer's schema.
    let mut out = Vec::new();
    let mut w = writer_on_k(&mut out, &schema, &f);
    let other = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Utf8, false),
        Field::new("n32", DataType::Int32, false),
        Field::new("x", DataType::Float64, false),
        Field::new("st", DataType::Struct(inner.clone()), false),
    ]));
    let st: ArrayRef = Arc::new(StructArray::new(
        inner,
        vec![Arc::new(Int64Array::from(vec![1]))],
        None,
    ));
    let batch = RecordBatch::try_new(
        other,
        vec![
            Arc::new(StringArray::from(vec!["1"])),
            Arc::new(Int32Array::from(vec![1])),
            Arc::new(Float64Array::from(vec![1.0])),
            st,
        ],
    )
    .unwrap();
    let err = w.write(&batch).unwrap_err().to_string();
    assert!(err.contains("Utf8") && err.contains("Int64"), "{err}");
    let err = w
        .write(&batch.project(&[0]).unwrap())
        .unwrap_err()
        .to_string();
    assert!(err.contains("1 columns"), "{err}");
}
