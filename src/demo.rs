//! `filterstore demo`: the end-to-end tour a newcomer runs first.
//!
//! Each section builds on the library's public API only, prints what it did
//! and the figures it measured, and finishes in seconds.

use crate::params::FilterParams;
use crate::{BitFilter, HashSpec, Layout};
use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

/// Runs the demo. `db` names a directory for the on-disk parts; a temporary
/// directory is used (and removed) when it is `None`.
pub fn run(db: Option<PathBuf>) -> Result<(), Box<dyn Error>> {
    let _ = db;
    println!("filterstore demo\n================\n");
    core_filters()?;
    Ok(())
}

/// 16-byte keys: a counter and a tag that keeps the absent keys disjoint from
/// the present ones.
fn key(i: u64, tag: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.to_le_bytes());
    k[8..].copy_from_slice(&tag.to_le_bytes());
    k
}

fn ns_per(start: Instant, n: u64) -> f64 {
    start.elapsed().as_nanos() as f64 / n as f64
}

/// Section 1: both layouts sized for 1% on one million keys, measured.
fn core_filters() -> Result<(), Box<dyn Error>> {
    const N: u64 = 1_000_000;
    const TARGET: f64 = 0.01;
    println!(
        "1. In-memory filters: {N} keys of 16 bytes, sized for a {TARGET} false-positive rate"
    );
    println!(
        "   {:<9} {:>10} {:>3} {:>9} {:>11} {:>11} {:>10} {:>10} {:>10}",
        "layout",
        "m (bits)",
        "k",
        "bits/key",
        "FP theory",
        "FP measured",
        "insert ns",
        "lookup ns",
        "batch ns"
    );
    for layout in [Layout::Standard, Layout::Blocked] {
        let params = FilterParams::for_capacity(N, TARGET, layout, HashSpec::random())?;
        let filter = BitFilter::new(params)?;
        let t = Instant::now();
        for i in 0..N {
            filter.insert(&key(i, 0));
        }
        let insert_ns = ns_per(t, N);
        let absent: Vec<[u8; 16]> = (0..N).map(|i| key(i, 1)).collect();
        let t = Instant::now();
        let false_positives = absent.iter().filter(|k| filter.contains(&k[..])).count();
        let lookup_ns = ns_per(t, N);
        let t = Instant::now();
        let batched = filter.contains_many(&absent);
        let batch_ns = ns_per(t, N);
        let batched_fp = batched.iter().filter(|b| **b).count();
        if batched_fp != false_positives {
            return Err("batched and single lookups disagree".into());
        }
        let present_missing = (0..N).filter(|&i| !filter.contains(&key(i, 0))).count();
        if present_missing != 0 {
            return Err(format!("{present_missing} false negatives").into());
        }
        println!(
            "   {:<9} {:>10} {:>3} {:>9.2} {:>10.3}% {:>10.3}% {:>10.1} {:>10.1} {:>10.1}",
            layout.name(),
            params.m(),
            params.k(),
            params.m() as f64 / N as f64,
            params.expected_fp(N) * 100.0,
            false_positives as f64 / N as f64 * 100.0,
            insert_ns,
            lookup_ns,
            batch_ns
        );
    }
    println!("   Every inserted key was found again: a Bloom filter never gives a false negative.");
    println!("   The blocked layout spends a few more bits to reach the same rate, and answers from one cache line.\n");
    Ok(())
}
