//! Receiving a message costs its filter and nothing more: peak heap while
//! decoding, measured by a counting allocator, for entropy-coded full and
//! delta messages, and for a message whose header asks for more than the
//! receiver's budget (refused before anything is sized by it).

use filterstore::{
    decode_message, decode_message_with_limit, encode_delta_message, encode_message, BitFilter,
    CodecChoice, FilterParams, HashSpec, Layout,
};
use std::alloc::{GlobalAlloc, Layout as AllocLayout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, counting the bytes live and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Ordering::SeqCst) + bytes;
    PEAK.fetch_max(now, Ordering::SeqCst);
}

// SAFETY: every call is forwarded unchanged to `System`, which upholds the
// `GlobalAlloc` contract; the counters are plain atomics and never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: AllocLayout) -> *mut u8 {
        grew(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: AllocLayout) -> *mut u8 {
        grew(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: AllocLayout) {
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: AllocLayout, new_size: usize) -> *mut u8 {
        if new_size >= layout.size() {
            grew(new_size - layout.size());
        } else {
            LIVE.fetch_sub(layout.size() - new_size, Ordering::SeqCst);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Peak heap above the level at the start of `f`, in bytes.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let start = LIVE.load(Ordering::SeqCst);
    PEAK.store(start, Ordering::SeqCst);
    let out = f();
    (out, PEAK.load(Ordering::SeqCst) - start)
}

/// A sparse standard filter of `m` bits (entropy-coded when sent).
fn sparse(m: u64, keys: std::ops::Range<u32>) -> BitFilter {
    let f = BitFilter::new(FilterParams::new(Layout::Standard, m, 3, HashSpec::xxh3(9)).unwrap())
        .unwrap();
    for k in keys {
        f.insert(&k.to_le_bytes());
    }
    f
}

/// What decoding may add to the output bitmap: the rANS decode table and
/// lane state (a few KiB), the message's parsed header, and the allocator's
/// rounding. A second copy of the bitmap (the old decoder: 2x for a full
/// message, 3x for a delta) exceeds it by far.
const SLACK: usize = 256 << 10;

// One test: the counters are process-wide, so nothing may run beside it.
#[test]
fn decoding_needs_the_output_bitmap_and_no_more() {
    let m = 1u64 << 24; // 2 MiB bitmap
    let bitmap = (m / 8) as usize;

    // A full, entropy-coded message.
    let f = sparse(m, 0..20_000);
    let bytes = encode_message(&f, 20_000, 1, CodecChoice::Auto).unwrap();
    assert!(
        bytes.len() < bitmap / 4,
        "expected an entropy-coded message"
    );
    let (got, peak) = peak_of(|| {
        decode_message(&bytes)
            .unwrap()
            .filter()
            .unwrap()
            .into_owned()
            .unwrap()
    });
    assert_eq!(got.to_words(), f.to_words());
    assert!(
        peak <= bitmap + SLACK,
        "full message: peak {peak} for a {bitmap}-byte bitmap"
    );

    // A delta against a base the receiver holds.
    let newer = sparse(m, 0..20_500);
    let delta = encode_delta_message(&newer, &f, 20_500, 2, 1, CodecChoice::Auto).unwrap();
    let (rebuilt, peak) = peak_of(|| decode_message(&delta).unwrap().apply_to(&f, 1).unwrap());
    assert_eq!(rebuilt.to_words(), newer.to_words());
    assert!(
        peak <= bitmap + SLACK,
        "delta: peak {peak} for a {bitmap}-byte bitmap"
    );

    // A header asking for 2^30 bits (128 MiB), against a 2^20-bit budget:
    // refused before anything is sized by it.
    let huge = sparse(1 << 30, 0..0);
    let msg = encode_message(&huge, 0, 1, CodecChoice::Auto).unwrap();
    assert!(msg.len() < 200, "an empty filter is a short message");
    drop(huge);
    let (refused, peak) = peak_of(|| decode_message_with_limit(&msg, 1 << 20).is_err());
    assert!(refused);
    assert!(peak < 64 << 10, "refused message: peak {peak}");
}
