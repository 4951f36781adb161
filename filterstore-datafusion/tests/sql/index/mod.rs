//! Indexed Parquet tables (`filterstore_datafusion::IndexedParquetTable`):
//! every answer compared with DataFusion's own `ListingTable` over the same
//! files, under appends, deletes and rewrites in place; kills during a
//! refresh; a store directory missing, damaged, read-only or locked; keys
//! that need coercion; the plan and the metrics.

mod coercion;
mod crash;
mod differential;
mod plans;
mod store_dir;

use datafusion::arrow::array::{
    ArrayRef, DictionaryArray, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Int32Type, Schema, SchemaRef};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::execution::cache::cache_manager::CacheManagerConfig;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The longest a test of this module may take before it fails.
pub const LIMIT: Duration = Duration::from_secs(240);

/// Runs `f` on a runtime of its own, failing it past [`LIMIT`].
pub fn run<F: Future<Output = ()>>(f: F) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        tokio::time::timeout(LIMIT, f)
            .await
            .expect("the test ran past its time limit")
    });
}

/// The schema of the test files: an `Int64` id, an `Int32` copy of it
/// (`k32`), a dictionary-encoded string (`name`), a plain string (`grp`)
/// and a float.
pub fn schema() -> SchemaRef {
    let dict = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("k32", DataType::Int32, true),
        Field::new("name", dict, true),
        Field::new("grp", DataType::Utf8, true),
        Field::new("v", DataType::Float64, false),
    ]))
}

/// The name of id `id` in the `name` column.
pub fn name_of(id: i64) -> String {
    format!("n{id}")
}

/// Writes a Parquet file of `ids` at `path` (row groups of 64 rows; every
/// 17th id's `k32` and `name` null), through a temporary file renamed over
/// it when `rename`, else in place (same inode).
pub fn write_file(path: &Path, ids: &[i64], rename: bool) {
    let id = Int64Array::from_iter_values(ids.iter().copied());
    let k32 = Int32Array::from_iter(ids.iter().map(|&i| (i % 17 != 0).then_some(i as i32)));
    let names = StringArray::from_iter(ids.iter().map(|&i| (i % 17 != 0).then(|| name_of(i))));
    let name: DictionaryArray<Int32Type> = names.iter().collect();
    let grp = StringArray::from_iter_values(ids.iter().map(|i| format!("g{}", i % 5)));
    let v = Float64Array::from_iter_values(ids.iter().map(|&i| (i % 100) as f64 / 100.0));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(id),
        Arc::new(k32),
        Arc::new(name),
        Arc::new(grp),
        Arc::new(v),
    ];
    let batch = RecordBatch::try_new(schema(), columns).unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(64))
        .build();
    let target = if rename {
        path.with_extension("tmp")
    } else {
        path.to_path_buf()
    };
    let file = std::fs::File::create(&target).unwrap();
    let mut w = ArrowWriter::try_new(file, schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    if rename {
        std::fs::rename(&target, path).unwrap();
    }
}

/// A session whose `ListingTable`s see every change of the files at once
/// (no list-files cache, DataFusion 55's default being one that never
/// expires), with 4 partitions.
pub fn session() -> SessionContext {
    let cache = CacheManagerConfig::default().with_list_files_cache_limit(0);
    let runtime = RuntimeEnvBuilder::new()
        .with_cache_manager(cache)
        .build_arc()
        .unwrap();
    SessionContext::new_with_config_rt(SessionConfig::new().with_target_partitions(4), runtime)
}

/// Registers DataFusion's own table over `dir` as `name`: the reference.
pub async fn register_listing(ctx: &SessionContext, name: &str, dir: &Path) {
    let url = format!("{}/", dir.display());
    ctx.register_parquet(name, &url, ParquetReadOptions::default())
        .await
        .unwrap();
}

/// The rows of `sql`, each as a line of text, sorted.
pub async fn rows(ctx: &SessionContext, sql: &str) -> Vec<String> {
    let batches = ctx
        .sql(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let text = pretty_format_batches(&batches).unwrap().to_string();
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with('|'))
        .skip(1)
        .map(String::from)
        .collect();
    lines.sort();
    lines
}

/// The text of `EXPLAIN sql`'s physical plan.
pub async fn explain(ctx: &SessionContext, sql: &str) -> String {
    rows(ctx, &format!("EXPLAIN {sql}")).await.join("\n")
}
