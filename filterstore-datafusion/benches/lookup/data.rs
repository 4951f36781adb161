//! The lake of the lookup bench: N Parquet files generated once under the
//! target directory's `tmp/lookup/`, served through a throttled, counting object
//! store, and the index of them in a filterstore store beside them.

use crate::counting::Counting;
use datafusion::arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::object_store::local::LocalFileSystem;
use datafusion::object_store::throttle::{ThrottleConfig, ThrottledStore};
use datafusion::object_store::ObjectStore;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
use datafusion::prelude::{SessionConfig, SessionContext};
use filterstore_datafusion::{IndexOptions, IndexedParquetTable};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The URL the lake's object store is registered under, and its table's.
pub const STORE_URL: &str = "bench://lake";
pub const TABLE_URL: &str = "bench://lake/data/";

/// A mixing function: the key of row `i` of file `f` is `key(f·rows + i)`.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

pub struct Lake {
    pub root: PathBuf,
    pub files: usize,
    pub rows: usize,
    /// What the session sees: the throttled store.
    pub store: Arc<dyn ObjectStore>,
    /// The counter below the throttle.
    pub counting: Counting,
    pub schema: SchemaRef,
    /// The rate the index gives each file, and Parquet's filters too.
    pub fp: f64,
}

impl Lake {
    /// The key of row `i` of file `f` (as Parquet stores it, an `Int64`).
    pub fn key(&self, f: usize, i: usize) -> i64 {
        mix((f * self.rows + i) as u64) as i64
    }

    /// A key no file holds (a collision with one that does has odds of
    /// about 10^-12).
    pub fn absent(&self, j: usize) -> i64 {
        mix(u64::MAX / 2 + j as u64) as i64
    }

    pub fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("s", DataType::Utf8, false),
            Field::new("x", DataType::Float64, false),
        ]))
    }

    /// The lake of `files` files of `rows` rows, generated if missing, and
    /// the extra 1% kept aside for the refresh figure.
    pub async fn prepare(files: usize, rows: usize, latency_ms: u64) -> Lake {
        // Cargo's scratch directory for benches, inside the target directory.
        let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let root = base.join("lookup").join(format!("n{files}-r{rows}"));
        let latency = Duration::from_millis(latency_ms);
        std::fs::create_dir_all(&root).unwrap();
        let local = LocalFileSystem::new_with_prefix(&root).unwrap();
        let config = ThrottleConfig {
            wait_get_per_call: latency,
            wait_list_per_call: latency,
            wait_list_with_delimiter_per_call: latency,
            ..ThrottleConfig::default()
        };
        let counting = Counting::new(Arc::new(local));
        let throttled: Arc<dyn ObjectStore> =
            Arc::new(ThrottledStore::new(counting.clone(), config));
        let lake = Lake {
            fp: IndexOptions::new("/").file_fp(files),
            root,
            files,
            rows,
            counting,
            store: throttled,
            schema: Lake::schema(),
        };
        lake.move_extra(false);
        lake.generate();
        lake
    }

    fn data(&self) -> PathBuf {
        self.root.join("data")
    }

    fn extra(&self) -> PathBuf {
        self.root.join("extra")
    }

    fn file_name(f: usize) -> String {
        format!("part-{f:06}.parquet")
    }

    /// Writes whatever file of the lake (and of its extra 1%) is missing.
    fn generate(&self) {
        let started = Instant::now();
        let extra = (self.files / 100).max(1);
        let mut written = 0;
        for f in 0..self.files + extra {
            let dir = if f < self.files {
                self.data()
            } else {
                self.extra()
            };
            let path = dir.join(Lake::file_name(f));
            if !path.exists() {
                std::fs::create_dir_all(&dir).unwrap();
                self.write(f, &path);
                written += 1;
            }
        }
        if written > 0 {
            println!(
                "lookup: wrote {written} files into {} in {:.1} s",
                self.root.display(),
                started.elapsed().as_secs_f64()
            );
        }
    }

    fn write(&self, f: usize, path: &Path) {
        let ids: Vec<i64> = (0..self.rows).map(|i| self.key(f, i)).collect();
        let s = StringArray::from_iter_values(ids.iter().map(|k| format!("row {k}")));
        let x = Float64Array::from_iter_values(ids.iter().map(|&k| (k % 1000) as f64));
        let batch = RecordBatch::try_new(
            self.schema.clone(),
            vec![Arc::new(Int64Array::from(ids)), Arc::new(s), Arc::new(x)],
        )
        .unwrap();
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(self.rows))
            .set_column_bloom_filter_enabled("id".into(), true)
            .set_column_bloom_filter_fpp("id".into(), self.fp)
            .set_column_bloom_filter_max_ndv("id".into(), self.rows as u64)
            .build();
        let tmp = path.with_extension("tmp");
        let mut w = ArrowWriter::try_new(
            std::fs::File::create(&tmp).unwrap(),
            self.schema.clone(),
            Some(props),
        )
        .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        std::fs::rename(tmp, path).unwrap();
    }

    /// Moves the extra 1% into the table's directory (`into`), or back.
    pub fn move_extra(&self, into: bool) {
        let (from, to) = match into {
            true => (self.extra(), self.data()),
            false => (self.data(), self.extra()),
        };
        for f in self.files..self.files + (self.files / 100).max(1) {
            let name = Lake::file_name(f);
            if from.join(&name).exists() {
                std::fs::create_dir_all(&to).unwrap();
                std::fs::rename(from.join(&name), to.join(&name)).unwrap();
            }
        }
    }

    pub fn cleanup(&self) {
        self.move_extra(false);
    }

    /// A session as every subject has: 16 target partitions, the lake's
    /// store registered, DataFusion's caches fresh.
    pub fn session(&self, bloom: bool) -> SessionContext {
        let mut config = SessionConfig::new().with_target_partitions(16);
        let parquet = &mut config.options_mut().execution.parquet;
        parquet.bloom_filter_on_read = bloom;
        parquet.pruning = true;
        let ctx = SessionContext::new_with_config(config);
        let url = url::Url::parse(STORE_URL).unwrap();
        ctx.register_object_store(&url, self.store.clone());
        ctx
    }

    pub fn index_dir(&self) -> PathBuf {
        self.root.join("index")
    }

    pub fn index_options(&self) -> IndexOptions {
        IndexOptions::new(self.index_dir())
            .column("id")
            .schema(self.schema.clone())
            .settle(Duration::ZERO)
            .refresh_on_scan(false)
            .concurrency(16)
    }

    /// Builds the index anew: the full build's time, then a refresh after
    /// 1% new files (then dropped again).
    pub async fn build_index(&self) -> (Duration, Duration) {
        let _ = std::fs::remove_dir_all(self.index_dir());
        let ctx = self.session(false);
        let t = IndexedParquetTable::try_new(&ctx.state(), TABLE_URL, self.index_options())
            .await
            .unwrap();
        let started = Instant::now();
        let full = t.refresh().await.unwrap();
        let build = started.elapsed();
        assert_eq!(
            (full.indexed, full.failed.len()),
            (self.files, 0),
            "{full:?}"
        );
        self.move_extra(true);
        let started = Instant::now();
        let more = t.refresh().await.unwrap();
        let refresh = started.elapsed();
        assert_eq!(more.indexed, (self.files / 100).max(1), "{more:?}");
        self.move_extra(false);
        let dropped = t.refresh().await.unwrap();
        assert_eq!(dropped.dropped, (self.files / 100).max(1));
        (build, refresh)
    }

    /// Bytes of the index's filters (what a lookup probes).
    pub async fn index_bytes(&self) -> u64 {
        let ctx = self.session(false);
        let t = IndexedParquetTable::try_new(&ctx.state(), TABLE_URL, self.index_options())
            .await
            .unwrap();
        assert_eq!(t.indexed_files(), self.files);
        t.filter_bytes()
    }

    /// Bytes of the files' own Bloom filters on `id`, from their footers.
    pub fn parquet_bloom_bytes(&self) -> u64 {
        (0..self.files)
            .map(|f| {
                let file = std::fs::File::open(self.data().join(Lake::file_name(f))).unwrap();
                let reader = SerializedFileReader::new(file).unwrap();
                let meta = reader.metadata();
                meta.row_groups()
                    .iter()
                    .map(|rg| rg.column(0).bloom_filter_length().unwrap_or(0) as u64)
                    .sum::<u64>()
            })
            .sum()
    }
}
