//! Reading a rebuild's key source and sizing the new generation from it
//! (the sizing rules of [`Table::regenerate`](crate::store::Table::regenerate),
//! § Sizing).
//!
//! # Sized by what the source yields
//! The table's live count is what the table believes; the source is what the
//! host holds. They differ when the filter was created empty for a table
//! that already has rows (0 live keys, a million read), when the host's key
//! file is stale (it yields keys the table removed since), or when writes
//! happened between the rebuild's start and the source's snapshot. Sizing by
//! the live count gave, for the first case, a 512-bit filter answering
//! "maybe" to every lookup. So without a fixed capacity the source's key
//! hashes are held (16 bytes per key, in steps of 65,536 = 1 MiB, each
//! reserved under the memory budget) until it ends, and the generation is
//! sized for the number it yielded: the filter builders of LSM stores do
//! the same (RocksDB's keep every key's hash until the file is finished).
//! With a fixed capacity ([`RegenOptions::capacity`]) the host has said how
//! large the table is: the source is counted as it streams, nothing held,
//! as before. Either way the report names both numbers
//! ([`RegenReport::live_keys_before`], [`RegenReport::keys_read`]); the
//! store cannot tell a stale key file from a table that lacked keys, and
//! says so there.
//!
//! [`RegenReport::live_keys_before`]: super::RegenReport::live_keys_before
//! [`RegenReport::keys_read`]: super::RegenReport::keys_read

use super::build::Build;
use super::health::parameters_changed;
use super::RegenOptions;
use crate::filter::hash::{HashSpec, KeyHash};
use crate::filter::params::{FilterParams, Layout};
use crate::store::budget::{self, Reservation};
use crate::store::catalog::TableMeta;
use crate::store::error::StoreError;
use crate::store::table::Generation;

/// Keys of the source hashed per step (1 MiB of hashes).
const STEP: usize = 1 << 16;

/// The capacity and parameters of the new generation for `keys` keys (the
/// sizing rules of [`Table::regenerate`](crate::store::Table::regenerate)),
/// in `layout` hashed by `hash`.
fn plan(
    meta: &TableMeta,
    old: &Generation,
    keys: u64,
    options: &RegenOptions,
    (layout, hash): (Layout, HashSpec),
) -> Result<(u64, FilterParams), StoreError> {
    let mut capacity = options
        .capacity
        .unwrap_or_else(|| (keys as f64 * options.headroom.max(1.0)).ceil() as u64);
    if parameters_changed(meta, &old.params) {
        capacity = capacity.max(meta.expected_keys);
    }
    let capacity = capacity.max(1);
    let params = FilterParams::for_capacity(capacity, meta.target_fp, layout, hash)?;
    Ok((capacity, params))
}

/// Steps 1 and 2 of a rebuild of the table of `meta` (whose generation in
/// force is `old`, counting `live_before` live keys at the start): reads
/// `source`, sizes the new generation (module docs) in `layout` hashed by
/// `hash`, and counts every key into its counters.
pub(super) fn build_from_source<F, I, K, E>(
    meta: &TableMeta,
    old: &Generation,
    live_before: u64,
    options: &RegenOptions,
    (layout, hash): (Layout, HashSpec),
    source: F,
) -> Result<Build, StoreError>
where
    F: FnOnce() -> I,
    I: IntoIterator<Item = Result<K, E>>,
    K: AsRef<[u8]>,
    E: std::error::Error + Send + Sync + 'static,
{
    let table = &meta.name;
    let new_build = |keys| -> Result<Build, StoreError> {
        let (capacity, params) = plan(meta, old, keys, options, (layout, hash))?;
        Build::new(params, capacity, old, live_before, table)
    };
    if options.capacity.is_some() {
        let mut b = new_build(0)?;
        for_each_step(source, hash, table, |step| {
            b.count(step);
            Ok(())
        })?;
        return Ok(b);
    }
    let mut held = Held::default();
    for_each_step(source, hash, table, |step| held.push(step, table))?;
    let mut b = new_build(held.keys)?;
    for step in &held.steps {
        b.count(step);
    }
    Ok(b)
}

/// The hashes of a source held until it ends, and their budget.
#[derive(Default)]
struct Held {
    steps: Vec<Vec<KeyHash>>,
    _memory: Vec<Reservation>,
    keys: u64,
}

impl Held {
    /// Keeps `step` (taking it), under the memory budget.
    fn push(&mut self, step: &mut Vec<KeyHash>, table: &str) -> Result<(), StoreError> {
        let bytes = (step.capacity() * std::mem::size_of::<KeyHash>()) as u64;
        let r = budget::reserve(
            || format!("the key hashes of table {table:?}'s rebuild (16 bytes per key read)"),
            bytes,
        )?;
        self._memory.push(r);
        self.keys += step.len() as u64;
        self.steps.push(std::mem::take(step));
        Ok(())
    }
}

/// Hashes the keys of `source` under `spec` in steps of [`STEP`], calling
/// `f` with each step (which it may take); a key the source fails to yield
/// is [`StoreError::KeySource`].
fn for_each_step<F, I, K, E>(
    source: F,
    spec: HashSpec,
    table: &str,
    mut f: impl FnMut(&mut Vec<KeyHash>) -> Result<(), StoreError>,
) -> Result<(), StoreError>
where
    F: FnOnce() -> I,
    I: IntoIterator<Item = Result<K, E>>,
    K: AsRef<[u8]>,
    E: std::error::Error + Send + Sync + 'static,
{
    let mut keys = source().into_iter();
    let mut step = Vec::with_capacity(STEP);
    loop {
        step.clear();
        step.reserve(STEP);
        for key in keys.by_ref().take(STEP) {
            let key = key.map_err(|e| StoreError::KeySource {
                table: table.to_string(),
                source: Box::new(e),
            })?;
            step.push(spec.hash(key.as_ref()));
        }
        if step.is_empty() {
            return Ok(());
        }
        f(&mut step)?;
    }
}
