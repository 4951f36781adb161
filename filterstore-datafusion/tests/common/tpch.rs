//! TPC-H for the tests and the benchmark: data from `tpchgen-arrow` (the
//! TPC-H generator, in Arrow) written as Parquet files, the 22 query texts of
//! `testdata/tpch/`, and a result comparison that ignores row order where the
//! query has no `ORDER BY` and compares floats as DataFusion's own tests do
//! (within a relative tolerance, since sums depend on the order of addition).

#![allow(dead_code)]

use datafusion::arrow::array::{Array, RecordBatch};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::util::display::array_value_to_string;
use datafusion::error::{DataFusionError, Result};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use std::path::Path;

/// The eight tables, and how many Parquet files each is split into (so that
/// every scan spreads over the cluster's tasks).
pub const TABLES: [(&str, i32); 8] = [
    ("lineitem", 6),
    ("orders", 4),
    ("customer", 2),
    ("part", 2),
    ("partsupp", 3),
    ("supplier", 1),
    ("nation", 1),
    ("region", 1),
];

type Batches = Box<
    dyn Iterator<Item = std::result::Result<RecordBatch, datafusion::arrow::error::ArrowError>>,
>;

fn generator(table: &str, sf: f64, part: i32, parts: i32) -> Batches {
    use tpchgen::generators::*;
    use tpchgen_arrow::*;
    match table {
        "lineitem" => Box::new(LineItemArrow::new(LineItemGenerator::new(sf, part, parts))),
        "orders" => Box::new(OrderArrow::new(OrderGenerator::new(sf, part, parts))),
        "customer" => Box::new(CustomerArrow::new(CustomerGenerator::new(sf, part, parts))),
        "part" => Box::new(PartArrow::new(PartGenerator::new(sf, part, parts))),
        "partsupp" => Box::new(PartSuppArrow::new(PartSuppGenerator::new(sf, part, parts))),
        "supplier" => Box::new(SupplierArrow::new(SupplierGenerator::new(sf, part, parts))),
        "nation" => Box::new(NationArrow::new(NationGenerator::new(sf, part, parts))),
        _ => Box::new(RegionArrow::new(RegionGenerator::new(sf, part, parts))),
    }
}

/// Writes every table at scale factor `sf` under `dir/<table>/part-N.parquet`.
pub fn generate(dir: &Path, sf: f64) -> Result<()> {
    for (table, files) in TABLES {
        let tdir = dir.join(table);
        std::fs::create_dir_all(&tdir)?;
        for part in 1..=files {
            let mut batches = generator(table, sf, part, files).peekable();
            let Some(first) = batches.peek() else {
                continue;
            };
            let schema = match first {
                Ok(b) => b.schema(),
                Err(e) => return Err(DataFusionError::Execution(e.to_string())),
            };
            let file = std::fs::File::create(tdir.join(format!("part-{part}.parquet")))?;
            let mut w = ArrowWriter::try_new(file, schema, None)?;
            for b in batches {
                w.write(&b?)?;
            }
            w.close()?;
        }
    }
    Ok(())
}

/// Registers the tables written by [`generate`] on `ctx`.
pub async fn register(ctx: &SessionContext, dir: &Path) -> Result<()> {
    for (table, _) in TABLES {
        let path = dir.join(table);
        let path = path
            .to_str()
            .ok_or_else(|| DataFusionError::Plan("a non-UTF-8 path".into()))?;
        ctx.register_parquet(table, path, ParquetReadOptions::default())
            .await?;
    }
    Ok(())
}

/// The statements of query `n` (1..=22); q15 creates and drops a view.
pub fn statements(n: usize) -> Vec<String> {
    query_statements("tpch", n)
}

/// The statements of `testdata/<set>/q<n>.sql`.
pub fn query_statements(set: &str, n: usize) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(set)
        .join(format!("q{n}.sql"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    text.split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// Runs a query's statements; the result is the one that returns rows (the
/// `SELECT`; q15's view statements return none).
pub async fn run(ctx: &SessionContext, stmts: &[String]) -> Result<Vec<RecordBatch>> {
    let mut out = Vec::new();
    for s in stmts {
        let batches = ctx.sql(s).await?.collect().await?;
        if batches.iter().any(|b| b.num_rows() > 0)
            || s.trim_start().to_lowercase().starts_with("select")
        {
            out = batches;
        }
    }
    Ok(out)
}

/// One value of a result: floats kept as numbers for a tolerant comparison.
#[derive(Clone, Debug)]
pub enum Cell {
    /// A float.
    F(f64),
    /// Anything else, as DataFusion displays it.
    S(String),
}

impl PartialEq for Cell {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Cell::F(a), Cell::F(b)) => {
                (a.is_nan() && b.is_nan())
                    || a == b
                    || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
            }
            (Cell::S(a), Cell::S(b)) => a == b,
            _ => false,
        }
    }
}

/// Rows of a result, sorted (by a coarse text key): compared as a multiset.
/// An `ORDER BY` leaves rows that tie on its keys in any order, and two
/// correct plans do order them differently (q10 at SF 1: two customers with
/// revenue 88549.5120 swapped places between two runs of one plan), so an
/// ordered result is compared as a multiset too. A runtime filter sits below
/// the joins, far under the final sort, so it can change which rows arrive
/// but not how they are then ordered.
pub fn rows(batches: &[RecordBatch]) -> Vec<Vec<Cell>> {
    let mut out = Vec::new();
    for b in batches {
        for i in 0..b.num_rows() {
            let row: Vec<Cell> = b.columns().iter().map(|c| cell(c.as_ref(), i)).collect();
            out.push(row);
        }
    }
    out.sort_by_cached_key(|r| sort_key(r));
    out
}

fn cell(c: &dyn Array, i: usize) -> Cell {
    if c.is_null(i) {
        return Cell::S("NULL".into());
    }
    match c.data_type() {
        DataType::Float16 | DataType::Float32 | DataType::Float64 => {
            let s = array_value_to_string(c, i).unwrap_or_default();
            Cell::F(s.parse().unwrap_or(f64::NAN))
        }
        _ => Cell::S(array_value_to_string(c, i).unwrap_or_default()),
    }
}

fn sort_key(r: &[Cell]) -> String {
    r.iter()
        .map(|c| match c {
            Cell::F(f) => format!("{f:.3e}"),
            Cell::S(s) => s.clone(),
        })
        .collect::<Vec<_>>()
        .join("\u{1}")
}

/// Where two results differ, or `None` when they are equal.
pub fn diff(a: &[Vec<Cell>], b: &[Vec<Cell>]) -> Option<String> {
    if a.len() != b.len() {
        return Some(format!("{} rows against {}", a.len(), b.len()));
    }
    a.iter()
        .zip(b)
        .enumerate()
        .find(|(_, (x, y))| x != y)
        .map(|(i, (x, y))| format!("row {i}: {x:?} against {y:?}"))
}
