//! [`HostRegistration`]: page-lock a caller's own buffer for as long as it is borrowed.

use std::fmt;
use std::ops::{Deref, DerefMut};

use bytemuck::Pod;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::result;

/// A caller-owned slice page-locked with `cuMemHostRegister` (portable) for the
/// lifetime of this guard, and unregistered on drop.
///
/// The guard holds the slice's unique borrow, so the memory cannot be freed, moved
/// or registered a second time while it is registered: the borrow checker rejects
/// it. Reach the data through the guard (it dereferences to `[T]`). Transfers from
/// or into a registered slice DMA straight from it (see `cuda-staging`).
///
/// Registration is expensive (milliseconds for tens of MiB): register long-lived
/// buffers once, not per transfer.
pub struct HostRegistration<'a, T: Pod> {
    data: &'a mut [T],
    ctx: Context,
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
        })
    }

    /// Unregisters now and reports the driver's answer, which `Drop` cannot.
    pub fn unregister(self) -> Result<&'a mut [T]> {
        let mut me = std::mem::ManuallyDrop::new(self);
        let r = me.release();
        // SAFETY: `me` is never used or dropped again; moving the two fields out
        // once is sound.
        let (data, ctx) = unsafe { (std::ptr::read(&me.data), std::ptr::read(&me.ctx)) };
        drop(ctx);
        r.map(|()| data)
    }

    fn release(&mut self) -> Result<()> {
        let _g = self.ctx.enter()?;
        // SAFETY: `data` was registered in `new` and is still borrowed.
        unsafe { result::mem_host_unregister(self.data.as_mut_ptr().cast()) }
    }

    /// The context the registration was made in.
    pub fn context(&self) -> &Context {
        &self.ctx
    }
}

impl<T: Pod> Deref for HostRegistration<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.data
    }
}

impl<T: Pod> DerefMut for HostRegistration<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.data
    }
}

impl<T: Pod> Drop for HostRegistration<'_, T> {
    fn drop(&mut self) {
        let _ = self.release();
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
