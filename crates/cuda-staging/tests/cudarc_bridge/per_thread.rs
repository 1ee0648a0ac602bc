//! cudarc's per-thread stream (`CudaContext::per_thread_stream`, `CU_STREAM_PER_THREAD`,
//! the stream candle's `Device::new_cuda` runs on), borrowed as a [`Stream`] bound to
//! the thread that borrowed it (`cuda_core::cudarc_bridge`, "Soundness"):
//!
//! - on that thread, uploads and downloads through the bridge are bit-exact and in
//!   the stream order of cudarc's own work there;
//! - on another thread, every operation that names the stream is refused with
//!   [`Error::WrongThread`], before any driver call: nothing queued, nothing pinned,
//!   the device memory unchanged (an operation on no elements too);
//! - memory with a copy queued on the stream on one thread, read, written or dropped
//!   on another, waits for that copy there: the other thread's own per-thread stream
//!   is idle, so a wait that named the handle there would return at once.

use std::thread::{self, ThreadId};

use super::*;
use cuda_staging::{Event, PinnedBuffer};

/// Elements of the large copies: 4 MiB of `u32`, past the auto-stage threshold.
const N: usize = 1 << 20;
/// Elements of the small ones: 64 KiB of `u32`, staged.
const SMALL: usize = 16 * KIB;
/// A value the pattern never holds in every element.
const SENTINEL: u32 = 0xDEAD_BEEF;
/// How many times [`Busy::queue`] (about a millisecond each) goes ahead of the copy.
const BUSY_ROUNDS: usize = 4;

/// cudarc's context on device 0 and its per-thread stream, borrowed on this thread.
fn per_thread() -> (Arc<CudaContext>, Arc<CudaStream>, Stream) {
    let ctx = CudaContext::new(0)
        .expect("this test needs CUDA device 0 (run GPU tests with cargo xtask test-gpu)");
    let cu = ctx.per_thread_stream();
    let stream = Stream::borrow_cudarc(&cu).expect("Stream::borrow_cudarc(per_thread_stream)");
    (ctx, cu, stream)
}

/// Panics unless `r` is [`Error::WrongThread`] for `op`, naming the stream's thread
/// `own` and the calling one.
#[track_caller]
fn expect_wrong_thread<T: std::fmt::Debug>(op: &str, own: ThreadId, r: Result<T, Error>) {
    match r {
        Err(Error::WrongThread {
            op: got,
            stream_thread,
            caller,
        }) => {
            assert_eq!(got, op, "the error names the operation");
            assert_eq!(stream_thread, own, "{op}: the stream's thread");
            assert_eq!(caller, thread::current().id(), "{op}: the calling thread");
        }
        other => panic!("{op}: expected Error::WrongThread, got {other:?}"),
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn the_per_thread_stream_moves_data_bit_exact_on_the_thread_that_borrowed_it() {
    let (_ctx, cu, stream) = per_thread();
    let mut staging = StagingBuffer::new();
    for (k, n) in [SMALL, N].into_iter().enumerate() {
        let s = seed() + 10 * k as u64;
        // Upload through the bridge; read back by cudarc on the same stream.
        let src = pattern::<u32>(n, s);
        let mut dst = cu.alloc_zeros::<u32>(n).expect("alloc_zeros");
        let mut view = CudarcViewMut::new(&mut dst, &stream).expect("CudarcViewMut::new");
        staging.upload(&mut view, &src, &stream).expect("upload");
        check(
            &format!("upload of {n} on the per-thread stream"),
            &contents(&cu, &dst),
            s,
        );
        // Download through the bridge of what cudarc wrote just before, unwaited.
        let s2 = s + 1;
        let written = slice_with::<u32>(&cu, n, s2);
        let mut back = vec![0u32; n];
        let view = CudarcView::new(&written, &stream).expect("CudarcView::new");
        staging
            .download(&mut back, &view, &stream)
            .expect("download");
        check(
            &format!("download of {n} on the per-thread stream"),
            &back,
            s2,
        );
    }
    // Stream's own queued copies, waited for with its synchronize.
    let s = seed() + 100;
    let host = {
        let mut p = PinnedBuffer::<u32>::alloc_in(stream.context(), SMALL).expect("pinned");
        fill_pattern(p.as_mut_slice().expect("idle"), s);
        p
    };
    let mut dst = cu.alloc_zeros::<u32>(SMALL).expect("alloc_zeros");
    stream
        .memcpy_htod(
            &host,
            &mut CudarcViewMut::new(&mut dst, &stream).expect("view"),
        )
        .expect("memcpy_htod");
    stream.synchronize().expect("synchronize");
    assert!(stream.query().expect("query"), "idle after synchronize");
    check(
        "memcpy_htod on the per-thread stream",
        &contents(&cu, &dst),
        s,
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn the_per_thread_stream_is_refused_on_another_thread_with_nothing_queued() {
    let (ctx, cu, stream) = per_thread();
    let own = thread::current().id();
    let s = seed();
    let mut dst = slice_with::<u32>(&cu, N, s);
    let other = slice_with::<u32>(&cu, SMALL, s + 1);
    let mut staging = StagingBuffer::new();
    let mut ring = StagingRing::new();
    let mut event = Event::new(stream.context()).expect("Event::new");
    let mut pinned = PinnedBuffer::<u32>::alloc_in(stream.context(), N).expect("pinned");
    pinned.as_mut_slice().expect("idle").fill(SENTINEL);
    let src = pattern::<u32>(N, s + 2);
    let mut spare = slice_with::<u32>(&cu, SMALL, s + 3);
    // Made here, on the stream's own thread, then used on another.
    let mut view = CudarcViewMut::new(&mut dst, &stream).expect("CudarcViewMut::new");
    let mut empty = CudarcViewMut::new(spare.slice_mut(0..0), &stream).expect("CudarcViewMut::new");
    thread::scope(|scope| {
        scope
            .spawn(|| {
                for n in [SMALL, N] {
                    expect_wrong_thread(
                        "upload",
                        own,
                        staging.upload(&mut view, &src[..n], &stream),
                    );
                    let mut host = vec![0u32; n];
                    expect_wrong_thread(
                        "download",
                        own,
                        staging.download(&mut host, &view, &stream),
                    );
                    expect_wrong_thread(
                        "StagingRing::upload",
                        own,
                        ring.upload(&mut view, &src[..n], &stream),
                    );
                }
                expect_wrong_thread(
                    "upload_with",
                    own,
                    staging.upload_with(&mut view, SMALL, &stream, |d: &mut [u32]| d.fill(7)),
                );
                expect_wrong_thread(
                    "download_into",
                    own,
                    staging.download_into(&view, SMALL, &stream).map(|_| ()),
                );
                expect_wrong_thread("memcpy_htod", own, stream.memcpy_htod(&pinned, &mut view));
                expect_wrong_thread("memcpy_dtoh", own, stream.memcpy_dtoh(&view, &mut pinned));
                expect_wrong_thread(
                    "memcpy_htod_sync",
                    own,
                    stream.memcpy_htod_sync(&src, &mut view),
                );
                expect_wrong_thread("memset_bytes", own, stream.memset_zeros(&mut view));
                expect_wrong_thread("memset_u32", own, stream.memset_u32(&mut view, 9));
                // Refused before it could find it has nothing to do.
                expect_wrong_thread("memset_u32", own, stream.memset_u32(&mut empty, 9));
                expect_wrong_thread("Event::record", own, event.record(&stream));
                expect_wrong_thread("Stream::synchronize", own, stream.synchronize());
                expect_wrong_thread("Stream::query", own, stream.query());
                expect_wrong_thread("Stream::wait", own, stream.wait(&event));
                expect_wrong_thread(
                    "CudarcView::new",
                    own,
                    CudarcView::new(&other, &stream).map(|_| ()),
                );
                // This thread's own per-thread stream is another stream: the view
                // made for the first thread's is not for it.
                let mine = Stream::borrow_cudarc(&ctx.per_thread_stream()).expect("borrow");
                expect_stream_mismatch("upload", staging.upload(&mut view, &src, &mine));
            })
            .join()
            .unwrap();
    });
    // Nothing was pinned, counted or queued: the memory holds what it held.
    assert_eq!(staging.stats().allocations, 0, "nothing pinned");
    assert_eq!(staging.stats().bytes_uploaded, 0);
    drop(view);
    drop(empty);
    stream.synchronize().expect("synchronize");
    check(
        "the device memory after the refusals",
        &contents(&cu, &dst),
        s,
    );
    assert!(
        pinned
            .as_slice()
            .expect("idle")
            .iter()
            .all(|&v| v == SENTINEL),
        "the pinned memory after the refusals"
    );
    // And the thread that borrowed it still can.
    staging
        .upload(
            &mut CudarcViewMut::new(&mut dst, &stream).expect("view"),
            &src,
            &stream,
        )
        .expect("upload on the stream's own thread");
    check("an upload after the refusals", &contents(&cu, &dst), s + 2);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_copy_queued_on_the_per_thread_stream_is_waited_for_on_another_thread() {
    let (_ctx, cu, stream) = per_thread();
    let ctx = stream.context().clone();
    let mut busy = Busy::new();
    for round in 0..3u64 {
        let s = seed() + 10 * round;
        // A download queued behind milliseconds of work, read on another thread.
        let src = slice_with::<u32>(&cu, N, s);
        let mut host = PinnedBuffer::<u32>::alloc_in(&ctx, N).expect("pinned");
        host.as_mut_slice().expect("idle").fill(SENTINEL);
        for _ in 0..BUSY_ROUNDS {
            busy.queue(&stream);
        }
        stream
            .memcpy_dtoh(&CudarcView::new(&src, &stream).expect("view"), &mut host)
            .expect("memcpy_dtoh");
        thread::spawn(move || {
            // Deref waits: for the copy on the first thread's stream, not this one's.
            check("a download read on another thread", &host, s);
        })
        .join()
        .unwrap();

        // An upload queued behind milliseconds of work; its host memory written on
        // another thread, which must wait until the copy has read it.
        let s2 = s + 1;
        let mut up = PinnedBuffer::<u32>::alloc_in(&ctx, N).expect("pinned");
        fill_pattern(up.as_mut_slice().expect("idle"), s2);
        let mut dst = cu.alloc_zeros::<u32>(N).expect("alloc_zeros");
        for _ in 0..BUSY_ROUNDS {
            busy.queue(&stream);
        }
        stream
            .memcpy_htod(
                &up,
                &mut CudarcViewMut::new(&mut dst, &stream).expect("view"),
            )
            .expect("memcpy_htod");
        thread::spawn(move || {
            up.as_mut_slice()
                .expect("as_mut_slice waits")
                .fill(SENTINEL);
        })
        .join()
        .unwrap();
        check(
            "an upload whose source was overwritten on another thread",
            &contents(&cu, &dst),
            s2,
        );

        // A download's pinned memory dropped on another thread while still queued:
        // freed only once the copy has landed (the simulator and compute-sanitizer
        // flag a copy into freed memory).
        let mut dropped = PinnedBuffer::<u32>::alloc_in(&ctx, N).expect("pinned");
        for _ in 0..BUSY_ROUNDS {
            busy.queue(&stream);
        }
        stream
            .memcpy_dtoh(&CudarcView::new(&src, &stream).expect("view"), &mut dropped)
            .expect("memcpy_dtoh");
        thread::spawn(move || drop(dropped)).join().unwrap();
        stream.synchronize().expect("synchronize");
    }
}
