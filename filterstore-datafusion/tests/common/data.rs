//! Small tables for the rule's tests, written as Parquet files so that the
//! in-memory cluster spreads their scans over its tasks.

#![allow(dead_code)]

use datafusion::arrow::array::{ArrayRef, RecordBatch};
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::error::Result;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use std::path::Path;
use std::sync::Arc;

/// SplitMix64: a seeded generator with no dependency.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// Writes `columns` as table `name` in `files` Parquet files under `dir`
/// and registers it on every context given.
pub async fn table(
    dir: &Path,
    name: &str,
    columns: Vec<(&str, ArrayRef)>,
    files: usize,
    contexts: &[&SessionContext],
) -> Result<()> {
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
            .collect::<Vec<_>>(),
    ));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        columns.into_iter().map(|(_, a)| a).collect(),
    )?;
    let tdir = dir.join(name);
    std::fs::create_dir_all(&tdir)?;
    let rows = batch.num_rows();
    let per = rows.div_ceil(files.max(1)).max(1);
    for (i, start) in (0..rows.max(1)).step_by(per).enumerate() {
        let len = per.min(rows.saturating_sub(start));
        let part = batch.slice(start.min(rows), len);
        let file = std::fs::File::create(tdir.join(format!("part-{i}.parquet")))?;
        let mut w = ArrowWriter::try_new(file, Arc::clone(&schema), None)?;
        w.write(&part)?;
        w.close()?;
    }
    let path = tdir.to_str().unwrap_or_default().to_string();
    for ctx in contexts {
        ctx.register_parquet(name, &path, ParquetReadOptions::default())
            .await?;
    }
    Ok(())
}
