//! Views: every transfer into and out of part of a device buffer (`slice_mut` /
//! `slice`), as for a whole buffer: the frames of a batch tensor written slot by
//! slot through one staging buffer, views at odd offsets on every route (staged in
//! one piece, pipelined in chunks, the driver's pageable path, page-locked host
//! memory), prefixes of a view, and ordering against work queued before a transfer
//! through a view.

use super::*;

/// Frames in the batch tensor: `[FRAMES, 3, 64, 64]` f32.
const FRAMES: usize = 4;
/// Elements of one `[3, 64, 64]` frame (49152 B).
const FRAME: usize = 3 * 64 * 64;

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn n_frames_land_in_the_slots_of_one_batch_tensor_through_views() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let sentinel = seed();
    let mut batch = device_with::<f32>(FRAMES * FRAME, sentinel);
    let seeds: Vec<u64> = (0..FRAMES).map(|_| seed()).collect();

    // Frame i into slot i, one after the other, through one staging buffer.
    for (i, &s) in seeds.iter().enumerate() {
        let mut slot = batch
            .slice_mut(i * FRAME..(i + 1) * FRAME)
            .expect("slice_mut of a slot");
        assert_eq!(slot.len(), FRAME);
        staging
            .upload_with(&mut slot, FRAME, &stream, |px: &mut [f32]| {
                assert_eq!(px.len(), FRAME);
                fill_pattern(px, s);
            })
            .expect("upload_with into a slot");
        // The slots written so far hold their frames, the others what they held.
        let written: Vec<(usize, usize, u64)> = seeds[..=i]
            .iter()
            .enumerate()
            .map(|(j, &sj)| (j * FRAME, FRAME, sj))
            .collect();
        check_regions(
            &format_args!("batch after frame {i}"),
            &device_contents(&batch),
            sentinel,
            &written,
        );
    }

    // Each slot read back at its offset: `download` into a Vec and `download_into`
    // in place, from a shared view; then `download` from a writable view.
    for (i, &s) in seeds.iter().enumerate() {
        let slot = batch.slice(i * FRAME..(i + 1) * FRAME).expect("slice");
        let mut host = pattern::<f32>(FRAME, seed());
        staging
            .download(&mut host, &slot, &stream)
            .expect("download from a slot");
        check(&format_args!("download of slot {i}"), &host, s);
        let got = staging
            .download_into(&slot, FRAME, &stream)
            .expect("download_into from a slot");
        assert_eq!(got.len(), FRAME);
        check(&format_args!("download_into of slot {i}"), got, s);
        let slot_mut = batch
            .slice_mut(i * FRAME..(i + 1) * FRAME)
            .expect("slice_mut");
        let mut host = pattern::<f32>(FRAME, seed());
        staging
            .download(&mut host, &slot_mut, &stream)
            .expect("download from a writable view");
        check(
            &format_args!("download of slot {i} (writable view)"),
            &host,
            s,
        );
    }

    // `upload` from Vecs into the slots in reverse order.
    let again: Vec<u64> = (0..FRAMES).map(|_| seed()).collect();
    for i in (0..FRAMES).rev() {
        let src = pattern::<f32>(FRAME, again[i]);
        let mut slot = batch
            .slice_mut(i * FRAME..(i + 1) * FRAME)
            .expect("slice_mut");
        staging
            .upload(&mut slot, &src, &stream)
            .expect("upload into a slot");
    }
    let all: Vec<(usize, usize, u64)> = again
        .iter()
        .enumerate()
        .map(|(i, &s)| (i * FRAME, FRAME, s))
        .collect();
    check_regions(
        "batch after uploads in reverse order",
        &device_contents(&batch),
        sentinel,
        &all,
    );

    let st = staging.stats();
    assert_eq!(
        st.allocations, 1,
        "one pinned buffer served every slot: {st:?}"
    );
    assert_eq!(st.transfers(), (5 * FRAMES) as u64, "{st:?}");
    let bytes = (FRAMES * FRAME * 4) as u64;
    assert_eq!(st.bytes_uploaded, 2 * bytes, "{st:?}");
    assert_eq!(st.bytes_downloaded, 3 * bytes, "{st:?}");
}

/// How a transfer through a view is made.
#[derive(Clone, Copy, Debug)]
enum ViewRoute {
    /// `upload_with` / `download_into`.
    Fast,
    /// `upload` / `download` from and into a `Vec`, staged (in chunks when large).
    Staged,
    /// `upload` / `download` with threshold 0: the driver's pageable path.
    Pageable,
    /// `upload` / `download` from and into a `PinnedBuffer`: DMA straight from it.
    PinnedHost,
}

/// A round trip of `bytes` through a view at element `off` of a larger buffer on
/// `route`: what lands is exactly the view's range, nothing outside it changes, and
/// the download returns what is there.
fn view_round_trip(route: ViewRoute, bytes: usize, off: usize) {
    let (_ctx, stream) = gpu();
    let what = format!("{route:?}, {bytes} B at offset {off}");
    let mut staging = staged_buffer();
    if let ViewRoute::Pageable = route {
        staging.set_auto_stage_max_bytes(0);
    }
    let sentinel = seed();
    let mut dev = device_with::<u8>(off + bytes + 4099, sentinel);
    let mut pinned = match route {
        ViewRoute::PinnedHost => Some(PinnedBuffer::<u8>::alloc(bytes).expect("PinnedBuffer")),
        _ => None,
    };
    let expected = match route {
        ViewRoute::Fast | ViewRoute::Staged => Route::Staged,
        ViewRoute::Pageable => Route::Direct,
        ViewRoute::PinnedHost => Route::PinnedSource,
    };

    let s = seed();
    let before = staging.stats();
    {
        let mut view = dev.slice_mut(off..off + bytes).expect("slice_mut");
        match route {
            ViewRoute::Fast => staging
                .upload_with(&mut view, bytes, &stream, |px| fill_pattern(px, s))
                .expect(&what),
            ViewRoute::Staged | ViewRoute::Pageable => staging
                .upload(&mut view, &pattern::<u8>(bytes, s), &stream)
                .expect(&what),
            ViewRoute::PinnedHost => {
                let host = pinned.as_mut().expect("pinned");
                fill_pattern(host, s);
                staging.upload(&mut view, host, &stream).expect(&what)
            }
        }
    }
    assert_counted(&what, before, staging.stats(), expected, bytes, 0);
    check_regions(
        &format_args!("upload {what}"),
        &device_contents(&dev),
        sentinel,
        &[(off, bytes, s)],
    );

    let before = staging.stats();
    let view = dev.slice(off..off + bytes).expect("slice");
    match route {
        ViewRoute::Fast => {
            let got = staging.download_into(&view, bytes, &stream).expect(&what);
            check(&format_args!("download_into {what}"), got, s);
        }
        ViewRoute::Staged | ViewRoute::Pageable => {
            let mut host = pattern::<u8>(bytes, seed());
            staging.download(&mut host, &view, &stream).expect(&what);
            check(&format_args!("download {what}"), &host, s);
        }
        ViewRoute::PinnedHost => {
            let host = pinned.as_mut().expect("pinned");
            fill_pattern(host, seed());
            staging.download(host, &view, &stream).expect(&what);
            check(&format_args!("download {what}"), host, s);
        }
    }
    assert_counted(&what, before, staging.stats(), expected, 0, bytes);
    check_regions(
        &format_args!("device after the download, {what}"),
        &device_contents(&dev),
        sentinel,
        &[(off, bytes, s)],
    );
}

/// Offsets (in bytes of `u8` elements): odd, and past a page.
const VIEW_OFFSETS: [usize; 2] = [1, 4097];
/// In one piece, and pipelined in chunks (an odd size, so the last chunk is short).
const VIEW_SIZES: [usize; 2] = [150_528, 4_915_205];

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn views_at_odd_offsets_move_exactly_their_range_on_every_route() {
    for route in [
        ViewRoute::Fast,
        ViewRoute::Staged,
        ViewRoute::Pageable,
        ViewRoute::PinnedHost,
    ] {
        for bytes in VIEW_SIZES {
            for off in VIEW_OFFSETS {
                view_round_trip(route, bytes, off);
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_prefix_of_a_view_leaves_the_rest_of_the_view_untouched() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let len = 150_528 / 4;
    let (off, view_len) = (1000, len / 2);
    for n in [1, 777, view_len - 1, view_len] {
        let sentinel = seed();
        let mut dev = device_with::<f32>(len, sentinel);
        let (s_with, s_up) = (seed(), seed());
        let mut view = dev.slice_mut(off..off + view_len).expect("slice_mut");
        staging
            .upload_with(&mut view, n, &stream, |px: &mut [f32]| {
                assert_eq!(px.len(), n);
                fill_pattern(px, s_with);
            })
            .expect("upload_with a prefix of a view");
        check_regions(
            &format_args!("upload_with {n} of a view of {view_len}"),
            &device_contents(&dev),
            sentinel,
            &[(off, n, s_with)],
        );

        set_device(&mut dev, sentinel);
        let mut view = dev.slice_mut(off..off + view_len).expect("slice_mut");
        staging
            .upload(&mut view, &pattern::<f32>(n, s_up), &stream)
            .expect("upload a prefix of a view");
        check_regions(
            &format_args!("upload {n} of a view of {view_len}"),
            &device_contents(&dev),
            sentinel,
            &[(off, n, s_up)],
        );

        // A prefix download from a view: its first n elements, at the view's offset.
        let got = staging
            .download_into(&dev.slice(off..off + view_len).expect("slice"), n, &stream)
            .expect("download_into a prefix of a view");
        check(&format_args!("download_into {n} of a view"), got, s_up);
        let mut host = pattern::<f32>(n, seed());
        staging
            .download(&mut host, &dev.slice(off + 1..).expect("slice"), &stream)
            .expect("download a prefix of a view");
        check_at(
            &format_args!("download {n} from a view one element further"),
            &host[..n - 1],
            1,
            s_up,
        );
        check_at(
            &format_args!("download {n}: the element past the upload"),
            &host[n - 1..],
            off + n,
            sentinel,
        );
    }
}

/// A download through a view observes work queued before it on the stream, and an
/// upload through a view lands after it: on the staged route in one piece and in
/// chunks, and on the fast path.
#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn transfers_through_views_are_ordered_after_work_queued_before_them() {
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let mut staging = staged_buffer();
    const PAD: usize = 4097;
    for bytes in [150_528, 4_915_200] {
        let mut dev = device_with::<u8>(bytes + 2 * PAD, seed());
        let mut host = vec![0u8; bytes];
        // Warm-up: pin what both sizes need, so no call below spends its time
        // pinning while the queued work runs out.
        staging
            .download(
                &mut host,
                &dev.slice(PAD..PAD + bytes).expect("slice"),
                &stream,
            )
            .expect("warm-up");
        let _ = staging
            .download_into(&dev.slice(PAD..PAD + bytes).expect("slice"), bytes, &stream)
            .expect("warm-up");

        for (round, fast) in [(0u8, false), (1, true)] {
            let what = format!("download from a view of {bytes} B, fast {fast}");
            let sentinel = seed();
            set_device(&mut dev, sentinel);
            let value = 0x5A_u8.wrapping_add(0x21 * round);
            busy.queue_one_way(&stream);
            stream
                .memset_bytes(
                    &mut dev.slice_mut(PAD..PAD + bytes).expect("slice_mut"),
                    value,
                )
                .expect("memset_bytes on a view");
            let view = dev.slice(PAD..PAD + bytes).expect("slice");
            if fast {
                let got = staging.download_into(&view, bytes, &stream).expect(&what);
                assert_stream_idle(&what, &stream);
                check_all_eq(&what, got, value);
            } else {
                staging.download(&mut host, &view, &stream).expect(&what);
                assert_stream_idle(&what, &stream);
                check_all_eq(&what, &host, value);
            }
            let back = device_contents(&dev);
            check_at(
                &format_args!("{what}: before the view"),
                &back[..PAD],
                0,
                sentinel,
            );
            check_all_eq(
                &format_args!("{what}: the view"),
                &back[PAD..PAD + bytes],
                value,
            );
            check_at(
                &format_args!("{what}: after the view"),
                &back[PAD + bytes..],
                PAD + bytes,
                sentinel,
            );
        }

        for fast in [false, true] {
            let what = format!("upload into a view of {bytes} B, fast {fast}");
            let sentinel = seed();
            set_device(&mut dev, sentinel);
            let s = seed();
            let src = pattern::<u8>(bytes, s);
            busy.queue_one_way(&stream);
            // Queued before the upload: it must not overwrite what the upload wrote.
            stream
                .memset_bytes(
                    &mut dev.slice_mut(PAD..PAD + bytes).expect("slice_mut"),
                    0x11,
                )
                .expect("memset_bytes on a view");
            let mut view = dev.slice_mut(PAD..PAD + bytes).expect("slice_mut");
            if fast {
                staging
                    .upload_with(&mut view, bytes, &stream, |px| px.copy_from_slice(&src))
                    .expect(&what);
            } else {
                staging.upload(&mut view, &src, &stream).expect(&what);
            }
            assert_stream_idle(&what, &stream);
            check_regions(&what, &device_contents(&dev), sentinel, &[(PAD, bytes, s)]);
        }
    }
}
