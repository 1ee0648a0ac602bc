//! cudarc 0.19 beside our own layer, for the `cudarc-*` columns of `transfers`: its
//! documented way, on the same primary context. The only `unsafe` in `benches` is
//! here, where cudarc itself demands it.

use std::ffi::c_void;
use std::sync::Arc;

use crate::{fill_pattern, Gpu};

/// cudarc 0.19's side of the GPU, its documented way: `CudaContext::new(ordinal)`
/// (the same primary context as [`Gpu`]) and `ctx.new_stream()` (non-blocking).
#[derive(Debug)]
pub struct CudarcGpu {
    /// cudarc's context.
    pub ctx: Arc<cudarc::driver::CudaContext>,
    /// cudarc's non-blocking stream.
    pub stream: Arc<cudarc::driver::CudaStream>,
    /// Ours, borrowed from cudarc's stream (`Stream::borrow_cudarc`): the stream of
    /// the `cudarc+copy-in` / `cudarc+resident` columns.
    pub bridge: cuda_core::Stream,
}

/// cudarc's buffers for one size.
#[derive(Debug)]
pub struct CudarcBuffers {
    /// `stream.alloc_zeros::<u8>(bytes)`, then filled with a pattern.
    pub device: cudarc::driver::CudaSlice<u8>,
    /// `ctx.alloc_pinned::<u8>(bytes)` (cudarc allocates it write-combined), filled
    /// with a pattern.
    pub pinned: cudarc::driver::PinnedHostSlice<u8>,
}

impl CudarcGpu {
    /// Opens cudarc on the device `ours` uses, and checks that it shares our primary
    /// context (so our context stays the current one whichever library binds last).
    ///
    /// Call only after [`Gpu::open`] succeeded: cudarc panics when it cannot load
    /// the driver library, so this first checks that cudarc finds one.
    pub fn open(ours: &Gpu) -> Result<CudarcGpu, String> {
        // SAFETY: `is_culib_present` only tries to open the driver library by its
        // usual names (running its initialisers, which our own loader already did)
        // and drops it again; it touches no state of ours.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err("cudarc cannot find the CUDA driver library by its names".into());
        }
        let ctx = cudarc::driver::CudaContext::new(ours.ctx.ordinal())
            .map_err(|e| format!("CudaContext::new: {e}"))?;
        if !std::ptr::eq(
            ctx.cu_ctx().cast::<c_void>(),
            ours.ctx.as_raw().cast::<c_void>(),
        ) {
            return Err("cudarc's context is not the device's primary context".into());
        }
        let stream = ctx
            .new_stream()
            .map_err(|e| format!("CudaContext::new_stream: {e}"))?;
        // cudarc binds its context on every call; it is the same one, but bind ours
        // again so that our calls find it current (`Context::enter` then pushes
        // nothing).
        ours.ctx.bind_to_thread().map_err(|e| e.to_string())?;
        let bridge = cuda_core::Stream::borrow_cudarc(&stream).expect("borrow cudarc stream");
        Ok(CudarcGpu {
            ctx,
            stream,
            bridge,
        })
    }

    /// Allocates cudarc's device slice and pinned host slice of `bytes` bytes, both
    /// filled with the pattern of `seed`.
    pub fn buffers(&self, bytes: usize, seed: u8) -> Result<CudarcBuffers, String> {
        let mut device = self
            .stream
            .alloc_zeros::<u8>(bytes)
            .map_err(|e| format!("alloc_zeros({bytes}): {e}"))?;
        // SAFETY: `alloc_pinned` is unsafe only because the memory is left
        // uninitialised; it is fully written with the pattern just below, before
        // anything reads it.
        let mut pinned = unsafe { self.ctx.alloc_pinned::<u8>(bytes) }
            .map_err(|e| format!("alloc_pinned({bytes}): {e}"))?;
        fill_pattern(
            pinned
                .as_mut_slice()
                .map_err(|e| format!("PinnedHostSlice::as_mut_slice: {e}"))?,
            seed,
        );
        self.stream
            .memcpy_htod(&pinned, &mut device)
            .and_then(|()| self.stream.synchronize())
            .map_err(|e| format!("initial memcpy_htod: {e}"))?;
        Ok(CudarcBuffers { device, pinned })
    }
}
