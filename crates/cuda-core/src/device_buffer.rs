//! [`DeviceBuffer`]: a typed allocation in device memory.

use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;

use bytemuck::Pod;
use cuda_sys::CUdeviceptr;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::{byte_len, result};

/// `len` elements of `T` in device memory, freed on drop.
///
/// Zero-length buffers allocate nothing and have a null device pointer.
pub struct DeviceBuffer<T: Pod> {
    ptr: CUdeviceptr,
    len: usize,
    ctx: Context,
    owned: bool,
    _marker: PhantomData<T>,
}

// SAFETY: device memory is reachable from any thread through the driver; the buffer
// owns it like a Box owns its heap memory.
unsafe impl<T: Pod + Send> Send for DeviceBuffer<T> {}
// SAFETY: `&DeviceBuffer` only allows reads (copy_to_host) of device memory.
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
    /// `self` is.
    pub fn as_device_ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    /// The context the memory lives in.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Copies all of `src` to the device through the driver's pageable path
    /// (`cuMemcpyHtoD`), returning once it has landed. `src.len()` must equal
    /// `self.len()`.
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
        let _g = self.ctx.enter()?;
        // SAFETY: the device allocation and `src` both hold `byte_len` bytes; the copy
        // has read `src` when it returns.
        unsafe { result::memcpy_htod(self.ptr, src.as_ptr().cast::<c_void>(), self.byte_len()) }?;
        // From pageable memory cuMemcpyHtoD returns once the bytes are staged, before
        // the DMA lands; wait for it so the copy is complete for every stream.
        // SAFETY: the null stream is always valid in the current context.
        unsafe { result::stream_synchronize(std::ptr::null_mut()) }
    }

    /// Copies the whole buffer into `dst`, synchronously (`cuMemcpyDtoH`).
    /// `dst.len()` must equal `self.len()`.
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
        let _g = self.ctx.enter()?;
        // SAFETY: both sides hold `byte_len` bytes; any bit pattern is a valid `T`
        // (Pod); the copy is synchronous.
        unsafe { result::memcpy_dtoh(dst.as_mut_ptr().cast::<c_void>(), self.ptr, self.byte_len()) }
    }

    /// Frees the memory now and reports the driver's answer, which `Drop` cannot.
    pub fn free(mut self) -> Result<()> {
        let r = self.release();
        std::mem::forget(self);
        r
    }

    fn release(&mut self) -> Result<()> {
        if !self.owned || self.ptr == 0 {
            return Ok(());
        }
        let _g = self.ctx.enter()?;
        let ptr = std::mem::replace(&mut self.ptr, 0);
        // SAFETY: we allocated `ptr` and cleared our copy of it.
        unsafe { result::mem_free(ptr) }
    }
}

impl<T: Pod> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        let _ = self.release();
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
