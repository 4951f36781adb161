//! The large point (`FILTERSTORE_PEERS_LARGE=1`): a split-block filter of
//! at least 1 GiB (`FILTERSTORE_PEERS_LARGE_BYTES`, default 2^30) at 10
//! bits per key, its keys generated on the fly from a counter (860M keys
//! would need 14 GB as an array), built and probed twice: on 4 KiB pages
//! (`Pages::Base`) and on 2 MiB transparent huge pages (`Pages::Huge`, what
//! `BitFilter::new` chooses for a filter this large). Each is probed in
//! `LARGE_ROUNDS` (default 3) interleaved rounds: one `contains` per key
//! over 4M present and 4M absent keys, and the prefetching pipeline and
//! the partitioned batch (`BatchStrategy`) over the 4M absent keys, each
//! over the whole batch.
//!
//! RESULT lines: `large_*.filterstore_split_{4k,2m}` and
//! `ratio.batch_partitioned_vs_pipeline.large` (2 MiB pages, the default)
//! and `.large_4k`: partitioned ns per key over pipeline ns per key, the
//! median of per-round ratios.

use super::clock::Tick;
use super::harness::{env_f64, load1, Figure, Key, Results};
use filterstore::{
    BatchStrategy, BitFilter, BloomRead, FilterParams, HashSpec, Layout, Pages, ParamError,
};
use std::fmt::Write as _;
use std::hint::black_box;

/// Keys per probe batch, present and absent each.
const PROBES: usize = 4 << 20;
/// Keys generated and inserted per chunk of the build.
const CHUNK: usize = 1 << 20;

/// Key `i`: 16 bytes mixed from the counter (SplitMix64), the low bit of
/// the first byte clear for keys inserted, set for absent ones.
fn key(i: u64, absent: bool) -> Key {
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let a = mix(i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&a.to_le_bytes());
    k[8..].copy_from_slice(&mix(a ^ i).to_le_bytes());
    k[0] = (k[0] & !1) | u8::from(absent);
    k
}

/// Runs the large point; returns its summary.
pub fn run(r: &mut Results) -> Result<String, ParamError> {
    let bytes = env_f64("FILTERSTORE_PEERS_LARGE_BYTES", (1u64 << 30) as f64) as u64;
    let rounds = env_f64("LARGE_ROUNDS", 3.0) as usize;
    let n = bytes * 8 / 10;
    let p = FilterParams::with_bits_per_key(n, 10.0, Layout::SplitBlock, HashSpec::xxh64())?;
    let mut s = format!(
        "\nlarge point: split-block filter of {} MiB, n = {n} keys generated on the fly, \
         {PROBES} probes of each kind; load1 {}\n",
        p.bit_bytes() >> 20,
        load1()
    );
    let present: Vec<Key> = (0..PROBES as u64)
        .map(|i| key((i * 0x2545_f491) % n, false))
        .collect();
    let absent: Vec<Key> = (0..PROBES as u64).map(|i| key(n + i, true)).collect();
    for (name, pages) in [
        ("filterstore_split_4k", Pages::Base),
        ("filterstore_split_2m", Pages::Huge),
    ] {
        let mut f = BitFilter::with_pages(p, pages)?;
        let mut chunk = Vec::with_capacity(CHUNK);
        let mut build = 0.0;
        for start in (0..n).step_by(CHUNK) {
            chunk.clear();
            chunk.extend((start..(start + CHUNK as u64).min(n)).map(|i| key(i, false)));
            let t = Tick::now();
            f.insert_many_mut(&chunk);
            build += t.elapsed().as_nanos() as f64;
        }
        r.add(Figure::LargeBuildNs, name, &[build / n as f64]);
        let mut out = vec![false; PROBES];
        for round in 1..=rounds {
            let single = |keys: &[Key]| {
                let t = Tick::now();
                let hits = keys.iter().filter(|k| f.contains(&k[..])).count();
                black_box(hits);
                t.elapsed().as_nanos() as f64 / keys.len() as f64
            };
            r.add_round(Figure::LargeAbsentNs, name, round, &[single(&absent)]);
            r.add_round(Figure::LargePresentNs, name, round, &[single(&present)]);
            for (figure, strategy) in [
                (Figure::LargeBatchPipelineNs, BatchStrategy::Pipeline),
                (Figure::LargeBatchPartitionedNs, BatchStrategy::Partitioned),
            ] {
                let t = Tick::now();
                f.contains_many_with(&absent, &mut out, strategy);
                let ns = t.elapsed().as_nanos() as f64 / PROBES as f64;
                assert!(
                    out.iter().filter(|&&x| x).count() < PROBES / 20,
                    "FP above 5%"
                );
                r.add_round(figure, name, round, &[ns]);
            }
        }
        f.contains_many_with(&present, &mut out, BatchStrategy::Partitioned);
        assert!(out.iter().all(|&x| x), "{name}: a false negative");
    }
    for (name, suffix) in [
        ("filterstore_split_2m", ""),
        ("filterstore_split_4k", "_4k"),
    ] {
        let ratio = r.ratio(
            (Figure::LargeBatchPartitionedNs, name),
            (Figure::LargeBatchPipelineNs, name),
        );
        if let Some((m, lo, hi)) = ratio {
            let _ = writeln!(
                s,
                "# ratio.batch_partitioned_vs_pipeline.large{suffix}: median of per-round \
                 ratios {m:.3} (min {lo:.3}, max {hi:.3}); load1 {}\n\
                 RESULT ratio.batch_partitioned_vs_pipeline.large{suffix} {m} x",
                load1()
            );
        }
        for figure in [
            Figure::LargeBuildNs,
            Figure::LargeAbsentNs,
            Figure::LargePresentNs,
            Figure::LargeBatchPipelineNs,
            Figure::LargeBatchPartitionedNs,
        ] {
            if let Some(v) = r.get(figure, name) {
                let _ = writeln!(s, "{name} {:<28} {v:>8.2} ns/key", figure.name());
            }
        }
    }
    Ok(s)
}
