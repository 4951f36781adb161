//! The rendezvous against peers that did not get the plan: forged,
//! replayed, truncated and oversized frames, sent to a real service on
//! 127.0.0.1 (every call bounded by a timeout).

use super::admit::{admit_post, Refusal};
use super::frame::HEAD;
use super::service::{acknowledge_remote, fetch_remote, post_remote};
use super::tests::{params, partial, policy, post};
use super::*;
use filterstore::{BloomRead, HashSpec, Layout};
use std::future::Future;
use std::ops::Range;
use std::time::Duration;

/// `f`, or a failed test after 30 s (a test that can hang has a deadline).
async fn within<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .expect("the rendezvous hangs")
}

async fn server() -> RendezvousServer {
    RendezvousServer::start("127.0.0.1:0".parse().expect("an address"))
        .await
        .expect("a loopback port")
}

/// A slot with one open execution, as `BloomQueryExec` leaves it.
fn live() -> (Arc<Slot>, RunKey) {
    let slot = Slot::register(new_filter_id(), params(), policy());
    let key = RunKey::fresh(7).unwrap();
    slot.open(key);
    (slot, key)
}

/// The post frame of task `task` of `tasks` with keys `keys`.
fn post_frame(id: FilterId, key: RunKey, task: usize, tasks: usize, keys: Range<u32>) -> Vec<u8> {
    let f = partial(keys);
    let m = encode_message(f.as_ref(), 1, 0, CodecChoice::Auto).unwrap();
    encode_post(id, key, &post(task, tasks, PartialBody::Message(m))).unwrap()
}

/// The CRC recomputed after bytes were changed (a forger can).
fn reseal(mut frame: Vec<u8>) -> Vec<u8> {
    let end = frame.len() - 4;
    let crc = crc32fast::hash(&frame[..end]);
    frame[end..].copy_from_slice(&crc.to_le_bytes());
    frame
}

/// What a probe task of `key` receives, as a set of keys it holds.
async fn holds(url: &str, slot: &Slot, key: RunKey, mut keys: Range<u32>) -> bool {
    let Delivery::Message(m, _) = within(fetch_remote(url, slot.id(), key)).await else {
        return false;
    };
    let f = filterstore::decode_message(&m).unwrap().filter().unwrap();
    keys.all(|k| f.contains(&k.to_le_bytes()))
}

/// Keys a forger may try for `key`'s run: no token (zeros), a random one,
/// and the right one with its last bit flipped.
fn forged(key: RunKey) -> [RunKey; 3] {
    let mut off_by_one = key.token;
    off_by_one[15] ^= 1;
    [[0; 16], RunKey::fresh(key.scope).unwrap().token, off_by_one]
        .map(|token| RunKey { token, ..key })
}

/// Issue 35: "task 0 of 1" with an empty filter, posted by a peer that can
/// reach the port but has no token, once decided the run alone and the
/// query lost every row. Now it is refused and counted, and the run is
/// decided by its own tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_post_changes_no_answer_and_is_counted() {
    let server = server().await;
    let (slot, key) = live();
    let empty = encode_message(&BitFilter::new(params()).unwrap(), 0, 0, CodecChoice::Auto);
    let empty = empty.unwrap();
    let forged_keys = forged(key);
    for (i, forged) in forged_keys.into_iter().enumerate() {
        let p = post(0, 1, PartialBody::Message(empty.clone()));
        let bytes = encode_post(slot.id(), forged, &p).unwrap();
        let sent = within(post_remote(&server.url(), (slot.id(), forged), bytes)).await;
        assert!(sent.is_err(), "forged post {i} taken");
        let failed = encode_post(
            slot.id(),
            forged,
            &post(0, 1, PartialBody::Failed("x".into())),
        );
        assert!(within(post_remote(
            &server.url(),
            (slot.id(), forged),
            failed.unwrap()
        ))
        .await
        .is_err());
    }
    assert_eq!(slot.outcome(), None, "a forged post decided the run");
    assert_eq!(slot.refused_posts(), 6);
    // Refused from their headers, their bodies never read.
    let stats = server.stats();
    assert_eq!((stats.refused_unread, stats.posts_taken), (6, 0));
    // A fetch without the token learns nothing, and is counted.
    let Delivery::PassAll(why) =
        within(fetch_remote(&server.url(), slot.id(), forged_keys[1])).await
    else {
        panic!("a fetch without the token got the filter")
    };
    assert!(why.contains("token"), "{why}");
    assert_eq!(server.stats().refused_unread, 7);
    // The run's own tasks decide it, with every key.
    for (task, keys) in [(0, 0..1000), (1, 1000..2000)] {
        let bytes = post_frame(slot.id(), key, task, 2, keys);
        within(post_remote(&server.url(), (slot.id(), key), bytes))
            .await
            .unwrap();
    }
    assert!(holds(&server.url(), &slot, key, 0..2000).await);
    assert_eq!(server.stats().posts_taken, 2);
}

/// A valid post sent again, into its own execution or another's, is
/// refused: a task index is taken once, and a token binds one execution.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_post_changes_no_answer() {
    let server = server().await;
    let url = server.url();
    let (slot, a) = live();
    let first = post_frame(slot.id(), a, 0, 2, 0..1000);
    within(post_remote(&url, (slot.id(), a), first.clone()))
        .await
        .unwrap();
    assert!(within(post_remote(&url, (slot.id(), a), first.clone()))
        .await
        .is_err());
    assert_eq!((slot.outcome(), slot.refused_posts()), (None, 1));
    // A later execution of the plan (another key); the replay names
    // execution `a`'s scope, or `b`'s with `a`'s token: refused either way
    // (sent with `a`'s run header, as captured).
    let b = RunKey::fresh(a.scope + 1).unwrap();
    slot.open(b);
    let mut moved = first.clone();
    moved[HEAD + 16..HEAD + 24].copy_from_slice(&b.scope.to_le_bytes());
    let moved = reseal(moved);
    assert!(matches!(admit_post(&moved), Err(Refusal::Token)));
    assert!(within(post_remote(&url, (slot.id(), a), moved))
        .await
        .is_err());
    assert!(within(post_remote(&url, (slot.id(), a), first.clone()))
        .await
        .is_err());
    // Each execution is decided by its own posts alone.
    within(post_remote(
        &url,
        (slot.id(), b),
        post_frame(slot.id(), b, 0, 1, 5000..6000),
    ))
    .await
    .unwrap();
    assert!(holds(&url, &slot, b, 5000..6000).await);
    within(post_remote(
        &url,
        (slot.id(), a),
        post_frame(slot.id(), a, 1, 2, 1000..2000),
    ))
    .await
    .unwrap();
    assert!(holds(&url, &slot, a, 0..2000).await);
    // After the decision a replay is still refused and changes nothing.
    let decided = within(fetch_remote(&url, slot.id(), a)).await;
    assert!(within(post_remote(&url, (slot.id(), a), first))
        .await
        .is_err());
    assert_eq!(within(fetch_remote(&url, slot.id(), a)).await, decided);
    // Refused on the slot: four sent, one checked directly (`admit_post`).
    assert_eq!(slot.refused_posts(), 5);
    assert_eq!(server.stats().posts_refused, 4);
}

/// A post cut short anywhere is refused with an error and leaves its run
/// as it was; the whole frame is then taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_post_is_refused_and_changes_no_answer() {
    let server = server().await;
    let (slot, key) = live();
    let whole = post_frame(slot.id(), key, 0, 1, 0..1000);
    let n = whole.len();
    let cuts = [
        0,
        1,
        4,
        HEAD - 1,
        HEAD,
        HEAD + 39,
        HEAD + 40,
        HEAD + 56,
        n / 2,
        n - 5,
        n - 4,
        n - 1,
    ];
    for cut in cuts {
        let sent = within(post_remote(
            &server.url(),
            (slot.id(), key),
            whole[..cut].to_vec(),
        ))
        .await;
        assert!(sent.is_err(), "a post cut at {cut} of {n} bytes was taken");
        assert_eq!(slot.outcome(), None, "cut at {cut}");
    }
    assert_eq!(server.stats().posts_refused, cuts.len() as u64);
    within(post_remote(&server.url(), (slot.id(), key), whole))
        .await
        .unwrap();
    assert!(holds(&server.url(), &slot, key, 0..1000).await);
}

/// A post larger than its filter can be is refused from its header, before
/// its body is read: a body length far past the bytes present is "too
/// large" (not "truncated"), and a whole frame of a larger filter never
/// reaches the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_post_is_refused_before_its_body_is_read() {
    let server = server().await;
    let (slot, key) = live();
    let cap = max_post_body(slot.params());
    let head_only = |declared: u32| {
        let mut f = post_frame(slot.id(), key, 0, 1, 0..10);
        f.truncate(HEAD + frame::POST_HEAD);
        f[8..12].copy_from_slice(&declared.to_le_bytes());
        f
    };
    for declared in [cap as u32 + 1, u32::MAX] {
        let refused = admit_post(&head_only(declared)).err();
        assert!(
            matches!(refused, Some(Refusal::TooLarge { .. })),
            "{declared}: {refused:?}"
        );
    }
    // Just at the cap, the header passes and the missing body is "truncated".
    let at_cap = admit_post(&head_only(cap as u32));
    assert!(matches!(
        at_cap,
        Err(Refusal::Frame(frame::FrameError::Truncated { .. }))
    ));
    // A whole, well-formed post of a filter 64 times larger.
    let big = FilterParams::for_capacity(640_000, 0.01, Layout::Blocked, HashSpec::xxh3(7));
    let f = BitFilter::new(big.unwrap()).unwrap();
    let m = encode_message(&f, 1, 0, CodecChoice::Plain).unwrap();
    let bytes = encode_post(slot.id(), key, &post(0, 1, PartialBody::Message(m))).unwrap();
    assert!(bytes.len() > cap);
    let sent = within(post_remote(&server.url(), (slot.id(), key), bytes)).await;
    assert!(sent.is_err_and(|e| e.contains("over the")));
    assert_eq!((slot.outcome(), slot.refused_posts()), (None, 4));
    // A full plain partial of the slot's own size is within the cap.
    let own = encode_message(partial(0..10).as_ref(), 10, 0, CodecChoice::Plain).unwrap();
    let bytes = encode_post(slot.id(), key, &post(0, 1, PartialBody::Message(own))).unwrap();
    within(post_remote(&server.url(), (slot.id(), key), bytes))
        .await
        .unwrap();
    assert!(holds(&server.url(), &slot, key, 0..10).await);
}

/// A service started with a smaller request limit refuses a larger request
/// in its transport, before any of it is buffered for the rendezvous.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_transport_limit_refuses_a_larger_request() {
    let addr = "127.0.0.1:0".parse().unwrap();
    let server = RendezvousServer::start_with_max_request(addr, 1024)
        .await
        .unwrap();
    let (slot, key) = live();
    let bytes = post_frame(slot.id(), key, 0, 1, 0..1000);
    assert!(bytes.len() > 1024);
    assert!(within(post_remote(&server.url(), (slot.id(), key), bytes))
        .await
        .is_err());
    assert_eq!(slot.outcome(), None);
    let small = encode_post(slot.id(), key, &post(0, 1, PartialBody::Failed("x".into())));
    within(post_remote(&server.url(), (slot.id(), key), small.unwrap()))
        .await
        .unwrap();
    assert!(!slot.outcome().unwrap().is_built());
}

/// A request without the run header, or with one that is not its run's,
/// is refused from its headers: its body (here a whole, valid post of
/// 2 MiB with the right token inside) is never read or decoded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_its_run_header_is_refused_unread() {
    let server = server().await;
    let url = server.url();
    let (slot, key) = live();
    let mut m = encode_message(partial(0..10).as_ref(), 10, 0, CodecChoice::Plain).unwrap();
    m.resize(2 << 20, 0);
    let bytes = encode_post(slot.id(), key, &post(0, 1, PartialBody::Message(m))).unwrap();
    let other = RunKey::fresh(key.scope).unwrap();
    let headers = [
        None,
        Some("not a run header".to_string()),
        Some(super::admit::run_header(slot.id(), other)),
        Some(super::admit::run_header(new_filter_id(), key)),
    ];
    for (i, h) in headers.iter().enumerate() {
        let sent = service::call(&url, service::POST_ACTION, bytes.clone(), h.as_deref());
        assert!(within(sent).await.is_err(), "header {i}");
    }
    let stats = server.stats();
    assert_eq!(
        (stats.refused_unread, stats.posts_refused),
        (4, 0),
        "{stats:?}"
    );
    assert_eq!(slot.outcome(), None);
    // Its own header lets the same bytes in: the frame is then refused
    // from its declared size, the run unchanged.
    let sent = post_remote(&url, (slot.id(), key), bytes);
    assert!(within(sent).await.is_err_and(|e| e.contains("over the")));
    assert_eq!(server.stats().posts_refused, 1);
    assert_eq!(slot.outcome(), None);
}

/// Frame heads and whole frames never panic on any cut or flipped byte.
#[test]
fn damaged_post_frames_never_panic() {
    let (slot, key) = live();
    let whole = post_frame(slot.id(), key, 0, 1, 0..100);
    for cut in 0..whole.len() {
        assert!(frame::decode_post(&whole[..cut]).is_err());
        let _ = frame::peek_post(&whole[..cut]);
        let _ = admit_post(&whole[..cut]);
    }
    for i in 0..whole.len().min(200) {
        let mut bad = whole.clone();
        bad[i] ^= 0x41;
        let _ = admit_post(&bad);
        assert!(frame::decode_post(&bad).is_err(), "flip at {i}");
    }
    assert_eq!(slot.outcome(), None);
}

/// A built filter is reported built only once a probe task has received
/// and read it; a forged acknowledgement counts nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_is_built_only_once_a_probe_task_acknowledges_it() {
    let server = server().await;
    let (slot, key) = live();
    let bytes = post_frame(slot.id(), key, 0, 1, 0..500);
    within(post_remote(&server.url(), (slot.id(), key), bytes))
        .await
        .unwrap();
    let undelivered = slot.outcome().expect("decided");
    assert!(
        matches!(
            undelivered,
            FilterOutcome::Undelivered { unreadable: 0, .. }
        ),
        "{undelivered}"
    );
    assert!(!undelivered.is_built());
    assert!(undelivered.to_string().starts_with("undelivered"));
    for forged in forged(key) {
        within(acknowledge_remote(&server.url(), slot.id(), forged, true)).await;
    }
    assert!(matches!(
        slot.outcome(),
        Some(FilterOutcome::Undelivered { .. })
    ));
    assert_eq!(server.stats().refused_unread, 3);
    within(acknowledge_remote(&server.url(), slot.id(), key, false)).await;
    assert!(matches!(
        slot.outcome(),
        Some(FilterOutcome::Undelivered { unreadable: 1, .. })
    ));
    within(acknowledge_remote(&server.url(), slot.id(), key, true)).await;
    within(acknowledge_remote(&server.url(), slot.id(), key, true)).await;
    let built = slot.outcome().expect("decided");
    assert!(
        matches!(built, FilterOutcome::Built { delivered: 2, .. }),
        "{built}"
    );
    assert!(built.to_string().contains("received by 2 probe task(s)"));
    // Damaged acknowledgements never panic and count nothing.
    let whole = frame::encode_ack(slot.id(), key, true);
    for cut in 0..whole.len() {
        assert!(frame::decode_ack(&whole[..cut]).is_err());
    }
    for i in 0..whole.len() {
        let mut bad = whole.clone();
        bad[i] ^= 0x41;
        assert!(frame::decode_ack(&bad).is_err(), "flip at {i}");
    }
    assert!(matches!(
        slot.outcome(),
        Some(FilterOutcome::Built { delivered: 2, .. })
    ));
}

#[tokio::test]
async fn the_servers_accept_connections_with_nodelay() {
    // Both servers (this one and `serve_worker`) accept through
    // `incoming_nodelay`: without `TCP_NODELAY`, small answers waited for
    // the peer's delayed acknowledgement.
    use futures::StreamExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    let mut incoming = super::service::incoming_nodelay(listener);
    let _client = within(tokio::net::TcpStream::connect(addr))
        .await
        .expect("a connection");
    let accepted = within(incoming.next())
        .await
        .expect("an accepted connection")
        .expect("no accept error");
    assert!(accepted.nodelay().expect("the socket's option"));
}
