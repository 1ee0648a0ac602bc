//! The CPU tests, which run everywhere: the traits the ring's types implement, the slot
//! count and its bounds, and a new ring that pins nothing and needs no driver.

use super::*;

static_assertions::assert_impl_all!(StagingRing: Send, Default, Debug);
static_assertions::assert_impl_all!(Ticket<f32>: Send, Sync, Debug);
static_assertions::assert_impl_all!(BatchTicket: Send, Sync, Debug);
static_assertions::assert_impl_all!(RingStats: Copy, Default, Debug, PartialEq, Eq, Send);

#[test]
fn a_ring_has_one_to_64_slots() {
    assert_eq!(DEFAULT_RING_SLOTS, 3);
    assert_eq!(MAX_RING_SLOTS, 64);
    assert_eq!(StagingRing::new().slots(), DEFAULT_RING_SLOTS);
    assert_eq!(StagingRing::default().slots(), DEFAULT_RING_SLOTS);
    for k in [1, 2, 3, 17, MAX_RING_SLOTS] {
        assert_eq!(
            StagingRing::with_slots(k)
                .expect("a valid slot count")
                .slots(),
            k
        );
    }
}

#[test]
fn a_slot_count_outside_1_to_64_is_an_invalid_argument_naming_it() {
    for bad in [0, MAX_RING_SLOTS + 1, 1000, usize::MAX] {
        match StagingRing::with_slots(bad) {
            Err(e @ Error::InvalidArgument { op, .. }) => {
                assert_eq!(op, "StagingRing::with_slots");
                let msg = e.to_string();
                assert!(msg.contains(&format!("{bad} slots")), "{msg}");
                assert!(msg.contains("1 to 64"), "{msg}");
            }
            other => panic!("with_slots({bad}): expected InvalidArgument, got {other:?}"),
        }
    }
}

#[test]
fn a_new_ring_pins_nothing_counts_nothing_and_synchronizes_without_a_driver() {
    for mut ring in [
        StagingRing::new(),
        StagingRing::with_slots(1).unwrap(),
        StagingRing::with_slots(MAX_RING_SLOTS).unwrap(),
    ] {
        assert_eq!(ring.capacity(), 0);
        assert_eq!(ring.stats(), RingStats::default());
        // Nothing is in flight: no driver call is needed (none is present here).
        ring.synchronize()
            .expect("an unused ring has nothing to wait for");
        ring.set_copy_threads(0);
        ring.set_copy_threads(usize::MAX);
        assert_eq!(ring.capacity(), 0);
        assert_eq!(ring.stats(), RingStats::default());
        let shown = format!("{ring:?}");
        assert!(shown.contains("StagingRing"), "{shown}");
        assert!(
            shown.contains(&format!("slots: {}", ring.slots())),
            "{shown}"
        );
    }
}
