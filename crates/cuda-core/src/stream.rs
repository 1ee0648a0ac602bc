//! [`Stream`]: a non-blocking CUDA stream and the operations queued on it.

use std::ffi::c_void;
use std::fmt;
use std::sync::Arc;

use bytemuck::Pod;
use cuda_sys::CUstream;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::memory::{
    DeviceAccess, DeviceSlice, DeviceSliceMut, HostAccess, PageLockedSlice, PageLockedSliceMut,
};
use crate::result;
use crate::tracking::{self, Access, StreamState, Tracker, Use};
use crate::view_2d::Device2dAccess;
use crate::wait::WaitPolicy;

/// A CUDA stream created with `CU_STREAM_NON_BLOCKING`: it does not synchronise with
/// the legacy default stream.
///
/// The stream keeps its [`Context`] alive. `Stream` is `Send` and `Sync`: the driver
/// allows enqueueing on one stream from several threads (their order is then up to
/// the caller). A borrowed per-thread stream (`CU_STREAM_PER_THREAD`, see
/// [`Stream::from_raw_borrowed`]) is the exception: it is bound to the thread that
/// borrowed it, and every operation that names it elsewhere returns
/// [`Error::WrongThread`].
///
/// # Queued operations
///
/// [`memcpy_htod`](Stream::memcpy_htod), [`memcpy_dtoh`](Stream::memcpy_dtoh),
/// [`memcpy_dtod`](Stream::memcpy_dtod) and the memsets return as soon as the driver
/// has queued them. They take page-locked host memory (a [`crate::PinnedBuffer`] or a
/// view of one, or a `'static` [`crate::HostRegistration`]) and device memory (a
/// [`crate::DeviceBuffer`] or a view), and record the operation in each buffer, whose
/// host accessors, synchronous copies and `Drop` then wait for it (see the crate
/// docs). The `_sync` copies take any host slice and wait before returning.
///
/// ```no_run
/// use cuda_core::{Context, DeviceBuffer, PinnedBuffer, Stream};
///
/// let ctx = Context::new(0)?;
/// let stream = Stream::new(&ctx)?;
/// let mut host = PinnedBuffer::<f32>::alloc(1024)?;
/// host.iter_mut().enumerate().for_each(|(i, v)| *v = i as f32);
/// let mut dev = DeviceBuffer::<f32>::alloc(1024)?;
/// stream.memcpy_htod(&host, &mut dev)?; // queued, returns at once
/// let mut back = PinnedBuffer::<f32>::alloc(1024)?;
/// stream.memcpy_dtoh(&dev, &mut back)?;
/// assert_eq!(back[1023], 1023.0); // `Deref` waits for the queued copy
/// # Ok::<(), cuda_core::Error>(())
/// ```
pub struct Stream {
    state: Arc<StreamState>,
}

impl Stream {
    /// Creates a non-blocking stream in `ctx`.
    pub fn new(ctx: &Context) -> Result<Stream> {
        let _g = ctx.enter()?;
        let raw = result::stream_create(cuda_sys::CU_STREAM_NON_BLOCKING)?;
        Ok(Stream {
            state: Arc::new(StreamState::new(raw, ctx.clone(), true)),
        })
    }

    /// Wraps a stream created elsewhere without taking ownership: dropping the
    /// `Stream` destroys nothing.
    ///
    /// Operations queued through it first ask the driver whether the stream is
    /// being captured into a graph and refuse if so ([`Error::StreamCapturing`]);
    /// see `cudarc_bridge`'s "Soundness" for why.
    ///
    /// `CU_STREAM_PER_THREAD` (`0x2`) names a different stream on every thread: the
    /// returned `Stream` is the calling thread's per-thread stream of `ctx`, bound to
    /// this thread. Every operation that names it (queued copies and memsets,
    /// [`Event::record`](crate::Event::record) on it, `synchronize`, `query`, `wait`, views of cudarc
    /// memory for it) checks the calling thread and elsewhere returns
    /// [`Error::WrongThread`] before any driver call, changing nothing. Buffers with
    /// copies queued on it may still be read, written and dropped on any thread: an
    /// event recorded after each operation queued on it (one `cuEventRecord` more
    /// per operation) is what a wait there waits on, as waits through an
    /// [`Event`](crate::Event) do.
    ///
    /// # Safety
    /// 1. `raw` is a live stream of `ctx` (or null or `CU_STREAM_LEGACY`, the legacy
    ///    default stream of `ctx`, or `CU_STREAM_PER_THREAD`, the calling thread's
    ///    per-thread stream of `ctx`) and stays alive as long as the returned
    ///    `Stream`, and as long as buffers with copies queued through it have not
    ///    waited for them. (The driver's per-thread and legacy streams live as long
    ///    as their context.)
    /// 2. No capture of the stream begins on another thread while an operation of
    ///    this crate is being queued on it (the check and the queueing are two driver
    ///    calls; see `cudarc_bridge`'s "Soundness").
    pub unsafe fn from_raw_borrowed(ctx: &Context, raw: CUstream) -> Stream {
        Stream {
            state: Arc::new(StreamState::new(raw, ctx.clone(), false)),
        }
    }

    /// A `Stream` for cudarc's stream `stream`, which it keeps alive and destroys
    /// nothing of, in `ctx` (its context, checked by the caller): see
    /// `crate::cudarc_bridge`. No driver call.
    #[cfg(feature = "cudarc")]
    pub(crate) fn wrap_cudarc(ctx: &Context, stream: &Arc<cudarc::driver::CudaStream>) -> Stream {
        let mut state = StreamState::new(stream.cu_stream().cast(), ctx.clone(), false);
        state.cudarc = Some(Arc::clone(stream));
        Stream {
            state: Arc::new(state),
        }
    }

    /// The cudarc stream this one wraps, when it was made by `Stream::borrow_cudarc`.
    #[cfg(feature = "cudarc")]
    pub(crate) fn cudarc(&self) -> Option<&Arc<cudarc::driver::CudaStream>> {
        self.state.cudarc.as_ref()
    }

    /// Blocks until all work queued on this stream is done, waiting as
    /// [`WaitPolicy::default`] says: polling for [`crate::DEFAULT_SPIN`], then
    /// polling with short sleeps between ([`crate::POLL_SLEEP`]), so a wait behind
    /// long work does not spin a core through it.
    ///
    /// When the wait fails it also waits for the whole context before returning the
    /// error, so that no queued copy is left running into or out of memory the
    /// caller then reuses or frees; the stream's work then counts as over when that
    /// shows it ended (done, or ended by a sticky fault), as after a failed
    /// [`Event::synchronize`](crate::Event::synchronize). A stream being captured into a graph cannot be waited
    /// for: its work queued before the capture stays pending, and the buffers it used
    /// say so (an error from their fallible accessors, a panic from `Deref`, a leak
    /// from `Drop`). After a GPU
    /// fault it returns the fault at once, and so does every later call: see "When
    /// the GPU faults" in the crate docs.
    ///
    /// On a per-thread stream, from another thread than the one that borrowed it:
    /// [`Error::WrongThread`] (wait through an [`Event`](crate::Event) there instead).
    pub fn synchronize(&self) -> Result<()> {
        self.synchronize_with(WaitPolicy::default())
    }

    /// [`Stream::synchronize`], waiting as `policy` says: [`WaitPolicy::Spin`] is the
    /// driver's spinning `cuStreamSynchronize`.
    pub fn synchronize_with(&self, policy: WaitPolicy) -> Result<()> {
        self.state.check_thread("Stream::synchronize")?;
        self.state.synchronize_with(policy)
    }

    /// Whether all work queued on this stream is done, without waiting
    /// (`cuStreamQuery`).
    pub fn query(&self) -> Result<bool> {
        self.state.check_thread("Stream::query")?;
        let upto = self.state.latest();
        // The legacy default stream's handle means the current context's.
        let _g = self.state.ctx.enter()?;
        // SAFETY: `raw` is alive while `self` is, and its context is current.
        let done = unsafe { result::stream_query(self.state.raw) }?;
        if done {
            self.state.mark_complete(upto);
        }
        Ok(done)
    }

    /// The context this stream belongs to.
    pub fn context(&self) -> &Context {
        &self.state.ctx
    }

    /// The raw `CUstream`, for handing to other CUDA libraries. Valid while `self` is.
    pub fn as_raw(&self) -> CUstream {
        self.state.raw
    }

    pub(crate) fn state(&self) -> &Arc<StreamState> {
        &self.state
    }

    /// Queues a copy of `src` (page-locked host memory) into the first `src.len()`
    /// elements of `dst` (device memory) and returns.
    ///
    /// Errors, before any driver call: [`Error::DestinationTooShort`] when `dst` is
    /// shorter than `src`, [`Error::ContextMismatch`] when `dst` lives in another
    /// context than the stream.
    pub fn memcpy_htod<T: Pod>(
        &self,
        src: &impl PageLockedSlice<T>,
        dst: &mut impl DeviceSliceMut<T>,
    ) -> Result<()> {
        let op = "memcpy_htod";
        let bytes = copy_bytes::<T>(op, src.len(), dst.len())?;
        let (h, d) = (src.host_access(), dst.device_access());
        self.check_device(op, &d, "the destination device memory")?;
        if bytes == 0 {
            return Ok(());
        }
        let mut uses = host_uses(&h, Access::Read);
        uses[2] = Some(Use::lock(d.tracker, Access::Write));
        self.queue(op, &mut uses, || {
            // SAFETY: `d` holds at least `bytes` (checked); the host memory holds
            // `bytes` and, being tracked, is neither written nor freed by safe code
            // until the copy is known complete; the stream is live and its context
            // current (entered in `queue`).
            unsafe {
                result::memcpy_htod_async(d.ptr, h.ptr.cast::<c_void>(), bytes, self.state.raw)
            }
        })
    }

    /// Queues a copy of `src` (device memory) into the first `src.len()` elements of
    /// `dst` (page-locked host memory) and returns. Reading `dst` waits for it.
    ///
    /// Errors as [`Stream::memcpy_htod`].
    pub fn memcpy_dtoh<T: Pod>(
        &self,
        src: &impl DeviceSlice<T>,
        dst: &mut impl PageLockedSliceMut<T>,
    ) -> Result<()> {
        let op = "memcpy_dtoh";
        let bytes = copy_bytes::<T>(op, src.len(), dst.len())?;
        let (d, h) = (src.device_access(), dst.host_access());
        self.check_device(op, &d, "the source device memory")?;
        if bytes == 0 {
            return Ok(());
        }
        let mut uses = host_uses(&h, Access::Write);
        uses[2] = Some(Use::lock(d.tracker, Access::Read));
        self.queue(op, &mut uses, || {
            // SAFETY: `d` holds at least `bytes`; the host memory holds `bytes` and,
            // being tracked, is neither read, written nor freed by safe code until the
            // copy is known complete; any bytes are a valid `T` (Pod); stream live,
            // context current.
            unsafe {
                result::memcpy_dtoh_async(h.ptr.cast::<c_void>(), d.ptr, bytes, self.state.raw)
            }
        })
    }

    /// Queues a device-to-device copy of `src` into the first `src.len()` elements of
    /// `dst` and returns. Errors as [`Stream::memcpy_htod`].
    pub fn memcpy_dtod<T: Pod>(
        &self,
        src: &impl DeviceSlice<T>,
        dst: &mut impl DeviceSliceMut<T>,
    ) -> Result<()> {
        let op = "memcpy_dtod";
        let bytes = copy_bytes::<T>(op, src.len(), dst.len())?;
        let (s, d) = (src.device_access(), dst.device_access());
        self.check_device(op, &s, "the source device memory")?;
        self.check_device(op, &d, "the destination device memory")?;
        if bytes == 0 {
            return Ok(());
        }
        let mut uses = [Some(Use::lock(s.tracker, Access::Read)), None, None, None];
        // A source and destination from one buffer cannot both be borrowed (one is
        // `&mut`), so the two trackers differ.
        uses[1] = Some(Use::lock(d.tracker, Access::Write));
        self.queue(op, &mut uses, || {
            // SAFETY: both hold at least `bytes` (checked) and are tracked; stream
            // live, context current.
            unsafe { result::memcpy_dtod_async(d.ptr, s.ptr, bytes, self.state.raw) }
        })
    }

    /// Queues setting every byte of `dst` to zero.
    pub fn memset_zeros<T: Pod>(&self, dst: &mut impl DeviceSliceMut<T>) -> Result<()> {
        self.memset_bytes(dst, 0)
    }

    /// Queues setting every byte of `dst` to `value`.
    pub fn memset_bytes<T: Pod>(&self, dst: &mut impl DeviceSliceMut<T>, value: u8) -> Result<()> {
        let bytes = dst.len() * std::mem::size_of::<T>();
        self.memset(dst, "memset_bytes", bytes, |ptr, raw| {
            // SAFETY: `ptr` holds `bytes` (its length times the element size);
            // stream live, context current.
            unsafe { result::memset_d8_async(ptr, value, bytes, raw) }
        })
    }

    /// Queues setting every element of `dst`, whose elements must be 4 bytes wide,
    /// to the bits `value` (for `f32`, `x.to_bits()`). [`Error::InvalidArgument`] for
    /// other element sizes.
    pub fn memset_u32<T: Pod>(&self, dst: &mut impl DeviceSliceMut<T>, value: u32) -> Result<()> {
        if std::mem::size_of::<T>() != 4 {
            return Err(Error::InvalidArgument {
                op: "memset_u32",
                reason: format!(
                    "elements of {} bytes; memset_u32 needs 4-byte elements",
                    std::mem::size_of::<T>()
                ),
            });
        }
        let count = dst.len();
        self.memset(dst, "memset_u32", count * 4, |ptr, raw| {
            // SAFETY: `ptr` holds `count` 4-byte elements (device allocations are
            // 256-byte aligned and views step in whole 4-byte elements, so it is
            // 4-byte aligned); stream live, context current.
            unsafe { result::memset_d32_async(ptr, value, count, raw) }
        })
    }

    fn memset<T: Pod>(
        &self,
        dst: &mut impl DeviceSliceMut<T>,
        op: &'static str,
        bytes: usize,
        enqueue: impl FnOnce(cuda_sys::CUdeviceptr, CUstream) -> Result<()>,
    ) -> Result<()> {
        let d = dst.device_access();
        self.check_device(op, &d, "the device memory")?;
        if bytes == 0 {
            return Ok(());
        }
        let mut uses = [Some(Use::lock(d.tracker, Access::Write)), None, None, None];
        self.queue(op, &mut uses, || enqueue(d.ptr, self.state.raw))
    }

    /// Copies any host memory (pageable or not) into the first `src.len()` elements
    /// of `dst` in stream order, and waits for the stream before returning, so `src`
    /// is free again. The driver stages pageable memory itself. Errors as
    /// [`Stream::memcpy_htod`], plus the wait's. Waits as [`Stream::synchronize`].
    pub fn memcpy_htod_sync<T: Pod>(
        &self,
        src: &[T],
        dst: &mut impl DeviceSliceMut<T>,
    ) -> Result<()> {
        self.memcpy_htod_sync_with(src, dst, WaitPolicy::default())
    }

    /// [`Stream::memcpy_htod_sync`], waiting as `policy` says.
    pub fn memcpy_htod_sync_with<T: Pod>(
        &self,
        src: &[T],
        dst: &mut impl DeviceSliceMut<T>,
        policy: WaitPolicy,
    ) -> Result<()> {
        let op = "memcpy_htod_sync";
        let bytes = copy_bytes::<T>(op, src.len(), dst.len())?;
        let d = dst.device_access();
        self.check_device(op, &d, "the destination device memory")?;
        if bytes == 0 {
            return Ok(());
        }
        let mut uses = [Some(Use::lock(d.tracker, Access::Write)), None, None, None];
        let queued = self.queue(op, &mut uses, || {
            // SAFETY: `d` holds at least `bytes`; `src` is borrowed until the
            // synchronisation below has seen the copy over; stream live, context
            // current.
            unsafe { result::memcpy_htod_async(d.ptr, src.as_ptr().cast(), bytes, self.state.raw) }
        });
        drop(uses);
        self.finish_sync_copy(queued, policy)
    }

    /// Copies `src` into the first `src.len()` elements of any host slice `dst` in
    /// stream order, and waits for the stream before returning. Errors as
    /// [`Stream::memcpy_htod`], plus the wait's. Waits as [`Stream::synchronize`].
    pub fn memcpy_dtoh_sync<T: Pod>(&self, src: &impl DeviceSlice<T>, dst: &mut [T]) -> Result<()> {
        self.memcpy_dtoh_sync_with(src, dst, WaitPolicy::default())
    }

    /// [`Stream::memcpy_dtoh_sync`], waiting as `policy` says.
    pub fn memcpy_dtoh_sync_with<T: Pod>(
        &self,
        src: &impl DeviceSlice<T>,
        dst: &mut [T],
        policy: WaitPolicy,
    ) -> Result<()> {
        let op = "memcpy_dtoh_sync";
        let bytes = copy_bytes::<T>(op, src.len(), dst.len())?;
        let d = src.device_access();
        self.check_device(op, &d, "the source device memory")?;
        if bytes == 0 {
            return Ok(());
        }
        let mut uses = [Some(Use::lock(d.tracker, Access::Read)), None, None, None];
        let queued = self.queue(op, &mut uses, || {
            // SAFETY: `d` holds at least `bytes`; `dst` is exclusively borrowed until
            // the synchronisation below has seen the copy over; any bytes are a valid
            // `T`; stream live, context current.
            unsafe {
                result::memcpy_dtoh_async(dst.as_mut_ptr().cast(), d.ptr, bytes, self.state.raw)
            }
        });
        drop(uses);
        self.finish_sync_copy(queued, policy)
    }

    /// The end of a `_sync` copy whose host memory is borrowed for the call only:
    /// once anything may have been queued (`queued`, even an error: see
    /// [`tracking::queue`]), it returns only when the stream's work is known to be
    /// over, so the copy no longer uses the memory
    /// ([`StreamState::synchronize_until_over`]). A refusal before the driver was
    /// asked (a capturing stream, a per-thread stream of another thread) queued
    /// nothing and returns at once.
    pub(crate) fn finish_sync_copy(&self, queued: Result<()>, policy: WaitPolicy) -> Result<()> {
        match queued {
            Err(e @ (Error::StreamCapturing { .. } | Error::WrongThread { .. })) => Err(e),
            queued => {
                let waited = self.state.synchronize_until_over(policy);
                queued.and(waited)
            }
        }
    }

    pub(crate) fn check_device(
        &self,
        op: &'static str,
        d: &DeviceAccess<'_>,
        what: &'static str,
    ) -> Result<()> {
        self.check_memory(op, d, what)
    }

    /// Checks, with no driver call, that an operation queued on this stream may use
    /// the device memory `memory` describes: [`Error::WrongThread`] when the stream
    /// is a per-thread stream of another thread, [`Error::ContextMismatch`] when the
    /// memory lives in another context, [`Error::StreamMismatch`] when it may be used
    /// on one other stream only (cudarc memory viewed for another stream, with the
    /// `cudarc` feature). `op` and `what` name the operation and the argument in the
    /// error.
    ///
    /// Every operation of this workspace makes this check before anything else that
    /// touches the driver; code queuing its own operations through raw handles can
    /// make it too.
    pub fn check_memory(
        &self,
        op: &'static str,
        memory: &DeviceAccess<'_>,
        what: &'static str,
    ) -> Result<()> {
        self.check_usable(op, memory.ctx, memory.tracker, what)
    }

    /// [`Stream::check_memory`] for a 2-D region of device memory.
    pub fn check_memory_2d(
        &self,
        op: &'static str,
        memory: &Device2dAccess<'_>,
        what: &'static str,
    ) -> Result<()> {
        self.check_usable(op, memory.ctx, memory.tracker, what)
    }

    fn check_usable(
        &self,
        op: &'static str,
        ctx: &Context,
        tracker: &Tracker,
        what: &'static str,
    ) -> Result<()> {
        self.state.check_thread(op)?;
        if !ctx.same_as(&self.state.ctx) {
            return Err(Error::ContextMismatch { op, what });
        }
        if !tracker.allows_stream(&self.state) {
            return Err(Error::StreamMismatch { op, what });
        }
        Ok(())
    }

    /// Queues one operation `op` with this stream's context current; see
    /// [`tracking::queue`]. A per-thread stream of another thread is refused first
    /// ([`Error::WrongThread`]), before the context is entered.
    pub(crate) fn queue(
        &self,
        op: &'static str,
        uses: &mut [Option<Use<'_>>],
        enqueue: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        self.state.check_thread(op)?;
        let _g = self.state.ctx.enter()?;
        tracking::queue(&self.state, op, uses, enqueue)
    }
}

/// Bytes of a copy of `src` elements into `dst` elements, or
/// [`Error::DestinationTooShort`] when `dst` is shorter.
fn copy_bytes<T>(op: &'static str, src: usize, dst: usize) -> Result<usize> {
    if dst < src {
        return Err(Error::DestinationTooShort { op, src, dst });
    }
    Ok(src * std::mem::size_of::<T>())
}

/// The host side's trackers, locked: the allocation's, then a view's own.
pub(crate) fn host_uses<'a>(h: &HostAccess<'a>, access: Access) -> [Option<Use<'a>>; 4] {
    let region = h
        .region
        .filter(|r| !std::ptr::eq(*r, h.root))
        .map(|r| Use::lock(r, access));
    [Some(Use::lock(h.root, access)), region, None, None]
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("raw", &self.state.raw)
            .finish()
    }
}
