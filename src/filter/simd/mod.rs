//! One of the four modules with `unsafe` (the others, `filter::pages`,
//! `filter::barrier` and `store::disk::sys`, make FFI calls: `sysconf`,
//! `madvise`, `membarrier`, `fallocate` and `sync_file_range`): the AVX2
//! block probe, its dispatch, and the flat view of a filter's aligned
//! blocks.
//!
//! # What it computes
//! Exactly what [`scalar_block_has_all`] computes, which is the blocked
//! layout of docs/FORMAT.md §6: probe `i` of a key is bit
//! `(h2 · SALT[i]) >> 55` of its 512-bit block. The AVX2 path takes eight
//! probes per step:
//!
//! * **Positions.** AVX2 has no 64-bit multiply, but only the top 9 bits of
//!   the 64-bit product are needed, and the high half of a wrapping 64-bit
//!   product is `hi32(h_lo·s_lo) + lo32(h_lo·s_hi) + lo32(h_hi·s_lo)` modulo
//!   2^32 (the `h_hi·s_hi` term only reaches bit 64 and above). That is two
//!   `vpmulld` for the cross terms of eight salts and two `vpmuludq` for the
//!   high halves of the eight low products.
//! * **Test.** The block is sixteen 32-bit lanes in two registers; position
//!   `p` is bit `p % 32` of lane `p / 32`. `vpermd` on both registers and a
//!   blend on bit 8 of `p` bring each probe's lane into place, a variable
//!   right shift by `p % 32` moves the probed bit to bit 0, and one
//!   `vptest` against a mask of the live lanes' bit 0 (the first `k` of a
//!   row of eight, all eight in the full rows of `k > 8`) answers all of
//!   them (it replaced a shift to the sign, `vmovmskps` and five scalar
//!   instructions to ignore the lanes past `k`: 94 → 92 instructions per
//!   lookup).
//!
//! * **Sectorized positions** (the blocked layout hashed with XXH3-64
//!   sectorized, `hash::sector_masks`; `avx2/sectors.rs`). Sector `i` is
//!   lane `i` of both registers, so no probe moves a lane: one `vpmulld`
//!   for the eight products, two shifts and one `vpsllvd` of 1 for each
//!   sector's bit in its word, a blend of each sector's word out of the
//!   two registers by the product's sign, and one `vptest` answer a
//!   lookup; an insert splits the bits into the two registers' masks by
//!   that sign (an AND and an ANDN) and ORs them in. Positions anywhere
//!   in the block take two `vpermd` and a blend per eight (lookups) and
//!   two loads and two ORs per position (inserts).
//! * **Masks (inserts).** An insert ORs its key's word masks into the
//!   block. The AVX2 probe reads them from a table of one-hot windows
//!   (`avx2/masks.rs`): the 64 bytes of one of eight 128-byte tables
//!   from a byte that depends on the position are the block with that
//!   position alone set, so each position is two 32-byte loads and two
//!   ORs. It replaced about eight vector instructions per position in registers
//!   (a broadcast, and per register a subtract and a `vpsllvd` of 1), about
//!   four of them on the two pipes of this Zen 4 that shift and shuffle. The
//!   masks never go through memory a word at a time: a scatter of 8-byte
//!   ORs read back by 32-byte loads is not store-forwarded and stalls each
//!   insert (`docs/BENCHMARKS.md`).
//!
//! That is about 23 instructions for up to eight probes where the scalar
//! loop spends nine per probe (63 at k = 7): fewer instructions per lookup
//! is more lookups in the reorder buffer, hence more cache misses in flight
//! (see `bloom` module docs).
//!
//! # Why this is sound
//! * **Dispatch.** The CPU is asked once ([`Isa::detect`], cached in an
//!   atomic); [`avx2::Avx2`] values exist only after it answered yes, so every
//!   intrinsic below runs on a CPU that has every feature those functions enable (AVX, AVX2, BMI1, BMI2, POPCNT). Code that uses
//!   the probe is written once, generic over [`Probe`], and instantiated
//!   twice: inside [`run_avx2`] or [`lookup_avx2`], compiled with the
//!   features enabled, and inside the baseline build. A [`LookupFn`] holds
//!   a pointer to `lookup_avx2` only if it was made after that answer.
//! * **Memory.** A block of a shared [`crate::BitFilter`], which other
//!   threads may be setting bits in through atomics, is read by four
//!   aligned 16-byte `VMOVDQA` loads in `asm!` ([`SharedBlock`]; every
//!   `asm!` of the probe is in `avx2/asm.rs`, each with its SAFETY
//!   argument), never by a
//!   Rust vector load (that would be a data race in Rust's memory model).
//!   The asm's effect is one that Rust code with relaxed `AtomicU64` loads
//!   could have: every CPU with AVX performs such a load as one atomic
//!   access (Intel SDM Vol. 3A §9.1.1), so each word is read whole. Lookups
//!   need no more than relaxed loads (`bloom` module docs). Before this, the
//!   eight words were copied out with relaxed loads and moved into two
//!   registers: 20 instructions where the asm takes 6 (callgrind, 10M
//!   keys: 162 → 142 instructions per lookup; 134 since the blocks are
//!   aligned by their type, [`SharedBlock`]; 128 with the one-row probe of
//!   `k ≤ 8`). Blocks of a borrowed
//!   [`crate::FilterView`] are plain bytes that no one writes while they
//!   are borrowed, read by two unaligned 32-byte loads. A shared insert
//!   reads its block the same way as a lookup first
//!   ([`Probe::shared_block_lacks`]), and writes it under its line's
//!   stripe lock with relaxed atomic stores (`bloom::stripes`). The holder
//!   of a filter's write bias (`bloom::bias`), which no other thread
//!   writes beside, reads its block by two aligned 32-byte loads in
//!   `asm!` (no word can change under them) and writes it by four 16-byte
//!   `VMOVDQA` stores, each one atomic access
//!   ([`Probe::shared_block_or_alone`]).
//!
//! * **The flat view.** A [`crate::BitFilter`] keeps its bits as a slice of
//!   [`SharedBlock`]s; [`SharedBlock::flat`] reads the same memory as one
//!   slice of words, which a block is exactly (`repr(C)`, size asserted at
//!   compile time). Tested against indexing block by block
//!   (`flat_view_matches_block_indexing`).
//!
//! * **The block of a hash.** [`Blocks`] holds a filter's blocks, never
//!   none; [`Blocks::of_hash`] indexes block `⌊h1·n / 2^64⌋` of its `n`
//!   without a bounds check, which that bound keeps below `n`. Tested
//!   against the checked index at the extremes of `h1` (`blocks::tests`)
//!   and, through every compiled blocked lookup, against the reference
//!   positions (`every_compiled_lookup_matches_the_reference`).
//!
//! * **Split-block layout** (Parquet's SBBF, `filter::split`). A block is
//!   eight 32-bit lanes, exactly one AVX2 register: `vpmulld` of the
//!   broadcast lower hash half by the eight salts, a shift by 27 and a
//!   variable shift of 1 make the eight lane masks, and one `vptest` of the
//!   block against them answers (CF: no mask bit is clear in the block).
//!   A block of a shared filter is read by two aligned 16-byte `VMOVDQA`
//!   in `asm!`, for the reason given above (**Memory**); an insert into a filter held
//!   `&mut` ORs the masks into the block with plain vector loads and
//!   stores, which exclusive access makes race-free.
//!
//! Tested against the scalar probe in `tests/filter/simd.rs` (proptest over
//! `k = 1..=32`, all-ones, all-zeros and single-bit blocks, adversarial
//! `h2`) and under concurrent inserts.

use crate::filter::geometry::{BLOCK_BYTES, MAX_K, SPLIT_K, WORDS_PER_BLOCK};
use crate::filter::hash::{in_block_masks, in_block_position, sector_masks};
use crate::filter::split::{split_masks, split_word_masks};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// A block probe: whether the `k` in-block positions of `h2` are all set
/// in `words`. Implemented by [`Scalar`] and (on x86-64) [`avx2::Avx2`].
pub(crate) trait Probe: Copy {
    /// Whether every position is set.
    fn block_has_all(self, words: &[u64; WORDS_PER_BLOCK], h2: u64, k: u32) -> bool;

    /// [`Probe::block_has_all`] of a block that other threads may be
    /// setting bits in: each word is read as a relaxed atomic load would
    /// read it (or as a stronger load).
    #[inline(always)]
    fn shared_block_has_all(self, block: &SharedBlock, h2: u64, k: u32) -> bool {
        let words = std::array::from_fn(|w| block.0[w].load(Ordering::Relaxed));
        self.block_has_all(&words, h2, k)
    }

    /// [`Probe::shared_block_has_all`] of `h2 = x << 32` (the blocked
    /// layout hashed with XXH3-64, `filter::hash`), whose positions are the
    /// top 9 bits of the 32-bit products `x · lo32(SALT[i])`. The same
    /// answer; the AVX2 probe computes the positions with one multiply.
    #[inline(always)]
    fn shared_block_has_all32(self, block: &SharedBlock, x: u32, k: u32) -> bool {
        self.shared_block_has_all(block, u64::from(x) << 32, k)
    }

    /// [`Probe::block_has_all`] of a block held as its 64 bytes
    /// (little-endian words, as in a borrowed bitset: [`FilterView`]). The
    /// AVX2 probe reads them with two vector loads, where copying the words
    /// out took a lookup of a view to 1.6× sbbf-rs-safe's time.
    ///
    /// [`FilterView`]: crate::FilterView
    #[inline(always)]
    fn bytes_block_has_all(self, bytes: &[u8; BLOCK_BYTES], h2: u64, k: u32) -> bool {
        self.block_has_all(&le_words(bytes), h2, k)
    }

    /// [`Probe::bytes_block_has_all`] of `h2 = x << 32`, as
    /// [`Probe::shared_block_has_all32`].
    #[inline(always)]
    fn bytes_block_has_all32(self, bytes: &[u8; BLOCK_BYTES], x: u32, k: u32) -> bool {
        self.bytes_block_has_all(bytes, u64::from(x) << 32, k)
    }

    /// The word masks of a key's `k` in-block positions (bit `p % 64` of
    /// word `p / 64` for each position `p`): what an insert ORs into its
    /// block. The scalar probe's are `hash::in_block_masks`, the reference;
    /// the AVX2 probe builds the same the `way` given ([`MaskWay`]), never
    /// by a scatter through memory.
    #[inline(always)]
    fn block_masks(self, h2: u64, k: u32, way: MaskWay) -> [u64; WORDS_PER_BLOCK] {
        let _ = way;
        in_block_masks(h2, k)
    }

    /// [`Probe::block_masks`] of `h2 = x << 32` (the blocked layout hashed
    /// with XXH3-64): the positions are the top 9 bits of the 32-bit
    /// products `x · lo32(SALT[i])`, which the AVX2 probe computes with one
    /// `vpmulld`.
    #[inline(always)]
    fn block_masks32(self, x: u32, k: u32, way: MaskWay) -> [u64; WORDS_PER_BLOCK] {
        self.block_masks(u64::from(x) << 32, k, way)
    }

    /// The word masks of a sectorized key's eight positions (the blocked
    /// layout hashed with XXH3-64 sectorized; `x = lo32(h)`): what its
    /// insert ORs into its block. The scalar probe's are
    /// `hash::sector_masks`, the reference; the AVX2 probe builds them with
    /// one `vpmulld` and two `vpsllvd`, one per half of the block.
    #[inline(always)]
    fn sector_masks(self, x: u32) -> [u64; WORDS_PER_BLOCK] {
        sector_masks(x)
    }

    /// Whether the eight sector bits of `x` ([`Probe::sector_masks`]) are
    /// all set in `words`.
    #[inline(always)]
    fn sectors_has_all(self, words: &[u64; WORDS_PER_BLOCK], x: u32) -> bool {
        let mut missing = 0;
        for (word, mask) in words.iter().zip(self.sector_masks(x)) {
            missing |= mask & !word;
        }
        missing == 0
    }

    /// [`Probe::sectors_has_all`] of a block that other threads may be
    /// setting bits in, read as [`Probe::shared_block_has_all`] reads it.
    #[inline(always)]
    fn shared_sectors_has_all(self, block: &SharedBlock, x: u32) -> bool {
        let words = std::array::from_fn(|w| block.0[w].load(Ordering::Relaxed));
        self.sectors_has_all(&words, x)
    }

    /// [`Probe::sectors_has_all`] of a block held as its 64 bytes, as
    /// [`Probe::bytes_block_has_all`] reads it.
    #[inline(always)]
    fn bytes_sectors_has_all(self, bytes: &[u8; BLOCK_BYTES], x: u32) -> bool {
        self.sectors_has_all(&le_words(bytes), x)
    }

    /// Whether a bit of `masks` is clear in a block that other threads may
    /// be setting bits in (each word read as a relaxed atomic load would
    /// read it): the first read of a shared insert, which takes its block's
    /// lock only when this says yes. The AVX2 probe reads the block as
    /// [`Probe::shared_block_has_all`] does and tests it with two `vptest`.
    #[inline(always)]
    fn shared_block_lacks(self, block: &SharedBlock, masks: &[u64; WORDS_PER_BLOCK]) -> bool {
        lacks(&block.0, masks)
    }

    /// [`Probe::shared_block_lacks`] of a split block.
    #[inline(always)]
    fn shared_split_lacks(self, block: &SplitShared, masks: &[u64; 4]) -> bool {
        lacks(&block.0, masks)
    }

    /// ORs `masks` into a block that other threads may read but no other
    /// thread writes meanwhile (the owner of a filter's write bias,
    /// `bloom::bias`); whether one of their bits was clear. Each word is
    /// read and written as relaxed atomic accesses would, with no locked
    /// instruction, and written only if a bit was clear. The AVX2 probe
    /// reads the block with two 32-byte loads (no word can change under
    /// them: no other thread writes the block) and stores it with four
    /// 16-byte stores, each one atomic access, for the readers.
    #[inline(always)]
    fn shared_block_or_alone(self, block: &SharedBlock, masks: &[u64; WORDS_PER_BLOCK]) -> bool {
        or_alone(&block.0, masks)
    }

    /// [`Probe::shared_block_or_alone`] of a split block.
    #[inline(always)]
    fn shared_split_or_alone(self, block: &SplitShared, masks: &[u64; 4]) -> bool {
        or_alone(&block.0, masks)
    }

    /// ORs `masks` into a block no other thread can reach; whether one of
    /// their bits was clear. The AVX2 probe reads, tests and writes the
    /// block as two registers.
    #[inline(always)]
    fn block_or_mut(self, block: &mut SharedBlock, masks: [u64; WORDS_PER_BLOCK]) -> bool {
        let mut clear = 0;
        for (word, mask) in block.0.iter_mut().zip(masks) {
            let word = word.get_mut();
            clear |= !*word & mask;
            *word |= mask;
        }
        clear != 0
    }

    /// Whether the eight lane bits of `x` (the lower half of a split-block
    /// hash) are all set in the split block whose lanes are `lanes`.
    #[inline(always)]
    fn split_has_all(self, lanes: &[u32; SPLIT_K as usize], x: u32) -> bool {
        scalar_split_has_all(lanes, x)
    }

    /// [`Probe::split_has_all`] of a split block held as its 32 bytes
    /// (little-endian lanes, as in a borrowed bitset).
    #[inline(always)]
    fn bytes_split_has_all(self, bytes: &[u8; 32], x: u32) -> bool {
        let lanes = std::array::from_fn(|i| {
            u32::from_le_bytes([
                bytes[4 * i],
                bytes[4 * i + 1],
                bytes[4 * i + 2],
                bytes[4 * i + 3],
            ])
        });
        self.split_has_all(&lanes, x)
    }

    /// [`Probe::split_has_all`] of a split block of a shared filter: each
    /// word read as a relaxed atomic load would read it (or stronger).
    #[inline(always)]
    fn shared_split_has_all(self, block: &SplitShared, x: u32) -> bool {
        let lanes = std::array::from_fn(|i| {
            (block.0[i / 2].load(Ordering::Relaxed) >> (32 * (i % 2))) as u32
        });
        self.split_has_all(&lanes, x)
    }

    /// The lane masks of `x` as the block's four 64-bit words: what a
    /// shared insert ORs in (`split::split_word_masks`).
    #[inline(always)]
    fn split_word_masks(self, x: u32) -> [u64; 4] {
        split_word_masks(x)
    }

    /// ORs the lane masks of `x` into a block no other thread can reach;
    /// returns whether one of the bits was clear.
    #[inline(always)]
    fn split_insert_mut(self, block: &mut SplitShared, x: u32) -> bool {
        let mut changed = false;
        for (word, mask) in block.0.iter_mut().zip(split_word_masks(x)) {
            let w = word.get_mut();
            changed |= *w & mask != mask;
            *w |= mask;
        }
        changed
    }
}

/// The reference split-block probe (also the fallback): every lane tested,
/// accumulated without a branch.
#[inline(always)]
#[cfg_attr(not(feature = "test-internals"), allow(unreachable_pub))]
pub fn scalar_split_has_all(lanes: &[u32; SPLIT_K as usize], x: u32) -> bool {
    let mut all = true;
    for (lane, mask) in lanes.iter().zip(split_masks(x)) {
        all &= lane & mask != 0;
    }
    all
}

/// Word `pos / 64` of a block and bit `pos % 64` in it, for an in-block
/// position (`pos < 512`: the `& 7` spares a bounds check that the compiler
/// cannot see past the AVX2 probe's vector store).
#[inline(always)]
pub(crate) fn block_word_bit(pos: u32) -> (usize, u64) {
    debug_assert!(pos < 512, "in-block position {pos}");
    ((pos / 64) as usize & 7, 1 << (pos % 64))
}

/// The scalar [`Probe::shared_block_or_alone`]: every word read, and if
/// one lacks a bit of its mask, every word stored with its mask, by
/// relaxed atomic accesses. One branch, not one per word: which of a key's
/// words lack a bit is unpredictable (a branch per word made the
/// split-block layout's insert 7.3 → 12.6 ns per `u64` id, `peers` bench
/// at 1M).
#[inline(always)]
fn or_alone<const N: usize>(words: &[AtomicU64; N], masks: &[u64; N]) -> bool {
    let old: [u64; N] = std::array::from_fn(|i| words[i].load(Ordering::Relaxed));
    let clear = (0..N).fold(0, |clear, i| clear | !old[i] & masks[i]);
    if clear != 0 {
        for ((word, old), mask) in words.iter().zip(old).zip(masks) {
            word.store(old | mask, Ordering::Relaxed);
        }
    }
    clear != 0
}

/// Whether a bit of `masks` is clear in `words`, each read with a relaxed
/// load (the scalar [`Probe::shared_block_lacks`]).
#[inline(always)]
fn lacks<const N: usize>(words: &[AtomicU64; N], masks: &[u64; N]) -> bool {
    let mut clear = 0;
    for (word, mask) in words.iter().zip(masks) {
        clear |= !word.load(Ordering::Relaxed) & mask;
    }
    clear != 0
}

/// Work that runs with the best probe this CPU supports: its `run` is
/// instantiated once per probe, inside a function compiled for it.
pub(crate) trait Job {
    /// What the work returns.
    type Out;
    /// Does the work with `probe`. Implementations are `#[inline(always)]`,
    /// so that they are compiled inside [`run_avx2`] with its features.
    fn run<P: Probe>(self, probe: P) -> Self::Out;
}

/// The portable probe: one multiply, shift and load per position,
/// accumulated without branches.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scalar;

impl Probe for Scalar {
    #[inline(always)]
    fn block_has_all(self, words: &[u64; WORDS_PER_BLOCK], h2: u64, k: u32) -> bool {
        scalar_block_has_all(words, h2, k)
    }
}

/// The eight little-endian words of a block's 64 bytes.
#[inline(always)]
pub(crate) fn le_words(bytes: &[u8; BLOCK_BYTES]) -> [u64; WORDS_PER_BLOCK] {
    std::array::from_fn(|w| {
        let mut x = [0u8; 8];
        x.copy_from_slice(&bytes[w * 8..w * 8 + 8]);
        u64::from_le_bytes(x)
    })
}

/// The reference block probe (also the fallback): branch-free, all `k`
/// probes read, accumulated in a register.
#[inline(always)]
#[cfg_attr(not(feature = "test-internals"), allow(unreachable_pub))]
pub fn scalar_block_has_all(words: &[u64; WORDS_PER_BLOCK], h2: u64, k: u32) -> bool {
    let mut acc = 1u64;
    // `k ≤ MAX_K` by construction; the min lets the salt lookups go unchecked.
    for i in 0..(k as usize).min(MAX_K as usize) {
        let pos = in_block_position(h2, i);
        acc &= words[(pos / 64) as usize] >> (pos % 64);
    }
    acc & 1 == 1
}

/// Which probe this CPU runs (0: not asked yet).
static ISA: AtomicU8 = AtomicU8::new(0);

/// The instruction sets the probe can use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    /// Portable code only.
    Scalar,
    /// AVX, AVX2, BMI1, BMI2 and POPCNT (x86-64).
    Avx2,
}

impl Isa {
    /// What this CPU supports, asked once per process.
    #[inline(always)]
    pub(crate) fn detect() -> Isa {
        match ISA.load(Ordering::Relaxed) {
            1 => Isa::Scalar,
            2 => Isa::Avx2,
            _ => {
                let isa = Isa::ask_cpu();
                ISA.store(if isa == Isa::Avx2 { 2 } else { 1 }, Ordering::Relaxed);
                isa
            }
        }
    }

    /// Every feature that a function of `avx2.rs` or `avx2/asm.rs` enables
    /// (`#[target_feature(enable = ...)]`) must be asked for here: running
    /// code compiled for a feature the CPU lacks is undefined behaviour (a
    /// VM may mask BMI1 or POPCNT while passing AVX2 through). The test
    /// `detection_covers_every_enabled_feature` reads both lists from the
    /// source and fails if one is missing.
    #[cold]
    fn ask_cpu() -> Isa {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx")
            && std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("bmi1")
            && std::is_x86_feature_detected!("bmi2")
            && std::is_x86_feature_detected!("popcnt")
        {
            return Isa::Avx2;
        }
        Isa::Scalar
    }
}

/// Runs `job` with the best probe of this CPU.
#[inline(always)]
pub(crate) fn dispatch<J: Job>(job: J) -> J::Out {
    // Built for AVX2 (`-C target-cpu=native` on such a machine): no
    // detection and no call, the probe inlines into the caller.
    #[cfg(all(
        target_arch = "x86_64",
        target_feature = "avx2",
        target_feature = "bmi2"
    ))]
    return job.run(avx2::Avx2(()));
    #[cfg(all(
        target_arch = "x86_64",
        not(all(target_feature = "avx2", target_feature = "bmi2"))
    ))]
    if Isa::detect() == Isa::Avx2 {
        // SAFETY: `run_avx2` needs the features it enables (AVX2, BMI1,
        // BMI2, POPCNT), which `Isa::detect` just confirmed this CPU has.
        return unsafe { run_avx2(job) };
    }
    #[allow(unreachable_code)]
    job.run(Scalar)
}

/// The dispatched block probe on its own (for the tests that compare it
/// with [`scalar_block_has_all`]; lookups run whole lookups compiled for
/// the probe instead: `LookupFn`, and `Job`s for batches).
#[cfg_attr(not(feature = "test-internals"), allow(dead_code))]
#[cfg_attr(not(feature = "test-internals"), allow(unreachable_pub))]
pub fn block_has_all(words: &[u64; WORDS_PER_BLOCK], h2: u64, k: u32) -> bool {
    struct One<'a>(&'a [u64; WORDS_PER_BLOCK], u64, u32);
    impl Job for One<'_> {
        type Out = bool;
        #[inline(always)]
        fn run<P: Probe>(self, probe: P) -> bool {
            probe.block_has_all(self.0, self.1, self.2)
        }
    }
    dispatch(One(words, h2, k))
}

/// The dispatched split-block probe of a block's lanes on its own (for the
/// tests that compare it with [`scalar_split_has_all`]).
#[cfg_attr(not(feature = "test-internals"), allow(dead_code))]
#[cfg_attr(not(feature = "test-internals"), allow(unreachable_pub))]
pub fn split_has_all(lanes: &[u32; SPLIT_K as usize], x: u32) -> bool {
    struct One<'a>(&'a [u32; SPLIT_K as usize], u32);
    impl Job for One<'_> {
        type Out = bool;
        #[inline(always)]
        fn run<P: Probe>(self, probe: P) -> bool {
            probe.split_has_all(self.0, self.1)
        }
    }
    dispatch(One(lanes, x))
}

/// Whether this process probes with AVX2.
#[cfg_attr(not(feature = "test-internals"), allow(dead_code))]
#[cfg_attr(not(feature = "test-internals"), allow(unreachable_pub))]
pub fn uses_avx2() -> bool {
    Isa::detect() == Isa::Avx2
}

/// Issues a prefetch of the cache line holding `*p`: a hint, never needed
/// for correctness.
#[inline(always)]
pub(crate) fn prefetch<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` never faults, reads nothing into the program
    // and writes nothing; the pointer comes from a live reference. It is
    // `unsafe` only because it carries `#[target_feature(enable = "sse")]`,
    // which every x86-64 CPU has. Exercised by every batched-lookup test.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(p).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[macro_use]
mod kinds;
#[cfg(target_arch = "x86_64")]
mod avx2;
mod blocks;
mod insert_fn;
mod lookup;
#[cfg(test)]
mod tests;

pub(crate) use blocks::{Blocks, ByteBlocks, FrozenBlocks, SharedBlock, SplitShared};
pub(crate) use insert_fn::{HashInsert, InsertArg, InsertFn, MaskWay};
pub(crate) use kinds::{row_k, with_row_k};
pub(crate) use lookup::{
    base_kind, k_of, HashLookup, LookupChoice, LookupFn, BLOCKED, BLOCKED32, SECTORIZED, SPLIT,
    STANDARD,
};

// Called only behind a run-time check, so absent from a crate built for AVX2.
#[cfg(all(
    target_arch = "x86_64",
    not(all(target_feature = "avx2", target_feature = "bmi2"))
))]
use avx2::{insert_avx2, insert_owned_avx2, insert_shared_avx2, lookup_avx2, run_avx2};
