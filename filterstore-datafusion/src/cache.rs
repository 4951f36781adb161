//! The process-wide cache of decoded filters.
//!
//! `bloom_contains(<message literal>, key)` is evaluated once per batch
//! (8,192 rows by default), in every task of every query. Decoding an
//! entropy-coded message costs about 4 ns per byte of filter (the core's
//! decoder runs at ~250 MB/s of filter: a 5 KB message of a 40,000-bit
//! filter decodes in ~20 µs), so decoding per batch would spend more time on
//! the filter than on the lookups. DataFusion offers no per-query state a
//! scalar function could keep it in: worker sessions, and with them every
//! UDF instance, are rebuilt for each call. Hence one cache per process,
//! keyed by a 128-bit hash of the whole message (the frame's CRC32 alone is
//! 32 bits: two messages of a busy server could share one), holding each
//! decoded filter once, bounded in bytes, least recently used out first.
//!
//! A message whose decoded filter alone exceeds the budget is an error: the
//! cache never silently falls back to decoding per batch, and a query never
//! answers from a filter it could not hold.

use crate::error::{BloomUdfError, Result};
use filterstore::{decode_message_with_limit, ExchangeError};
use filterstore::{BitFilter, BloomRead};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use xxhash_rust::xxh3::xxh3_128;

/// Default budget: 256 MiB of decoded filters per process (a 1%-FP filter
/// of 200M keys, or thousands of typical semi-join filters).
pub const DEFAULT_CACHE_BUDGET: u64 = 256 << 20;

/// A decoded message: its filter.
#[derive(Debug)]
pub(crate) struct DecodedFilter {
    /// The filter, owned, queryable from any thread.
    pub filter: BitFilter,
}

struct Entry {
    filter: Arc<DecodedFilter>,
    bytes: u64,
    last_used: u64,
}

struct Cache {
    budget: u64,
    used: u64,
    tick: u64,
    map: HashMap<u128, Entry>,
}

static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(|| {
    Mutex::new(Cache {
        budget: DEFAULT_CACHE_BUDGET,
        used: 0,
        tick: 0,
        map: HashMap::new(),
    })
});
static HITS: AtomicU64 = AtomicU64::new(0);
static DECODES: AtomicU64 = AtomicU64::new(0);

/// Counters of the process-wide cache, for tests and monitoring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheStats {
    /// Filters held.
    pub entries: usize,
    /// Bytes of decoded filters held.
    pub bytes: u64,
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Messages decoded (cache misses).
    pub decodes: u64,
    /// The budget in force.
    pub budget: u64,
}

/// The cache's counters now.
///
/// ```
/// use filterstore_datafusion::{cache_stats, clear_cache, set_cache_budget};
///
/// set_cache_budget(64 << 20); // at most 64 MiB of decoded filters
/// let before = cache_stats();
/// assert_eq!(before.budget, 64 << 20);
/// assert!(before.bytes <= before.budget);
/// clear_cache();
/// assert_eq!(cache_stats().entries, 0);
/// ```
pub fn cache_stats() -> CacheStats {
    let c = CACHE.lock();
    CacheStats {
        entries: c.map.len(),
        bytes: c.used,
        hits: HITS.load(Ordering::Relaxed),
        decodes: DECODES.load(Ordering::Relaxed),
        budget: c.budget,
    }
}

/// Sets the budget in bytes of decoded filters, evicting what no longer fits.
pub fn set_cache_budget(bytes: u64) {
    let mut c = CACHE.lock();
    c.budget = bytes;
    c.evict_to(bytes);
}

/// Empties the cache (counters are kept).
pub fn clear_cache() {
    let mut c = CACHE.lock();
    c.map.clear();
    c.used = 0;
}

impl Cache {
    fn evict_to(&mut self, target: u64) {
        while self.used > target {
            let Some((&key, _)) = self.map.iter().min_by_key(|(_, e)| e.last_used) else {
                break;
            };
            if let Some(e) = self.map.remove(&key) {
                self.used -= e.bytes;
            }
        }
    }
}

/// The decoded filter of `bytes`, from the cache or decoded once and cached.
/// Errors: unreadable message, delta message, or a filter over the budget.
pub(crate) fn decoded(function: &'static str, bytes: &[u8]) -> Result<Arc<DecodedFilter>> {
    decoded_keyed(function, xxh3_128(bytes), bytes)
}

/// [`decoded`] for a caller that already holds the message's 128-bit XXH3
/// (`key`), as a plan node that looks its filter up once per partition.
pub(crate) fn decoded_keyed(
    function: &'static str,
    key: u128,
    bytes: &[u8],
) -> Result<Arc<DecodedFilter>> {
    let budget = {
        let mut c = CACHE.lock();
        c.tick += 1;
        let tick = c.tick;
        if let Some(e) = c.map.get_mut(&key) {
            e.last_used = tick;
            HITS.fetch_add(1, Ordering::Relaxed);
            return Ok(Arc::clone(&e.filter));
        }
        c.budget
    };
    // Decoded outside the lock: a slow decode never stalls other queries'
    // lookups. Two threads missing at once may both decode; one insert wins.
    let decoded = Arc::new(decode(function, bytes, budget)?);
    DECODES.fetch_add(1, Ordering::Relaxed);
    let size = decoded.filter.params().bit_bytes();
    let mut c = CACHE.lock();
    c.tick += 1;
    let tick = c.tick;
    let budget = c.budget;
    if !c.map.contains_key(&key) {
        c.evict_to(budget.saturating_sub(size));
        c.used += size;
        c.map.insert(
            key,
            Entry {
                filter: Arc::clone(&decoded),
                bytes: size,
                last_used: tick,
            },
        );
    }
    Ok(decoded)
}

/// Decodes a message without the cache, refusing filters over `budget` bytes
/// before anything is allocated.
pub(crate) fn decode(function: &'static str, bytes: &[u8], budget: u64) -> Result<DecodedFilter> {
    let max_bits = budget.saturating_mul(8);
    let msg = decode_message_with_limit(bytes, max_bits).map_err(|e| match e {
        ExchangeError::TooLarge { m, .. } => BloomUdfError::OverBudget {
            function,
            needed: m.div_ceil(8),
            budget,
        },
        source => BloomUdfError::Unreadable { function, source },
    })?;
    if msg.is_delta() {
        return Err(BloomUdfError::DeltaMessage { function }.into());
    }
    let needed = msg.params().bit_bytes();
    if needed > budget {
        return Err(BloomUdfError::OverBudget {
            function,
            needed,
            budget,
        }
        .into());
    }
    let unreadable = |source| BloomUdfError::Unreadable { function, source };
    let filter = msg
        .filter()
        .map_err(unreadable)?
        .into_owned()
        .map_err(|e| unreadable(ExchangeError::Param(e)))?;
    Ok(DecodedFilter { filter })
}
