//! Prefixes, bad input that changes nothing, zero elements and a panic inside fill.

use super::*;

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn prefix_transfers_leave_the_rest_of_the_device_buffer_untouched() {
    let (_ctx, stream) = gpu();
    let mut ring = StagingRing::new();
    let len = 150_528 / 4;
    for n in [1, 1000, len / 2, len - 1] {
        let (s_rest, s_with, s_up, s_down) = (seed(), seed(), seed(), seed());
        let mut d = device_with::<f32>(len, s_rest);
        ring.upload_with(&mut d, n, &stream, |px| {
            assert_eq!(px.len(), n);
            fill_pattern(px, s_with);
        })
        .unwrap();
        let back = device_contents(&d);
        check(&format_args!("upload_with prefix {n}"), &back[..n], s_with);
        check_at(&format_args!("past upload_with {n}"), &back[n..], n, s_rest);

        let mut d = device_with::<f32>(len, s_rest);
        ring.upload(&mut d, &pattern::<f32>(n, s_up), &stream)
            .unwrap();
        let back = device_contents(&d);
        check(&format_args!("upload prefix {n}"), &back[..n], s_up);
        check_at(&format_args!("past upload {n}"), &back[n..], n, s_rest);

        let d = device_with::<f32>(len, s_down);
        let t = ring.download(&d, n, &stream).unwrap();
        assert_eq!(t.len(), n);
        let got = ring.wait(&t).unwrap();
        assert_eq!(got.len(), n, "a prefix download returns n elements");
        check(&format_args!("download prefix {n}"), got, s_down);
        check(
            &format_args!("device after download {n}"),
            &device_contents(&d),
            s_down,
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn bad_input_is_refused_before_any_driver_call_and_changes_nothing() {
    let (_ctx, stream) = gpu();
    // One slot: had a refused call taken it, the ticket below would go stale.
    let mut ring = StagingRing::with_config(cuda_staging::RingConfig {
        slots: 1,
        ..Default::default()
    })
    .unwrap();
    let len = 4096;
    let (s_dev, s_held) = (seed(), seed());
    let mut d = device_with::<f32>(len, s_dev);
    let held = device_with::<f32>(len, s_held);
    let t = ring.download(&held, len, &stream).unwrap();
    let before = ring.stats();
    let capacity = ring.capacity();

    let mut called = false;
    let e = ring
        .upload_with(&mut d, len + 1, &stream, |_| called = true)
        .unwrap_err();
    assert!(!called, "fill must not run for a refused upload");
    assert_eq!(
        e,
        Error::ExceedsDeviceBuffer {
            op: "StagingRing::upload_with",
            n: len + 1,
            len
        }
    );
    assert!(e.to_string().contains(&format!("{}", len + 1)), "{e}");
    assert!(e.to_string().contains(&format!("{len}")), "{e}");

    let e = ring
        .upload(&mut d, &pattern::<f32>(len + 1, seed()), &stream)
        .unwrap_err();
    assert!(
        matches!(e, Error::ExceedsDeviceBuffer { op: "StagingRing::upload", n, len: l } if n == len + 1 && l == len),
        "{e:?}"
    );

    let e = ring.download(&d, len + 1, &stream).unwrap_err();
    assert_eq!(
        e,
        Error::ExceedsDeviceBuffer {
            op: "StagingRing::download",
            n: len + 1,
            len
        }
    );

    // A byte count that overflows: refused before the length check.
    let e = ring
        .upload_with(&mut d, usize::MAX, &stream, |_| called = true)
        .unwrap_err();
    assert!(!called);
    assert!(
        matches!(
            e,
            Error::SizeOverflow {
                n: usize::MAX,
                elem_bytes: 4,
                ..
            }
        ),
        "{e:?}"
    );
    let e = ring.download(&d, usize::MAX / 2, &stream).unwrap_err();
    assert!(
        matches!(e, Error::SizeOverflow { elem_bytes: 4, .. }),
        "{e:?}"
    );

    assert_eq!(ring.stats(), before, "refused calls count nothing");
    assert_eq!(ring.capacity(), capacity, "refused calls pin nothing");
    check(
        &format_args!("ticket taken before the refused calls"),
        ring.wait(&t).expect("no refused call took the slot"),
        s_held,
    );
    check(
        &format_args!("device after refused calls"),
        &device_contents(&d),
        s_dev,
    );

    // Zero elements: nothing moves, nothing is counted, no slot is taken.
    let mut fill_len = None;
    ring.upload_with(&mut d, 0, &stream, |px: &mut [f32]| {
        fill_len = Some(px.len())
    })
    .unwrap();
    assert_eq!(fill_len, Some(0), "fill runs once, with an empty slice");
    ring.upload(&mut d, &[], &stream).unwrap();
    let empty = ring.download(&d, 0, &stream).unwrap();
    assert!(empty.is_empty());
    assert!(
        !t.is_empty() && t.len() == len,
        "the held ticket moves {len}"
    );
    assert_eq!(ring.wait(&empty).unwrap(), &[] as &[f32]);
    assert_eq!(ring.stats(), before, "zero elements count nothing");
    assert_eq!(ring.capacity(), capacity);
    check(
        &format_args!("ticket after zero-element calls"),
        ring.wait(&t).expect("no zero-element call took the slot"),
        s_held,
    );
    check(
        &format_args!("device after zero-element calls"),
        &device_contents(&d),
        s_dev,
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_panic_inside_fill_leaves_the_ring_working() {
    let (_ctx, stream) = gpu();
    let n = 150_528 / 4;
    // On a fresh ring (the panic comes right after the slot is first pinned) and on
    // one in use (a slot reused after a transfer), with one slot and with three.
    for (slots, warm) in [(1, false), (1, true), (3, false), (3, true)] {
        let mut ring = StagingRing::with_config(cuda_staging::RingConfig {
            slots,
            ..Default::default()
        })
        .unwrap();
        let s_before = seed();
        let mut d = device_with::<f32>(n, seed());
        if warm {
            ring.upload_with(&mut d, n, &stream, |px| fill_pattern(px, s_before))
                .unwrap();
        } else {
            d.copy_from_host(&pattern::<f32>(n, s_before)).unwrap();
        }
        let before = ring.stats();

        let r = catch_unwind(AssertUnwindSafe(|| {
            ring.upload_with(&mut d, n, &stream, |px: &mut [f32]| {
                px.fill(-1.0);
                panic!("fill fails on purpose");
            })
        }));
        let payload = r.expect_err("the panic propagates");
        assert_eq!(
            payload.downcast_ref::<&str>().copied(),
            Some("fill fails on purpose")
        );
        let after = ring.stats();
        assert_eq!(after.uploads, before.uploads, "nothing was queued");
        assert_eq!(after.bytes_uploaded, before.bytes_uploaded);
        stream.synchronize().unwrap();
        check(
            &format_args!("device after a panicking fill (slots {slots}, warm {warm})"),
            &device_contents(&d),
            s_before,
        );

        // The ring goes on: an upload and a download through every slot.
        for _ in 0..slots + 1 {
            let s = seed();
            ring.upload_with(&mut d, n, &stream, |px| fill_pattern(px, s))
                .unwrap();
            let t = ring.download(&d, n, &stream).unwrap();
            check(
                &format_args!("after a panicking fill (slots {slots}, warm {warm})"),
                ring.wait(&t).unwrap(),
                s,
            );
        }
        let s = ring.stats();
        assert_eq!(s.uploads, before.uploads + slots as u64 + 1, "{s:?}");
        assert_eq!(s.downloads, slots as u64 + 1, "{s:?}");
    }
}

/// The same rules through views: a view's length bounds its transfers, a range
/// outside the buffer is refused when the view is made, and nothing refused takes a
/// slot, counts or changes anything. (A view from another context than the stream:
/// `multi_gpu.rs`, which has a second context.)
#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn bad_input_through_views_is_refused_and_changes_nothing() {
    let (_ctx, stream) = gpu();
    // One slot: had a refused call taken it, the ticket below would go stale.
    let mut ring = StagingRing::with_config(cuda_staging::RingConfig {
        slots: 1,
        ..Default::default()
    })
    .unwrap();
    let (len, off, view_len) = (4096, 1000, 2048);
    let (s_dev, s_held) = (seed(), seed());
    let mut d = device_with::<f32>(len, s_dev);
    let held = device_with::<f32>(len, s_held);
    let t = ring
        .download(&held.slice(off..off + view_len).unwrap(), view_len, &stream)
        .unwrap();
    let before = ring.stats();
    let capacity = ring.capacity();

    let e = d.slice_mut(off..len + 1).unwrap_err();
    assert!(
        matches!(
            e,
            Error::OutOfRange {
                start: 1000,
                end: 4097,
                len: 4096,
                ..
            }
        ),
        "{e:?}"
    );
    let mut view = d.slice_mut(off..off + view_len).unwrap();
    let mut called = false;
    let e = ring
        .upload_with(&mut view, view_len + 1, &stream, |_| called = true)
        .unwrap_err();
    assert!(!called, "fill must not run for a refused upload");
    assert_eq!(
        e,
        Error::ExceedsDeviceBuffer {
            op: "StagingRing::upload_with",
            n: view_len + 1,
            len: view_len
        }
    );
    let e = ring
        .try_upload_with(&mut view, view_len + 1, &stream, |_: &mut [f32]| {
            called = true;
            Ok::<(), ()>(())
        })
        .unwrap_err();
    assert!(!called);
    assert_eq!(
        e,
        cuda_staging::FillError::Cuda(Error::ExceedsDeviceBuffer {
            op: "StagingRing::try_upload_with",
            n: view_len + 1,
            len: view_len
        })
    );
    let e = ring
        .upload(&mut view, &pattern::<f32>(view_len + 1, seed()), &stream)
        .unwrap_err();
    assert!(
        matches!(e, Error::ExceedsDeviceBuffer { op: "StagingRing::upload", n, len: l } if n == view_len + 1 && l == view_len),
        "{e:?}"
    );
    let e = ring
        .download(
            &d.slice(off..off + view_len).unwrap(),
            view_len + 1,
            &stream,
        )
        .unwrap_err();
    assert_eq!(
        e,
        Error::ExceedsDeviceBuffer {
            op: "StagingRing::download",
            n: view_len + 1,
            len: view_len
        }
    );
    let e = ring
        .download(&d.slice(off..).unwrap(), usize::MAX / 2, &stream)
        .unwrap_err();
    assert!(
        matches!(e, Error::SizeOverflow { elem_bytes: 4, .. }),
        "{e:?}"
    );

    // An empty view: nothing moves, nothing is counted, no slot is taken.
    let mut empty = d.slice_mut(len..).unwrap();
    ring.upload_with(&mut empty, 0, &stream, |px: &mut [f32]| {
        assert!(px.is_empty())
    })
    .unwrap();
    let none = ring.download(&d.slice(len..).unwrap(), 0, &stream).unwrap();
    assert_eq!(ring.wait(&none).unwrap(), &[] as &[f32]);

    assert_eq!(ring.stats(), before, "refused calls count nothing");
    assert_eq!(ring.capacity(), capacity, "refused calls pin nothing");
    // The download was of `held[off..off + view_len]`.
    check_at(
        "ticket taken before the refused calls through views",
        ring.wait(&t).expect("no refused call took the slot"),
        off,
        s_held,
    );
    check(
        "device after refused calls through views",
        &device_contents(&d),
        s_dev,
    );
}
