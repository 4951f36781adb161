//! `cargo bench --bench peers`: this crate's bit filters against the filter
//! crates a user would pick instead, at n = 10,000,000 keys of 16 bytes and
//! 10 bits per key, in one run (issue 2).
//!
//! * Filters: `filterstore` standard, blocked and split-block layouts (the
//!   blocked layout hashed with XXH3-64 sectorized, its fastest hash, or
//!   XXH3-64 (`PEERS_BLOCKED_HASH`, below), and once more with
//!   XXH3-128, `filterstore_blocked_xxh3_128`, lookups only, and its bytes
//!   read through a `FilterView`, `filterstore_blocked_view`, lookups only,
//!   and a copy of it frozen (`FrozenFilter`, read-only: its blocks read
//!   with 32-byte loads), `filterstore_blocked_frozen`, lookups only;
//!   the split-block layout is Parquet's SBBF: XXH64 seed 0); `fastbloom` 0.17 with
//!   its default hasher (SipHash-1-3) and with `foldhash`; `sbbf-rs-safe`
//!   (Parquet split block filter: 256-bit blocks, k = 8, AVX2); `xorf`
//!   BinaryFuse8 (static: built once from all keys); `bloomfilter` 3
//!   (SipHash). Peers that take a `u64` (sbbf, xorf) get `xxh3_64` of the
//!   key; `sbbf_xxh64` is `sbbf-rs-safe` fed XXH64 seed 0, the hash Parquet
//!   fixes, so that it holds exactly the bits of `filterstore_split`
//!   (asserted): the comparison of the same filter with the same hash.
//! * The same keys and 10 bits per key for every filter; xorf's actual size
//!   is reported. Keys come from seeded RNGs; present and absent keys are
//!   disjoint by construction ([`harness::Keys::generate`]).
//! * Every timed figure is the thread's CPU time (`benches/common/clock.rs`):
//!   time spent waiting for a CPU on a shared machine is left out, contention
//!   for caches and memory is not.
//! * Timed figures are criterion benchmarks written with `iter_custom`: each
//!   sample walks on through a 10M-key array (random cache lines, never one
//!   hot key) and the sample's ns/key is kept; a figure is the median of its
//!   samples. Present keys are looked up in a shuffled order. Inserts start
//!   from an empty filter and restart from an empty one (cleared untimed)
//!   whenever the key array is exhausted: the mean over whole builds.
//! * Lookups are measured in `PEERS_ROUNDS` rounds (default 4) over all
//!   filters, all of them built and held in memory, so that a burst of load
//!   from other processes on this shared machine is spread over every filter
//!   instead of falling on one; each figure pools its samples of all rounds.
//! * FP (all 10M absent keys) and bits per key come from one plain pass per
//!   filter, which also asserts that every present key is found.
//! * Counting filters: `filterstore::CountingFilter` (both layouts) against
//!   `fastbloom-rs`'s `CountingBloomFilter`, same m and k, holding all keys.
//!   A timed insert (remove) of a segment of present keys is undone untimed,
//!   so the load never drifts; lookups are of present keys.
//!
//! Output: criterion's lines, a table, then `RESULT <figure>.<filter> <value>
//! <unit>` lines at the very end (fp as a fraction). `lookup_batch_ns` is
//! `contains_many` on absent keys, `lookup_batch_present_ns` on present keys;
//! xorf's `insert_ns` is its static build per key, hashing included.
//!
//! * The equal-FP table (`peers/equal_fp.rs`): every subject sized for a 1%
//!   target by its own rule, bits per key, measured FP and ns per lookup side
//!   by side.
//! * `FILTERSTORE_PEERS_LARGE=1` adds the large point (`peers/large.rs`): a
//!   split-block filter of at least 1 GiB, keys generated on the fly, built
//!   and probed on 4 KiB and on 2 MiB pages, batches pipelined and
//!   partitioned.
//!
//! * The `u64` ids section (`peers/ids.rs`): n ids of 8 bytes, our blocked
//!   and split-block layouts against `sbbf-rs-safe`, lookups and whole
//!   builds (key by key shared and `&mut`, and `insert_many`) per round.
//! * Key-by-key inserts are also timed per round as whole builds
//!   (`build_round`): `filterstore_blocked` (shared `insert`) and
//!   `filterstore_blocked_mut` (`insert_mut`, the filter held `&mut`, as
//!   sbbf's insert is), and the same for the split-block layout.
//!
//! * `PEERS_BLOCKED_HASH`: the blocked subjects' hash, `xxh3-64-sectorized`
//!   (the default: one bit per 64-bit sector, the layout's fastest) or
//!   `xxh3-64` (its own positions; the subject before issue 38's sectors).
//!
//! Environment: `PEERS_N` (default 10,000,000 keys; 100,000,000 with
//! `FILTERSTORE_PEERS_100M=1`), `PEERS_ROUNDS` (4),
//! `PEERS_MEASURE_SECS` (criterion measurement time per benchmark, 2),
//! `PEERS_WARMUP_SECS` (0.5), `PEERS_ONLY` (comma-separated parts, for
//! development: `hash,standard,blocked,split,fastbloom,sbbf,xorf,bloomfilter,
//! counting,ids,fp1`; default all). The full run takes about ten minutes here.

#[path = "peers/builds.rs"]
mod builds;
#[path = "common/clock.rs"]
mod clock;
#[path = "peers/equal_fp.rs"]
mod equal_fp;
#[path = "peers/harness.rs"]
mod harness;
#[path = "peers/ids.rs"]
mod ids;
#[path = "peers/large.rs"]
mod large;
#[path = "peers/plot.rs"]
mod plot;
#[path = "peers/ratios.rs"]
mod ratios;
#[path = "peers/subjects.rs"]
mod subjects;

use builds::{build_round, spec};
use criterion::Criterion;
use filterstore::{
    BitFilter, BloomRead, CountingFilter, FilterParams, FilterView, HashSpec, Layout, ParamError,
};
use harness::{env_f64, load1, loadavg, time_once, Bench, Figure, Key, Keys, Results};
use ratios::ratio_lines;
use std::hash::BuildHasher;
use std::time::Duration;
use subjects::{
    hash64, xxh64_parquet, Batched, Counting, Dynamic, Lookup, SbbfPrefetch, SbbfXxh64, HASH_SEED,
};
use xxhash_rust::xxh3::xxh3_128_with_seed;

const BITS_PER_KEY: f64 = 10.0;
/// Keys per timed segment of counting-filter updates (each is undone after).
const SEGMENT: usize = 4096;

const BIT_FILTERS: [&str; 20] = [
    "filterstore_standard",
    "filterstore_blocked",
    "filterstore_blocked_xxh3_128",
    "filterstore_blocked_view",
    "filterstore_blocked_frozen",
    "filterstore_blocked_mut",
    "filterstore_blocked_bulk",
    "filterstore_blocked_many",
    "filterstore_split",
    "filterstore_split_mut",
    "filterstore_split_bulk",
    "filterstore_split_many",
    "fastbloom",
    "fastbloom_fasthash",
    "sbbf",
    "sbbf_prefetch",
    "sbbf_xxh64",
    "sbbf_xxh64_prefetch",
    "xorf_bfuse8",
    "bloomfilter",
];
const COUNTING_FILTERS: [&str; 3] = ["filterstore", "filterstore_standard", "fastbloom_rs"];

/// The criterion insert figure (builds from empty) and one plain build.
fn bench_inserts<F: Dynamic>(
    b: &mut Bench,
    r: &mut Results,
    name: &'static str,
    keys: &Keys,
    f: &mut F,
) {
    f.clear();
    let samples = b.per_key(
        &format!("insert/{name}"),
        f,
        &keys.insert,
        usize::MAX,
        |f, seg| {
            seg.iter().for_each(|k| f.insert(k));
            seg.len() as u64
        },
        |f, _, wrapped| {
            if wrapped {
                f.clear();
            }
        },
    );
    r.add(Figure::InsertNs, name, &samples);
    f.clear();
    time_once(r, Figure::BuildNs, name, keys.n(), || {
        keys.insert.iter().for_each(|k| f.insert(k));
    });
}

/// The accuracy pass over a built filter: no false negative (asserted), the
/// FP rate over all absent keys, bits per key.
fn accuracy(r: &mut Results, name: &'static str, keys: &Keys, f: &dyn Lookup) {
    let found = f.hits(&keys.present);
    assert_eq!(found, keys.n() as u64, "{name}: false negatives");
    let fp = f.hits(&keys.absent) as f64 / keys.absent.len() as f64;
    r.add(Figure::Fp, name, &[fp]);
    r.add(
        Figure::BitsPerKey,
        name,
        &[f.bits() as f64 / keys.n() as f64],
    );
    r.set_k(name, f.k());
}

/// Lookups of present and absent keys, one criterion benchmark each.
fn bench_lookups(
    b: &mut Bench,
    r: &mut Results,
    round: usize,
    name: &'static str,
    keys: &Keys,
    f: &dyn Lookup,
    batched: bool,
) {
    let (kind, present, absent) = match batched {
        false => ("", Figure::LookupPresentNs, Figure::LookupAbsentNs),
        true => (
            "batch_",
            Figure::LookupBatchPresentNs,
            Figure::LookupBatchNs,
        ),
    };
    for (figure, set, which) in [
        (present, &keys.present, "present"),
        (absent, &keys.absent, "absent"),
    ] {
        let samples = b.per_key(
            &format!("{kind}{which}/{name}/round{round}"),
            &mut (),
            set,
            usize::MAX,
            |_, seg| f.hits(seg),
            |_, _, _| {},
        );
        r.add_round(figure, name, round, &samples);
    }
}

/// Hashing alone: the floor under every lookup figure.
fn bench_hashes(b: &mut Bench, r: &mut Results, keys: &Keys) {
    fn run(
        b: &mut Bench,
        r: &mut Results,
        name: &'static str,
        keys: &[Key],
        h: impl Fn(&Key) -> u64,
    ) {
        let samples = b.per_key(
            &format!("hash/{name}"),
            &mut (),
            keys,
            usize::MAX,
            |_, seg| seg.iter().fold(0, |a, k| a ^ h(k)),
            |_, _, _| {},
        );
        r.add(Figure::HashNs, name, &samples);
    }
    let spec = HashSpec::xxh3(HASH_SEED);
    let fold = foldhash::fast::FixedState::with_seed(HASH_SEED);
    run(b, r, "xxh3_128", &keys.absent, |k| {
        let h = spec.hash(k);
        h.h1 ^ h.h2
    });
    run(b, r, "xxh3_128_raw", &keys.absent, |k| {
        let h = xxh3_128_with_seed(k, HASH_SEED);
        h as u64 ^ (h >> 64) as u64
    });
    run(b, r, "xxh3_64", &keys.absent, hash64);
    run(b, r, "xxh64", &keys.absent, xxh64_parquet);
    run(b, r, "foldhash", &keys.absent, |k| fold.hash_one(k));
}

/// An update of a counting filter, and its inverse.
type KeyOp<F> = fn(&mut F, &Key);

/// The three counting figures for one counting filter (built here with all
/// keys). Each timed insert (remove) of a segment of present keys is undone
/// by an untimed remove (insert) of the same keys.
fn bench_counting<F: Counting>(
    b: &mut Bench,
    r: &mut Results,
    name: &'static str,
    keys: &Keys,
    f: &mut F,
) {
    time_once(r, Figure::CountingBuildNs, name, keys.n(), || {
        keys.insert.iter().for_each(|k| f.insert(k));
    });
    let apply = |op: KeyOp<F>| {
        move |f: &mut F, seg: &[Key]| {
            seg.iter().for_each(|k| op(f, k));
            seg.len() as u64
        }
    };
    let undo = |op: KeyOp<F>| move |f: &mut F, seg: &[Key], _| seg.iter().for_each(|k| op(f, k));
    let updates: [(&str, KeyOp<F>, KeyOp<F>, Figure); 2] = [
        ("insert", F::insert, F::remove, Figure::CountingInsertNs),
        ("remove", F::remove, F::insert, Figure::CountingRemoveNs),
    ];
    for (what, op, inverse, figure) in updates {
        let id = format!("counting_{what}/{name}");
        let samples = b.per_key(&id, f, &keys.present, SEGMENT, apply(op), undo(inverse));
        r.add_round(figure, name, 0, &samples);
    }
    let lookup = b.per_key(
        &format!("counting_lookup/{name}"),
        f,
        &keys.present,
        usize::MAX,
        |f, seg| seg.iter().map(|k| f.contains(k) as u64).sum(),
        |_, _, _| {},
    );
    r.add_round(Figure::CountingLookupNs, name, 0, &lookup);
    let fp = keys.absent.iter().filter(|k| f.contains(k)).count();
    r.add(
        Figure::CountingFp,
        name,
        &[fp as f64 / keys.absent.len() as f64],
    );
}

fn counting_filters(b: &mut Bench, r: &mut Results, keys: &Keys) -> Result<(), ParamError> {
    let n = keys.n() as u64;
    for (name, layout) in [
        ("filterstore", Layout::Blocked),
        ("filterstore_standard", Layout::Standard),
    ] {
        let params =
            FilterParams::with_bits_per_key(n, BITS_PER_KEY, layout, HashSpec::xxh3(HASH_SEED))?;
        r.set_k(name, params.k().to_string());
        bench_counting(b, r, name, keys, &mut CountingFilter::new(params)?);
    }
    // fastbloom-rs sizes in units of 64 counters; same k as our standard layout.
    let m = (n as f64 * BITS_PER_KEY / 64.0).ceil() as u64 * 64;
    let k = filterstore::optimal_k(m, n, Layout::Standard);
    let mut f =
        fastbloom_rs::FilterBuilder::from_size_and_hashes(m, k).build_counting_bloom_filter();
    r.set_k("fastbloom_rs", k.to_string());
    bench_counting(b, r, "fastbloom_rs", keys, &mut f);
    Ok(())
}

/// Every bit filter, built (insert figures measured on the way) and checked.
struct Subjects {
    standard: Option<BitFilter>,
    blocked: Option<BitFilter>,
    blocked128: Option<BitFilter>,
    split: Option<BitFilter>,
    sbbf: Option<sbbf_rs_safe::Filter>,
    sbbf_xxh64: Option<SbbfXxh64>,
    others: Vec<(&'static str, Box<dyn Lookup>)>,
}

fn build_all(
    b: &mut Bench,
    r: &mut Results,
    keys: &Keys,
    run: &dyn Fn(&str) -> bool,
) -> Result<Subjects, ParamError> {
    let n = keys.n();
    let mut filterstore = |layout: Layout,
                           name: &'static str|
     -> Result<Option<BitFilter>, ParamError> {
        let part = if layout == Layout::SplitBlock {
            "split"
        } else {
            layout.name()
        };
        if !run(part) {
            return Ok(None);
        }
        let params = FilterParams::with_bits_per_key(n as u64, BITS_PER_KEY, layout, spec(layout))?;
        let mut f = BitFilter::new(params)?;
        bench_inserts(b, r, name, keys, &mut f);
        accuracy(r, name, keys, &f);
        Ok(Some(f))
    };
    let standard = filterstore(Layout::Standard, "filterstore_standard")?;
    let blocked = filterstore(Layout::Blocked, "filterstore_blocked")?;
    let split = filterstore(Layout::SplitBlock, "filterstore_split")?;
    // The blocked layout with the hash of filters made before XXH3-64:
    // lookups only (built in bulk, not timed).
    let blocked128 = match run("blocked") {
        true => {
            let name = "filterstore_blocked_xxh3_128";
            let params = FilterParams::with_bits_per_key(
                n as u64,
                BITS_PER_KEY,
                Layout::Blocked,
                HashSpec::xxh3(HASH_SEED),
            )?;
            let mut f = BitFilter::new(params)?;
            f.insert_many_mut(&keys.insert);
            accuracy(r, name, keys, &f);
            Some(f)
        }
        false => None,
    };
    let (mut sbbf, mut sbbf_xxh64) = (None, None);
    if run("sbbf") {
        let mut f = sbbf_rs_safe::Filter::new(BITS_PER_KEY as usize, n);
        bench_inserts(b, r, "sbbf", keys, &mut f);
        accuracy(r, "sbbf", keys, &f);
        accuracy(r, "sbbf_prefetch", keys, &f);
        sbbf = Some(f);
        let mut f = SbbfXxh64(sbbf_rs_safe::Filter::new(BITS_PER_KEY as usize, n));
        bench_inserts(b, r, "sbbf_xxh64", keys, &mut f);
        accuracy(r, "sbbf_xxh64", keys, &f);
        accuracy(r, "sbbf_xxh64_prefetch", keys, &f);
        if let Some(split) = &split {
            let ours = split.to_le_bytes();
            assert!(
                ours[..f.0.as_bytes().len()] == *f.0.as_bytes(),
                "filterstore_split and sbbf_xxh64 hold different bits"
            );
        }
        sbbf_xxh64 = Some(f);
    }
    let mut others: Vec<(&'static str, Box<dyn Lookup>)> = Vec::new();
    let mut dynamic = |name: &'static str, mut f: Box<dyn DynLookup>| {
        f.bench_inserts(b, r, name, keys);
        accuracy(r, name, keys, f.as_lookup());
        others.push((name, f.into_lookup()));
    };
    let m = (n as f64 * BITS_PER_KEY).ceil() as usize;
    if run("fastbloom") {
        let f = fastbloom::BloomFilter::with_num_bits(m)
            .seed(&u128::from(HASH_SEED))
            .expected_items(n);
        dynamic("fastbloom", Box::new(f));
        let f = fastbloom::BloomFilter::with_num_bits(m)
            .hasher(foldhash::fast::FixedState::with_seed(HASH_SEED))
            .expected_items(n);
        dynamic("fastbloom_fasthash", Box::new(f));
    }
    if run("bloomfilter") {
        let mut seed = [0u8; 32];
        seed[..8].copy_from_slice(&HASH_SEED.to_le_bytes());
        let bytes = (n as f64 * BITS_PER_KEY / 8.0).ceil() as usize;
        let f = bloomfilter::Bloom::<Key>::new_with_seed(bytes, n, &seed).expect("valid sizes");
        dynamic("bloomfilter", Box::new(f));
    }
    if run("xorf") {
        let name = "xorf_bfuse8";
        let mut built = None;
        // Static: its build (hashing included) stands as its insert figure.
        time_once(r, Figure::BuildNs, name, n, || {
            let hashes: Vec<u64> = keys.insert.iter().map(hash64).collect();
            built = Some(xorf::BinaryFuse8::try_from(&hashes).expect("BinaryFuse8 build"));
        });
        let f = built.expect("built above");
        if let Some(ns) = r.get(Figure::BuildNs, name) {
            r.add(Figure::InsertNs, name, &[ns]);
        }
        accuracy(r, name, keys, &f);
        others.push((name, Box::new(f)));
    }
    Ok(Subjects {
        standard,
        blocked,
        blocked128,
        split,
        sbbf,
        sbbf_xxh64,
        others,
    })
}

/// Object-safe access to a dynamic filter for [`build_all`]: the insert
/// benchmark stays monomorphic inside.
trait DynLookup {
    fn bench_inserts(&mut self, b: &mut Bench, r: &mut Results, name: &'static str, keys: &Keys);
    fn as_lookup(&self) -> &dyn Lookup;
    fn into_lookup(self: Box<Self>) -> Box<dyn Lookup>;
}

impl<F: Dynamic + 'static> DynLookup for F {
    fn bench_inserts(&mut self, b: &mut Bench, r: &mut Results, name: &'static str, keys: &Keys) {
        bench_inserts(b, r, name, keys, self);
    }
    fn as_lookup(&self) -> &dyn Lookup {
        self
    }
    fn into_lookup(self: Box<Self>) -> Box<dyn Lookup> {
        self
    }
}

fn main() -> Result<(), ParamError> {
    // `cargo bench` passes --bench; without it (`cargo test --benches`)
    // criterion runs every benchmark once as a smoke test: keep that quick.
    let benching = std::env::args().any(|a| a == "--bench");
    // 10M by default; FILTERSTORE_PEERS_100M=1 for the 100M point (needs
    // ~10 GB); PEERS_N for any other (1M for the chart's small point).
    let default_n = match std::env::var("FILTERSTORE_PEERS_100M").as_deref() {
        Ok("1") => 100_000_000.0,
        _ => 10_000_000.0,
    };
    let n = env_f64("PEERS_N", if benching { default_n } else { 100_000.0 }) as usize;
    let rounds = env_f64("PEERS_ROUNDS", 4.0) as usize;
    let measure = Duration::from_secs_f64(env_f64("PEERS_MEASURE_SECS", 2.0));
    let warm_up = Duration::from_secs_f64(env_f64("PEERS_WARMUP_SECS", 0.5));
    let only = std::env::var("PEERS_ONLY").unwrap_or_default();
    let run = |part: &str| only.is_empty() || only.split(',').any(|p| p == part);
    let load_before = loadavg();
    println!(
        "peers: the blocked subjects hash with {} (PEERS_BLOCKED_HASH)",
        builds::spec(Layout::Blocked).algo.name()
    );

    let keys = Keys::generate(n);
    let c = Criterion::default()
        .sample_size(harness::SAMPLES)
        .measurement_time(measure)
        .warm_up_time(warm_up)
        .nresamples(2_000)
        .without_plots()
        .configure_from_args();
    let mut b = Bench { c };
    let mut r = Results::default();

    if run("hash") {
        bench_hashes(&mut b, &mut r, &keys);
    }
    let subjects = build_all(&mut b, &mut r, &keys, &run)?;
    let standard = subjects
        .standard
        .as_ref()
        .map(|f| ("filterstore_standard", f));
    let blocked = subjects
        .blocked
        .as_ref()
        .map(|f| ("filterstore_blocked", f));
    let blocked128 = subjects
        .blocked128
        .as_ref()
        .map(|f| ("filterstore_blocked_xxh3_128", f));
    let split = subjects.split.as_ref().map(|f| ("filterstore_split", f));
    let ours: Vec<(&'static str, &BitFilter)> = standard
        .into_iter()
        .chain(blocked)
        .chain(blocked128)
        .chain(split)
        .collect();
    // The blocked filter's bytes read through a view, as a decoded message
    // or a memory-mapped file is read (`to_le_bytes`: a `Vec<u8>`, aligned
    // as the allocator aligns it).
    let blocked_bytes = subjects.blocked.as_ref().map(|f| f.to_le_bytes());
    let blocked_view = match (&subjects.blocked, &blocked_bytes) {
        (Some(f), Some(bytes)) => {
            Some(FilterView::new(*f.params(), bytes).expect("the filter's own bytes"))
        }
        _ => None,
    };
    // A copy of the blocked filter, frozen: what a user holds who is done
    // writing it (no other thread may write it, as none may write sbbf's).
    let blocked_frozen = match &subjects.blocked {
        Some(f) => Some(f.try_clone()?.freeze()),
        None => None,
    };
    // Every lookup subject of a round, as (name, filter, batched).
    let batched_ours: Vec<Batched> = ours.iter().map(|&(_, f)| Batched(f)).collect();
    let sbbf_batched = subjects.sbbf.as_ref().map(|f| SbbfPrefetch(f, hash64));
    let sbbf_xxh64_batched = subjects
        .sbbf_xxh64
        .as_ref()
        .map(|f| SbbfPrefetch(&f.0, xxh64_parquet));
    let mut lookups: Vec<(&'static str, &dyn Lookup, bool)> = Vec::new();
    for (&(name, f), batched) in ours.iter().zip(&batched_ours) {
        lookups.push((name, f, false));
        lookups.push((name, batched, true));
    }
    if let Some(view) = &blocked_view {
        accuracy(&mut r, "filterstore_blocked_view", &keys, view);
        lookups.push(("filterstore_blocked_view", view, false));
    }
    if let Some(frozen) = &blocked_frozen {
        accuracy(&mut r, "filterstore_blocked_frozen", &keys, frozen);
        lookups.push(("filterstore_blocked_frozen", frozen, false));
    }
    if let (Some(f), Some(batched)) = (&subjects.sbbf, &sbbf_batched) {
        lookups.push(("sbbf", f, false));
        lookups.push(("sbbf_prefetch", batched, true));
    }
    if let (Some(f), Some(batched)) = (&subjects.sbbf_xxh64, &sbbf_xxh64_batched) {
        lookups.push(("sbbf_xxh64", f, false));
        lookups.push(("sbbf_xxh64_prefetch", batched, true));
    }
    for (name, f) in &subjects.others {
        lookups.push((name, f.as_ref(), false));
    }
    for round in 1..=rounds {
        // Each round starts at another subject. With one order for every
        // round, the benchmark right after the previous round's builds
        // (the blocked layout's present keys) read 13.0-18.7 ns in rounds
        // 2-4 of a 1M-key run where round 1 read 9.9: that cost fell on
        // one subject every time.
        let start = (round - 1) * lookups.len() / rounds.max(1);
        for i in 0..lookups.len() {
            let (name, f, batched) = lookups[(start + i) % lookups.len()];
            bench_lookups(&mut b, &mut r, round, name, &keys, f, batched);
        }
        if run("sbbf") {
            build_round(&mut r, round, &keys, &run)?;
        }
    }
    drop(subjects);
    if run("counting") {
        counting_filters(&mut b, &mut r, &keys)?;
    }
    let ids = if run("ids") {
        ids::run(&mut b, &mut r, n, rounds)?
    } else {
        String::new()
    };
    let fp1 = if run("fp1") {
        equal_fp::run(&mut b, &mut r, &keys)?
    } else {
        String::new()
    };
    let large = match std::env::var("FILTERSTORE_PEERS_LARGE").as_deref() {
        Ok("1") => large::run(&mut r)?,
        _ => String::new(),
    };

    b.c.final_summary();
    let header = format!(
        "peers: n = {n} keys of 16 bytes, {BITS_PER_KEY} bits/key, {rounds} lookup rounds; \
         load average before {load_before}, after {}; clock: {}",
        loadavg(),
        clock::source()
    );
    print!("{}", r.table(&BIT_FILTERS, &COUNTING_FILTERS, &header));
    print!("{ids}{fp1}{large}");
    print!("{}", r.result_lines());
    print!("{}", ratio_lines(&r));
    if benching {
        let points =
            std::env::var("PEERS_POINTS").unwrap_or_else(|_| "target/peers_points.csv".into());
        let svg =
            std::env::var("PEERS_SVG").unwrap_or_else(|_| "target/peers_ns_per_key.svg".into());
        let rows: Vec<(&str, f64)> = BIT_FILTERS
            .iter()
            .filter_map(|&name| Some((name, r.get(Figure::LookupAbsentNs, name)?)))
            .chain(
                r.get(Figure::LookupBatchNs, "filterstore_blocked")
                    .map(|v| ("filterstore_blocked_batch", v)),
            )
            .chain(
                r.get(Figure::LookupBatchNs, "sbbf_prefetch")
                    .map(|v| ("sbbf_prefetch_batch", v)),
            )
            .collect();
        let title = format!(
            "absent-key lookups, ns/key, 10 bits/key (load1 {})",
            load1()
        );
        if let Err(e) =
            plot::append_points(&points, n, &rows).and_then(|()| plot::draw(&points, &svg, &title))
        {
            eprintln!("peers: could not write {points} / {svg}: {e}");
        }
    }
    Ok(())
}
