//! The equal-FP table: every subject sized for a 1% target by its own rule
//! (ours by `FilterParams::for_capacity` and each layout's model; fastbloom
//! and bloomfilter by their false-positive constructors; `sbbf-rs-safe`
//! with the bytes our split-block sizing chose, since it is the same filter
//! under the same model; xorf's BinaryFuse8 is fixed at about 9 bits per
//! key and 0.39%), holding the same n keys: bits per key, the measured FP
//! rate over all n absent keys, and ns per lookup of absent and present
//! keys side by side (one criterion benchmark each, after the main rounds).

use super::harness::{Bench, Figure, Keys, Results};
use super::subjects::{hash64, Dynamic, Lookup, HASH_SEED};
use super::Key;
use filterstore::{BitFilter, FilterParams, HashSpec, Layout, ParamError};
use std::fmt::Write as _;

/// The subjects of the table, in its order.
const SUBJECTS: [&str; 7] = [
    "filterstore_standard",
    "filterstore_blocked",
    "filterstore_split",
    "fastbloom_fasthash",
    "sbbf",
    "bloomfilter",
    "xorf_bfuse8",
];

/// Builds every subject for a 1% target with all keys, measures it, and
/// returns the table (its RESULT lines are `fp1_*.<subject>`).
pub fn run(b: &mut Bench, r: &mut Results, keys: &Keys) -> Result<String, ParamError> {
    let n = keys.n();
    let mut split_bytes = 0;
    for name in SUBJECTS {
        let f: Box<dyn Lookup> = match name {
            "filterstore_standard" | "filterstore_blocked" | "filterstore_split" => {
                let layout = match name {
                    "filterstore_standard" => Layout::Standard,
                    "filterstore_blocked" => Layout::Blocked,
                    _ => Layout::SplitBlock,
                };
                let spec = match layout {
                    Layout::SplitBlock => HashSpec::xxh64(),
                    Layout::Blocked => super::builds::spec(Layout::Blocked),
                    Layout::Standard => HashSpec::xxh3(HASH_SEED),
                };
                let p = FilterParams::for_capacity(n as u64, 0.01, layout, spec)?;
                let mut f = BitFilter::new(p)?;
                f.insert_many_mut(&keys.insert);
                if layout == Layout::SplitBlock {
                    split_bytes = (p.m() / 8) as usize;
                }
                Box::new(f)
            }
            "fastbloom_fasthash" => filled(
                fastbloom::BloomFilter::with_false_pos(0.01)
                    .hasher(foldhash::fast::FixedState::with_seed(HASH_SEED))
                    .expected_items(n),
                keys,
            ),
            "sbbf" => {
                let f = sbbf_rs_safe::Filter::from_bytes(&vec![0u8; split_bytes])
                    .expect("whole 32-byte buckets");
                filled(f, keys)
            }
            "bloomfilter" => {
                let mut seed = [0u8; 32];
                seed[..8].copy_from_slice(&HASH_SEED.to_le_bytes());
                let f = bloomfilter::Bloom::<Key>::new_for_fp_rate_with_seed(n, 0.01, &seed)
                    .expect("valid sizes");
                filled(f, keys)
            }
            _ => {
                let hashes: Vec<u64> = keys.insert.iter().map(hash64).collect();
                Box::new(xorf::BinaryFuse8::try_from(&hashes).expect("BinaryFuse8 build"))
            }
        };
        measure(b, r, name, keys, f.as_ref());
    }
    Ok(table(r))
}

/// `f` holding every key.
fn filled<F: Dynamic + 'static>(mut f: F, keys: &Keys) -> Box<dyn Lookup> {
    keys.insert.iter().for_each(|k| f.insert(k));
    Box::new(f)
}

/// Bits per key, FP over all absent keys (no false negative: asserted),
/// and one criterion benchmark of absent and of present lookups.
fn measure(b: &mut Bench, r: &mut Results, name: &'static str, keys: &Keys, f: &dyn Lookup) {
    assert_eq!(
        f.hits(&keys.present),
        keys.n() as u64,
        "{name}: false negatives"
    );
    let fp = f.hits(&keys.absent) as f64 / keys.absent.len() as f64;
    r.add(Figure::Fp1Fp, name, &[fp]);
    r.add(
        Figure::Fp1BitsPerKey,
        name,
        &[f.bits() as f64 / keys.n() as f64],
    );
    for (figure, set, which) in [
        (Figure::Fp1AbsentNs, &keys.absent, "absent"),
        (Figure::Fp1PresentNs, &keys.present, "present"),
    ] {
        let id = format!("fp1_{which}/{name}");
        let samples = b.per_key(
            &id,
            &mut (),
            set,
            usize::MAX,
            |_, seg| f.hits(seg),
            |_, _, _| {},
        );
        r.add(figure, name, &samples);
    }
}

fn table(r: &Results) -> String {
    let mut s = String::from(
        "\nequal FP: every subject sized for a 1% target by its own rule\n\
         subject                 bits/key     FP %   absent  present (ns/key)\n",
    );
    for name in SUBJECTS {
        let get = |f| r.get(f, name).unwrap_or(f64::NAN);
        let _ = writeln!(
            s,
            "{name:<22} {:>9.2} {:>8.3} {:>8.1} {:>8.1}",
            get(Figure::Fp1BitsPerKey),
            100.0 * get(Figure::Fp1Fp),
            get(Figure::Fp1AbsentNs),
            get(Figure::Fp1PresentNs),
        );
    }
    s
}
