//! The `u64` ids section (`PEERS_ONLY=ids`, on by default): the same n as
//! the main section, but keys that are 8-byte ids (`u64::to_le_bytes` of
//! seeded random ids; ids inserted have bit 0 clear, absent ids set, so
//! every hit on an absent id is a false positive). Subjects: our blocked
//! and split-block layouts (and a frozen copy of the blocked filter,
//! `_frozen`, lookups only) against `sbbf-rs-safe` fed `xxh3_64` of the id
//! (`sbbf`) and XXH64 seed 0 (`sbbf_xxh64`, the split-block filter's own
//! bits).
//!
//! Each of `PEERS_ROUNDS` rounds measures one `contains` per id, present
//! and absent (criterion, as the main section), then whole builds from
//! empty timed once each: sbbf's insert loop (`&mut`), and per layout ours
//! key by key shared (`insert`), key by key exclusive (`insert_mut`) and
//! in one shared batch (`insert_many`, `_many`), the blocked layout's key by
//! key shared insert from two threads at once (`_2threads`, wall clock), and
//! the floor of a shared
//! insert (`floor_locked5`, `floor_locked1`: [`locked_floor`]). RESULT lines
//! `ids_*.<subject>`; the ratios are in `ratios.rs`.

use super::clock::Tick;
use super::harness::{Bench, Figure, Results};
use super::subjects::HASH_SEED;
use super::BITS_PER_KEY;
use filterstore::{BitFilter, FilterParams, FrozenFilter, HashSpec, Layout, ParamError};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{RngCore, SeedableRng};
use std::fmt::Write as _;
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// An id, as the bytes a filter hashes.
type Id = [u8; 8];

/// The subjects of the lookups, in table order.
const LOOKUPS: [&str; 5] = [
    "filterstore_blocked",
    "filterstore_blocked_frozen",
    "filterstore_split",
    "sbbf",
    "sbbf_xxh64",
];

/// Every subject of the table (inserts included), in its order.
const ROWS: [&str; 12] = [
    "filterstore_blocked",
    "filterstore_blocked_frozen",
    "filterstore_blocked_2threads",
    "filterstore_blocked_mut",
    "filterstore_blocked_many",
    "filterstore_split",
    "filterstore_split_mut",
    "filterstore_split_many",
    "sbbf",
    "sbbf_xxh64",
    "floor_locked5",
    "floor_locked1",
];

/// The floor of a shared key-by-key insert: the id's hash (sbbf's), its
/// 512-bit block in an array of the blocked filter's size, and `ors` locked
/// ORs (`fetch_or`) of one bit into words of that block, nothing else. A
/// new key's k = 7 positions fall in 8(1 − (7/8)^7) ≈ 4.86 distinct words
/// of its block on average, and x86-64 has no atomic read-modify-write of
/// more than one word (16 bytes at most, `cmpxchg16b`, itself locked), so
/// an insert into a filter other threads write needs about five locked
/// instructions, each a full barrier: `floor_locked5`. `floor_locked1` is
/// the floor of any design with one locked instruction per key (a lock per
/// block, which every writer would then have to take).
fn locked_floor(keys: &[Id], words: &[std::sync::atomic::AtomicU64], ors: u32) {
    use std::sync::atomic::Ordering;
    let blocks = (words.len() / 8) as u64;
    for id in keys {
        let h = sbbf_hash(id);
        let base = (((h as u128 * u128::from(blocks)) >> 64) as usize) * 8;
        for i in 0..ors {
            let w = base + ((h >> (3 * i)) & 7) as usize;
            words[w].fetch_or(1 << ((h >> (16 + 6 * i)) & 63), Ordering::Relaxed);
        }
    }
}

fn sbbf_hash(id: &Id) -> u64 {
    xxh3_64_with_seed(id, HASH_SEED)
}

fn xxh64(id: &Id) -> u64 {
    HashSpec::xxh64().hash(id).h1
}

/// `n` ids inserted (in insertion order and shuffled) and `n` absent.
struct Ids {
    insert: Vec<Id>,
    present: Vec<Id>,
    absent: Vec<Id>,
}

impl Ids {
    fn generate(n: usize) -> Ids {
        let gen = |seed: u64, low_bit: u64| -> Vec<Id> {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..n)
                .map(|_| ((rng.next_u64() & !1) | low_bit).to_le_bytes())
                .collect()
        };
        let insert = gen(11, 0);
        let mut present = insert.clone();
        present.shuffle(&mut StdRng::seed_from_u64(13));
        Ids {
            insert,
            present,
            absent: gen(12, 1),
        }
    }
}

/// An sbbf subject: its name, the filter, the hash it is fed.
type Sbbf = (&'static str, sbbf_rs_safe::Filter, fn(&Id) -> u64);

/// The filters looked up: ours and sbbf's, each holding every id.
struct Built {
    ours: [(&'static str, BitFilter); 2],
    /// A copy of the blocked filter, frozen.
    frozen: FrozenFilter,
    sbbf: [Sbbf; 2],
}

fn params(n: usize, layout: Layout) -> Result<FilterParams, ParamError> {
    FilterParams::with_bits_per_key(n as u64, BITS_PER_KEY, layout, super::builds::spec(layout))
}

fn build(ids: &Ids, r: &mut Results) -> Result<Built, ParamError> {
    let n = ids.insert.len();
    let mut ours = Vec::new();
    for (name, layout) in [
        ("filterstore_blocked", Layout::Blocked),
        ("filterstore_split", Layout::SplitBlock),
    ] {
        let mut f = BitFilter::new(params(n, layout)?)?;
        f.insert_many_mut(&ids.insert);
        ours.push((name, f));
    }
    let mut sbbf = Vec::new();
    for (name, hash) in [("sbbf", sbbf_hash as fn(&Id) -> u64), ("sbbf_xxh64", xxh64)] {
        let mut f = sbbf_rs_safe::Filter::new(BITS_PER_KEY as usize, n);
        ids.insert.iter().for_each(|id| _ = f.insert_hash(hash(id)));
        sbbf.push((name, f, hash));
    }
    let (Ok(ours), Ok(sbbf)) = (ours.try_into(), sbbf.try_into()) else {
        unreachable!("two of each")
    };
    let ours: [(&'static str, BitFilter); 2] = ours;
    let frozen = ours[0].1.try_clone()?.freeze();
    let built = Built { ours, frozen, sbbf };
    for name in LOOKUPS {
        let (found, fp) = (
            built.hits(name, &ids.present),
            built.hits(name, &ids.absent),
        );
        assert_eq!(found, n as u64, "{name}: false negatives");
        r.add(Figure::IdsFp, name, &[fp as f64 / n as f64]);
    }
    Ok(built)
}

impl Built {
    /// How many of `ids` subject `name` reports present, one lookup each.
    fn hits(&self, name: &str, ids: &[Id]) -> u64 {
        if name == "filterstore_blocked_frozen" {
            return ids
                .iter()
                .map(|id| u64::from(self.frozen.contains(id)))
                .sum();
        }
        for (n, f) in &self.ours {
            if *n == name {
                return ids.iter().map(|id| u64::from(f.contains(id))).sum();
            }
        }
        for (n, f, hash) in &self.sbbf {
            if *n == name {
                return ids
                    .iter()
                    .map(|id| u64::from(f.contains_hash(hash(id))))
                    .sum();
            }
        }
        0
    }
}

/// One round of whole builds from empty, each timed once.
fn build_round(r: &mut Results, round: usize, ids: &Ids) -> Result<(), ParamError> {
    let n = ids.insert.len();
    let keys = &ids.insert;
    let per_key = |start: Tick| start.elapsed().as_nanos() as f64 / n as f64;
    for (name, hash) in [("sbbf", sbbf_hash as fn(&Id) -> u64), ("sbbf_xxh64", xxh64)] {
        let mut f = sbbf_rs_safe::Filter::new(BITS_PER_KEY as usize, n);
        let start = Tick::now();
        keys.iter().for_each(|id| _ = f.insert_hash(hash(id)));
        r.add_round(Figure::IdsInsertNs, name, round, &[per_key(start)]);
    }
    let words: Vec<std::sync::atomic::AtomicU64> = (0..params(n, Layout::Blocked)?.m() / 64)
        .map(|_| std::sync::atomic::AtomicU64::new(0))
        .collect();
    for (name, ors) in [("floor_locked5", 5), ("floor_locked1", 1)] {
        words
            .iter()
            .for_each(|w| w.store(0, std::sync::atomic::Ordering::Relaxed));
        let start = Tick::now();
        locked_floor(keys, &words, ors);
        r.add_round(Figure::IdsInsertNs, name, round, &[per_key(start)]);
    }
    for (layout, [one, one_mut, many]) in [
        (
            Layout::Blocked,
            [
                "filterstore_blocked",
                "filterstore_blocked_mut",
                "filterstore_blocked_many",
            ],
        ),
        (
            Layout::SplitBlock,
            [
                "filterstore_split",
                "filterstore_split_mut",
                "filterstore_split_many",
            ],
        ),
    ] {
        let p = params(n, layout)?;
        let f = BitFilter::new(p)?;
        let start = Tick::now();
        keys.iter().for_each(|id| _ = f.insert(id));
        r.add_round(Figure::IdsInsertNs, one, round, &[per_key(start)]);
        if layout == Layout::Blocked {
            let ns = two_threads(&BitFilter::new(p)?, keys);
            r.add_round(
                Figure::IdsInsertNs,
                "filterstore_blocked_2threads",
                round,
                &[ns],
            );
        }
        let mut f = BitFilter::new(p)?;
        let start = Tick::now();
        keys.iter().for_each(|id| _ = f.insert_mut(id));
        r.add_round(Figure::IdsInsertNs, one_mut, round, &[per_key(start)]);
        let f = BitFilter::new(p)?;
        let start = Tick::now();
        f.insert_many(keys);
        r.add_round(Figure::IdsInsertNs, many, round, &[per_key(start)]);
    }
    Ok(())
}

/// Two threads inserting half of `keys` each, key by key, into `f` at
/// once: wall-clock nanoseconds per key of the whole (the threads' CPU
/// clocks would leave out the time one waits for the other's lock line).
fn two_threads(f: &BitFilter, keys: &[Id]) -> f64 {
    let (a, b) = keys.split_at(keys.len() / 2);
    let start = std::time::Instant::now();
    std::thread::scope(|s| {
        for half in [a, b] {
            s.spawn(move || half.iter().for_each(|id| _ = f.insert(id)));
        }
    });
    start.elapsed().as_nanos() as f64 / keys.len() as f64
}

/// Runs the section: returns its table.
pub fn run(b: &mut Bench, r: &mut Results, n: usize, rounds: usize) -> Result<String, ParamError> {
    let ids = Ids::generate(n);
    let built = build(&ids, r)?;
    for round in 1..=rounds {
        // Each round starts at another subject (see the main section).
        let start = (round - 1) * LOOKUPS.len() / rounds.max(1);
        for i in 0..LOOKUPS.len() {
            let name = LOOKUPS[(start + i) % LOOKUPS.len()];
            for (figure, set, which) in [
                (Figure::IdsLookupPresentNs, &ids.present, "present"),
                (Figure::IdsLookupAbsentNs, &ids.absent, "absent"),
            ] {
                let samples = b.per_key(
                    &format!("ids_{which}/{name}/round{round}"),
                    &mut (),
                    set,
                    usize::MAX,
                    |_, seg| built.hits(name, seg),
                    |_, _, _| {},
                );
                r.add_round(figure, name, round, &samples);
            }
        }
        build_round(r, round, &ids)?;
    }
    Ok(table(r, n))
}

fn table(r: &Results, n: usize) -> String {
    let mut s = format!(
        "\nu64 ids: n = {n} ids of 8 bytes, {BITS_PER_KEY} bits/key\n\
         subject                     insert  present   absent     FP %  (ns/key)\n"
    );
    for name in ROWS {
        let get = |f| {
            r.get(f, name)
                .map_or("-".to_string(), |v| format!("{v:.1}"))
        };
        let fp = r
            .get(Figure::IdsFp, name)
            .map_or("-".to_string(), |v| format!("{:.3}", 100.0 * v));
        let _ = writeln!(
            s,
            "{name:<26} {:>7} {:>8} {:>8} {fp:>8}",
            get(Figure::IdsInsertNs),
            get(Figure::IdsLookupPresentNs),
            get(Figure::IdsLookupAbsentNs),
        );
    }
    s.push_str(
        "insert: whole builds from empty, one per round: `insert` key by key (shared), \
         `_mut` insert_mut key by key, `_many` one insert_many, `_2threads` two threads \
         inserting key by key into one filter (wall clock per key of the whole); sbbf: its \
         insert loop; floor_locked5 (1): the hash, the block and 5 (1) locked ORs per key, \
         nothing else.\n",
    );
    s
}
