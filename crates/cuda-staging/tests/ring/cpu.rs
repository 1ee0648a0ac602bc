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
    assert_eq!(StagingRing::new().config().slots, DEFAULT_RING_SLOTS);
    assert_eq!(StagingRing::default().config(), RingConfig::default());
    for k in [1, 2, 3, 17, MAX_RING_SLOTS] {
        assert_eq!(
            StagingRing::with_config(RingConfig {
                slots: k,
                ..Default::default()
            })
            .expect("a valid slot count")
            .config()
            .slots,
            k
        );
    }
}

#[test]
fn a_ring_config_no_ring_can_take_is_an_invalid_argument_naming_its_field() {
    for bad in [0, MAX_RING_SLOTS + 1, 1000, usize::MAX] {
        match StagingRing::with_config(RingConfig {
            slots: bad,
            ..Default::default()
        }) {
            Err(e @ Error::InvalidArgument { op, .. }) => {
                assert_eq!(op, "StagingRing::with_config");
                let msg = e.to_string();
                assert!(msg.contains(&format!("slots is {bad}")), "{msg}");
                assert!(msg.contains("1 to 64"), "{msg}");
            }
            other => panic!("slots {bad}: expected InvalidArgument, got {other:?}"),
        }
    }
    for bad in [0, MAX_COPY_THREADS + 1] {
        match StagingRing::with_config(RingConfig {
            copy_threads: bad,
            ..Default::default()
        }) {
            Err(e @ Error::InvalidArgument { .. }) => {
                assert!(
                    e.to_string().contains(&format!("copy_threads is {bad}")),
                    "{e}"
                );
            }
            other => panic!("copy_threads {bad}: expected InvalidArgument, got {other:?}"),
        }
    }
}

#[test]
fn a_new_ring_pins_nothing_counts_nothing_and_synchronizes_without_a_driver() {
    for mut ring in [
        StagingRing::new(),
        StagingRing::with_config(RingConfig {
            slots: 1,
            ..Default::default()
        })
        .unwrap(),
        StagingRing::with_config(RingConfig {
            slots: MAX_RING_SLOTS,
            ..Default::default()
        })
        .unwrap(),
    ] {
        assert_eq!(ring.capacity(), 0);
        assert_eq!(ring.stats(), RingStats::default());
        // Nothing is in flight: no driver call is needed (none is present here).
        ring.synchronize()
            .expect("an unused ring has nothing to wait for");
        assert_eq!(ring.capacity(), 0);
        assert_eq!(ring.stats(), RingStats::default());
        let shown = format!("{ring:?}");
        assert!(shown.contains("StagingRing"), "{shown}");
        assert!(
            shown.contains(&format!("slots: {}", ring.config().slots)),
            "{shown}"
        );
    }
}
