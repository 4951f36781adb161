//! A message that cannot be read is a query error: never "absent" (rows that
//! join would be dropped), never silently "present".

use datafusion::arrow::array::{Array, AsArray, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::ScalarValue;
use datafusion::datasource::MemTable;
use datafusion::prelude::{col, lit, SessionContext};
use filterstore::HashSpec;
use filterstore::{build_message, MessageTarget};
use filterstore_datafusion::{bloom_contains_udf, register_functions};
use std::sync::Arc;

fn message() -> Vec<u8> {
    let keys: Vec<[u8; 8]> = (0..1_000i64).map(|k| k.to_le_bytes()).collect();
    build_message(&keys, MessageTarget::Fp(0.01), HashSpec::xxh3(7), 1)
        .unwrap()
        .0
}

/// Rewrites the trailing CRC32 so that only the field patched is wrong.
fn reseal(mut m: Vec<u8>) -> Vec<u8> {
    let n = m.len() - 4;
    let crc = crc32fast::hash(&m[..n]);
    m[n..].copy_from_slice(&crc.to_le_bytes());
    m
}

async fn run(msg: Vec<u8>) -> datafusion::error::Result<Vec<Option<bool>>> {
    let ctx = SessionContext::new();
    register_functions(&ctx);
    let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(Int64Array::from_iter_values(0..2_000))],
    )
    .unwrap();
    ctx.register_table(
        "t",
        Arc::new(MemTable::try_new(schema, vec![vec![batch]]).unwrap()),
    )
    .unwrap();
    let expr = bloom_contains_udf().call(vec![lit(ScalarValue::Binary(Some(msg))), col("k")]);
    let batches = ctx.table("t").await?.select(vec![expr])?.collect().await?;
    Ok(batches
        .iter()
        .flat_map(|b| b.column(0).as_boolean().iter().collect::<Vec<_>>())
        .collect())
}

#[tokio::test]
async fn intact_message_finds_every_key() {
    let hits = run(message()).await.unwrap();
    assert!(hits[..1_000].iter().all(|h| *h == Some(true)));
    let fp = hits[1_000..].iter().filter(|h| **h == Some(true)).count();
    // Planned at 1% for 1,000 keys: Poisson(10) absent hits; 5 sigma: 10 + 16.
    assert!(fp <= 26, "{fp} false positives of 1,000");
}

#[tokio::test]
async fn corrupt_message_is_an_error() {
    let mut m = message();
    let i = m.len() / 2;
    m[i] ^= 0x40;
    let err = run(m).await.unwrap_err().to_string();
    assert!(err.contains("cannot be read"), "{err}");
}

#[tokio::test]
async fn unknown_version_is_an_error() {
    let mut m = message();
    m[4..6].copy_from_slice(&99u16.to_le_bytes()); // format version
    m[6..8].copy_from_slice(&99u16.to_le_bytes()); // min reader version
    let err = run(reseal(m)).await.unwrap_err().to_string();
    assert!(
        err.contains("cannot be read") && err.contains("99"),
        "{err}"
    );
}

#[tokio::test]
async fn over_budget_message_is_an_error() {
    // A coded all-zero 64-bit filter, its m patched to 2^40 bits (128 GiB
    // decoded), far over the 256 MiB default budget: refused before any
    // allocation.
    let f = filterstore::BitFilter::new(
        filterstore::FilterParams::new(filterstore::Layout::Standard, 64, 1, HashSpec::xxh3(1))
            .unwrap(),
    )
    .unwrap();
    let m = filterstore::encode_message(&f, 0, 0, Default::default()).unwrap();
    let mut m = m;
    m[40..48].copy_from_slice(&(1u64 << 40).to_le_bytes()); // descriptor m (body offset 16)
    let err = run(reseal(m)).await.unwrap_err().to_string();
    assert!(err.contains("over the cache budget"), "{err}");
}

#[tokio::test]
async fn truncated_and_empty_messages_are_errors() {
    let m = message();
    for bad in [
        m[..m.len() - 1].to_vec(),
        Vec::new(),
        b"not a filter".to_vec(),
    ] {
        let err = run(bad).await.unwrap_err().to_string();
        assert!(err.contains("cannot be read"), "{err}");
    }
}

#[tokio::test]
async fn null_filter_gives_null() {
    let ctx = SessionContext::new();
    register_functions(&ctx);
    let b = ctx
        .sql("SELECT bloom_contains(CAST(NULL AS BYTEA), 5)")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert!(b[0].column(0).is_null(0));
}
