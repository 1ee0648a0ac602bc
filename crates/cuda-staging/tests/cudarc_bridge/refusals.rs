//! What the bridge refuses, before any driver call and changing nothing: a view
//! passed with another stream than its own, memory of another context, a stream not
//! borrowed from cudarc; an error cudarc had stored; and zero elements.

use super::*;
use cuda_staging::cudarc::driver::{sys, CudaContext, CudaSlice, DriverError};
use cuda_staging::{
    Context, DeviceView2dMut, DownloadBatch, FillError, RingStats, StagingStats, UploadBatch,
};

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_view_passed_with_another_stream_is_refused_before_anything_happens() {
    let g = gpu();
    let other_cu = new_stream(&g.ctx).expect("a second cudarc stream");
    let ours = Stream::new(&Context::borrow_cudarc(&g.ctx)).expect("Stream::new");
    let n = 150_528 / 4;
    let s = seed();
    let mut d: CudaSlice<f32> = slice_with(&g.cu, n, s);
    let host = pattern::<f32>(n, seed());
    let mut back = vec![0f32; n];
    // Fresh: nothing pinned yet, so a refusal that came after pinning would show.
    let mut staging = StagingBuffer::new();
    let mut ring = StagingRing::new();
    for (name, other) in [
        (
            "another borrowed cudarc stream",
            Stream::borrow_cudarc(&other_cu).expect("borrow_cudarc"),
        ),
        ("a stream of our own", ours),
    ] {
        let w = |call: &str| format!("{call} with {name}");
        let mut filled = false;
        {
            let mut dst = CudarcViewMut::new(&mut d, &g.stream).expect("new");
            expect_stream_mismatch(&w("upload"), staging.upload(&mut dst, &host, &other));
            expect_stream_mismatch(
                &w("upload_with"),
                staging.upload_with(&mut dst, n, &other, |_| filled = true),
            );
            match staging.try_upload_with(&mut dst, n, &other, |_| {
                filled = true;
                Ok::<(), &str>(())
            }) {
                Err(FillError::Cuda(e)) => {
                    expect_stream_mismatch::<()>(&w("try_upload_with"), Err(e))
                }
                other => panic!(
                    "{}: expected FillError::Cuda, got {other:?}",
                    w("try_upload_with")
                ),
            }
            expect_stream_mismatch(&w("ring upload"), ring.upload(&mut dst, &host, &other));
            expect_stream_mismatch(
                &w("ring upload_with"),
                ring.upload_with(&mut dst, n, &other, |_| filled = true),
            );
            let mut batch = UploadBatch::new();
            batch.add(&mut dst, &host).expect("UploadBatch::add");
            expect_stream_mismatch(&w("upload_batch"), staging.upload_batch(&mut batch, &other));
        }
        {
            let mut dst = CudarcViewMut::new(&mut d, &g.stream).expect("new");
            let mut rows = DeviceView2dMut::new(&mut dst, 64, 8, 256).expect("2-D view");
            expect_stream_mismatch(
                &w("upload_2d"),
                staging.upload_2d(&mut rows, &host[..64 * 8], 256, &other),
            );
            expect_stream_mismatch(&w("Stream::memset_zeros"), other.memset_zeros(&mut dst));
        }
        assert!(!filled, "{name}: a fill ran for a refused upload");
        {
            let src = CudarcView::new(&d, &g.stream).expect("new");
            expect_stream_mismatch(&w("download"), staging.download(&mut back, &src, &other));
            expect_stream_mismatch(
                &w("download_into"),
                staging.download_into(&src, n, &other).map(|_| ()),
            );
            expect_stream_mismatch(&w("ring download"), ring.download(&src, n, &other));
            let mut batch = DownloadBatch::new();
            batch.add(&src, n).expect("DownloadBatch::add");
            expect_stream_mismatch(
                &w("download_batch"),
                staging.download_batch(&batch, &other).map(|_| ()),
            );
            expect_stream_mismatch(
                &w("ring download_batch"),
                ring.download_batch(&batch, &other),
            );
        }
    }
    // Nothing pinned, counted or copied.
    assert_eq!(staging.capacity(), 0, "the buffer pinned memory");
    assert_eq!(staging.stats(), StagingStats::default());
    assert_eq!(ring.capacity(), 0, "the ring pinned memory");
    assert_eq!(ring.stats(), RingStats::default());
    check_all_eq("the host side of refused downloads", &back, 0.0);
    check(
        "the cudarc slice after refused uploads",
        &contents(&g.cu, &d),
        s,
    );
    // The same views work on their own stream.
    staging
        .upload(
            &mut CudarcViewMut::new(&mut d, &g.stream).expect("new"),
            &host,
            &g.stream,
        )
        .expect("upload on the view's own stream");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_stream_not_borrowed_from_cudarc_is_refused() {
    let g = gpu();
    let mut d: CudaSlice<f32> = slice_with(&g.cu, 64, seed());
    let ours = Stream::new(&Context::borrow_cudarc(&g.ctx)).expect("Stream::new");
    assert!(ours.cudarc_stream().is_none());
    for e in [
        CudarcView::new(&d, &ours).map(drop).unwrap_err(),
        CudarcViewMut::new(&mut d, &ours).map(drop).unwrap_err(),
    ] {
        let reason = invalid_reason(e);
        assert!(reason.contains("Stream::borrow_cudarc"), "{reason}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn memory_of_another_context_is_refused_and_works_with_a_stream_of_its_own() {
    let g = gpu();
    // A second context on the same device: the primary one's streams must refuse
    // its memory.
    let ctx2 = CudaContext::new_non_primary(g.ctx.ordinal(), 0)
        .expect("a second (non-primary) context on device 0");
    let cu2 = new_stream(&ctx2).expect("a stream of the second context");
    let n = 4 * KIB;
    let s = seed();
    let mut d2: CudaSlice<f32> = slice_with(&cu2, n, s);
    for e in [
        CudarcView::new(&d2, &g.stream).map(drop).unwrap_err(),
        CudarcViewMut::new(&mut d2, &g.stream)
            .map(drop)
            .unwrap_err(),
    ] {
        assert!(
            matches!(
                e,
                Error::ContextMismatch {
                    what: "the cudarc memory",
                    ..
                }
            ),
            "{e:?}"
        );
    }
    // Through a stream of its own context it works, and a view made for that stream
    // is refused by the primary context's stream (context first).
    let stream2 = Stream::borrow_cudarc(&cu2).expect("borrow_cudarc");
    assert!(!stream2.context().same_as(g.stream.context()));
    let mut staging = staged_buffer();
    let s_up = seed();
    let src = pattern::<f32>(n, s_up);
    let mut view = CudarcViewMut::new(&mut d2, &stream2).expect("new");
    match staging.upload(&mut view, &src, &g.stream) {
        Err(Error::ContextMismatch { .. }) => {}
        other => panic!("a view of the second context with the first's stream: {other:?}"),
    }
    staging
        .upload(&mut view, &src, &stream2)
        .expect("upload in the second context");
    drop(view);
    check("upload in the second context", &contents(&cu2, &d2), s_up);
    let got = staging
        .download_into(&CudarcView::new(&d2, &stream2).expect("new"), n, &stream2)
        .expect("download_into in the second context");
    check("download in the second context", got, s_up);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn an_error_cudarc_had_stored_is_returned_by_new_once() {
    let g = gpu();
    let mut d: CudaSlice<f32> = slice_with(&g.cu, 64, seed());
    // What a failed cudarc Drop leaves for the context's next call.
    g.ctx
        .record_err::<()>(Err(DriverError(sys::CUresult::CUDA_ERROR_INVALID_VALUE)));
    let e = CudarcViewMut::new(&mut d, &g.stream).map(drop).unwrap_err();
    assert_eq!(
        e.driver_code(),
        Some(sys::CUresult::CUDA_ERROR_INVALID_VALUE as u32),
        "{e:?}"
    );
    // Reported once, as cudarc's own calls do: the next view works.
    assert!(g.ctx.check_err().is_ok());
    CudarcViewMut::new(&mut d, &g.stream).expect("new after the error was reported");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn zero_elements_of_cudarc_memory_move_nothing() {
    let g = gpu();
    let s = seed();
    let mut d: CudaSlice<u32> = slice_with(&g.cu, 16, s);
    let mut staging = StagingBuffer::new();
    let mut dst = CudarcViewMut::new(d.slice_mut(5..5), &g.stream).expect("new");
    assert!(dst.is_empty());
    staging
        .upload(&mut dst, &[], &g.stream)
        .expect("upload of nothing");
    let mut called = false;
    staging
        .upload_with(&mut dst, 0, &g.stream, |px| called = px.is_empty())
        .expect("upload_with of nothing");
    assert!(called, "upload_with calls fill with an empty slice");
    drop(dst);
    let src = CudarcView::new(d.slice(16..), &g.stream).expect("new");
    assert!(staging
        .download_into(&src, 0, &g.stream)
        .expect("download_into of nothing")
        .is_empty());
    assert_eq!(staging.capacity(), 0);
    assert_eq!(staging.stats(), StagingStats::default());
    check("the slice around the empty views", &contents(&g.cu, &d), s);
}
