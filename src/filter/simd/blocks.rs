//! A shared filter's blocks: [`SharedBlock`] (eight atomic words on one
//! line) and its halves [`SplitShared`], and [`Blocks`]: a filter's blocks,
//! never empty, so that the block of a hash is found without a bounds check.

use crate::filter::geometry::{BLOCK_BYTES, WORDS_PER_BLOCK};
use crate::filter::hash::map_to_range;
use std::sync::atomic::AtomicU64;

/// One block of the split-block layout in a shared filter: four atomic
/// words, 32-byte aligned, half of a [`SharedBlock`] (block `b` is half
/// `b % 2` of line `b / 2`).
#[doc(hidden)]
#[repr(C, align(32))]
pub struct SplitShared(pub(crate) [AtomicU64; 4]);

const _: () = assert!(2 * std::mem::size_of::<SplitShared>() == std::mem::size_of::<SharedBlock>());

/// One block of a shared filter: eight atomic words on one 64-byte line.
/// A [`crate::BitFilter`] keeps its bits as a slice of these, so every
/// block is aligned by its type (no run-time check) and probed with
/// aligned vector loads.
#[doc(hidden)]
#[repr(C, align(64))]
pub struct SharedBlock(pub(crate) [AtomicU64; WORDS_PER_BLOCK]);

// The flat view below relies on a block being its eight words, no padding.
const _: () = assert!(std::mem::size_of::<SharedBlock>() == 8 * WORDS_PER_BLOCK);

impl SharedBlock {
    /// A block of zero bits.
    pub(crate) fn zeroed() -> SharedBlock {
        SharedBlock(std::array::from_fn(|_| AtomicU64::new(0)))
    }

    /// The words of `blocks`, in order, as one slice: word `w` of block `b`
    /// is element `8·b + w`. The standard layout indexes words directly,
    /// where going through the block costs a shift, a mask and an add more
    /// per probe.
    #[inline(always)]
    pub(crate) fn flat(blocks: &[SharedBlock]) -> &[AtomicU64] {
        // SAFETY: `SharedBlock` is `repr(C)` with the one field
        // `[AtomicU64; 8]` and its size is exactly those 64 bytes (asserted
        // above), so `n` contiguous blocks are `8·n` contiguous, initialised
        // `AtomicU64`s, each aligned (64 is a multiple of 8). The length
        // cannot overflow: the blocks already occupy `64·n ≤ isize::MAX`
        // bytes. The slice borrows `blocks` immutably for its lifetime, and
        // `AtomicU64` permits shared mutation, as the blocks do.
        unsafe {
            std::slice::from_raw_parts(
                blocks.as_ptr().cast::<AtomicU64>(),
                blocks.len() * WORDS_PER_BLOCK,
            )
        }
    }

    /// The blocks as twice as many split blocks, in order: split block `b`
    /// is words `4·(b % 2) ..` of block `b / 2`.
    #[inline(always)]
    pub(crate) fn split_halves(blocks: &[SharedBlock]) -> &[SplitShared] {
        // SAFETY: a `SharedBlock` is exactly two `SplitShared` (sizes
        // asserted above; both `repr(C)` over `AtomicU64` arrays, no
        // padding), so `n` blocks are `2·n` contiguous, initialised halves,
        // each 32-byte aligned (the blocks are 64-byte aligned, the second
        // half starts 32 bytes in). The length cannot overflow: the blocks
        // occupy `64·n ≤ isize::MAX` bytes. The slice borrows `blocks`
        // immutably, and atomics permit shared mutation, as the blocks do.
        unsafe {
            std::slice::from_raw_parts(blocks.as_ptr().cast::<SplitShared>(), blocks.len() * 2)
        }
    }

    /// [`SharedBlock::split_halves`] for exclusive access.
    #[inline(always)]
    pub(crate) fn split_halves_mut(blocks: &mut [SharedBlock]) -> &mut [SplitShared] {
        // SAFETY: as for `split_halves`; the slice borrows `blocks` mutably
        // for its lifetime, so no other access overlaps it.
        unsafe {
            std::slice::from_raw_parts_mut(
                blocks.as_mut_ptr().cast::<SplitShared>(),
                blocks.len() * 2,
            )
        }
    }

    /// [`SharedBlock::flat`] for exclusive access (plain stores).
    #[inline(always)]
    pub(crate) fn flat_mut(blocks: &mut [SharedBlock]) -> &mut [AtomicU64] {
        // SAFETY: as for `flat`; the slice borrows `blocks` mutably for its
        // lifetime, so no other access overlaps it.
        unsafe {
            std::slice::from_raw_parts_mut(
                blocks.as_mut_ptr().cast::<AtomicU64>(),
                blocks.len() * WORDS_PER_BLOCK,
            )
        }
    }
}

/// The blocks of a [`crate::BitFilter`]: at least one, which
/// [`Blocks::of_hash`] relies on to index without a bounds check: the
/// compiled XXH3-64 lookup for a fixed `k` was 31 instructions with the
/// check and its load of `m` (disassembled), 26 without.
#[doc(hidden)]
pub struct Blocks(Box<[SharedBlock]>);

impl Blocks {
    /// `blocks`, or one zeroed block if it is empty. Filters never ask for
    /// none (`FilterParams` has `m ≥ MIN_M_BITS`, so at least one block);
    /// the padding keeps the invariant without a panic or an error path.
    pub(crate) fn new(mut blocks: Vec<SharedBlock>) -> Blocks {
        if blocks.is_empty() {
            blocks.push(SharedBlock::zeroed());
        }
        Blocks(blocks.into_boxed_slice())
    }

    /// Block `map_to_range(h1, n)` of these `n` blocks: the blocked layout's
    /// block of a key whose hash has `h1` (`filter::params::block_of`, when
    /// `n` is the filter's `m / 512`).
    #[inline(always)]
    pub(crate) fn of_hash(&self, h1: u64) -> &SharedBlock {
        let n = self.0.len();
        let i = map_to_range(h1, n as u64) as usize;
        debug_assert!(i < n);
        // SAFETY: `n ≥ 1` (`new`, the only constructor, and nothing
        // removes a block: the box is never replaced or resized). `i` is
        // ⌊h1·n / 2^64⌋ with `h1 ≤ 2^64 − 1`, so `i ≤ ⌊n − n/2^64⌋ < n`:
        // in bounds (`tests::block_of_hash_is_in_bounds_at_the_extremes`).
        unsafe { self.0.get_unchecked(i) }
    }

    /// [`Blocks::of_hash`], borrowed exclusively.
    #[inline(always)]
    pub(crate) fn of_hash_mut(&mut self, h1: u64) -> &mut SharedBlock {
        let n = self.0.len();
        let i = map_to_range(h1, n as u64) as usize;
        debug_assert!(i < n);
        // SAFETY: as in `of_hash`: `n ≥ 1` and `i < n`.
        unsafe { self.0.get_unchecked_mut(i) }
    }
}

/// The blocks of a borrowed bitset (a [`crate::FilterView`] of the blocked
/// layout) as 64-byte arrays: at least one, so that
/// [`ByteBlocks::of_hash`] indexes without a bounds check, as
/// [`Blocks::of_hash`] does. The view's compiled lookup checked the slice's
/// bounds and loaded `m` at every call.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct ByteBlocks<'a>(&'a [[u8; BLOCK_BYTES]]);

impl<'a> ByteBlocks<'a> {
    /// The whole blocks of `bytes` (a tail shorter than a block left out),
    /// or `None` if there is none.
    pub(crate) fn new(bytes: &'a [u8]) -> Option<Self> {
        let (blocks, _) = bytes.as_chunks::<BLOCK_BYTES>();
        (!blocks.is_empty()).then_some(ByteBlocks(blocks))
    }

    /// Block `map_to_range(h1, n)` of these `n` blocks, as
    /// [`Blocks::of_hash`].
    #[inline(always)]
    pub(crate) fn of_hash(self, h1: u64) -> &'a [u8; BLOCK_BYTES] {
        let n = self.0.len();
        let i = map_to_range(h1, n as u64) as usize;
        debug_assert!(i < n);
        // SAFETY: `n ≥ 1` (`new` refuses none, and
        // `FrozenBlocks::byte_blocks` makes them of a `Blocks`, never empty;
        // the slice is a shared borrow that cannot shrink). `i < n` as in
        // `Blocks::of_hash` (`tests::block_of_hash_is_in_bounds_at_the_extremes`).
        unsafe { self.0.get_unchecked(i) }
    }
}

/// A filter's [`Blocks`] that no thread writes: those of a
/// [`crate::FrozenFilter`], which owns them and offers no way to write them
/// (moving them out, [`FrozenBlocks::into_blocks`], takes `self`). So their
/// words, atomics in a shared filter, may be read as plain bytes: a lookup
/// reads a block with two 32-byte loads, where a shared filter's block,
/// which another thread may be writing, is read with four 16-byte ones,
/// the widest load documented as atomic (`avx2::asm`).
pub(crate) struct FrozenBlocks(Blocks);

impl FrozenBlocks {
    /// `blocks`, frozen.
    pub(crate) fn new(blocks: Blocks) -> FrozenBlocks {
        FrozenBlocks(blocks)
    }

    /// The blocks again, for writing.
    pub(crate) fn into_blocks(self) -> Blocks {
        self.0
    }

    /// The bytes of every word, in order, each word in this target's byte
    /// order: `64·n` bytes, 64-byte aligned.
    #[inline(always)]
    pub(crate) fn bytes(&self) -> &[u8] {
        self.blocks_as_bytes().as_flattened()
    }

    /// The blocks as [`ByteBlocks`] (of the little-endian bytes a view
    /// reads: call only on a little-endian target).
    #[inline(always)]
    pub(crate) fn byte_blocks(&self) -> ByteBlocks<'_> {
        // `n ≥ 1` blocks (`Blocks::new`), as `ByteBlocks::of_hash` needs.
        ByteBlocks(self.blocks_as_bytes())
    }

    /// Each block as its 64 bytes.
    #[inline(always)]
    fn blocks_as_bytes(&self) -> &[[u8; BLOCK_BYTES]] {
        let blocks: &[SharedBlock] = &self.0;
        // SAFETY: a `SharedBlock` is 64 initialised bytes (`repr(C)`,
        // exactly its eight `AtomicU64`s, asserted above; `AtomicU64` has
        // `u64`'s size and no padding), so the `n` blocks are `n`
        // contiguous `[u8; 64]`, whose alignment (1) the blocks' (64)
        // satisfies; the slice covers the memory they already occupy.
        // Reading atomics as plain bytes is sound only while nothing writes
        // them, and nothing does while this borrow lives: `self` owns the
        // boxed blocks (`Blocks` is the box's only owner, neither `Clone`
        // nor shared), hands out no `&Blocks` or `&SharedBlock` through
        // which a thread could store, and gives the blocks back only by
        // value (`into_blocks`), which the borrow checker refuses while a
        // borrow of `self` lives. Every write made before the blocks were
        // frozen happens before these reads: freezing takes the filter by
        // value, so every borrow another thread had of it ended first, and
        // what ends one synchronises (a joined thread, an `Arc`'s last
        // drop, a lock's release).
        unsafe {
            std::slice::from_raw_parts(blocks.as_ptr().cast::<[u8; BLOCK_BYTES]>(), blocks.len())
        }
    }
}

impl std::ops::Deref for Blocks {
    type Target = [SharedBlock];
    #[inline(always)]
    fn deref(&self) -> &[SharedBlock] {
        &self.0
    }
}

impl std::ops::DerefMut for Blocks {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [SharedBlock] {
        &mut self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The index stays below `n` for the largest `h1` and every `n` from 1
    /// up, and at the largest block count a filter may have; it is the
    /// index the checked mapping gives.
    #[test]
    fn block_of_hash_is_in_bounds_at_the_extremes() {
        for n in [1usize, 2, 3, 7, 64, 1000] {
            let mut blocks = Blocks::new((0..n).map(|_| SharedBlock::zeroed()).collect());
            for h1 in [0, 1, u64::MAX / 2, u64::MAX - 1, u64::MAX] {
                let want = map_to_range(h1, n as u64) as usize;
                assert!(want < n, "n {n} h1 {h1}");
                assert!(std::ptr::eq(blocks.of_hash(h1), &blocks[want]));
                let at: *const SharedBlock = &blocks[want];
                assert!(std::ptr::eq(blocks.of_hash_mut(h1), at));
            }
            // A view's blocks, with a tail shorter than a block.
            let bytes = vec![0u8; n * BLOCK_BYTES + 5];
            let byte_blocks = ByteBlocks::new(&bytes).expect("n ≥ 1 blocks");
            for h1 in [0, 1, u64::MAX / 2, u64::MAX - 1, u64::MAX] {
                let want = map_to_range(h1, n as u64) as usize;
                let at: *const u8 = &bytes[want * BLOCK_BYTES];
                assert!(std::ptr::eq(byte_blocks.of_hash(h1).as_ptr(), at));
            }
        }
        // The mapping's bound at the largest count (2^31 blocks), without
        // allocating them.
        let n = 1u64 << 31;
        assert_eq!(map_to_range(u64::MAX, n), n - 1);
        assert!(Blocks::new(Vec::new()).len() == 1, "never empty");
        assert!(
            ByteBlocks::new(&[0; BLOCK_BYTES - 1]).is_none(),
            "never empty"
        );
    }
}
