//! Where the filters land, pinned as `EXPLAIN` text: a change in placement
//! is a visible diff in `tests/runtime/plans/*.txt`, reviewed, not guessed.
//!
//! The text is the distributed plan with its taps and filters, then one
//! line per join side with the decision. The temporary data directory is
//! replaced by `<data>`. To accept a new text after a reviewed change, run
//! with `UPDATE_PLANS=1` and read the diff.

use crate::common::cluster::{
    broadcast_join_config, in_memory_cluster, partitioned_join_config, WorkerFunctions,
};
use crate::common::data::{table, Rng};
use datafusion::arrow::array::{ArrayRef, Int64Array, StringArray};
use datafusion::prelude::SessionContext;
use filterstore_datafusion::RuntimeFilterConfig;
use std::path::Path;
use std::sync::Arc;

const CASES: [(&str, &str, bool); 5] = [
    (
        "inner_selective",
        "SELECT count(*), sum(f.f_val) FROM fact f JOIN dim d ON f.f_dkey = d.d_key WHERE d.d_cat < 10",
        false,
    ),
    (
        "left_outer_and_semi",
        "SELECT count(*) FROM fact f LEFT JOIN dim d ON f.f_dkey = d.d_key AND d.d_cat < 10 WHERE f.f_dkey IN (SELECT d_key FROM dim WHERE d_name < 'n5')",
        false,
    ),
    (
        "whole_table_foreign_key",
        "SELECT count(*), sum(d.d_cat) FROM fact f JOIN dim d ON f.f_dkey = d.d_key",
        false,
    ),
    (
        "reverse_build_side",
        "SELECT count(*), sum(d.d_cat) FROM dim d JOIN fact f ON d.d_key = f.f_dkey WHERE f.f_val % 1000 = 1",
        false,
    ),
    (
        "broadcast",
        "SELECT count(*), sum(f.f_val) FROM fact f JOIN dim d ON f.f_dkey = d.d_key WHERE d.d_cat < 10",
        true,
    ),
];

async fn write(dir: &Path, ctxs: &[&SessionContext]) {
    let mut rng = Rng(3);
    let n_dim = 20_000i64;
    let dim: Vec<(&str, ArrayRef)> = vec![
        ("d_key", Arc::new(Int64Array::from_iter_values(0..n_dim))),
        (
            "d_cat",
            Arc::new(Int64Array::from_iter_values(
                (0..n_dim).map(|_| rng.below(100) as i64),
            )),
        ),
        (
            "d_name",
            Arc::new(StringArray::from_iter_values(
                (0..n_dim).map(|k| format!("n{k}")),
            )),
        ),
    ];
    table(dir, "dim", dim, 2, ctxs).await.unwrap();
    let n_fact = 200_000usize;
    let fact: Vec<(&str, ArrayRef)> = vec![
        (
            "f_dkey",
            Arc::new(Int64Array::from_iter_values(
                (0..n_fact).map(|_| rng.below(n_dim as u64) as i64),
            )),
        ),
        (
            "f_val",
            Arc::new(Int64Array::from_iter_values(
                (0..n_fact).map(|_| rng.below(1000) as i64),
            )),
        ),
    ];
    table(dir, "fact", fact, 3, ctxs).await.unwrap();
}

async fn explain(ctx: &SessionContext, sql: &str, dir: &Path) -> String {
    let out = ctx
        .sql(&format!("EXPLAIN {sql}"))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let mut text = String::new();
    for b in &out {
        let plan = b.column(1);
        for i in 0..b.num_rows() {
            text.push_str(
                &datafusion::arrow::util::display::array_value_to_string(plan, i).unwrap(),
            );
            text.push('\n');
        }
    }
    let data = dir.to_string_lossy().trim_start_matches('/').to_string();
    text.replace(&data, "<data>")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_text_is_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let rule = RuntimeFilterConfig {
        min_filtered_rows: 10_000,
        ..RuntimeFilterConfig::default()
    };
    let cluster = |broadcast: bool| {
        let cfg = if broadcast {
            broadcast_join_config(3)
        } else {
            partitioned_join_config(3)
        };
        in_memory_cluster(
            3,
            WorkerFunctions::Registered,
            cfg.unwrap(),
            Some(rule.clone()),
        )
        .unwrap()
    };
    let (partitioned, broadcast) = (cluster(false), cluster(true));
    write(dir.path(), &[&partitioned, &broadcast]).await;
    let pinned = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/runtime/plans");
    let update = std::env::var_os("UPDATE_PLANS").is_some();
    let mut differ = Vec::new();
    for (name, sql, is_broadcast) in CASES {
        let ctx = if is_broadcast {
            &broadcast
        } else {
            &partitioned
        };
        let got = explain(ctx, sql, dir.path()).await;
        let file = pinned.join(format!("{name}.txt"));
        if update {
            std::fs::write(&file, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_PLANS=1 once)", file.display()));
        if want != got {
            differ.push(format!("== {name}: expected\n{want}\n== got\n{got}"));
        }
    }
    assert!(
        differ.is_empty(),
        "EXPLAIN text changed:\n{}",
        differ.join("\n")
    );
}
