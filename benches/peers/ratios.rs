//! The goal rows of the `peers` bench: `RESULT ratio.<row>` lines, each a
//! median of per-round ratios of two interleaved figures.

use super::harness::{load1, Figure, Results};

/// One figure of one subject.
type Cell = (Figure, &'static str);

/// The goals of issues 13, 23 and 38, as `(row, numerator, denominator)`.
pub const RATIOS: [(&str, Cell, Cell); 35] = [
    (
        "lookup_absent_split_vs_sbbf",
        (Figure::LookupAbsentNs, "filterstore_split"),
        (Figure::LookupAbsentNs, "sbbf"),
    ),
    (
        "lookup_present_split_vs_sbbf",
        (Figure::LookupPresentNs, "filterstore_split"),
        (Figure::LookupPresentNs, "sbbf"),
    ),
    (
        "lookup_absent_split_vs_sbbf_xxh64",
        (Figure::LookupAbsentNs, "filterstore_split"),
        (Figure::LookupAbsentNs, "sbbf_xxh64"),
    ),
    (
        "lookup_present_split_vs_sbbf_xxh64",
        (Figure::LookupPresentNs, "filterstore_split"),
        (Figure::LookupPresentNs, "sbbf_xxh64"),
    ),
    (
        "lookup_batch_split_vs_sbbf_prefetch",
        (Figure::LookupBatchNs, "filterstore_split"),
        (Figure::LookupBatchNs, "sbbf_prefetch"),
    ),
    (
        "lookup_batch_split_vs_sbbf_xxh64_prefetch",
        (Figure::LookupBatchNs, "filterstore_split"),
        (Figure::LookupBatchNs, "sbbf_xxh64_prefetch"),
    ),
    (
        "insert_split_bulk_vs_sbbf",
        (Figure::InsertNs, "filterstore_split_bulk"),
        (Figure::InsertNs, "sbbf"),
    ),
    (
        "insert_split_many_vs_sbbf",
        (Figure::InsertNs, "filterstore_split_many"),
        (Figure::InsertNs, "sbbf"),
    ),
    (
        "lookup_absent_blocked_vs_sbbf",
        (Figure::LookupAbsentNs, "filterstore_blocked"),
        (Figure::LookupAbsentNs, "sbbf"),
    ),
    (
        "lookup_present_blocked_vs_sbbf",
        (Figure::LookupPresentNs, "filterstore_blocked"),
        (Figure::LookupPresentNs, "sbbf"),
    ),
    (
        "lookup_absent_blocked_view_vs_sbbf",
        (Figure::LookupAbsentNs, "filterstore_blocked_view"),
        (Figure::LookupAbsentNs, "sbbf"),
    ),
    (
        "lookup_present_blocked_view_vs_sbbf",
        (Figure::LookupPresentNs, "filterstore_blocked_view"),
        (Figure::LookupPresentNs, "sbbf"),
    ),
    (
        "lookup_absent_blocked_frozen_vs_sbbf",
        (Figure::LookupAbsentNs, "filterstore_blocked_frozen"),
        (Figure::LookupAbsentNs, "sbbf"),
    ),
    (
        "lookup_present_blocked_frozen_vs_sbbf",
        (Figure::LookupPresentNs, "filterstore_blocked_frozen"),
        (Figure::LookupPresentNs, "sbbf"),
    ),
    (
        "lookup_absent_blocked_xxh3_128_vs_sbbf",
        (Figure::LookupAbsentNs, "filterstore_blocked_xxh3_128"),
        (Figure::LookupAbsentNs, "sbbf"),
    ),
    (
        "lookup_present_blocked_xxh3_128_vs_sbbf",
        (Figure::LookupPresentNs, "filterstore_blocked_xxh3_128"),
        (Figure::LookupPresentNs, "sbbf"),
    ),
    (
        "lookup_standard_vs_fastbloom_fasthash",
        (Figure::LookupAbsentNs, "filterstore_standard"),
        (Figure::LookupAbsentNs, "fastbloom_fasthash"),
    ),
    (
        "lookup_batch_vs_sbbf_prefetch",
        (Figure::LookupBatchNs, "filterstore_blocked"),
        (Figure::LookupBatchNs, "sbbf_prefetch"),
    ),
    (
        "insert_bulk_vs_sbbf",
        (Figure::InsertNs, "filterstore_blocked_bulk"),
        (Figure::InsertNs, "sbbf"),
    ),
    (
        "insert_many_vs_sbbf",
        (Figure::InsertNs, "filterstore_blocked_many"),
        (Figure::InsertNs, "sbbf"),
    ),
    (
        "insert_vs_sbbf",
        (Figure::InsertNs, "filterstore_blocked"),
        (Figure::InsertNs, "sbbf"),
    ),
    (
        "insert_mut_vs_sbbf",
        (Figure::InsertNs, "filterstore_blocked_mut"),
        (Figure::InsertNs, "sbbf"),
    ),
    (
        "ids_lookup_absent_blocked_vs_sbbf",
        (Figure::IdsLookupAbsentNs, "filterstore_blocked"),
        (Figure::IdsLookupAbsentNs, "sbbf"),
    ),
    (
        "ids_lookup_present_blocked_vs_sbbf",
        (Figure::IdsLookupPresentNs, "filterstore_blocked"),
        (Figure::IdsLookupPresentNs, "sbbf"),
    ),
    (
        "ids_lookup_absent_blocked_frozen_vs_sbbf",
        (Figure::IdsLookupAbsentNs, "filterstore_blocked_frozen"),
        (Figure::IdsLookupAbsentNs, "sbbf"),
    ),
    (
        "ids_lookup_present_blocked_frozen_vs_sbbf",
        (Figure::IdsLookupPresentNs, "filterstore_blocked_frozen"),
        (Figure::IdsLookupPresentNs, "sbbf"),
    ),
    (
        "ids_lookup_absent_split_vs_sbbf_xxh64",
        (Figure::IdsLookupAbsentNs, "filterstore_split"),
        (Figure::IdsLookupAbsentNs, "sbbf_xxh64"),
    ),
    (
        "ids_lookup_present_split_vs_sbbf_xxh64",
        (Figure::IdsLookupPresentNs, "filterstore_split"),
        (Figure::IdsLookupPresentNs, "sbbf_xxh64"),
    ),
    (
        "ids_insert_vs_sbbf",
        (Figure::IdsInsertNs, "filterstore_blocked"),
        (Figure::IdsInsertNs, "sbbf"),
    ),
    (
        "ids_insert_mut_vs_sbbf",
        (Figure::IdsInsertNs, "filterstore_blocked_mut"),
        (Figure::IdsInsertNs, "sbbf"),
    ),
    (
        "ids_insert_many_vs_sbbf",
        (Figure::IdsInsertNs, "filterstore_blocked_many"),
        (Figure::IdsInsertNs, "sbbf"),
    ),
    (
        "ids_floor_locked5_vs_sbbf",
        (Figure::IdsInsertNs, "floor_locked5"),
        (Figure::IdsInsertNs, "sbbf"),
    ),
    (
        "ids_floor_locked1_vs_sbbf",
        (Figure::IdsInsertNs, "floor_locked1"),
        (Figure::IdsInsertNs, "sbbf"),
    ),
    (
        "counting_lookup_vs_fastbloom_rs",
        (Figure::CountingLookupNs, "filterstore"),
        (Figure::CountingLookupNs, "fastbloom_rs"),
    ),
    (
        "counting_remove_vs_fastbloom_rs",
        (Figure::CountingRemoveNs, "filterstore"),
        (Figure::CountingRemoveNs, "fastbloom_rs"),
    ),
];

/// `RESULT ratio.<row> <median> x` per goal, each after a comment line
/// with the spread over rounds and the 1-minute load average.
pub fn ratio_lines(r: &Results) -> String {
    let mut s = String::new();
    for (row, a, b) in RATIOS {
        if let Some((median, lo, hi)) = r.ratio(a, b) {
            s += &format!(
                "# ratio.{row}: median of per-round ratios {median:.3} (min {lo:.3}, max {hi:.3}); load1 {}\n",
                load1()
            );
            s += &format!("RESULT ratio.{row} {median} x\n");
        }
    }
    s
}
