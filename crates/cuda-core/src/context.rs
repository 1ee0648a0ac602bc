//! [`Context`]: a device's retained primary context.

use std::cell::RefCell;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use cuda_sys::{CUcontext, CUdevice};

use crate::error::{Error, Result};
use crate::result;

/// A CUDA context: the retained primary context of one device.
///
/// Cheap to clone (a reference count). Every stream and buffer allocated in a
/// context holds a clone, so the context outlives them whatever order things are
/// dropped in; the primary context is released when the last clone goes.
///
/// Operations of this workspace make their object's context current for the
/// duration of the call when it is not already (see [`Context::enter`]), so a
/// `Context`, and what lives in it, can be used from any thread.
#[derive(Clone)]
pub struct Context {
    inner: Arc<Inner>,
}

struct Inner {
    raw: CUcontext,
    device: CUdevice,
    ordinal: usize,
    /// `true`: we retained the primary context and release it on drop.
    retained: bool,
    /// The cudarc context this one wraps (`Context::borrow_cudarc`), kept alive
    /// with it.
    #[cfg(feature = "cudarc")]
    cudarc: Option<Arc<cudarc::driver::CudaContext>>,
}

// SAFETY: a CUcontext handle may be used from any thread (the driver API is
// thread-safe); `Inner` is immutable after construction.
unsafe impl Send for Inner {}
// SAFETY: as above; shared access only reads the handle.
unsafe impl Sync for Inner {}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.retained {
            // Forget any thread-local cache entry of ours so that it cannot outlive us.
            let _ = CURRENT.try_with(|c| {
                if let Ok(mut c) = c.try_borrow_mut() {
                    if c.as_ref().is_some_and(|w| w.raw == self.raw) {
                        *c = None;
                    }
                }
            });
            // SAFETY: balances the retain in `Context::new`; nothing else uses it.
            if let Err(e) = unsafe { result::primary_ctx_release(self.device) } {
                crate::deferred::record("cuDevicePrimaryCtxRelease", e);
            }
        }
    }
}

/// A weak per-thread memo of the last context made current by this crate, so that
/// [`Context::current`] is cheap on the common path.
struct Memo {
    raw: CUcontext,
    ctx: std::sync::Weak<Inner>,
}

thread_local! {
    static CURRENT: RefCell<Option<Memo>> = const { RefCell::new(None) };
}

fn remember(ctx: &Context) {
    let _ = CURRENT.try_with(|c| {
        if let Ok(mut c) = c.try_borrow_mut() {
            *c = Some(Memo {
                raw: ctx.inner.raw,
                ctx: Arc::downgrade(&ctx.inner),
            });
        }
    });
}

impl Context {
    /// Initialises the driver, retains device `ordinal`'s primary context and makes
    /// it current on the calling thread.
    ///
    /// Errors: [`Error::DriverNotFound`] without a driver, [`Error::InvalidDevice`]
    /// for an ordinal past the device count, or the driver's error.
    pub fn new(ordinal: usize) -> Result<Context> {
        result::init()?;
        let count = result::device_count()?;
        if ordinal >= count {
            return Err(Error::InvalidDevice { ordinal, count });
        }
        let device = result::device_get(ordinal)?;
        let raw = result::primary_ctx_retain(device)?;
        let ctx = Context::retained(raw, device, ordinal);
        ctx.bind_to_thread()?;
        Ok(ctx)
    }

    /// Number of CUDA devices; `Ok(0)` when the driver is present but sees none.
    pub fn device_count() -> Result<usize> {
        match result::init() {
            Ok(()) => result::device_count(),
            Err(e) if e.driver_code() == Some(cuda_sys::CUDA_ERROR_NO_DEVICE) => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// The driver's version as (major, minor), e.g. (13, 0).
    pub fn driver_version() -> Result<(i32, i32)> {
        result::driver_version()
    }

    /// The context current on the calling thread, as a `Context` that keeps it alive.
    ///
    /// Returns [`Error::NoContext`] when none is current. A primary context made
    /// current by other code is retained like one from [`Context::new`]; any other
    /// context (created by another library, which may destroy it) is refused with
    /// [`Error::InvalidArgument`]: wrap it with [`Context::from_raw_borrowed`].
    pub fn current() -> Result<Context> {
        let raw = match result::ctx_get_current() {
            Ok(raw) => raw,
            // Before cuInit nothing can be current.
            Err(e) if e.driver_code() == Some(cuda_sys::CUDA_ERROR_NOT_INITIALIZED) => {
                return Err(Error::NoContext)
            }
            Err(e) => return Err(e),
        };
        if raw.is_null() {
            return Err(Error::NoContext);
        }
        let memo = CURRENT
            .try_with(|c| {
                c.try_borrow().ok().and_then(|c| {
                    c.as_ref()
                        .filter(|m| m.raw == raw)
                        .and_then(|m| m.ctx.upgrade())
                })
            })
            .ok()
            .flatten();
        if let Some(inner) = memo {
            return Ok(Context { inner });
        }
        let device = result::ctx_get_device()?;
        let primary = result::primary_ctx_retain(device)?;
        let ordinal = device.max(0) as usize;
        if primary != raw {
            // SAFETY: balances the retain just above.
            unsafe { result::primary_ctx_release(device) }?;
            // A context some other library created: we cannot keep it alive, so safe
            // code must not hold on to it.
            return Err(Error::InvalidArgument {
                op: "Context::current",
                reason: "the current context is not a device's primary context; wrap it \
                         with the unsafe Context::from_raw_borrowed"
                    .into(),
            });
        }
        let ctx = Context::retained(raw, device, ordinal);
        remember(&ctx);
        Ok(ctx)
    }

    /// A `Context` owning one retain of `device`'s primary context `raw`, released
    /// when the last clone (and everything made in it) is gone. The caller hands
    /// over exactly one `cuDevicePrimaryCtxRetain` it just made for `device`.
    fn retained(raw: CUcontext, device: CUdevice, ordinal: usize) -> Context {
        Context {
            inner: Arc::new(Inner {
                raw,
                device,
                ordinal,
                retained: true,
                #[cfg(feature = "cudarc")]
                cudarc: None,
            }),
        }
    }

    /// A `Context` for cudarc's context `ctx`, which it keeps alive and releases
    /// nothing of: see `crate::cudarc_bridge`. No driver call.
    #[cfg(feature = "cudarc")]
    pub(crate) fn wrap_cudarc(ctx: &Arc<cudarc::driver::CudaContext>) -> Context {
        Context {
            inner: Arc::new(Inner {
                raw: ctx.cu_ctx().cast(),
                device: ctx.cu_device(),
                ordinal: ctx.ordinal(),
                retained: false,
                cudarc: Some(Arc::clone(ctx)),
            }),
        }
    }

    /// The cudarc context this one wraps, when it was made by
    /// `Context::borrow_cudarc`.
    #[cfg(feature = "cudarc")]
    pub(crate) fn cudarc(&self) -> Option<&Arc<cudarc::driver::CudaContext>> {
        self.inner.cudarc.as_ref()
    }

    /// Wraps a context created elsewhere (ONNX Runtime, TensorRT, the runtime API)
    /// without taking ownership: dropping the `Context` releases nothing.
    ///
    /// # Safety
    /// 1. `raw` is a live context and stays alive for as long as this `Context`, or
    ///    anything created from it, exists.
    pub unsafe fn from_raw_borrowed(raw: CUcontext) -> Result<Context> {
        // SAFETY: condition 1 makes `raw` live; popped just below.
        unsafe { result::ctx_push_current(raw) }?;
        let device = result::ctx_get_device();
        let popped = result::ctx_pop_current();
        let device = device?;
        popped?;
        Ok(Context {
            inner: Arc::new(Inner {
                raw,
                device,
                ordinal: device.max(0) as usize,
                retained: false,
                #[cfg(feature = "cudarc")]
                cudarc: None,
            }),
        })
    }

    /// Makes this context current on the calling thread (`cuCtxSetCurrent`); it stays
    /// current until something else is bound.
    pub fn bind_to_thread(&self) -> Result<()> {
        // SAFETY: `raw` is alive while `self` is.
        unsafe { result::ctx_set_current(self.inner.raw) }?;
        remember(self);
        Ok(())
    }

    /// Makes this context current until the returned guard drops, then restores the
    /// thread's previous context. Costs one `cuCtxGetCurrent` when it is already
    /// current.
    pub fn enter(&self) -> Result<ContextGuard<'_>> {
        let cur = result::ctx_get_current()?;
        if cur == self.inner.raw {
            return Ok(ContextGuard {
                pushed: false,
                _ctx: self,
                _not_send: PhantomData,
            });
        }
        // SAFETY: `raw` is alive while the guard borrows `self`; the guard pops it on
        // this thread (it is !Send).
        unsafe { result::ctx_push_current(self.inner.raw) }?;
        Ok(ContextGuard {
            pushed: true,
            _ctx: self,
            _not_send: PhantomData,
        })
    }

    /// Blocks until all work in this context is done.
    pub fn synchronize(&self) -> Result<()> {
        let _g = self.enter()?;
        result::ctx_synchronize()
    }

    /// After a wait that failed with `failed`: whether the work it waited for is
    /// known to be over, so that the memory that work used may be reused or freed.
    /// It is when the error poisons the context (a sticky fault: nothing of it runs
    /// any more), or else once a wait for the whole context (`cuCtxSynchronize`)
    /// succeeds or fails with a sticky fault. Any other outcome leaves it unknown: a
    /// stream being captured into a graph, for one, cannot be waited for at all, and
    /// its copies queued before the capture may still be running. The rule of both
    /// `Stream::synchronize` and `Event::synchronize`; the context wait's own error is
    /// not returned (the failed wait's is the one to report).
    pub(crate) fn settle_after_failed_wait(&self, failed: &crate::Error) -> bool {
        ends_work(failed) || self.synchronize().map_or_else(|e| ends_work(&e), |()| true)
    }

    /// The device's name, e.g. "NVIDIA H200".
    pub fn name(&self) -> Result<String> {
        result::device_name(self.inner.device)
    }

    /// The device's total memory in bytes.
    pub fn total_memory(&self) -> Result<usize> {
        result::device_total_mem(self.inner.device)
    }

    /// The device ordinal this context belongs to.
    pub fn ordinal(&self) -> usize {
        self.inner.ordinal
    }

    /// The raw `CUdevice`.
    pub fn device(&self) -> CUdevice {
        self.inner.device
    }

    /// The raw `CUcontext`, for handing to other CUDA libraries. It stays valid while
    /// this `Context` (or a clone) lives.
    pub fn as_raw(&self) -> CUcontext {
        self.inner.raw
    }

    /// Whether two handles name the same driver context.
    pub fn same_as(&self, other: &Context) -> bool {
        self.inner.raw == other.inner.raw
    }
}

impl PartialEq for Context {
    fn eq(&self, other: &Self) -> bool {
        self.same_as(other)
    }
}

impl Eq for Context {}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("ordinal", &self.inner.ordinal)
            .field("raw", &self.inner.raw)
            .finish()
    }
}

/// Keeps a context current for a scope; see [`Context::enter`].
#[must_use = "the context is current only while the guard lives"]
pub struct ContextGuard<'a> {
    pushed: bool,
    _ctx: &'a Context,
    /// Not `Send`: it must pop on the thread that pushed.
    _not_send: PhantomData<*const ()>,
}

impl Drop for ContextGuard<'_> {
    fn drop(&mut self) {
        if self.pushed {
            if let Err(e) = result::ctx_pop_current() {
                crate::deferred::record("cuCtxPopCurrent", e);
            }
        }
    }
}

impl fmt::Debug for ContextGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContextGuard")
            .field("pushed", &self.pushed)
            .finish()
    }
}

/// Whether a failed wait's error means that nothing of the context runs any more: a
/// sticky fault (see [`crate::Error::is_sticky`]), or a driver shutting down
/// (`CUDA_ERROR_DEINITIALIZED`, at process exit).
fn ends_work(e: &crate::Error) -> bool {
    e.is_sticky()
        || matches!(e, crate::Error::Driver(d) if d.code() == cuda_sys::CUDA_ERROR_DEINITIALIZED)
}
