//! Running a real cluster: worker processes that know this crate's
//! functions and plan nodes, and a coordinator that reaches them by URL.
//!
//! A worker is datafusion-distributed's [`Worker`] (a gRPC / Arrow Flight
//! service) whose sessions get [`BloomStateBuilderExt::with_bloom_functions`];
//! the `filterstore-worker` binary of this crate serves one on a port. The
//! coordinator is a session with [`remote_cluster`]; with runtime filters on,
//! it also serves the filters' rendezvous ([`RendezvousServer`]) on a port
//! the workers can reach, and passes its address in the plan.

use crate::runtime::incoming_nodelay;
use crate::runtime::{RendezvousServer, RuntimeFilterConfig};
use crate::session::BloomStateBuilderExt;
use datafusion::error::DataFusionError;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_distributed::{
    DistributedExt, SessionStateBuilderExt, Worker, WorkerQueryContext, WorkerResolver,
};
use std::future::Future;
use std::net::SocketAddr;
use tonic::transport::Server;
use url::Url;

/// A worker whose every session has this crate's functions and codec.
pub fn bloom_worker() -> Worker {
    Worker::from_session_builder(|ctx: WorkerQueryContext| async move {
        Ok(ctx.builder.with_bloom_functions().build())
    })
}

/// Serves [`bloom_worker`] on `listener` until `shutdown` completes, with
/// `TCP_NODELAY` on every connection it accepts.
pub async fn serve_worker(
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), tonic::transport::Error> {
    let incoming = incoming_nodelay(listener);
    Server::builder()
        .add_service(bloom_worker().into_worker_server())
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
}

/// Workers at fixed URLs.
#[derive(Clone, Debug)]
pub struct StaticWorkers(pub Vec<Url>);

impl WorkerResolver for StaticWorkers {
    fn get_urls(&self) -> Result<Vec<Url>, DataFusionError> {
        Ok(self.0.clone())
    }
}

/// A coordinator and what it serves: keep it alive as long as the session.
pub struct RemoteCluster {
    /// The coordinator's session.
    pub ctx: SessionContext,
    /// The runtime filters' rendezvous, when they are on.
    pub rendezvous: Option<RendezvousServer>,
}

/// A coordinator session over the workers at `urls` (datafusion-distributed's
/// gRPC channels). With `runtime_filters`, a rendezvous is served on
/// `rendezvous_addr` (port 0: any free port) and its address goes into the
/// filters' configuration, unless the configuration names one already. A
/// rendezvous on `0.0.0.0` or `::` needs
/// [`RuntimeFilterConfig::advertise`], the host workers reach it by (the
/// call fails before it binds anything without it). The rendezvous, like
/// datafusion-distributed's workers, trusts its network: bind loopback or
/// a private network (`docs/DATAFUSION.md`, "Trust model").
/// Must be called inside a tokio runtime.
///
/// Two workers served in this process on local ports (in production, one
/// `filterstore-worker` process per machine), a coordinator over them with
/// runtime filters on, and a join whose probe side the filter cuts:
///
/// ```
/// use datafusion::physical_plan::{collect, displayable};
/// use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
/// use datafusion_distributed::{DistributedConfig, DistributedExt};
/// use filterstore_datafusion::{
///     executed_plan, last_report, remote_cluster, serve_worker, RuntimeFilterConfig,
/// };
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # tokio::runtime::Runtime::new()?.block_on(async {
/// let (stop, stopped) = tokio::sync::watch::channel(());
/// let mut urls = Vec::new();
/// for _ in 0..2 {
///     let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
///     urls.push(url::Url::parse(&format!("http://{}", listener.local_addr()?))?);
///     let mut stopped = stopped.clone();
///     tokio::spawn(serve_worker(listener, async move {
///         let _ = stopped.changed().await;
///     }));
/// }
///
/// // Two Parquet tables every worker can read.
/// let dir = tempfile::tempdir()?;
/// let local = SessionContext::new();
/// for (table, query) in [
///     ("dim", "SELECT * FROM (VALUES (1), (2), (3)) AS t(k)"),
///     ("fact", "SELECT value % 1000 AS k FROM generate_series(1, 20000)"),
/// ] {
///     let path = dir.path().join(format!("{table}.parquet"));
///     let copy = format!("COPY ({query}) TO '{}' STORED AS PARQUET", path.display());
///     local.sql(&copy).await?.collect().await?;
/// }
///
/// // Joins partitioned across the workers, every file scan spread over them.
/// let mut config = SessionConfig::new().with_target_partitions(2);
/// config.set_distributed_option_extension(DistributedConfig::default());
/// let mut config = config
///     .with_distributed_file_scan_config_bytes_per_partition(1)?
///     .with_distributed_metrics_collection(true)?
///     .with_distributed_broadcast_joins(false)?;
/// config.options_mut().optimizer.hash_join_single_partition_threshold = 0;
/// config.options_mut().optimizer.hash_join_single_partition_threshold_rows = 0;
///
/// // `force`: this toy join is too small for the rule to judge a filter worth it.
/// let rule = RuntimeFilterConfig { force: true, ..RuntimeFilterConfig::default() };
/// let any_port = "127.0.0.1:0".parse()?;
/// let cluster = remote_cluster(urls, config, Some(rule), any_port).await?;
/// let ctx = &cluster.ctx;
/// for table in ["dim", "fact"] {
///     let path = dir.path().join(format!("{table}.parquet"));
///     ctx.register_parquet(table, path.to_str().unwrap(), ParquetReadOptions::default())
///         .await?;
/// }
///
/// let sql = "SELECT count(*) AS n FROM fact JOIN dim ON fact.k = dim.k";
/// let plan = ctx.sql(sql).await?.create_physical_plan().await?;
/// let out = collect(plan.clone(), ctx.task_ctx()).await?;
/// let n = datafusion::arrow::array::AsArray::as_primitive::<
///     datafusion::arrow::datatypes::Int64Type,
/// >(out[0].column(0));
/// assert_eq!(n.value(0), 60); // the same answer as without the filter
///
/// // What the rule decided, and the filter's rows in and out per node.
/// let report = last_report(ctx).expect("planned on this session");
/// assert_eq!(report.placed(), 1, "{report:?}");
/// let ran = executed_plan(&plan).await?;
/// let text = displayable(ran.as_ref()).indent(true).to_string();
/// assert!(text.contains("BloomFilterExec"), "{text}");
/// let _ = stop.send(());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })
/// # }
/// ```
pub async fn remote_cluster(
    urls: Vec<Url>,
    config: SessionConfig,
    runtime_filters: Option<RuntimeFilterConfig>,
    rendezvous_addr: SocketAddr,
) -> Result<RemoteCluster, DataFusionError> {
    let builder = SessionStateBuilder::new()
        .with_default_features()
        .with_config(config)
        .with_distributed_worker_resolver(StaticWorkers(urls));
    let (builder, rendezvous) = match runtime_filters {
        Some(mut cfg) => {
            let server = match cfg.rendezvous {
                Some(_) => None,
                None => {
                    if rendezvous_addr.ip().is_unspecified() && cfg.advertise.is_none() {
                        return Err(DataFusionError::Configuration(format!(
                            "the rendezvous would listen on {rendezvous_addr}, which no worker \
                             can dial: set RuntimeFilterConfig::advertise to the host workers \
                             reach this coordinator by, or bind a specific address"
                        )));
                    }
                    let s = RendezvousServer::start_for(rendezvous_addr, &cfg)
                        .await
                        .map_err(|e| DataFusionError::External(Box::new(e)))?;
                    cfg.rendezvous = Some(match &cfg.advertise {
                        Some(a) => s.url_at(a).map_err(DataFusionError::Configuration)?,
                        None => s.url(),
                    });
                    Some(s)
                }
            };
            (builder.with_bloom_runtime_filters(cfg), server)
        }
        None => (
            builder.with_bloom_functions().with_distributed_planner(),
            None,
        ),
    };
    Ok(RemoteCluster {
        ctx: SessionContext::from(builder.build()),
        rendezvous,
    })
}
