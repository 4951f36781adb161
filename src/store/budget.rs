//! One memory budget for the whole process: every large allocation of the
//! store — a table's bit filter (held while the table is open), a
//! regeneration's new counters and bits, a bulk load's counters, a counting
//! snapshot, an import's or an export's buffers — is reserved here before it
//! is made, and refused with [`StoreError::OverBudget`] (one line, naming
//! the budget and the flag that raises it) when the reservations in force
//! plus the new one would pass the budget. Nothing is allocated, written or
//! entered in the catalog for a refused request.
//!
//! # The budget
//! Set by [`StoreConfig::memory_budget`](super::StoreConfig::memory_budget)
//! (for the whole process: stores opened with it set it), else 3/4 of what
//! the process may use, read once: the smaller of `MemAvailable` of
//! `/proc/meminfo` and what its control groups leave it
//! ([`cgroup`](super::cgroup): cgroup v2 `memory.max` or cgroup v1
//! `memory.limit_in_bytes` of every group on its path, less what others
//! charged to them use). The last quarter is left for what the budget does
//! not count: sled's page cache for guard storage, buffers bounded by the
//! [`StoreConfig`](super::StoreConfig) knobs, the host. Where none of these
//! can be read there is no budget.

use super::error::StoreError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Share of the limit the budget allows.
const SHARE_NUM: u64 = 3;
const SHARE_DEN: u64 = 4;

/// Bytes reserved now, by every store of the process.
static IN_USE: AtomicU64 = AtomicU64::new(0);
/// A budget set by configuration (`u64::MAX`: none set).
static SET: AtomicU64 = AtomicU64::new(u64::MAX);
/// The budget read from the environment, once.
static FROM_ENV: OnceLock<Option<(u64, &'static str)>> = OnceLock::new();

/// Sets the process's budget (`None`: back to the one read from the
/// environment).
pub(crate) fn set(bytes: Option<u64>) {
    SET.store(bytes.unwrap_or(u64::MAX), Ordering::Release);
}

/// The budget in force and where it comes from.
pub(crate) fn budget() -> Option<(u64, &'static str)> {
    match SET.load(Ordering::Acquire) {
        u64::MAX => *FROM_ENV.get_or_init(from_environment),
        set => Some((set, "set by StoreConfig::memory_budget or --memory-budget")),
    }
}

/// Bytes reserved now.
#[cfg(test)]
fn in_use() -> u64 {
    IN_USE.load(Ordering::Acquire)
}

fn from_environment() -> Option<(u64, &'static str)> {
    let share = |bytes: u64| bytes / SHARE_DEN * SHARE_NUM;
    match (super::cgroup::process_limit(), mem_available()) {
        (Some(group), available) if available.is_none_or(|a| group.bytes < a) => {
            Some((share(group.bytes), group_source(group.source)))
        }
        (_, Some(available)) => Some((share(available), "3/4 of MemAvailable")),
        (_, None) => None,
    }
}

/// How the budget's source reads in an error.
fn group_source(limit: &'static str) -> &'static str {
    match limit {
        "cgroup v1 memory.limit_in_bytes" => {
            "3/4 of what the cgroup v1 memory.limit_in_bytes leaves this process"
        }
        _ => "3/4 of what the cgroup v2 memory.max leaves this process",
    }
}

fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Bytes held under the budget; given back when dropped.
#[derive(Debug)]
pub(crate) struct Reservation {
    bytes: u64,
}

impl Reservation {
    /// Takes `other`'s bytes into this reservation (released together).
    pub(crate) fn join(&mut self, other: Reservation) {
        self.bytes += other.bytes;
        std::mem::forget(other);
    }

    /// An empty reservation, to join others to.
    pub(crate) fn none() -> Reservation {
        Reservation { bytes: 0 }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        IN_USE.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// Reserves `bytes` for `what`, or refuses with
/// [`StoreError::OverBudget`] (nothing reserved).
pub(crate) fn reserve(
    what: impl FnOnce() -> String,
    bytes: u64,
) -> Result<Reservation, StoreError> {
    let Some((limit, source)) = budget() else {
        IN_USE.fetch_add(bytes, Ordering::AcqRel);
        return Ok(Reservation { bytes });
    };
    let mut current = IN_USE.load(Ordering::Acquire);
    loop {
        let after = current.saturating_add(bytes);
        if after > limit {
            return Err(StoreError::OverBudget {
                what: what(),
                bytes,
                budget: limit,
                in_use: current,
                source_of_budget: source,
            });
        }
        match IN_USE.compare_exchange_weak(current, after, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Ok(Reservation { bytes }),
            Err(now) => current = now,
        }
    }
}

/// A zeroed buffer of `len` bytes for `what`, under the budget: the
/// reservation and the allocation, or the error of either.
pub(crate) fn zeroed(
    what: impl FnOnce() -> String,
    len: usize,
) -> Result<(Vec<u8>, Reservation), StoreError> {
    let what = what();
    let r = reserve(|| what.clone(), len as u64)?;
    zeroed_under(what, len, r)
}

/// A zeroed buffer of `len` bytes for `what`, held under `memory` (reserved
/// for it before): for a caller that must know the memory is there before
/// it changes anything.
pub(crate) fn zeroed_under(
    what: String,
    len: usize,
    memory: Reservation,
) -> Result<(Vec<u8>, Reservation), StoreError> {
    let mut v = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|_| StoreError::OutOfMemory {
            table: what,
            bytes: len as u64,
        })?;
    v.resize(len, 0);
    Ok((v, memory))
}

/// A table's bit filter, allocated under the budget (held for as long as
/// the reservation is).
pub(crate) fn bit_filter(
    table: &str,
    params: crate::filter::params::FilterParams,
) -> Result<(crate::filter::bloom::BitFilter, Reservation), StoreError> {
    let r = reserve(
        || format!("the bit filter of table {table:?}"),
        params.bit_bytes(),
    )?;
    let bits =
        crate::filter::bloom::BitFilter::new(params).map_err(|_| StoreError::OutOfMemory {
            table: table.to_string(),
            bytes: params.bit_bytes(),
        })?;
    Ok((bits, r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_add_up_and_are_given_back() {
        // The budget is process-wide: this test works above whatever other
        // tests hold, and leaves it as it found it.
        let before = in_use();
        let a = reserve(|| "a".into(), 1000).unwrap();
        assert_eq!(in_use(), before + 1000);
        drop(a);
        assert_eq!(in_use(), before);
        if let Some((limit, _)) = budget() {
            match reserve(|| "huge".into(), limit + 1) {
                Err(e @ StoreError::OverBudget { .. }) => {
                    let text = e.to_string();
                    assert!(
                        text.contains("huge") && text.contains("--memory-budget"),
                        "{text}"
                    );
                    assert!(!text.contains('\n'));
                }
                other => panic!("{other:?}"),
            }
            assert_eq!(in_use(), before);
        }
    }

    #[test]
    fn the_budget_from_the_environment_is_at_most_three_quarters_of_memavailable() {
        // MemAvailable moves while other processes run: the reading the
        // budget took lies between the two taken around it, unless it
        // swung up and back down between them (CI saw one such swing of
        // 6 MB while the other tests freed memory). So each attempt reads
        // around one budget, and one attempt of 20 must hold: a budget
        // above 3/4 of MemAvailable fails every attempt.
        let mut seen = Vec::new();
        for _ in 0..20 {
            let before = mem_available().unwrap();
            let (bytes, source) = from_environment().unwrap();
            let after = mem_available().unwrap();
            assert!(source.starts_with("3/4 of"), "{source}");
            if bytes <= before.max(after) / 4 * 3 {
                return;
            }
            seen.push(format!(
                "{bytes} {source} (MemAvailable {before}, then {after})"
            ));
        }
        panic!("over 3/4 of MemAvailable in 20 attempts: {seen:?}");
    }
}
