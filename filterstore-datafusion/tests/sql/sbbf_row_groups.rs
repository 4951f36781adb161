//! `SbbfArrowWriter` with one filter per row group
//! (`ColumnSbbf::per_row_group`): every non-null value of a row group is in
//! that row group's filter as arrow-rs's reader loads it (0 false
//! negatives, row groups split by rows, by bytes and by `flush`), each
//! filter is sized for its row group's distinct values, and DataFusion's
//! bloom-filter pruning skips the row groups that lack a present key, where
//! a filter per file skips none.

use crate::sbbf::bloom_filters;
use crate::sbbf_write::{assert_every_byte_referenced, footer, plain, run, split_block};
use datafusion::arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef, UInt64Type};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use filterstore::{FilterParams, HashSpec, Layout};
use filterstore_datafusion::int_key;
use filterstore_datafusion::sbbf::{ColumnSbbf, SbbfArrowWriter, SbbfGranularity};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

const FPP: f64 = 0.01;

/// The bitset bytes a row group of `distinct` values gets at [`FPP`].
fn sized_for(distinct: usize) -> usize {
    let p = FilterParams::for_capacity(
        distinct.max(1) as u64,
        FPP,
        Layout::SplitBlock,
        HashSpec::xxh64(),
    )
    .unwrap();
    (p.m() / 8) as usize
}

/// A session that reads Parquet Bloom filters and prunes with them (both
/// DataFusion's defaults, set here so that the tests say what they rely on).
fn session() -> SessionContext {
    let config = SessionConfig::new()
        .set_bool("datafusion.execution.parquet.bloom_filter_on_read", true)
        .set_bool("datafusion.execution.parquet.pruning", true);
    SessionContext::new_with_config(config)
}

/// The mean plus five standard deviations of the false positives of
/// `trials` probes of filters sized for [`FPP`]: a bound a correct filter
/// stays under (the data is fixed, so the count is too) and a filter that
/// prunes nothing far exceeds.
fn fp_bound(trials: usize) -> f64 {
    let t = trials as f64;
    t * FPP + 5.0 * (t * FPP * (1.0 - FPP)).sqrt()
}

// --- every value is in its row group's filter ----------------------------

const KEYS: u64 = 100_000;

fn mixed_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("u", DataType::UInt64, true),
        Field::new("s", DataType::Utf8, true),
    ]))
}

/// Batches of random sizes (so that they straddle row groups) of random
/// keys with repeats and about 5% nulls: `k` is `3x` (negative too), `u`
/// `2x`, some with the top bit set, `s` `"s<x>"`, for `x < KEYS`. Keys of
/// the other residues (`3x + 1`, `2x + 1`, `"t<x>"`) are absent.
fn mixed_batches(rng: &mut StdRng, rows: usize) -> Vec<RecordBatch> {
    let schema = mixed_schema();
    let mut out = Vec::new();
    let mut left = rows;
    while left > 0 {
        let n = rng.gen_range(1..=2_500).min(left);
        left -= n;
        let mut k = Vec::with_capacity(n);
        let mut u = Vec::with_capacity(n);
        let mut s = Vec::with_capacity(n);
        for _ in 0..n {
            let x = rng.gen_range(0..KEYS);
            let top = if rng.gen_bool(0.1) { 1 << 63 } else { 0 };
            k.push(rng.gen_bool(0.95).then(|| 3 * x as i64 - 150_000));
            u.push(rng.gen_bool(0.95).then(|| (2 * x) | top));
            s.push(rng.gen_bool(0.95).then(|| format!("s{x}")));
        }
        out.push(
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int64Array::from(k)),
                    Arc::new(UInt64Array::from(u)),
                    Arc::new(StringArray::from(s)),
                ],
            )
            .unwrap(),
        );
    }
    out
}

/// A file of `batches` with a row-group filter on every column, the row
/// group in progress closed after batch `flush_after`.
fn per_row_group_file(
    props: WriterProperties,
    batches: &[RecordBatch],
    flush_after: usize,
) -> Vec<u8> {
    let filters = ["k", "u", "s"]
        .iter()
        .map(|c| ColumnSbbf::per_row_group(*c, FPP).unwrap())
        .collect();
    let mut out = Vec::new();
    let mut w = SbbfArrowWriter::try_new(&mut out, mixed_schema(), Some(props), filters).unwrap();
    for (i, b) in batches.iter().enumerate() {
        w.write(b).unwrap();
        if i == flush_after {
            w.flush().unwrap();
        }
    }
    w.close().unwrap();
    out
}

/// What checking one file found.
#[derive(Debug, Default)]
struct Checked {
    groups: usize,
    rows: usize,
    false_negatives: usize,
    /// Filters not sized for their row group's distinct values.
    missized: usize,
    absent_probes: usize,
    absent_pruned: usize,
}

/// Reads each row group back with arrow-rs and checks every non-null value
/// against the row group's filters as arrow-rs's reader loads them (what
/// a reader probes before skipping the row group), each filter's size
/// against the row group's distinct values, and 2,000 absent keys per
/// column against every row group's filter.
fn check_every_row_group(path: &std::path::Path) -> Checked {
    let meta = footer(&std::fs::read(path).unwrap()).0;
    let mut c = Checked {
        groups: meta.num_row_groups(),
        ..Checked::default()
    };
    let mut offsets = HashSet::new();
    for rg in 0..c.groups {
        let filters: Vec<_> = bloom_filters(path, rg)
            .into_iter()
            .map(|f| f.expect("every column chunk has a filter"))
            .collect();
        for col in 0..3 {
            let at = meta.row_group(rg).column(col).bloom_filter_offset();
            assert!(offsets.insert(at), "row group {rg} shares a filter");
        }
        let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap())
            .unwrap()
            .with_row_groups(vec![rg])
            .build()
            .unwrap();
        let mut distinct: [HashSet<Vec<u8>>; 3] = Default::default();
        for batch in reader {
            let batch = batch.unwrap();
            c.rows += batch.num_rows();
            let k = batch.column(0).as_primitive::<Int64Type>();
            let u = batch.column(1).as_primitive::<UInt64Type>();
            let s = batch.column(2).as_string::<i32>();
            for i in 0..batch.num_rows() {
                let mut present = |col: usize, bytes: Option<Vec<u8>>| {
                    if let Some(bytes) = bytes {
                        if !filters[col].check(&bytes[..]) {
                            c.false_negatives += 1;
                        }
                        distinct[col].insert(bytes);
                    }
                };
                present(
                    0,
                    k.is_valid(i).then(|| int_key(k.value(i) as u64).to_vec()),
                );
                present(1, u.is_valid(i).then(|| int_key(u.value(i)).to_vec()));
                present(2, s.is_valid(i).then(|| s.value(i).as_bytes().to_vec()));
            }
        }
        for (col, f) in filters.iter().enumerate() {
            if f.num_blocks() * 32 != sized_for(distinct[col].len()) {
                c.missized += 1;
            }
        }
        for x in 0..2_000 {
            let absent = [
                int_key((3 * x as i64 - 150_000 + 1) as u64).to_vec(),
                int_key(2 * x + 1).to_vec(),
                format!("t{x}").into_bytes(),
            ];
            for (col, key) in absent.iter().enumerate() {
                c.absent_probes += 1;
                if !filters[col].check(&key[..]) {
                    c.absent_pruned += 1;
                }
            }
        }
    }
    c
}

#[tokio::test]
async fn every_value_is_in_its_row_groups_filter() {
    let mut rng = StdRng::seed_from_u64(37);
    let rows = 48_000;
    let batches = mixed_batches(&mut rng, rows);
    let dir = tempfile::tempdir().unwrap();
    let by_rows = WriterProperties::builder()
        .set_max_row_group_row_count(Some(1_000))
        .build();
    let by_bytes = WriterProperties::builder()
        .set_max_row_group_row_count(None)
        .set_max_row_group_bytes(Some(64 * 1024))
        .build();
    for (name, props) in [("rows", by_rows), ("bytes", by_bytes)] {
        let path = dir.path().join(format!("{name}.parquet"));
        let file = per_row_group_file(props, &batches, 7);
        assert_every_byte_referenced(&file);
        std::fs::write(&path, &file).unwrap();
        let c = check_every_row_group(&path);
        eprintln!("row groups split by {name}: {c:?}");
        assert!(c.groups > 10, "{name}: {} row groups", c.groups);
        assert_eq!(c.rows, rows, "{name}");
        assert_eq!(
            c.false_negatives, 0,
            "{name}: a value missing from its row group's filter"
        );
        assert_eq!(
            c.missized, 0,
            "{name}: filters not sized for their row group"
        );
        let fps = c.absent_probes - c.absent_pruned;
        assert!(
            (fps as f64) < fp_bound(c.absent_probes),
            "{name}: {fps} of {} absent probes passed",
            c.absent_probes
        );
    }

    // DataFusion finds every row of sampled present keys through the file
    // split by rows (its row groups pruned by their statistics, then by
    // these filters).
    let mut count_k: HashMap<i64, usize> = HashMap::new();
    let mut count_s: HashMap<String, usize> = HashMap::new();
    for b in &batches {
        let k = b.column(0).as_primitive::<Int64Type>();
        let s = b.column(2).as_string::<i32>();
        for i in 0..b.num_rows() {
            if k.is_valid(i) {
                *count_k.entry(k.value(i)).or_default() += 1;
            }
            if s.is_valid(i) {
                *count_s.entry(s.value(i).to_string()).or_default() += 1;
            }
        }
    }
    let ctx = session();
    let path = dir.path().join("rows.parquet");
    ctx.register_parquet("t", path.to_str().unwrap(), ParquetReadOptions::default())
        .await
        .unwrap();
    let mut ks: Vec<_> = count_k.into_iter().collect();
    ks.sort_unstable();
    let mut ss: Vec<_> = count_s.into_iter().collect();
    ss.sort_unstable();
    let groups = footer(&std::fs::read(&path).unwrap()).0.num_row_groups();
    let mut pruned = 0;
    for _ in 0..25 {
        let (k, n) = ks[rng.gen_range(0..ks.len())];
        let (rows, (p, m)) = run(&ctx, &format!("SELECT k FROM t WHERE k = {k}")).await;
        assert!(
            rows == n && p + m <= groups,
            "k = {k}: {rows} rows of {n}, {p} + {m}"
        );
        pruned += p;
        let (s, n) = &ss[rng.gen_range(0..ss.len())];
        let (rows, (p, m)) = run(&ctx, &format!("SELECT s FROM t WHERE s = '{s}'")).await;
        assert!(
            rows == *n && p + m <= groups,
            "s = {s}: {rows} rows of {n}, {p} + {m}"
        );
        pruned += p;
    }
    eprintln!(
        "50 present keys over {groups} row groups: {pruned} row groups pruned by bloom filter"
    );
    assert!(pruned > 0);
}

// --- DataFusion prunes the row groups that lack a present key -------------

const GROUPS: i64 = 32;
const PER_GROUP: i64 = 1_000;

/// Row `j` of row group `g` holds key `2(jG + g)`: every row group spans
/// the whole key range, so its statistics rule out no key inside it (from
/// `2G` to `2(PER_GROUP - 1)G`), each present key is in exactly one row
/// group, and the odd keys are absent.
fn interleaved(schema: &SchemaRef, g: i64) -> RecordBatch {
    let k: Vec<i64> = (0..PER_GROUP).map(|j| 2 * (j * GROUPS + g)).collect();
    RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(k))]).unwrap()
}

#[tokio::test]
async fn a_present_key_prunes_the_row_groups_without_it_only_with_row_group_filters() {
    let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
    let batches: Vec<_> = (0..GROUPS).map(|g| interleaved(&schema, g)).collect();
    let n = (GROUPS * PER_GROUP) as u64;
    let mut whole = split_block(n);
    for b in &batches {
        for k in b.column(0).as_primitive::<Int64Type>().values() {
            whole.insert_mut(&int_key(*k as u64));
        }
    }
    let props = || {
        WriterProperties::builder()
            .set_max_row_group_row_count(Some(PER_GROUP as usize))
            .build()
    };
    let per_file = vec![ColumnSbbf::new("k", &whole).unwrap()];
    let per_group = vec![ColumnSbbf::per_row_group("k", FPP).unwrap()];
    assert_eq!(per_file[0].granularity(), SbbfGranularity::PerFile);
    let files = [
        (
            "per_file",
            crate::sbbf_write::ours(&schema, props(), per_file, &batches),
        ),
        (
            "per_group",
            crate::sbbf_write::ours(&schema, props(), per_group, &batches),
        ),
        // arrow-rs's own filters, per row group at the same rate (sizes only).
        (
            "arrow-rs",
            plain(
                &schema,
                WriterProperties::builder()
                    .set_max_row_group_row_count(Some(PER_GROUP as usize))
                    .set_bloom_filter_enabled(true)
                    .set_bloom_filter_fpp(FPP)
                    .build(),
                &batches,
            ),
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let ctx = session();
    for (name, file) in &files {
        let meta = footer(file).0;
        assert_eq!(meta.num_row_groups(), GROUPS as usize);
        let lengths: HashSet<i32> = meta
            .row_groups()
            .iter()
            .map(|rg| rg.column(0).bloom_filter_length().unwrap())
            .collect();
        let offsets: HashSet<i64> = meta
            .row_groups()
            .iter()
            .map(|rg| rg.column(0).bloom_filter_offset().unwrap())
            .collect();
        eprintln!(
            "filters per {name}: {} distinct, each {lengths:?} bytes with its header; file {} bytes",
            offsets.len(),
            file.len()
        );
        let path = dir.path().join(format!("{name}.parquet"));
        std::fs::write(&path, file).unwrap();
        if *name == "per_group" {
            assert_eq!(offsets.len(), GROUPS as usize);
            // Each row group's filter is sized for its 1,000 keys at 1%.
            let rg = bloom_filters(&path, 5).remove(0).unwrap();
            assert_eq!(rg.num_blocks() * 32, sized_for(PER_GROUP as usize));
        }
        if *name != "arrow-rs" {
            ctx.register_parquet(*name, path.to_str().unwrap(), ParquetReadOptions::default())
                .await
                .unwrap();
        }
    }

    let groups = GROUPS as usize;
    let mut rng = StdRng::seed_from_u64(37);
    let queries = 64;
    let (mut fps, mut exact) = (0, None);
    let mut keys = Vec::new();
    for _ in 0..queries {
        let k = 2 * rng.gen_range(GROUPS..(PER_GROUP - 1) * GROUPS);
        keys.push(k);
        // A filter per file holds every key of the file: no row group pruned.
        let q = format!("SELECT k FROM per_file WHERE k = {k}");
        assert_eq!(run(&ctx, &q).await, (1, (0, groups)), "{q}");
        // A filter per row group: all but the one holding the key, bar
        // false positives.
        let q = format!("SELECT k FROM per_group WHERE k = {k}");
        let (rows, (pruned, matched)) = run(&ctx, &q).await;
        assert_eq!((rows, pruned + matched), (1, groups), "{q}");
        assert!(
            matched >= 1,
            "{q}: the row group holding the key was pruned"
        );
        fps += matched - 1;
        if matched == 1 {
            exact = Some(k);
        }
    }
    let trials = queries * (groups - 1);
    eprintln!(
        "{queries} present keys, {groups} row groups: per file 0 pruned, per row group {} pruned ({fps} false positives of {trials})",
        trials - fps
    );
    assert!((fps as f64) < fp_bound(trials), "{fps} of {trials}");

    // Absent keys: every row group pruned by either, bar false positives.
    let mut absent_fps = 0;
    for i in 0..16 {
        let k = 2 * rng.gen_range(GROUPS..(PER_GROUP - 1) * GROUPS) + 1;
        keys.push(k);
        let (rows, (pruned, matched)) =
            run(&ctx, &format!("SELECT k FROM per_group WHERE k = {k}")).await;
        assert_eq!((rows, pruned + matched), (0, groups), "k = {k} ({i})");
        absent_fps += matched;
    }
    assert!((absent_fps as f64) < fp_bound(16 * groups), "{absent_fps}");

    // As EXPLAIN ANALYZE prints it.
    let k = exact.expect("a present key without a false positive");
    let q = format!("EXPLAIN ANALYZE SELECT k FROM per_group WHERE k = {k}");
    let text = pretty_format_batches(&ctx.sql(&q).await.unwrap().collect().await.unwrap())
        .unwrap()
        .to_string();
    assert!(
        text.contains("row_groups_pruned_bloom_filter=32 total → 1 matched"),
        "{text}"
    );

    duckdb_prunes_the_same(dir.path(), &keys[..queries], &keys[queries..]);
}

/// DuckDB on the files and keys of the test above: with filters per row
/// group it skips every row group without a present key (bar false
/// positives) and every row group for an absent key; with one filter per
/// file, none for a present key. Its scan returns each present key once.
fn duckdb_prunes_the_same(dir: &std::path::Path, present: &[i64], absent: &[i64]) {
    let groups = GROUPS as usize;
    let keys = [present, absent].concat();
    let Some(found) = crate::duckdb::probe(&dir.join("per_group.parquet"), "k", &keys) else {
        return;
    };
    let (mut fps, mut absent_fps) = (0, 0);
    for (i, (k, kept)) in keys.iter().zip(&found.kept).enumerate() {
        let is_present = i < present.len();
        assert_eq!(
            found.rows[i],
            u64::from(is_present),
            "DuckDB's scan, k = {k}"
        );
        if is_present {
            let holder = ((k / 2) % GROUPS) as usize;
            assert!(
                kept.contains(&holder),
                "DuckDB skipped row group {holder}, which holds k = {k}"
            );
            fps += kept.len() - 1;
        } else {
            absent_fps += kept.len();
        }
    }
    let trials = present.len() * (groups - 1);
    eprintln!(
        "DuckDB {}: {} present keys, per row group {} of {trials} pruned; {} absent keys, {} of {} pruned",
        found.version,
        present.len(),
        trials - fps,
        absent.len(),
        absent.len() * groups - absent_fps,
        absent.len() * groups
    );
    assert!((fps as f64) < fp_bound(trials), "{fps} of {trials}");
    assert!(
        (absent_fps as f64) < fp_bound(absent.len() * groups),
        "{absent_fps}"
    );

    let found = crate::duckdb::probe(&dir.join("per_file.parquet"), "k", present)
        .expect("DuckDB ran a moment ago");
    for (k, kept) in present.iter().zip(&found.kept) {
        assert_eq!(
            kept.len(),
            groups,
            "one filter per file prunes nothing (k = {k})"
        );
    }
}
