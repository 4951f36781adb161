//! Per-run totals of one cluster kind, and their `RESULT` lines.

use super::scans::probe_rows;
use super::QueryRow;

/// Per-run totals of one cluster kind.
#[derive(Default)]
pub struct Totals {
    pub queries: usize,
    /// Queries single-node DataFusion cannot run (not run on the cluster).
    pub skipped: usize,
    /// Results that differ from single-node DataFusion's, and failed runs.
    pub wrong: usize,
    pub filters: usize,
    pub bytes_without: usize,
    pub bytes_with: usize,
    /// Rows entering the shuffles, and those of them toward a join's build
    /// side ([`super::Figures::build_shuffle_rows`]): without the rule, with it.
    pub rows: [usize; 2],
    pub build_rows: [usize; 2],
    pub scan_rows_without: usize,
    pub scan_rows_with: usize,
    /// Rows leaving the probe sides' scans ([`probe_rows`]).
    pub probe_rows_without: usize,
    pub probe_rows_with: usize,
    pub ms_without: f64,
    pub ms_with: f64,
    /// Sum of the natural logarithms of the queries' wall ratios (with the
    /// rule over without), for their geometric mean.
    pub ln_ratios: f64,
    /// The query that takes longest without the rule, and its time.
    pub longest: (String, f64),
    pub worst: f64,
    pub worst_query: String,
    pub forced_worst: f64,
    pub forced_worst_query: String,
    pub slowest_ms: f64,
    /// [`Figures::probe`] of the runs with the rule, summed.
    pub probe: [usize; 5],
    /// Per query, what each filter of its last forced run shipped
    /// ([`shipped`]).
    pub shipped: Vec<(String, Vec<String>)>,
}

impl Totals {
    pub fn print(&self, prefix: &str) {
        println!("RESULT {prefix}.queries {}", self.queries);
        println!("RESULT {prefix}.skipped {}", self.skipped);
        println!("RESULT {prefix}.wrong_results {}", self.wrong);
        println!("RESULT {prefix}.filters_applied {}", self.filters);
        println!(
            "RESULT {prefix}.shuffle_bytes_ratio {:.3}",
            self.bytes_with as f64 / self.bytes_without.max(1) as f64
        );
        println!(
            "# rows entering the shuffles: {} without the rule, {} with it; of them toward a \
             join's build side (never filtered): {} and {}",
            self.rows[0], self.rows[1], self.build_rows[0], self.build_rows[1]
        );
        println!(
            "# rows leaving the Parquet scans: {} without the rule, {} with it",
            self.scan_rows_without, self.scan_rows_with
        );
        println!(
            "RESULT {prefix}.scan_rows_ratio {:.3}",
            self.scan_rows_with as f64 / self.scan_rows_without.max(1) as f64
        );
        println!(
            "# rows leaving the probe sides' scans (a runtime filter above them): {} without \
             the rule, {} with it",
            self.probe_rows_without, self.probe_rows_with
        );
        println!(
            "RESULT {prefix}.probe_scan_rows_ratio {:.3}",
            self.probe_rows_with as f64 / self.probe_rows_without.max(1) as f64
        );
        println!(
            "RESULT {prefix}.wall_ratio_sum {:.3}",
            self.ms_with / self.ms_without.max(1e-9)
        );
        // The sum is the time a user waits for the whole suite; one long
        // query can carry it (TPC-DS q72), so the geometric mean, which
        // weighs every query alike, stands beside it.
        let (longest, longest_ms) = &self.longest;
        println!(
            "# times without the rule: {:.0} ms in all, {longest_ms:.0} of them {longest}",
            self.ms_without
        );
        println!(
            "RESULT {prefix}.wall_ratio_geomean {:.3}",
            (self.ln_ratios / self.queries.max(1) as f64).exp()
        );
        println!(
            "RESULT {prefix}.wall_ratio_max {:.3}   # {}",
            self.worst, self.worst_query
        );
        println!(
            "RESULT {prefix}.forced_wall_ratio_max {:.3}   # {}",
            self.forced_worst, self.forced_worst_query
        );
        println!("RESULT {prefix}.slowest_query_ms {:.0}", self.slowest_ms);
        let undelivered: Vec<&str> = self
            .shipped
            .iter()
            .filter(|(_, s)| s.iter().any(|f| f.starts_with("undelivered")))
            .map(|(label, _)| label.as_str())
            .collect();
        println!("# forced runs with a filter shipped and read by no probe task: {undelivered:?}");
        let [rows_in, buffered, unfiltered, full, missed] = self.probe;
        println!(
            "# probe sides with the rule: {rows_in} rows in, {buffered} read before their filter \
             came, {unfiltered} passed unfiltered; {full} partitions filled their buffer, {missed} \
             missed the deadline"
        );
        println!(
            "RESULT {prefix}.probe_unfiltered_share {:.4}",
            unfiltered as f64 / rows_in.max(1) as f64
        );
    }

    pub(super) fn add(&mut self, label: &str, row: &QueryRow) {
        let [m0, m1, m2] = row.ms;
        self.queries += 1;
        self.wrong += row.wrong;
        self.filters += row.filters;
        self.bytes_without += row.figs[0].shuffle_bytes;
        self.bytes_with += row.figs[1].shuffle_bytes;
        for m in 0..2 {
            self.rows[m] += row.figs[m].shuffle_rows;
            self.build_rows[m] += row.figs[m].build_shuffle_rows;
        }
        self.scan_rows_without += row.figs[0].scan_rows;
        self.scan_rows_with += row.figs[1].scan_rows;
        let (without, with) = probe_rows(&row.figs[0].scans, &row.figs[1].scans);
        self.probe_rows_without += without;
        self.probe_rows_with += with;
        for (t, v) in self.probe.iter_mut().zip(row.figs[1].probe) {
            *t += v;
        }
        self.shipped.push((label.to_string(), row.shipped.clone()));
        self.ms_without += m0;
        self.ms_with += m1;
        self.ln_ratios += (m1 / m0).ln();
        if m0 > self.longest.1 {
            self.longest = (label.to_string(), m0);
        }
        self.slowest_ms = self.slowest_ms.max(m0).max(m1).max(m2);
        if m1 / m0 > self.worst {
            self.worst = m1 / m0;
            self.worst_query = label.to_string();
        }
        if m2 / m0 > self.forced_worst {
            self.forced_worst = m2 / m0;
            self.forced_worst_query = label.to_string();
        }
    }
}
