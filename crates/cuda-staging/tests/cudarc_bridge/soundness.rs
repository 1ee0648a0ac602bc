//! The three ways cudarc's streams could move a stream's completion mark past running
//! work (`cuda_core::cudarc_bridge`, "Soundness"), each reproduced on one GPU: a copy
//! queued behind several milliseconds of GPU work, then the host looking at once, so
//! that a wait that returns early shows as the wrong bytes.
//!
//! - cudarc's default stream (the legacy `NULL` handle) waited for while another
//!   context is current on the thread;
//! - cudarc's per-thread stream, which a `Stream` follows on the thread that
//!   borrowed it only (`per_thread.rs` tests it);
//! - stream capture: nothing queued on a capturing stream, and a copy queued before a
//!   capture began is not counted as over while the capture runs.

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::*;
use cuda_staging::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cuda_staging::{DeviceBuffer, Event, PinnedBuffer};

/// Elements of the copies: 4 MiB of `u32`.
const N: usize = 1 << 20;
/// A value the pattern never holds in every element: what pinned memory holds until
/// the copy into it lands.
const SENTINEL: u32 = 0xDEAD_BEEF;
/// How many times [`Busy::queue`] (about a millisecond each) goes ahead of the copy.
const BUSY_ROUNDS: usize = 4;

/// Pinned memory of `N` sentinels in `ctx`.
fn sentinels(ctx: &cuda_staging::Context) -> PinnedBuffer<u32> {
    let mut p = PinnedBuffer::<u32>::alloc_in(ctx, N).expect("PinnedBuffer::alloc_in");
    p.as_mut_slice().expect("idle").fill(SENTINEL);
    p
}

/// Several milliseconds of device-to-device copies on `stream`.
fn keep_busy(busy: &mut Busy, stream: &Stream) {
    for _ in 0..BUSY_ROUNDS {
        busy.queue(stream);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_download_on_cudarc_default_stream_is_waited_for_in_its_context_while_another_is_current() {
    let c0 = CudaContext::new(0).expect("CudaContext::new(0)");
    let stream = Stream::borrow_cudarc(&c0.default_stream()).expect("borrow the default stream");
    let ctx = stream.context().clone();
    let s = seed();
    let src = device_with::<u32>(N, s);
    let mut busy = Busy::new();
    let mut host = sentinels(&ctx);
    // A second context on the same device, current on this thread from here on: the
    // legacy default stream's handle now means *its* default stream to the driver.
    let other = CudaContext::new_non_primary(0, 0).expect("CudaContext::new_non_primary");
    other.bind_to_thread().expect("bind the other context");
    keep_busy(&mut busy, &stream);
    stream.memcpy_dtoh(&src, &mut host).expect("memcpy_dtoh");
    assert!(
        !stream.query().expect("Stream::query"),
        "Stream::query answered done with milliseconds of work queued (it asked the other \
         context's default stream)"
    );
    // Reading waits for the copy: it must wait on c0's default stream.
    check(
        "a download on cudarc's default stream, read while another context is current",
        &host,
        s,
    );
    other
        .bind_to_thread()
        .expect("the other context is still current");
    stream.synchronize().expect("synchronize");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn cudarc_per_thread_default_and_new_streams_are_all_borrowed() {
    let c0 = CudaContext::new(0).expect("CudaContext::new(0)");
    let per_thread = Stream::borrow_cudarc(&c0.per_thread_stream())
        .expect("the per-thread stream is taken (bound to this thread)");
    per_thread.synchronize().expect("and usable on this thread");
    Stream::borrow_cudarc(&c0.default_stream()).expect("the default stream is taken");
    let cu = new_stream(&c0).expect("new_stream");
    Stream::borrow_cudarc(&cu).expect("a new stream is taken");
}

/// Begins a relaxed capture on `cu` (cudarc's safe call).
fn begin_capture(cu: &Arc<CudaStream>) {
    cu.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
        .expect("begin_capture");
}

/// Ends the capture on `cu` and launches what it captured, if it made a graph (an
/// invalidated capture makes none), then waits for the stream.
fn end_capture_and_launch(cu: &Arc<CudaStream>) {
    if let Ok(Some(graph)) = cu.end_capture(CUgraphInstantiate_flags(0)) {
        graph.launch().expect("launch the captured graph");
    }
    cu.synchronize().expect("cudarc synchronize");
}

#[track_caller]
fn expect_capturing<T: std::fmt::Debug>(what: &str, r: Result<T, Error>) {
    match r {
        Err(e @ Error::StreamCapturing { .. }) => {
            assert!(
                e.to_string().contains("captured into a CUDA graph"),
                "{what}: {e}"
            );
        }
        other => panic!("{what}: expected Error::StreamCapturing, got {other:?}"),
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn nothing_is_queued_on_a_capturing_cudarc_stream() {
    let g = gpu();
    let ctx = g.stream.context().clone();
    let s = seed();
    let src = device_with::<u32>(N, s);
    let mut dst = DeviceBuffer::<u32>::alloc_in(&ctx, N).expect("alloc");
    // Fresh device memory holds whatever it held (the simulator fills it with a
    // marker): zero it, so that an upload captured by mistake would show.
    g.stream.memset_zeros(&mut dst).expect("memset_zeros");
    g.stream.synchronize().expect("synchronize");
    let mut host = sentinels(&ctx);
    let mut staging = staged_buffer();
    let mut ring = StagingRing::new();
    let mut event = Event::new(&ctx).expect("Event::new");
    let up = pattern::<u32>(N, seed());
    let capturing = capture_lock();
    begin_capture(&g.cu);
    expect_capturing("Stream::memcpy_dtoh", g.stream.memcpy_dtoh(&src, &mut host));
    expect_capturing(
        "Stream::memcpy_dtoh_sync",
        g.stream.memcpy_dtoh_sync(&src, &mut vec![0u32; N]),
    );
    expect_capturing("Event::record", event.record(&g.stream));
    expect_capturing(
        "StagingBuffer::upload",
        staging.upload(&mut dst, &up, &g.stream),
    );
    expect_capturing(
        "StagingBuffer::download_into",
        staging.download_into(&src, N, &g.stream),
    );
    expect_capturing("StagingRing::download", ring.download(&src, N, &g.stream));
    end_capture_and_launch(&g.cu);
    drop(capturing);
    // Nothing was captured into the graph: the pinned memory still holds the
    // sentinels after the launch, and is free to read, write and drop.
    check_all_eq("pinned memory after the launch", &host, SENTINEL);
    check_all_eq("the upload's destination", &device_contents(&dst), 0u32);
    // After the capture, the same calls work.
    g.stream
        .memcpy_dtoh(&src, &mut host)
        .expect("memcpy_dtoh after the capture");
    check("a download after the capture", &host, s);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_copy_queued_before_a_capture_is_not_counted_over_while_the_capture_runs() {
    let g = gpu();
    let ctx = g.stream.context().clone();
    let s = seed();
    let src = device_with::<u32>(N, s);
    let mut busy = Busy::new();
    let mut host = sentinels(&ctx);
    keep_busy(&mut busy, &g.stream);
    g.stream.memcpy_dtoh(&src, &mut host).expect("memcpy_dtoh");
    let capturing = capture_lock();
    begin_capture(&g.cu);
    // The stream cannot be waited for while it is captured. Each look either fails
    // (the copy's end cannot be seen), or, if the driver let the context be waited
    // for, shows the landed bytes: never the sentinels the DMA is still overwriting.
    for look in 0..3 {
        match host.as_slice() {
            Err(_) => assert!(
                !host.is_idle(),
                "look {look}: a failed wait counted the copy as over"
            ),
            Ok(got) => check(&format_args!("look {look} during the capture"), got, s),
        }
        match catch_unwind(AssertUnwindSafe(|| host[N - 1])) {
            Err(_) => {} // `Deref` refused to hand out bytes a DMA may still write.
            Ok(last) => assert_eq!(
                last,
                pattern::<u32>(N, s)[N - 1],
                "look {look}: Deref during the capture"
            ),
        }
    }
    end_capture_and_launch(&g.cu);
    drop(capturing);
    check("the copy queued before the capture, after it", &host, s);
    assert!(host.is_idle());
}
