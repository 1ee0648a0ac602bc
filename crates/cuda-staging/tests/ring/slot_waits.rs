//! slot_waits: when a transfer has to wait for a slot, and when it must not.

use super::*;

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn one_slot_and_back_to_back_large_uploads_must_wait() {
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let mut ring = StagingRing::with_config(cuda_staging::RingConfig {
        slots: 1,
        ..Default::default()
    })
    .unwrap();
    warm(&mut ring, &stream, 4_915_200);
    let n = 4_915_200 / 4;
    let uploads = 4;
    let seeds: Vec<u64> = (0..uploads).map(|_| seed()).collect();
    let data: Vec<Vec<f32>> = seeds.iter().map(|&s| pattern(n, s)).collect();
    let mut bufs: Vec<DeviceBuffer<f32>> = (0..uploads)
        .map(|_| DeviceBuffer::alloc(n).unwrap())
        .collect();
    // The first DMA waits behind ~1 ms of work, and each fill copies prepared data:
    // the second upload finds its slot in flight.
    busy.queue(&stream);
    for (d, src) in bufs.iter_mut().zip(&data) {
        ring.upload_with(d, n, &stream, |px| px.copy_from_slice(src))
            .unwrap();
    }
    let st = ring.stats();
    assert!(
        (1..uploads as u64).contains(&st.slot_waits),
        "one slot, {uploads} back-to-back uploads: {st:?}"
    );
    assert_eq!(st.uploads, uploads as u64);
    assert_eq!(st.allocations, 1, "{st:?}");
    for (k, (d, &s)) in bufs.iter().zip(&seeds).enumerate() {
        check(&format_args!("upload {k}"), &device_contents(d), s);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn three_slots_with_a_synchronize_between_frames_never_wait() {
    let (_ctx, stream) = gpu();
    let n = 150_528 / 4;
    let mut input = DeviceBuffer::<f32>::alloc(n).unwrap();
    let mut output = DeviceBuffer::<f32>::alloc(n).unwrap();
    let mut ring = StagingRing::new();
    let frames = 50;
    for k in 0..frames {
        let s = seed();
        ring.upload_with(&mut input, n, &stream, |px| fill_pattern(px, s))
            .unwrap();
        stream.memcpy_dtod(&input, &mut output).unwrap();
        let t = ring.download(&output, n, &stream).unwrap();
        check(&format_args!("frame {k}"), ring.wait(&t).unwrap(), s);
        ring.synchronize().unwrap();
    }
    let st = ring.stats();
    assert_eq!(st.slot_waits, 0, "{st:?}");
    assert_eq!((st.uploads, st.downloads), (frames, frames));
    assert_eq!(st.allocations, 3, "one per slot: {st:?}");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_slot_whose_dma_completed_unseen_is_taken_without_a_wait() {
    let (_ctx, stream) = gpu();
    let mut ring = StagingRing::with_config(RingConfig {
        slots: 1,
        ..Default::default()
    })
    .unwrap();
    let n = 64 * KIB / 4;
    let mut d = DeviceBuffer::<f32>::alloc(n).unwrap();
    ring.upload_with(&mut d, n, &stream, |px| fill_pattern(px, seed()))
        .unwrap();
    // Complete, but not through this crate: the slot's buffer still counts its DMA as
    // running, so only the slot's event can say that it is done.
    // SAFETY: the stream is live; a synchronisation queues nothing.
    unsafe { cuda_core::result::stream_synchronize(stream.as_raw()) }.unwrap();
    let s = seed();
    ring.upload_with(&mut d, n, &stream, |px| fill_pattern(px, s))
        .unwrap();
    let st = ring.stats();
    assert_eq!(
        st.slot_waits, 0,
        "the slot's event said it was free: {st:?}"
    );
    assert_eq!(st.uploads, 2);
    stream.synchronize().unwrap();
    check("the second upload", &device_contents(&d), s);
}
