//! [`Event`]: a timing-free CUDA event, for ordering and waiting.

use std::fmt;

use cuda_sys::CUevent;

use crate::context::Context;
use crate::error::Result;
use crate::result;
use crate::stream::Stream;

/// A CUDA event created with `CU_EVENT_DISABLE_TIMING` (the cheap kind used for
/// synchronisation).
pub struct Event {
    raw: CUevent,
    ctx: Context,
}

// SAFETY: event handles may be used from any thread.
unsafe impl Send for Event {}
// SAFETY: as above.
unsafe impl Sync for Event {}

impl Event {
    /// Creates an event in `ctx`.
    pub fn new(ctx: &Context) -> Result<Event> {
        let _g = ctx.enter()?;
        let raw = result::event_create(cuda_sys::CU_EVENT_DISABLE_TIMING)?;
        Ok(Event {
            raw,
            ctx: ctx.clone(),
        })
    }

    /// Records the event at the current end of `stream`, which must belong to the
    /// event's context.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        if !stream.context().same_as(&self.ctx) {
            return Err(crate::Error::ContextMismatch {
                op: "Event::record",
                what: "the event",
            });
        }
        // SAFETY: both handles are alive while borrowed.
        unsafe { result::event_record(self.raw, stream.as_raw()) }
    }

    /// Blocks until the work recorded before the event is done.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: `raw` is alive while `self` is.
        unsafe { result::event_synchronize(self.raw) }
    }

    /// The context the event belongs to.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The raw `CUevent`.
    pub fn as_raw(&self) -> CUevent {
        self.raw
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let g = self.ctx.enter();
        // SAFETY: we created the event; nothing uses it after this.
        let _ = unsafe { result::event_destroy(self.raw) };
        drop(g);
    }
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event").field("raw", &self.raw).finish()
    }
}
