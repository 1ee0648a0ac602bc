//! What queued work still uses a piece of memory, and waiting for it.
//!
//! Every operation this crate queues on a [`Stream`](crate::Stream) gets a *ticket*
//! from that stream, numbered in queue order, after the driver has accepted it. The
//! stream keeps a *watermark*: every ticket up to it is known to be complete. A
//! synchronisation through this crate raises the watermark to the last ticket issued
//! before it began (`Stream::synchronize`, `Event::synchronize` / `query` for the
//! ticket the event was recorded after), so knowing that a ticket is done costs one
//! atomic load and no driver call.
//!
//! Each buffer (and each mutable pinned view) owns a [`Tracker`]: the stream and the
//! last tickets of queued operations that read it and that write it. Host access waits
//! for queued writes (shared access) or for every queued use (exclusive access, drop);
//! a queued operation on a *different* stream first waits on the host for the previous
//! stream's uses, so one tracker only ever follows one stream.
//!
//! The watermark moves only when the work is known to be over: after a successful
//! wait, or after a failed one that [`Context::settle_after_failed_wait`] shows to
//! have ended it. A wait that can establish neither (a stream being captured into a
//! graph cannot be waited for) leaves the tickets pending, and whoever needed them
//! says so: an error from fallible accessors, a panic from `Deref`, a leak from
//! `Drop`, never an early access. So that such a wait cannot arise from our own
//! queueing, nothing is queued on a stream being captured: streams this crate did
//! not create are asked first (`cuStreamIsCapturing`), and ours cannot be captured
//! (their handles are handed to no capture API of this workspace, and they join no
//! capture through events: [`crate::Event::record`] refuses a capturing stream).
//!
//! A per-thread stream (`CU_STREAM_PER_THREAD`) is a different stream on every
//! thread, so its [`StreamState`] is bound to the thread that wrapped it:
//! [`StreamState::check_thread`] decides, and every driver call that names the stream
//! is made on that thread only. So that a buffer moved to another thread can still
//! wait for its queued copies there (its host access, its `Drop`), an event is
//! recorded after every operation queued on such a stream, and a wait from another
//! thread waits on that event instead of naming the stream.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::thread::{self, ThreadId};

use cuda_sys::{CUevent, CUstream};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::wait::{self, Then, WaitPolicy};
use crate::{deferred, result};

mod per_thread;
mod tracker;

pub(crate) use per_thread::bound_thread;
use per_thread::check_thread;
pub(crate) use tracker::{queue, Access, Tracker, Use};

/// The state behind a [`crate::Stream`]: its handle, its context and its tickets.
pub(crate) struct StreamState {
    pub(crate) raw: CUstream,
    pub(crate) ctx: Context,
    /// Made by this crate (`Stream::new`): destroyed with it, and never captured.
    owned: bool,
    /// The last ticket issued (issued after the driver accepted the operation).
    queued: AtomicU64,
    /// Every ticket up to this one is complete.
    completed: AtomicU64,
    /// An event (not blocking-sync), made at first use, recorded at the stream's
    /// end and polled by a wait that sleeps between polls. On a per-thread stream,
    /// also recorded after every queued operation (see `thread`).
    ///
    /// Not blocking-sync, because each completion of a recorded blocking-sync
    /// event wakes the driver's event-handler thread: recorded after every
    /// operation, it cost 41-51 µs of that thread's CPU per frame in the candle
    /// example on the H200 (two operations a frame), against 0.1 µs without it.
    end: OnceLock<RawEvent>,
    /// A `CU_EVENT_BLOCKING_SYNC` event, made at the first [`WaitPolicy::Block`]
    /// wait, recorded and waited on to block in the driver until the stream's work
    /// is done; recorded for such waits only.
    blocking: OnceLock<RawEvent>,
    /// For `CU_STREAM_PER_THREAD`: the thread that wrapped it, whose stream the
    /// handle names there and the only one that may name it in a driver call
    /// ([`StreamState::check_thread`]). `None` for every other stream.
    thread: Option<ThreadId>,
    /// For a per-thread stream: the last ticket after which `end` was recorded
    /// (0: none), what a wait on another thread can wait for.
    end_recorded: AtomicU64,
    /// The cudarc stream this one wraps (`Stream::borrow_cudarc`), kept alive with it.
    #[cfg(feature = "cudarc")]
    pub(crate) cudarc: Option<std::sync::Arc<cudarc::driver::CudaStream>>,
}

/// An event handle owned by a [`StreamState`].
struct RawEvent(CUevent);

// SAFETY: an event handle may be used from any thread.
unsafe impl Send for RawEvent {}
// SAFETY: as above; recording it from two threads at once is allowed by the driver
// (each wait then waits for the later record, which covers its own).
unsafe impl Sync for RawEvent {}

// SAFETY: a CUstream may be used from any thread; the counters are atomics.
unsafe impl Send for StreamState {}
// SAFETY: as above.
unsafe impl Sync for StreamState {}

impl StreamState {
    /// The state of stream `raw` of `ctx`, `owned` when this crate created it. A
    /// per-thread stream is bound to the calling thread.
    pub(crate) fn new(raw: CUstream, ctx: Context, owned: bool) -> StreamState {
        StreamState {
            raw,
            ctx,
            owned,
            queued: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            end: OnceLock::new(),
            blocking: OnceLock::new(),
            thread: bound_thread(raw),
            end_recorded: AtomicU64::new(0),
            #[cfg(feature = "cudarc")]
            cudarc: None,
        }
    }

    /// A ticket for an operation the driver has just accepted on this stream.
    pub(crate) fn issue(&self) -> u64 {
        self.queued.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// The last ticket issued so far: a synchronisation that starts now covers it.
    pub(crate) fn latest(&self) -> u64 {
        self.queued.load(Ordering::Acquire)
    }

    /// Whether the operation with ticket `t` is known to be complete.
    pub(crate) fn is_complete(&self, t: u64) -> bool {
        self.completed.load(Ordering::Acquire) >= t
    }

    /// Every ticket up to `t` is complete.
    pub(crate) fn mark_complete(&self, t: u64) {
        self.completed.fetch_max(t, Ordering::AcqRel);
    }

    /// Waits for everything queued on the stream (`cuStreamSynchronize`).
    ///
    /// When that fails, it also waits for the whole context (`cuCtxSynchronize`)
    /// before returning the error, so that no queued copy is left running into or out
    /// of memory that is then handed back, reused or freed. After such an error the
    /// stream's work is over one way or the other (done, or ended by the failure), so
    /// the watermark moves up in both cases.
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.synchronize_with(WaitPolicy::default())
    }

    /// [`StreamState::synchronize`], waiting as `policy` says.
    ///
    /// On a per-thread stream, from another thread than its own (a buffer's host
    /// access or `Drop` there), it waits on the event recorded after the last
    /// operation queued ([`StreamState::record_end`]) instead, and what that covers
    /// counts as over.
    pub(crate) fn synchronize_with(&self, policy: WaitPolicy) -> Result<()> {
        let (upto, r) = if self.named_here() {
            (self.latest(), self.wait(policy))
        } else {
            self.wait_elsewhere(policy)
        };
        if r.as_ref()
            .map_or_else(|e| self.ctx.settle_after_failed_wait(e), |()| true)
        {
            self.mark_complete(upto);
        }
        r
    }

    /// Refuses, with [`Error::StreamCapturing`], to queue `op` on a stream being
    /// captured into a graph (see the module notes), and, with
    /// [`Error::WrongThread`], on a per-thread stream of another thread. Streams
    /// this crate created are never captured and cost nothing here; others cost one
    /// `cuStreamIsCapturing`. The context must be current (for the legacy default
    /// stream's handle).
    pub(crate) fn refuse_capture(&self, op: &'static str) -> Result<()> {
        self.check_thread(op)?;
        if self.owned {
            return Ok(());
        }
        // SAFETY: `raw` is alive while `self` is, and its context is current (the
        // caller's guard).
        if unsafe { result::stream_is_capturing(self.raw) }? {
            return Err(Error::StreamCapturing { op });
        }
        Ok(())
    }

    /// Waits for the stream's work as `policy` says: polling with `cuStreamQuery`
    /// for the policy's spin, then polling an event recorded at the stream's end
    /// with sleeps between (`cuEventQuery` costs the same however much work is
    /// queued, where `cuStreamQuery` grew with it); the driver's spinning
    /// `cuStreamSynchronize`; or blocking in the driver on a blocking-sync event
    /// recorded at the stream's end.
    ///
    /// The stream's context is current throughout: the driver resolves the legacy
    /// default stream's handles (`NULL`, `CU_STREAM_LEGACY`) against the calling
    /// thread's current context, so a wait in another context would ask another
    /// stream.
    fn wait(&self, policy: WaitPolicy) -> Result<()> {
        let _g = self.ctx.enter()?;
        // SAFETY: `raw` is alive while `self` is (destroyed in Drop only); its
        // context is current (above).
        let query = || unsafe { result::stream_query(self.raw) };
        match wait::poll(policy, query)? {
            Then::Done => Ok(()),
            Then::Sleep => {
                let event = self.record_event(&self.end, cuda_sys::CU_EVENT_DISABLE_TIMING)?;
                // SAFETY: the event lives as long as `self` (destroyed in Drop).
                wait::sleep_until(|| unsafe { result::event_query(event) })
            }
            // SAFETY: as above.
            Then::Spin => unsafe { result::stream_synchronize(self.raw) },
            Then::Block => {
                let event = self.record_event(
                    &self.blocking,
                    cuda_sys::CU_EVENT_BLOCKING_SYNC | cuda_sys::CU_EVENT_DISABLE_TIMING,
                )?;
                // SAFETY: as above; a blocking-sync event sleeps in the driver.
                unsafe { result::event_synchronize(event) }
            }
        }
    }

    /// The stream's end event: [`StreamState::record_event`] of `end`.
    fn end_event(&self) -> Result<CUevent> {
        self.record_event(&self.end, cuda_sys::CU_EVENT_DISABLE_TIMING)
    }

    /// The event in `cell` (made on first use, with `flags`), recorded at the end of
    /// everything queued so far. The stream's context must be current.
    fn record_event(&self, cell: &OnceLock<RawEvent>, flags: u32) -> Result<CUevent> {
        let event = match cell.get() {
            Some(e) => e.0,
            None => {
                let e = result::event_create(flags)?;
                if let Err(RawEvent(lost)) = cell.set(RawEvent(e)) {
                    // Another thread made one first: keep theirs.
                    // SAFETY: `lost` was created just above and is used nowhere.
                    if let Err(e) = unsafe { result::event_destroy(lost) } {
                        deferred::record("cuEventDestroy", e);
                    }
                }
                cell.get().map_or(e, |e| e.0)
            }
        };
        // SAFETY: the event lives as long as `self` (destroyed in Drop) and belongs
        // to the stream's context, which is current (the caller's); `raw` is alive.
        unsafe { result::event_record(event, self.raw) }?;
        Ok(event)
    }

    /// [`StreamState::synchronize_with`] for an operation whose host memory is
    /// borrowed for the call only (the `_sync` copies), which must not return while a
    /// copy queued by it may still use that memory. A failed wait that leaves the work
    /// unknown (a capture of the stream begun on another thread after the copy was
    /// queued: it cannot be waited for until the capture ends) is retried every
    /// [`RETRY_AFTER_FAILED_WAIT`] until a wait succeeds or ends the work; the first
    /// error is returned.
    pub(crate) fn synchronize_until_over(&self, policy: WaitPolicy) -> Result<()> {
        let upto = self.latest();
        let first = self.synchronize_with(policy);
        while !self.is_complete(upto) {
            std::thread::sleep(RETRY_AFTER_FAILED_WAIT);
            // Its error adds nothing to the first one's.
            let _ = self.synchronize_with(policy);
        }
        first
    }

    /// Waits until ticket `t` is complete. On a per-thread stream from another
    /// thread, a ticket the end event does not cover (its record failed, and so did
    /// the wait after it) cannot be waited for there: [`Error::WrongThread`].
    pub(crate) fn wait_for(&self, t: u64) -> Result<()> {
        if self.is_complete(t) {
            return Ok(());
        }
        self.synchronize()?;
        match self.thread {
            Some(own) if !self.is_complete(t) => check_thread(
                "waiting for work queued on a per-thread stream",
                own,
                thread::current().id(),
            ),
            _ => Ok(()),
        }
    }
}

impl Drop for StreamState {
    fn drop(&mut self) {
        for RawEvent(e) in [self.end.take(), self.blocking.take()]
            .into_iter()
            .flatten()
        {
            let _g = self.ctx.enter();
            // SAFETY: the event was made by `record_event` and is used by nothing
            // else now.
            if let Err(e) = unsafe { result::event_destroy(e) } {
                deferred::record("cuEventDestroy", e);
            }
        }
        if self.owned {
            let g = self.ctx.enter();
            // SAFETY: we created the stream; this is the last reference to it (every
            // buffer with queued work on it holds an `Arc` to this state).
            if let Err(e) = unsafe { result::stream_destroy(self.raw) } {
                deferred::record("cuStreamDestroy", e);
            }
            drop(g);
        }
    }
}

/// How long [`StreamState::synchronize_until_over`] sleeps before it waits again.
const RETRY_AFTER_FAILED_WAIT: std::time::Duration = std::time::Duration::from_millis(1);

#[cfg(test)]
mod tests;
