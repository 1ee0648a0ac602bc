//! Tickets: a stale one is refused, a fresh one works.

use super::*;

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_stale_ticket_is_refused_and_a_fresh_one_works() {
    let (_ctx, stream) = gpu();
    let n = 4096;
    for slots in [1, DEFAULT_RING_SLOTS, 5] {
        let mut ring = StagingRing::with_config(cuda_staging::RingConfig {
            slots,
            ..Default::default()
        })
        .unwrap();
        // slots + 1 downloads: the first one's slot is reused by the last.
        let seeds: Vec<u64> = (0..=slots).map(|_| seed()).collect();
        let bufs: Vec<DeviceBuffer<u32>> = seeds.iter().map(|&s| device_with(n, s)).collect();
        let tickets: Vec<Ticket<u32>> = bufs
            .iter()
            .map(|b| ring.download(b, n, &stream).unwrap())
            .collect();
        let reason = invalid_reason(ring.wait(&tickets[0]).unwrap_err());
        assert!(reason.contains("stale ticket"), "{reason}");
        for (k, (t, &s)) in tickets.iter().zip(&seeds).enumerate().skip(1) {
            check(
                &format_args!("ticket {k} of {} on {slots} slots", slots + 1),
                ring.wait(t).unwrap(),
                s,
            );
        }
        // Still refused after the fresh ones were redeemed.
        assert!(ring.wait(&tickets[0]).is_err());

        // An upload reuses a slot too.
        let mut d = DeviceBuffer::<u32>::alloc(n).unwrap();
        ring.upload_with(&mut d, n, &stream, |px| fill_pattern(px, seed()))
            .unwrap();
        let reason = invalid_reason(ring.wait(&tickets[1]).unwrap_err());
        assert!(reason.contains("stale ticket"), "{reason}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_ticket_of_another_ring_is_refused() {
    let (_ctx, stream) = gpu();
    let mut a = StagingRing::new();
    let mut b = StagingRing::new();
    let s = seed();
    let d = device_with::<f32>(1000, s);
    let t_a = a.download(&d, 1000, &stream).unwrap();
    let t_b = b.download(&d, 1000, &stream).unwrap();
    // Both rings' first ticket: same slot, same generation, another ring.
    let reason = invalid_reason(b.wait(&t_a).unwrap_err());
    assert!(reason.contains("another ring"), "{reason}");
    let reason = invalid_reason(a.wait(&t_b).unwrap_err());
    assert!(reason.contains("another ring"), "{reason}");
    let empty = a.download(&d, 0, &stream).unwrap();
    let reason = invalid_reason(b.wait(&empty).unwrap_err());
    assert!(reason.contains("another ring"), "{reason}");
    check(&format_args!("ring a"), a.wait(&t_a).unwrap(), s);
    check(&format_args!("ring b"), b.wait(&t_b).unwrap(), s);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_ticket_from_before_shrink_to_fit_stays_stale_after_the_slot_is_used_again() {
    let (_ctx, stream) = gpu();
    let n = 4096;
    let mut ring = StagingRing::with_config(cuda_staging::RingConfig {
        slots: 1,
        ..Default::default()
    })
    .unwrap();
    let (s_old, s_new) = (seed(), seed());
    let old = device_with::<u32>(n, s_old);
    let new = device_with::<u32>(n, s_new);
    let t_old = ring.download(&old, n, &stream).unwrap();
    ring.shrink_to_fit();
    assert_eq!(ring.capacity(), 0);
    let reason = invalid_reason(ring.wait(&t_old).unwrap_err());
    assert!(reason.contains("stale ticket"), "{reason}");
    // The one slot pins again and takes the next download: the old ticket must not
    // read the new transfer's bytes as its own.
    let t_new = ring.download(&new, n, &stream).unwrap();
    let reason = invalid_reason(ring.wait(&t_old).unwrap_err());
    assert!(reason.contains("stale ticket"), "{reason}");
    check(
        &format_args!("the download after the shrink"),
        ring.wait(&t_new).unwrap(),
        s_new,
    );
}
