//! What an indexed scan shows and counts: `EXPLAIN` names the files the
//! index skipped and why the others are read, the rest of the predicate
//! still reaches the Parquet scan, `EXPLAIN ANALYZE` counts them; the table
//! is made from SQL; a rewrite in place is seen before it can be skipped;
//! files modified too recently wait for a later refresh.

use super::{explain, register_listing, rows, run, session, write_file};
use filterstore_datafusion::{register_indexed_table_factory, IndexOptions, IndexedParquetTable};
use std::path::Path;
use std::time::Duration;

fn files(data: &Path, n: i64) {
    std::fs::create_dir_all(data).unwrap();
    for f in 0..n {
        let ids: Vec<i64> = (1000 * f..1000 * f + 200).collect();
        write_file(&data.join(format!("f{f:02}.parquet")), &ids, false);
    }
}

#[test]
fn explain_names_the_skipped_files_and_the_scan_keeps_its_predicate() {
    run(async {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        files(&data, 8);
        let ctx = session();
        let options = IndexOptions::new(tmp.path().join("store"))
            .column("id")
            .settle(Duration::ZERO)
            .refresh_on_scan(false);
        let url = format!("{}/", data.display());
        let t = IndexedParquetTable::register(&ctx, "t", &url, options)
            .await
            .unwrap();
        // Before any refresh every file is unindexed, and read.
        let q = "SELECT id, grp FROM t WHERE id = 3007 AND v > 0.01";
        let plan = explain(&ctx, q).await;
        assert!(
            plan.contains(
                "IndexedScanExec: files=8, skipped_by_index=0, read=8 (unindexed=8), columns=[id]"
            ),
            "{plan}"
        );
        let report = t.refresh().await.unwrap();
        assert_eq!((report.indexed, report.listed, report.commits), (8, 8, 1));
        let plan = explain(&ctx, q).await;
        assert!(
            plan.contains(
                "IndexedScanExec: files=8, skipped_by_index=7, read=1 (maybe=1), columns=[id]"
            ),
            "{plan}"
        );
        // The whole predicate still reaches the Parquet scan below.
        assert!(
            plan.contains("DataSourceExec")
                && plan.contains("predicate=id@0 = 3007 AND v@4 > 0.01"),
            "{plan}"
        );
        // EXPLAIN ANALYZE counts the files.
        let analyzed = explain(&ctx, &format!("ANALYZE {q}")).await;
        assert!(
            analyzed.contains("files_skipped_by_index=7")
                && analyzed.contains("files_read_maybe=1"),
            "{analyzed}"
        );
        register_listing(&ctx, "l", &data).await;
        assert_eq!(
            rows(&ctx, q).await,
            rows(&ctx, &q.replace("FROM t", "FROM l")).await
        );
        assert_eq!(rows(&ctx, q).await.len(), 1);
    });
}

#[test]
fn create_external_table_makes_an_indexed_table() {
    run(async {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        files(&data, 4);
        let ctx = session();
        register_indexed_table_factory(&ctx);
        let sql = format!(
            "CREATE EXTERNAL TABLE t STORED AS INDEXED_PARQUET LOCATION '{}/' \
             OPTIONS ('index.store' '{}', 'index.columns' 'id, name', 'index.settle_ms' '0')",
            data.display(),
            tmp.path().join("store").display()
        );
        ctx.sql(&sql).await.unwrap().collect().await.unwrap();
        // Its first scan lists 4 unknown files and starts a refresh.
        assert_eq!(
            rows(&ctx, "SELECT count(*) FROM t WHERE id = 1005")
                .await
                .len(),
            1
        );
        let q = "SELECT id FROM t WHERE name = 'n2010'";
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let plan = explain(&ctx, q).await;
            if plan.contains("skipped_by_index=3") {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "never indexed: {plan}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(rows(&ctx, q).await, ["| 2010 |"]);
        // A misspelt option is refused.
        let bad = sql
            .replace("CREATE EXTERNAL TABLE t", "CREATE EXTERNAL TABLE u")
            .replace("index.columns", "index.colums");
        let err = ctx.sql(&bad).await.unwrap_err().to_string();
        assert!(err.contains("index.colums"), "{err}");
    });
}

#[test]
fn a_file_rewritten_in_place_is_read_until_indexed_again() {
    run(async {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        files(&data, 3);
        let ctx = session();
        let options = IndexOptions::new(tmp.path().join("store"))
            .column("id")
            .refresh_on_scan(false)
            .settle(Duration::ZERO);
        let url = format!("{}/", data.display());
        let t = IndexedParquetTable::register(&ctx, "t", &url, options)
            .await
            .unwrap();
        t.refresh().await.unwrap();
        // Same path, same inode, same number of rows: other keys.
        std::thread::sleep(Duration::from_millis(10));
        let ids: Vec<i64> = (7000..7200).collect();
        write_file(&data.join("f01.parquet"), &ids, false);
        let q = "SELECT id FROM t WHERE id = 7100";
        assert_eq!(rows(&ctx, q).await, ["| 7100 |"]);
        assert!(explain(&ctx, q).await.contains("read=1 (changed=1)"));
        let report = t.refresh().await.unwrap();
        assert_eq!((report.rebuilt, report.unchanged), (1, 2));
        assert!(explain(&ctx, q)
            .await
            .contains("skipped_by_index=2, read=1 (maybe=1)"));
        assert_eq!(rows(&ctx, q).await, ["| 7100 |"]);
    });
}

#[test]
fn files_modified_too_recently_wait_for_a_later_refresh() {
    run(async {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        files(&data, 2);
        let ctx = session();
        let options = IndexOptions::new(tmp.path().join("store"))
            .column("id")
            .refresh_on_scan(false)
            .settle(Duration::from_millis(400));
        let url = format!("{}/", data.display());
        let t = IndexedParquetTable::register(&ctx, "t", &url, options)
            .await
            .unwrap();
        let first = t.refresh().await.unwrap();
        assert_eq!((first.indexed, first.deferred), (0, 2));
        tokio::time::sleep(Duration::from_millis(450)).await;
        let second = t.refresh().await.unwrap();
        assert_eq!((second.indexed, second.deferred), (2, 0));
    });
}
