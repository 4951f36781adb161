//! How an indexed table is set up: which columns, which store, and the
//! knobs of its refreshes; from Rust ([`IndexOptions`]) or from the
//! `OPTIONS` of `CREATE EXTERNAL TABLE` ([`IndexOptions::from_sql`]).

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::{plan_err, Result};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

/// The expected number of files a lookup of one key reads although they do
/// not hold it, whatever the number of files ([`IndexOptions::false_files`]).
pub(super) const DEFAULT_FALSE_FILES: f64 = 0.1;

/// How a table's index is kept.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexOptions {
    pub(crate) store_dir: PathBuf,
    pub(crate) columns: Vec<String>,
    pub(crate) false_files: f64,
    pub(crate) refresh_on_scan: bool,
    pub(crate) file_extension: String,
    pub(crate) concurrency: usize,
    pub(crate) commit_files: usize,
    pub(crate) batch_rows: usize,
    pub(crate) settle: Duration,
    pub(crate) schema: Option<SchemaRef>,
    pub(crate) page_index: bool,
}

impl IndexOptions {
    /// An index kept in the filterstore store at `store_dir` (made if
    /// missing; several tables may share it), of no column yet.
    pub fn new(store_dir: impl Into<PathBuf>) -> IndexOptions {
        IndexOptions {
            store_dir: store_dir.into(),
            columns: Vec::new(),
            false_files: DEFAULT_FALSE_FILES,
            refresh_on_scan: true,
            file_extension: ".parquet".into(),
            concurrency: 16,
            commit_files: 512,
            batch_rows: 8192,
            settle: Duration::from_secs(2),
            schema: None,
            page_index: false,
        }
    }

    /// Indexes column `name` too: a filter per data file, which `name =
    /// literal` and `name IN (...)` consult.
    pub fn column(mut self, name: impl Into<String>) -> IndexOptions {
        self.columns.push(name.into());
        self
    }

    /// The expected number of files, among all of the table's, that a
    /// lookup of one key reads without finding it (0.1 by default): each
    /// file's filter is sized for a false-positive rate that keeps the sum
    /// over all files below it as the table grows (the rule:
    /// [`IndexedParquetTable`](crate::IndexedParquetTable)).
    pub fn false_files(mut self, expected: f64) -> IndexOptions {
        self.false_files = expected;
        self
    }

    /// Whether a scan that lists files the index does not know starts a
    /// refresh in the background (on by default). Off, only
    /// [`IndexedParquetTable::refresh`](super::IndexedParquetTable::refresh)
    /// indexes; either way such files are scanned until indexed.
    pub fn refresh_on_scan(mut self, on: bool) -> IndexOptions {
        self.refresh_on_scan = on;
        self
    }

    /// The data files' extension (`.parquet` by default).
    pub fn file_extension(mut self, ext: impl Into<String>) -> IndexOptions {
        self.file_extension = ext.into();
        self
    }

    /// How many files a refresh reads at once (16 by default): on an
    /// object store, requests wait for the network, not the CPU.
    pub fn concurrency(mut self, files: usize) -> IndexOptions {
        self.concurrency = files.max(1);
        self
    }

    /// How many files' filters a refresh commits at once (512 by default):
    /// one pack file and one catalog commit per such batch.
    pub fn commit_files(mut self, files: usize) -> IndexOptions {
        self.commit_files = files.max(1);
        self
    }

    /// How old a file's modification time must be, by this machine's
    /// clock when the refresh lists, before the file is indexed (2 s by
    /// default; younger files are read until a later refresh). A file's
    /// identity is its size, modification time, ETag and version; a local
    /// file system's ETag is made of its inode, modification time and size,
    /// and stamps modification times from a clock that advances in ticks of
    /// a few milliseconds. Two versions of a file written in place within
    /// one tick, of one size, would look the same, and a filter of the
    /// first would answer for the second. A rewrite after the listing is
    /// stamped after it, so a file whose time is older than the listing by
    /// more than a tick (and than the skew between this clock and the
    /// store's) cannot be rewritten into a version that looks the same.
    /// An object store whose ETag changes with every write needs no wait.
    pub fn settle(mut self, wait: Duration) -> IndexOptions {
        self.settle = wait;
        self
    }

    /// Whether the scan reads each file's page index, as the session's
    /// (Parquet's own Bloom filters are read only when the scan compares a
    /// column the index does not hold with `=` or `IN`: for the indexed
    /// ones the index has answered what they could, at the same rate.)
    ///
    /// `datafusion.execution.parquet.enable_page_index` says (off by
    /// default for an indexed table). A lookup the index narrowed to a few
    /// files reads each one's footer in one request (DataFusion fetches the
    /// last 512 KiB), but its page index in two more, and on files whose row
    /// groups fit a request the page index saves no request: a present key
    /// then costs 2 requests instead of 4 on a cold metadata cache. Turn it
    /// on for large row groups, where skipping pages saves bytes.
    pub fn page_index(mut self, on: bool) -> IndexOptions {
        self.page_index = on;
        self
    }

    /// The table's schema (by default inferred from the first file listed,
    /// one footer read).
    pub fn schema(mut self, schema: SchemaRef) -> IndexOptions {
        self.schema = Some(schema);
        self
    }

    /// The false-positive rate a file indexed now gets when the table has
    /// `files` files, by the rule of [`IndexedParquetTable`]'s docs: the
    /// rate to give Parquet's own Bloom filters for the same expected
    /// false files per lookup.
    ///
    /// ```
    /// use filterstore_datafusion::IndexOptions;
    /// let o = IndexOptions::new("/tmp/s");
    /// assert_eq!(o.file_fp(10_000), 0.1 / 65_536.0);
    /// assert_eq!(o.file_fp(10), 0.1 / 2_048.0);
    /// ```
    ///
    /// [`IndexedParquetTable`]: crate::IndexedParquetTable
    pub fn file_fp(&self, files: usize) -> f64 {
        super::files::fp_for_new_file(files, self.false_files)
    }

    /// The options of `CREATE EXTERNAL TABLE ... STORED AS INDEXED_PARQUET
    /// ... OPTIONS (...)`: `'index.store' '/path'` (required),
    /// `'index.columns' 'a,b'` (required), `'index.false_files' '0.1'`,
    /// `'index.refresh_on_scan' 'true'`, `'index.concurrency' '16'`,
    /// `'index.settle_ms' '2000'`, `'index.page_index' 'false'`. Any
    /// other key is refused, so that a misspelt one is not ignored.
    pub fn from_sql(options: &HashMap<String, String>) -> Result<IndexOptions> {
        let Some(store) = options.get("index.store") else {
            return plan_err!("OPTIONS ('index.store' '<directory>') is required: where the index's filterstore store lives");
        };
        let mut o = IndexOptions::new(store);
        for (key, value) in options {
            match key.as_str() {
                "index.store" => {}
                "index.columns" => {
                    o.columns = value
                        .split(',')
                        .map(|c| c.trim().to_string())
                        .filter(|c| !c.is_empty())
                        .collect()
                }
                "index.false_files" => o.false_files = parse(key, value)?,
                "index.refresh_on_scan" => o.refresh_on_scan = parse(key, value)?,
                "index.concurrency" => o.concurrency = parse::<usize>(key, value)?.max(1),
                "index.settle_ms" => o.settle = Duration::from_millis(parse(key, value)?),
                "index.page_index" => o.page_index = parse(key, value)?,
                other => {
                    return plan_err!(
                        "unknown option {other:?} for an indexed Parquet table; known: index.store, index.columns, index.false_files, index.refresh_on_scan, index.concurrency, index.settle_ms, index.page_index"
                    )
                }
            }
        }
        o.check()?;
        Ok(o)
    }

    /// Refuses options no index can keep.
    pub(crate) fn check(&self) -> Result<()> {
        if self.columns.is_empty() {
            return plan_err!("an indexed table needs at least one column to index ('index.columns' 'a,b' or IndexOptions::column)");
        }
        if !(self.false_files > 0.0 && self.false_files < 1.0) {
            return plan_err!(
                "the expected false files per lookup must lie strictly between 0 and 1, not {}",
                self.false_files
            );
        }
        Ok(())
    }
}

fn parse<T: std::str::FromStr>(key: &str, value: &str) -> Result<T> {
    match value.trim().parse() {
        Ok(v) => Ok(v),
        Err(_) => plan_err!("option {key:?}: cannot read {value:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_options_are_read_and_unknown_ones_refused() {
        let map = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<HashMap<_, _>>()
        };
        let o = IndexOptions::from_sql(&map(&[
            ("index.store", "/s"),
            ("index.columns", "a, b"),
            ("index.false_files", "0.05"),
        ]))
        .unwrap();
        assert_eq!(o.columns, ["a", "b"]);
        assert_eq!(
            (o.false_files, o.store_dir.clone()),
            (0.05, PathBuf::from("/s"))
        );
        for bad in [
            map(&[("index.columns", "a")]),
            map(&[("index.store", "/s")]),
            map(&[
                ("index.store", "/s"),
                ("index.columns", "a"),
                ("index.colums", "b"),
            ]),
            map(&[
                ("index.store", "/s"),
                ("index.columns", "a"),
                ("index.false_files", "2"),
            ]),
        ] {
            assert!(IndexOptions::from_sql(&bad).is_err(), "{bad:?}");
        }
    }
}
