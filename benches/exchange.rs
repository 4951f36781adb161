//! `cargo bench --bench exchange`: compressed filter messages.
//!
//! * Sizes on the simulation cases of Mitzenmacher's "Compressed Bloom
//!   Filters" (n = 10,000 keys, 1,000 seeded random filters per case; the
//!   paper used 100,000 trials with an arithmetic coder: mean 9,920 bytes, max
//!   9,971 for m = 140,000, k = 2; mean 19,805 for m = 480,000, k = 3). Payload
//!   only, as in the paper; the message header is reported separately.
//! * Encode and decode throughput of whole messages (`encode_message`,
//!   `decode_message(..).filter()`: the entropy coder, the frame and its CRC,
//!   the receiver's filter), in MB of uncompressed filter per second, on the
//!   filter a semi-join actually sends: 1M keys sized by the optimiser for a
//!   2% false-positive rate (m/n ≈ 49.5, k = 1, about 2% of bits set); and
//!   the encoding of a half-full lookup-sized filter, which codes to about
//!   its plain size. Timed on the thread's CPU clock (`common/clock.rs`:
//!   time spent waiting for a CPU on a shared machine is left out), the
//!   subjects interleaved in `ROUNDS` rounds; the median round, with the
//!   load average beside it.
//! * Whole-message bits per key of that 2% filter against the lower bound
//!   log2(1/0.02) = 5.64, with its measured false-positive rate.
//!
//! Uses the public API only: no feature beyond the defaults. Under
//! `cargo test` (no `--bench` argument) it runs one round on 100,000 keys.
//! Ends with `RESULT <name> <value> <unit>` lines.

#[path = "common/clock.rs"]
mod clock;

use filterstore::{build_message, compressed_size_estimate, decode_message, encode_message};
use filterstore::{BitFilter, BloomRead, FilterParams, HashSpec, Layout};
use filterstore::{CodecChoice, MessageTarget, MESSAGE_OVERHEAD};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::hint::black_box;

fn paper_case(m: u64, k: u32, filters: u64) -> (f64, u64) {
    let mut rng = StdRng::seed_from_u64(m ^ k as u64);
    let mut total = 0u64;
    let mut max = 0u64;
    for _ in 0..filters {
        let p = FilterParams::new(Layout::Standard, m, k, HashSpec::xxh3(rng.gen())).unwrap();
        let f = BitFilter::new(p).unwrap();
        for _ in 0..10_000 {
            f.insert(&rng.gen::<[u8; 16]>());
        }
        // The payload of the coded message is the entropy coder's output.
        let msg = encode_message(&f, 10_000, 1, CodecChoice::Auto).unwrap();
        assert_eq!(
            decode_message(&msg).unwrap().descriptor.codec.name(),
            "rans"
        );
        let len = (msg.len() - MESSAGE_OVERHEAD) as u64;
        total += len;
        max = max.max(len);
    }
    (total as f64 / filters as f64, max)
}

fn keys(n: u64, tag: u8) -> Vec<[u8; 16]> {
    let mut rng = StdRng::seed_from_u64(tag as u64);
    (0..n)
        .map(|_| {
            let mut k: [u8; 16] = rng.gen();
            k[0] = tag;
            k
        })
        .collect()
}

/// Interleaved rounds of the timed subjects.
const ROUNDS: usize = 15;

/// Seconds of `op` on this thread's clock.
fn time(op: impl FnOnce()) -> f64 {
    let t = clock::Tick::now();
    op();
    t.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn main() {
    let benching = std::env::args().any(|a| a == "--bench");
    let (n, rounds, paper_filters) = if benching {
        (1_000_000u64, ROUNDS, 1_000)
    } else {
        (100_000, 1, 10)
    };
    println!(
        "load average {} at the start; clock: {}",
        loadavg(),
        clock::source()
    );
    let mut results: Vec<(String, f64, &str)> = Vec::new();

    let (mean_140, max_140) = paper_case(140_000, 2, paper_filters);
    println!("paper case m=140000 k=2: mean {mean_140:.1} bytes, max {max_140} (paper: mean 9920, max 9971, budget 10000)");
    let (mean_480, max_480) = paper_case(480_000, 3, paper_filters);
    println!("paper case m=480000 k=3: mean {mean_480:.1} bytes, max {max_480} (paper: mean 19805, max 19865, budget 20000)");
    results.push((
        "compressed_bytes_mean.paper_140000_2".into(),
        mean_140,
        "bytes",
    ));
    results.push((
        "compressed_bytes_max.paper_140000_2".into(),
        max_140 as f64,
        "bytes",
    ));
    results.push((
        "compressed_bytes_mean.paper_480000_3".into(),
        mean_480,
        "bytes",
    ));
    results.push((
        "compressed_bytes_max.paper_480000_3".into(),
        max_480 as f64,
        "bytes",
    ));

    // The filter a semi-join sends: 1M keys, 2% target.
    let present = keys(n, 1);
    let (msg, filter) =
        build_message(&present, MessageTarget::Fp(0.02), HashSpec::xxh3(42), 1).unwrap();
    let absent = keys(n, 2);
    let fp = absent.iter().filter(|k| filter.contains(&k[..])).count() as f64 / n as f64;
    let bits_per_key = msg.len() as f64 * 8.0 / n as f64;
    let bound = (1.0f64 / 0.02).log2();
    println!(
        "2% filter of {n} keys: m/n = {:.1}, k = {}, message {} bytes = {bits_per_key:.3} bits/key ({:.3}× the bound {bound:.2}), measured FP {:.3}%",
        filter.params().m() as f64 / n as f64,
        filter.params().k(),
        msg.len(),
        bits_per_key / bound,
        fp * 100.0
    );
    results.push(("transmit_bits_per_key.fp2pct".into(), bits_per_key, "bits"));
    results.push(("transmit_fp.fp2pct".into(), fp, "fraction"));
    results.push(("header_bytes".into(), MESSAGE_OVERHEAD as f64, "bytes"));

    // A half-full, lookup-sized filter (10 bits/key): coding gains nothing.
    let half = BitFilter::new(
        FilterParams::with_bits_per_key(n, 10.0, Layout::Standard, HashSpec::xxh3(7)).unwrap(),
    )
    .unwrap();
    for k in &present {
        half.insert(k);
    }

    // Interleaved rounds: encode and decode the 2% message, encode the
    // half-full one.
    let (mut enc, mut dec, mut henc) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        enc.push(time(|| {
            black_box(encode_message(black_box(&filter), n, 1, CodecChoice::Auto).unwrap());
        }));
        dec.push(time(|| {
            black_box(decode_message(black_box(&msg)).unwrap().filter().unwrap());
        }));
        henc.push(time(|| {
            black_box(encode_message(black_box(&half), n, 1, CodecChoice::Auto).unwrap());
        }));
    }
    let spread = |v: &[f64], mb: f64| {
        let lo = mb / v.iter().copied().fold(0.0, f64::max);
        let hi = mb / v.iter().copied().fold(f64::INFINITY, f64::min);
        format!("{lo:.0}–{hi:.0}")
    };
    let mb = filter.params().m() as f64 / 8.0 / 1e6;
    let (enc_s, dec_s) = (median(enc.clone()), median(dec.clone()));
    println!(
        "messages of the 2% filter ({mb:.1} MB uncompressed), median of {rounds} rounds: encode {:.0} MB/s ({}), decode {:.0} MB/s ({})",
        mb / enc_s,
        spread(&enc, mb),
        mb / dec_s,
        spread(&dec, mb)
    );
    results.push(("encode_mb_per_s".into(), mb / enc_s, "MB/s"));
    results.push(("decode_mb_per_s".into(), mb / dec_s, "MB/s"));

    let hp = *half.params();
    let hmb = hp.m() as f64 / 8.0 / 1e6;
    let henc_s = median(henc.clone());
    let full_msg = encode_message(&half, n, 1, CodecChoice::Auto).unwrap();
    println!(
        "half-full filter ({hmb:.2} MB): encode {:.0} MB/s ({}); coded about {} bytes vs plain {}: message sent as {}",
        hmb / henc_s,
        spread(&henc, hmb),
        compressed_size_estimate(hp.m(), half.count_ones()),
        hp.bit_bytes(),
        decode_message(&full_msg).unwrap().descriptor.codec.name()
    );
    results.push(("encode_mb_per_s.half_full".into(), hmb / henc_s, "MB/s"));
    println!("load average {} at the end", loadavg());

    println!();
    for (name, value, unit) in results {
        println!("RESULT {name} {value:.4} {unit}");
    }
}
