//! An in-memory datafusion-distributed cluster: coordinator and workers in
//! one process, talking gRPC over a tokio duplex pipe, no ports. The tests,
//! examples and benchmark run on it; production clusters use the same session
//! setup (`BloomStateBuilderExt`) with real resolvers, as
//! `filterstore_datafusion::remote_cluster` does for worker processes.
//!
//! Adapted from datafusion-distributed 4.0's `examples/in_memory_cluster.rs`
//! (Apache-2.0), which its `integration` feature ships as test utilities;
//! copying its 60 lines keeps that feature, and insta with it, out of the
//! build.

#![allow(dead_code)]

use async_trait::async_trait;
use datafusion::error::DataFusionError;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_distributed::{
    grpc, ChannelResolver, DistributedConfig, DistributedExt, SessionStateBuilderExt, Worker,
    WorkerChannel, WorkerQueryContext, WorkerResolver,
};
use filterstore_datafusion::{BloomStateBuilderExt, RuntimeFilterConfig};
use hyper_util::rt::TokioIo;
use tonic::transport::{Endpoint, Server};
use url::Url;

const DUMMY_URL: &str = "http://localhost:50051";

/// Whether workers know this crate's functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerFunctions {
    /// Every worker registers the UDFs (the normal setup).
    Registered,
    /// No worker does: a query using them must fail.
    Missing,
}

/// A session over `workers` in-memory workers, with this crate's functions
/// on the coordinator and, when `runtime_filters` is given, its runtime
/// Bloom filters. Must be called inside a tokio runtime (the workers' server
/// is spawned on it).
pub fn in_memory_cluster(
    workers: usize,
    functions: WorkerFunctions,
    config: SessionConfig,
    runtime_filters: Option<RuntimeFilterConfig>,
) -> Result<SessionContext, DataFusionError> {
    let channels = InMemoryChannelResolver::new(functions)?;
    let builder = SessionStateBuilder::new()
        .with_default_features()
        .with_config(config)
        .with_distributed_worker_resolver(InMemoryWorkerResolver(workers))
        .with_distributed_channel_resolver(channels);
    let builder = match runtime_filters {
        Some(cfg) => builder.with_bloom_runtime_filters(cfg),
        None => builder.with_bloom_functions().with_distributed_planner(),
    };
    Ok(SessionContext::from(builder.build()))
}

/// A configuration whose equi-joins are planned as partitioned hash joins
/// (both sides shuffled by key), never broadcast: DataFusion collects a build
/// side under 1 MiB / 128k rows by default, and datafusion-distributed then
/// broadcasts it, so both thresholds go to zero and broadcast is switched off.
pub fn partitioned_join_config(target_partitions: usize) -> Result<SessionConfig, DataFusionError> {
    let mut config = distributed_config(target_partitions)?;
    let opts = config.options_mut();
    opts.optimizer.hash_join_single_partition_threshold = 0;
    opts.optimizer.hash_join_single_partition_threshold_rows = 0;
    config.with_distributed_broadcast_joins(false)
}

/// datafusion-distributed's defaults: a scan of a few megabytes stays in one
/// task, so a small query is not distributed at all (the plan stays
/// single-node).
pub fn single_task_config(target_partitions: usize) -> Result<SessionConfig, DataFusionError> {
    let mut config = SessionConfig::new().with_target_partitions(target_partitions);
    config.set_distributed_option_extension(DistributedConfig::default());
    Ok(config)
}

/// DataFusion's defaults with broadcast joins on: a small build side is
/// collected and broadcast to every probe task.
pub fn broadcast_join_config(target_partitions: usize) -> Result<SessionConfig, DataFusionError> {
    distributed_config(target_partitions)?.with_distributed_broadcast_joins(true)
}

/// A config that carries datafusion-distributed's options (its setters
/// refuse a config without them), with every file scan spread over as many
/// tasks as there are workers (as datafusion-distributed's own in-memory
/// tests do: otherwise a scan of a few megabytes stays in one task and the
/// plan is not distributed at all), and workers' metrics sent home.
fn distributed_config(target_partitions: usize) -> Result<SessionConfig, DataFusionError> {
    let mut config = SessionConfig::new().with_target_partitions(target_partitions);
    config.set_distributed_option_extension(DistributedConfig::default());
    config
        .with_distributed_file_scan_config_bytes_per_partition(1)?
        .with_distributed_metrics_collection(true)
}

#[derive(Clone)]
struct InMemoryChannelResolver {
    channel: grpc::BoxCloneSyncChannel,
}

impl InMemoryChannelResolver {
    fn new(functions: WorkerFunctions) -> Result<Self, DataFusionError> {
        let (client, server) = tokio::io::duplex(1024 * 1024);
        let mut client = Some(client);
        let endpoint =
            Endpoint::try_from(DUMMY_URL).map_err(|e| DataFusionError::External(Box::new(e)))?;
        let channel = endpoint.connect_with_connector_lazy(tower::service_fn(move |_| {
            let client = client.take();
            async move {
                client
                    .map(TokioIo::new)
                    .ok_or_else(|| std::io::Error::other("in-memory client taken twice"))
            }
        }));
        let this = Self {
            channel: grpc::BoxCloneSyncChannel::new(channel),
        };
        let for_workers = this.clone();
        let worker = Worker::from_session_builder(move |ctx: WorkerQueryContext| {
            let channels = for_workers.clone();
            async move {
                let builder = ctx.builder.with_distributed_channel_resolver(channels);
                Ok(match functions {
                    WorkerFunctions::Registered => builder.with_bloom_functions().build(),
                    WorkerFunctions::Missing => builder.build(),
                })
            }
        });
        tokio::spawn(async move {
            Server::builder()
                .add_service(worker.into_worker_server())
                .serve_with_incoming(tokio_stream::once(Ok::<_, std::io::Error>(server)))
                .await
        });
        Ok(this)
    }
}

#[async_trait]
impl ChannelResolver for InMemoryChannelResolver {
    async fn get_worker_client_for_url(
        &self,
        _: &Url,
    ) -> Result<Box<dyn WorkerChannel>, DataFusionError> {
        Ok(grpc::create_worker_client(self.channel.clone()))
    }
}

struct InMemoryWorkerResolver(usize);

impl WorkerResolver for InMemoryWorkerResolver {
    fn get_urls(&self) -> Result<Vec<Url>, DataFusionError> {
        (0..self.0)
            .map(|i| Url::parse(&format!("http://worker-{i}")))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| DataFusionError::External(Box::new(e)))
    }
}
