//! [`HostRegistration`]: page-lock a caller's own buffer for as long as it is borrowed.

use std::fmt;
use std::ops::{Deref, DerefMut};

use bytemuck::Pod;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::memory::{sealed, HostAccess, PageLockedSlice, PageLockedSliceMut};
use crate::tracking::Tracker;
use crate::{deferred, result};

/// A caller-owned slice page-locked with `cuMemHostRegister` (portable) for the
/// lifetime of this guard, and unregistered on drop.
///
/// The guard holds the slice's unique borrow, so the memory cannot be freed, moved
/// or registered a second time while it is registered: the borrow checker rejects
/// it. Reach the data through the guard (it dereferences to `[T]`).
///
/// Copies between a registration and the device:
/// - any registration works with the copies that wait before returning
///   ([`Stream::memcpy_htod_sync`](crate::Stream::memcpy_htod_sync) /
///   [`memcpy_dtoh_sync`](crate::Stream::memcpy_dtoh_sync), and `cuda-staging`'s
///   `upload` / `download`), which DMA straight from or into it;
/// - a registration of `'static` memory (a leaked `Box<[T]>`, a `static`) can also
///   be used with queued copies ([`Stream::memcpy_htod`](crate::Stream::memcpy_htod)
///   and friends). Borrowed memory cannot: `mem::forget` on the guard would end the
///   borrow while a queued copy still runs. Its `Deref`, `DerefMut` and `Drop` wait
///   for queued copies like a [`PinnedBuffer`](crate::PinnedBuffer)'s.
///
/// Registration is expensive (milliseconds for tens of MiB): register long-lived
/// buffers once, not per transfer.
///
/// Do not `mem::forget` a guard of borrowed memory. Forgetting it is safe (no queued
/// copy can use borrowed memory), but it leaves the pages registered after the borrow
/// ends. Should that memory then be freed and the address range reused by a later
/// allocation, the driver still answers "page-locked" for it (so does
/// `cuda-staging`'s check, which asks the driver), and a copy at that address moves
/// the old registration's pages: wrong data, silently. Nothing can detect a
/// forgotten guard; drop it or call [`HostRegistration::unregister`].
pub struct HostRegistration<'a, T: Pod> {
    data: &'a mut [T],
    ctx: Context,
    tracker: Tracker,
}

impl<'a, T: Pod> HostRegistration<'a, T> {
    /// Page-locks `data` in `ctx`.
    ///
    /// Errors: [`Error::InvalidArgument`] for an empty slice, or the driver's error
    /// (`CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED` when another registration covers
    /// part of it).
    pub fn new(ctx: &Context, data: &'a mut [T]) -> Result<HostRegistration<'a, T>> {
        let bytes = std::mem::size_of_val(data);
        if bytes == 0 {
            return Err(Error::InvalidArgument {
                op: "HostRegistration::new",
                reason: "cannot register an empty slice".into(),
            });
        }
        let _g = ctx.enter()?;
        // SAFETY: `data` stays borrowed (so allocated and unmoved) until `Drop`
        // unregisters it.
        unsafe {
            result::mem_host_register(
                data.as_mut_ptr().cast(),
                bytes,
                cuda_sys::CU_MEMHOSTREGISTER_PORTABLE,
            )
        }?;
        Ok(HostRegistration {
            data,
            ctx: ctx.clone(),
            tracker: Tracker::new(),
        })
    }

    /// Unregisters now (after queued copies that use the memory) and reports the
    /// driver's answer, which `Drop` cannot; gives the slice back.
    pub fn unregister(self) -> Result<&'a mut [T]> {
        let mut me = std::mem::ManuallyDrop::new(self);
        let r = me.release();
        // SAFETY: `me` is never used or dropped again; moving the three fields out
        // once is sound.
        let (data, ctx, tracker) = unsafe {
            (
                std::ptr::read(&me.data),
                std::ptr::read(&me.ctx),
                std::ptr::read(&me.tracker),
            )
        };
        drop((ctx, tracker));
        r.map(|()| data)
    }

    fn release(&mut self) -> Result<()> {
        let waited = self.tracker.wait_host(true);
        if self.tracker.may_be_pending(true) {
            // A queued copy may still use the pages: they stay registered (queued
            // copies take only `'static` registrations, whose memory is never freed).
            return waited;
        }
        let _g = self.ctx.enter()?;
        // SAFETY: `data` was registered in `new` and is still borrowed; queued copies
        // that use it are complete (waited above, or known over after a failed wait).
        unsafe { result::mem_host_unregister(self.data.as_mut_ptr().cast()) }.and(waited)
    }

    /// The context the registration was made in.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Waits for every queued copy that uses the memory.
    pub fn wait(&self) -> Result<()> {
        self.tracker.wait_host(true)
    }
}

impl<T: Pod> Deref for HostRegistration<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.tracker.wait_for_deref(
            false,
            "registered memory access (waiting for queued copies)",
        );
        self.data
    }
}

impl<T: Pod> DerefMut for HostRegistration<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.tracker
            .wait_for_deref(true, "registered memory access (waiting for queued copies)");
        self.data
    }
}

impl<T: Pod> Drop for HostRegistration<'_, T> {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            deferred::record("HostRegistration drop (wait, cuMemHostUnregister)", e);
        }
    }
}

impl<T: Pod> fmt::Debug for HostRegistration<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostRegistration")
            .field("ptr", &self.data.as_ptr())
            .field("len", &self.data.len())
            .finish()
    }
}

impl<T: Pod> sealed::Sealed for HostRegistration<'static, T> {}

impl<T: Pod> PageLockedSlice<T> for HostRegistration<'static, T> {
    fn len(&self) -> usize {
        self.data.len()
    }
    fn host_access(&self) -> HostAccess<'_> {
        HostAccess {
            ptr: self.data.as_ptr().cast_mut().cast(),
            root: &self.tracker,
            region: None,
        }
    }
}

impl<T: Pod> PageLockedSliceMut<T> for HostRegistration<'static, T> {}
