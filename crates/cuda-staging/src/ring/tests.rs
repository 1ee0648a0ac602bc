//! The ring's CPU tests: its configuration and its tickets' checks.

use std::marker::PhantomData;

use super::*;

#[test]
fn a_ring_has_one_to_64_slots_and_pins_nothing_at_first() {
    let r = StagingRing::new();
    assert_eq!(r.config(), RingConfig::default());
    assert_eq!(r.slots.len(), crate::DEFAULT_RING_SLOTS);
    assert_eq!(r.capacity(), 0);
    assert_eq!(r.stats(), RingStats::default());
    let with = |slots| {
        StagingRing::with_config(RingConfig {
            slots,
            ..RingConfig::default()
        })
    };
    assert_eq!(with(1).unwrap().slots.len(), 1);
    assert_eq!(with(64).unwrap().slots.len(), 64);
    for bad in [0, 65] {
        let e = with(bad).unwrap_err();
        assert!(e.to_string().contains("a ring has 1 to 64"), "{e}");
    }
}

#[test]
fn a_ticket_of_another_ring_or_a_reused_slot_is_refused() {
    let a = StagingRing::new();
    let b = StagingRing::new();
    let t = Ticket::<f32> {
        ring: b.id,
        slot: 0,
        generation: 1,
        len: 4,
        _elem: PhantomData,
    };
    let e = a.wait(&t).unwrap_err();
    assert!(e.to_string().contains("another ring"), "{e}");
    // Slot 0 of `b` has generation 0 (never used): generation 1 is not it.
    let e = b.wait(&Ticket { generation: 5, ..t }).unwrap_err();
    assert!(e.to_string().contains("stale ticket"), "{e}");
    // An empty download needs no slot.
    let empty = Ticket::<f32> { len: 0, ..t };
    assert_eq!(b.wait(&empty).unwrap(), &[] as &[f32]);
}
