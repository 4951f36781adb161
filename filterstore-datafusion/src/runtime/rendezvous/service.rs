//! The rendezvous across processes: an Arrow Flight service beside the
//! coordinator that takes the taps' posts and answers the probe tasks'
//! fetches, and the client worker processes call it with.
//!
//! Three actions ([`super::frame`] has the bytes):
//! - [`POST_ACTION`], a post frame; the answer is one empty result. A post
//!   is refused with an error status, counted and dropped ([`super::admit`])
//!   when its filter is unknown (its query ended, or a stray request), its
//!   scope names no run, its token is not the run's, its frame is larger
//!   than the filter can be or is damaged, or its task has already posted.
//! - [`FETCH_ACTION`], a fetch frame; the answer is one result holding a
//!   unit frame, sent when the filter's run has decided, or "pass every
//!   row" at once when the filter is unknown or its query has ended. A
//!   fetch with a wrong token, or for a run that does not exist, is refused
//!   (the filter would tell which keys the build side holds).
//! - [`ACK_ACTION`], an acknowledgement frame: the probe task received its
//!   filter and read it, or could not; counted in the run (what
//!   [`super::FilterOutcome`] reports), refused as a fetch is.
//!
//! Every other Flight call answers "unimplemented".
//!
//! Flight, not a protocol of our own: it is the gRPC service
//! datafusion-distributed's workers already speak, so a deployment that
//! lets workers reach the coordinator needs nothing new, and the crate is
//! already in the build.

use super::admit::{
    admit_ack, admit_fetch, admit_post, admit_request, run_header, Refusal, RUN_HEADER,
};
use super::frame::{decode_unit, encode_ack, encode_fetch, encode_unit, MAX_FRAME_BYTES};
use super::{Delivery, FilterId, RunKey};
use crate::runtime::RuntimeFilterConfig;
use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::flight_service_server::{FlightService, FlightServiceServer};
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightInfo,
    HandshakeRequest, HandshakeResponse, PollInfo, PutResult, SchemaResult, Ticket,
};
use futures::stream::BoxStream;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Request, Response, Status, Streaming};

/// The Flight action type of a post.
pub(super) const POST_ACTION: &str = "filterstore.runtime_filter.post";

/// The Flight action type of a fetch.
pub(super) const FETCH_ACTION: &str = "filterstore.runtime_filter.fetch";

/// The Flight action type of an acknowledgement.
pub(super) const ACK_ACTION: &str = "filterstore.runtime_filter.ack";

/// How long a probe task tries to deliver its acknowledgement.
pub(super) const ACK_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a worker tries to deliver one post.
pub(super) const POST_TIMEOUT: Duration = Duration::from_secs(30);

/// A running rendezvous service; stops when dropped.
#[derive(Debug)]
pub struct RendezvousServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    counters: Arc<Counters>,
}

/// What a rendezvous service took and refused since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RendezvousStats {
    /// Posts taken into a run.
    pub posts_taken: u64,
    /// Posts refused after their body was read: unknown filter or
    /// execution, wrong token in the frame, larger than their filter,
    /// damaged, or a task posting again (a replay: idempotent, it decides
    /// nothing).
    pub posts_refused: u64,
    /// Fetches and acknowledgements refused after their body was read:
    /// damaged, unknown execution, or wrong token in the frame.
    pub fetches_refused: u64,
    /// Requests refused from their headers alone, their body never read:
    /// no run header, or one naming an unknown filter or execution, or
    /// without that execution's token.
    pub refused_unread: u64,
}

#[derive(Debug, Default)]
struct Counters {
    posts_taken: AtomicU64,
    posts_refused: AtomicU64,
    fetches_refused: AtomicU64,
    refused_unread: AtomicU64,
}

impl RendezvousServer {
    /// Serves on `addr` (port 0 picks a free port) on the current tokio
    /// runtime, reading requests of up to 1 GiB and 4 KiB (the frame of
    /// the largest partial filter a plan may have; [`Self::start_for`]
    /// takes a smaller limit from a configuration).
    pub async fn start(addr: SocketAddr) -> std::io::Result<RendezvousServer> {
        Self::start_with_max_request(addr, MAX_FRAME_BYTES).await
    }

    /// [`Self::start`], the transport refusing any request larger than the
    /// largest filter `config` may plan (its `max_filter_bytes`, 1 MiB by
    /// default) can post, before it is buffered.
    pub async fn start_for(
        addr: SocketAddr,
        config: &RuntimeFilterConfig,
    ) -> std::io::Result<RendezvousServer> {
        Self::start_with_max_request(addr, max_request_for(config.max_filter_bytes)).await
    }

    /// [`Self::start`], with the transport refusing any request of more than
    /// `max_request` bytes before it is buffered: a deployment whose filters
    /// are smaller bounds what any peer can make the coordinator read
    /// (each post is also checked against its own filter's size).
    pub async fn start_with_max_request(
        addr: SocketAddr,
        max_request: usize,
    ) -> std::io::Result<RendezvousServer> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let incoming = incoming_nodelay(listener);
        let counters = Arc::new(Counters::default());
        // Answers carry whole filter messages: capped as what they answer
        // is (a cap of 1 MiB once turned every larger filter into "pass
        // every row" on the workers).
        let rendezvous = Rendezvous {
            counters: Arc::clone(&counters),
        };
        let service = FlightServiceServer::new(rendezvous)
            .max_decoding_message_size(max_request.min(MAX_FRAME_BYTES))
            .max_encoding_message_size(MAX_FRAME_BYTES);
        // The run header is checked before the transport reads the body.
        let unread = Arc::clone(&counters);
        let check = move |request: Request<()>| -> Result<Request<()>, Status> {
            let header = request.metadata().get(RUN_HEADER);
            match admit_request(header.and_then(|v| v.to_str().ok())) {
                Ok(()) => Ok(request),
                Err(r) => {
                    unread.refused_unread.fetch_add(1, Ordering::Relaxed);
                    Err(status(&r))
                }
            }
        };
        let service = InterceptedService::new(service, check);
        tokio::spawn(async move {
            let _ = Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(RendezvousServer {
            addr,
            stop: Some(stop),
            counters,
        })
    }

    /// What the service took and refused so far.
    pub fn stats(&self) -> RendezvousStats {
        let c = &self.counters;
        RendezvousStats {
            posts_taken: c.posts_taken.load(Ordering::Relaxed),
            posts_refused: c.posts_refused.load(Ordering::Relaxed),
            fetches_refused: c.fetches_refused.load(Ordering::Relaxed),
            refused_unread: c.refused_unread.load(Ordering::Relaxed),
        }
    }

    /// The address workers post to, as `http://host:port`: the address
    /// bound (for one bound to `0.0.0.0` or `::`, see [`Self::url_at`]).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The address workers post to when they reach this server by
    /// `advertise`: a host (`10.0.0.5`, `[fd00::5]`, `coordinator.internal`),
    /// to which the bound port is added, or a `host:port` (a port that
    /// forwards to this one). Refuses what is not a host of an `http` URL.
    pub fn url_at(&self, advertise: &str) -> Result<String, String> {
        advertised_url(advertise, self.addr.port())
    }

    /// Whether this server listens on every address (`0.0.0.0` or `::`):
    /// its [`Self::url`] is then no address a worker can dial.
    pub fn is_unspecified(&self) -> bool {
        self.addr.ip().is_unspecified()
    }
}

impl Drop for RendezvousServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The connections `listener` accepts, each with `TCP_NODELAY` set, for a
/// tonic server (tonic sets it only on listeners it binds itself). Without
/// it, a small answer written while an earlier segment of the same
/// connection is unacknowledged waits for the peer's delayed
/// acknowledgement: on the 2-core VM, a worker's fetch of a filter decided
/// at 14 ms came back at 53–57 ms (TPC-DS q52, three worker processes), and
/// datafusion-distributed's Flight streams between workers paid the same.
pub(crate) fn incoming_nodelay(listener: tokio::net::TcpListener) -> TcpIncoming {
    TcpIncoming::from(listener).with_nodelay(Some(true))
}

/// The `http://host:port` of `advertise` ([`RendezvousServer::url_at`]),
/// `port` added to a host without one.
pub(super) fn advertised_url(advertise: &str, port: u16) -> Result<String, String> {
    let with_port = match advertise.parse::<std::net::IpAddr>() {
        Ok(ip) => SocketAddr::new(ip, port).to_string(),
        Err(_) if advertise.starts_with('[') && advertise.ends_with(']') => {
            format!("{advertise}:{port}")
        }
        Err(_) if advertise.contains(':') => advertise.to_string(),
        Err(_) => format!("{advertise}:{port}"),
    };
    let url = format!("http://{with_port}");
    match url::Url::parse(&url) {
        Ok(u)
            if u.host().is_some()
                && u.port_or_known_default().is_some()
                && u.path() == "/"
                && u.query().is_none()
                && u.username().is_empty() =>
        {
            Ok(url)
        }
        _ => Err(format!(
            "advertised rendezvous address {advertise:?} is not a host or host:port"
        )),
    }
}

/// One channel per coordinator address, shared by every tap of a process.
static CHANNELS: LazyLock<Mutex<HashMap<String, Channel>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn channel(url: &str) -> Result<Channel, String> {
    if let Some(c) = CHANNELS.lock().get(url) {
        return Ok(c.clone());
    }
    let endpoint = Endpoint::from_shared(url.to_string())
        .map_err(|e| format!("rendezvous address {url}: {e}"))?
        .connect_timeout(Duration::from_secs(5));
    let c = endpoint.connect_lazy();
    CHANNELS.lock().insert(url.to_string(), c.clone());
    Ok(c)
}

/// The most bytes a rendezvous request may have for filters planned under
/// a budget of `max_filter_bytes` (`RuntimeFilterConfig::max_filter_bytes`:
/// no planned filter's message is larger), with room for the frame's and
/// the action's headers.
fn max_request_for(max_filter_bytes: u64) -> usize {
    usize::try_from(max_filter_bytes)
        .unwrap_or(usize::MAX)
        .saturating_add(64 << 10)
        .min(MAX_FRAME_BYTES)
}

/// Calls action `kind` with `body` on the coordinator at `url`, with `run`
/// as the [`RUN_HEADER`]; the first result's body. The call runs on the
/// rendezvous's own thread ([`super::io`]), started at once.
pub(super) fn call(
    url: &str,
    kind: &'static str,
    body: Vec<u8>,
    run: Option<&str>,
) -> impl std::future::Future<Output = Result<Vec<u8>, String>> + Send + use<> {
    let (url, run) = (url.to_string(), run.map(str::to_string));
    let call = super::io::spawn(async move { call_here(&url, kind, body, run.as_deref()).await });
    async move { call.await? }
}

/// [`call`], on the current runtime.
async fn call_here(
    url: &str,
    kind: &str,
    body: Vec<u8>,
    run: Option<&str>,
) -> Result<Vec<u8>, String> {
    let mut client = FlightServiceClient::new(channel(url)?)
        .max_encoding_message_size(MAX_FRAME_BYTES)
        .max_decoding_message_size(MAX_FRAME_BYTES);
    let action = Action {
        r#type: kind.to_string(),
        body: body.into(),
    };
    let mut request = Request::new(action);
    if let Some(run) = run {
        let value = run
            .parse()
            .map_err(|_| format!("{url}: a run header that is not ASCII"))?;
        request.metadata_mut().insert(RUN_HEADER, value);
    }
    let mut answers = client
        .do_action(request)
        .await
        .map_err(|s| format!("{url}: {}", s.message()))?
        .into_inner();
    let first = answers
        .message()
        .await
        .map_err(|s| format!("{url}: {}", s.message()))?;
    Ok(first.map(|r| r.body.to_vec()).unwrap_or_default())
}

/// Sends a post frame for filter `id`'s run of `key` to the coordinator at
/// `url`, within [`POST_TIMEOUT`].
pub(crate) async fn post_remote(
    url: &str,
    (id, key): (FilterId, RunKey),
    frame: Vec<u8>,
) -> Result<(), String> {
    let run = run_header(id, key);
    tokio::time::timeout(POST_TIMEOUT, call(url, POST_ACTION, frame, Some(&run)))
        .await
        .map_err(|_| format!("no answer from the coordinator at {url} in {POST_TIMEOUT:?}"))?
        .map(|_| ())
}

/// Fetches filter `id`'s run of `key` from the coordinator at `url`:
/// waits until it is decided (the caller bounds the wait); any failure is
/// "pass every row".
pub(crate) async fn fetch_remote(url: &str, id: FilterId, key: RunKey) -> Delivery {
    let run = run_header(id, key);
    match call(url, FETCH_ACTION, encode_fetch(id, key), Some(&run)).await {
        Ok(bytes) => decode_unit(&bytes).unwrap_or_else(|e| Delivery::PassAll(e.to_string())),
        Err(e) => Delivery::PassAll(format!("fetching the filter failed: {e}")),
    }
}

/// Tells the coordinator at `url` that this probe task received filter
/// `id`'s run of `key` and could (`readable`) or could not read it, within
/// [`ACK_TIMEOUT`]; a failure only leaves the filter reported undelivered.
pub(crate) async fn acknowledge_remote(url: &str, id: FilterId, key: RunKey, readable: bool) {
    #[cfg(feature = "test-hooks")]
    tokio::time::sleep(super::super::hooks::ack_delay()).await;
    let run = run_header(id, key);
    let frame = encode_ack(id, key, readable);
    let _ = tokio::time::timeout(ACK_TIMEOUT, call(url, ACK_ACTION, frame, Some(&run))).await;
}

/// The service.
struct Rendezvous {
    counters: Arc<Counters>,
}

impl Rendezvous {
    /// Takes a post frame into its run, or refuses it (counted).
    async fn post(&self, body: &[u8]) -> Result<(), Status> {
        let refused = |r: Refusal| {
            self.counters.posts_refused.fetch_add(1, Ordering::Relaxed);
            status(&r)
        };
        let (slot, run, post) = admit_post(body).map_err(refused)?;
        let task = post.task;
        // The merge decodes and ORs up to a few MiB: off the I/O threads.
        let taken = tokio::task::spawn_blocking(move || slot.take(&run, post))
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        if !taken {
            return Err(refused(Refusal::Taken(task)));
        }
        self.counters.posts_taken.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Counts an acknowledgement in its run, or refuses it (counted).
    fn ack(&self, body: &[u8]) -> Result<(), Status> {
        match admit_ack(body) {
            Ok(Some((run, readable))) => run.acknowledge(readable),
            Ok(None) => {}
            Err(r) => {
                self.counters
                    .fetches_refused
                    .fetch_add(1, Ordering::Relaxed);
                return Err(status(&r));
            }
        }
        Ok(())
    }

    /// The unit frame answering a fetch frame, once its run has decided.
    async fn fetch(&self, body: &[u8]) -> Result<Vec<u8>, Status> {
        let rx = admit_fetch(body).map_err(|r| {
            self.counters
                .fetches_refused
                .fetch_add(1, Ordering::Relaxed);
            status(&r)
        })?;
        let delivery = match rx {
            Some(rx) => super::delivery(rx).await,
            None => {
                Delivery::PassAll("no such filter on the coordinator (its query ended?)".into())
            }
        };
        Ok(encode_unit(&delivery))
    }
}

/// The status a refusal answers with.
fn status(r: &Refusal) -> Status {
    let why = r.to_string();
    match r {
        Refusal::Frame(_) => Status::invalid_argument(why),
        Refusal::UnknownFilter | Refusal::UnknownRun => Status::not_found(why),
        Refusal::Token => Status::permission_denied(why),
        Refusal::TooLarge { .. } => Status::resource_exhausted(why),
        Refusal::Taken(_) => Status::already_exists(why),
    }
}

type Stream<T> = BoxStream<'static, Result<T, Status>>;

fn unimplemented<T>() -> Result<Response<T>, Status> {
    Err(Status::unimplemented(
        "the runtime-filter rendezvous only takes posts",
    ))
}

#[tonic::async_trait]
impl FlightService for Rendezvous {
    type HandshakeStream = Stream<HandshakeResponse>;
    type ListFlightsStream = Stream<FlightInfo>;
    type DoGetStream = Stream<FlightData>;
    type DoPutStream = Stream<PutResult>;
    type DoExchangeStream = Stream<FlightData>;
    type DoActionStream = Stream<arrow_flight::Result>;
    type ListActionsStream = Stream<ActionType>;

    async fn handshake(
        &self,
        _: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<Self::HandshakeStream>, Status> {
        unimplemented()
    }

    async fn list_flights(
        &self,
        _: Request<Criteria>,
    ) -> Result<Response<Self::ListFlightsStream>, Status> {
        unimplemented()
    }

    async fn get_flight_info(
        &self,
        _: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        unimplemented()
    }

    async fn poll_flight_info(
        &self,
        _: Request<FlightDescriptor>,
    ) -> Result<Response<PollInfo>, Status> {
        unimplemented()
    }

    async fn get_schema(
        &self,
        _: Request<FlightDescriptor>,
    ) -> Result<Response<SchemaResult>, Status> {
        unimplemented()
    }

    async fn do_get(&self, _: Request<Ticket>) -> Result<Response<Self::DoGetStream>, Status> {
        unimplemented()
    }

    async fn do_put(
        &self,
        _: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoPutStream>, Status> {
        unimplemented()
    }

    async fn do_exchange(
        &self,
        _: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoExchangeStream>, Status> {
        unimplemented()
    }

    async fn do_action(
        &self,
        request: Request<Action>,
    ) -> Result<Response<Self::DoActionStream>, Status> {
        let action = request.into_inner();
        let answer = match action.r#type.as_str() {
            POST_ACTION => {
                self.post(&action.body).await?;
                Vec::new()
            }
            FETCH_ACTION => self.fetch(&action.body).await?,
            ACK_ACTION => {
                self.ack(&action.body)?;
                Vec::new()
            }
            other => return Err(Status::invalid_argument(format!("unknown action {other}"))),
        };
        let result = arrow_flight::Result {
            body: answer.into(),
        };
        let done: Stream<arrow_flight::Result> =
            Box::pin(futures::stream::once(async move { Ok(result) }));
        Ok(Response::new(done))
    }

    async fn list_actions(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        let actions = [
            (
                POST_ACTION,
                "a runtime filter's partial from one task of a join's build side",
            ),
            (
                FETCH_ACTION,
                "a runtime filter for a probe task, once decided",
            ),
            (
                ACK_ACTION,
                "a probe task received its runtime filter (and could read it, or not)",
            ),
        ]
        .map(|(t, d)| {
            Ok(ActionType {
                r#type: t.to_string(),
                description: d.to_string(),
            })
        });
        Ok(Response::new(Box::pin(futures::stream::iter(actions))))
    }
}
