//! `CREATE EXTERNAL TABLE ... STORED AS INDEXED_PARQUET`: the factory that
//! makes an [`IndexedParquetTable`] from SQL, and its registration.

use super::options::IndexOptions;
use super::table::IndexedParquetTable;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider, TableProviderFactory};
use datafusion::common::{plan_err, Result};
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::CreateExternalTable;
use std::sync::Arc;

/// The `STORED AS` name of an indexed Parquet table.
pub const INDEXED_PARQUET: &str = "INDEXED_PARQUET";

/// Makes indexed Parquet tables from `CREATE EXTERNAL TABLE t STORED AS
/// INDEXED_PARQUET LOCATION '<dir>/' OPTIONS ('index.store' '<dir>',
/// 'index.columns' 'a,b')` (the options: [`IndexOptions::from_sql`]).
#[derive(Debug, Default)]
pub struct IndexedTableFactory;

#[async_trait]
impl TableProviderFactory for IndexedTableFactory {
    async fn create(
        &self,
        state: &dyn Session,
        cmd: &CreateExternalTable,
    ) -> Result<Arc<dyn TableProvider>> {
        let [location] = cmd.locations.as_slice() else {
            return plan_err!(
                "an indexed table takes one LOCATION, not {}",
                cmd.locations.len()
            );
        };
        if !cmd.table_partition_cols.is_empty() {
            return plan_err!("an indexed table has no partition columns (PARTITIONED BY)");
        }
        let options = IndexOptions::from_sql(&cmd.options)?;
        let table = IndexedParquetTable::try_new(state, location, options).await?;
        let declared = cmd.schema.as_arrow();
        if !declared.fields().is_empty() && declared.fields() != table.inner.schema.fields() {
            return plan_err!(
                "the declared columns differ from the files' schema ({}); declare none to take the files'",
                table.inner.schema
            );
        }
        Ok(Arc::new(table))
    }
}

/// Lets `ctx` run `CREATE EXTERNAL TABLE ... STORED AS INDEXED_PARQUET`.
pub fn register_indexed_table_factory(ctx: &SessionContext) {
    ctx.state_ref()
        .write()
        .table_factories_mut()
        .insert(INDEXED_PARQUET.to_string(), Arc::new(IndexedTableFactory));
}

impl IndexedParquetTable {
    /// Builds the indexed table of the Parquet files under `location` and
    /// registers it in `ctx` as `name`: the one call a Rust user makes.
    ///
    /// ```no_run
    /// use datafusion::prelude::SessionContext;
    /// use filterstore_datafusion::{IndexOptions, IndexedParquetTable};
    /// # async fn f() -> datafusion::error::Result<()> {
    /// let ctx = SessionContext::new();
    /// let orders = IndexedParquetTable::register(
    ///     &ctx,
    ///     "orders",
    ///     "file:///data/orders/",
    ///     IndexOptions::new("/var/lib/orders-index").column("order_id"),
    /// )
    /// .await?;
    /// orders.refresh().await?; // index the files the store does not cover yet
    /// ctx.sql("SELECT * FROM orders WHERE order_id = 42").await?.show().await?;
    /// # Ok(()) }
    /// ```
    pub async fn register(
        ctx: &SessionContext,
        name: &str,
        location: &str,
        options: IndexOptions,
    ) -> Result<IndexedParquetTable> {
        let table = IndexedParquetTable::try_new(&ctx.state(), location, options).await?;
        ctx.register_table(name, Arc::new(table.clone()))?;
        Ok(table)
    }
}
