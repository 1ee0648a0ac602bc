//! The exported entry points, with the driver's C ABI and symbol names, one file per
//! group of the driver API reference. Each one counts itself (for
//! `CUDA_SIM_FAULT`), turns its arguments into the simulator's values, and returns
//! the driver's code.

use std::ffi::c_void;
use std::sync::Arc;

use crate::context::{self, Context};
use crate::errors::{Res, INVALID_CONTEXT, INVALID_HANDLE, INVALID_VALUE};
use crate::state::{code, sim};
use crate::stream::Stream;

/// Defines exported entry points (in textual scope for the modules below): `fn name(args) { body }`, where the body is an
/// expression of type `Res<()>` that may use `unsafe` blocks (each with its own
/// `SAFETY` comment).
macro_rules! export {
    ($(
        $(#[doc = $doc:literal])+
        fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block
    )*) => {$(
        $(#[doc = $doc])+
        ///
        /// # Safety
        /// The CUDA driver API reference's contract for this entry point: every
        /// pointer argument is null or valid for what the reference says the call
        /// reads or writes through it.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> u32 {
            $crate::api::entry(|| $body)
        }
    )*};
}

mod context_api;
mod copy;
mod copy2d;
mod copy_batch;
mod device_api;
mod event_api;
mod graph;
mod memory_api;
mod module_api;
mod stream_api;

/// `CUstream` and the other handles, as the C API passes them.
pub type Handle = *mut c_void;

/// `CU_STREAM_LEGACY`.
pub const STREAM_LEGACY: usize = 0x1;
/// `CU_STREAM_PER_THREAD`.
pub const STREAM_PER_THREAD: usize = 0x2;

/// Runs one entry point's body.
pub fn entry(body: impl FnOnce() -> Res<()>) -> u32 {
    sim().count_call();
    code(body())
}

/// Writes `value` through the out-pointer `p`, or `CUDA_ERROR_INVALID_VALUE` for null.
///
/// # Safety
/// 1. `p` is null or valid for a write of `T`.
pub unsafe fn out<T>(p: *mut T, value: T) -> Res<()> {
    if p.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: condition 1, and `p` is not null.
    unsafe { p.write(value) };
    Ok(())
}

/// The context a handle names (a live one: destroyed contexts are not in the table).
pub fn context_of(h: Handle) -> Res<Arc<Context>> {
    sim().ready()?;
    if h.is_null() {
        return Err(INVALID_CONTEXT);
    }
    sim().contexts.get(h as usize).ok_or(INVALID_CONTEXT)
}

/// The stream a handle names: `NULL` and `CU_STREAM_LEGACY` are the legacy stream of
/// the calling thread's current context, `CU_STREAM_PER_THREAD` this thread's own
/// stream in it; any other value must be a live stream.
pub fn stream_of(h: Handle) -> Res<Arc<Stream>> {
    sim().ready()?;
    match h as usize {
        0 | STREAM_LEGACY => Ok(context::current_usable()?.legacy()),
        STREAM_PER_THREAD => Ok(context::current_usable()?.per_thread()),
        other => {
            let s = sim().streams.get(other).ok_or(INVALID_HANDLE)?;
            s.ctx.usable()?;
            Ok(s)
        }
    }
}
