//! Ordering against work already queued on the stream.

use super::*;

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn an_upload_lands_after_a_memset_queued_before_it() {
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let mut ring = StagingRing::new();
    warm(&mut ring, &stream, 4_915_200);
    // 64 MiB of u32 set by the memset, the first `n` then overwritten by the upload.
    let mut dst = DeviceBuffer::<u32>::alloc(16 * MIB).unwrap();
    for (bytes, copy_in) in [(150_528, false), (4_915_200, false), (150_528, true)] {
        let n = bytes / 4;
        let (s, bits) = (seed(), 0xA5A5_0000 | (seed() as u32 & 0xFFFF));
        // Prepared data: the fill or copy-in takes well under the queued work.
        let data = pattern::<u32>(n, s);
        busy.queue(&stream);
        stream.memset_u32(&mut dst, bits).unwrap();
        if copy_in {
            ring.upload(&mut dst, &data, &stream).unwrap();
        } else {
            ring.upload_with(&mut dst, n, &stream, |px| px.copy_from_slice(&data))
                .unwrap();
        }
        let back = device_contents(&dst);
        check(&format_args!("upload of {bytes} B"), &back[..n], s);
        check_all_eq(&format_args!("memset past {bytes} B"), &back[n..], bits);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_download_sees_a_copy_and_a_memset_queued_before_it() {
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let mut ring = StagingRing::new();
    warm(&mut ring, &stream, 4_915_200);
    for bytes in [4 * KIB, 150_528, 4_915_200] {
        let n = bytes / 4;
        let (s_old, s_new, bits) = (seed(), seed(), 0x5A5A_0000 | (seed() as u32 & 0xFFFF));
        let mut src = device_with::<u32>(n, s_old);
        let fresh = device_with::<u32>(n, s_new);
        busy.queue(&stream);
        stream.memcpy_dtod(&fresh, &mut src).unwrap();
        stream
            .memset_u32(&mut src.slice_mut(n / 2..).unwrap(), bits)
            .unwrap();
        let t = ring.download(&src, n, &stream).unwrap();
        let got = ring.wait(&t).unwrap();
        check(
            &format_args!("copied half of {bytes} B"),
            &got[..n / 2],
            s_new,
        );
        check_all_eq(
            &format_args!("memset half of {bytes} B"),
            &got[n / 2..],
            bits,
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn work_queued_after_an_upload_sees_its_data() {
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let mut ring = StagingRing::new();
    warm(&mut ring, &stream, 4_915_200);
    for bytes in [150_528, 4_915_200] {
        let n = bytes / 4;
        let s = seed();
        let mut input = device_with::<f32>(n, seed());
        let mut output = device_with::<f32>(n, seed());
        let data = pattern::<f32>(n, s);
        busy.queue(&stream);
        ring.upload_with(&mut input, n, &stream, |px| px.copy_from_slice(&data))
            .unwrap();
        // Queued after the upload: copies what the upload wrote, not what was there.
        stream.memcpy_dtod(&input, &mut output).unwrap();
        let t = ring.download(&output, n, &stream).unwrap();
        check(
            &format_args!("download after upload of {bytes} B"),
            ring.wait(&t).unwrap(),
            s,
        );
        check(
            &format_args!("output of {bytes} B"),
            &device_contents(&output),
            s,
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_slot_is_not_reused_while_its_copy_is_in_flight() {
    let (_ctx, stream) = gpu();
    let mut busy = LongBusy::new();
    let mut ring = StagingRing::with_config(cuda_staging::RingConfig {
        slots: 1,
        ..Default::default()
    })
    .unwrap();
    warm(&mut ring, &stream, 150_528);
    let n = 150_528 / 4;
    // Fills copy prepared data (about 10 us), so each pair's second call comes while
    // the first one's DMA still waits behind ~1 ms of queued work.
    let (s_a, s_b, s_c, s_d) = (seed(), seed(), seed(), seed());
    let (data_a, data_b) = (pattern::<f32>(n, s_a), pattern::<f32>(n, s_b));
    let mut a = DeviceBuffer::<f32>::alloc(n).unwrap();
    let mut b = DeviceBuffer::<f32>::alloc(n).unwrap();
    let c = device_with::<f32>(n, s_c);
    let d = device_with::<f32>(n, s_d);

    // An upload after an upload: the one slot is still read by the first DMA.
    busy.queue(&stream);
    ring.upload_with(&mut a, n, &stream, |px| px.copy_from_slice(&data_a))
        .unwrap();
    ring.upload_with(&mut b, n, &stream, |px| px.copy_from_slice(&data_b))
        .unwrap();
    // How many of the three calls below find the slot still in flight depends on
    // how much of the queued work is left when the call comes (enqueueing large
    // copies can block until most have run), so the count is bounded, not exact;
    // what must hold every time is the data, checked after each pair.
    let waits_after_one = ring.stats().slot_waits;
    assert!(waits_after_one <= 1, "{:?}", ring.stats());
    ring.synchronize().unwrap();
    check(
        &format_args!("upload, then upload: first"),
        &device_contents(&a),
        s_a,
    );
    check(
        &format_args!("upload, then upload: second"),
        &device_contents(&b),
        s_b,
    );

    // A download after an upload.
    busy.queue(&stream);
    ring.upload_with(&mut a, n, &stream, |px| px.copy_from_slice(&data_b))
        .unwrap();
    let t = ring.download(&c, n, &stream).unwrap();
    assert!(
        (waits_after_one..=waits_after_one + 1).contains(&ring.stats().slot_waits),
        "{:?}",
        ring.stats()
    );
    check(
        &format_args!("upload, then download: download"),
        ring.wait(&t).unwrap(),
        s_c,
    );
    check(
        &format_args!("upload, then download: upload"),
        &device_contents(&a),
        s_b,
    );
    ring.synchronize().unwrap();

    // An upload after a download whose ticket was not redeemed.
    busy.queue(&stream);
    let t = ring.download(&d, n, &stream).unwrap();
    ring.upload_with(&mut b, n, &stream, |px| px.copy_from_slice(&data_a))
        .unwrap();
    assert!(
        (1..=3).contains(&ring.stats().slot_waits),
        "three calls behind ~100 ms of queued work, none waited: {:?}",
        ring.stats()
    );
    let reason = invalid_reason(ring.wait(&t).unwrap_err());
    assert!(reason.contains("stale ticket"), "{reason}");
    check(
        &format_args!("download, then upload: upload"),
        &device_contents(&b),
        s_a,
    );
    assert_eq!(ring.stats().allocations, 1);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn dropping_a_ring_waits_for_its_transfers_in_flight() {
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let n = 4_915_200 / 4;
    let s = seed();
    let data = pattern::<f32>(n, s);
    let mut dst = DeviceBuffer::<f32>::alloc(n).unwrap();
    let src = device_with::<f32>(n, seed());
    {
        let mut ring = StagingRing::new();
        warm(&mut ring, &stream, 4_915_200);
        busy.queue(&stream);
        ring.upload_with(&mut dst, n, &stream, |px| px.copy_from_slice(&data))
            .unwrap();
        busy.queue(&stream);
        // A download never redeemed: its slot is written while the ring drops.
        let _unredeemed = ring.download(&src, n, &stream).unwrap();
        // Dropped here with both copies queued behind ~2 ms of work: the pinned
        // slots must outlive them.
    }
    check(
        &format_args!("upload of a dropped ring"),
        &device_contents(&dst),
        s,
    );
    stream.synchronize().unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn synchronize_returns_once_every_queued_transfer_has_landed() {
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let mut ring = StagingRing::new();
    let n = 4_915_200 / 4;
    warm(&mut ring, &stream, 4_915_200);
    let mut dst = DeviceBuffer::<u32>::alloc(n).unwrap();
    let (s_up, s_down) = (seed(), seed());
    let src = device_with::<u32>(n, s_down);
    busy.queue(&stream);
    ring.upload_with(&mut dst, n, &stream, |px| fill_pattern(px, s_up))
        .unwrap();
    let t = ring.download(&src, n, &stream).unwrap();
    ring.synchronize().unwrap();
    // The stream holds nothing queued after the ring's last transfer, so once that
    // one has landed the stream is idle (a `synchronize` that returned at once would
    // find it still busy with the queued work).
    assert!(
        stream.query().unwrap(),
        "synchronize returned before the ring's transfers landed"
    );
    assert_eq!(ring.stats().slot_waits, 0, "{:?}", ring.stats());
    check(
        &format_args!("the download"),
        ring.wait(&t).unwrap(),
        s_down,
    );
    check(&format_args!("the upload"), &device_contents(&dst), s_up);
}
