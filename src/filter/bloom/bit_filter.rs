//! [`BitFilter`]: the owned filter of atomic words, with its inserts.

use super::bias::WriteBias;
use super::bulk::{BulkInsert, BulkInsertMut, HashSource, Hashes, Keys};
use super::probe::{prefetch, probe_standard, Alone, Locked};
use super::shadow;
use super::BloomRead;
use crate::error::{FilterError, ParamError};
use crate::filter::hash::KeyHash;
use crate::filter::pages::{advise_huge, Pages};
use crate::filter::params::{FilterParams, WORDS_PER_BLOCK};
use crate::filter::simd::{self, Blocks, InsertArg, InsertFn, LookupFn, SharedBlock, SplitShared};
use std::sync::atomic::{AtomicU64, Ordering};

/// A Bloom filter held in memory, safe to share between threads.
///
/// # Examples
/// ```
/// use filterstore::{BitFilter, FilterParams, HashSpec, Layout};
/// let p = FilterParams::for_capacity(1_000, 0.01, Layout::Blocked, HashSpec::xxh3(7))?;
/// let f = BitFilter::new(p)?;
/// assert!(f.insert(b"apple"), "new bits were set");
/// assert!(!f.insert(b"apple"), "the second insert sets nothing");
/// assert!(f.contains(b"apple"));
/// assert!(!f.contains(b"pear"));
/// assert_eq!(f.contains_many(&[&b"pear"[..], b"apple"]), [false, true]);
/// # Ok::<(), filterstore::ParamError>(())
/// ```
pub struct BitFilter {
    pub(super) params: FilterParams,
    /// `num_blocks()` blocks, each one 64-byte aligned cache line by its
    /// type. A blocked lookup indexes a block (one bounds check, no
    /// alignment test); a standard-layout probe indexes the flat view of
    /// the same words (`SharedBlock::flat`: one bounds check and one load at
    /// `pos / 64`).
    pub(super) blocks: Blocks,
    /// This filter's lookup for this CPU (`filter::simd`).
    lookup: LookupFn<BitFilter>,
    /// This filter's `&mut` insert for this CPU (`filter::simd`).
    insert: InsertFn<BitFilter>,
    /// Whether the kernel took the advice to back the bits with huge pages.
    huge: bool,
    /// Which thread, if one, may OR bits in without locks (`bloom::bias`).
    pub(super) bias: WriteBias,
}

impl std::fmt::Debug for BitFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BitFilter")
            .field("params", &self.params)
            .field("ones", &self.count_ones())
            .finish()
    }
}

impl BloomRead for BitFilter {
    fn params(&self) -> &FilterParams {
        &self.params
    }
    #[inline(always)]
    fn word(&self, i: usize) -> u64 {
        self.atomic_word(i).load(Ordering::Relaxed)
    }
    #[inline(always)]
    fn prefetch_word(&self, i: usize) {
        if let Some(w) = self.words().get(i) {
            prefetch(w);
        }
    }
    #[inline(always)]
    fn standard_has_all(&self, h: KeyHash) -> bool {
        let words = self.words();
        probe_standard(h, self.params.m(), self.params.k(), |i| {
            words[i].load(Ordering::Relaxed)
        })
    }
    #[inline(always)]
    fn block_words(&self, block: usize) -> [u64; WORDS_PER_BLOCK] {
        let b = self.block(block);
        std::array::from_fn(|w| b[w].load(Ordering::Relaxed))
    }
    #[inline(always)]
    fn shared_block(&self, block: usize) -> Option<&SharedBlock> {
        Some(&self.blocks[block])
    }
    #[inline(always)]
    fn shared_blocks(&self) -> Option<&Blocks> {
        Some(&self.blocks)
    }
    #[inline(always)]
    fn shared_split_block(&self, b: usize) -> Option<&SplitShared> {
        Some(&SharedBlock::split_halves(&self.blocks)[b])
    }
    #[inline(always)]
    fn contains(&self, key: &[u8]) -> bool {
        // A 64-bit hash goes to the probe alone (`HashSpec::hash64`).
        self.lookup.key(self, self.params.hash(), key)
    }
    #[inline(always)]
    fn contains_hash(&self, h: KeyHash) -> bool {
        self.lookup.call(self, h)
    }
    fn on_huge_pages(&self) -> bool {
        self.huge
    }
}

impl BitFilter {
    /// An empty filter, on the pages [`Pages::Auto`] chooses (huge pages
    /// from 32 MiB on Linux). Fails only if the memory cannot be allocated.
    pub fn new(params: FilterParams) -> Result<Self, ParamError> {
        BitFilter::with_pages(params, Pages::Auto)
    }

    /// An empty filter on the pages `pages` asks for (`filter::pages`):
    /// huge pages make the TLB cover a filter larger than the caches,
    /// which a lookup of a random block otherwise pays a page walk for.
    /// The answers are the same on either.
    pub fn with_pages(params: FilterParams, pages: Pages) -> Result<Self, ParamError> {
        // `num_blocks() ≤ 2^31` (MAX_M_BITS / 512): fits in usize on every
        // target with a 64-bit address space, and a failed reservation is
        // an error, not an abort.
        let n = params.num_blocks() as usize;
        let mut v: Vec<SharedBlock> = Vec::new();
        v.try_reserve_exact(n)
            .map_err(|_| ParamError::AllocationFailed {
                bytes: params.bit_bytes(),
            })?;
        // Before the first write, so that the faults of `resize_with`
        // already take huge pages.
        let huge = pages.huge_for(params.bit_bytes())
            && advise_huge(v.as_ptr().cast(), n * std::mem::size_of::<SharedBlock>());
        v.resize_with(n, SharedBlock::zeroed);
        Ok(BitFilter::from_parts(params, Blocks::new(v), huge))
    }

    /// A filter of `params` over `blocks` (its `num_blocks()`, or one for
    /// a filter of fewer; `huge`: whether they lie on huge pages), with the
    /// lookup and insert of this CPU and no writer yet.
    pub(super) fn from_parts(params: FilterParams, blocks: Blocks, huge: bool) -> BitFilter {
        BitFilter {
            params,
            blocks,
            lookup: LookupFn::best(params.layout(), params.hash().algo, params.k()),
            insert: InsertFn::best(params.layout(), params.hash().algo, params.k()),
            huge,
            bias: WriteBias::default(),
        }
    }

    /// The parameters, blocks and huge-page flag that
    /// [`BitFilter::from_parts`] takes.
    pub(super) fn into_parts(self) -> (FilterParams, Blocks, bool) {
        (self.params, self.blocks, self.huge)
    }

    /// Where the bits start (for the page tests).
    #[cfg(test)]
    pub(crate) fn words_ptr(&self) -> *const u64 {
        self.blocks.as_ptr().cast()
    }

    /// A filter holding the given words (as produced by [`BitFilter::to_words`]).
    pub fn from_words(params: FilterParams, words: &[u64]) -> Result<Self, FilterError> {
        if words.len() != params.num_words() {
            return Err(FilterError::LengthMismatch {
                expected: params.bit_bytes(),
                found: words.len() as u64 * 8,
            });
        }
        let f = BitFilter::new(params).map_err(|_| FilterError::LengthMismatch {
            expected: params.bit_bytes(),
            found: 0,
        })?;
        for (i, w) in words.iter().enumerate() {
            f.store_word(i, *w);
        }
        Ok(f)
    }

    /// Whether `key` may be in the set (inherent shortcut for [`BloomRead::contains`]).
    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        BloomRead::contains(self, key)
    }

    /// Batched lookup (inherent shortcut for [`BloomRead::contains_many`]).
    pub fn contains_many<K: AsRef<[u8]>>(&self, keys: &[K]) -> Vec<bool> {
        BloomRead::contains_many(self, keys)
    }

    /// Adds `key`. Returns `true` if at least one of its bits was clear when
    /// this insert read it, so `false` means the key was already reported
    /// as present. Two threads inserting the same new key at once may both
    /// get `true`: each reads the bits before it sets them. The first thread
    /// to write a filter holds its write bias (`bloom::bias`) and sets bits
    /// with plain atomic loads and stores, no locked instruction, until a
    /// second thread writes it (once: the second thread waits for the
    /// first's write in progress, under a microsecond). From then on the
    /// blocked and split-block layouts set a key's block under a spin lock
    /// shared by a few blocks (held for its words' loads and stores, never
    /// by a reader), the standard layout with an atomic OR per word.
    #[inline(always)]
    pub fn insert(&self, key: &[u8]) -> bool {
        // A 64-bit hash goes to the insert alone (`HashSpec::hash64`).
        // Always inlined: with the two arms `#[inline]` was not, and with
        // the call more a shared insert of a `u64` id took 8.7–9.5 ns
        // against 5.8–6.8 inlined (peers bench, 1M).
        match self.params.hash().hash64(key) {
            Some(h) => self.insert_arg(h),
            None => self.insert_arg(self.params.hash().hash(key)),
        }
    }

    /// [`BitFilter::insert`] into a filter no other thread can see
    /// (`&mut`): the same bits and the same answer, written with plain
    /// loads and stores instead of atomic read-modify-writes. A locked
    /// read-modify-write is a full barrier on x86-64 (no later load starts
    /// before it completes), so key-by-key shared inserts into a filter
    /// larger than the cache wait for each key's cache miss in turn; these
    /// overlap them, as the insert loops of exclusive-access filters do.
    #[inline(always)]
    pub fn insert_mut(&mut self, key: &[u8]) -> bool {
        let insert = self.insert;
        match self.params.hash().hash64(key) {
            Some(h) => insert.call(self, h),
            None => insert.call(self, self.params.hash().hash(key)),
        }
    }

    /// [`BitFilter::insert_mut`] for a key already hashed with this filter's spec.
    #[inline]
    pub fn insert_hash_mut(&mut self, h: KeyHash) -> bool {
        let insert = self.insert;
        insert.call(self, h)
    }

    /// [`BitFilter::insert`] for a key already hashed with this filter's spec.
    ///
    /// A locked read-modify-write is a full barrier on x86-64: no later
    /// load starts before it completes. Hence (1) a block (the blocked and
    /// split-block layouts: one locked instruction for its stripe lock,
    /// `bloom::stripes`) or a word (the standard layout) is read first and
    /// only written if it lacks a bit (a key inserted twice, or whose bits
    /// other keys already set, costs no locked operation), and (2) the
    /// standard layout prefetches its k lines before the first write, so
    /// the k misses overlap instead of queueing behind each barrier.
    /// Skipping a write whose bits are already set is safe: bits are only
    /// cleared by `clear`, `intersect_with` and the counting layer's
    /// removals, which the store orders under its page locks, and any
    /// lookup that happens after this insert sees what this read saw. The
    /// insert is compiled per layout and probe and called through the
    /// filter's pointer (`filter::simd::InsertFn::call_shared`, or
    /// `call_owned` for the holder of the write bias, which takes no lock
    /// and no locked instruction: `bloom::bias`), as `insert_mut` is.
    #[inline]
    pub fn insert_hash(&self, h: KeyHash) -> bool {
        self.insert_arg(h)
    }

    /// [`BitFilter::insert_hash`] of a [`KeyHash`] or of a key's one
    /// 64-bit hash ([`crate::filter::hash::HashArg`]).
    #[inline(always)]
    fn insert_arg<H: InsertArg>(&self, h: H) -> bool {
        let insert = self.insert;
        match self.bias.owned() {
            Some(_owned) => insert.call_owned(self, h),
            None => insert.call_shared(self, h),
        }
    }

    /// Adds every key of `keys` to a filter that may be shared: the same
    /// bits as one [`BitFilter::insert`] per key. Each key is hashed and its
    /// line prefetched 16 keys (`INSERT_AHEAD`) before its bits are set, so
    /// the cache misses of many inserts overlap. A batch of at least one key
    /// per 32 bytes of filter is inserted into a private copy with plain
    /// stores, and the copy ORed back with one atomic OR per word that
    /// gained a bit (a blocked filter: its blocks under their locks, as
    /// [`BitFilter::insert`] writes them), instead of one per word per key: the copy costs the
    /// filter's bytes for the duration of the call, and lookups meanwhile
    /// see the batch's bits appear when it is merged (a key is guaranteed
    /// present once this returns, as always). Returns how many keys found
    /// at least one of their bits clear (as [`BitFilter::insert`] counts
    /// them when no other thread writes meanwhile).
    pub fn insert_many<K: AsRef<[u8]>>(&self, keys: &[K]) -> u64 {
        self.insert_shared(Keys(keys))
    }

    /// [`BitFilter::insert_many`] for keys already hashed with this filter's spec.
    pub fn insert_hashes(&self, hashes: &[KeyHash]) -> u64 {
        self.insert_shared(Hashes(hashes))
    }

    /// The shared bulk insert of `src`: through a private copy merged back
    /// with one locked OR per changed word (a blocked filter: one lock per
    /// changed block) when the batch is dense enough (`bloom::shadow`),
    /// else key by key (`WordOr::or_block`, `bloom::stripes`).
    fn insert_shared<S: HashSource>(&self, src: S) -> u64 {
        self.bias.claim();
        let p = self.params;
        if shadow::worth_copying(&p, src.count()) {
            if let Ok(mut copy) = self.try_clone() {
                let changed = simd::dispatch(BulkInsertMut {
                    p,
                    blocks: &mut copy.blocks,
                    src,
                });
                shadow::merge(&copy.blocks, &self.blocks, p.layout());
                return changed;
            }
        }
        simd::dispatch(BulkInsert {
            p,
            blocks: &self.blocks,
            src,
            or: Locked,
        })
    }

    /// [`BitFilter::insert_hashes`] for a filter that no other thread writes
    /// while this runs (lookups may): the same bits, each word written with
    /// a plain store where it lacks one ([`Alone`]), no locked instruction.
    /// The store calls it for a generation's bits under that generation's
    /// writer lock, which every write of those bits holds.
    #[cfg_attr(not(feature = "store"), allow(dead_code))]
    pub(crate) fn insert_hashes_one_writer(&self, hashes: &[KeyHash]) -> u64 {
        simd::dispatch(BulkInsert {
            p: self.params,
            blocks: &self.blocks,
            src: Hashes(hashes),
            or: Alone,
        })
    }

    /// Adds every key of `keys` to a filter no other thread can see yet
    /// (`&mut`: a bulk build, an import, a regeneration): the same bits as
    /// one [`BitFilter::insert`] per key, written with plain loads and
    /// stores instead of atomic read-modify-writes, each key's line
    /// prefetched 16 keys (`INSERT_AHEAD`) before its bits are set.
    pub fn insert_many_mut<K: AsRef<[u8]>>(&mut self, keys: &[K]) {
        simd::dispatch(BulkInsertMut {
            p: self.params,
            blocks: &mut self.blocks,
            src: Keys(keys),
        });
    }

    /// [`BitFilter::insert_many_mut`] for keys already hashed with this filter's spec.
    pub fn insert_hashes_mut(&mut self, hashes: &[KeyHash]) {
        simd::dispatch(BulkInsertMut {
            p: self.params,
            blocks: &mut self.blocks,
            src: Hashes(hashes),
        });
    }

    /// Sets bit `pos`; returns whether it was clear. `pos < m`.
    #[inline]
    #[cfg_attr(not(feature = "store"), allow(dead_code))]
    pub(crate) fn set_bit(&self, pos: u64) -> bool {
        let bit = 1u64 << (pos % 64);
        self.atomic_word((pos / 64) as usize)
            .fetch_or(bit, Ordering::Relaxed)
            & bit
            == 0
    }

    /// Whether bit `pos` is set.
    pub fn bit(&self, pos: u64) -> bool {
        self.word((pos / 64) as usize) & (1 << (pos % 64)) != 0
    }

    /// Overwrites word `i` (used when deriving the filter from counters).
    pub(crate) fn store_word(&self, i: usize, w: u64) {
        self.atomic_word(i).store(w, Ordering::Relaxed);
    }

    /// Word `i` (`< num_words()`).
    #[inline(always)]
    pub(super) fn atomic_word(&self, i: usize) -> &AtomicU64 {
        &self.words()[i]
    }

    /// Every word, in order.
    #[inline(always)]
    fn words(&self) -> &[AtomicU64] {
        SharedBlock::flat(&self.blocks)
    }

    /// The eight words of block `block` (one cache line).
    #[inline(always)]
    fn block(&self, block: usize) -> &[AtomicU64; WORDS_PER_BLOCK] {
        &self.blocks[block].0
    }

    /// Sets every bit below `m` (the filter then answers "maybe" for every
    /// key: what a table whose keys are not all known must answer).
    #[cfg_attr(not(feature = "store"), allow(dead_code))]
    pub(crate) fn set_all(&self) {
        let m = self.params.m();
        for (i, w) in self.words().iter().enumerate() {
            let first = i as u64 * 64;
            let word = match m.saturating_sub(first) {
                0 => 0,
                n if n >= 64 => u64::MAX,
                n => (1u64 << n) - 1,
            };
            w.store(word, Ordering::Relaxed);
        }
    }

    /// Clears every bit.
    pub fn clear(&self) {
        for w in self.words() {
            w.store(0, Ordering::Relaxed);
        }
    }

    /// A snapshot of the words (concurrent inserts may or may not be included).
    pub fn to_words(&self) -> Vec<u64> {
        (0..self.params.num_words()).map(|i| self.word(i)).collect()
    }

    /// The bit array as little-endian bytes, padding included.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.params.bit_bytes() as usize);
        for i in 0..self.params.num_words() {
            out.extend_from_slice(&self.word(i).to_le_bytes());
        }
        out
    }

    /// A copy of this filter.
    pub fn try_clone(&self) -> Result<BitFilter, ParamError> {
        let f = BitFilter::new(self.params)?;
        for i in 0..self.params.num_words() {
            f.store_word(i, self.word(i));
        }
        Ok(f)
    }
}
