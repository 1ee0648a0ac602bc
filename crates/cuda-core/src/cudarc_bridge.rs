//! A bridge to [cudarc](https://docs.rs/cudarc) 0.19 (feature `cudarc`): its device
//! memory (`CudaSlice<T>`, `CudaView<T>`, `CudaViewMut<T>`) and streams in every
//! operation of this workspace, without leaving cudarc's types.
//!
//! - [`Stream::borrow_cudarc`] wraps cudarc's `Arc<CudaStream>` as a [`Stream`] (and
//!   [`Context::borrow_cudarc`] its `Arc<CudaContext>` as a [`Context`]), keeping it
//!   alive and destroying nothing. No driver call.
//! - [`CudarcView::new`] / [`CudarcViewMut::new`] view cudarc's memory for use on
//!   such a stream. They are [`DeviceSlice`] / [`DeviceSliceMut`], the one way this
//!   workspace says "device memory": every [`Stream`] operation and every
//!   `cuda-staging` entry point (`StagingBuffer::upload`, `download`, `upload_with`,
//!   `download_into`, `try_upload_with`, the ring's, the batch builders') takes them
//!   as it takes a `DeviceBuffer` or a view of one, with the same checks, ordering and
//!   errors.
//!
//! ```no_run
//! use cuda_core::cudarc::driver::CudaContext;
//! use cuda_core::cudarc_bridge::{CudarcView, CudarcViewMut};
//! use cuda_core::{PinnedBuffer, Stream};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // cudarc's way: a context, a stream, device memory.
//! let ctx = CudaContext::new(0)?;
//! let cu_stream = ctx.new_stream()?;
//! let mut input = cu_stream.alloc_zeros::<f32>(1024)?;
//! // Ours, on cudarc's stream (once; it keeps cudarc's stream alive).
//! let stream = Stream::borrow_cudarc(&cu_stream)?;
//! let mut host = PinnedBuffer::<f32>::alloc_in(stream.context(), 1024)?;
//! host.iter_mut().enumerate().for_each(|(i, v)| *v = i as f32);
//! // Upload into cudarc's slice, queued on its stream...
//! stream.memcpy_htod(&host, &mut CudarcViewMut::new(&mut input, &stream)?)?;
//! // ...and read back part of it, through a cudarc sub-view.
//! let mut back = PinnedBuffer::<f32>::alloc_in(stream.context(), 512)?;
//! stream.memcpy_dtoh(&CudarcView::new(input.slice(512..), &stream)?, &mut back)?;
//! assert_eq!(back[0], 512.0); // waits for the queued copy
//! # Ok(()) }
//! ```
//!
//! With `cuda-staging` (whose `cudarc` feature turns this one on), a frame loop keeps
//! its `CudaSlice`s and swaps `memcpy_htod` / `memcpy_dtoh` from `Vec`s for
//! `StagingBuffer` or `StagingRing` calls: see its example `cudarc_frames`.
//!
//! # What is guaranteed, by cudarc's rules
//!
//! cudarc orders uses of one `CudaSlice` across streams with two events per slice (its
//! last read and its last write): a copy takes the device pointer through
//! `DevicePtr::device_ptr` (to read) or `DevicePtrMut::device_ptr_mut` (to write) on
//! the stream it queues on, which makes that stream wait for the recorded writes (and
//! reads, to write), and records the read (write) event there once the copy is queued,
//! when the guard `SyncOnDrop` it got drops. `CudaSlice`'s `Drop` makes the slice's
//! own stream wait for both events before it frees the memory there. The bridge plays
//! by the same rules, with no `unsafe` in the user's code:
//!
//! - **Access through cudarc.** `CudarcView::new` takes the pointer with
//!   `device_ptr`, `CudarcViewMut::new` with `device_ptr_mut`, on the cudarc stream
//!   the given [`Stream`] wraps: the waits are cudarc's own.
//! - **Borrowed as cudarc borrows.** The view holds `&` (or `&mut`) of cudarc's
//!   memory and of the stream for its whole life: cudarc cannot free the memory, nor
//!   write it (nor, for a `CudarcViewMut`, read it) meanwhile.
//! - **cudarc's event recorded after every operation.** Right after each operation
//!   that uses the view is queued (a staging call, a ring transfer that returns with
//!   its DMA in flight, a batch, a [`Stream`] copy), the read (or write) event is
//!   recorded on the stream, exactly what the guard's `Drop` does after cudarc's own
//!   copies. The guard itself is disarmed when the view is made: the record happens
//!   when the operation is queued, not when the view is dropped, so `mem::forget` of a
//!   view skips nothing. So a cudarc kernel or copy on another stream after our upload
//!   waits for it, and a slice dropped with our download still queued is freed only
//!   after it. Should cudarc fail to record (its error is returned, as cudarc would
//!   store it), the operation is waited for before the call returns.
//! - **One stream.** A view is for the stream it was made with: an operation queued
//!   on any other is [`Error::StreamMismatch`], before any driver call and changing
//!   nothing (make one view per stream). Memory of another context than the stream is
//!   [`Error::ContextMismatch`], a [`Stream`] not borrowed from cudarc
//!   [`Error::InvalidArgument`], both from `new`, before any driver call.
//! - **cudarc's errors.** An error cudarc stored in the stream's context (a failed
//!   `Drop`, reported by `CudaContext::check_err`) is returned by `new` as
//!   [`Error::Driver`], as cudarc's own calls return it; so is one its waits stored.
//!
//! What cudarc leaves to its user stays so: with event tracking switched off
//! (`CudaContext::disable_event_tracking`, `unsafe` in cudarc) or in a context that
//! has used a single stream so far (no `new_stream` / `fork` yet), cudarc records
//! and waits for nothing, and neither does the bridge: ordering across streams is
//! then the caller's, as it is for cudarc's own copies. And cudarc keeps one read
//! event per slice: reads of one slice queued on two streams at once leave only the
//! later one recorded, for the bridge's reads as for cudarc's own.
//!
//! The tests (`cuda-staging`'s `tests/cudarc_bridge/`, run by `cargo xtask test-gpu`)
//! check each point on a GPU: data through every entry point with slices, views and
//! sub-views; a cudarc memset queued before our download is seen, cudarc work after
//! our upload sees it; an upload through the bridge on one stream read by cudarc on
//! another; a slice dropped while our download from it is still queued behind about a
//! millisecond of GPU work (run it under `compute-sanitizer`); a view passed with
//! another stream, memory of another context and a stream not from cudarc refused
//! before any driver call; a forgotten view after a ring transfer.
//!
//! # Soundness: what the bridge assumes of cudarc's streams
//!
//! Every guarantee above rests on one record per [`Stream`]: the tickets of the
//! operations queued through it and the mark of those known complete, raised only by
//! a wait that saw the work over. cudarc hands out streams for which that mark could
//! move past running work; each kind is handled so that safe code cannot make it:
//!
//! - **Streams of `new_stream` / `fork`** (and foreign streams wrapped with the
//!   `unsafe` [`Stream::from_raw_borrowed`]): one stream whatever the thread, as
//!   assumed.
//! - **The default stream** (`CudaContext::default_stream`, the legacy `NULL` handle;
//!   likewise `CU_STREAM_LEGACY`): the driver resolves that handle against the calling
//!   thread's *current* context, which cudarc changes whenever another context is made
//!   or bound. So every driver call this workspace makes on a stream, waits and
//!   queries included, is made with the stream's own context current.
//! - **The per-thread stream** (`CudaContext::per_thread_stream`,
//!   `CU_STREAM_PER_THREAD`, candle's `Device::new_cuda`): a different stream on
//!   every thread, which one `Send + Sync` record can follow only on one thread. So
//!   the [`Stream`] [`Stream::borrow_cudarc`] (or `from_raw_borrowed`) makes of it
//!   is bound to the thread that borrowed it, whose stream the handle names there:
//!   every operation that names the stream (a queued copy or memset through any
//!   entry point, [`Event::record`](crate::Event::record) on it, `synchronize`,
//!   `query`, `wait`, [`CudarcView::new`] / [`CudarcViewMut::new`], whose cudarc
//!   waits are made on the calling thread's stream) checks the calling thread first
//!   and elsewhere returns [`Error::WrongThread`], before any driver call and
//!   changing nothing; a view made for it is refused with another per-thread
//!   [`Stream`] ([`Error::StreamMismatch`]). Memory with copies queued on it may
//!   still be read, written and dropped on any thread: an event is recorded after
//!   every operation queued on the stream (one `cuEventRecord` more each), and a
//!   wait on another thread waits on it, never on that thread's own stream. Waits
//!   through an [`Event`](crate::Event) work from any thread, as everywhere.
//! - **Stream capture** (`CudaStream::begin_capture`, safe in cudarc): work queued on
//!   a capturing stream is recorded into a graph and runs at each launch of it, not in
//!   the stream, and the stream cannot be waited for meanwhile. So:
//!   - nothing is queued on a capturing stream: every operation on a stream this
//!     crate did not create (and [`Event::record`](crate::Event::record) on one) asks
//!     the driver first (`cuStreamIsCapturing`, one call) and refuses with
//!     [`Error::StreamCapturing`], before anything is queued. Streams this crate
//!     created skip the check: no capture API of this workspace takes them, and they
//!     can join no capture through an event, since `Event::record` refuses capturing
//!     streams;
//!   - a wait that fails while the stream is captured (work queued before the
//!     capture began) leaves that work pending instead of counting it as over. The
//!     memory it uses then says so: its fallible accessors (`as_slice`, `wait`, a
//!     ring ticket's `wait`) return the error, `Deref` panics rather than hand out
//!     bytes a DMA may still write, `Drop` leaks the memory rather than free it under
//!     the DMA (the error is recorded for [`crate::check_deferred_errors`]), and the
//!     `_sync` copies, whose host memory is borrowed for the call only, wait again
//!     every millisecond until the capture ends. Synchronise the stream before
//!     beginning a capture on it, and none of this arises.
//!
//!   One case remains that no check can exclude, because the check and the queueing
//!   are two driver calls: another thread beginning a capture on the very stream in
//!   the instant between them (or beginning and ending one there). Do not begin a
//!   capture on a stream while another thread queues through this workspace on it.
//!   The same holds for cudarc's own copies into its pinned host memory.
//! - **Event tracking switched off** (`disable_event_tracking`, `unsafe` in cudarc):
//!   ordering across streams is then the caller's, as above; our own record of queued
//!   work is unaffected.
//!
//! The checks cost one `cuCtxGetCurrent` per wait (the context enter) on every
//! stream, and one `cuStreamIsCapturing` per queued operation on borrowed streams
//! (on the per-thread stream, a thread-id comparison and one `cuEventRecord` more);
//! `docs/measurements.md`'s `cudarc+` columns are measured with them. The GPU tests
//! `crates/cuda-staging/tests/cudarc_bridge/soundness.rs` reproduce each case: a
//! download on cudarc's default stream read while another context is current; on the
//! per-thread stream, an upload and download on the borrowing thread, every
//! operation refused on another thread with nothing queued, and a download queued on
//! one thread read on another only once it has landed; a copy refused on a capturing
//! stream, and memory whose copy was queued before a capture not freed or read until
//! it has landed.
//!
//! # Element types
//!
//! `T` is this workspace's element bound ([`bytemuck::Pod`], which `cuda-staging`
//! calls `StagingPod`) and cudarc's `DeviceRepr`. The primitive types and arrays of
//! them are both. For a struct of your own, derive `Pod` and `Zeroable` (with
//! `#[repr(C)]`) and implement cudarc's marker trait, which cudarc makes `unsafe`:
//!
//! ```
//! use cuda_core::cudarc::driver::DeviceRepr;
//!
//! #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
//! #[repr(C)]
//! struct Detection { x: f32, y: f32, score: f32, class: u32 }
//!
//! // SAFETY: `#[repr(C)]` and plain old data (`Pod`): its bytes mean the same on the
//! // device as on the host.
//! unsafe impl DeviceRepr for Detection {}
//!
//! fn takes<T: bytemuck::Pod + DeviceRepr>() {}
//! takes::<Detection>();
//! ```
//!
//! # The CUDA version
//!
//! cudarc compiles its bindings for exactly one CUDA version, picked at build time
//! (its build script), in this order: the `CUDARC_CUDA_VERSION` environment variable
//! (`13000`, `12080`, ...), else a version feature (`cuda-13000`, `cuda-12080`, ...),
//! else, with the feature `cuda-version-from-build-system`, `nvcc --version`; with
//! none of them its build fails. Two version features at once do not build.
//!
//! This feature names no version, so it never overrides the user's: it turns on
//! cudarc's `std`, `driver`, `fallback-dynamic-loading` (so a user's
//! `dynamic-linking` or `static-linking` still wins), `cuda-version-from-build-system`
//! and `fallback-latest`. So:
//!
//! | the user's build | cudarc's bindings |
//! |---|---|
//! | depends on cudarc with a version feature (`cuda-12080`) | that version |
//! | sets `CUDARC_CUDA_VERSION` | that version |
//! | neither, `nvcc` on `PATH` | the toolkit's version (a toolkit newer than the cudarc release knows fails its build: set one of the above) |
//! | neither, no toolkit (CI, a build box) | the newest cudarc knows, with a build warning; cudarc loads the driver at run time and resolves each function at its first call, so older drivers work for what they have |
//!
//! `.ci/run` builds a crate of each of the first and last kinds outside the workspace,
//! on a machine without a toolkit. The feature needs Rust 1.88 (cudarc 0.19's
//! `libloading` 0.9); without it the crates keep their own MSRV, and nothing of cudarc
//! is built.
//!
//! # Cost
//!
//! No allocation and no driver call of the bridge's own: `new` compares two context
//! handles, reads cudarc's stored error twice (an atomic swap each) and calls
//! `device_ptr` / `device_ptr_mut`, whose waits (one `cuStreamWaitEvent` to read, two
//! to write, when cudarc tracks events) are cudarc's; each queued operation adds
//! cudarc's one `cuEventRecord`. A transfer that `cuda-staging` cuts into pipelined
//! chunks records once per chunk, as cudarc's own copies would. The bench columns
//! `cudarc+resident` and `cudarc+copy-in` (`docs/measurements.md`) measure it against
//! `resident` and `copy-in`.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use bytemuck::Pod;
use cuda_sys::{CUcontext, CUdeviceptr};
use cudarc::driver::{CudaContext, CudaStream, DeviceRepr, SyncOnDrop};

use crate::context::Context;
use crate::cudarc_binding::{from_cudarc, Binding};
use crate::error::{Error, Result};
use crate::memory::{sealed as memory_sealed, DeviceAccess, DeviceSlice, DeviceSliceMut};
use crate::stream::Stream;
use crate::tracking::Tracker;

pub use crate::cudarc_memory::{CudarcMemory, CudarcMemoryMut};

impl Context {
    /// cudarc's context `ctx` as a [`Context`] that keeps it alive (an `Arc` clone)
    /// and releases nothing: for allocating this workspace's buffers in it
    /// ([`DeviceBuffer::alloc_in`](crate::DeviceBuffer::alloc_in),
    /// [`PinnedBuffer::alloc_in`](crate::PinnedBuffer::alloc_in)) and comparing
    /// ([`Context::same_as`] compares the driver handles: cudarc's
    /// `CudaContext::new(0)` and [`Context::new`]`(0)` are the same primary context).
    /// No driver call. [`Stream::borrow_cudarc`] makes one itself.
    pub fn borrow_cudarc(ctx: &Arc<CudaContext>) -> Context {
        Context::wrap_cudarc(ctx)
    }

    /// The cudarc context this one wraps, when it was made by
    /// [`Context::borrow_cudarc`] (or for a [`Stream::borrow_cudarc`]).
    pub fn cudarc_context(&self) -> Option<&Arc<CudaContext>> {
        self.cudarc()
    }
}

impl Stream {
    /// cudarc's stream `stream` as a [`Stream`] that keeps it alive (an `Arc` clone,
    /// which keeps its context too) and destroys nothing, in a [`Context`] borrowed
    /// from cudarc's. Everything queued through it is in the stream order of cudarc's
    /// own work on `stream`; views of cudarc's memory are made with it
    /// ([`CudarcView::new`]). No driver call.
    ///
    /// cudarc's per-thread stream (`CudaContext::per_thread_stream`, the handle
    /// `CU_STREAM_PER_THREAD`, which candle's `Device::new_cuda` runs on) names
    /// another stream on every thread: the [`Stream`] is the calling thread's, bound
    /// to it. Every operation that names it on another thread returns
    /// [`Error::WrongThread`] before any driver call, and memory with copies queued
    /// on it can still be used and dropped anywhere (see [`Stream::from_raw_borrowed`]
    /// and "Soundness" in the module docs). The default stream (`default_stream`,
    /// the legacy `NULL` handle) is taken: every wait on it is made in its context.
    ///
    /// Returns a `Result` for errors a later version may raise; today it always
    /// succeeds.
    pub fn borrow_cudarc(stream: &Arc<CudaStream>) -> Result<Stream> {
        Ok(Stream::wrap_cudarc(
            &Context::wrap_cudarc(stream.context()),
            stream,
        ))
    }

    /// The cudarc stream this one wraps, when it was made by
    /// [`Stream::borrow_cudarc`].
    pub fn cudarc_stream(&self) -> Option<&Arc<CudaStream>> {
        self.cudarc()
    }
}

/// The checks of `new`, before any driver call: `stream` may be named on this thread
/// (a per-thread stream: cudarc's waits in `device_ptr` are made on the calling
/// thread's stream), it wraps a cudarc stream, `memory_ctx` is its context, `len`
/// elements of `T` fit a byte count. Returns cudarc's stream.
fn check<'a, T>(
    op: &'static str,
    stream: &'a Stream,
    memory_ctx: CUcontext,
    len: usize,
) -> Result<&'a Arc<CudaStream>> {
    stream.state().check_thread(op)?;
    let cu_stream = stream.cudarc().ok_or_else(|| Error::InvalidArgument {
        op,
        reason: "the stream was not borrowed from a cudarc stream: make it with \
                 Stream::borrow_cudarc, so that cudarc's events are recorded on it"
            .into(),
    })?;
    if memory_ctx != stream.context().as_raw() {
        return Err(Error::ContextMismatch {
            op,
            what: "the cudarc memory",
        });
    }
    crate::byte_len::<T>(op, len)?;
    Ok(cu_stream)
}

/// Takes the device pointer with `take` (cudarc's `device_ptr` / `device_ptr_mut`
/// on `cu_stream`), between two looks at cudarc's stored error: one from before (as
/// cudarc's own calls return it first) and one its waits may have stored. Returns the
/// pointer and the binding that records cudarc's event after each operation.
fn take_pointer<'a>(
    stream: &Stream,
    cu_stream: &'a CudaStream,
    take: impl FnOnce(&'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>),
) -> Result<(CUdeviceptr, Binding)> {
    let cudarc_ctx = cu_stream.context();
    cudarc_ctx.check_err().map_err(from_cudarc)?;
    let (ptr, guard) = take(cu_stream);
    let binding = Binding::new(stream.as_raw(), stream.state().thread(), guard);
    cudarc_ctx.check_err().map_err(from_cudarc)?;
    Ok((ptr, binding))
}

/// cudarc device memory viewed for reading on one stream: the source of this
/// workspace's queued operations and `cuda-staging`'s downloads. A [`DeviceSlice`],
/// like a `DeviceBuffer` or a `DeviceView`.
///
/// Made with [`CudarcView::new`]; see the [module docs](self) for what it
/// guarantees. It borrows cudarc's memory (shared) and the [`Stream`] for its life.
pub struct CudarcView<'a, T> {
    ptr: CUdeviceptr,
    len: usize,
    ctx: &'a Context,
    /// Its own record of queued work, bound to the stream, with cudarc's event to
    /// record after each operation. Nothing waits on the record itself: cudarc's
    /// events do that job.
    tracker: Tracker,
    _marker: PhantomData<&'a [T]>,
}

/// cudarc device memory viewed for writing on one stream: the destination of this
/// workspace's queued operations and `cuda-staging`'s uploads. A [`DeviceSliceMut`],
/// like a `DeviceBuffer` or a `DeviceViewMut`.
///
/// Made with [`CudarcViewMut::new`]; see the [module docs](self) for what it
/// guarantees. It borrows cudarc's memory (exclusively) and the [`Stream`] for its
/// life.
pub struct CudarcViewMut<'a, T> {
    ptr: CUdeviceptr,
    len: usize,
    ctx: &'a Context,
    /// As [`CudarcView`]'s.
    tracker: Tracker,
    _marker: PhantomData<&'a mut [T]>,
}

impl<'a, T: Pod + DeviceRepr> CudarcView<'a, T> {
    /// `memory` (`&CudaSlice<T>`, `&CudaView<T>`, `&CudaViewMut<T>` or a `CudaView<T>`)
    /// for reading on `stream`, a [`Stream::borrow_cudarc`] of a cudarc stream of the
    /// memory's context.
    ///
    /// Takes the device pointer through cudarc's `DevicePtr::device_ptr` on that
    /// stream, which makes it wait (on the device) for cudarc's recorded writes of the
    /// memory. Errors, before any driver call: [`Error::InvalidArgument`] for a stream
    /// not borrowed from cudarc, [`Error::ContextMismatch`] for memory of another
    /// context; then [`Error::Driver`] for an error cudarc had stored in the stream's
    /// context or that its waits stored (what cudarc's own next call would return).
    pub fn new(memory: impl CudarcMemory<'a, T>, stream: &'a Stream) -> Result<Self> {
        let len = memory.len();
        let cu_stream = check::<T>("CudarcView::new", stream, memory.context(), len)?;
        let (ptr, binding) = take_pointer(stream, cu_stream, |s| memory.device_ptr(s))?;
        Ok(CudarcView {
            ptr,
            len,
            ctx: stream.context(),
            tracker: Tracker::bound(binding),
            _marker: PhantomData,
        })
    }
}

impl<'a, T: Pod + DeviceRepr> CudarcViewMut<'a, T> {
    /// `memory` (`&mut CudaSlice<T>`, `&mut CudaViewMut<T>` or a `CudaViewMut<T>`) for
    /// writing on `stream`, a [`Stream::borrow_cudarc`] of a cudarc stream of the
    /// memory's context.
    ///
    /// Takes the device pointer through cudarc's `DevicePtrMut::device_ptr_mut` on
    /// that stream, which makes it wait (on the device) for cudarc's recorded reads
    /// and writes of the memory. Errors as [`CudarcView::new`].
    pub fn new(memory: impl CudarcMemoryMut<'a, T>, stream: &'a Stream) -> Result<Self> {
        let len = memory.len();
        let cu_stream = check::<T>("CudarcViewMut::new", stream, memory.context(), len)?;
        let (ptr, binding) = take_pointer(stream, cu_stream, |s| memory.device_ptr_mut(s))?;
        Ok(CudarcViewMut {
            ptr,
            len,
            ctx: stream.context(),
            tracker: Tracker::bound(binding),
            _marker: PhantomData,
        })
    }
}

macro_rules! cudarc_view_common {
    ($ty:ident) => {
        impl<T> $ty<'_, T> {
            /// Number of elements.
            pub fn len(&self) -> usize {
                self.len
            }

            /// Whether it holds no element.
            pub fn is_empty(&self) -> bool {
                self.len == 0
            }

            /// The device address of its first element, for handing to other
            /// libraries. Work queued through it is neither ordered by cudarc's
            /// events nor recorded: synchronise it yourself.
            pub fn as_device_ptr(&self) -> CUdeviceptr {
                self.ptr
            }

            /// The context the memory lives in (the stream's).
            pub fn context(&self) -> &Context {
                self.ctx
            }
        }

        impl<T: Pod> memory_sealed::Sealed for $ty<'_, T> {}

        impl<T: Pod> DeviceSlice<T> for $ty<'_, T> {
            fn len(&self) -> usize {
                self.len
            }
            fn device_access(&self) -> DeviceAccess<'_> {
                DeviceAccess {
                    ptr: self.ptr,
                    // Cannot overflow: checked in `new`.
                    bytes: self.len * std::mem::size_of::<T>(),
                    ctx: self.ctx,
                    tracker: &self.tracker,
                }
            }
        }

        impl<T> fmt::Debug for $ty<'_, T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($ty))
                    .field("ptr", &format_args!("{:#x}", self.ptr))
                    .field("len", &self.len)
                    .field("elem", &std::any::type_name::<T>())
                    .finish()
            }
        }
    };
}

cudarc_view_common!(CudarcView);
cudarc_view_common!(CudarcViewMut);

impl<T: Pod> DeviceSliceMut<T> for CudarcViewMut<'_, T> {}

#[cfg(test)]
mod tests {
    use super::*;

    static_assertions::assert_impl_all!(CudarcView<'static, f32>: Send, Sync);
    static_assertions::assert_impl_all!(CudarcViewMut<'static, f32>: Send, Sync);
    static_assertions::assert_not_impl_any!(CudarcView<'static, f32>: Clone, DeviceSliceMut<f32>);
    static_assertions::assert_not_impl_any!(CudarcViewMut<'static, f32>: Clone);
    static_assertions::assert_impl_all!(CudarcView<'static, f32>: DeviceSlice<f32>);
    static_assertions::assert_impl_all!(CudarcViewMut<'static, f32>: DeviceSliceMut<f32>);
}
