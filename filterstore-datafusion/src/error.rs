//! One error type for everything this crate refuses, mapped into
//! [`DataFusionError::External`] so that a query fails with a sentence that
//! says what to do. A filter that cannot be read is always an error here,
//! never "absent" (that would drop rows that join) and never a silent
//! "present" (that would hide a broken producer).

use datafusion::arrow::datatypes::DataType;
use datafusion::error::DataFusionError;
use filterstore::ExchangeError;
use thiserror::Error;

/// What the UDFs and the aggregate refuse.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum BloomUdfError {
    /// The message is corrupt, of an unknown version, or otherwise unreadable.
    #[error("{function}: the filter message cannot be read ({source}); rebuild it with bloom_agg")]
    Unreadable {
        /// The SQL function that met it.
        function: &'static str,
        /// What the core's decoder said.
        #[source]
        source: ExchangeError,
    },
    /// The decoded filter would not fit in the process-wide cache's budget.
    #[error("{function}: the filter needs {needed} bytes decoded, over the cache budget of {budget} bytes; raise it with set_cache_budget or send a smaller filter")]
    OverBudget {
        /// The SQL function that met it.
        function: &'static str,
        /// Bytes the decoded filter needs.
        needed: u64,
        /// The budget in force.
        budget: u64,
    },
    /// A delta message was given where a whole filter is needed.
    #[error("{function}: a delta message is not a filter; apply it to its base first")]
    DeltaMessage {
        /// The SQL function that met it.
        function: &'static str,
    },
    /// A key column of a type without a documented encoding.
    #[error("{function}: keys of type {data_type} are not supported (integers, strings, binary and fixed-size binary are)")]
    UnsupportedKeyType {
        /// The SQL function that met it.
        function: &'static str,
        /// The type found.
        data_type: DataType,
    },
    /// An argument of the wrong type or shape.
    #[error("{function}: {reason}")]
    BadArgument {
        /// The SQL function that met it.
        function: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// Two aggregate states built with different parameters.
    #[error("bloom_agg: cannot merge a filter of m = {m_a}, k = {k_a} with one of m = {m_b}, k = {k_b}: every partial aggregate must use the same fp and expected_n")]
    MismatchedState {
        /// Bits of the first.
        m_a: u64,
        /// Hash functions of the first.
        k_a: u32,
        /// Bits of the second.
        m_b: u64,
        /// Hash functions of the second.
        k_b: u32,
    },
    /// Too many distinct keys for the exact-size mode of `bloom_agg`.
    #[error("bloom_agg: more than {limit} distinct keys without expected_n; call bloom_agg(key, fp, expected_n)")]
    TooManyKeys {
        /// The limit in force.
        limit: usize,
    },
    /// The core refused to build a filter or message.
    #[error("{function}: {source}")]
    Core {
        /// The SQL function that met it.
        function: &'static str,
        /// The core's error.
        #[source]
        source: ExchangeError,
    },
    /// A filter cannot be expressed as a Parquet split-block Bloom filter.
    #[error("parquet split-block Bloom filter: {0}")]
    Sbbf(String),
    /// A Parquet column that cannot carry a filterstore filter as its Bloom
    /// filter (absent, nested, or of a type whose Parquet filter hashes other
    /// bytes than this crate's keys), or a batch that does not match it.
    #[error("parquet Bloom filter of column `{column}`: {reason}")]
    ParquetColumn {
        /// The column named.
        column: String,
        /// What is wrong.
        reason: String,
    },
    /// A batch holds a value that the filter meant for its column lacks: as
    /// that column's Parquet Bloom filter, it would make readers skip the
    /// row group holding the value. Nothing of the batch was written.
    #[error("parquet Bloom filter of column `{column}`: row {row} of the batch holds a value the filter lacks, and readers would skip the row group holding it; nothing of the batch was written (build the filter from every key of the column)")]
    KeyNotInFilter {
        /// The column.
        column: String,
        /// The first such row of the batch.
        row: usize,
    },
}

impl From<BloomUdfError> for DataFusionError {
    fn from(e: BloomUdfError) -> Self {
        DataFusionError::External(Box::new(e))
    }
}

/// This crate's result type (DataFusion's error, which carries ours inside).
pub(crate) type Result<T> = std::result::Result<T, DataFusionError>;
