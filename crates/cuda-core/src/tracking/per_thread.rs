//! Per-thread streams (`CU_STREAM_PER_THREAD`): the one handle names a different
//! stream on every thread, so a [`StreamState`] wrapping it is bound to the thread
//! that wrapped it (see the notes of [`super`]). Here: which thread that is, the
//! check every operation naming the stream makes first, and the waits from other
//! threads, which go through the event recorded after each queued operation.

use std::sync::atomic::Ordering;
use std::thread::{self, ThreadId};

use cuda_sys::CUstream;

use super::{RawEvent, StreamState};
use crate::error::{Error, Result};
use crate::result;
use crate::wait::{self, Then, WaitPolicy};

impl StreamState {
    /// Whether `op` may name this stream in a driver call on the calling thread:
    /// always, except for a per-thread stream on another thread than its own
    /// ([`Error::WrongThread`]). The one place this is decided. No driver call.
    ///
    /// Every operation that names the stream asks first, before any driver call:
    /// the memory checks every operation of this workspace starts with
    /// (`Stream::check_memory`), [`crate::Stream::queue`], the stream's own
    /// `synchronize`, `query` and `wait`, [`crate::Event::record`], the cudarc
    /// bridge's views, and [`StreamState::refuse_capture`], which every queued
    /// operation on a borrowed stream passes. Waits for queued work made on another
    /// thread (a buffer's host access or `Drop`) do not name the stream: they wait
    /// on the event recorded after it ([`StreamState::synchronize_with`]).
    pub(crate) fn check_thread(&self, op: &'static str) -> Result<()> {
        match self.thread {
            None => Ok(()),
            Some(own) => check_thread(op, own, thread::current().id()),
        }
    }

    /// The thread a per-thread stream is bound to; `None` for every other stream.
    #[cfg(feature = "cudarc")]
    pub(crate) fn thread(&self) -> Option<ThreadId> {
        self.thread
    }

    /// Whether a driver call on the calling thread may name this stream.
    pub(super) fn named_here(&self) -> bool {
        self.thread.is_none_or(|own| own == thread::current().id())
    }

    /// [`StreamState::wait`] on another thread than a per-thread stream's own: waits
    /// on the event recorded after the stream's operations, without naming the
    /// stream. Returns the last ticket the event covers with the wait's result.
    pub(super) fn wait_elsewhere(&self, policy: WaitPolicy) -> (u64, Result<()>) {
        let covered = self.end_recorded.load(Ordering::Acquire);
        let Some(RawEvent(event)) = self.end.get() else {
            // Never recorded: nothing was queued through this crate.
            return (covered, Ok(()));
        };
        let event = *event;
        let _g = match self.ctx.enter() {
            Ok(g) => g,
            Err(e) => return (covered, Err(e)),
        };
        // SAFETY: the event lives as long as `self` (destroyed in Drop); querying
        // and waiting on an event is allowed from any thread, also while its own
        // thread records it again (a later record covers this one's work too).
        let query = || unsafe { result::event_query(event) };
        let r = match wait::poll(policy, query) {
            Err(e) => Err(e),
            Ok(Then::Done) => Ok(()),
            // Not a blocking-sync event (see `StreamState::end`): `cuEventSynchronize`
            // would spin, so a blocking wait polls with sleeps between.
            Ok(Then::Sleep | Then::Block) => wait::sleep_until(query),
            // SAFETY: as above.
            Ok(Then::Spin) => unsafe { result::event_synchronize(event) },
        };
        (covered, r)
    }

    /// On a per-thread stream, right after operation `ticket` was queued: records the
    /// stream's end event, so that a wait on another thread can wait for it there
    /// ([`StreamState::wait_elsewhere`]). Should that fail, waits for the stream
    /// here instead, so that no queued work is left that another thread cannot wait
    /// for (its error is not returned: the operation itself was queued). Other
    /// streams: nothing. The stream's own thread, its context current.
    pub(super) fn record_end(&self, ticket: u64) {
        if self.thread.is_none() {
            return;
        }
        match self.end_event() {
            Ok(_) => {
                self.end_recorded.fetch_max(ticket, Ordering::AcqRel);
            }
            Err(_) => {
                let _ = self.synchronize();
            }
        }
    }
}

/// The thread a stream handle is bound to: the calling one for
/// `CU_STREAM_PER_THREAD`, which names that thread's own stream; none for the others.
pub(crate) fn bound_thread(raw: CUstream) -> Option<ThreadId> {
    (raw == cuda_sys::CU_STREAM_PER_THREAD).then(|| thread::current().id())
}

/// [`StreamState::check_thread`]'s rule: `op` on a stream bound to thread `own`, from
/// thread `caller`.
pub(super) fn check_thread(op: &'static str, own: ThreadId, caller: ThreadId) -> Result<()> {
    if own == caller {
        Ok(())
    } else {
        Err(Error::WrongThread {
            op,
            stream_thread: own,
            caller,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_per_thread_handle_is_bound_to_the_thread_that_wraps_it() {
        let here = thread::current().id();
        assert_eq!(bound_thread(cuda_sys::CU_STREAM_PER_THREAD), Some(here));
        assert_eq!(bound_thread(std::ptr::null_mut()), None);
        assert_eq!(bound_thread(cuda_sys::CU_STREAM_LEGACY), None);
        // On another thread, the same handle is bound to that thread.
        let there = thread::spawn(|| bound_thread(cuda_sys::CU_STREAM_PER_THREAD))
            .join()
            .unwrap();
        assert!(there.is_some_and(|t| t != here));
    }

    #[test]
    fn a_bound_stream_is_refused_on_another_thread_naming_the_op_and_both_threads() {
        let own = thread::current().id();
        check_thread("memcpy_htod", own, own).unwrap();
        let other = thread::spawn(|| thread::current().id()).join().unwrap();
        let e = check_thread("memcpy_htod", own, other).unwrap_err();
        assert_eq!(
            e,
            Error::WrongThread {
                op: "memcpy_htod",
                stream_thread: own,
                caller: other,
            }
        );
        let shown = e.to_string();
        assert!(shown.starts_with("memcpy_htod: "), "{shown}");
        assert!(shown.contains(&format!("{own:?}")), "{shown}");
        assert!(shown.contains(&format!("{other:?}")), "{shown}");
        assert!(shown.contains("CU_STREAM_PER_THREAD"), "{shown}");
    }
}
