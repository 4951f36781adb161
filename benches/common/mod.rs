//! Used by the `diffguard` bench (`exchange` includes only `common/clock.rs`):
//! run `op` under criterion and keep the per-call time of every sample, so
//! that a bench can report a median over samples (and over interleaved
//! rounds) in its `RESULT` lines.

use criterion::Criterion;
use std::time::Instant;

/// Benchmarks `op` as `name`, appending the seconds per call of each
/// criterion sample to `samples`.
pub fn sample(c: &mut Criterion, name: &str, samples: &mut Vec<f64>, mut op: impl FnMut()) {
    c.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let t = Instant::now();
            for _ in 0..iters {
                op();
            }
            let d = t.elapsed();
            samples.push(d.as_secs_f64() / iters as f64);
            d
        })
    });
}

/// The median of `samples` (seconds per call).
pub fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(|a, b| a.total_cmp(b));
    samples[samples.len() / 2]
}
