//! `try_upload_with`: a fill that returns `Err` gets its own error back, queues
//! nothing, changes nothing on the device and no transfer counter; one that returns
//! `Ok` moves its data as `upload_with` does; bad input is refused before the fill
//! runs.

use cuda_staging::FillError;

use super::*;

/// The caller's own error type: not a string, not a `cuda_staging::Error`.
#[derive(Debug, PartialEq, Eq)]
struct Corrupt {
    frame: u32,
    at: usize,
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_failing_fill_returns_the_callers_error_and_changes_nothing() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    // One piece, and a size that is cut in chunks on the staged route (the fast path
    // hands `fill` one contiguous slice either way).
    for n in [150_528 / 4, 4_915_200 / 4] {
        let sentinel = seed();
        let mut dev = device_with::<f32>(n, sentinel);
        // Warm: the capacity this size needs is pinned, so the failed call pins
        // nothing either and every counter must stay as it is.
        let s = seed();
        staging
            .upload_with(&mut dev, n, &stream, |px| fill_pattern(px, s))
            .expect("warm-up upload_with");
        set_device(&mut dev, sentinel);
        let before = staging.stats();
        let capacity = staging.capacity();

        for frame in 0..3u32 {
            let mut calls = 0;
            let r = staging.try_upload_with(&mut dev, n, &stream, |px: &mut [f32]| {
                calls += 1;
                assert_eq!(px.len(), n);
                // Half written, then the producer gives up.
                fill_pattern(&mut px[..n / 2], seed());
                Err(Corrupt { frame, at: n / 2 })
            });
            assert_eq!(calls, 1, "fill runs once");
            match r {
                Err(FillError::Fill(e)) => assert_eq!(e, Corrupt { frame, at: n / 2 }),
                other => panic!("expected the fill's own error, got {other:?}"),
            }
            assert_eq!(staging.stats(), before, "a failed fill counts nothing");
            assert_eq!(staging.capacity(), capacity);
            stream.synchronize().expect("synchronize");
            check(
                &format_args!("device after failed fill {frame}, {n} f32"),
                &device_contents(&dev),
                sentinel,
            );
        }

        // The same through a view: the rest of the buffer untouched too.
        let mut view = dev.slice_mut(n / 4..n / 2).expect("slice_mut");
        let len = view.len();
        let r = staging.try_upload_with(&mut view, len, &stream, |px: &mut [f32]| {
            px.fill(-1.0);
            Err(Corrupt { frame: 9, at: 0 })
        });
        assert!(
            matches!(r, Err(FillError::Fill(Corrupt { frame: 9, at: 0 }))),
            "{r:?}"
        );
        assert_eq!(staging.stats(), before);
        check(
            &format_args!("device after a failed fill into a view, {n} f32"),
            &device_contents(&dev),
            sentinel,
        );

        // The next fill that succeeds moves its data intact, counted once.
        let s = seed();
        staging
            .try_upload_with(&mut dev, n, &stream, |px: &mut [f32]| {
                fill_pattern(px, s);
                Ok::<(), Corrupt>(())
            })
            .expect("try_upload_with that succeeds");
        check(
            &format_args!("try_upload_with Ok, {n} f32"),
            &device_contents(&dev),
            s,
        );
        let after = staging.stats();
        assert_eq!(after.staged_transfers, before.staged_transfers + 1);
        assert_eq!(after.bytes_uploaded, before.bytes_uploaded + n as u64 * 4);
        assert_eq!(after.allocations, before.allocations);

        // And a view with Ok: exactly the view's range.
        let s_view = seed();
        let mut view = dev.slice_mut(n / 4..n / 2).expect("slice_mut");
        let len = view.len();
        staging
            .try_upload_with(&mut view, len, &stream, |px: &mut [f32]| {
                fill_pattern(px, s_view);
                Ok::<(), Corrupt>(())
            })
            .expect("try_upload_with into a view");
        check_regions(
            &format_args!("try_upload_with Ok into a view, {n} f32"),
            &device_contents(&dev),
            s,
            &[(n / 4, n / 2 - n / 4, s_view)],
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_failing_fill_on_a_fresh_buffer_keeps_its_pinned_memory_and_counts_no_transfer() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let n = 150_528 / 4;
    let sentinel = seed();
    let mut dev = device_with::<f32>(n, sentinel);
    let r = staging.try_upload_with(&mut dev, n, &stream, |_: &mut [f32]| Err("no frame"));
    assert!(matches!(r, Err(FillError::Fill("no frame"))), "{r:?}");
    // As after a panic in fill: the memory pinned for the call stays, and counted.
    let st = staging.stats();
    assert_eq!(st.allocations, 1, "{st:?}");
    assert_eq!(transfer_counters(&st), [0; 5], "{st:?}");
    assert!(staging.capacity() >= n * 4);
    check(
        "device after the failed fill",
        &device_contents(&dev),
        sentinel,
    );
    // The next call reuses that memory.
    let s = seed();
    staging
        .upload_with(&mut dev, n, &stream, |px| fill_pattern(px, s))
        .expect("upload_with after a failed fill");
    check("upload_with after a failed fill", &device_contents(&dev), s);
    assert_eq!(staging.stats().allocations, 1);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn try_upload_with_refuses_bad_input_before_the_fill_runs() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let len = 1000;
    let sentinel = seed();
    let mut dev = device_with::<f32>(len, sentinel);
    let mut ran = false;
    let r = staging.try_upload_with(&mut dev, len + 1, &stream, |_: &mut [f32]| {
        ran = true;
        Ok::<(), Corrupt>(())
    });
    assert!(!ran, "fill must not run for refused input");
    match r {
        Err(FillError::Cuda(Error::ExceedsDeviceBuffer { op, n, len: l })) => {
            assert_eq!((op, n, l), ("try_upload_with", len + 1, len));
        }
        other => panic!("expected ExceedsDeviceBuffer, got {other:?}"),
    }
    let r = staging.try_upload_with(&mut dev, usize::MAX, &stream, |_: &mut [f32]| {
        ran = true;
        Ok::<(), Corrupt>(())
    });
    assert!(!ran);
    assert!(
        matches!(
            r,
            Err(FillError::Cuda(Error::SizeOverflow { elem_bytes: 4, .. }))
        ),
        "{r:?}"
    );

    // Zero elements: fill gets an empty slice; its error still comes back as its
    // own, and nothing else happens either way.
    let r = staging.try_upload_with(&mut dev, 0, &stream, |px: &mut [f32]| {
        assert!(px.is_empty());
        Err(Corrupt { frame: 0, at: 0 })
    });
    assert!(
        matches!(r, Err(FillError::Fill(Corrupt { frame: 0, at: 0 }))),
        "{r:?}"
    );
    staging
        .try_upload_with(&mut dev, 0, &stream, |px: &mut [f32]| {
            assert!(px.is_empty());
            Ok::<(), Corrupt>(())
        })
        .expect("zero elements");
    assert_eq!(staging.stats(), StagingStats::default());
    assert_eq!(staging.capacity(), 0, "nothing pinned");
    check(
        "device after refused calls",
        &device_contents(&dev),
        sentinel,
    );
}
