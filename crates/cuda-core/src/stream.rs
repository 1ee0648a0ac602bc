//! [`Stream`]: a non-blocking CUDA stream.

use std::fmt;

use cuda_sys::CUstream;

use crate::context::Context;
use crate::error::Result;
use crate::result;

/// A CUDA stream created with `CU_STREAM_NON_BLOCKING`: it does not synchronise with
/// the legacy default stream.
///
/// The stream keeps its [`Context`] alive. `Stream` is `Send` and `Sync`: the driver
/// allows enqueueing on one stream from several threads (their order is then up to
/// the caller).
pub struct Stream {
    raw: CUstream,
    ctx: Context,
    owned: bool,
}

// SAFETY: a CUstream may be used from any thread; the struct is immutable.
unsafe impl Send for Stream {}
// SAFETY: as above.
unsafe impl Sync for Stream {}

impl Stream {
    /// Creates a non-blocking stream in `ctx`.
    pub fn new(ctx: &Context) -> Result<Stream> {
        let _g = ctx.enter()?;
        let raw = result::stream_create(cuda_sys::CU_STREAM_NON_BLOCKING)?;
        Ok(Stream {
            raw,
            ctx: ctx.clone(),
            owned: true,
        })
    }

    /// Wraps a stream created elsewhere without taking ownership: dropping the
    /// `Stream` destroys nothing.
    ///
    /// # Safety
    /// 1. `raw` is a live stream of `ctx` (or null, the legacy default stream) and
    ///    stays alive as long as the returned `Stream`.
    pub unsafe fn from_raw_borrowed(ctx: &Context, raw: CUstream) -> Stream {
        Stream {
            raw,
            ctx: ctx.clone(),
            owned: false,
        }
    }

    /// Blocks until all work queued on this stream is done.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: `raw` is alive while `self` is.
        unsafe { result::stream_synchronize(self.raw) }
    }

    /// The context this stream belongs to.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The raw `CUstream`, for handing to other CUDA libraries. Valid while `self` is.
    pub fn as_raw(&self) -> CUstream {
        self.raw
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.owned {
            let g = self.ctx.enter();
            // SAFETY: we created the stream and nothing uses it after this.
            let _ = unsafe { result::stream_destroy(self.raw) };
            drop(g);
        }
    }
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("raw", &self.raw)
            .field("owned", &self.owned)
            .finish()
    }
}
