//! Which pages back a filter's bits: the kernel's base pages (4 KiB on
//! x86-64), or transparent huge pages (2 MiB), asked for with
//! `madvise(MADV_HUGEPAGE)` on Linux. One of the four modules with `unsafe`
//! (with `filter::simd`, `filter::barrier` and `store::disk::sys`): two FFI
//! calls, `sysconf` and `madvise`, audited below.
//!
//! A lookup in a filter larger than the caches takes a cache miss, and on
//! base pages usually a TLB miss as well: the L2 TLB of this machine's
//! Zen 4 covers 3,072 base pages, 12 MiB, so a random block of a 1 GiB
//! filter needs a page walk whose page-table entries are themselves
//! unlikely to be cached. On 2 MiB pages the same TLB covers 6 GiB. The
//! `peers` bench's large point measures both (docs/BENCHMARKS.md).
//!
//! The advice changes only how the kernel backs the pages, never their
//! contents: a filter answers the same on either (`tests`). It is given
//! before the memory is first written, so that the first faults already
//! allocate huge pages where the kernel has them; where it has none (or
//! THP is disabled, or on another OS) the filter simply stays on base
//! pages.

/// The pages a filter's bits live on (see [`crate::BitFilter::with_pages`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Pages {
    /// Huge pages for filters of [`HUGE_PAGE_MIN_BYTES`] or more, base pages
    /// below (where a filter fits the TLB's reach anyway). The default.
    #[default]
    Auto,
    /// The kernel's default (base pages, unless THP is set to `always`).
    Base,
    /// Transparent huge pages, asked for whatever the size.
    Huge,
}

/// The size from which [`Pages::Auto`] asks for huge pages: beyond what
/// the L2 TLB covers with base pages (12 MiB here), with room to spare.
pub const HUGE_PAGE_MIN_BYTES: u64 = 32 << 20;

impl Pages {
    /// Whether a filter of `bytes` asks for huge pages.
    pub(crate) fn huge_for(self, bytes: u64) -> bool {
        match self {
            Pages::Auto => bytes >= HUGE_PAGE_MIN_BYTES,
            Pages::Base => false,
            Pages::Huge => true,
        }
    }
}

/// Asks the kernel to back the whole base pages inside `bytes` bytes from
/// `start` (an allocation of ours, not yet written) with transparent huge
/// pages. Returns whether the kernel took the advice (`false` on other
/// systems, or when THP is compiled out). Never fails otherwise: the advice
/// is an optimisation.
#[cfg(target_os = "linux")]
pub(crate) fn advise_huge(start: *const u8, bytes: usize) -> bool {
    // SAFETY: `sysconf` reads a constant of the system; no memory is passed.
    let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        p if p > 0 => p as usize,
        _ => return false,
    };
    let first = (start as usize).next_multiple_of(page);
    let end = (start as usize + bytes) / page * page;
    if end <= first {
        return false;
    }
    // SAFETY: `[first, end)` is page-aligned and lies inside the caller's
    // allocation of `bytes` bytes at `start` (rounded inwards), memory this
    // process owns and keeps mapped. MADV_HUGEPAGE only sets a flag on the
    // mapping telling the kernel which page size to back it with: it does
    // not change the contents of any page, the mapping's permissions or
    // its lifetime, and no Rust reference into the range is invalidated.
    // An error (EINVAL without THP, ENOMEM for an unmapped hole) leaves the
    // mapping as it was.
    unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE) == 0 }
}

/// Elsewhere there is nothing to ask.
#[cfg(not(target_os = "linux"))]
pub(crate) fn advise_huge(_start: *const u8, _bytes: usize) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::bloom::BitFilter;
    use crate::filter::hash::HashSpec;
    use crate::filter::params::{FilterParams, Layout};

    /// The `THPeligible` line of the mapping that holds `addr`, from
    /// /proc/self/smaps (Linux 4.x and later), if any.
    fn thp_eligible(addr: usize) -> Option<bool> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((a, b)) = range.split_once('-') {
                    if let (Ok(a), Ok(b)) =
                        (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                    {
                        inside = (a..b).contains(&addr);
                        continue;
                    }
                }
            }
            if inside {
                if let Some(v) = line.strip_prefix("THPeligible:") {
                    return Some(v.trim() == "1");
                }
            }
        }
        None
    }

    /// A filter on huge pages holds and answers exactly what one on base
    /// pages does (the advice changes how pages are backed, not what they
    /// hold); where the kernel's THP mode is `madvise`, the advice is what
    /// makes the filter's mapping eligible, and base pages stay ineligible.
    #[test]
    fn huge_pages_change_nothing_but_the_backing() {
        let p =
            FilterParams::new(Layout::SplitBlock, 256 * (1 << 18), 8, HashSpec::xxh64()).unwrap();
        let keys: Vec<[u8; 8]> = (0u64..200_000).map(u64::to_le_bytes).collect();
        let mut filters =
            [Pages::Base, Pages::Huge].map(|pages| BitFilter::with_pages(p, pages).unwrap());
        for f in &mut filters {
            f.insert_many_mut(&keys);
        }
        assert!(filters[0].to_words() == filters[1].to_words());
        let probe: Vec<[u8; 8]> = (0u64..400_000).map(u64::to_le_bytes).collect();
        assert_eq!(
            filters[0].contains_many(&probe),
            filters[1].contains_many(&probe)
        );
        let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled");
        if mode.as_deref().is_ok_and(|m| m.contains("[madvise]")) {
            // 8 MiB filters: the middle of each is inside its advised range.
            let mid = |f: &BitFilter| f.words_ptr() as usize + (4 << 20);
            assert_eq!(thp_eligible(mid(&filters[0])), Some(false), "base pages");
            assert_eq!(thp_eligible(mid(&filters[1])), Some(true), "huge pages");
        }
        assert!(Pages::Auto.huge_for(HUGE_PAGE_MIN_BYTES) && !Pages::Auto.huge_for(1 << 20));
    }
}
