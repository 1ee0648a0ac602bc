//! Across cudarc streams, through cudarc's events: our upload on one stream seen by
//! cudarc on another, cudarc's write on another seen by our download, and a slice
//! freed by cudarc (on its own stream) only once our queued copy is done with it,
//! whether its view was dropped or forgotten.
//!
//! Each test queues about a millisecond of work ahead of our transfer on stream A, so
//! that it is still pending when cudarc acts on stream B: without cudarc's event
//! recorded after our copy, B would not wait for it. Run these under
//! compute-sanitizer as well (`cargo xtask test-gpu --sanitize`).

use super::*;
use cuda_staging::cudarc::driver::CudaSlice;

const N: usize = 4_915_200 / 4;

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn our_upload_on_one_cudarc_stream_is_seen_by_cudarc_on_another() {
    let g = gpu();
    let b = new_stream(&g.ctx).expect("a second cudarc stream");
    let mut busy = CudarcBusy::new(&g.cu);
    let mut ring = StagingRing::new();
    let mut staging = staged_buffer();
    warm_ring(&mut ring, &g, N * 4);
    warm_buffer(&mut staging, &g, N * 4);
    for (round, through_ring) in [(0, true), (1, true), (2, false)] {
        let what = format!(
            "round {round}, through the {}",
            if through_ring { "ring" } else { "buffer" }
        );
        let s = seed();
        let data = pattern::<u32>(N, s);
        // Both slices live on B (allocated, and freed, there).
        let mut x: CudaSlice<u32> = b.alloc_zeros(N).expect("alloc_zeros on B");
        let mut y: CudaSlice<u32> = b.alloc_zeros(N).expect("alloc_zeros on B");
        busy.queue(&g.cu);
        {
            // Our upload on A, behind the busy work: the ring returns with it queued.
            let mut dst = CudarcViewMut::new(&mut x, &g.stream).expect("new");
            if through_ring {
                ring.upload_with(&mut dst, N, &g.stream, |px| px.copy_from_slice(&data))
            } else {
                staging.upload(&mut dst, &data, &g.stream)
            }
            .expect(&what);
        }
        // cudarc reads x on B: its copy waits for x's write event, which the bridge
        // recorded on A after our upload.
        b.memcpy_dtod(&x, &mut y).expect("cudarc memcpy_dtod on B");
        check(
            &format_args!("{what}: cudarc's copy on B"),
            &contents(&b, &y),
            s,
        );
    }
    ring.synchronize().expect("synchronize");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_cudarc_write_on_another_stream_is_seen_by_our_download() {
    let g = gpu();
    let b = new_stream(&g.ctx).expect("a second cudarc stream");
    let mut busy_b = CudarcBusy::new(&b);
    let mut ring = StagingRing::new();
    let mut staging = staged_buffer();
    warm_ring(&mut ring, &g, N * 4);
    warm_buffer(&mut staging, &g, N * 4);
    for through_ring in [true, false] {
        let what = if through_ring { "ring" } else { "buffer" };
        let (s_old, s_new) = (seed(), seed());
        let mut x: CudaSlice<u32> = slice_with(&g.cu, N, s_old);
        let fresh: CudaSlice<u32> = slice_with(&b, N, s_new);
        // cudarc writes x on B, behind about a millisecond of work there...
        busy_b.queue(&b);
        b.memcpy_dtod(&fresh, &mut x)
            .expect("cudarc memcpy_dtod on B");
        // ...and our download on A waits for it: `CudarcView::new` takes the pointer
        // with cudarc's `device_ptr`, which makes A wait for x's write event.
        let src = CudarcView::new(&x, &g.stream).expect("new");
        let got: Vec<u32> = if through_ring {
            let t = ring.download(&src, N, &g.stream).expect(what);
            ring.wait(&t).expect(what).to_vec()
        } else {
            staging
                .download_into(&src, N, &g.stream)
                .expect(what)
                .to_vec()
        };
        check(
            &format_args!("{what}: our download of B's write"),
            &got,
            s_new,
        );
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Leave {
    /// The view is dropped before the slice.
    Drop,
    /// The view is `mem::forget`-ten: cudarc's record must not depend on its `Drop`.
    Forget,
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_slice_dropped_while_our_download_from_it_is_queued_is_freed_after_it() {
    let g = gpu();
    let b = new_stream(&g.ctx).expect("a second cudarc stream");
    let mut busy = CudarcBusy::new(&g.cu);
    let mut ring = StagingRing::new();
    warm_ring(&mut ring, &g, N * 4);
    for leave in [Leave::Drop, Leave::Forget, Leave::Drop, Leave::Forget] {
        let what = format!("{leave:?}");
        let (s, s_next) = (seed(), seed());
        // x lives on B: cudarc frees it there, not on the stream of our download.
        let x: CudaSlice<u32> = slice_with(&b, N, s);
        busy.queue(&g.cu);
        let view = CudarcView::new(&x, &g.stream).expect("new");
        let t = ring.download(&view, N, &g.stream).expect(&what);
        match leave {
            Leave::Drop => drop(view),
            Leave::Forget => std::mem::forget(view),
        }
        // Freed on B once B has waited for x's read event, recorded on A after our
        // download; then the same amount is allocated and written on B at once, most
        // likely in the memory just freed. Had the free not waited, our download
        // (still behind the busy work on A) would read these bytes instead.
        drop(x);
        let next: CudaSlice<u32> = slice_with(&b, N, s_next);
        check(
            &format_args!("{what}: our download of the dropped slice"),
            ring.wait(&t).expect(&what),
            s,
        );
        check(
            &format_args!("{what}: the slice allocated after it"),
            &contents(&b, &next),
            s_next,
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_slice_dropped_while_our_upload_into_it_is_queued_is_freed_after_it() {
    let g = gpu();
    let b = new_stream(&g.ctx).expect("a second cudarc stream");
    let mut busy = CudarcBusy::new(&g.cu);
    let mut ring = StagingRing::new();
    warm_ring(&mut ring, &g, N * 4);
    for leave in [Leave::Drop, Leave::Forget, Leave::Drop, Leave::Forget] {
        let what = format!("{leave:?}");
        let s = seed();
        let data = pattern::<u32>(N, s);
        let mut x: CudaSlice<u32> = b.alloc_zeros(N).expect("alloc_zeros on B");
        busy.queue(&g.cu);
        let mut view = CudarcViewMut::new(&mut x, &g.stream).expect("new");
        ring.upload_with(&mut view, N, &g.stream, |px| px.copy_from_slice(&data))
            .expect(&what);
        match leave {
            Leave::Drop => drop(view),
            Leave::Forget => std::mem::forget(view),
        }
        // Freed on B after x's write event (recorded on A after our upload); the
        // zeroed slice allocated next on B, most likely in the same memory, must stay
        // zero: our upload landed before the free, not into the next allocation.
        drop(x);
        let next: CudaSlice<u32> = b.alloc_zeros(N).expect("alloc_zeros on B");
        ring.synchronize().expect(&what);
        check_all_eq(
            &format_args!("{what}: the slice allocated after the dropped one"),
            &contents(&b, &next),
            0,
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn the_borrowed_stream_keeps_cudarc_s_stream_and_context_alive() {
    let Gpu { ctx, cu, stream } = gpu();
    let s = seed();
    let x: CudaSlice<f32> = slice_with(&cu, 4 * KIB, s);
    // Only the slice (which holds its stream) and our Stream hold cudarc's objects now.
    drop(cu);
    drop(ctx);
    let mut staging = staged_buffer();
    let got = staging
        .download_into(
            &CudarcView::new(&x, &stream).expect("new"),
            4 * KIB,
            &stream,
        )
        .expect("download_into");
    check("download after the caller's Arcs were dropped", got, s);
    let cudarc_stream = stream.cudarc_stream().expect("a borrowed cudarc stream");
    assert_eq!(
        cudarc_stream.cu_stream().cast::<std::ffi::c_void>(),
        stream.as_raw().cast::<std::ffi::c_void>()
    );
    assert!(stream.context().cudarc_context().is_some());
}
