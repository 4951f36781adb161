//! The merged filter fitted to its keys before it ships (`fit_fp`): the
//! shapes probe tasks accept, and the policy's judgement made before the
//! fitting.

use super::tests::{delivered_filter, policy, post, send, SCOPE};
use super::*;
use filterstore::{BloomRead, HashSpec, Layout};

/// A filter planned for far more keys than it gets ships halved to its
/// keys: every key still in it, its rate within the target, and a shape the
/// probe tasks accept as the plan's (`fits_plan`). Without the
/// target it ships at its planned size.
#[test]
fn a_filter_planned_too_large_ships_fitted_to_its_keys() {
    // 96 · 2^7 blocks: halves seven times at most.
    let planned =
        FilterParams::new(Layout::Blocked, (512 * 96) << 7, 7, HashSpec::xxh3(7)).unwrap();
    let build = |keys: std::ops::Range<u32>| {
        let f = BitFilter::new(planned).unwrap();
        keys.for_each(|k| {
            f.insert(&k.to_le_bytes());
        });
        Arc::new(f)
    };
    let fitted = SlotPolicy {
        fit_fp: Some(0.01),
        ..policy()
    };
    for (policy, want_bits) in [(fitted, (512 * 96) << 1), (policy(), planned.m())] {
        let slot = Slot::register(new_filter_id(), planned, policy);
        send(&slot, post(0, 2, PartialBody::Filter(build(0..3000))));
        send(&slot, post(1, 2, PartialBody::Filter(build(3000..6000))));
        let f = delivered_filter(&slot);
        // 6,000 keys: 98,304 bits (16 a key) hold them under 1% at k = 7;
        // 49,152 (8 a key) would not (~2%).
        assert_eq!(f.params().m(), want_bits, "{:?}", slot.outcome());
        assert!((0..6000u32).all(|k| f.contains(&k.to_le_bytes())));
        assert!(f.estimated_fp() <= 0.01 || policy.fit_fp.is_none());
        assert!(super::fits_plan(f.params(), &planned));
        acknowledge_local(slot.id(), SCOPE, true);
        assert!(matches!(
            slot.outcome(),
            Some(FilterOutcome::Built { bits, .. }) if bits == want_bits
        ));
    }
}

#[test]
fn probes_accept_the_planned_shape_halved_and_nothing_else() {
    let planned = FilterParams::new(Layout::Blocked, 512 * 96, 7, HashSpec::xxh3(7)).unwrap();
    let shape = |m: u64, k: u32, seed: u64| {
        FilterParams::new(Layout::Blocked, m, k, HashSpec::xxh3(seed)).unwrap()
    };
    let fits = |p: FilterParams| super::fits_plan(&p, &planned);
    assert!(fits(planned));
    assert!(fits(shape(512 * 48, 7, 7)) && fits(shape(512 * 3, 7, 7)));
    assert!(!fits(shape(512 * 32, 7, 7)), "a third is not a halving");
    assert!(!fits(shape(512 * 192, 7, 7)), "larger than planned");
    assert!(!fits(shape(512 * 48, 6, 7)), "another k");
    assert!(!fits(shape(512 * 48, 7, 8)), "another seed");
}

/// A filter planned at 64 blocks holding 540 keys (7.6 bits a key at 8
/// blocks, ~3.5% at k = 7), and a policy that fits to 5% and ships it only
/// if it passes at most 61% of 900 probe keys: 60% and its rate.
pub(super) fn near_max_pass() -> (FilterParams, BitFilter, SlotPolicy) {
    let planned = FilterParams::new(Layout::Blocked, 512 * 64, 7, HashSpec::xxh3(7)).unwrap();
    let f = BitFilter::new(planned).unwrap();
    (0..540u32).for_each(|k| {
        f.insert(&k.to_le_bytes());
    });
    let judged = SlotPolicy {
        max_pass: 0.61,
        probe_distinct: Some(900.0),
        fit_fp: Some(0.05),
        ..policy()
    };
    (planned, f, judged)
}

/// The policy judges the merged filter at its planned size: fitting it
/// afterwards raises its rate (here to 1–5%), and must not turn a filter
/// judged to pass 60% of the probe rows (under `max_pass`, 61%) into
/// pass-all.
#[test]
fn a_filter_is_judged_before_it_is_fitted() {
    let (planned, f, judged) = near_max_pass();
    let slot = Slot::register(new_filter_id(), planned, judged);
    send(&slot, post(0, 1, PartialBody::Filter(Arc::new(f))));
    let shipped = delivered_filter(&slot);
    assert!(shipped.params().m() < planned.m(), "fitted");
    let fp = shipped.estimated_fp();
    assert!(fp > 0.01 && fp <= 0.05, "{fp}: 0.60 + fp is over max_pass");
}
