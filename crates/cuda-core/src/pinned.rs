//! [`PinnedBuffer`]: page-locked host memory; its views live in `view.rs`.

use std::fmt;
use std::ops::{Deref, DerefMut, RangeBounds};
use std::ptr::NonNull;

use bytemuck::Pod;

use crate::context::Context;
use crate::error::Result;
use crate::memory::{checked_range, sealed, HostAccess, PageLockedSlice, PageLockedSliceMut};
use crate::tracking::Tracker;
use crate::{byte_len, deferred, result};

mod view;

pub use view::{PinnedView, PinnedViewMut};

/// `len` elements of `T` in page-locked host memory (`cuMemHostAlloc` with
/// `CU_MEMHOSTALLOC_PORTABLE`, so every context can DMA from it), zero-initialised,
/// dereferencing to `[T]`.
///
/// The memory belongs to the context current at allocation, which the buffer keeps
/// alive. Zero-length buffers pin nothing. The allocation is at least 256-byte aligned
/// (small ones are sub-allocated by the driver and not page aligned).
///
/// Copies queued on a [`Stream`](crate::Stream) from or into the buffer are tracked:
/// `Deref` waits for queued copies *into* it, `DerefMut` and `Drop` for every queued
/// copy that uses it. When nothing is queued that costs one atomic load. `Deref`
/// cannot return an error; a failed wait is recorded (see
/// [`crate::check_deferred_errors`]) and the memory handed out, since the stream's
/// work is over either way. [`PinnedBuffer::as_slice`] / [`as_mut_slice`](PinnedBuffer::as_mut_slice)
/// return the error instead. In a hot loop, take the slice once rather than
/// indexing the buffer element by element.
pub struct PinnedBuffer<T: Pod> {
    ptr: NonNull<T>,
    len: usize,
    ctx: Option<Context>,
    tracker: Tracker,
}

// SAFETY: the buffer owns its memory exclusively, like a Box<[T]>; the tracker is
// thread-safe.
unsafe impl<T: Pod + Send> Send for PinnedBuffer<T> {}
// SAFETY: shared access gives `&[T]` only, after queued writes completed.
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
            return Ok(PinnedBuffer::empty(len));
        }
        Self::alloc_in(&Context::current()?, len)
    }

    fn empty(len: usize) -> PinnedBuffer<T> {
        PinnedBuffer {
            ptr: NonNull::dangling(),
            len,
            ctx: None,
            tracker: Tracker::new(),
        }
    }

    /// Pins `len` zeroed elements in `ctx`, whatever is current.
    pub fn alloc_in(ctx: &Context, len: usize) -> Result<PinnedBuffer<T>> {
        let bytes = byte_len::<T>("PinnedBuffer::alloc_in", len)?;
        check_align::<T>()?;
        if bytes == 0 {
            return Ok(PinnedBuffer::empty(len));
        }
        let p = {
            let _g = ctx.enter()?;
            result::mem_host_alloc(bytes, cuda_sys::CU_MEMHOSTALLOC_PORTABLE)?
        };
        let Some(ptr) = NonNull::new(p.cast::<T>()).filter(|p| p.as_ptr().is_aligned()) else {
            if !p.is_null() {
                // SAFETY: `p` came from cuMemHostAlloc just above and is not used again.
                if let Err(e) = unsafe { result::mem_free_host(p) } {
                    deferred::record("cuMemFreeHost", e);
                }
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
            tracker: Tracker::new(),
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

    /// The address of the first element, without waiting for anything (for
    /// comparisons and for handing to other libraries; reading through it while a
    /// copy is queued is up to you).
    pub fn as_ptr(&self) -> *const T {
        self.ptr.as_ptr()
    }

    /// The elements, once queued copies into the buffer have landed.
    pub fn as_slice(&self) -> Result<&[T]> {
        self.tracker.wait_host(false)?;
        // SAFETY: `ptr` is valid, aligned (checked at allocation, or dangling for len
        // 0) and initialised for `len` elements, owned by `self`; no queued copy
        // writes it any more (waited above).
        Ok(unsafe { elems(self.ptr, self.len) })
    }

    /// The elements, writable, once every queued copy that uses the buffer is done.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.tracker.wait_host(true)?;
        // SAFETY: as in `as_slice`; `&mut self` makes the access exclusive and no
        // queued copy reads or writes the memory any more (waited above).
        Ok(unsafe { elems_mut(self.ptr, self.len) })
    }

    /// Waits for every queued copy that uses the buffer.
    pub fn wait(&self) -> Result<()> {
        self.tracker.wait_host(true)
    }

    /// Whether no copy queued on the buffer may still be running (no driver call: a
    /// copy counts as running until a synchronisation through this crate has seen it
    /// complete).
    pub fn is_idle(&self) -> bool {
        self.tracker.is_idle()
    }

    /// A read-only view of elements `range`, the source of queued copies.
    /// [`crate::Error::OutOfRange`] when `range` does not fit.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<PinnedView<'_, T>> {
        let r = checked_range("PinnedBuffer::slice", range, self.len)?;
        Ok(PinnedView {
            // SAFETY: `r.start <= len`, inside (or one past) the allocation.
            ptr: unsafe { self.ptr.add(r.start) },
            len: r.len(),
            root: &self.tracker,
            region: None,
        })
    }

    /// A writable view of elements `range`, with its own record of queued copies:
    /// host access through it waits only for copies queued through it.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<PinnedViewMut<'_, T>> {
        let r = checked_range("PinnedBuffer::slice_mut", range, self.len)?;
        Ok(PinnedViewMut {
            // SAFETY: as in `slice`.
            ptr: unsafe { self.ptr.add(r.start) },
            len: r.len(),
            region: self.tracker.snapshot(),
            root: &self.tracker,
        })
    }

    /// Two writable views, of elements `..mid` and `mid..`, each with its own record
    /// of queued copies (a double buffer in one allocation). [`crate::Error::OutOfRange`]
    /// when `mid > len`.
    pub fn split_at_mut(
        &mut self,
        mid: usize,
    ) -> Result<(PinnedViewMut<'_, T>, PinnedViewMut<'_, T>)> {
        checked_range("PinnedBuffer::split_at_mut", ..mid, self.len)?;
        let whole = PinnedViewMut {
            ptr: self.ptr,
            len: self.len,
            region: self.tracker.snapshot(),
            root: &self.tracker,
        };
        whole.split_at(mid)
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

/// Waits on `tracker` for host access (`write`: exclusive) from `Deref`, which
/// cannot return an error: see [`Tracker::wait_for_deref`].
fn wait_or_record(tracker: &Tracker, write: bool) {
    tracker.wait_for_deref(write, "pinned memory access (waiting for queued copies)");
}

/// `len` elements at `ptr`, shared.
///
/// # Safety
/// 1. `ptr` is valid, aligned and initialised for `len` elements for `'a`, and
///    nothing writes them during `'a` (queued copies into them are complete).
unsafe fn elems<'a, T>(ptr: NonNull<T>, len: usize) -> &'a [T] {
    // SAFETY: condition 1.
    unsafe { std::slice::from_raw_parts(ptr.as_ptr(), len) }
}

/// `len` elements at `ptr`, exclusive.
///
/// # Safety
/// 1. As [`elems`], and nothing else reads or writes them during `'a`.
unsafe fn elems_mut<'a, T>(ptr: NonNull<T>, len: usize) -> &'a mut [T] {
    // SAFETY: condition 1.
    unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), len) }
}

impl<T: Pod> Deref for PinnedBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        wait_or_record(&self.tracker, false);
        // SAFETY: our allocation of `len` initialised elements (or dangling for 0);
        // queued writes are over (waited above); `&self` rules out host writes.
        unsafe { elems(self.ptr, self.len) }
    }
}

impl<T: Pod> DerefMut for PinnedBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        wait_or_record(&self.tracker, true);
        // SAFETY: as in `deref`; every queued use is over and `&mut self` is exclusive.
        unsafe { elems_mut(self.ptr, self.len) }
    }
}

impl<T: Pod> Drop for PinnedBuffer<T> {
    fn drop(&mut self) {
        if let Some(ctx) = &self.ctx {
            if let Err(e) = self.tracker.wait_host(true) {
                deferred::record("PinnedBuffer drop (waiting for queued copies)", e);
                if self.tracker.may_be_pending(true) {
                    // A queued copy may still use the memory: it is leaked, not freed
                    // under the DMA.
                    return;
                }
            }
            let g = ctx.enter();
            // SAFETY: we allocated `ptr` with cuMemHostAlloc; no queued copy uses it
            // any more (waited above, or known over after a failed wait) and nothing
            // else does after this.
            if let Err(e) = unsafe { result::mem_free_host(self.ptr.as_ptr().cast()) } {
                deferred::record("cuMemFreeHost", e);
            }
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

impl<T: Pod> sealed::Sealed for PinnedBuffer<T> {}

impl<T: Pod> PageLockedSlice<T> for PinnedBuffer<T> {
    fn len(&self) -> usize {
        self.len
    }
    fn host_access(&self) -> HostAccess<'_> {
        HostAccess {
            ptr: self.ptr.as_ptr().cast(),
            root: &self.tracker,
            region: None,
        }
    }
}

impl<T: Pod> PageLockedSliceMut<T> for PinnedBuffer<T> {}
