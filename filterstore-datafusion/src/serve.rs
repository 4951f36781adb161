//! Running a real cluster: worker processes that know this crate's
//! functions and plan nodes, and a coordinator that reaches them by URL.
//!
//! A worker is datafusion-distributed's [`Worker`] (a gRPC / Arrow Flight
//! service) whose sessions get [`BloomStateBuilderExt::with_bloom_functions`];
//! the `filterstore-worker` binary of this crate serves one on a port. The
//! coordinator is a session with [`remote_cluster`]; with runtime filters on,
//! it also serves the filters' rendezvous ([`RendezvousServer`]) on a port
//! the workers can reach, and passes its address in the plan.

use crate::{BloomStateBuilderExt, RendezvousServer, RuntimeFilterConfig};
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

/// Serves [`bloom_worker`] on `listener` until `shutdown` completes.
pub async fn serve_worker(
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), tonic::transport::Error> {
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
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
/// filters' configuration, unless the configuration names one already.
/// Must be called inside a tokio runtime.
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
                    let s = RendezvousServer::start(rendezvous_addr)
                        .await
                        .map_err(|e| DataFusionError::External(Box::new(e)))?;
                    cfg.rendezvous = Some(s.url());
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
