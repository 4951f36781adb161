//! Whole builds from empty, one round at a time, interleaved with the
//! lookups of the `peers` bench: sbbf's insert loop (with either hash) and,
//! for each of our block layouts that runs, key-by-key `insert` (shared)
//! and `insert_mut`, the `&mut` bulk build and the shared `insert_many`.

use super::clock::Tick;
use super::harness::{Figure, Key, Keys, Results};
use super::subjects::{hash64, xxh64_parquet, HASH_SEED};
use super::BITS_PER_KEY;
use filterstore::{BitFilter, FilterParams, HashSpec, Layout, ParamError};

/// One round of whole builds from empty, interleaved with the lookups:
/// sbbf's insert loop (with either hash), and for each of our layouts that
/// runs, key-by-key `insert` and `insert_mut`, the `&mut` bulk build and
/// the shared `insert_many`.
pub fn build_round(
    r: &mut Results,
    round: usize,
    keys: &Keys,
    run: &dyn Fn(&str) -> bool,
) -> Result<(), ParamError> {
    let n = keys.n();
    let per_key = |start: Tick| start.elapsed().as_nanos() as f64 / n as f64;
    for (name, hash) in [
        ("sbbf", hash64 as fn(&Key) -> u64),
        ("sbbf_xxh64", xxh64_parquet),
    ] {
        let mut sbbf = sbbf_rs_safe::Filter::new(BITS_PER_KEY as usize, n);
        let start = Tick::now();
        keys.insert.iter().for_each(|k| {
            sbbf.insert_hash(hash(k));
        });
        r.add_round(Figure::InsertNs, name, round, &[per_key(start)]);
    }
    let layouts = [
        (
            "blocked",
            Layout::Blocked,
            [
                "filterstore_blocked",
                "filterstore_blocked_mut",
                "filterstore_blocked_bulk",
                "filterstore_blocked_many",
            ],
        ),
        (
            "split",
            Layout::SplitBlock,
            [
                "filterstore_split",
                "filterstore_split_mut",
                "filterstore_split_bulk",
                "filterstore_split_many",
            ],
        ),
    ];
    for (part, layout, [one, one_mut, bulk, many]) in layouts {
        if !run(part) {
            continue;
        }
        let params = FilterParams::with_bits_per_key(n as u64, BITS_PER_KEY, layout, spec(layout))?;
        let f = BitFilter::new(params)?;
        let start = Tick::now();
        keys.insert.iter().for_each(|k| _ = f.insert(k));
        r.add_round(Figure::InsertNs, one, round, &[per_key(start)]);
        drop(f);
        let mut f = BitFilter::new(params)?;
        let start = Tick::now();
        keys.insert.iter().for_each(|k| _ = f.insert_mut(k));
        r.add_round(Figure::InsertNs, one_mut, round, &[per_key(start)]);
        drop(f);
        let mut f = BitFilter::new(params)?;
        let start = Tick::now();
        f.insert_many_mut(&keys.insert);
        r.add_round(Figure::InsertNs, bulk, round, &[per_key(start)]);
        drop(f);
        let f = BitFilter::new(params)?;
        let start = Tick::now();
        f.insert_many(&keys.insert);
        r.add_round(Figure::InsertNs, many, round, &[per_key(start)]);
    }
    Ok(())
}

/// The hash of a filterstore subject, with the bench's seed: for the
/// blocked layout its fastest, XXH3-64 with sectorized positions (issue
/// 38), or XXH3-64 with the layout's own positions where
/// `PEERS_BLOCKED_HASH=xxh3-64`; XXH3-128 for the standard one, the
/// split-block layout's XXH64 seed 0. (`filterstore_blocked_xxh3_128` is
/// the blocked layout with XXH3-128, the hash of filters made before both.)
pub fn spec(layout: Layout) -> HashSpec {
    match layout {
        Layout::SplitBlock => HashSpec::xxh64(),
        Layout::Blocked => match std::env::var("PEERS_BLOCKED_HASH").as_deref() {
            Ok("xxh3-64") => HashSpec::xxh3_64(HASH_SEED),
            Ok("xxh3-64-sectorized") | Err(_) => HashSpec::xxh3_64_sectorized(HASH_SEED),
            Ok(other) => panic!(
                "PEERS_BLOCKED_HASH={other}: expected xxh3-64 or xxh3-64-sectorized (the default)"
            ),
        },
        Layout::Standard => HashSpec::xxh3(HASH_SEED),
    }
}
