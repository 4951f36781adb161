//! The checks behind every fuzz target, in one file that two builds compile:
//! the cargo-fuzz crate (each `fuzz_targets/*.rs` calls one function here) and
//! the main crate's `tests/formats/fuzz_corpus_replay.rs`, which includes this file
//! with `#[path]` and runs it over the committed corpus on stable Rust. The
//! corpus replay therefore checks exactly what the fuzzer checked.
//!
//! A check panics when a property fails; a decoder returning an error is never
//! a failure. Properties:
//!
//! * no decoder panics, on any input;
//! * whatever decodes is canonical: encoding the decoded value again gives
//!   back the input bytes (so two readers can never disagree on a file);
//! * a decoded filter answers queries without panicking, and its owned copy
//!   answers the same;
//! * encode → decode keeps every inserted key present (no false negative) and
//!   every counter at least its key's multiplicity; any one-byte change of an
//!   encoded file is refused.
//!
//! Random mutations almost never keep a CRC32 valid, so a fuzzer that only fed
//! raw bytes would spend its time on the checksum check. Each decoder target
//! therefore also decodes a copy with the frame's body length and CRC fixed
//! up ([`with_valid_frame`]), which lets mutations reach the descriptor,
//! metadata and payload checks behind the checksum.

use arbitrary::Unstructured;
use filterstore::__internals::{frame, meta};
use filterstore::CountingFilter;
use filterstore::{encode_bit_filter, encode_counting_filter, inspect, DecodedFilter, FilterBody};
use filterstore::{BitFilter, BloomRead, FilterParams, HashSpec, Layout};
use filterstore::{BLOCK_BITS, MAX_K, MIN_M_BITS, SPLIT_BLOCK_BITS};
use serde::{Deserialize, Serialize};

// The split-block layout's target, in a file of its own (`#[path]`: the
// corpus replay includes this file from `tests/`, where a plain `mod` would
// look elsewhere).
#[path = "split_block.rs"]
mod split_block;
pub use split_block::split_block_ops;

/// `data` as given, and, when it is long enough to be a frame, a copy whose
/// body length field (bytes 12..20) and CRC trailer are made consistent with
/// its contents.
pub fn with_valid_frame(data: &[u8]) -> Vec<Vec<u8>> {
    let mut out = vec![data.to_vec()];
    if data.len() >= frame::OVERHEAD {
        let mut fixed = data.to_vec();
        let body_len = (data.len() - frame::OVERHEAD) as u64;
        fixed[12..20].copy_from_slice(&body_len.to_le_bytes());
        let end = fixed.len() - frame::TRAILER_LEN;
        let crc = crc32fast::hash(&fixed[..end]);
        fixed[end..].copy_from_slice(&crc.to_le_bytes());
        if fixed != data {
            out.push(fixed);
        }
    }
    out
}

/// Target `decode_frame`: the frame decoder never panics, and a decoded frame
/// re-encodes to the input.
pub fn decode_frame(data: &[u8]) {
    for input in with_valid_frame(data) {
        check_frame(&input);
    }
}

fn check_frame(input: &[u8]) {
    match frame::decode(input) {
        Ok(f) => {
            let again = frame::encode_versioned(f.kind, f.flags, f.body, f.version, f.min_reader);
            assert_eq!(again, input, "frame is not canonical");
            assert_eq!(frame::decode_kind(input, f.kind), Ok(f));
            assert!(f.min_reader >= 1 && f.min_reader <= frame::FORMAT_VERSION);
            assert!(f.version >= f.min_reader);
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

/// A table layout, as the metadata sample stores it (an enum exercises the
/// u32 variant index of the pinned bincode configuration).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub enum SampleLayout {
    /// Standard layout.
    Standard,
    /// Blocked layout, with a block size.
    Blocked {
        /// Bits per block.
        block_bits: u32,
    },
}

/// A table-metadata-like record using every serde shape the metadata encoding
/// specifies (integers of each width, bool, f64, String, Option, Vec, enum,
/// nested struct). The store's own record replaces it once it exists.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SampleTableMeta {
    /// Table name.
    pub name: String,
    /// Generation counter.
    pub generation: u64,
    /// Layout.
    pub layout: SampleLayout,
    /// Hash algorithm id.
    pub hash_id: u8,
    /// Hash seed.
    pub seed: u64,
    /// Bits.
    pub m: u64,
    /// Hash functions.
    pub k: u32,
    /// Counter width.
    pub counter_width: u16,
    /// Target false-positive rate.
    pub target_fp: f64,
    /// Whether a counting filter backs the table.
    pub counting: bool,
    /// Generation being built, if a regeneration is running.
    pub regenerating: Option<u64>,
    /// Free-form labels.
    pub labels: Vec<String>,
    /// Opaque bytes.
    pub extra: Vec<u8>,
}

/// Target `decode_meta`: the metadata decoder never panics (nor allocates
/// beyond its 64 KiB limit), and a decoded record re-encodes to the same body.
pub fn decode_meta(data: &[u8]) {
    for input in with_valid_frame(data) {
        check_meta(&input);
    }
}

fn check_meta(input: &[u8]) {
    match meta::decode::<SampleTableMeta>(input, frame::Kind::TableMeta) {
        Ok((value, version)) => {
            let f = frame::decode(input).expect("meta::decode accepted a bad frame");
            assert_eq!(f.version, version);
            let again = meta::encode(frame::Kind::TableMeta, &value).expect("re-encode failed");
            let body = &again[frame::HEADER_LEN..again.len() - frame::TRAILER_LEN];
            assert_eq!(body, f.body, "metadata body is not canonical");
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

/// Target `decode_filter`: the filter decoder and `inspect` never panic and
/// agree; a decoded filter answers queries, its owned copy answers the same,
/// and it re-encodes to the input.
pub fn decode_filter(data: &[u8]) {
    for input in with_valid_frame(data) {
        check_filter(&input, data);
    }
}

fn check_filter(input: &[u8], keys_from: &[u8]) {
    let decoded = filterstore::decode_filter(input);
    let inspected = inspect(input);
    let d = match (decoded, inspected) {
        (Ok(d), Ok(i)) => {
            let p = d.params();
            assert_eq!(
                (i.m, i.k, i.n, i.seed, i.layout),
                (p.m(), p.k(), d.n(), p.hash().seed, p.layout().name())
            );
            d
        }
        (Err(a), Err(b)) => {
            assert_eq!(a, b, "inspect and decode_filter disagree");
            return;
        }
        (a, b) => panic!("inspect and decode_filter disagree: {a:?} vs {b:?}"),
    };
    // Query with keys taken from the input itself and a few fixed ones.
    let keys: Vec<&[u8]> = keys_from
        .chunks(8)
        .take(16)
        .chain([&b""[..], b"key-0000", b"key-0199", b"hot-key"])
        .collect();
    let owned = d
        .to_bit_filter()
        .expect("allocation of a decoded filter failed");
    for k in &keys {
        assert_eq!(
            owned.contains(k),
            d.contains(k),
            "owned copy answers differently"
        );
    }
    let _ = (owned.estimated_fp(), owned.estimate_len());
    let again = reencode(&d, &owned);
    // The body is canonical whatever versions the header carries (a newer
    // writer may have framed v1 bytes); the CRC covers the header, so it is
    // compared only when the header is the one this build writes (a filter
    // file is version 1, min reader 1, or 2 / 2 for the split-block layout:
    // FORMAT.md § 13).
    let body = |b: &[u8]| b[frame::HEADER_LEN..b.len() - frame::TRAILER_LEN].to_vec();
    assert_eq!(body(&again), body(input), "filter body is not canonical");
    let v = d.descriptor.format_version();
    if (d.version, d.min_reader) == (v, v) {
        assert_eq!(again, input);
    }
}

fn reencode(d: &DecodedFilter<'_>, owned: &BitFilter) -> Vec<u8> {
    match d.body {
        FilterBody::Bits(_) => encode_bit_filter(owned, d.n()),
        FilterBody::Counters(c) => {
            let counting = c.to_counting_filter().expect("allocation failed");
            assert!(owned.to_words() == counting.to_bit_filter().unwrap().to_words());
            encode_counting_filter(&counting, d.n())
        }
    }
}

/// Target `roundtrip_filter`, structure-aware: arbitrary parameters and keys
/// (and, for counting filters, removals) → encode → decode. Every live key is
/// present, every counter holds at least its key's multiplicity, the
/// decoded filter equals the original bit for bit, and changing any one byte
/// of the file makes it undecodable.
pub fn roundtrip_filter(data: &[u8]) {
    let _ = roundtrip(&mut Unstructured::new(data));
}

/// A layout, one byte of input: the split-block layout's share is a third.
fn any_layout(u: &mut Unstructured<'_>) -> arbitrary::Result<Layout> {
    Ok(match u.int_in_range(0..=2u8)? {
        0 => Layout::Standard,
        1 => Layout::Blocked,
        _ => Layout::SplitBlock,
    })
}

/// The hash of a filter of `layout`: XXH3-128 with the input's seed, or
/// XXH64 seed 0, the split-block layout's only hash.
fn hash_for(layout: Layout, seed: u64) -> HashSpec {
    match layout {
        Layout::SplitBlock => HashSpec::xxh64(),
        _ => HashSpec::xxh3(seed),
    }
}

fn roundtrip(u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    let layout = any_layout(u)?;
    let m = match layout {
        Layout::Standard => u.int_in_range(MIN_M_BITS..=8192)?,
        Layout::Blocked => BLOCK_BITS * u.int_in_range(1..=16)?,
        Layout::SplitBlock => SPLIT_BLOCK_BITS * u.int_in_range(1..=32)?,
    };
    let k = match layout {
        Layout::SplitBlock => 8,
        _ => u.int_in_range(1..=MAX_K)?,
    };
    let seed: u64 = u.arbitrary()?;
    let counting: bool = u.arbitrary()?;
    let n_keys = u.int_in_range(0..=64usize)?;
    let mut keys: Vec<Vec<u8>> = Vec::with_capacity(n_keys);
    for _ in 0..n_keys {
        let len = u.int_in_range(0..=24usize)?;
        keys.push(u.bytes(len)?.to_vec());
    }
    let p = FilterParams::new(layout, m, k, hash_for(layout, seed)).expect("valid by construction");
    let file = if counting {
        let mut c = CountingFilter::new(p).expect("small filter");
        for key in &keys {
            c.insert(key);
        }
        // Remove every third insertion: it was inserted, so it must succeed.
        let mut live = keys.clone();
        let mut removed = 0u64;
        for key in keys.iter().step_by(3) {
            c.remove(key).expect("remove of an inserted key refused");
            let at = live.iter().position(|x| x == key).expect("key is live");
            live.swap_remove(at);
            removed += 1;
        }
        let file = encode_counting_filter(&c, keys.len() as u64 - removed);
        let d = filterstore::decode_filter(&file).expect("encoded counting filter refused");
        let view = d.counters().expect("counting file without counters");
        assert_eq!(view.bytes(), c.as_bytes());
        for key in &live {
            assert!(d.contains(key), "false negative after round trip");
            let mult = live.iter().filter(|x| *x == key).count().min(15) as u8;
            assert!(view.min_count(key) >= mult, "counter below multiplicity");
        }
        file
    } else {
        let b = BitFilter::new(p).expect("small filter");
        for key in &keys {
            b.insert(key);
        }
        let file = encode_bit_filter(&b, keys.len() as u64);
        let d = filterstore::decode_filter(&file).expect("encoded bit filter refused");
        assert!(d.to_bit_filter().unwrap().to_words() == b.to_words());
        for key in &keys {
            assert!(d.contains(key), "false negative after round trip");
        }
        file
    };
    let i = inspect(&file).expect("inspect refused a fresh file");
    assert_eq!((i.m, i.k, i.seed), (m, k, p.hash().seed));
    // One corrupted byte, at a position and with a mask the input chooses.
    let at = u.choose_index(file.len())?;
    let mask = u.int_in_range(1..=255u8)?;
    let mut bad = file;
    bad[at] ^= mask;
    assert!(
        filterstore::decode_filter(&bad).is_err(),
        "byte {at} ^ {mask:#04x} accepted"
    );
    Ok(())
}

/// Largest array the message targets let a message describe: the fuzzer must
/// not spend its time (or its 64 MiB allocation limit) on legitimately huge
/// sparse filters; the cap itself is exercised.
const FUZZ_MAX_MESSAGE_BITS: u64 = 1 << 16;

/// Target `decode_message`: the exchange message decoder never panics; a
/// decoded full message yields a filter that answers queries, and its array
/// and build statistics survive re-encoding; a decoded delta applies to a
/// zero base of its shape.
pub fn decode_message(data: &[u8]) {
    for input in with_valid_frame(data) {
        let Ok(msg) = filterstore::decode_message_with_limit(&input, FUZZ_MAX_MESSAGE_BITS) else {
            continue;
        };
        assert!(msg.params().m() <= FUZZ_MAX_MESSAGE_BITS);
        let keys: Vec<&[u8]> = data.chunks(8).take(16).chain([&b""[..]]).collect();
        if msg.is_delta() {
            let zero = BitFilter::new(*msg.params()).expect("small filter");
            if let Ok(f) = msg.apply_to(&zero, msg.base_version) {
                assert_eq!(
                    f.count_ones(),
                    msg.ones,
                    "delta popcount differs from header"
                );
            }
            continue;
        }
        let Ok(filter) = msg.filter() else { continue };
        for k in &keys {
            let _ = filter.contains(k);
        }
        assert_eq!(
            filter.count_ones(),
            msg.ones,
            "popcount differs from header"
        );
        let again = match msg.build_stats() {
            Some(stats) => filterstore::encode_message_with_stats(
                &filter,
                stats,
                msg.version,
                Default::default(),
            ),
            None => filterstore::encode_message(
                &filter,
                msg.descriptor.n,
                msg.version,
                Default::default(),
            ),
        }
        .expect("re-encoding a decoded filter failed");
        let back = filterstore::decode_message(&again).expect("re-encoded message refused");
        assert_eq!(back.build_stats(), msg.build_stats(), "statistics changed");
        let back = back.filter().expect("re-encoded filter refused");
        for i in 0..msg.params().num_words() {
            assert_eq!(back.word(i), filter.word(i), "array changed by re-encoding");
        }
    }
}

/// Target `roundtrip_message`, structure-aware: arbitrary filters (sparse or
/// dense, either layout) → full and delta messages, with or without build
/// statistics → decode: the filter and the delta-applied filter equal the
/// originals bit for bit, every key is present, the statistics are those
/// sent, and changing any one byte makes the message undecodable.
pub fn roundtrip_message(data: &[u8]) {
    let _ = roundtrip_msg(&mut Unstructured::new(data));
}

fn roundtrip_msg(u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    use filterstore::CodecChoice;
    let layout = any_layout(u)?;
    let m = match layout {
        Layout::Standard => u.int_in_range(MIN_M_BITS..=20_000)?,
        Layout::Blocked => BLOCK_BITS * u.int_in_range(1..=40)?,
        Layout::SplitBlock => SPLIT_BLOCK_BITS * u.int_in_range(1..=80)?,
    };
    let k = match layout {
        Layout::SplitBlock => 8,
        _ => u.int_in_range(1..=8)?,
    };
    let p = FilterParams::new(layout, m, k, hash_for(layout, u.arbitrary()?))
        .expect("valid by construction");
    let base = BitFilter::new(p).expect("small filter");
    let new = BitFilter::new(p).expect("small filter");
    let n_keys = u.int_in_range(0..=200usize)?;
    let mut keys = Vec::with_capacity(n_keys);
    for i in 0..n_keys {
        let len = u.int_in_range(0..=12usize)?;
        let key = u.bytes(len)?.to_vec();
        if i % 2 == 0 {
            base.insert(&key);
        }
        new.insert(&key);
        keys.push(key);
    }
    let choice = if u.arbitrary::<bool>()? {
        CodecChoice::Auto
    } else {
        CodecChoice::Plain
    };
    // Build statistics half the time: each key on 1 + (input byte) rows.
    let stats = if u.arbitrary::<bool>()? {
        let extra = u64::from(u.arbitrary::<u8>()?);
        Some(filterstore::BuildStats {
            rows: n_keys as u64 * (1 + extra),
            distinct_keys: n_keys as u64,
        })
    } else {
        None
    };
    let full = match stats {
        Some(s) => filterstore::encode_message_with_stats(&new, s, 2, choice),
        None => filterstore::encode_message(&new, n_keys as u64, 2, choice),
    }
    .expect("encode");
    let got = filterstore::decode_message(&full).expect("fresh message refused");
    assert_eq!(got.build_stats(), stats, "statistics changed");
    let got = got.filter().expect("fresh filter refused");
    for i in 0..p.num_words() {
        assert_eq!(got.word(i), new.word(i), "full message changed the filter");
    }
    for key in &keys {
        assert!(got.contains(key), "false negative after a full message");
    }
    let delta = match stats {
        Some(s) => filterstore::encode_delta_message_with_stats(&new, &base, s, 2, 1, choice),
        None => filterstore::encode_delta_message(&new, &base, n_keys as u64, 2, 1, choice),
    }
    .expect("encode");
    let decoded = filterstore::decode_message(&delta).expect("fresh delta refused");
    assert_eq!(decoded.build_stats(), stats, "statistics changed");
    let applied = decoded
        .apply_to(&base, 1)
        .expect("fresh delta did not apply");
    assert!(
        applied.to_words() == new.to_words(),
        "delta changed the filter"
    );
    let at = u.choose_index(full.len())?;
    let mask = u.int_in_range(1..=255u8)?;
    let mut bad = full;
    bad[at] ^= mask;
    assert!(
        filterstore::decode_message(&bad).is_err(),
        "byte {at} ^ {mask:#04x} accepted"
    );
    Ok(())
}

/// Most operations one `store_ops` input runs (each may touch sled).
pub const STORE_MAX_OPS: usize = 96;
/// Most reopens one `store_ops` input runs (a reopen costs a sled open).
pub const STORE_MAX_REOPENS: usize = 3;

/// Target `store_ops`: a model-based test of the store. The input is read as
/// a layout byte, then pairs (operation, key) on a 16-key alphabet, run
/// against one tiny table (fold threshold 4 operations, so folds happen
/// constantly) in a fresh temporary directory, and against a multiset model.
/// After every operation every key the model holds is present (no false
/// negative: through the log, folds, saturation and reopens), the live key
/// count equals the model's, and a remove of a key the model does not hold is
/// refused with `NotPresent` whenever the filter answers "absent" for it (a
/// key the filter answers "maybe" for is not removed: the host database only
/// removes keys it inserted, and a counting filter cannot tell such a false
/// positive from a member).
pub fn store_ops(data: &[u8]) {
    use filterstore::{Durability, FilterStore, StoreConfig, StoreError, TableSpec, WriteBatch};
    use std::collections::HashMap;

    let Some((&layout_byte, ops)) = data.split_first() else {
        return;
    };
    let layout = match layout_byte % 3 {
        0 => Layout::Blocked,
        1 => Layout::Standard,
        _ => Layout::SplitBlock,
    };
    // The split-block layout takes no seed (XXH64 seed 0).
    let spec = match layout {
        Layout::SplitBlock => TableSpec::new(16, 0.1).layout(layout),
        _ => TableSpec::new(16, 0.1).layout(layout).seed(7),
    };
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "filterstore-fuzz-store-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    struct Cleanup(std::path::PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _cleanup = Cleanup(dir.clone());
    let config = || {
        StoreConfig::default()
            .fold_threshold(4)
            .cache_capacity(1 << 20)
    };
    let key = |i: u8| format!("key-{}", i % 16).into_bytes();

    let mut store = FilterStore::open_with(&dir, config()).expect("open a new store");
    let mut table = store.create_table("t", spec).expect("create");
    let mut model: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut reopens = 0;
    for pair in ops.chunks_exact(2).take(STORE_MAX_OPS) {
        let k = key(pair[1]);
        match pair[0] % 8 {
            0..=2 => {
                table.insert(&k).expect("insert");
                *model.entry(k).or_default() += 1;
            }
            3 => {
                let held = model.get(&k).copied().unwrap_or(0);
                if held > 0 {
                    table.remove(&k).expect("remove of a held key");
                    model.insert(k, held - 1);
                } else if !table.contains(&k) {
                    match table.remove(&k) {
                        Err(StoreError::NotPresent { .. }) => {}
                        other => panic!("remove of an absent key: {other:?}"),
                    }
                }
            }
            4 => table.flush().expect("flush"),
            5 if reopens < STORE_MAX_REOPENS => {
                reopens += 1;
                table.flush().expect("flush");
                drop(table);
                drop(store);
                store = FilterStore::open_with(&dir, config()).expect("reopen");
                table = store.open_table("t").expect("reopen table");
            }
            6 => table.fold().expect("fold"),
            _ => {
                // A durable batch of two inserts of the key and one remove.
                let mut b = WriteBatch::new();
                b.insert(&k).insert(&k).remove(&k);
                table.apply(&b, Durability::Durable).expect("batch");
                *model.entry(k).or_default() += 1;
            }
        }
        for (k, &n) in &model {
            if n > 0 {
                assert!(table.contains(k), "false negative for {k:?}");
            }
        }
        assert_eq!(table.live_keys(), model.values().sum::<u64>());
    }
}
