//! A short tour of the store, run by `filterstore demo` (placeholder kept
//! minimal by the store branch; the full demo lives on main).

use crate::store::{Durability, FilterStore, TableSpec, WriteBatch};
use std::path::PathBuf;

/// Creates a table in `db` (a temporary directory when `None`), inserts and
/// removes a few keys durably, and prints what lookups answer.
pub fn run(db: Option<PathBuf>) -> Result<(), Box<dyn std::error::Error>> {
    let tmp;
    let dir = match db {
        Some(d) => d,
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().join("demo.db")
        }
    };
    let store = FilterStore::open(&dir)?;
    let name = "demo";
    if store.list_tables()?.iter().any(|m| m.name == name) {
        store.drop_table(name)?;
    }
    let table = store.create_table(name, TableSpec::new(10_000, 0.01))?;
    let mut batch = WriteBatch::new();
    for i in 0..1000u32 {
        batch.insert(format!("key-{i}").as_bytes());
    }
    table.apply(&batch, Durability::Durable)?;
    table.remove(b"key-0")?;
    table.flush()?;
    for key in ["key-1", "key-999", "key-1000", "nope"] {
        let answer = if table.contains(key.as_bytes()) {
            "maybe"
        } else {
            "absent"
        };
        println!("{key}\t{answer}");
    }
    let s = table.stats()?;
    println!(
        "{}: {} live keys, m = {} bits, k = {}, estimated fp {:.4}%",
        s.name,
        s.live_keys,
        s.m_bits,
        s.k,
        100.0 * s.estimated_fp
    );
    Ok(())
}
