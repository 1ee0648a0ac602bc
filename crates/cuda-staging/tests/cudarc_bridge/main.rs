//! GPU tests of the cudarc bridge (feature `cudarc`; `cuda_core::cudarc_bridge`):
//! cudarc's `CudaSlice` / `CudaView` / `CudaViewMut` and streams through every
//! staging entry point, with cudarc's own copies, memsets and streams checking the
//! results.
//!
//! Built only with the feature (`required-features`); `cargo xtask test-gpu` builds
//! the workspace with it. Every test is `#[ignore]`d so that `cargo test` passes
//! without a GPU; without a device each one fails loudly (cudarc's `CudaContext::new`
//! fails, or panics when it finds no driver library).
//!
//! One binary, a file per concern:
//! - `integrity.rs`: data intact both ways through `StagingBuffer`'s calls, the
//!   ring's, both batch builders, `Stream`'s copies and a 2-D region, with slices,
//!   views, sub-views and four element types (one of them a user struct with
//!   `unsafe impl DeviceRepr`);
//! - `ordering.rs`: a cudarc copy and memset queued before our download are seen;
//!   cudarc work queued after our upload on the same stream sees it;
//! - `cross_stream.rs`: an upload through the bridge on one cudarc stream is seen by
//!   cudarc on another (cudarc's events order it), a cudarc write on another stream is
//!   seen by our download, and a slice dropped (or its view forgotten) while our copy
//!   is still queued is freed only after it: run these under compute-sanitizer too;
//! - `refusals.rs`: a view passed with another stream, memory of another context, a
//!   stream not from cudarc, an error cudarc had stored, zero elements;
//! - `soundness.rs`: cudarc's default stream waited for in its own context while
//!   another is current, all three kinds of cudarc stream borrowed, nothing queued on
//!   a capturing stream, and a copy queued before a capture not counted over during
//!   it;
//! - `per_thread.rs`: cudarc's per-thread stream (candle's default) bound to the
//!   thread that borrowed it: bit-exact there, every operation refused elsewhere with
//!   nothing queued, and a copy queued there waited for on another thread.
//!
//! Conventions as in `tests/gpu`: patterns that differ per element and per call,
//! every element compared, the device read back through cudarc's own synchronous
//! `clone_dtoh` (independent of the code under test).

#[path = "../common/mod.rs"]
mod common;

mod cross_stream;
mod integrity;
mod ordering;
mod per_thread;
mod refusals;
mod soundness;

use std::sync::{Arc, Mutex, MutexGuard};

use common::*;
use cuda_staging::cudarc::driver::{CudaContext, CudaSlice, CudaStream, DeviceRepr, DriverError};
use cuda_staging::{CudarcView, CudarcViewMut, Error, StagingBuffer, StagingRing, Stream};

const KIB: usize = 1 << 10;

// SAFETY: `Detection` is `#[repr(C)]` and `Pod` (tests/common): its bytes mean the
// same on the device as on the host. This is what a user writes for a struct of
// their own (see `cudarc_bridge`'s docs, "Element types").
unsafe impl DeviceRepr for Detection {}

/// cudarc on device 0, its way: a context and a new (non-blocking) stream, with our
/// [`Stream`] borrowed from it.
struct Gpu {
    ctx: Arc<CudaContext>,
    cu: Arc<CudaStream>,
    stream: Stream,
}

/// Held by a test while it captures a stream, and around every cudarc `new_stream`
/// here ([`new_stream`]): a `CudaContext`'s first `new_stream` synchronizes the whole
/// context (`cuCtxSynchronize`), which the driver refuses while any stream of it is
/// being captured (`CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`: seen once on the H200,
/// a test's first stream made while `soundness.rs` captured on another thread).
static CAPTURING: Mutex<()> = Mutex::new(());

/// [`CAPTURING`], taken.
fn capture_lock() -> MutexGuard<'static, ()> {
    CAPTURING.lock().unwrap_or_else(|e| e.into_inner())
}

/// `ctx.new_stream()`, never while a test of this binary captures a stream.
fn new_stream(ctx: &Arc<CudaContext>) -> Result<Arc<CudaStream>, DriverError> {
    let _no_capture = capture_lock();
    ctx.new_stream()
}

/// Panics when there is no usable GPU: a GPU test never passes quietly without one.
fn gpu() -> Gpu {
    let ctx = CudaContext::new(0)
        .expect("this test needs CUDA device 0 (run GPU tests with cargo xtask test-gpu)");
    let cu = new_stream(&ctx).expect("CudaContext::new_stream");
    let stream = Stream::borrow_cudarc(&cu).expect("Stream::borrow_cudarc");
    Gpu { ctx, cu, stream }
}

/// A cudarc slice on `cu` holding the pattern of `seed` (cudarc's `clone_htod`,
/// which has landed when it returns).
fn slice_with<T: Pattern + DeviceRepr>(cu: &Arc<CudaStream>, n: usize, seed: u64) -> CudaSlice<T> {
    cu.clone_htod(&pattern::<T>(n, seed))
        .expect("cudarc clone_htod")
}

/// All of `memory`, read on `cu` with cudarc's own synchronous `clone_dtoh`.
fn contents<T: Pattern + DeviceRepr>(
    cu: &Arc<CudaStream>,
    memory: &impl cuda_staging::cudarc::driver::DevicePtr<T>,
) -> Vec<T> {
    cu.clone_dtoh(memory).expect("cudarc clone_dtoh")
}

/// Two cudarc slices to copy between, to keep a cudarc stream busy for about a
/// millisecond (as `tests/common`'s `Busy` does with our buffers), so that whatever
/// is queued after it is certainly still pending when the host goes on.
struct CudarcBusy {
    a: CudaSlice<u8>,
    b: CudaSlice<u8>,
}

impl CudarcBusy {
    fn new(cu: &Arc<CudaStream>) -> CudarcBusy {
        CudarcBusy {
            a: cu.alloc_zeros::<u8>(BUSY_BYTES).expect("alloc busy a"),
            b: cu.alloc_zeros::<u8>(BUSY_BYTES).expect("alloc busy b"),
        }
    }

    /// Queues [`BUSY_REPS`] round trips of [`BUSY_BYTES`] on `cu` and returns at once.
    fn queue(&mut self, cu: &Arc<CudaStream>) {
        for _ in 0..BUSY_REPS {
            cu.memcpy_dtod(&self.a, &mut self.b).expect("busy dtod");
            cu.memcpy_dtod(&self.b, &mut self.a).expect("busy dtod");
        }
    }
}

/// Pins every slot of `ring` for transfers of up to `bytes`, through the bridge, so
/// that later transfers spend no time pinning: work queued behind [`CudarcBusy`] is
/// then certainly still pending when the next call comes.
fn warm_ring(ring: &mut StagingRing, g: &Gpu, bytes: usize) {
    let scratch = g.cu.alloc_zeros::<u8>(bytes).expect("alloc scratch");
    for _ in 0..ring.config().slots {
        let view = CudarcView::new(&scratch, &g.stream).expect("CudarcView::new");
        let t = ring
            .download(&view, bytes, &g.stream)
            .expect("warm-up download");
        ring.wait(&t).expect("warm-up wait");
    }
    ring.synchronize().expect("synchronize");
}

/// Pins a staging buffer for transfers of up to `bytes` (both directions), through
/// the bridge.
fn warm_buffer(staging: &mut StagingBuffer, g: &Gpu, bytes: usize) {
    let mut scratch = g.cu.alloc_zeros::<u8>(bytes).expect("alloc scratch");
    let mut host = vec![0u8; bytes];
    let mut view = CudarcViewMut::new(&mut scratch, &g.stream).expect("CudarcViewMut::new");
    staging
        .upload(&mut view, &host, &g.stream)
        .expect("warm-up upload");
    staging
        .download(&mut host, &view, &g.stream)
        .expect("warm-up download");
    staging
        .download_into(&view, bytes, &g.stream)
        .expect("warm-up download_into");
}

/// Panics unless `r` is [`Error::StreamMismatch`].
#[track_caller]
fn expect_stream_mismatch<T: std::fmt::Debug>(what: &str, r: Result<T, Error>) {
    match r {
        Err(e @ Error::StreamMismatch { .. }) => {
            assert!(e.to_string().contains("another stream"), "{what}: {e}");
        }
        other => panic!("{what}: expected Error::StreamMismatch, got {other:?}"),
    }
}
