//! `cargo bench -p filterstore-datafusion --bench sbbf`: filterstore's
//! split-block lookup against arrow-rs's `Sbbf::check` on the same bits
//! (the filter exported with `sbbf::export_bit_filter`, so both hold one
//! bitset) and the same keys: `SBBF_N` 16-byte keys (default 1,000,000;
//! the filter is sized for them at 1%), looked up present and absent, one
//! call per key, in `SBBF_ROUNDS` interleaved rounds (default 7) whose order
//! alternates. Wall-clock time (this crate has no CPU-time clock); the load
//! average is printed beside the figures.
//!
//! Output: `RESULT lookup_{absent,present}_ns.{filterstore_split,arrow_sbbf}`,
//! `RESULT ratio.split_vs_arrow_sbbf.{absent,present} <x>` (the median over
//! rounds of our time over theirs for those keys), the measured FP (both
//! filters hold the same bits), and last `RESULT ratio.split_vs_arrow_sbbf
//! <x>`: the same median for all keys, present and absent.

use datafusion::parquet::bloom_filter::Sbbf;
use filterstore::{BitFilter, FilterParams, HashSpec, Layout};
use filterstore_datafusion::sbbf::export_bit_filter;
use std::hint::black_box;
use std::time::Instant;

type Key = [u8; 16];

/// Key `i`, mixed (SplitMix64); the low bit of the first byte marks absent keys.
fn key(i: u64, absent: bool) -> Key {
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let a = mix(i.wrapping_add(0x9e37_79b9_7f4a_7c15));
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&a.to_le_bytes());
    k[8..].copy_from_slice(&mix(a).to_le_bytes());
    k[0] = (k[0] & !1) | u8::from(absent);
    k
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn load1() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// ns per key of `hit` over `keys`, and the number of hits (kept alive).
fn time(keys: &[Key], hit: impl Fn(&Key) -> bool) -> f64 {
    let start = Instant::now();
    let n = keys.iter().filter(|k| hit(k)).count();
    black_box(n);
    start.elapsed().as_nanos() as f64 / keys.len() as f64
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return; // `cargo test --benches`: nothing to smoke-test beyond building.
    }
    let n = env("SBBF_N", 1_000_000);
    let rounds = env("SBBF_ROUNDS", 7) as usize;
    let load_before = load1();
    let p = FilterParams::for_capacity(n, 0.01, Layout::SplitBlock, HashSpec::xxh64())
        .expect("parameters");
    let present: Vec<Key> = (0..n).map(|i| key(i, false)).collect();
    let absent: Vec<Key> = (0..n).map(|i| key(i, true)).collect();
    let mut ours = BitFilter::new(p).expect("allocation");
    ours.insert_many_mut(&present);
    let theirs: Sbbf = export_bit_filter(&ours).expect("a split-block filter exports");
    // The same answers, key by key (the interop tests check this too).
    for k in present.iter().chain(&absent).step_by(97) {
        assert_eq!(ours.contains(k), theirs.check(&k[..]));
    }
    let fp = absent.iter().filter(|k| ours.contains(&k[..])).count() as f64 / n as f64;
    let mut figures: [Vec<f64>; 4] = Default::default();
    let (mut ratios, mut absent_ratios, mut present_ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let run = |which: usize| match which {
            0 => time(&absent, |k| ours.contains(k)),
            1 => time(&present, |k| ours.contains(k)),
            2 => time(&absent, |k| theirs.check(&k[..])),
            _ => time(&present, |k| theirs.check(&k[..])),
        };
        let order: [usize; 4] = if round % 2 == 0 {
            [0, 1, 2, 3]
        } else {
            [2, 3, 0, 1]
        };
        let mut t = [0.0; 4];
        for which in order {
            t[which] = run(which);
            figures[which].push(t[which]);
        }
        ratios.push((t[0] + t[1]) / (t[2] + t[3]));
        absent_ratios.push(t[0] / t[2]);
        present_ratios.push(t[1] / t[3]);
    }
    let names = [
        ("lookup_absent_ns", "filterstore_split"),
        ("lookup_present_ns", "filterstore_split"),
        ("lookup_absent_ns", "arrow_sbbf"),
        ("lookup_present_ns", "arrow_sbbf"),
    ];
    println!(
        "sbbf: n = {n} keys of 16 bytes, split-block filter of {} KiB (1% target), {rounds} rounds; \
         load1 before {load_before}, after {}",
        p.bit_bytes() >> 10,
        load1()
    );
    for ((figure, subject), v) in names.iter().zip(figures) {
        println!("RESULT {figure}.{subject} {} ns", median(v));
    }
    println!("# FP of the absent keys (both filters): {:.3}%", fp * 100.0);
    println!("RESULT fp_percent.split {} %", fp * 100.0);
    for (keys, v) in [("absent", absent_ratios), ("present", present_ratios)] {
        let (ratio, lo, hi) = spread(v);
        println!("# ratio.split_vs_arrow_sbbf.{keys}: median of per-round ratios {ratio:.3} (min {lo:.3}, max {hi:.3}); load1 {}", load1());
        println!("RESULT ratio.split_vs_arrow_sbbf.{keys} {ratio} x");
    }
    let (ratio, lo, hi) = spread(ratios);
    println!("# ratio.split_vs_arrow_sbbf: median of per-round ratios {ratio:.3} (min {lo:.3}, max {hi:.3}); load1 {}", load1());
    println!("RESULT ratio.split_vs_arrow_sbbf {ratio} x");
}

/// The median of `v`, its least and its greatest.
fn spread(v: Vec<f64>) -> (f64, f64, f64) {
    let (lo, hi) = v
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(a, b), &r| (a.min(r), b.max(r)));
    (median(v), lo, hi)
}
