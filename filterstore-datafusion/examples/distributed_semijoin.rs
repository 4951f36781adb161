//! The distributed semi-join on datafusion-distributed's in-memory cluster
//! (3 workers in this process, gRPC over in-memory pipes).
//!
//! The join is forced partitioned, so the fact table's rows cross a network
//! shuffle. `semi_join_prefilter` runs query 1 (`bloom_agg` of the
//! dimension's selected keys), adds `bloom_contains` below the fact side's
//! shuffle of query 2, and about 10% of the fact rows (plus ~1% false
//! positives) cross it instead of all of them. With DataFusion's default
//! broadcast plan there is no fact shuffle, and the helper leaves the plan
//! alone.
//!
//! Run: `cargo run --release --workspace --example distributed_semijoin`

use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::physical_plan::collect;
use datafusion::prelude::ParquetReadOptions;
use datafusion_distributed::{
    display_plan_ascii, rewrite_distributed_plan_with_metrics, DistributedMetricsFormat,
};
use filterstore_datafusion::cluster::{
    broadcast_join_config, in_memory_cluster, partitioned_join_config, WorkerFunctions,
};
use filterstore_datafusion::star::{write_star, StarSpec};
use filterstore_datafusion::{semi_join_prefilter, Prefilter};
use std::error::Error;

const QUERY: &str =
    "SELECT count(*), sum(f.f_val) FROM fact f JOIN dim d ON f.f_dkey = d.d_key WHERE d.d_cat < 10";

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    write_star(dir.path(), StarSpec::default())?;
    let prefilter = Prefilter::new(
        "SELECT bloom_agg(d_key) FROM dim WHERE d_cat < 10",
        "f_dkey",
    );
    for (name, config) in [
        ("partitioned", partitioned_join_config(3)?),
        ("broadcast", broadcast_join_config(3)?),
    ] {
        let ctx = in_memory_cluster(3, WorkerFunctions::Registered, config)?;
        for t in ["fact", "dim"] {
            let path = dir.path().join(t);
            ctx.register_parquet(
                t,
                path.to_str().ok_or("path")?,
                ParquetReadOptions::default(),
            )
            .await?;
        }
        let r = semi_join_prefilter(&ctx, QUERY, &prefilter).await?;
        println!("== {name} join: {:?}", r.decision);
        let rows = collect(r.plan.clone(), ctx.task_ctx()).await?;
        println!("{}", pretty_format_batches(&rows)?);
        let plan =
            rewrite_distributed_plan_with_metrics(r.plan, DistributedMetricsFormat::Aggregated)
                .await?;
        println!("{}", display_plan_ascii(plan.as_ref(), true));
    }
    Ok(())
}
