//! Parquet split-block Bloom filter interop: our key encoding is the one
//! Parquet's writer hashes (a filter read from a Parquet file answers our
//! keys); a split-block filter and arrow-rs's `Sbbf` convert both ways and
//! answer exactly alike (1M keys present and 1M absent); the other layouts
//! refuse conversion with a clear error.

use datafusion::arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::bloom_filter::Sbbf;
use datafusion::parquet::file::properties::ReaderProperties;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
use datafusion::parquet::file::serialized_reader::ReadOptionsBuilder;
use filterstore::{BitFilter, BloomRead, FilterParams, HashSpec, Layout};
use filterstore_datafusion::sbbf::{
    export_bit_filter, import_sbbf, import_sbbf_split_block, sbbf_contains, sbbf_from_keys,
};
use std::sync::Arc;

fn parquet_bloom_filters(batch: RecordBatch) -> Vec<Sbbf> {
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
    bloom_filters(&path, 0)
        .into_iter()
        .map(|f| f.expect("bloom filter written"))
        .collect()
}

/// The Bloom filter of each column chunk of row group `rg` in the Parquet
/// file at `path`, as arrow-rs's reader loads it.
pub(crate) fn bloom_filters(path: &std::path::Path, rg: usize) -> Vec<Option<Sbbf>> {
    let opts = ReadOptionsBuilder::new()
        .with_reader_properties(
            ReaderProperties::builder()
                .set_read_bloom_filter(true)
                .build(),
        )
        .build();
    let reader =
        SerializedFileReader::new_with_options(std::fs::File::open(path).unwrap(), opts).unwrap();
    let rg = reader.get_row_group(rg).unwrap();
    (0..rg.num_columns())
        .map(|c| rg.get_column_bloom_filter(c).cloned())
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

/// The layouts other than split-block cannot be converted, either way.
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

/// 16-byte keys `i` (present for `i < n`, the low bit of the first byte
/// clear) and absent ones (set), from a fixed generator.
pub(crate) fn key(i: u64, present: bool) -> [u8; 16] {
    let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5851_f42d_4c95_7f2d;
    x ^= x >> 29;
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&x.to_le_bytes());
    k[8..].copy_from_slice(&i.to_le_bytes());
    k[0] = (k[0] & !1) | u8::from(!present);
    k
}

pub(crate) const N: u64 = 1_000_000;

/// `(present found, absent false positives)`, asserting that `ours` and
/// arrow-rs's `check` agree on every one of N present and N absent keys.
pub(crate) fn agree(ours: &BitFilter, theirs: &Sbbf) -> (u64, u64) {
    let mut counts = (0, 0);
    for present in [true, false] {
        for i in 0..N {
            let k = key(i, present);
            let (a, b) = (ours.contains(&k), theirs.check(&k[..]));
            assert_eq!(a, b, "key {i} (present: {present}): ours {a}, arrow-rs {b}");
            if present {
                counts.0 += u64::from(a);
            } else {
                counts.1 += u64::from(a);
            }
        }
    }
    counts
}

#[test]
fn a_split_block_filter_exports_as_an_sbbf_that_answers_the_same() {
    let p = FilterParams::for_capacity(N, 0.01, Layout::SplitBlock, HashSpec::xxh64()).unwrap();
    let mut f = BitFilter::new(p).unwrap();
    let keys: Vec<[u8; 16]> = (0..N).map(|i| key(i, true)).collect();
    f.insert_many_mut(&keys);
    let sbbf = export_bit_filter(&f).unwrap();
    assert_eq!(sbbf.num_blocks() as u64, p.m() / 256);
    let (found, fp) = agree(&f, &sbbf);
    assert_eq!(found, N, "a false negative");
    // Sized for 1%: 10,000 expected of 1M, sigma 100 (5 sigma, and the
    // filter's own spread, well inside 12,000).
    assert!(fp < 12_000, "{fp} false positives of {N}");
    // Serialized as Parquet stores it and read back by arrow-rs: the same.
    let mut bytes = Vec::new();
    sbbf.write(&mut bytes).unwrap();
    let read = Sbbf::from_bytes(&bytes).unwrap();
    assert_eq!(agree(&f, &read), (found, fp));
    let mut bitset = Vec::new();
    read.write_bitset(&mut bitset).unwrap();
    assert_eq!(bitset, f.to_le_bytes()[..(p.m() / 8) as usize]);
}

#[test]
fn an_sbbf_built_by_arrow_rs_imports_and_answers_the_same() {
    let mut sbbf = Sbbf::new_with_ndv_fpp(N, 0.01).unwrap();
    for i in 0..N {
        sbbf.insert(&key(i, true)[..]);
    }
    let mut bytes = Vec::new();
    sbbf.write(&mut bytes).unwrap();
    let f = import_sbbf_split_block(&bytes).unwrap();
    assert_eq!(f.params().layout(), Layout::SplitBlock);
    assert_eq!(f.params().m(), 256 * sbbf.num_blocks() as u64);
    let (found, _) = agree(&f, &sbbf);
    assert_eq!(found, N);
    // With explicit parameters, the same; other sizes and layouts refused.
    let p = *f.params();
    let g = import_sbbf(&bytes, &p).unwrap();
    assert_eq!(g.to_words(), f.to_words());
    let other = FilterParams::new(Layout::SplitBlock, p.m() * 2, 8, HashSpec::xxh64()).unwrap();
    let err = import_sbbf(&bytes, &other).unwrap_err().to_string();
    assert!(err.contains("blocks"), "{err}");
    // And back: exporting the import gives arrow-rs's bytes.
    let mut again = Vec::new();
    export_bit_filter(&f).unwrap().write(&mut again).unwrap();
    assert_eq!(again, bytes);
}

/// A filter that arrow-rs's Parquet writer stored in a file (an `INT64`
/// column of 1M values: the writer hashes each value's 8 little-endian
/// bytes) imports as a split-block filter that answers every value, and
/// every absent one, as the file's filter does.
#[test]
fn a_parquet_files_filter_imports_as_a_split_block_filter() {
    let values = |r: std::ops::Range<i64>| r.map(|i| i.wrapping_mul(7_919) - 3_000_000);
    let ints: ArrayRef = Arc::new(Int64Array::from_iter_values(values(0..N as i64)));
    let schema = Arc::new(Schema::new(vec![Field::new("i", DataType::Int64, false)]));
    let batch = RecordBatch::try_new(schema, vec![ints]).unwrap();
    let from_file = parquet_bloom_filters(batch).remove(0);
    let mut bytes = Vec::new();
    from_file.write(&mut bytes).unwrap();
    let f = import_sbbf_split_block(&bytes).unwrap();
    let mut fp = 0u64;
    for v in values(0..2 * N as i64) {
        let k = v.to_le_bytes();
        let (a, b) = (f.contains(&k), from_file.check(&v));
        assert_eq!(a, b, "value {v}");
        fp += u64::from(a);
    }
    assert!(fp >= N, "a false negative");
}

#[test]
fn malformed_sbbfs_are_refused_before_anything_is_answered() {
    // A valid header for 32 bytes, then headers whose length is 0 or not a
    // multiple of 32 (arrow-rs would ignore the remainder, or panic on the
    // first check of an empty bitset).
    let mut good = Vec::new();
    Sbbf::new(&[0xa5u8; 32]).write(&mut good).unwrap();
    assert!(import_sbbf_split_block(&good).is_ok());
    let header_len = good.len() - 32;
    assert_eq!(
        &good[..2],
        &[0x15, 0x40],
        "field 1, i32, zigzag varint of 32"
    );
    let with_len = |len: u8, body: usize| {
        let mut b = good[..header_len].to_vec();
        b[1] = len;
        b.extend((0..body).map(|i| i as u8 ^ 0x3c));
        b
    };
    for (zigzag, body) in [(0x00, 0), (0x50, 40), (0x7e, 63)] {
        let err = import_sbbf_split_block(&with_len(zigzag, body))
            .unwrap_err()
            .to_string();
        assert!(err.contains("malformed"), "{err}");
    }
    assert!(import_sbbf_split_block(&good[..good.len() - 1]).is_err());
    assert!(import_sbbf_split_block(b"").is_err());
}
