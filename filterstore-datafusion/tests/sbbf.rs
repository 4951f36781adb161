//! Parquet split-block Bloom filter interop: our key encoding is the one
//! Parquet's writer hashes (a filter read from a Parquet file answers our
//! keys), and bit filters refuse conversion with a clear error.

use datafusion::arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::ReaderProperties;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
use datafusion::parquet::file::serialized_reader::ReadOptionsBuilder;
use filterstore::{BitFilter, BloomRead, FilterParams, HashSpec, Layout};
use filterstore_datafusion::sbbf::{export_bit_filter, import_sbbf, sbbf_contains, sbbf_from_keys};
use std::sync::Arc;

fn parquet_bloom_filters(batch: RecordBatch) -> Vec<datafusion::parquet::bloom_filter::Sbbf> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.parquet");
    let props = WriterProperties::builder()
        .set_bloom_filter_enabled(true)
        .build();
    let mut w = ArrowWriter::try_new(
        std::fs::File::create(&path).unwrap(),
        batch.schema(),
        Some(props),
    )
    .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let opts = ReadOptionsBuilder::new()
        .with_reader_properties(
            ReaderProperties::builder()
                .set_read_bloom_filter(true)
                .build(),
        )
        .build();
    let reader =
        SerializedFileReader::new_with_options(std::fs::File::open(&path).unwrap(), opts).unwrap();
    let rg = reader.get_row_group(0).unwrap();
    (0..batch.num_columns())
        .map(|c| {
            rg.get_column_bloom_filter(c)
                .cloned()
                .expect("bloom filter written")
        })
        .collect()
}

#[test]
fn parquet_writer_filters_answer_our_encoding() {
    let ints: ArrayRef = Arc::new(Int64Array::from_iter_values(
        (0..5_000).map(|i| i * 31 - 70_000),
    ));
    let strs: ArrayRef = Arc::new(StringArray::from_iter_values(
        (0..5_000).map(|i| format!("key-{i}")),
    ));
    let schema = Arc::new(Schema::new(vec![
        Field::new("i", DataType::Int64, false),
        Field::new("s", DataType::Utf8, false),
    ]));
    let batch = RecordBatch::try_new(schema, vec![ints.clone(), strs.clone()]).unwrap();
    let filters = parquet_bloom_filters(batch);
    for (col, keys) in [ints, strs].iter().enumerate() {
        let hits = sbbf_contains(&filters[col], keys).unwrap();
        assert_eq!(
            hits.true_count(),
            keys.len(),
            "column {col}: Parquet's filter misses our encoding"
        );
        let ours = sbbf_from_keys(keys, 5_000, 0.01).unwrap();
        assert_eq!(sbbf_contains(&ours, keys).unwrap().true_count(), keys.len());
    }
}

#[test]
fn nulls_give_null() {
    let keys: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), None, Some(3)]));
    let s = sbbf_from_keys(&keys, 10, 0.01).unwrap();
    let hits = sbbf_contains(&s, &keys).unwrap();
    assert!(hits.is_null(1) && hits.value(0) && hits.value(2));
}

#[test]
fn bit_filters_refuse_conversion_clearly() {
    for layout in [Layout::Blocked, Layout::Standard] {
        let f = BitFilter::new(
            FilterParams::for_capacity(1_000, 0.01, layout, HashSpec::xxh3(3)).unwrap(),
        )
        .unwrap();
        let err = export_bit_filter(&f).unwrap_err().to_string();
        assert!(
            err.contains("XXH64") && err.contains("sbbf_from_keys"),
            "{err}"
        );
        let keys: ArrayRef = Arc::new(Int64Array::from_iter_values(0..10));
        let mut bytes = Vec::new();
        sbbf_from_keys(&keys, 10, 0.01)
            .unwrap()
            .write(&mut bytes)
            .unwrap();
        let err = import_sbbf(&bytes, f.params()).unwrap_err().to_string();
        assert!(err.contains("cannot be converted"), "{err}");
        let err = import_sbbf(&bytes[..bytes.len() - 3], f.params())
            .unwrap_err()
            .to_string();
        assert!(err.contains("malformed"), "{err}");
    }
}
