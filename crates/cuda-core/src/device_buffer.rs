//! [`DeviceBuffer`]: a typed allocation in device memory (its views are in
//! [`crate::device_view`]).

use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::ops::RangeBounds;

use bytemuck::Pod;
use cuda_sys::CUdeviceptr;

use crate::context::Context;
use crate::device_view::{DeviceView, DeviceViewMut};
use crate::error::{Error, Result};
use crate::memory::{sealed, DeviceAccess, DeviceSlice, DeviceSliceMut};
use crate::tracking::Tracker;
use crate::{byte_len, deferred, result};

/// `len` elements of `T` in device memory, freed on drop.
///
/// Zero-length buffers allocate nothing and have a null device pointer.
///
/// Copies queued on a [`Stream`](crate::Stream) are tracked: the synchronous copies
/// ([`copy_from_host`](DeviceBuffer::copy_from_host),
/// [`copy_to_host`](DeviceBuffer::copy_to_host)) and `Drop` first wait for queued
/// work that uses the buffer, so nothing reads or frees it while a queued copy runs.
pub struct DeviceBuffer<T: Pod> {
    ptr: CUdeviceptr,
    len: usize,
    ctx: Context,
    owned: bool,
    tracker: Tracker,
    _marker: PhantomData<T>,
}

// SAFETY: device memory is reachable from any thread through the driver; the buffer
// owns it like a Box owns its heap memory; the tracker is thread-safe.
unsafe impl<T: Pod + Send> Send for DeviceBuffer<T> {}
// SAFETY: `&DeviceBuffer` only allows reads of device memory (copy_to_host, queued
// copies from it), each ordered against queued writes by the tracker.
unsafe impl<T: Pod + Sync> Sync for DeviceBuffer<T> {}

impl<T: Pod> DeviceBuffer<T> {
    /// Allocates `len` uninitialised elements in the context current on this thread.
    ///
    /// Errors: [`Error::SizeOverflow`] when `len * size_of::<T>()` overflows,
    /// [`Error::NoContext`] when no context is current, or the driver's error
    /// (e.g. `CUDA_ERROR_OUT_OF_MEMORY`).
    pub fn alloc(len: usize) -> Result<DeviceBuffer<T>> {
        let bytes = byte_len::<T>("DeviceBuffer::alloc", len)?;
        let ctx = Context::current()?;
        Self::alloc_bytes(ctx, len, bytes)
    }

    /// Allocates `len` uninitialised elements in `ctx`, whatever is current.
    pub fn alloc_in(ctx: &Context, len: usize) -> Result<DeviceBuffer<T>> {
        let bytes = byte_len::<T>("DeviceBuffer::alloc_in", len)?;
        Self::alloc_bytes(ctx.clone(), len, bytes)
    }

    fn alloc_bytes(ctx: Context, len: usize, bytes: usize) -> Result<DeviceBuffer<T>> {
        let ptr = if bytes == 0 {
            0
        } else {
            let _g = ctx.enter()?;
            result::mem_alloc(bytes)?
        };
        Ok(DeviceBuffer {
            ptr,
            len,
            ctx,
            owned: true,
            tracker: Tracker::new(),
            _marker: PhantomData,
        })
    }

    /// Allocates `len` elements set to all-zero bytes.
    pub fn zeroed(len: usize) -> Result<DeviceBuffer<T>> {
        let buf = Self::alloc(len)?;
        if buf.ptr != 0 {
            let _g = buf.ctx.enter()?;
            // SAFETY: `ptr` is our allocation of exactly `byte_len` bytes.
            unsafe { result::memset_d8(buf.ptr, 0, buf.byte_len()) }?;
            // cuMemsetD8 may return before it finishes (it runs on the legacy default
            // stream, which non-blocking streams do not wait for): finish it here.
            // SAFETY: the null stream is always valid in the current context.
            unsafe { result::stream_synchronize(std::ptr::null_mut()) }?;
        }
        Ok(buf)
    }

    /// Wraps device memory allocated elsewhere without taking ownership.
    ///
    /// # Safety
    /// 1. `ptr` is device memory of `ctx` holding at least `len * size_of::<T>()`
    ///    bytes, which stays allocated while the returned buffer lives.
    /// 2. Nothing else writes that memory while the returned buffer reads it, and
    ///    nothing else reads or writes it while the buffer writes it.
    pub unsafe fn from_raw_borrowed(
        ctx: &Context,
        ptr: CUdeviceptr,
        len: usize,
    ) -> Result<DeviceBuffer<T>> {
        byte_len::<T>("DeviceBuffer::from_raw_borrowed", len)?;
        Ok(DeviceBuffer {
            ptr,
            len,
            ctx: ctx.clone(),
            owned: false,
            tracker: Tracker::new(),
            _marker: PhantomData,
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes (cannot overflow: checked at allocation).
    pub fn byte_len(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    /// The raw device pointer, for handing to other CUDA libraries. Valid while
    /// `self` is. Work you queue on it yourself is not tracked: synchronise before
    /// the buffer is dropped.
    pub fn as_device_ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    /// The context the memory lives in.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// A read-only view of elements `range`, for queued copies from part of the
    /// buffer. [`Error::OutOfRange`] when `range` does not fit.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceView<'_, T>> {
        DeviceView::new(self.ptr, self.len, &self.ctx, &self.tracker)
            .into_part("DeviceBuffer::slice", range)
    }

    /// A writable view of elements `range`, for queued copies into part of the
    /// buffer. [`Error::OutOfRange`] when `range` does not fit.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<DeviceViewMut<'_, T>> {
        DeviceViewMut::new(self.ptr, self.len, &self.ctx, &self.tracker)
            .into_part("DeviceBuffer::slice_mut", range)
    }

    /// Two writable views, of elements `..mid` and `mid..`: two parts of one tensor
    /// to fill at once, for example both in one `cuda_staging::UploadBatch`. They
    /// cannot overlap, and the buffer stays borrowed while either lives.
    /// [`Error::OutOfRange`] when `mid > len`.
    pub fn split_at_mut(
        &mut self,
        mid: usize,
    ) -> Result<(DeviceViewMut<'_, T>, DeviceViewMut<'_, T>)> {
        DeviceViewMut::new(self.ptr, self.len, &self.ctx, &self.tracker)
            .into_halves("DeviceBuffer::split_at_mut", mid)
    }

    /// The whole buffer as bytes, read-only (the same memory and record of queued
    /// work), for copies that cut it at byte offsets.
    pub fn as_bytes(&self) -> DeviceView<'_, u8> {
        DeviceView::new(self.ptr, self.byte_len(), &self.ctx, &self.tracker)
    }

    /// The whole buffer as bytes, writable. Any bytes make valid elements (`T: Pod`).
    pub fn as_bytes_mut(&mut self) -> DeviceViewMut<'_, u8> {
        DeviceViewMut::new(self.ptr, self.byte_len(), &self.ctx, &self.tracker)
    }

    /// Copies all of `src` to the device through the driver's pageable path
    /// (`cuMemcpyHtoD`), returning once it has landed. `src.len()` must equal
    /// `self.len()`. Waits first for queued work that uses the buffer.
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
        if src.len() != self.len {
            return Err(Error::LengthMismatch {
                op: "copy_from_host",
                host: src.len(),
                expected: self.len,
            });
        }
        if self.len == 0 {
            return Ok(());
        }
        // The legacy default stream does not wait for our non-blocking streams.
        self.tracker.wait_host(true)?;
        let _g = self.ctx.enter()?;
        // SAFETY: the device allocation and `src` both hold `byte_len` bytes; the copy
        // has read `src` when it returns.
        unsafe { result::memcpy_htod(self.ptr, src.as_ptr().cast::<c_void>(), self.byte_len()) }?;
        // From pageable memory cuMemcpyHtoD returns once the bytes are staged, before
        // the DMA lands; wait for it so the copy is complete for every stream.
        // SAFETY: the null stream is always valid in the current context.
        unsafe { result::stream_synchronize(std::ptr::null_mut()) }
    }

    /// Copies the whole buffer into `dst`, synchronously (`cuMemcpyDtoH`), after
    /// queued work that writes the buffer. `dst.len()` must equal `self.len()`.
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<()> {
        if dst.len() != self.len {
            return Err(Error::LengthMismatch {
                op: "copy_to_host",
                host: dst.len(),
                expected: self.len,
            });
        }
        if self.len == 0 {
            return Ok(());
        }
        self.tracker.wait_host(false)?;
        let _g = self.ctx.enter()?;
        // SAFETY: both sides hold `byte_len` bytes; any bit pattern is a valid `T`
        // (Pod); the copy is synchronous.
        unsafe { result::memcpy_dtoh(dst.as_mut_ptr().cast::<c_void>(), self.ptr, self.byte_len()) }
    }

    /// Waits for every queued operation that uses the buffer.
    pub fn wait(&self) -> Result<()> {
        self.tracker.wait_host(true)
    }

    /// Frees the memory now and reports the driver's answer, which `Drop` cannot.
    pub fn free(mut self) -> Result<()> {
        let r = self.release();
        // `release` cleared the pointer: dropping frees nothing more, and releases the
        // context handle.
        drop(self);
        r
    }

    fn release(&mut self) -> Result<()> {
        let waited = self.tracker.wait_host(true);
        if !self.owned || self.ptr == 0 {
            return waited;
        }
        if self.tracker.may_be_pending(true) {
            // The failed wait left a queued use running, for all we know: the memory
            // is leaked, not freed under it.
            self.ptr = 0;
            return waited;
        }
        let _g = self.ctx.enter()?;
        let ptr = std::mem::replace(&mut self.ptr, 0);
        // SAFETY: we allocated `ptr` and cleared our copy of it; queued work that used
        // it is complete (waited above, or known over after a failed wait).
        unsafe { result::mem_free(ptr) }.and(waited)
    }
}

impl<T: Pod> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            deferred::record("DeviceBuffer drop (wait, cuMemFree)", e);
        }
    }
}

impl<T: Pod> fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .field("elem", &std::any::type_name::<T>())
            .finish()
    }
}

impl<T: Pod> sealed::Sealed for DeviceBuffer<T> {}

impl<T: Pod> DeviceSlice<T> for DeviceBuffer<T> {
    fn len(&self) -> usize {
        self.len
    }
    fn device_access(&self) -> DeviceAccess<'_> {
        DeviceAccess {
            ptr: self.ptr,
            bytes: self.byte_len(),
            ctx: &self.ctx,
            tracker: &self.tracker,
        }
    }
}

impl<T: Pod> DeviceSliceMut<T> for DeviceBuffer<T> {}
