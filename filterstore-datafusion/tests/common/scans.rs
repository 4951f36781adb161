//! The Parquet scans of an executed plan: what each reads, the rows it
//! output, and whether it is a probe side (a runtime filter above it).
//!
//! Rows leaving every scan mix the build sides, which read the same in every
//! mode, with the probe sides the filters act on. The probe sides' share is
//! counted on their own: in the run with the rule, a scan is a probe side
//! when a `BloomFilterExec` or `BloomScanExec` is above it through nodes of
//! one input each and unions (a join between them ends the walk: scans
//! below a filter placed above a join are not counted as its probe sides).
//! The run without the rule has no such nodes; its scans are matched to the
//! probe sides by what they read (their files and columns), which is the
//! same in both runs whatever the names of the plan's columns.

use super::metrics::one_line;
use datafusion::physical_plan::ExecutionPlan;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One scan of an executed plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Scan {
    /// Its files (byte ranges left out) and projected columns.
    pub reads: String,
    /// Rows it output (`output_rows`, summed over its tasks).
    pub rows: usize,
    /// A runtime filter of ours is above it (see the module's text).
    pub probe: bool,
}

/// A scan as datafusion-distributed shows it (a `BloomScanExec` above one
/// runs a copy of it that shares its metrics).
pub fn is_scan(n: &dyn ExecutionPlan) -> bool {
    let line = one_line(n);
    line.starts_with("DataSourceExec") || line.starts_with("DistributedLeafExec: DataSourceExec")
}

fn is_runtime_filter(n: &dyn ExecutionPlan) -> bool {
    matches!(n.name(), "BloomFilterExec" | "BloomScanExec")
}

/// Every scan of `plan`, in the order of a depth-first walk.
pub fn scans(plan: &Arc<dyn ExecutionPlan>) -> Vec<Scan> {
    let mut out = Vec::new();
    walk(plan.as_ref(), false, &mut out);
    out
}

fn walk(node: &dyn ExecutionPlan, under_filter: bool, out: &mut Vec<Scan>) {
    if is_scan(node) {
        out.push(Scan {
            reads: reads(&one_line(node)),
            rows: node
                .metrics()
                .and_then(|m| m.output_rows())
                .unwrap_or_default(),
            probe: under_filter,
        });
    }
    let children = node.children();
    // A union's inputs each carry every column; a join's carry some.
    let carries_all = children.len() == 1
        || matches!(
            node.name(),
            "UnionExec" | "InterleaveExec" | "DistributedUnionExec"
        );
    let lineage = (under_filter || is_runtime_filter(node)) && carries_all;
    for child in children {
        walk(child.as_ref(), lineage, out);
    }
}

/// What a scan's one-line display says it reads: its files, sorted, without
/// their byte ranges (the ranges split the same files among partitions),
/// then its projection.
fn reads(line: &str) -> String {
    let groups = between(line, "file_groups={", "]]}").unwrap_or_default();
    let mut files: Vec<&str> = groups
        .split(['[', ']', ',', ' '])
        .filter(|t| t.contains('/'))
        .map(|t| t.split(':').next().unwrap_or(t))
        .collect();
    files.sort_unstable();
    files.dedup();
    let projection = between(line, "projection=[", "]").unwrap_or_default();
    format!("{} [{projection}]", files.join(" "))
}

fn between<'a>(line: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = line.find(open)? + open.len();
    let len = line[start..].find(close)?;
    Some(&line[start..start + len])
}

/// Rows leaving the probe sides' scans: (without the rule, with it).
/// With it, the scans marked `probe`; without it, the scans reading the
/// same, shared as the run with the rule shares them: a query that reads
/// the same files and columns in `n` scans, `k` of them probe sides, counts
/// `k / n` of those scans' rows without the rule.
pub fn probe_rows(without: &[Scan], with: &[Scan]) -> (usize, usize) {
    // reads -> (scans with the rule, probe sides among them, their rows)
    let mut seen: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    for s in with {
        let e = seen.entry(&s.reads).or_default();
        e.0 += 1;
        if s.probe {
            e.1 += 1;
            e.2 += s.rows;
        }
    }
    let (mut rows_without, mut rows_with) = (0.0, 0);
    for (reads, (n, k, rows)) in seen {
        if k == 0 {
            continue;
        }
        rows_with += rows;
        let same: usize = without
            .iter()
            .filter(|s| s.reads == reads)
            .map(|s| s.rows)
            .sum();
        rows_without += same as f64 * k as f64 / n as f64;
    }
    (rows_without.round() as usize, rows_with)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_drops_byte_ranges_and_keeps_the_projection() {
        let line = "DistributedLeafExec: DataSourceExec: file_groups={2 groups: \
                    [[d/ss/part-2.parquet:0..31, d/ss/part-1.parquet:0..9], \
                    [d/ss/part-1.parquet:9..20]]}, projection=[ss_item_sk, ss_qty], \
                    file_type=parquet, predicate=ss_qty@1 > 3";
        assert_eq!(
            reads(line),
            "d/ss/part-1.parquet d/ss/part-2.parquet [ss_item_sk, ss_qty]"
        );
    }

    fn scan(reads: &str, rows: usize, probe: bool) -> Scan {
        let reads = reads.to_string();
        Scan { reads, rows, probe }
    }

    #[test]
    fn probe_rows_shares_scans_that_read_the_same() {
        let without = [
            scan("ss", 100, false),
            scan("ss", 100, false),
            scan("d", 7, false),
        ];
        let with = [
            scan("ss", 10, true),
            scan("ss", 100, false),
            scan("d", 7, false),
        ];
        // One of two `ss` scans is a probe side: half their rows without.
        assert_eq!(probe_rows(&without, &with), (100, 10));
        assert_eq!(probe_rows(&without, &without), (0, 0));
    }
}
