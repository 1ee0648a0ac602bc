//! [`PinnedBuffer`]: page-locked host memory.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use bytemuck::Pod;

use crate::context::Context;
use crate::error::Result;
use crate::{byte_len, result};

/// `len` elements of `T` in page-locked host memory (`cuMemHostAlloc` with
/// `CU_MEMHOSTALLOC_PORTABLE`, so every context can DMA from it), zero-initialised,
/// dereferencing to `[T]`.
///
/// The memory belongs to the context current at allocation, which the buffer keeps
/// alive. Zero-length buffers pin nothing. The allocation is at least 256-byte aligned
/// (small ones are sub-allocated by the driver and not page aligned).
pub struct PinnedBuffer<T: Pod> {
    ptr: NonNull<T>,
    len: usize,
    ctx: Option<Context>,
}

// SAFETY: the buffer owns its memory exclusively, like a Box<[T]>.
unsafe impl<T: Pod + Send> Send for PinnedBuffer<T> {}
// SAFETY: shared access gives `&[T]` only.
unsafe impl<T: Pod + Sync> Sync for PinnedBuffer<T> {}

impl<T: Pod> PinnedBuffer<T> {
    /// Pins `len` zeroed elements in the context current on this thread.
    ///
    /// Errors: [`crate::Error::SizeOverflow`], [`crate::Error::NoContext`], or the
    /// driver's error (e.g. out of memory).
    pub fn alloc(len: usize) -> Result<PinnedBuffer<T>> {
        let bytes = byte_len::<T>("PinnedBuffer::alloc", len)?;
        check_align::<T>()?;
        if bytes == 0 {
            return Ok(PinnedBuffer {
                ptr: NonNull::dangling(),
                len,
                ctx: None,
            });
        }
        Self::alloc_in(&Context::current()?, len)
    }

    /// Pins `len` zeroed elements in `ctx`, whatever is current.
    pub fn alloc_in(ctx: &Context, len: usize) -> Result<PinnedBuffer<T>> {
        let bytes = byte_len::<T>("PinnedBuffer::alloc_in", len)?;
        check_align::<T>()?;
        if bytes == 0 {
            return Ok(PinnedBuffer {
                ptr: NonNull::dangling(),
                len,
                ctx: None,
            });
        }
        let p = {
            let _g = ctx.enter()?;
            result::mem_host_alloc(bytes, cuda_sys::CU_MEMHOSTALLOC_PORTABLE)?
        };
        let Some(ptr) = NonNull::new(p.cast::<T>()).filter(|p| p.as_ptr().is_aligned()) else {
            if !p.is_null() {
                // SAFETY: `p` came from cuMemHostAlloc just above and is not used again.
                let _ = unsafe { result::mem_free_host(p) };
            }
            return Err(crate::Error::InvalidArgument {
                op: "PinnedBuffer::alloc",
                reason: format!(
                    "driver returned a host pointer {p:p} not aligned to {} bytes",
                    std::mem::align_of::<T>()
                ),
            });
        };
        // SAFETY: the driver returned a writable allocation of `bytes` bytes.
        unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0, bytes) };
        Ok(PinnedBuffer {
            ptr,
            len,
            ctx: Some(ctx.clone()),
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn byte_len(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    /// The context the memory was pinned in (`None` for a zero-length buffer).
    pub fn context(&self) -> Option<&Context> {
        self.ctx.as_ref()
    }
}

/// The driver sub-allocates small pinned blocks: measured on our H200 host they are
/// 512-byte aligned, not page aligned. Element types aligned past 256 bytes (the
/// alignment CUDA guarantees for its allocations) are refused; the pointer is also
/// checked at run time.
fn check_align<T>() -> Result<()> {
    if std::mem::align_of::<T>() > GUARANTEED_ALIGN_BYTES {
        return Err(crate::Error::InvalidArgument {
            op: "PinnedBuffer::alloc",
            reason: format!("element alignment {} exceeds the {GUARANTEED_ALIGN_BYTES}-byte alignment of pinned memory", std::mem::align_of::<T>()),
        });
    }
    Ok(())
}

const GUARANTEED_ALIGN_BYTES: usize = 256;

impl<T: Pod> Deref for PinnedBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` is valid, aligned (checked at allocation, or dangling for len 0) and
        // initialised for `len` elements, owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Pod> DerefMut for PinnedBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Pod> Drop for PinnedBuffer<T> {
    fn drop(&mut self) {
        if let Some(ctx) = &self.ctx {
            let g = ctx.enter();
            // SAFETY: we allocated `ptr` with cuMemHostAlloc; nothing uses it after.
            let _ = unsafe { result::mem_free_host(self.ptr.as_ptr().cast()) };
            drop(g);
        }
    }
}

impl<T: Pod> fmt::Debug for PinnedBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedBuffer")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}
