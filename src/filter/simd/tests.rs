//! The probes and the flat view against the scalar reference.

use super::*;

/// The probe of a shared block (vector loads of atomic words) answers
/// as the scalar probe of the same words: random blocks of every
/// density, every `k`, and the key's exact bits with one cleared.
#[test]
fn shared_block_probe_matches_scalar() {
    struct Shared<'a>(&'a SharedBlock, u64, u32);
    impl Job for Shared<'_> {
        type Out = bool;
        #[inline(always)]
        fn run<P: Probe>(self, probe: P) -> bool {
            probe.shared_block_has_all(self.0, self.1, self.2)
        }
    }
    let block = SharedBlock(std::array::from_fn(|_| AtomicU64::new(0)));
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x ^ (x >> 31)
    };
    for round in 0..4_000 {
        let h2 = next();
        let k = 1 + round % MAX_K;
        let words: [u64; 8] =
            std::array::from_fn(|_| (0..round % 4).fold(next(), |a, _| a | next()));
        let mut exact = [0u64; 8];
        for i in 0..k as usize {
            let p = in_block_position(h2, i);
            exact[(p / 64) as usize] |= 1 << (p % 64);
        }
        let mut less = exact;
        let p = in_block_position(h2, round as usize % k as usize);
        less[(p / 64) as usize] &= !(1 << (p % 64));
        for w in [words, exact, less] {
            for (a, v) in block.0.iter().zip(w) {
                a.store(v, Ordering::Relaxed);
            }
            let got = dispatch(Shared(&block, h2, k));
            assert_eq!(got, scalar_block_has_all(&w, h2, k), "k={k} h2={h2:#x}");
        }
        assert!(!dispatch(Shared(&block, h2, k)), "one bit cleared");
    }
}

/// The flat view is the blocks' words in order: every word read and
/// written through it is the one the safe path (block, then word)
/// reads, over a slice that starts mid-allocation, for both views.
#[test]
fn flat_view_matches_block_indexing() {
    let mut blocks: Vec<SharedBlock> = (0..5).map(|_| SharedBlock::zeroed()).collect();
    for (i, w) in SharedBlock::flat(&blocks[1..]).iter().enumerate() {
        w.store(i as u64 * 3 + 1, Ordering::Relaxed);
    }
    for (i, w) in SharedBlock::flat_mut(&mut blocks[3..])
        .iter_mut()
        .enumerate()
    {
        *w.get_mut() ^= 1 << (i % 64);
    }
    assert_eq!(SharedBlock::flat(&blocks).len(), 5 * WORDS_PER_BLOCK);
    for (b, block) in blocks.iter().enumerate() {
        assert!(std::ptr::from_ref(block).is_aligned());
        for (w, word) in block.0.iter().enumerate() {
            let flat = (b * WORDS_PER_BLOCK + w) as u64;
            let mut want = if b >= 1 { (flat - 8) * 3 + 1 } else { 0 };
            if b >= 3 {
                want ^= 1 << ((flat - 24) % 64);
            }
            assert_eq!(word.load(Ordering::Relaxed), want, "block {b} word {w}");
        }
    }
}

/// Every single probe of every k lands on the scalar bit: a block with
/// exactly the key's bits is found, and one with any of them cleared
/// is not.
#[test]
fn dispatched_probe_matches_scalar_bit_by_bit() {
    let mut h2 = 0x0123_4567_89ab_cdefu64;
    for k in 1..=MAX_K {
        for _ in 0..200 {
            h2 = h2
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let mut words = [0u64; 8];
            for i in 0..k as usize {
                let p = in_block_position(h2, i);
                words[(p / 64) as usize] |= 1 << (p % 64);
            }
            assert!(block_has_all(&words, h2, k), "k={k} h2={h2:#x}");
            for i in 0..k as usize {
                let p = in_block_position(h2, i);
                let mut w = words;
                w[(p / 64) as usize] &= !(1 << (p % 64));
                assert!(!block_has_all(&w, h2, k), "k={k} probe {i}");
                assert!(!scalar_block_has_all(&w, h2, k));
            }
        }
    }
}
