//! `SbbfArrowWriter`'s file is `ArrowWriter`'s (byte for byte without
//! filters; with them, the same row groups, page indexes and footer but for
//! the filters' offsets), every byte of it referenced; an output that fails
//! at any byte is an error.

use crate::sbbf_write::{assert_every_byte_referenced, footer, ours, plain, split_block};
use datafusion::arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::parquet::file::metadata::{
    ColumnChunkMetaData, KeyValue, PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader,
};
use datafusion::parquet::file::properties::{
    BloomFilterPosition, WriterProperties, WriterPropertiesBuilder,
};
use filterstore::BitFilter;
use filterstore_datafusion::int_key;
use filterstore_datafusion::sbbf::{export_bit_filter, ColumnSbbf, SbbfArrowWriter};
use std::io::{self, Write};
use std::sync::Arc;

fn sample() -> (SchemaRef, Vec<RecordBatch>) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("s", DataType::Utf8, true),
        Field::new("x", DataType::Float64, false),
    ]));
    let batches = (0..3)
        .map(|b| {
            let k: Vec<i64> = (0..3_000).map(|i| b * 3_000 + i).collect();
            let s = k
                .iter()
                .map(|k| (k % 7 != 0).then(|| format!("v{}", k * 13)));
            let s = StringArray::from_iter(s);
            let x = Float64Array::from_iter_values(k.iter().map(|&k| k as f64 / 3.0));
            RecordBatch::try_new(
                schema.clone(),
                vec![Arc::new(Int64Array::from(k)), Arc::new(s), Arc::new(x)],
            )
            .unwrap()
        })
        .collect();
    (schema, batches)
}

fn sample_filter(batches: &[RecordBatch]) -> BitFilter {
    let mut f = split_block(9_000);
    for b in batches {
        let k = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        let keys: Vec<_> = k.values().iter().map(|&k| int_key(k as u64)).collect();
        f.insert_many_mut(&keys);
    }
    f
}

/// Row groups of 2,000 rows, page statistics, key-value metadata.
fn props() -> WriterPropertiesBuilder {
    WriterProperties::builder()
        .set_max_row_group_row_count(Some(2_000))
        .set_key_value_metadata(Some(vec![KeyValue::new(
            "origin".into(),
            "test".to_string(),
        )]))
}

/// Without filters, the footer it rewrites is the one `ArrowWriter` wrote:
/// the same bytes, page indexes, statistics, arrow-rs's own filters and
/// key-value metadata included.
#[test]
fn without_filters_the_file_is_arrow_writers_byte_for_byte() {
    let (schema, batches) = sample();
    let props = props().set_bloom_filter_enabled(true).build();
    let theirs = plain(&schema, props.clone(), &batches);
    assert_eq!(ours(&schema, props, vec![], &batches), theirs);
}

/// Chunk metadata without the offsets of what follows the row groups.
fn placeless(c: &ColumnChunkMetaData) -> ColumnChunkMetaData {
    c.clone()
        .into_builder()
        .set_bloom_filter_offset(None)
        .set_bloom_filter_length(None)
        .set_column_index_offset(None)
        .set_column_index_length(None)
        .set_offset_index_offset(None)
        .set_offset_index_length(None)
        .build()
        .unwrap()
}

fn with_page_indexes(file: &[u8]) -> ParquetMetaData {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.parquet");
    std::fs::write(&path, file).unwrap();
    ParquetMetaDataReader::new()
        .with_page_index_policy(PageIndexPolicy::Required)
        .parse_and_finish(&std::fs::File::open(&path).unwrap())
        .unwrap()
}

/// With arrow-rs's filters on for every column and a filterstore filter on
/// `k`: `k`'s chunks point at ours (one copy), arrow-rs builds none for `k`
/// (every byte is referenced), keeps its own for the other columns, and
/// the row groups, page indexes and footer are those `ArrowWriter` writes
/// when `k` alone has no filter; both filter positions.
#[test]
fn with_filters_the_rest_of_the_file_is_arrow_writers() {
    let (schema, batches) = sample();
    let f = sample_filter(&batches);
    for position in [BloomFilterPosition::AfterRowGroup, BloomFilterPosition::End] {
        let props = props().set_bloom_filter_position(position);
        let filters = vec![ColumnSbbf::new("k", &f).unwrap()];
        let file = ours(
            &schema,
            props.clone().set_bloom_filter_enabled(true).build(),
            filters,
            &batches,
        );
        // What ArrowWriter writes with filters on `s` and `x` only.
        let reference = plain(
            &schema,
            props
                .set_column_bloom_filter_enabled("s".into(), true)
                .set_column_bloom_filter_enabled("x".into(), true)
                .build(),
            &batches,
        );
        assert_every_byte_referenced(&file);
        let (meta, _) = footer(&file);
        let at = meta.row_group(0).column(0).bloom_filter_offset().unwrap() as usize;
        let mut sbbf = Vec::new();
        export_bit_filter(&f).unwrap().write(&mut sbbf).unwrap();
        assert_eq!(&file[at..at + sbbf.len()], &sbbf[..], "{position:?}");
        assert_eq!(&file[..at], &reference[..at], "{position:?}");
        let (ours_meta, theirs) = (with_page_indexes(&file), with_page_indexes(&reference));
        assert_eq!(ours_meta.file_metadata(), theirs.file_metadata());
        assert_eq!(ours_meta.column_index(), theirs.column_index());
        assert_eq!(ours_meta.offset_index(), theirs.offset_index());
        assert_eq!(ours_meta.num_row_groups(), 5);
        for (a, b) in ours_meta.row_groups().iter().zip(theirs.row_groups()) {
            assert_eq!(a.num_rows(), b.num_rows());
            let chunk = a.column(0);
            assert_eq!(chunk.bloom_filter_offset(), Some(at as i64));
            assert_eq!(chunk.bloom_filter_length(), Some(sbbf.len() as i32));
            assert!(b.column(0).bloom_filter_offset().is_none());
            for (x, y) in a.columns().iter().zip(b.columns()) {
                assert_eq!(placeless(x), placeless(y), "{position:?}");
            }
            for c in 1..3 {
                let (x, y) = (a.column(c), b.column(c));
                assert_eq!(x.bloom_filter_length(), y.bloom_filter_length());
                let (x, y) = (x.bloom_filter_offset(), y.bloom_filter_offset());
                assert!(x.is_some() && y.is_some(), "arrow-rs's filter kept");
                let x = x.unwrap() as usize;
                let y = y.unwrap() as usize;
                let len = a.column(c).bloom_filter_length().unwrap() as usize;
                assert_eq!(file[x..x + len], reference[y..y + len]);
            }
        }
    }
}

#[test]
fn a_file_without_rows_gets_no_filter() {
    let (schema, batches) = sample();
    let filters = vec![ColumnSbbf::new("k", &sample_filter(&batches)).unwrap()];
    let props = props().build();
    let file = ours(&schema, props.clone(), filters, &[]);
    assert_eq!(file, plain(&schema, props, &[]));
    assert_eq!(footer(&file).0.num_row_groups(), 0);
    assert_every_byte_referenced(&file);
}

// --- a failing output ----------------------------------------------------------

/// Takes `limit` bytes, then fails every write ("device full"); flushes
/// fail if `fail_flush`.
struct Failing {
    data: Vec<u8>,
    limit: usize,
    fail_flush: bool,
}

impl Write for Failing {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let room = self.limit - self.data.len();
        if room == 0 {
            return Err(io::Error::other("injected: device full"));
        }
        let n = room.min(buf.len());
        self.data.extend_from_slice(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        if self.fail_flush {
            return Err(io::Error::other("injected: flush failed"));
        }
        Ok(())
    }
}

/// The whole write, stopping at the first error: the bytes taken, and
/// whether it failed.
fn write_through(out: Failing, f: &BitFilter) -> (Vec<u8>, bool) {
    let (schema, batches) = sample();
    let props = props().set_bloom_filter_enabled(true).build();
    let filters = vec![ColumnSbbf::new("k", f).unwrap()];
    let mut w = match SbbfArrowWriter::try_new(out, schema, Some(props), filters) {
        Ok(w) => w,
        Err(_) => return (Vec::new(), true),
    };
    for b in &batches {
        if w.write(b).is_err() {
            return (Vec::new(), true);
        }
    }
    match w.into_inner() {
        Ok(out) => (out.data, false),
        Err(_) => (Vec::new(), true),
    }
}

/// An output that fails at any byte, or fails to flush, makes a call
/// return an error (no panic, no hang, no "done"); one that takes every
/// byte gets the whole file.
#[test]
fn a_failing_output_is_an_error_at_every_byte() {
    let (_, batches) = sample();
    let f = sample_filter(&batches);
    let all = Failing {
        data: Vec::new(),
        limit: usize::MAX,
        fail_flush: false,
    };
    let (whole, failed) = write_through(all, &f);
    assert!(!failed);
    assert_every_byte_referenced(&whole);
    let n = whole.len();
    let (meta, footer_start) = footer(&whole);
    let filter_at = meta.row_group(0).column(0).bloom_filter_offset().unwrap() as usize;
    let mut limits: Vec<usize> = (0..n).step_by(n / 64).collect();
    limits.extend([
        filter_at,
        filter_at + 20,
        footer_start,
        footer_start + 1,
        n - 8,
        n - 1,
    ]);
    for limit in limits {
        let out = Failing {
            data: Vec::new(),
            limit,
            fail_flush: false,
        };
        assert!(
            write_through(out, &f).1,
            "no error with {limit} of {n} bytes taken"
        );
    }
    let exact = Failing {
        data: Vec::new(),
        limit: n,
        fail_flush: false,
    };
    assert_eq!(write_through(exact, &f), (whole, false));
    let no_flush = Failing {
        data: Vec::new(),
        limit: usize::MAX,
        fail_flush: true,
    };
    assert!(
        write_through(no_flush, &f).1,
        "a failed flush went unreported"
    );
}
