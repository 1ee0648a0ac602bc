//! Bad input, zero elements, a failed reserve and a panic inside fill: each leaves the
//! buffer as it was and usable.

use super::*;

// ---------------------------------------------------------------------------------
// bad input changes nothing
// ---------------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn bad_input_is_an_error_and_changes_nothing() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let len = 1000;
    let mut dev = DeviceBuffer::<f32>::alloc(len).expect("alloc");
    // Some history first, so there is something to leave unchanged.
    staging
        .upload_with(&mut dev, len, &stream, |d| fill_pattern(d, 7))
        .expect("upload_with");
    let mut host = vec![0.0f32; len];
    staging
        .download(&mut host, &dev, &stream)
        .expect("download");
    let sentinel = seed();
    set_device(&mut dev, sentinel);
    let stats0 = staging.stats();
    let cap0 = staging.capacity();
    assert!(cap0 > 0);

    // n > len
    let mut fill_called = false;
    let e = staging
        .upload_with(&mut dev, len + 1, &stream, |_: &mut [f32]| {
            fill_called = true
        })
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::ExceedsDeviceBuffer {
                n: 1001,
                len: 1000,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(!fill_called, "fill must not run for a rejected transfer");
    let e = staging.download_into(&dev, len + 1, &stream).unwrap_err();
    assert!(
        matches!(
            e,
            Error::ExceedsDeviceBuffer {
                n: 1001,
                len: 1000,
                ..
            }
        ),
        "{e:?}"
    );

    // host slice longer than the device buffer
    let long_seed = seed();
    let long = pattern::<f32>(len + 1, long_seed);
    let e = staging.upload(&mut dev, &long, &stream).unwrap_err();
    assert!(matches!(e, Error::ExceedsDeviceBuffer { .. }), "{e:?}");
    let mut long_dst = long.clone();
    let e = staging.download(&mut long_dst, &dev, &stream).unwrap_err();
    assert!(matches!(e, Error::ExceedsDeviceBuffer { .. }), "{e:?}");
    check("host slice after rejected download", &long_dst, long_seed);

    // the same through the pageable route
    staging.set_auto_stage_max_bytes(0);
    let e = staging.upload(&mut dev, &long, &stream).unwrap_err();
    assert!(matches!(e, Error::ExceedsDeviceBuffer { .. }), "{e:?}");
    let e = staging.download(&mut long_dst, &dev, &stream).unwrap_err();
    assert!(matches!(e, Error::ExceedsDeviceBuffer { .. }), "{e:?}");
    staging.set_auto_stage_max_bytes(usize::MAX);

    // n * size_of::<T>() overflows
    for n in [usize::MAX, usize::MAX / 4 + 1] {
        let e = staging
            .upload_with(&mut dev, n, &stream, |_: &mut [f32]| fill_called = true)
            .unwrap_err();
        assert!(
            matches!(e, Error::SizeOverflow { elem_bytes: 4, .. }),
            "{e:?}"
        );
        let e = staging.download_into(&dev, n, &stream).unwrap_err();
        assert!(
            matches!(e, Error::SizeOverflow { elem_bytes: 4, .. }),
            "{e:?}"
        );
    }
    assert!(!fill_called);

    assert_eq!(staging.stats(), stats0, "rejected calls changed the stats");
    assert_eq!(
        staging.capacity(),
        cap0,
        "rejected calls changed the capacity"
    );
    check(
        "device buffer after rejected calls",
        &device_contents(&dev),
        sentinel,
    );

    // And the buffer still works.
    let s = seed();
    staging
        .upload(&mut dev, &pattern(len, s), &stream)
        .expect("upload after errors");
    check("upload after errors", &device_contents(&dev), s);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn zero_elements_succeed_and_do_nothing() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let sentinel = seed();
    let mut dev = device_with::<f32>(100, sentinel);
    let mut empty_dev = DeviceBuffer::<f32>::alloc(0).expect("alloc(0)");

    for d in [&mut dev, &mut empty_dev] {
        let mut calls = Vec::new();
        staging
            .upload_with(d, 0, &stream, |s: &mut [f32]| calls.push(s.len()))
            .expect("upload_with of 0");
        assert_eq!(calls, [0], "fill is called once, with an empty slice");
        let got = staging
            .download_into(d, 0, &stream)
            .expect("download_into of 0");
        assert!(got.is_empty());
        staging.upload(d, &[], &stream).expect("upload of 0");
        staging
            .download(&mut [], d, &stream)
            .expect("download of 0");
    }
    assert_eq!(staging.stats(), StagingStats::default());
    assert_eq!(staging.capacity(), 0, "zero elements pin nothing");
    check(
        "device after empty transfers",
        &device_contents(&dev),
        sentinel,
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn failed_reserve_leaves_the_old_buffer_usable() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    staging.reserve(MIB).expect("reserve 1 MiB");
    let cap0 = staging.capacity();
    assert!(cap0 >= MIB);
    let stats0 = staging.stats();
    assert_eq!(stats0.allocations, 1);

    let e = staging
        .reserve(1 << 40)
        .expect_err("pinning 1 TiB must fail");
    eprintln!("reserve(1 TiB) failed as expected: {e}");
    assert_eq!(
        staging.capacity(),
        cap0,
        "a failed grow keeps the old buffer"
    );
    assert_eq!(staging.stats(), stats0);

    // The old buffer still serves transfers, without a new allocation.
    let n = MIB / 4;
    let mut dev = DeviceBuffer::<f32>::alloc(n).expect("alloc");
    let s = seed();
    staging
        .upload_with(&mut dev, n, &stream, |d| fill_pattern(d, s))
        .expect("upload_with");
    check(
        "upload_with after failed reserve",
        &device_contents(&dev),
        s,
    );
    let s = seed();
    set_device(&mut dev, s);
    let got = staging
        .download_into(&dev, n, &stream)
        .expect("download_into");
    check("download_into after failed reserve", got, s);
    assert_eq!(staging.stats().allocations, 1);
}

// ---------------------------------------------------------------------------------
// a panic inside fill
// ---------------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn panic_inside_fill_leaves_the_buffer_usable() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let n = 1_228_800;
    let sentinel = seed();
    let mut dev = device_with::<f32>(n, sentinel);

    for attempt in 0..2 {
        let before = staging.stats();
        let r = catch_unwind(AssertUnwindSafe(|| {
            staging.upload_with(&mut dev, n, &stream, |d: &mut [f32]| {
                fill_pattern(&mut d[..n / 2], 99);
                panic!("fill panicked on purpose (this message is expected)");
            })
        }));
        assert!(r.is_err(), "attempt {attempt}: the panic propagates");
        let after = staging.stats();
        assert_eq!(
            transfer_counters(&after),
            transfer_counters(&before),
            "attempt {attempt}: a panicked call is not counted as a transfer"
        );
        // The pinned memory stays allocated and counted: one allocation in all.
        assert_eq!(after.allocations, 1, "attempt {attempt}");
        assert!(staging.capacity() >= n * 4);
        check(
            &format!("attempt {attempt}: device after panic in fill"),
            &device_contents(&dev),
            sentinel,
        );
    }

    // The next calls work and move the right data.
    let s = seed();
    staging
        .upload_with(&mut dev, n, &stream, |d| fill_pattern(d, s))
        .expect("upload_with after panic");
    check("upload_with after panic", &device_contents(&dev), s);
    let s = seed();
    set_device(&mut dev, s);
    let got = staging
        .download_into(&dev, n, &stream)
        .expect("download_into");
    check("download_into after panic", got, s);
    let s = seed();
    staging
        .upload(&mut dev, &pattern(n, s), &stream)
        .expect("upload after panic");
    check("upload after panic", &device_contents(&dev), s);
    let st = staging.stats();
    assert_eq!(st.allocations, 1);
    assert_eq!(st.staged_transfers, 3);
    assert_eq!(st.bytes_uploaded, 2 * n as u64 * 4);
}

// ---------------------------------------------------------------------------------
// views: the same rules, against the view's length
// ---------------------------------------------------------------------------------

/// A view's length bounds its transfers as a buffer's does, a range outside the
/// buffer is refused when the view is made, and nothing refused changes anything, in
/// the view or around it. (A view from another context than the stream is refused
/// like a buffer of one: `multi_gpu.rs` tests it, since a second context needs a
/// second GPU.)
#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn bad_input_through_views_is_an_error_and_changes_nothing() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let len = 1000;
    let (off, view_len) = (100, 500);
    let mut dev = DeviceBuffer::<f32>::alloc(len).expect("alloc");
    // Some history first, so there is something to leave unchanged.
    staging
        .upload_with(&mut dev, len, &stream, |d| fill_pattern(d, 7))
        .expect("upload_with");
    let sentinel = seed();
    set_device(&mut dev, sentinel);
    let stats0 = staging.stats();
    let cap0 = staging.capacity();

    // Ranges outside the buffer, or outside a view, are refused when made.
    let e = dev.slice_mut(900..1001).unwrap_err();
    assert_eq!(
        e,
        Error::OutOfRange {
            op: "DeviceBuffer::slice_mut",
            start: 900,
            end: 1001,
            len
        }
    );
    assert!(
        e.to_string().contains("900..1001") && e.to_string().contains("1000"),
        "{e}"
    );
    let e = dev.slice(1001..).unwrap_err();
    assert!(
        matches!(
            e,
            Error::OutOfRange {
                start: 1001,
                len: 1000,
                ..
            }
        ),
        "{e:?}"
    );
    let mut view = dev.slice_mut(off..off + view_len).expect("slice_mut");
    let e = view.slice_mut(400..501).unwrap_err();
    assert!(
        matches!(
            e,
            Error::OutOfRange {
                start: 400,
                end: 501,
                len: 500,
                ..
            }
        ),
        "{e:?}"
    );

    // n past the view (though inside the buffer).
    let mut fill_called = false;
    let e = staging
        .upload_with(&mut view, view_len + 1, &stream, |_: &mut [f32]| {
            fill_called = true
        })
        .unwrap_err();
    assert_eq!(
        e,
        Error::ExceedsDeviceBuffer {
            op: "upload_with",
            n: 501,
            len: 500
        }
    );
    assert!(!fill_called, "fill must not run for a rejected transfer");
    let e = staging
        .try_upload_with(&mut view, view_len + 1, &stream, |_: &mut [f32]| {
            fill_called = true;
            Ok::<(), ()>(())
        })
        .unwrap_err();
    assert!(
        matches!(
            e,
            cuda_staging::FillError::Cuda(Error::ExceedsDeviceBuffer {
                n: 501,
                len: 500,
                ..
            })
        ),
        "{e:?}"
    );
    assert!(!fill_called);
    let long_seed = seed();
    let long = pattern::<f32>(view_len + 1, long_seed);
    let e = staging.upload(&mut view, &long, &stream).unwrap_err();
    assert!(
        matches!(
            e,
            Error::ExceedsDeviceBuffer {
                op: "upload",
                n: 501,
                len: 500
            }
        ),
        "{e:?}"
    );
    let shared = dev.slice(off..off + view_len).expect("slice");
    let e = staging
        .download_into(&shared, view_len + 1, &stream)
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::ExceedsDeviceBuffer {
                op: "download_into",
                n: 501,
                len: 500
            }
        ),
        "{e:?}"
    );
    let mut long_dst = long.clone();
    let e = staging
        .download(&mut long_dst, &shared, &stream)
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::ExceedsDeviceBuffer {
                op: "download",
                n: 501,
                len: 500
            }
        ),
        "{e:?}"
    );
    check("host slice after a refused download", &long_dst, long_seed);
    // The same through the pageable route.
    staging.set_auto_stage_max_bytes(0);
    let mut view = dev.slice_mut(off..off + view_len).expect("slice_mut");
    let e = staging.upload(&mut view, &long, &stream).unwrap_err();
    assert!(
        matches!(
            e,
            Error::ExceedsDeviceBuffer {
                n: 501,
                len: 500,
                ..
            }
        ),
        "{e:?}"
    );
    staging.set_auto_stage_max_bytes(usize::MAX);

    // A byte count that overflows.
    let e = staging
        .upload_with(&mut view, usize::MAX, &stream, |_: &mut [f32]| {
            fill_called = true
        })
        .unwrap_err();
    assert!(
        matches!(e, Error::SizeOverflow { elem_bytes: 4, .. }),
        "{e:?}"
    );
    assert!(!fill_called);

    // An empty view: every transfer of it is a no-op that succeeds.
    let mut empty = dev.slice_mut(len..).expect("an empty view at the end");
    assert!(empty.is_empty());
    let mut calls = Vec::new();
    staging
        .upload_with(&mut empty, 0, &stream, |px: &mut [f32]| {
            calls.push(px.len())
        })
        .expect("upload_with into an empty view");
    assert_eq!(calls, [0]);
    staging
        .upload(&mut empty, &[], &stream)
        .expect("upload into an empty view");
    assert!(staging
        .download_into(&dev.slice(len..).expect("slice"), 0, &stream)
        .expect("download_into from an empty view")
        .is_empty());

    assert_eq!(staging.stats(), stats0, "rejected calls changed the stats");
    assert_eq!(
        staging.capacity(),
        cap0,
        "rejected calls changed the capacity"
    );
    check(
        "device after rejected calls through views",
        &device_contents(&dev),
        sentinel,
    );

    // And a view still works.
    let s = seed();
    let mut view = dev.slice_mut(off..off + view_len).expect("slice_mut");
    staging
        .upload(&mut view, &pattern(view_len, s), &stream)
        .expect("upload after errors");
    check_regions(
        "upload through a view after errors",
        &device_contents(&dev),
        sentinel,
        &[(off, view_len, s)],
    );
}
