//! [`Event`]: a CUDA event, for ordering, waiting and timing.

use std::fmt;
use std::sync::Arc;

use cuda_sys::CUevent;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::stream::Stream;
use crate::tracking::StreamState;
use crate::wait::{self, Then, WaitPolicy};
use crate::{deferred, result};

/// A CUDA event. [`Event::new`] makes the cheap kind used for ordering and waiting
/// (`CU_EVENT_DISABLE_TIMING`); [`Event::with_timing`] one that can also time work
/// ([`Event::elapsed_ms`]). Neither is a blocking-sync event: the driver spins in
/// `cuEventSynchronize` on them ([`WaitPolicy::Spin`]); the other policies poll
/// `cuEventQuery`, with sleeps between once their spin is over.
///
/// Waiting on an event through this crate ([`Event::synchronize`], or
/// [`Event::query`] answering `true`) also tells every buffer with copies queued on
/// that stream before the event that those copies are done, so their host accessors
/// need no further wait.
///
/// ```no_run
/// use cuda_core::{Context, DeviceBuffer, Event, PinnedBuffer, Stream};
///
/// let ctx = Context::new(0)?;
/// let stream = Stream::new(&ctx)?;
/// let (mut start, mut end) = (Event::with_timing(&ctx)?, Event::with_timing(&ctx)?);
/// let host = PinnedBuffer::<u8>::alloc(64 << 20)?;
/// let mut dev = DeviceBuffer::<u8>::alloc(64 << 20)?;
/// start.record(&stream)?;
/// stream.memcpy_htod(&host, &mut dev)?;
/// end.record(&stream)?;
/// end.synchronize()?;
/// println!("64 MiB in {:.3} ms", start.elapsed_ms(&end)?);
/// # Ok::<(), cuda_core::Error>(())
/// ```
pub struct Event {
    raw: CUevent,
    ctx: Context,
    timing: bool,
    /// The stream and its last ticket when the event was last recorded.
    recorded: Option<(Arc<StreamState>, u64)>,
}

// SAFETY: event handles may be used from any thread; `recorded` changes only through
// `&mut self`.
unsafe impl Send for Event {}
// SAFETY: shared access only waits on or queries the handle.
unsafe impl Sync for Event {}

impl Event {
    /// Creates an event for ordering and waiting (no timing) in `ctx`.
    pub fn new(ctx: &Context) -> Result<Event> {
        Event::create(ctx, cuda_sys::CU_EVENT_DISABLE_TIMING, false)
    }

    /// Creates an event that also records a timestamp, for [`Event::elapsed_ms`].
    pub fn with_timing(ctx: &Context) -> Result<Event> {
        Event::create(ctx, cuda_sys::CU_EVENT_DEFAULT, true)
    }

    fn create(ctx: &Context, flags: u32, timing: bool) -> Result<Event> {
        let _g = ctx.enter()?;
        let raw = result::event_create(flags)?;
        Ok(Event {
            raw,
            ctx: ctx.clone(),
            timing,
            recorded: None,
        })
    }

    /// Records the event at the current end of `stream`, which must belong to the
    /// event's context ([`Error::ContextMismatch`] otherwise).
    ///
    /// A stream this crate did not create is refused while it is being captured into
    /// a graph ([`Error::StreamCapturing`]): an event recorded inside a capture marks
    /// no point of the stream's real work, and a stream of ours that waited for it
    /// would join the capture. A per-thread stream borrowed on another thread is
    /// refused ([`Error::WrongThread`]) before any driver call. Waiting on the event
    /// works from any thread.
    pub fn record(&mut self, stream: &Stream) -> Result<()> {
        stream.state().check_thread("Event::record")?;
        if !stream.context().same_as(&self.ctx) {
            return Err(Error::ContextMismatch {
                op: "Event::record",
                what: "the event",
            });
        }
        let state = stream.state();
        // Read before recording: everything issued so far is queued ahead of it.
        let ticket = state.latest();
        let _g = self.ctx.enter()?;
        state.refuse_capture("Event::record")?;
        // SAFETY: both handles are alive while borrowed, in the same context.
        unsafe { result::event_record(self.raw, stream.as_raw()) }?;
        self.recorded = Some((Arc::clone(state), ticket));
        Ok(())
    }

    /// Blocks until the work recorded before the event is done, waiting as
    /// [`WaitPolicy::default`] says (polling for [`crate::DEFAULT_SPIN`], then
    /// polling with short sleeps between). An event never recorded is done.
    ///
    /// When the wait fails, it waits for the whole context before returning the
    /// error, and the work recorded before the event counts as over when that shows
    /// it ended (done, or ended by a sticky fault): the same rule as a failed
    /// [`Stream::synchronize`], so that memory that work used may be reused or freed.
    pub fn synchronize(&self) -> Result<()> {
        self.synchronize_with(WaitPolicy::default())
    }

    /// [`Event::synchronize`], waiting as `policy` says.
    pub fn synchronize_with(&self, policy: WaitPolicy) -> Result<()> {
        let r = self.wait(policy);
        if r.as_ref()
            .map_or_else(|e| self.ctx.settle_after_failed_wait(e), |()| true)
        {
            self.completed();
        }
        r
    }

    /// Waits as `policy` says: the driver's spinning `cuEventSynchronize`
    /// ([`WaitPolicy::Spin`]), or polling with `cuEventQuery`, with sleeps between
    /// once the spin is over.
    fn wait(&self, policy: WaitPolicy) -> Result<()> {
        // SAFETY: `raw` is alive while `self` is.
        let query = || unsafe { result::event_query(self.raw) };
        match wait::poll(policy, query)? {
            Then::Done => Ok(()),
            // Not a blocking-sync event: `cuEventSynchronize` would spin, so a
            // blocking wait polls with sleeps between.
            Then::Sleep | Then::Block => wait::sleep_until(query),
            // SAFETY: as above.
            Then::Spin => unsafe { result::event_synchronize(self.raw) },
        }
    }

    /// Whether the work recorded before the event is done, without waiting
    /// (`cuEventQuery`).
    pub fn query(&self) -> Result<bool> {
        // SAFETY: `raw` is alive while `self` is.
        let done = unsafe { result::event_query(self.raw) }?;
        if done {
            self.completed();
        }
        Ok(done)
    }

    fn completed(&self) {
        if let Some((stream, ticket)) = &self.recorded {
            stream.mark_complete(*ticket);
        }
    }

    /// Milliseconds from this event to `end`, both created with
    /// [`Event::with_timing`], recorded, and complete ([`Error::InvalidArgument`] for
    /// an event without timing; the driver's `CUDA_ERROR_NOT_READY` while either is
    /// pending).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        if !self.timing || !end.timing {
            return Err(Error::InvalidArgument {
                op: "Event::elapsed_ms",
                reason: "both events must be created with Event::with_timing".into(),
            });
        }
        if !end.ctx.same_as(&self.ctx) {
            return Err(Error::ContextMismatch {
                op: "Event::elapsed_ms",
                what: "the end event",
            });
        }
        let _g = self.ctx.enter()?;
        // SAFETY: both are live timing events of the same context.
        unsafe { result::event_elapsed_time(self.raw, end.raw) }
    }

    /// Whether the event can time work.
    pub fn has_timing(&self) -> bool {
        self.timing
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
        // SAFETY: we created the event; nothing uses it after this (the driver keeps
        // a recorded event's pending work going after destroy).
        if let Err(e) = unsafe { result::event_destroy(self.raw) } {
            deferred::record("cuEventDestroy", e);
        }
        drop(g);
    }
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event")
            .field("raw", &self.raw)
            .field("timing", &self.timing)
            .finish()
    }
}

impl Stream {
    /// Makes work queued on this stream after this call wait (on the device) until
    /// `event` has completed (`cuStreamWaitEvent`). An event never recorded does
    /// not hold anything up.
    pub fn wait(&self, event: &Event) -> Result<()> {
        self.state().check_thread("Stream::wait")?;
        if !event.context().same_as(&self.state().ctx) {
            return Err(Error::ContextMismatch {
                op: "Stream::wait",
                what: "the event",
            });
        }
        let _g = self.state().ctx.enter()?;
        // SAFETY: both handles are alive while borrowed, in the same context.
        unsafe { result::stream_wait_event(self.as_raw(), event.as_raw()) }
    }
}
