//! Runtime Bloom filters on datafusion-distributed's in-memory cluster (3
//! workers in this process, gRPC over in-memory pipes), for plain SQL.
//!
//! The join is forced partitioned, so the fact table's rows cross a network
//! shuffle. The coordinator's session has one extra call,
//! `with_bloom_runtime_filters`, and nothing else: the planner finds the
//! join, builds a filter of the dimension's selected keys from the join's own
//! build side, and places it below the fact side's shuffle. About 10% of the
//! fact rows (plus ~1% false positives) cross it instead of all of them.
//! With DataFusion's default broadcast plan there is no fact shuffle, and
//! the rule leaves the plan alone; `EXPLAIN` says why.
//!
//! Run from the workspace root:
//! `cargo run --release -p filterstore-datafusion --example distributed_semijoin`

#[path = "../tests/common/cluster.rs"]
mod cluster;
#[path = "../tests/common/star.rs"]
mod star;

use cluster::{broadcast_join_config, in_memory_cluster, partitioned_join_config, WorkerFunctions};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::physical_plan::collect;
use datafusion::prelude::ParquetReadOptions;
use datafusion_distributed::display_plan_ascii;
use filterstore_datafusion::{last_report, RuntimeFilterConfig};
use star::{write_star, StarSpec};
use std::error::Error;

const QUERY: &str =
    "SELECT count(*), sum(f.f_val) FROM fact f JOIN dim d ON f.f_dkey = d.d_key WHERE d.d_cat < 10";

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    write_star(dir.path(), StarSpec::default())?;
    for (name, config) in [
        ("partitioned", partitioned_join_config(3)?),
        ("broadcast", broadcast_join_config(3)?),
    ] {
        let rule = Some(RuntimeFilterConfig::default());
        let ctx = in_memory_cluster(3, WorkerFunctions::Registered, config, rule)?;
        for t in ["fact", "dim"] {
            let path = dir.path().join(t);
            ctx.register_parquet(
                t,
                path.to_str().ok_or("path")?,
                ParquetReadOptions::default(),
            )
            .await?;
        }
        let plan = ctx.sql(QUERY).await?.create_physical_plan().await?;
        let report = last_report(&ctx).unwrap_or_default();
        println!("== {name} join\n{report}");
        let rows = collect(plan.clone(), ctx.task_ctx()).await?;
        println!("{}", pretty_format_batches(&rows)?);
        let plan = filterstore_datafusion::executed_plan(&plan).await?;
        println!("{}", display_plan_ascii(plan.as_ref(), true));
    }
    Ok(())
}
