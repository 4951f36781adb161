//! `cargo bench --bench peers`: this crate's bit filters against the Bloom
//! filter crates a user would pick instead, at n = 10,000,000 keys of 16 bytes
//! and 10 bits per key, in one run (issue 2).
//!
//! * Filters: `filterstore` standard and blocked layouts; `fastbloom` 0.17 with
//!   its default (SipHash-1-3, keyed) hasher and with `foldhash`; `sbbf-rs-safe`
//!   (Parquet split block filter, 256-bit blocks, k = 8); `xorf` BinaryFuse8
//!   (static: built once from all keys, no insert); `bloomfilter` 3 (SipHash).
//!   Peers that take a `u64` (sbbf, xorf) get `xxh3_64` of the key, the same
//!   hash family this crate uses.
//! * Every filter gets the same keys and 10 bits per key; xorf's actual size is
//!   reported. Keys come from seeded `StdRng`s; present and absent keys differ
//!   in the low bit of their first byte, so they are disjoint by construction
//!   and the FP count only ever counts absent keys.
//! * Timed figures are criterion benchmarks written with `iter_custom`: each
//!   sample walks on through a large key array (random cache lines, never one
//!   hot key) and this file records ns/key per sample; the figure is the median
//!   of the measured samples. Lookups of present keys walk a shuffled copy of
//!   the inserted keys. Inserts start from an empty filter and restart from an
//!   empty one (cleared outside the timed region) each time the key array is
//!   exhausted, so the figure is the mean over a whole build.
//! * FP (over all absent keys) and bits per key come from one plain pass
//!   after each filter is built; the same pass asserts that every present key
//!   is found (a false negative aborts the run).
//! * Counting filters: `filterstore::CountingFilter` (both layouts) against
//!   `fastbloom-rs`'s `CountingBloomFilter`, same m and k, preloaded with all
//!   keys. Insert and remove are timed on present keys and undone outside the
//!   timed region, so the state never drifts; lookups are of present keys.
//!
//! Output: criterion's per-benchmark lines, then a table, then one line per
//! figure, `RESULT <figure>.<filter> <value> <unit>`, at the very end.
//!
//! Environment: `PEERS_N` (keys, default 10,000,000), `PEERS_MEASURE_SECS`
//! (criterion measurement time per figure, default 2), `PEERS_WARMUP_SECS`
//! (default 0.5), `PEERS_ONLY` (comma-separated parts to run, for development:
//! `hash,standard,blocked,fastbloom,sbbf,xorf,bloomfilter,counting`; default all).
//! The full run takes about six minutes on the 2-core machine.

use criterion::Criterion;
use fastbloom_rs::{Deletable, Membership};
use filterstore::{
    BitFilter, BloomRead, CountingFilter, FilterParams, HashSpec, Layout, ParamError,
};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{RngCore, SeedableRng};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};
use xxhash_rust::xxh3::{xxh3_128_with_seed, xxh3_64_with_seed};

type Key = [u8; 16];

const BITS_PER_KEY: f64 = 10.0;
/// Seed of every filter's hash (the peers' seeds are derived from it).
const HASH_SEED: u64 = 0x5eed_f11e_0000_0002;
/// Keys per timed segment for batched lookups and counting updates.
const SEGMENT: usize = 4096;
/// Sample count per criterion benchmark (criterion's minimum is 10).
const SAMPLES: usize = 10;

/// The key sets: `insert` in insertion order, `present` the same keys
/// shuffled, `absent` fresh keys that were never inserted.
struct Keys {
    insert: Vec<Key>,
    present: Vec<Key>,
    absent: Vec<Key>,
}

impl Keys {
    fn generate(n: usize) -> Keys {
        let gen = |seed: u64, low_bit: u8| -> Vec<Key> {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..n)
                .map(|_| {
                    let mut k = [0u8; 16];
                    rng.fill_bytes(&mut k);
                    k[0] = (k[0] & !1) | low_bit;
                    k
                })
                .collect()
        };
        let insert = gen(1, 0);
        let absent = gen(2, 1);
        let mut present = insert.clone();
        present.shuffle(&mut StdRng::seed_from_u64(3));
        Keys {
            insert,
            present,
            absent,
        }
    }
}

/// Which measured quantity a figure is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Figure {
    InsertNs,
    LookupPresentNs,
    LookupAbsentNs,
    LookupBatchNs,
    LookupBatchPresentNs,
    Fp,
    BitsPerKey,
    HashNs,
    CountingInsertNs,
    CountingRemoveNs,
    CountingLookupNs,
    CountingFp,
    BuildNs,
    CountingBuildNs,
}

impl Figure {
    fn name(self) -> &'static str {
        match self {
            Figure::InsertNs => "insert_ns",
            Figure::LookupPresentNs => "lookup_present_ns",
            Figure::LookupAbsentNs => "lookup_absent_ns",
            Figure::LookupBatchNs => "lookup_batch_ns",
            Figure::LookupBatchPresentNs => "lookup_batch_present_ns",
            Figure::Fp => "fp",
            Figure::BitsPerKey => "bits_per_key",
            Figure::HashNs => "hash_ns",
            Figure::CountingInsertNs => "counting_insert_ns",
            Figure::CountingRemoveNs => "counting_remove_ns",
            Figure::CountingLookupNs => "counting_lookup_ns",
            Figure::CountingFp => "counting_fp",
            Figure::BuildNs => "build_ns",
            Figure::CountingBuildNs => "counting_build_ns",
        }
    }
    fn unit(self) -> &'static str {
        match self {
            Figure::Fp | Figure::CountingFp => "fraction",
            Figure::BitsPerKey => "bits",
            _ => "ns",
        }
    }
}

/// Everything measured, keyed by figure and filter, plus per-filter notes.
#[derive(Default)]
struct Results {
    figures: BTreeMap<(Figure, &'static str), f64>,
    k: BTreeMap<&'static str, String>,
}

impl Results {
    fn put(&mut self, figure: Figure, filter: &'static str, value: Option<f64>) {
        if let Some(v) = value {
            self.figures.insert((figure, filter), v);
        }
    }
    fn get(&self, figure: Figure, filter: &'static str) -> Option<f64> {
        self.figures.get(&(figure, filter)).copied()
    }
}

/// Drives criterion and keeps the per-key sample medians it measured.
struct Bench {
    c: Criterion,
    group: &'static str,
}

impl Bench {
    /// Runs one criterion benchmark named `group/id`. Each criterion sample
    /// of `iters` iterations applies `timed` to `iters` keys of `keys`,
    /// continuing where the previous sample stopped and wrapping around; only
    /// `timed` is inside the clock. After each segment `after` runs untimed,
    /// told whether the key array was just exhausted. Returns the median
    /// ns/key over the measured samples (`None` if criterion skipped it, e.g.
    /// filtered out on the command line).
    fn per_key<S>(
        &mut self,
        id: &str,
        state: &mut S,
        keys: &[Key],
        segment: usize,
        mut timed: impl FnMut(&mut S, &[Key]) -> u64,
        mut after: impl FnMut(&mut S, &[Key], bool),
    ) -> Option<f64> {
        let mut samples: Vec<f64> = Vec::new();
        let mut cursor = 0usize;
        let mut group = self.c.benchmark_group(self.group);
        group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let mut left = iters as usize;
                let mut elapsed = Duration::ZERO;
                let mut check = 0u64;
                while left > 0 {
                    let len = left.min(segment).min(keys.len() - cursor);
                    let seg = &keys[cursor..cursor + len];
                    let start = Instant::now();
                    check = check.wrapping_add(timed(state, seg));
                    elapsed += start.elapsed();
                    cursor += len;
                    left -= len;
                    let wrapped = cursor == keys.len();
                    if wrapped {
                        cursor = 0;
                    }
                    after(state, seg, wrapped);
                }
                black_box(check);
                samples.push(elapsed.as_nanos() as f64 / iters.max(1) as f64);
                elapsed
            })
        });
        group.finish();
        // Warm-up calls come first; the measured samples are the last SAMPLES.
        let first = samples.len().saturating_sub(SAMPLES);
        let measured = &mut samples[first..];
        median(measured)
    }

    /// [`Bench::per_key`] for a read-only query: one call per key, the number
    /// of `true` answers as the checksum, nothing to undo.
    fn lookups<F>(
        &mut self,
        id: &str,
        f: &F,
        keys: &[Key],
        q: impl Fn(&F, &Key) -> bool,
    ) -> Option<f64> {
        self.per_key(
            id,
            &mut &*f,
            keys,
            usize::MAX,
            |f, seg| seg.iter().map(|k| q(*f, k) as u64).sum(),
            |_, _, _| {},
        )
    }
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    })
}

/// One untimed pass after a build: asserts that every present key is found,
/// records the FP rate over all absent keys and the bits per key.
fn accuracy(
    r: &mut Results,
    name: &'static str,
    keys: &Keys,
    bits: u64,
    contains: impl Fn(&Key) -> bool,
) {
    let missing = keys.present.iter().filter(|k| !contains(k)).count();
    assert_eq!(missing, 0, "{name}: {missing} false negatives");
    let fp = keys.absent.iter().filter(|k| contains(k)).count();
    let n = keys.insert.len() as f64;
    r.put(Figure::Fp, name, Some(fp as f64 / keys.absent.len() as f64));
    r.put(Figure::BitsPerKey, name, Some(bits as f64 / n));
}

/// Times one plain build from empty as `figure` (a cross-check next to the
/// criterion insert figure, and xorf's only insert figure).
fn timed_build(
    r: &mut Results,
    figure: Figure,
    name: &'static str,
    n: usize,
    build: impl FnOnce(),
) {
    let start = Instant::now();
    build();
    let ns = start.elapsed().as_nanos() as f64 / n as f64;
    r.put(figure, name, Some(ns));
}

/// What every filter under test answers: membership, size, `k`.
trait Lookup {
    fn contains(&self, key: &Key) -> bool;
    /// Bits of memory holding the filter's answer (padding included).
    fn bits(&self) -> u64;
    /// Number of probes, for the table (`-` where it does not apply).
    fn k(&self) -> String;
}

/// A filter that takes inserts one key at a time.
trait Dynamic: Lookup {
    fn insert(&mut self, key: &Key);
    fn clear(&mut self);
}

impl Lookup for BitFilter {
    fn contains(&self, key: &Key) -> bool {
        BitFilter::contains(self, key)
    }
    fn bits(&self) -> u64 {
        self.params().bit_bytes() * 8
    }
    fn k(&self) -> String {
        self.params().k().to_string()
    }
}

impl Dynamic for BitFilter {
    fn insert(&mut self, key: &Key) {
        BitFilter::insert(self, key);
    }
    fn clear(&mut self) {
        BitFilter::clear(self);
    }
}

impl<S: std::hash::BuildHasher> Lookup for fastbloom::BloomFilter<S> {
    fn contains(&self, key: &Key) -> bool {
        fastbloom::BloomFilter::contains(self, key)
    }
    fn bits(&self) -> u64 {
        self.num_bits() as u64
    }
    fn k(&self) -> String {
        self.num_hashes().to_string()
    }
}

impl<S: std::hash::BuildHasher> Dynamic for fastbloom::BloomFilter<S> {
    fn insert(&mut self, key: &Key) {
        fastbloom::BloomFilter::insert(self, key);
    }
    fn clear(&mut self) {
        fastbloom::BloomFilter::clear(self);
    }
}

/// Peers that take a 64-bit hash get `xxh3_64` of the key.
fn hash64(key: &Key) -> u64 {
    xxh3_64_with_seed(key, HASH_SEED)
}

impl Lookup for sbbf_rs_safe::Filter {
    fn contains(&self, key: &Key) -> bool {
        self.contains_hash(hash64(key))
    }
    fn bits(&self) -> u64 {
        self.as_bytes().len() as u64 * 8
    }
    fn k(&self) -> String {
        "8".into()
    }
}

impl Dynamic for sbbf_rs_safe::Filter {
    fn insert(&mut self, key: &Key) {
        self.insert_hash(hash64(key));
    }
    fn clear(&mut self) {
        self.reset();
    }
}

impl Lookup for xorf::BinaryFuse8 {
    fn contains(&self, key: &Key) -> bool {
        xorf::Filter::contains(self, &hash64(key))
    }
    fn bits(&self) -> u64 {
        self.fingerprints.len() as u64 * 8
    }
    fn k(&self) -> String {
        "-".into()
    }
}

impl Lookup for bloomfilter::Bloom<Key> {
    fn contains(&self, key: &Key) -> bool {
        self.check(key)
    }
    fn bits(&self) -> u64 {
        self.len()
    }
    fn k(&self) -> String {
        self.number_of_hash_functions().to_string()
    }
}

impl Dynamic for bloomfilter::Bloom<Key> {
    fn insert(&mut self, key: &Key) {
        self.set(key);
    }
    fn clear(&mut self) {
        bloomfilter::Bloom::clear(self);
    }
}

/// Lookups of present and of absent keys, then the accuracy pass.
fn bench_lookups<F: Lookup>(
    b: &mut Bench,
    r: &mut Results,
    name: &'static str,
    keys: &Keys,
    f: &F,
) {
    r.k.insert(name, f.k());
    let present = b.lookups(&format!("present/{name}"), f, &keys.present, F::contains);
    let absent = b.lookups(&format!("absent/{name}"), f, &keys.absent, F::contains);
    r.put(Figure::LookupPresentNs, name, present);
    r.put(Figure::LookupAbsentNs, name, absent);
    accuracy(r, name, keys, f.bits(), |k| f.contains(k));
}

/// Inserts (criterion, builds from empty), one plain build, then lookups.
fn bench_dynamic<F: Dynamic>(
    b: &mut Bench,
    r: &mut Results,
    name: &'static str,
    keys: &Keys,
    f: &mut F,
) {
    f.clear();
    let insert = b.per_key(
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
    r.put(Figure::InsertNs, name, insert);
    f.clear();
    timed_build(r, Figure::BuildNs, name, keys.insert.len(), || {
        keys.insert.iter().for_each(|k| f.insert(k));
    });
    bench_lookups(b, r, name, keys, f);
}

fn filterstore_bits(
    b: &mut Bench,
    r: &mut Results,
    name: &'static str,
    layout: Layout,
    keys: &Keys,
) -> Result<(), ParamError> {
    let n = keys.insert.len() as u64;
    let params =
        FilterParams::with_bits_per_key(n, BITS_PER_KEY, layout, HashSpec::xxh3(HASH_SEED))?;
    let mut f = BitFilter::new(params)?;
    bench_dynamic(b, r, name, keys, &mut f);
    let mut out = vec![false; SEGMENT];
    let mut batch = |id: String, keys: &[Key]| {
        b.per_key(
            &id,
            &mut &f,
            keys,
            SEGMENT,
            |f, seg| {
                let out = &mut out[..seg.len()];
                f.contains_many_into(seg, out);
                out.iter().map(|&x| x as u64).sum()
            },
            |_, _, _| {},
        )
    };
    let absent = batch(format!("batch_absent/{name}"), &keys.absent);
    let present = batch(format!("batch_present/{name}"), &keys.present);
    r.put(Figure::LookupBatchNs, name, absent);
    r.put(Figure::LookupBatchPresentNs, name, present);
    Ok(())
}

fn fastbloom_filters(b: &mut Bench, r: &mut Results, keys: &Keys) {
    let n = keys.insert.len();
    let m = (n as f64 * BITS_PER_KEY).ceil() as usize;
    let mut f = fastbloom::BloomFilter::with_num_bits(m)
        .seed(&(HASH_SEED as u128))
        .expected_items(n);
    bench_dynamic(b, r, "fastbloom", keys, &mut f);
    drop(f);
    let mut f = fastbloom::BloomFilter::with_num_bits(m)
        .hasher(foldhash::fast::FixedState::with_seed(HASH_SEED))
        .expected_items(n);
    bench_dynamic(b, r, "fastbloom_fasthash", keys, &mut f);
}

fn sbbf_filter(b: &mut Bench, r: &mut Results, keys: &Keys) {
    let mut f = sbbf_rs_safe::Filter::new(BITS_PER_KEY as usize, keys.insert.len());
    bench_dynamic(b, r, "sbbf", keys, &mut f);
}

fn xorf_filter(b: &mut Bench, r: &mut Results, keys: &Keys) {
    let name = "xorf_bfuse8";
    let mut filter = None;
    // Static: the build (hashing included) is its insert figure.
    timed_build(r, Figure::BuildNs, name, keys.insert.len(), || {
        let hashes: Vec<u64> = keys.insert.iter().map(hash64).collect();
        filter = Some(xorf::BinaryFuse8::try_from(&hashes).expect("BinaryFuse8 build failed"));
    });
    let f = filter.expect("built above");
    r.put(Figure::InsertNs, name, r.get(Figure::BuildNs, name));
    bench_lookups(b, r, name, keys, &f);
}

fn bloomfilter_filter(b: &mut Bench, r: &mut Results, keys: &Keys) {
    let n = keys.insert.len();
    let bytes = (n as f64 * BITS_PER_KEY / 8.0).ceil() as usize;
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&HASH_SEED.to_le_bytes());
    let mut f = bloomfilter::Bloom::<Key>::new_with_seed(bytes, n, &seed).expect("valid sizes");
    bench_dynamic(b, r, "bloomfilter", keys, &mut f);
}

/// A counting filter under test.
trait Counting {
    fn insert(&mut self, key: &Key);
    /// Removes a key known to be present.
    fn remove(&mut self, key: &Key);
    fn contains(&self, key: &Key) -> bool;
}

impl Counting for CountingFilter {
    fn insert(&mut self, key: &Key) {
        CountingFilter::insert(self, key);
    }
    fn remove(&mut self, key: &Key) {
        CountingFilter::remove(self, key).expect("a present key is removable");
    }
    fn contains(&self, key: &Key) -> bool {
        CountingFilter::contains(self, key)
    }
}

impl Counting for fastbloom_rs::CountingBloomFilter {
    fn insert(&mut self, key: &Key) {
        self.add(key);
    }
    fn remove(&mut self, key: &Key) {
        Deletable::remove(self, key);
    }
    fn contains(&self, key: &Key) -> bool {
        Membership::contains(self, key)
    }
}

/// The three counting figures for one counting filter, preloaded with all
/// keys. Each timed insert (remove) of a segment of present keys is undone by
/// an untimed remove (insert) of the same keys, so the load never drifts.
fn bench_counting<F: Counting>(
    b: &mut Bench,
    r: &mut Results,
    name: &'static str,
    keys: &Keys,
    f: &mut F,
) {
    timed_build(r, Figure::CountingBuildNs, name, keys.insert.len(), || {
        keys.insert.iter().for_each(|k| f.insert(k));
    });
    let apply = |op: fn(&mut F, &Key)| {
        move |f: &mut F, seg: &[Key]| {
            seg.iter().for_each(|k| op(f, k));
            seg.len() as u64
        }
    };
    let undo =
        |op: fn(&mut F, &Key)| move |f: &mut F, seg: &[Key], _| seg.iter().for_each(|k| op(f, k));
    let insert = b.per_key(
        &format!("counting_insert/{name}"),
        f,
        &keys.present,
        SEGMENT,
        apply(F::insert),
        undo(F::remove),
    );
    let remove = b.per_key(
        &format!("counting_remove/{name}"),
        f,
        &keys.present,
        SEGMENT,
        apply(F::remove),
        undo(F::insert),
    );
    let lookup = b.lookups(
        &format!("counting_lookup/{name}"),
        &*f,
        &keys.present,
        F::contains,
    );
    r.put(Figure::CountingInsertNs, name, insert);
    r.put(Figure::CountingRemoveNs, name, remove);
    r.put(Figure::CountingLookupNs, name, lookup);
    let fp = keys.absent.iter().filter(|k| f.contains(k)).count();
    r.put(
        Figure::CountingFp,
        name,
        Some(fp as f64 / keys.absent.len() as f64),
    );
}

fn counting_filters(b: &mut Bench, r: &mut Results, keys: &Keys) -> Result<(), ParamError> {
    let n = keys.insert.len() as u64;
    for (name, layout) in [
        ("filterstore", Layout::Blocked),
        ("filterstore_standard", Layout::Standard),
    ] {
        let params =
            FilterParams::with_bits_per_key(n, BITS_PER_KEY, layout, HashSpec::xxh3(HASH_SEED))?;
        r.k.insert(name, params.k().to_string());
        bench_counting(b, r, name, keys, &mut CountingFilter::new(params)?);
    }
    // fastbloom-rs sizes in units of 64 counters; same k as the standard layout.
    let m = (n as f64 * BITS_PER_KEY / 64.0).ceil() as u64 * 64;
    let k = filterstore::params::optimal_k(m, n, Layout::Standard);
    let name = "fastbloom_rs";
    r.k.insert(name, k.to_string());
    let mut f =
        fastbloom_rs::FilterBuilder::from_size_and_hashes(m, k).build_counting_bloom_filter();
    bench_counting(b, r, name, keys, &mut f);
    Ok(())
}

/// Hashing alone, as a floor for every lookup figure.
fn hashes(b: &mut Bench, r: &mut Results, keys: &Keys) {
    use std::hash::BuildHasher;
    let fold = foldhash::fast::FixedState::with_seed(HASH_SEED);
    let spec = HashSpec::xxh3(HASH_SEED);
    let mut run = |name: &'static str, h: &dyn Fn(&Key) -> u64| {
        let v = b.per_key(
            &format!("hash/{name}"),
            &mut (),
            &keys.absent,
            usize::MAX,
            |_, seg| seg.iter().fold(0u64, |a, k| a ^ h(k)),
            |_, _, _| {},
        );
        r.put(Figure::HashNs, name, v);
    };
    run("xxh3_128", &|k| {
        let h = spec.hash(k);
        h.h1 ^ h.h2
    });
    run("xxh3_128_raw", &|k| xxh3_128_with_seed(k, HASH_SEED) as u64);
    run("xxh3_64", &|k| xxh3_64_with_seed(k, HASH_SEED));
    run("foldhash", &|k| fold.hash_one(k));
}

const BIT_FILTERS: [&str; 7] = [
    "filterstore_standard",
    "filterstore_blocked",
    "fastbloom",
    "fastbloom_fasthash",
    "sbbf",
    "xorf_bfuse8",
    "bloomfilter",
];
const COUNTING_FILTERS: [&str; 3] = ["filterstore", "filterstore_standard", "fastbloom_rs"];

fn table(r: &Results, n: usize, load_before: &str, load_after: &str) -> String {
    let cell = |v: Option<f64>, prec: usize| match v {
        Some(v) => format!("{v:.prec$}"),
        None => "-".into(),
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\npeers: n = {n} keys of 16 bytes, {BITS_PER_KEY} bits/key; load before {load_before}, after {load_after}"
    );
    let _ = writeln!(
        s,
        "{:<22} {:>3} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9}",
        "filter",
        "k",
        "insert",
        "build",
        "present",
        "absent",
        "batch_abs",
        "batch_pr",
        "FP %",
        "bits/key"
    );
    for name in BIT_FILTERS {
        let f = |fig| r.get(fig, name);
        let _ = writeln!(
            s,
            "{:<22} {:>3} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9}",
            name,
            r.k.get(name).map_or("-", |k| k.as_str()),
            cell(f(Figure::InsertNs), 1),
            cell(f(Figure::BuildNs), 1),
            cell(f(Figure::LookupPresentNs), 1),
            cell(f(Figure::LookupAbsentNs), 1),
            cell(f(Figure::LookupBatchNs), 1),
            cell(f(Figure::LookupBatchPresentNs), 1),
            cell(f(Figure::Fp).map(|x| x * 100.0), 3),
            cell(f(Figure::BitsPerKey), 2),
        );
    }
    let _ = writeln!(s, "(ns/key; insert = criterion median over builds from empty, build = one plain build; xorf: static build incl. hashing)");
    let _ = writeln!(
        s,
        "\n{:<22} {:>3} {:>9} {:>9} {:>9} {:>9} {:>8}",
        "counting filter", "k", "insert", "remove", "lookup", "build", "FP %"
    );
    for name in COUNTING_FILTERS {
        let f = |fig| r.get(fig, name);
        let _ = writeln!(
            s,
            "{:<22} {:>3} {:>9} {:>9} {:>9} {:>9} {:>8}",
            name,
            r.k.get(name).map_or("-", |k| k.as_str()),
            cell(f(Figure::CountingInsertNs), 1),
            cell(f(Figure::CountingRemoveNs), 1),
            cell(f(Figure::CountingLookupNs), 1),
            cell(f(Figure::CountingBuildNs), 1),
            cell(f(Figure::CountingFp).map(|x| x * 100.0), 3),
        );
    }
    let _ = writeln!(
        s,
        "(ns/key on present keys, filters preloaded with all n keys; filterstore = blocked layout)"
    );
    let hashes: Vec<String> = r
        .figures
        .iter()
        .filter(|((fig, _), _)| *fig == Figure::HashNs)
        .map(|((_, name), v)| format!("{name} {v:.2}"))
        .collect();
    let _ = writeln!(s, "\nhash alone, ns/key: {}", hashes.join(", "));
    s
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn env_f64(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> Result<(), ParamError> {
    let n = env_f64("PEERS_N", 10_000_000.0) as usize;
    let measure = Duration::from_secs_f64(env_f64("PEERS_MEASURE_SECS", 2.0));
    let warm_up = Duration::from_secs_f64(env_f64("PEERS_WARMUP_SECS", 0.5));
    let load_before = loadavg();
    let keys = Keys::generate(n);
    let c = Criterion::default()
        .sample_size(SAMPLES)
        .measurement_time(measure)
        .warm_up_time(warm_up)
        .nresamples(2_000)
        .without_plots()
        .configure_from_args();
    let mut b = Bench { c, group: "peers" };
    let mut r = Results::default();

    let only = std::env::var("PEERS_ONLY").unwrap_or_default();
    let run = |part: &str| only.is_empty() || only.split(',').any(|p| p == part);
    if run("hash") {
        hashes(&mut b, &mut r, &keys);
    }
    if run("standard") {
        filterstore_bits(
            &mut b,
            &mut r,
            "filterstore_standard",
            Layout::Standard,
            &keys,
        )?;
    }
    if run("blocked") {
        filterstore_bits(
            &mut b,
            &mut r,
            "filterstore_blocked",
            Layout::Blocked,
            &keys,
        )?;
    }
    if run("fastbloom") {
        fastbloom_filters(&mut b, &mut r, &keys);
    }
    if run("sbbf") {
        sbbf_filter(&mut b, &mut r, &keys);
    }
    if run("xorf") {
        xorf_filter(&mut b, &mut r, &keys);
    }
    if run("bloomfilter") {
        bloomfilter_filter(&mut b, &mut r, &keys);
    }
    if run("counting") {
        counting_filters(&mut b, &mut r, &keys)?;
    }

    b.c.final_summary();
    print!("{}", table(&r, n, &load_before, &loadavg()));
    for ((figure, filter), value) in &r.figures {
        println!(
            "RESULT {}.{} {} {}",
            figure.name(),
            filter,
            value,
            figure.unit()
        );
    }
    Ok(())
}
