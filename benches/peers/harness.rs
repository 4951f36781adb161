//! The measuring side of the `peers` bench: key sets, a criterion driver that
//! returns per-key timings, the collected figures and their printout.

use crate::clock::Tick;
use criterion::Criterion;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{RngCore, SeedableRng};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::hint::black_box;
use std::time::Duration;

/// Every key is 16 bytes.
pub type Key = [u8; 16];

/// Criterion samples per benchmark (criterion's minimum is 10).
pub const SAMPLES: usize = 10;

/// The key sets: `insert` in insertion order, `present` the same keys
/// shuffled, `absent` keys that were never inserted.
pub struct Keys {
    pub insert: Vec<Key>,
    pub present: Vec<Key>,
    pub absent: Vec<Key>,
}

impl Keys {
    /// `n` keys of each kind from seeded RNGs. Inserted keys have the low bit
    /// of their first byte clear and absent keys have it set, so the two sets
    /// are disjoint by construction: every hit on an absent key is a false
    /// positive.
    pub fn generate(n: usize) -> Keys {
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

    pub fn n(&self) -> usize {
        self.insert.len()
    }
}

/// What a figure measures; `name` is its key in the RESULT lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Figure {
    InsertNs,
    LookupPresentNs,
    LookupAbsentNs,
    LookupBatchNs,
    LookupBatchPresentNs,
    Fp,
    BitsPerKey,
    BuildNs,
    HashNs,
    CountingInsertNs,
    CountingRemoveNs,
    CountingLookupNs,
    CountingBuildNs,
    CountingFp,
    /// The equal-FP table (`equal_fp.rs`).
    Fp1BitsPerKey,
    Fp1Fp,
    Fp1AbsentNs,
    Fp1PresentNs,
    /// The `u64` ids section (`ids.rs`).
    IdsInsertNs,
    IdsLookupPresentNs,
    IdsLookupAbsentNs,
    IdsFp,
    /// The large point (`large.rs`).
    LargeBuildNs,
    LargeAbsentNs,
    LargePresentNs,
    LargeBatchPipelineNs,
    LargeBatchPartitionedNs,
}

impl Figure {
    pub fn name(self) -> &'static str {
        match self {
            Figure::InsertNs => "insert_ns",
            Figure::LookupPresentNs => "lookup_present_ns",
            Figure::LookupAbsentNs => "lookup_absent_ns",
            Figure::LookupBatchNs => "lookup_batch_ns",
            Figure::LookupBatchPresentNs => "lookup_batch_present_ns",
            Figure::Fp => "fp",
            Figure::BitsPerKey => "bits_per_key",
            Figure::BuildNs => "build_ns",
            Figure::HashNs => "hash_ns",
            Figure::CountingInsertNs => "counting_insert_ns",
            Figure::CountingRemoveNs => "counting_remove_ns",
            Figure::CountingLookupNs => "counting_lookup_ns",
            Figure::CountingBuildNs => "counting_build_ns",
            Figure::CountingFp => "counting_fp",
            Figure::Fp1BitsPerKey => "fp1_bits_per_key",
            Figure::Fp1Fp => "fp1_fp",
            Figure::Fp1AbsentNs => "fp1_lookup_absent_ns",
            Figure::Fp1PresentNs => "fp1_lookup_present_ns",
            Figure::IdsInsertNs => "ids_insert_ns",
            Figure::IdsLookupPresentNs => "ids_lookup_present_ns",
            Figure::IdsLookupAbsentNs => "ids_lookup_absent_ns",
            Figure::IdsFp => "ids_fp",
            Figure::LargeBuildNs => "large_build_ns",
            Figure::LargeAbsentNs => "large_lookup_absent_ns",
            Figure::LargePresentNs => "large_lookup_present_ns",
            Figure::LargeBatchPipelineNs => "large_batch_pipeline_ns",
            Figure::LargeBatchPartitionedNs => "large_batch_partitioned_ns",
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            Figure::Fp | Figure::CountingFp | Figure::Fp1Fp | Figure::IdsFp => "fraction",
            Figure::BitsPerKey | Figure::Fp1BitsPerKey => "bits",
            _ => "ns",
        }
    }
}

/// Every measurement, as samples per (figure, filter); a figure's value is
/// the median of its samples (timed figures: criterion samples of ns/key,
/// from one or more rounds; the others: a single value).
#[derive(Default)]
pub struct Results {
    samples: BTreeMap<(Figure, &'static str), Vec<f64>>,
    /// The median of each (figure, filter) per interleaved round, for ratios.
    rounds: BTreeMap<(Figure, &'static str), BTreeMap<usize, f64>>,
    k: BTreeMap<&'static str, String>,
}

impl Results {
    pub fn add(&mut self, figure: Figure, filter: &'static str, samples: &[f64]) {
        self.samples
            .entry((figure, filter))
            .or_default()
            .extend_from_slice(samples);
    }

    /// Records the samples of one round: pooled as [`Results::add`], and
    /// their median kept for the per-round ratios.
    pub fn add_round(
        &mut self,
        figure: Figure,
        filter: &'static str,
        round: usize,
        samples: &[f64],
    ) {
        self.add(figure, filter, samples);
        if let Some(m) = median(samples) {
            self.rounds
                .entry((figure, filter))
                .or_default()
                .insert(round, m);
        }
    }

    /// The per-round ratios `a / b` (rounds where both were measured):
    /// their median, minimum and maximum.
    pub fn ratio(
        &self,
        a: (Figure, &'static str),
        b: (Figure, &'static str),
    ) -> Option<(f64, f64, f64)> {
        let (ra, rb) = (self.rounds.get(&a)?, self.rounds.get(&b)?);
        let ratios: Vec<f64> = ra
            .iter()
            .filter_map(|(round, x)| Some(x / rb.get(round)?))
            .collect();
        let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = ratios.iter().copied().fold(0.0, f64::max);
        Some((median(&ratios)?, lo, hi))
    }

    pub fn set_k(&mut self, filter: &'static str, k: String) {
        self.k.insert(filter, k);
    }

    pub fn get(&self, figure: Figure, filter: &'static str) -> Option<f64> {
        median(self.samples.get(&(figure, filter))?)
    }

    /// `RESULT <figure>.<filter> <value> <unit>`, one line per figure.
    pub fn result_lines(&self) -> String {
        let mut s = String::new();
        for &(figure, filter) in self.samples.keys() {
            if let Some(v) = self.get(figure, filter) {
                let _ = writeln!(
                    s,
                    "RESULT {}.{} {} {}",
                    figure.name(),
                    filter,
                    v,
                    figure.unit()
                );
            }
        }
        s
    }

    /// The human-readable summary printed before the RESULT lines.
    pub fn table(
        &self,
        bit_filters: &[&'static str],
        counting: &[&'static str],
        header: &str,
    ) -> String {
        use Figure::*;
        let mut s = format!("\n{header}\n");
        let bit_columns = [
            Column::ns("insert", InsertNs),
            Column::ns("build", BuildNs),
            Column::ns("present", LookupPresentNs),
            Column::ns("absent", LookupAbsentNs),
            Column::ns("batch_abs", LookupBatchNs),
            Column::ns("batch_pre", LookupBatchPresentNs),
            Column::percent("FP %", Fp),
            Column::new("bits/key", BitsPerKey, 1.0, 2),
        ];
        self.section(&mut s, "filter", bit_filters, &bit_columns);
        s.push_str(
            "ns/key. insert: criterion, builds from empty; build: one plain build \
             (xorf: its static build, hashing included); batch: contains_many.\n\n",
        );
        let counting_columns = [
            Column::ns("insert", CountingInsertNs),
            Column::ns("remove", CountingRemoveNs),
            Column::ns("lookup", CountingLookupNs),
            Column::ns("build", CountingBuildNs),
            Column::percent("FP %", CountingFp),
        ];
        self.section(&mut s, "counting filter", counting, &counting_columns);
        s.push_str(
            "ns/key on present keys, filters holding all n keys; filterstore = blocked layout.\n",
        );
        let hashes: Vec<String> = self
            .samples
            .keys()
            .filter(|(fig, _)| *fig == HashNs)
            .filter_map(|&(fig, name)| Some(format!("{name} {:.2}", self.get(fig, name)?)))
            .collect();
        let _ = writeln!(s, "\nhash alone, ns/key: {}", hashes.join(", "));
        s
    }

    fn section(&self, s: &mut String, title: &str, filters: &[&'static str], columns: &[Column]) {
        let _ = write!(s, "{title:<22} {:>3}", "k");
        for c in columns {
            let _ = write!(s, " {:>9}", c.title);
        }
        s.push('\n');
        for &name in filters {
            let k = self.k.get(name).map_or("-", |k| k.as_str());
            let _ = write!(s, "{name:<22} {k:>3}");
            for c in columns {
                let cell = match self.get(c.figure, name) {
                    Some(v) => format!("{:.*}", c.precision, v * c.scale),
                    None => "-".into(),
                };
                let _ = write!(s, " {cell:>9}");
            }
            s.push('\n');
        }
    }
}

/// One column of the summary table.
struct Column {
    title: &'static str,
    figure: Figure,
    scale: f64,
    precision: usize,
}

impl Column {
    fn new(title: &'static str, figure: Figure, scale: f64, precision: usize) -> Self {
        Column {
            title,
            figure,
            scale,
            precision,
        }
    }
    fn ns(title: &'static str, figure: Figure) -> Self {
        Column::new(title, figure, 1.0, 1)
    }
    fn percent(title: &'static str, figure: Figure) -> Self {
        Column::new(title, figure, 100.0, 3)
    }
}

/// Drives criterion and hands back what it measured, per key.
pub struct Bench {
    pub c: Criterion,
}

impl Bench {
    /// Runs the criterion benchmark `peers/<id>`. Each criterion sample of
    /// `iters` iterations applies `timed` to the next `iters` keys of `keys`
    /// (in segments of at most `segment` keys, continuing where the previous
    /// sample stopped, wrapping around); only `timed` runs inside the clock.
    /// After each segment `after` runs untimed, told whether the key array
    /// was just exhausted. Returns the measured samples in ns/key (empty if
    /// criterion skipped the benchmark, e.g. filtered out by name).
    pub fn per_key<S, T>(
        &mut self,
        id: &str,
        state: &mut S,
        keys: &[T],
        segment: usize,
        mut timed: impl FnMut(&mut S, &[T]) -> u64,
        mut after: impl FnMut(&mut S, &[T], bool),
    ) -> Vec<f64> {
        let mut samples: Vec<f64> = Vec::new();
        let mut cursor = 0usize;
        let mut group = self.c.benchmark_group("peers");
        group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let mut left = iters as usize;
                let mut elapsed = Duration::ZERO;
                let mut check = 0u64;
                while left > 0 {
                    let len = left.min(segment).min(keys.len() - cursor);
                    let seg = &keys[cursor..cursor + len];
                    let start = Tick::now();
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
        // Warm-up calls come first; the measured samples are the last ones.
        let first = samples.len().saturating_sub(SAMPLES);
        samples.split_off(first)
    }
}

/// The median of `v`, `None` if empty.
pub fn median(v: &[f64]) -> Option<f64> {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let mid = v.len() / 2;
    match v.len() {
        0 => None,
        len if len % 2 == 1 => Some(v[mid]),
        _ => Some((v[mid - 1] + v[mid]) / 2.0),
    }
}

/// Times `f` once and records it as ns per key of `n`.
pub fn time_once(r: &mut Results, figure: Figure, name: &'static str, n: usize, f: impl FnOnce()) {
    let start = Tick::now();
    f();
    let ns = start.elapsed().as_nanos() as f64 / n as f64;
    r.add(figure, name, &[ns]);
}

/// The 1-minute load average.
pub fn load1() -> String {
    loadavg()
        .split_whitespace()
        .next()
        .unwrap_or("unknown")
        .to_string()
}

/// The 1-, 5- and 15-minute load averages.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

pub fn env_f64(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
