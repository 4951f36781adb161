//! Lookups whose keys need care: an unindexed column, `NULL` literals, an
//! `Int32` column against `Int64` literals (within its range and past it),
//! a string literal against a dictionary column. Each answers as the
//! `ListingTable` does; where the index can answer, it skips files.

use super::{explain, register_listing, rows, run, session, write_file};
use filterstore_datafusion::{IndexOptions, IndexedParquetTable};
use std::time::Duration;

/// `(query, whether the index must skip files for it)`.
const CASES: [(&str, bool); 13] = [
    ("SELECT id FROM t WHERE grp = 'g1'", false),
    ("SELECT id FROM t WHERE id = NULL", false),
    ("SELECT id FROM t WHERE id IN (NULL)", false),
    ("SELECT id FROM t WHERE id IN (NULL, 305)", true),
    ("SELECT id FROM t WHERE name = NULL", false),
    ("SELECT id FROM t WHERE k32 = 305", true),
    ("SELECT id FROM t WHERE k32 = CAST(305 AS BIGINT)", true),
    ("SELECT id FROM t WHERE k32 = 5000000305", true),
    ("SELECT id FROM t WHERE k32 IN (305, 5000000305)", true),
    ("SELECT id FROM t WHERE name = 'n305'", true),
    (
        "SELECT id FROM t WHERE name = arrow_cast('n305', 'Dictionary(Int32, Utf8)')",
        true,
    ),
    // DataFusion unwraps this cast into `id = 305`.
    ("SELECT id FROM t WHERE CAST(id AS VARCHAR) = '305'", true),
    ("SELECT id FROM t WHERE id + 1 = 306", false),
];

#[test]
fn coerced_and_null_keys_answer_as_the_listing_table() {
    run(async {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        std::fs::create_dir(&data).unwrap();
        for f in 0..10i64 {
            let ids: Vec<i64> = (100 * f..100 * f + 60).collect();
            write_file(&data.join(format!("f{f}.parquet")), &ids, false);
        }
        let ctx = session();
        let options = IndexOptions::new(tmp.path().join("store"))
            .column("id")
            .column("k32")
            .column("name")
            .settle(Duration::ZERO);
        let url = format!("{}/", data.display());
        let t = IndexedParquetTable::register(&ctx, "t", &url, options)
            .await
            .unwrap();
        assert_eq!(t.refresh().await.unwrap().indexed, 10);
        register_listing(&ctx, "l", &data).await;
        for (q, skips) in CASES {
            assert_eq!(
                rows(&ctx, q).await,
                rows(&ctx, &q.replace("FROM t", "FROM l")).await,
                "{q}"
            );
            // (DataFusion answers `id = NULL` without a scan.)
            let plan = explain(&ctx, q).await;
            let skipped = plan.contains("IndexedScanExec") && !plan.contains("skipped_by_index=0,");
            assert_eq!(skipped, skips, "{q}: {plan}");
        }
        // Past the column's range nothing can match: every file is skipped.
        let plan = explain(&ctx, CASES[7].0).await;
        assert!(plan.contains("skipped_by_index=10,"), "{plan}");
    });
}
