//! Views on the ring: uploads into the slots of a batch tensor and downloads from
//! views at offsets, ordering against queued work through a view, the buffer's own
//! synchronous read waiting for a DMA queued through a view, and `try_upload_with`
//! (a failed fill queues nothing and does not use up a slot).

use cuda_staging::FillError;

use super::*;

/// Elements of one `[3, 64, 64]` frame; the batch tensor holds [`FRAMES`].
const FRAME: usize = 3 * 64 * 64;
const FRAMES: usize = 4;

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn frames_go_into_the_slots_of_a_batch_tensor_and_come_back_from_views() {
    let (_ctx, stream) = gpu();
    let mut ring = StagingRing::new();
    let sentinel = seed();
    let mut batch = device_with::<f32>(FRAMES * FRAME, sentinel);
    let seeds: Vec<u64> = (0..FRAMES).map(|_| seed()).collect();
    // Even slots by `upload_with`, odd ones by `upload` from a Vec; each call returns
    // once queued, and the next one fills another ring slot meanwhile.
    for (i, &s) in seeds.iter().enumerate() {
        let mut slot = batch
            .slice_mut(i * FRAME..(i + 1) * FRAME)
            .expect("slice_mut");
        if i % 2 == 0 {
            ring.upload_with(&mut slot, FRAME, &stream, |px| fill_pattern(px, s))
                .expect("upload_with into a slot");
        } else {
            ring.upload(&mut slot, &pattern::<f32>(FRAME, s), &stream)
                .expect("upload into a slot");
        }
    }
    // The buffer's synchronous read waits for the DMAs queued through its views.
    let all: Vec<(usize, usize, u64)> = seeds
        .iter()
        .enumerate()
        .map(|(i, &s)| (i * FRAME, FRAME, s))
        .collect();
    check_regions(
        "batch after ring uploads",
        &device_contents(&batch),
        sentinel,
        &all,
    );

    // Downloads from views, each redeemed after the next one is queued.
    let mut previous: Option<(usize, Ticket<f32>)> = None;
    for i in (0..FRAMES).rev() {
        let slot = batch.slice(i * FRAME..(i + 1) * FRAME).expect("slice");
        let t = ring
            .download(&slot, FRAME, &stream)
            .expect("download from a slot");
        if let Some((j, p)) = previous.replace((i, t)) {
            check(
                &format_args!("ring download of slot {j}"),
                ring.wait(&p).expect("wait"),
                seeds[j],
            );
        }
    }
    let (j, t) = previous.expect("a last ticket");
    check(
        &format_args!("ring download of slot {j}"),
        ring.wait(&t).expect("wait"),
        seeds[j],
    );
    // A prefix of a view, at an offset inside a slot.
    let t = ring
        .download(
            &batch.slice(FRAME + 10..2 * FRAME).expect("slice"),
            100,
            &stream,
        )
        .expect("download a prefix of a view");
    check_at(
        "prefix of a view",
        ring.wait(&t).expect("wait"),
        10,
        seeds[1],
    );

    let st = ring.stats();
    assert_eq!(st.uploads, FRAMES as u64, "{st:?}");
    assert_eq!(st.downloads, FRAMES as u64 + 1, "{st:?}");
    assert_eq!(st.bytes_uploaded, (FRAMES * FRAME * 4) as u64);
    assert_eq!(st.bytes_downloaded, (FRAMES * FRAME * 4 + 400) as u64);
}

/// An upload through a view returns once queued, behind work queued before it; a
/// synchronous read of the buffer then waits for it (the view's DMA is recorded in
/// the buffer), and the read sees it land after that work. A download from a view
/// sees a memset queued on that view before it.
#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn transfers_through_views_are_ordered_and_recorded_in_the_buffer() {
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let mut ring = StagingRing::new();
    warm(&mut ring, &stream, 4_915_200);
    const PAD: usize = 1027;
    for bytes in [150_528, 4_915_200] {
        let n = bytes / 4;
        let what = format!("{bytes} B through a view at element {PAD}");
        let sentinel = seed();
        let mut dev = device_with::<u32>(n + 2 * PAD, sentinel);
        let s = seed();
        let data = pattern::<u32>(n, s);
        busy.queue(&stream);
        // Queued behind the busy work, before the upload: must not win over it.
        stream
            .memset_u32(&mut dev.slice_mut(PAD..PAD + n).unwrap(), 0x1111_1111)
            .unwrap();
        ring.upload_with(
            &mut dev.slice_mut(PAD..PAD + n).unwrap(),
            n,
            &stream,
            |px| px.copy_from_slice(&data),
        )
        .unwrap();
        // No synchronisation here: `copy_to_host` waits for the queued work
        // recorded in the buffer, the upload through the view included.
        check_regions(
            &format_args!("upload {what}"),
            &device_contents(&dev),
            sentinel,
            &[(PAD, n, s)],
        );

        let bits = 0x5A5A_0000 | (seed() as u32 & 0xFFFF);
        busy.queue(&stream);
        stream
            .memset_u32(&mut dev.slice_mut(PAD + n / 2..PAD + n).unwrap(), bits)
            .unwrap();
        let t = ring
            .download(&dev.slice(PAD..PAD + n).unwrap(), n, &stream)
            .unwrap();
        let got = ring.wait(&t).unwrap();
        check(
            &format_args!("download {what}: first half"),
            &got[..n / 2],
            s,
        );
        check_all_eq(
            &format_args!("download {what}: memset half"),
            &got[n / 2..],
            bits,
        );
    }
}

/// The caller's own error type.
#[derive(Debug, PartialEq, Eq)]
struct Undecodable(u64);

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_failing_fill_queues_nothing_and_leaves_its_slot_for_the_next_upload() {
    let (_ctx, stream) = gpu();
    let n = 150_528 / 4;
    for slots in [1, 3] {
        let mut ring = StagingRing::with_config(cuda_staging::RingConfig {
            slots,
            ..Default::default()
        })
        .unwrap();
        let sentinel = seed();
        let mut dev = device_with::<f32>(2 * n, sentinel);
        // Pin every slot first, so the failed calls pin nothing either.
        for _ in 0..slots {
            ring.upload_with(&mut dev, 2 * n, &stream, |px| fill_pattern(px, sentinel))
                .unwrap();
        }
        ring.synchronize().unwrap();
        let (held_seed, held_dev) = (seed(), seed());
        let held = device_with::<f32>(n, held_seed);
        // With three slots, a download's ticket in the slot before the failing one:
        // a failed fill must not move the ring on, or the uploads below would come
        // round to it.
        let ticket = (slots == 3).then(|| ring.download(&held, n, &stream).unwrap());
        let before = ring.stats();
        let capacity = ring.capacity();
        dev.copy_from_host(&pattern::<f32>(2 * n, held_dev))
            .unwrap();

        for attempt in 0..3u64 {
            let r = ring.try_upload_with(
                &mut dev.slice_mut(n..).unwrap(),
                n,
                &stream,
                |px: &mut [f32]| {
                    px.fill(-1.0);
                    Err(Undecodable(attempt))
                },
            );
            match r {
                Err(FillError::Fill(e)) => assert_eq!(e, Undecodable(attempt)),
                other => panic!("expected the fill's own error, got {other:?}"),
            }
            assert_eq!(ring.stats(), before, "a failed fill counts nothing");
            assert_eq!(ring.capacity(), capacity, "and pins nothing");
        }
        stream.synchronize().unwrap();
        check(
            &format_args!("device after failed fills ({slots} slots)"),
            &device_contents(&dev),
            held_dev,
        );

        // The next upload works, through the same slot; so do the ones after it.
        for k in 0..slots - 1 {
            let s = seed();
            ring.try_upload_with(
                &mut dev.slice_mut(n..).unwrap(),
                n,
                &stream,
                |px: &mut [f32]| {
                    fill_pattern(px, s);
                    Ok::<(), Undecodable>(())
                },
            )
            .unwrap_or_else(|e| panic!("upload {k} after failed fills: {e:?}"));
            let back = device_contents(&dev);
            check_at(
                &format_args!("untouched half, upload {k}"),
                &back[..n],
                0,
                held_dev,
            );
            check(
                &format_args!("upload {k} after failed fills"),
                &back[n..],
                s,
            );
        }
        if let Some(t) = ticket {
            // slots - 1 transfers after the download: its slot was not reused.
            check(
                "a ticket from before the failed fills",
                ring.wait(&t)
                    .expect("the failed fills did not use up a slot"),
                held_seed,
            );
        }
        let s = seed();
        ring.upload_with(&mut dev, 2 * n, &stream, |px| fill_pattern(px, s))
            .unwrap();
        check(
            &format_args!("whole upload after failed fills ({slots} slots)"),
            &device_contents(&dev),
            s,
        );
        let after = ring.stats();
        assert_eq!(after.uploads, before.uploads + slots as u64, "{after:?}");
        assert_eq!(after.allocations, before.allocations, "{after:?}");
    }
}
