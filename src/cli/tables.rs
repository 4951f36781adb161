//! The commands on a table's keys: `create`, `remove`, `query` and
//! `regenerate` (`insert` has its own file).

use super::failure::{Failure, Outcome};
use super::keys::{self, KeyReader};
use super::open::{config, open_existing, open_read_only, or_discard};
use super::output::Out;
use filterstore::{Durability, FilterStore, RegenOptions, StoreError, TableSpec, WriteBatch};
use std::path::Path;

pub(super) fn create(
    dir: &Path,
    table: &str,
    spec: TableSpec,
    allow_large: bool,
    out: &mut Out,
) -> Outcome {
    let mut config = config();
    if allow_large {
        config = config.max_filter_bytes(Some(u64::MAX));
    }
    let store = FilterStore::open_with(dir, config)?;
    let (_store, t) = or_discard(store, |s| Ok(s.create_table(table, spec)?))?;
    let p = t.params();
    out.line(&format!(
        "created table {table}: {} layout, m = {} bits ({} KiB in memory, {} KiB of counters on disk), k = {}, seed {:#018x}",
        p.layout(),
        p.m(),
        p.bit_bytes().div_ceil(1024),
        (filterstore::counter_bytes(&p) as u64).div_ceil(1024),
        p.k(),
        p.hash().seed
    ))
}

pub(super) fn remove(dir: &Path, table: &str, file: Option<&Path>, out: &mut Out) -> Outcome {
    let store = open_existing(dir)?;
    let t = store.open_table(table)?;
    let mut reader = KeyReader::open(file)?;
    let mut batch = WriteBatch::with_capacity(keys::BATCH_KEYS, keys::BATCH_KEYS * 32);
    let mut lines = Vec::with_capacity(keys::BATCH_KEYS);
    let mut total = 0u64;
    // A line that cannot be read ends the input: the keys before it are
    // removed, and made durable, as at a key that is not in the table.
    let mut unreadable = None;
    while unreadable.is_none() {
        batch.clear();
        lines.clear();
        let read = reader.next_batch(|k, line| {
            batch.remove(k);
            lines.push(line);
        });
        unreadable = read.err();
        if batch.is_empty() {
            break;
        }
        match t.apply(&batch, Durability::Buffered) {
            Ok(()) => total += batch.len() as u64,
            Err(StoreError::NotPresent {
                index: Some(index), ..
            }) => {
                // Apply the keys before the refused one, so that the outcome
                // is simply "every line before N", and make them durable.
                let mut prefix = WriteBatch::new();
                for (_, k) in batch.iter().take(index) {
                    prefix.remove(k);
                }
                t.apply(&prefix, Durability::Durable)?;
                reader.finish();
                let line = lines.get(index).copied().unwrap_or(0);
                return Err(Failure(format!(
                    "line {line}: key is not in table {table}; the {} keys before it were removed (durable), nothing after it",
                    total + index as u64
                )));
            }
            Err(e) => return Err(e.into()),
        }
    }
    t.flush()?;
    reader.finish();
    if let Some(e) = unreadable {
        return Err(Failure(format!(
            "{e}; the {total} keys before it were removed (durable), nothing after it"
        )));
    }
    out.line(&format!("removed {total} keys from {table} (durable)"))
}

pub(super) fn query(
    dir: &Path,
    table: &str,
    file: Option<&Path>,
    count: bool,
    out: &mut Out,
) -> Outcome {
    let store = open_read_only(dir)?;
    let t = store.open_table(table)?;
    let mut reader = KeyReader::open(file)?;
    let mut keys: Vec<Vec<u8>> = Vec::with_capacity(keys::BATCH_KEYS);
    let (mut maybe, mut absent) = (0u64, 0u64);
    loop {
        keys.clear();
        if reader.next_batch(|k, _| keys.push(k.to_vec()))? == 0 {
            break;
        }
        for (k, hit) in keys.iter().zip(t.contains_many(&keys)) {
            if hit {
                maybe += 1;
            } else {
                absent += 1;
            }
            if !count {
                out.key_answer(k, hit)?;
            }
        }
    }
    reader.finish();
    if count {
        out.line(&format!(
            "keys\t{}\nmaybe\t{maybe}\nabsent\t{absent}",
            maybe + absent
        ))?;
    }
    Ok(())
}

pub(super) fn regenerate(
    dir: &Path,
    table: &str,
    file: &Path,
    headroom: f64,
    out: &mut Out,
) -> Outcome {
    if !(headroom.is_finite() && headroom >= 1.0) {
        return Err(Failure(format!(
            "--headroom {headroom} is invalid; give a number of at least 1"
        )));
    }
    let store = open_existing(dir)?;
    let t = store.open_table(table)?;
    // Opened before the rebuild starts, read by it: the file is the host's
    // snapshot of the table's keys.
    let mut reader = KeyReader::open(Some(file))?;
    let mut batch: std::collections::VecDeque<Vec<u8>> = Default::default();
    let mut failed = false;
    let keys = std::iter::from_fn(|| {
        if batch.is_empty() && !failed {
            if let Err(e) = reader.next_batch(|k, _| batch.push_back(k.to_vec())) {
                failed = true;
                return Some(Err(std::io::Error::other(e)));
            }
        }
        batch.pop_front().map(Ok)
    });
    let report = t.regenerate(
        || keys,
        &RegenOptions {
            headroom,
            capacity: None,
        },
    );
    reader.finish();
    let r = report?;
    t.flush()?;
    out.line(&format!(
        "regenerated {table}: generation {} -> {}, {} keys read, sized for {}, m = {} bits, k = {}",
        r.old_generation, r.new_generation, r.keys_read, r.capacity, r.m_bits, r.k
    ))?;
    if r.source_disagrees() {
        out.line(&format!(
            "note: the key file held {} keys, the table counted {} live keys: keys it lacked are in \
             the filter now; if the file is older than the table, keys removed since are back \
             (false positives until a regeneration from a current file)",
            r.keys_read, r.live_keys_before
        ))?;
    }
    Ok(())
}
