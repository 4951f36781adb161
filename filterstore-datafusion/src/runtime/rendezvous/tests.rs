//! The slot's bookkeeping and the frames, without a cluster.

use super::frame::{
    decode_fetch, decode_post, decode_unit, encode_fetch, encode_post, encode_unit, FrameError,
};
use super::frame::{HEAD, POST_HEAD};
use super::*;
use crate::runtime::bounds::ColumnBounds;
use datafusion::common::ScalarValue;
use filterstore::{BloomRead, HashSpec, Layout};

pub(super) fn params() -> FilterParams {
    FilterParams::for_capacity(10_000, 0.01, Layout::Blocked, HashSpec::xxh3(7)).unwrap()
}

pub(super) fn policy() -> SlotPolicy {
    SlotPolicy {
        max_fp: 0.25,
        max_pass: 0.8,
        probe_distinct: None,
        force: false,
        fit_fp: None,
    }
}

pub(super) fn partial(keys: std::ops::Range<u32>) -> Arc<BitFilter> {
    let f = BitFilter::new(params()).unwrap();
    for k in keys {
        f.insert(&k.to_le_bytes());
    }
    Arc::new(f)
}

pub(super) fn post(task: usize, tasks: usize, body: PartialBody) -> Post {
    Post {
        task,
        tasks,
        rows: 100,
        bounds: None,
        body,
    }
}

pub(super) const SCOPE: Scope = 77;

pub(super) fn delivered(slot: &Slot) -> Delivery {
    let rx = subscribe(slot.id(), SCOPE).expect("a live slot");
    futures::executor::block_on(delivery(rx))
}

/// The filter the slot's run of [`SCOPE`] delivers (a failure if it
/// delivers none).
pub(super) fn delivered_filter(slot: &Slot) -> BitFilter {
    let Delivery::Message(bytes, _) = delivered(slot) else {
        panic!("{:?}", slot.outcome())
    };
    let msg = filterstore::decode_message(&bytes).unwrap();
    msg.filter().unwrap().into_owned().unwrap()
}

/// Posts to the slot's run of [`SCOPE`].
pub(super) fn send(slot: &Slot, p: Post) {
    assert!(post_local(slot.id(), SCOPE, p));
}

#[test]
fn partials_of_every_task_merge_and_hold_every_key() {
    let slot = Slot::register(new_filter_id(), params(), policy());
    send(&slot, post(1, 3, PartialBody::Filter(partial(1000..2000))));
    send(&slot, post(0, 3, PartialBody::Filter(partial(0..1000))));
    assert_eq!(slot.outcome(), None, "two of three tasks posted");
    // The third task's partial arrives as a message from another process.
    let m = encode_message(partial(2000..3000).as_ref(), 1000, 0, CodecChoice::Auto).unwrap();
    send(&slot, post(2, 3, PartialBody::Message(m)));
    let Delivery::Message(bytes, _) = delivered(&slot) else {
        panic!("{:?}", slot.outcome())
    };
    let msg = filterstore::decode_message(&bytes).unwrap();
    let f = msg.filter().unwrap();
    assert!((0..3000u32).all(|k| f.contains(&k.to_le_bytes())));
    // Not received by any probe task yet: not "built".
    assert!(matches!(
        slot.outcome(),
        Some(FilterOutcome::Undelivered { .. })
    ));
    acknowledge_local(slot.id(), SCOPE, true);
    match slot.outcome() {
        Some(FilterOutcome::Built {
            partials,
            build_rows,
            keys,
            delivered: 1,
            ..
        }) => {
            assert_eq!((partials, build_rows), (3, 300));
            assert!((keys - 3000.0).abs() < 150.0, "{keys}");
        }
        o => panic!("{o:?}"),
    }
}

#[test]
fn a_failed_task_ends_the_slot_as_pass_all_at_once() {
    let slot = Slot::register(new_filter_id(), params(), policy());
    send(&slot, post(0, 2, PartialBody::Filter(partial(0..10))));
    send(&slot, post(1, 2, PartialBody::Failed("disk".into())));
    assert!(matches!(delivered(&slot), Delivery::PassAll(why) if why.contains("disk")));
    // A late partial changes nothing.
    send(&slot, post(1, 2, PartialBody::Filter(partial(0..10))));
    assert!(!slot.outcome().unwrap().is_built());
}

#[test]
fn bad_counts_and_foreign_shapes_pass_every_row() {
    let cases: Vec<Vec<Post>> = vec![
        vec![
            post(0, 2, PartialBody::Filter(partial(0..5))),
            post(1, 3, PartialBody::Filter(partial(0..5))),
        ],
        vec![post(2, 2, PartialBody::Filter(partial(0..5)))],
        vec![post(0, MAX_TASKS + 1, PartialBody::Filter(partial(0..5)))],
        vec![post(0, 1, PartialBody::Message(b"not a message".to_vec()))],
        vec![post(
            0,
            1,
            PartialBody::Filter(Arc::new(
                BitFilter::new(
                    FilterParams::for_capacity(99, 0.01, Layout::Blocked, HashSpec::xxh3(7))
                        .unwrap(),
                )
                .unwrap(),
            )),
        )],
    ];
    for (i, posts) in cases.into_iter().enumerate() {
        let slot = Slot::register(new_filter_id(), params(), policy());
        for p in posts {
            send(&slot, p);
        }
        assert!(
            matches!(slot.outcome(), Some(FilterOutcome::PassAll { .. })),
            "case {i}: {:?}",
            slot.outcome()
        );
    }
}

#[test]
fn a_task_posting_twice_changes_no_answer_and_is_counted() {
    // Before the run decides: the replay is counted and decides nothing
    // (the run still waits for task 1); its partial, OR-ed in, adds no key
    // the first post lacked, so the message is the one without the replay.
    let run = |replay: bool| {
        let slot = Slot::register(new_filter_id(), params(), policy());
        send(&slot, post(0, 2, PartialBody::Filter(partial(0..500))));
        if replay {
            send(&slot, post(0, 2, PartialBody::Filter(partial(0..500))));
            assert_eq!((slot.outcome(), slot.refused_posts()), (None, 1));
        }
        send(&slot, post(1, 2, PartialBody::Filter(partial(500..1000))));
        let Delivery::Message(m, _) = delivered(&slot) else {
            panic!("{:?}", slot.outcome())
        };
        (slot, m)
    };
    let ((_, plain), (slot, replayed)) = (run(false), run(true));
    assert_eq!(plain, replayed, "a replay changed the filter");
    // After it decided: counted, the outcome unchanged.
    let before = slot.outcome();
    send(&slot, post(1, 2, PartialBody::Filter(partial(0..9000))));
    assert_eq!((slot.outcome(), slot.refused_posts()), (before, 2));
    // A task run again with other keys before the decision adds them: no
    // key of either post is lost.
    let slot = Slot::register(new_filter_id(), params(), policy());
    send(&slot, post(0, 2, PartialBody::Filter(partial(0..5))));
    send(&slot, post(0, 2, PartialBody::Filter(partial(5..10))));
    send(&slot, post(1, 2, PartialBody::Filter(partial(10..15))));
    let Delivery::Message(m, _) = delivered(&slot) else {
        panic!("{:?}", slot.outcome())
    };
    let f = filterstore::decode_message(&m).unwrap().filter().unwrap();
    assert!((0..15u32).all(|k| f.contains(&k.to_le_bytes())));
}

#[test]
fn executions_never_meet_and_an_ended_one_passes_every_row() {
    let slot = Slot::register(new_filter_id(), params(), policy());
    // Execution 1 builds from keys 0..100; execution 2 from 100..200.
    assert!(post_local(
        slot.id(),
        1,
        post(0, 1, PartialBody::Filter(partial(0..100)))
    ));
    let rx2 = subscribe(slot.id(), 2).unwrap();
    assert!(rx2.borrow().is_none(), "execution 2 has not posted");
    assert!(post_local(
        slot.id(),
        2,
        post(0, 1, PartialBody::Filter(partial(100..200)))
    ));
    let Delivery::Message(m, _) = futures::executor::block_on(delivery(rx2)) else {
        panic!()
    };
    let msg = filterstore::decode_message(&m).unwrap();
    let f = msg.filter().unwrap();
    assert!((100..200u32).all(|k| f.contains(&k.to_le_bytes())));
    // A run whose query ended before it was decided: every waiter passes.
    let rx3 = subscribe(slot.id(), 3).unwrap();
    slot.close(3);
    assert!(matches!(
        futures::executor::block_on(delivery(rx3)),
        Delivery::PassAll(_)
    ));
    // A dropped plan: its waiters pass every row, none waits forever.
    let rx4 = subscribe(slot.id(), 4).unwrap();
    drop(slot);
    assert!(matches!(
        futures::executor::block_on(delivery(rx4)),
        Delivery::PassAll(_)
    ));
}

#[test]
fn old_executions_are_forgotten_and_their_waiters_released() {
    let slot = Slot::register(new_filter_id(), params(), policy());
    let first = subscribe(slot.id(), 1).unwrap();
    for scope in 2..=(SCOPES_KEPT as u64 + 1) {
        slot.run(scope);
    }
    assert!(matches!(
        futures::executor::block_on(delivery(first)),
        Delivery::PassAll(_)
    ));
}

#[test]
fn a_full_or_unselective_filter_passes_every_row_unless_forced() {
    let full = || {
        let f = BitFilter::new(params()).unwrap();
        for k in 0..1_000_000u32 {
            f.insert(&k.to_le_bytes());
        }
        Arc::new(f)
    };
    let slot = Slot::register(new_filter_id(), params(), policy());
    send(&slot, post(0, 1, PartialBody::Filter(full())));
    assert!(matches!(delivered(&slot), Delivery::PassAll(why) if why.contains("too full")));
    let forced = SlotPolicy {
        force: true,
        ..policy()
    };
    let slot = Slot::register(new_filter_id(), params(), forced);
    send(&slot, post(0, 1, PartialBody::Filter(full())));
    assert!(matches!(delivered(&slot), Delivery::Message(..)));
    // 9,000 keys against at most 10,000 distinct probe keys: ~90% would pass.
    let few = SlotPolicy {
        probe_distinct: Some(10_000.0),
        ..policy()
    };
    let slot = Slot::register(new_filter_id(), params(), few);
    send(&slot, post(0, 1, PartialBody::Filter(partial(0..9000))));
    assert!(matches!(delivered(&slot), Delivery::PassAll(why) if why.contains("not selective")));
}

#[test]
fn a_post_for_an_unknown_or_dropped_slot_is_dropped() {
    assert!(!post_local(
        new_filter_id(),
        1,
        post(0, 1, PartialBody::Failed("x".into()))
    ));
    assert!(subscribe(new_filter_id(), 1).is_none());
    let slot = Slot::register(new_filter_id(), params(), policy());
    let id = slot.id();
    assert!(lookup(id).is_some());
    drop(slot);
    assert!(lookup(id).is_none());
    assert!(!post_local(
        id,
        1,
        post(0, 1, PartialBody::Failed("x".into()))
    ));
}

#[test]
fn frames_round_trip_and_refuse_damage() {
    let m = Delivery::Message(Arc::new(vec![1, 2, 3]), None);
    let none = Delivery::PassAll("why".into());
    for d in [m, none] {
        let bytes = encode_unit(&d);
        assert_eq!(decode_unit(&bytes).unwrap(), d);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(decode_unit(&bad).is_err(), "flip at {i}");
        }
        for n in 0..bytes.len() {
            assert!(decode_unit(&bytes[..n]).is_err(), "cut at {n}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(matches!(decode_unit(&long), Err(FrameError::Trailing(1))));
    }
    let p = post(3, 7, PartialBody::Message(vec![9; 40]));
    let key = RunKey {
        scope: 9,
        token: [0xab; 16],
    };
    let bytes = encode_post(42, key, &p).unwrap();
    let (id, back_key, back) = decode_post(&bytes).unwrap();
    assert_eq!(
        (id, back_key, back.task, back.tasks, back.rows),
        (42, key, 3, 7, 100)
    );
    assert!(matches!(back.body, PartialBody::Message(ref b) if b == &vec![9; 40]));
    assert!(decode_unit(&bytes).is_err(), "a post is not a unit");
    // Version 1 (no token) is refused, not misread.
    let mut v1 = bytes.clone();
    v1[4] = 1;
    assert!(matches!(decode_post(&v1), Err(FrameError::Version(1))));
    // A body length far past the bytes present is refused, nothing allocated.
    let mut huge = bytes;
    huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        decode_post(&huge),
        Err(FrameError::Truncated { .. })
    ));
    assert!(encode_post(1, key, &post(0, 1, PartialBody::Filter(partial(0..1)))).is_none());
    let fetch = encode_fetch(5, key);
    assert_eq!(decode_fetch(&fetch).unwrap(), (5, key));
    assert!(decode_fetch(&fetch[..fetch.len() - 1]).is_err());
    assert!(decode_unit(&fetch).is_err(), "a fetch is not a unit");
}

#[test]
fn frame_bytes_are_pinned() {
    // docs/FORMAT.md § 16: magic, version 3, kind, reserved, length, body, CRC.
    let unit = encode_unit(&Delivery::PassAll("no".into()));
    let mut expected = b"FSRU\x03\x02\x00\x00\x02\x00\x00\x00no".to_vec();
    expected.extend_from_slice(&crc32fast::hash(&expected).to_le_bytes());
    assert_eq!(unit, expected);
    let key = RunKey {
        scope: 0x03,
        token: core::array::from_fn(|i| 0xf0 + i as u8),
    };
    let post = encode_post(
        0x0102,
        key,
        &Post {
            task: 1,
            tasks: 2,
            rows: 3,
            bounds: None,
            body: PartialBody::Failed("x".into()),
        },
    )
    .unwrap();
    let mut expected = b"FSRP\x03\x02\x00\x00\x39\x00\x00\x00".to_vec();
    expected.extend_from_slice(&0x0102u128.to_le_bytes());
    expected.extend_from_slice(&0x03u64.to_le_bytes());
    expected.extend_from_slice(&key.token);
    expected.extend_from_slice(&[1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0]);
    expected.push(b'x');
    expected.extend_from_slice(&crc32fast::hash(&expected).to_le_bytes());
    assert_eq!(post, expected);
    let mut expected = b"FSRQ\x03\x01\x00\x00\x28\x00\x00\x00".to_vec();
    expected.extend_from_slice(&0x0102u128.to_le_bytes());
    expected.extend_from_slice(&0x03u64.to_le_bytes());
    expected.extend_from_slice(&key.token);
    expected.extend_from_slice(&crc32fast::hash(&expected).to_le_bytes());
    assert_eq!(encode_fetch(0x0102, key), expected);
}

fn bounds(lo: i64, hi: i64) -> KeyBounds {
    KeyBounds(vec![ColumnBounds::Range(
        ScalarValue::Int64(Some(lo)),
        ScalarValue::Int64(Some(hi)),
    )])
}

/// A frame of `version` with `kind` and `body` (a sealed one: CRC last).
fn frame_of(magic: &[u8; 4], version: u8, kind: u8, body: &[u8]) -> Vec<u8> {
    let mut f = magic.to_vec();
    f.extend_from_slice(&[version, kind, 0, 0]);
    f.extend_from_slice(&(body.len() as u32).to_le_bytes());
    f.extend_from_slice(body);
    f.extend_from_slice(&crc32fast::hash(&f).to_le_bytes());
    f
}

#[test]
fn bounds_cross_in_frames_and_version_2_frames_still_decode() {
    let m = Arc::new(b"filter message".to_vec());
    let b = Arc::new(bounds(-5, 70));
    let unit = encode_unit(&Delivery::Message(Arc::clone(&m), Some(Arc::clone(&b))));
    assert_eq!(unit[5], 3, "kind 3: bounds, then the message");
    assert_eq!(
        decode_unit(&unit).unwrap(),
        Delivery::Message(Arc::clone(&m), Some(b))
    );
    // A version-2 unit (no bounds) decodes as it did.
    let old = frame_of(b"FSRU", 2, 1, &m);
    assert_eq!(
        decode_unit(&old).unwrap(),
        Delivery::Message(Arc::clone(&m), None)
    );
    // Kind 3 did not exist in version 2.
    assert!(decode_unit(&frame_of(b"FSRU", 2, 3, &m)).is_err());
    assert!(decode_unit(&frame_of(b"FSRU", 4, 1, &m)).is_err());
    // A post's bounds cross too; a version-2 post has none.
    let key = RunKey::fresh(SCOPE).unwrap();
    let mut p = post(0, 1, PartialBody::Message(m.to_vec()));
    p.bounds = Some(bounds(1, 2));
    let frame = encode_post(9, key, &p).unwrap();
    let (_, _, got) = decode_post(&frame).unwrap();
    assert_eq!(got.bounds, Some(bounds(1, 2)));
    let mut body = frame[HEAD..HEAD + POST_HEAD].to_vec();
    body.extend_from_slice(&m);
    let (_, _, got) = decode_post(&frame_of(b"FSRP", 2, 1, &body)).unwrap();
    assert!(got.bounds.is_none());
    assert!(matches!(got.body, PartialBody::Message(ref b) if b[..] == m[..]));
    // Bounds cut short, or longer than the cap, refuse the frame.
    let mut cut = frame[HEAD..frame.len() - 4].to_vec();
    cut.truncate(POST_HEAD + 6);
    assert!(decode_post(&frame_of(b"FSRP", 3, 3, &cut)).is_err());
    let mut huge = frame[HEAD..HEAD + POST_HEAD].to_vec();
    huge.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode_post(&frame_of(b"FSRP", 3, 3, &huge)).is_err());
}

#[test]
fn a_run_delivers_bounds_holding_every_task_or_none() {
    let posted = |second: Option<KeyBounds>| {
        let slot = Slot::register(new_filter_id(), params(), policy());
        let mut a = post(0, 2, PartialBody::Filter(partial(0..10)));
        a.bounds = Some(bounds(-3, 4));
        let mut b = post(1, 2, PartialBody::Filter(partial(10..20)));
        b.bounds = second;
        send(&slot, a);
        send(&slot, b);
        delivered(&slot)
    };
    let Delivery::Message(_, got) = posted(Some(bounds(2, 90))) else {
        panic!("no filter")
    };
    assert_eq!(got.as_deref(), Some(&bounds(-3, 90)));
    // One task without bounds: the filter has none (never narrower than a
    // task's keys).
    let Delivery::Message(_, got) = posted(None) else {
        panic!("no filter")
    };
    assert!(got.is_none());
}

/// A filter of any size the codec ships reaches a probe task in another
/// process: the rendezvous once capped its answers at 1 MiB, and a filter
/// of 1.5–4.1 MB became "pass every row" on the workers while the report
/// said "built" (TPC-H q21 lost one filter that way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_over_a_mebibyte_reaches_a_fetch_across_processes() {
    let keys = 2_000_000u32;
    let params =
        FilterParams::for_capacity(u64::from(keys), 0.01, Layout::Blocked, HashSpec::xxh3(7))
            .unwrap();
    let f = BitFilter::new(params).unwrap();
    for k in 0..keys {
        f.insert(&k.to_le_bytes());
    }
    let slot = Slot::register(new_filter_id(), params, policy());
    let key = RunKey::fresh(SCOPE).unwrap();
    slot.open(key);
    send(&slot, post(0, 1, PartialBody::Filter(Arc::new(f))));
    let server = service::RendezvousServer::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let fetched = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        service::fetch_remote(&server.url(), slot.id(), key),
    )
    .await
    .expect("the fetch hangs");
    let Delivery::Message(bytes, _) = fetched else {
        panic!("{fetched:?}")
    };
    assert!(
        bytes.len() > 1 << 20,
        "{} bytes: not over 1 MiB",
        bytes.len()
    );
    let msg = filterstore::decode_message(&bytes).unwrap();
    let got = msg.filter().unwrap();
    assert!((0..keys)
        .step_by(97)
        .all(|k| got.contains(&k.to_le_bytes())));
}

#[test]
fn an_advertised_host_gets_the_bound_port_and_a_bad_one_is_refused() {
    let url = |a: &str| service::advertised_url(a, 50051);
    assert_eq!(url("10.0.0.5").unwrap(), "http://10.0.0.5:50051");
    assert_eq!(url("fd00::5").unwrap(), "http://[fd00::5]:50051");
    assert_eq!(url("[fd00::5]").unwrap(), "http://[fd00::5]:50051");
    assert_eq!(
        url("coordinator.internal").unwrap(),
        "http://coordinator.internal:50051"
    );
    // A port of its own: one that forwards to the bound one.
    assert_eq!(url("10.0.0.5:8815").unwrap(), "http://10.0.0.5:8815");
    assert_eq!(url("[fd00::5]:8815").unwrap(), "http://[fd00::5]:8815");
    for bad in [
        "",
        "10.0.0.5:99999",
        "host/path",
        "http://10.0.0.5",
        "user@host",
        "host?x=1",
        "a b",
    ] {
        let e = url(bad).unwrap_err();
        assert!(e.contains("not a host or host:port"), "{bad:?}: {e}");
    }
}
