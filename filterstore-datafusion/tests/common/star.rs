//! A synthetic star schema in Parquet files, for the distributed test, the
//! examples and the benchmark: a fact table whose key points uniformly into
//! a dimension, of which a fixed percentage is "selected".
//!
//! - `fact(f_id BIGINT, f_dkey BIGINT, f_val BIGINT)`: `f_dkey` uniform over
//!   the dimension's keys;
//! - `dim(d_key BIGINT, d_cat INT)`: `d_cat` uniform in `0..100`, so
//!   `d_cat < p` selects about `p`% of the keys.
//!
//! Seeded (SplitMix64), so every run writes the same bytes.

#![allow(dead_code)]

use datafusion::arrow::array::{Int32Array, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::error::Result;
use datafusion::parquet::arrow::ArrowWriter;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

/// Sizes of the schema.
#[derive(Clone, Copy, Debug)]
pub struct StarSpec {
    /// Rows of the fact table.
    pub fact_rows: usize,
    /// Parquet files the fact table is split into.
    pub fact_files: usize,
    /// Rows (and keys) of the dimension.
    pub dim_rows: usize,
    /// Parquet files the dimension is split into.
    pub dim_files: usize,
    /// The generator's seed.
    pub seed: u64,
}

impl Default for StarSpec {
    /// The case: 1M fact rows in 8 files, 50k dimension rows in 6.
    fn default() -> Self {
        StarSpec {
            fact_rows: 1_000_000,
            fact_files: 8,
            dim_rows: 50_000,
            dim_files: 6,
            seed: 14,
        }
    }
}

/// What the test needs to know about the data it wrote.
#[derive(Clone, Debug)]
pub struct StarData {
    /// Fact rows per dimension key.
    pub fact_rows_per_key: Vec<u32>,
    /// Each dimension key's `d_cat`.
    pub dim_cat: Vec<i32>,
}

impl StarData {
    /// Keys with `d_cat < percent`.
    pub fn selected_keys(&self, percent: i32) -> usize {
        self.dim_cat.iter().filter(|c| **c < percent).count()
    }

    /// Fact rows whose key has `d_cat < percent`: the exact join size.
    pub fn selected_fact_rows(&self, percent: i32) -> u64 {
        self.rows_where(percent, true).map(u64::from).sum()
    }

    /// Sum over the *unselected* keys of (fact rows of the key)²: the
    /// variance scale of the false-positive row count.
    pub fn unselected_sum_sq(&self, percent: i32) -> f64 {
        self.rows_where(percent, false)
            .map(|c| f64::from(c) * f64::from(c))
            .sum()
    }

    fn rows_where(&self, percent: i32, selected: bool) -> impl Iterator<Item = u32> + '_ {
        self.fact_rows_per_key
            .iter()
            .zip(&self.dim_cat)
            .filter(move |(_, c)| (**c < percent) == selected)
            .map(|(n, _)| *n)
    }
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Writes `dir/fact/part-*.parquet` and `dir/dim/part-*.parquet`.
pub fn write_star(dir: &Path, spec: StarSpec) -> Result<StarData> {
    let mut rng = spec.seed;
    let dim_cat: Vec<i32> = (0..spec.dim_rows)
        .map(|_| (splitmix(&mut rng) % 100) as i32)
        .collect();
    let keys: Vec<i64> = (0..spec.dim_rows as i64).collect();
    let dim_schema = Arc::new(Schema::new(vec![
        Field::new("d_key", DataType::Int64, false),
        Field::new("d_cat", DataType::Int32, false),
    ]));
    write_files(&dir.join("dim"), spec.dim_files, spec.dim_rows, |range| {
        RecordBatch::try_new(
            dim_schema.clone(),
            vec![
                Arc::new(Int64Array::from(keys[range.clone()].to_vec())),
                Arc::new(Int32Array::from(dim_cat[range].to_vec())),
            ],
        )
    })?;
    let mut fact_rows_per_key = vec![0u32; spec.dim_rows];
    let dkeys: Vec<i64> = (0..spec.fact_rows)
        .map(|_| {
            let k = (splitmix(&mut rng) % spec.dim_rows as u64) as usize;
            fact_rows_per_key[k] += 1;
            k as i64
        })
        .collect();
    let vals: Vec<i64> = (0..spec.fact_rows)
        .map(|_| (splitmix(&mut rng) % 1_000) as i64)
        .collect();
    let fact_schema = Arc::new(Schema::new(vec![
        Field::new("f_id", DataType::Int64, false),
        Field::new("f_dkey", DataType::Int64, false),
        Field::new("f_val", DataType::Int64, false),
    ]));
    write_files(
        &dir.join("fact"),
        spec.fact_files,
        spec.fact_rows,
        |range| {
            RecordBatch::try_new(
                fact_schema.clone(),
                vec![
                    Arc::new(Int64Array::from_iter_values(
                        range.start as i64..range.end as i64,
                    )),
                    Arc::new(Int64Array::from(dkeys[range.clone()].to_vec())),
                    Arc::new(Int64Array::from(vals[range].to_vec())),
                ],
            )
        },
    )?;
    Ok(StarData {
        fact_rows_per_key,
        dim_cat,
    })
}

fn write_files(
    dir: &Path,
    files: usize,
    rows: usize,
    batch: impl Fn(
        std::ops::Range<usize>,
    ) -> std::result::Result<RecordBatch, datafusion::arrow::error::ArrowError>,
) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let per_file = rows.div_ceil(files.max(1)).max(1);
    for (i, start) in (0..rows).step_by(per_file).enumerate() {
        let b = batch(start..(start + per_file).min(rows))?;
        let file = File::create(dir.join(format!("part-{i:02}.parquet")))?;
        let mut w = ArrowWriter::try_new(file, b.schema(), None)?;
        w.write(&b)?;
        w.close()?;
    }
    Ok(())
}
