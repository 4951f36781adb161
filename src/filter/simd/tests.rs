//! The probes and the flat view against the scalar reference.

use super::*;
use crate::filter::geometry::Layout;

/// The probes of a shared block (vector loads of atomic words) and of a
/// block's bytes (a view's, here at an odd address) answer as the scalar
/// probe of the same words: random blocks of every density, every `k`,
/// and the key's exact bits with one cleared; every other round with
/// `h2 = x << 32`, through the 32-bit probes too.
#[test]
fn shared_block_probe_matches_scalar() {
    struct Shared<'a>(&'a SharedBlock, &'a [u8; BLOCK_BYTES], u64, u32);
    impl Job for Shared<'_> {
        type Out = [bool; 4];
        #[inline(always)]
        fn run<P: Probe>(self, probe: P) -> [bool; 4] {
            let (x, k) = ((self.2 >> 32) as u32, self.3);
            [
                probe.shared_block_has_all(self.0, self.2, k),
                probe.bytes_block_has_all(self.1, self.2, k),
                probe.shared_block_has_all32(self.0, x, k),
                probe.bytes_block_has_all32(self.1, x, k),
            ]
        }
    }
    let block = SharedBlock(std::array::from_fn(|_| AtomicU64::new(0)));
    let mut buf = [0u8; BLOCK_BYTES + 1];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x ^ (x >> 31)
    };
    let mut answers = [0u32; 2];
    for round in 0..4_000 {
        let shifted = round % 2 == 1;
        let h2 = if shifted { next() << 32 } else { next() };
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
            for (i, v) in w.iter().enumerate() {
                buf[1 + 8 * i..9 + 8 * i].copy_from_slice(&v.to_le_bytes());
            }
            let bytes = <&[u8; BLOCK_BYTES]>::try_from(&buf[1..]).unwrap();
            assert_eq!(le_words(bytes), w);
            let want = scalar_block_has_all(&w, h2, k);
            answers[want as usize] += 1;
            let got = dispatch(Shared(&block, bytes, h2, k));
            let n = if shifted { 4 } else { 2 };
            assert_eq!(got[..n], [want; 4][..n], "k={k} h2={h2:#x}");
        }
        assert!(!scalar_block_has_all(&less, h2, k), "one bit cleared");
    }
    assert!(answers.iter().all(|&a| a > 1_000), "{answers:?}");
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

/// How many times `run_avx2` or `lookup_avx2` ran in this test process
/// (counted in test builds only), for `the_avx2_path_ran_where_required`.
pub(super) static AVX2_RUNS: AtomicU64 = AtomicU64::new(0);

/// Random lanes, and the lanes of exactly `x`'s bits with one cleared: the
/// split-block probes (lanes, bytes, shared words) answer as the scalar
/// reference, and a block missing any one bit is refused.
#[test]
fn split_probes_match_scalar() {
    use crate::filter::split::split_masks;
    struct All<'a>(&'a [u32; 8], &'a [u8; 32], &'a SplitShared, u32);
    impl Job for All<'_> {
        type Out = [bool; 3];
        #[inline(always)]
        fn run<P: Probe>(self, probe: P) -> [bool; 3] {
            [
                probe.split_has_all(self.0, self.3),
                probe.bytes_split_has_all(self.1, self.3),
                probe.shared_split_has_all(self.2, self.3),
            ]
        }
    }
    let blocks = [SharedBlock::zeroed()];
    let shared = &SharedBlock::split_halves(&blocks)[1];
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut answers = [0u32; 2];
    for round in 0..20_000u32 {
        let x = next() as u32;
        let dense = (round % 3) as usize;
        let random: [u32; 8] =
            std::array::from_fn(|_| (0..dense).fold(next() as u32, |a, _| a | next() as u32));
        let exact = split_masks(x);
        let mut less = exact;
        less[round as usize % 8] = 0;
        for lanes in [random, exact, less] {
            let bytes: [u8; 32] = std::array::from_fn(|i| (lanes[i / 4] >> (8 * (i % 4))) as u8);
            for (w, word) in shared.0.iter().enumerate() {
                let v = u64::from(lanes[2 * w]) | u64::from(lanes[2 * w + 1]) << 32;
                word.store(v, Ordering::Relaxed);
            }
            let want = scalar_split_has_all(&lanes, x);
            answers[want as usize] += 1;
            let got = dispatch(All(&lanes, &bytes, shared, x));
            assert_eq!(got, [want; 3], "x = {x:#x}, lanes {lanes:x?}");
        }
        assert!(scalar_split_has_all(&exact, x) && !scalar_split_has_all(&less, x));
    }
    assert!(answers.iter().all(|&a| a > 10_000), "{answers:?}");
}

/// The vector insert into an exclusively held block and the word masks of
/// a shared insert set exactly the scalar masks.
#[test]
fn split_inserts_match_scalar() {
    use crate::filter::split::split_word_masks;
    struct Insert<'a>(&'a mut SplitShared, u32);
    impl Job for Insert<'_> {
        type Out = ([u64; 4], bool);
        #[inline(always)]
        fn run<P: Probe>(self, probe: P) -> ([u64; 4], bool) {
            let changed = probe.split_insert_mut(self.0, self.1);
            (probe.split_word_masks(self.1), changed)
        }
    }
    let mut blocks = [SharedBlock::zeroed(), SharedBlock::zeroed()];
    let mut want = [0u64; 4];
    let mut x = 7u32;
    for _ in 0..1_000 {
        x = x.wrapping_mul(0x9e37_79b9).wrapping_add(0x7f4a_7c15);
        let half = &mut SharedBlock::split_halves_mut(&mut blocks)[3];
        let (masks, changed) = dispatch(Insert(half, x));
        assert_eq!(masks, split_word_masks(x));
        let had_all = want.iter().zip(masks).all(|(w, m)| w & m == m);
        assert_eq!(changed, !had_all, "x = {x:#x}");
        for (w, m) in want.iter_mut().zip(masks) {
            *w |= m;
        }
        let got: Vec<u64> = SharedBlock::split_halves(&blocks)[3]
            .0
            .iter()
            .map(|w| w.load(Ordering::Relaxed))
            .collect();
        assert_eq!(got, want);
    }
    // Nothing outside the block was written.
    let flat = SharedBlock::flat(&blocks);
    assert!(flat[..12].iter().all(|w| w.load(Ordering::Relaxed) == 0));
}

/// The blocked layout's `&mut` insert: the masks of `x` (positions from
/// one 32-bit multiply) are the scalar masks of `h2 = x << 32` for every
/// `k`, and the vector OR into an exclusively held block sets exactly them
/// and says whether one was clear.
#[test]
fn blocked_inserts_match_scalar() {
    struct Insert<'a>(&'a mut SharedBlock, u32, u32, MaskWay);
    impl Job for Insert<'_> {
        type Out = ([u64; 8], bool);
        #[inline(always)]
        fn run<P: Probe>(self, probe: P) -> ([u64; 8], bool) {
            let masks = probe.block_masks32(self.1, self.2, self.3);
            (masks, probe.block_or_mut(self.0, masks))
        }
    }
    let mut blocks = [
        SharedBlock::zeroed(),
        SharedBlock::zeroed(),
        SharedBlock::zeroed(),
    ];
    let mut want = [0u64; 8];
    let mut x = 7u32;
    for round in 0..3_000u32 {
        x = x.wrapping_mul(0x9e37_79b9).wrapping_add(0x7f4a_7c15);
        let k = 1 + round % MAX_K;
        if round % 500 == 0 {
            // Start again from an empty block, so that "was one clear"
            // is answered both ways.
            blocks[1] = SharedBlock::zeroed();
            want = [0; 8];
        }
        let way = [MaskWay::Windows, MaskWay::Shifts][round as usize % 2];
        let (masks, changed) = dispatch(Insert(&mut blocks[1], x, k, way));
        assert_eq!(
            masks,
            Scalar.block_masks(u64::from(x) << 32, k, way),
            "x = {x:#x}, k = {k}, {way:?}"
        );
        let had_all = want.iter().zip(masks).all(|(w, m)| w & m == m);
        assert_eq!(changed, !had_all, "x = {x:#x}, k = {k}");
        for (w, m) in want.iter_mut().zip(masks) {
            *w |= m;
        }
        let got: Vec<u64> = blocks[1]
            .0
            .iter()
            .map(|w| w.load(Ordering::Relaxed))
            .collect();
        assert_eq!(got, want);
    }
    // Nothing outside the block was written.
    for b in [&blocks[0], &blocks[2]] {
        assert!(b.0.iter().all(|w| w.load(Ordering::Relaxed) == 0));
    }
}

/// The masks of a key's positions, as this CPU's probe builds them (the
/// AVX2 one both ways, `avx2_block_masks`), are the reference
/// masks (`hash::in_block_masks`, position by position) for every `k` up to
/// `MAX_K` (eight positions in the vector, the rest one by one), from
/// 64-bit and from 32-bit products, at edge and pseudo-random hashes. A
/// dead lane that set a bit, or a shift count off by one word, fails it.
#[test]
fn block_masks_match_the_reference() {
    struct Masks(u64, u32, MaskWay);
    impl Job for Masks {
        type Out = ([u64; 8], [u64; 8]);
        #[inline(always)]
        fn run<P: Probe>(self, probe: P) -> Self::Out {
            let x = (self.0 >> 32) as u32;
            (
                probe.block_masks(self.0, self.1, self.2),
                probe.block_masks32(x, self.1, self.2),
            )
        }
    }
    let edges = [0, 1, u64::MAX, 1 << 63, 0xffff_ffff, 0xffff_ffff_0000_0000];
    let mut h2 = 0x243f_6a88_85a3_08d3u64;
    let mut seen_dead_lane = false;
    for round in 0..4_000u32 {
        h2 = h2
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .wrapping_add(0x632b_e59b_d9b4_e019);
        let h = edges.get(round as usize).copied().unwrap_or(h2);
        let k = 1 + round % MAX_K;
        seen_dead_lane |= k < 8;
        for way in [MaskWay::Windows, MaskWay::Shifts] {
            let (masks, masks32) = dispatch(Masks(h, k, way));
            let want = crate::filter::hash::in_block_masks(h, k);
            assert_eq!(masks, want, "h2 = {h:#x}, k = {k}, {way:?}");
            let want32 = crate::filter::hash::in_block_masks(h >> 32 << 32, k);
            assert_eq!(masks32, want32, "x = {:#x}, k = {k}, {way:?}", h >> 32);
        }
    }
    assert!(seen_dead_lane);
}

/// Every feature a function of `avx2.rs` or `avx2/asm.rs` enables is one
/// `Isa::ask_cpu` detects (issue 22: BMI1 and POPCNT were enabled but not
/// asked for).
/// Read from the sources, so that a feature added to an attribute without
/// its detection fails here.
#[test]
fn detection_covers_every_enabled_feature() {
    let detected: Vec<&str> = include_str!("mod.rs")
        .split("fn ask_cpu")
        .nth(1)
        .and_then(|s| s.split("Isa::Scalar").next())
        .unwrap()
        .split("is_x86_feature_detected!(\"")
        .skip(1)
        .map(|s| s.split('"').next().unwrap())
        .collect();
    assert!(detected.len() >= 5, "{detected:?}");
    let sources = [
        include_str!("avx2.rs"),
        include_str!("avx2/asm.rs"),
        include_str!("avx2/entry.rs"),
        include_str!("avx2/masks.rs"),
    ];
    let mut enabled: Vec<&str> = sources
        .iter()
        .flat_map(|src| src.split("target_feature(enable = \"").skip(1))
        .flat_map(|s| s.split('"').next().unwrap().split(','))
        .collect();
    enabled.sort_unstable();
    enabled.dedup();
    assert!(
        ["avx", "bmi1", "popcnt"]
            .iter()
            .all(|f| enabled.contains(f)),
        "{enabled:?}"
    );
    for f in &enabled {
        assert!(detected.contains(f), "`{f}` is enabled but not detected");
    }
}

/// On a machine whose CPU has the features (`.ci/run` sets
/// `FILTERSTORE_REQUIRE_AVX2=1` when /proc/cpuinfo lists them), the AVX2
/// code ran: detection said so, and single lookups of every layout, a batch
/// and a bulk insert went through `lookup_avx2` and `run_avx2` (or, in a
/// crate built for AVX2, through the inlined path: nothing to count).
#[test]
fn the_avx2_path_ran_where_required() {
    use crate::filter::bloom::BitFilter;
    use crate::filter::hash::HashSpec;
    use crate::filter::params::FilterParams;
    if std::env::var("FILTERSTORE_REQUIRE_AVX2").as_deref() != Ok("1") {
        return;
    }
    assert!(
        uses_avx2(),
        "FILTERSTORE_REQUIRE_AVX2=1 but detection chose the scalar probe"
    );
    if cfg!(all(target_feature = "avx2", target_feature = "bmi2")) {
        return;
    }
    for layout in Layout::ALL {
        let hash = match layout {
            Layout::SplitBlock => HashSpec::xxh64(),
            _ => HashSpec::xxh3(1),
        };
        let p = FilterParams::for_capacity(10_000, 0.01, layout, hash).unwrap();
        let f = BitFilter::new(p).unwrap();
        let keys: Vec<[u8; 4]> = (0u32..1000).map(u32::to_le_bytes).collect();
        let before = AVX2_RUNS.load(Ordering::Relaxed);
        f.insert_many(&keys);
        assert!(f.contains(&keys[0]));
        assert!(f.contains_many(&keys).iter().all(|&x| x));
        // At least the bulk insert, the lookup and the batch (other tests
        // running at once only add to the count).
        let ran = AVX2_RUNS.load(Ordering::Relaxed) - before;
        assert!(ran >= 3, "{layout}: the AVX2 functions ran {ran} times");
    }
}

/// The shared probes' `asm!` loads are not `pure`: a second read of a
/// block after another thread set its bits must read it again, not reuse
/// the first read. With `pure` (mutation testing, issue 22) LLVM may merge
/// the two reads or hoist a read out of a polling loop, since nothing
/// between them writes memory (the delay below is arithmetic only); such a
/// mutant fails here in every attempt (checked for both asm blocks), where
/// the real code passes whenever the other thread ran within the delay.
#[test]
fn shared_probes_see_later_stores() {
    use crate::filter::split::split_word_masks;
    use std::sync::atomic::AtomicU8;
    /// Reads each block, waits (arithmetic only), reads it again; `phase`
    /// tells the other thread which block to fill.
    struct Twice<'a>(&'a SharedBlock, &'a SplitShared, &'a AtomicU8, u32);
    /// About 0.1–0.3 s of dependent multiplies.
    fn delay(seed: u64) -> u64 {
        (0..100_000_000u64).fold(seed, |a, i| a.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i)
    }
    impl Job for Twice<'_> {
        type Out = ([bool; 4], u64);
        #[inline(always)]
        fn run<P: Probe>(self, probe: P) -> ([bool; 4], u64) {
            let (line, half, phase, x) = (self.0, self.1, self.2, self.3);
            phase.store(1, Ordering::Release);
            let line_before = probe.shared_block_has_all(line, u64::from(x), 8);
            let d = delay(u64::from(line_before));
            let line_after = probe.shared_block_has_all(line, u64::from(x), 8);
            phase.store(2, Ordering::Release);
            let half_before = probe.shared_split_has_all(half, x);
            let d = delay(d ^ u64::from(half_before));
            let half_after = probe.shared_split_has_all(half, x);
            ([line_before, line_after, half_before, half_after], d)
        }
    }
    let x = 0x1234_5677u32;
    let mut seen_after = [0; 2];
    for _attempt in 0..3 {
        let blocks = [SharedBlock::zeroed(), SharedBlock::zeroed()];
        // The line, and a split block of another line.
        let (line, half) = (&blocks[0], &SharedBlock::split_halves(&blocks)[3]);
        let phase = AtomicU8::new(0);
        let wait = |p: u8| {
            while phase.load(Ordering::Acquire) < p {
                std::hint::spin_loop();
            }
        };
        let (seen, _) = std::thread::scope(|s| {
            s.spawn(|| {
                wait(1);
                // Every bit of the line: the blocked probe of any key is set.
                for w in &line.0 {
                    w.store(u64::MAX, Ordering::Relaxed);
                }
                wait(2);
                for (w, m) in half.0.iter().zip(split_word_masks(x)) {
                    w.fetch_or(m, Ordering::Relaxed);
                }
            });
            dispatch(Twice(line, half, &phase, x))
        });
        seen_after[0] += usize::from(seen[1]);
        seen_after[1] += usize::from(seen[3]);
    }
    assert!(
        seen_after.iter().all(|&n| n >= 1),
        "second reads that saw the other thread's store, of 3 (line, split block): {seen_after:?}"
    );
}

/// Why the shared loads are `VMOVDQA` and a test pins it (issue 22's second
/// mutant, `VMOVDQU`): with an aligned address the two instructions perform
/// the same access on every CPU, so no test can tell them apart by
/// behaviour (a misaligned address would fault with `VMOVDQA` only, and the
/// types make one impossible: `flat_view_matches_block_indexing` checks the
/// alignment). What differs is the documentation the SAFETY argument rests
/// on: the Intel SDM (Vol. 3A §9.1.1) guarantees a 16-byte access to be
/// atomic for `VMOVDQA` (VEX.128), not for `VMOVDQU`. The mutant would be
/// harmless on real hardware but would leave the argument resting on
/// undocumented behaviour; this test keeps the documented instruction, and
/// keeps the 32-byte loads (documented atomic for no instruction) to the
/// bias holder's read of a block that no other thread writes meanwhile.
#[test]
fn shared_loads_use_the_documented_atomic_instruction() {
    let src = include_str!("avx2/asm.rs");
    let asm_loads = src.matches("\"vmovdqa {").count();
    assert_eq!(
        asm_loads, 8,
        "four 16-byte loads of a line, two of a split block, two 32-byte loads of a line"
    );
    // The 32-byte loads (not documented atomic) are the bias holder's
    // only, which reads a block no other thread writes meanwhile.
    let holder = src
        .split("fn owned_block_registers")
        .nth(1)
        .and_then(|s| s.split("\n}\n").next())
        .unwrap();
    assert_eq!(src.matches("ymmword ptr").count(), 2);
    assert_eq!(holder.matches("ymmword ptr").count(), 2);
    assert!(
        !src.contains("\"vmovdqu"),
        "unaligned loads carry no atomicity guarantee"
    );
    for options in src.split("options(").skip(1) {
        let options = options.split(')').next().unwrap();
        assert!(
            !(options.contains("readonly") && options.contains("pure")),
            "a load from shared memory marked pure: {options}"
        );
    }
}
