//! What the record of queued work ([`Tracker`](crate::tracking::Tracker)) keeps for
//! cudarc memory viewed through [`crate::cudarc_bridge`]: the one stream it may be
//! used on, and what cudarc's access guard would do once an operation using it is
//! queued there (record cudarc's read or write event on that stream).
//!
//! Its own file so that `tracking` (which runs it after every queued operation) and
//! `cudarc_bridge` (which makes it) both use it without importing each other.

use std::ptr::NonNull;
use std::thread::ThreadId;

use cuda_sys::CUstream;
use cudarc::driver::{CudaEvent, CudaStream, SyncOnDrop};

use crate::error::{DriverError, Error, Result};

/// The stream cudarc memory was taken for, and cudarc's record of its use.
pub(crate) struct Binding {
    /// The `CUstream` (its address) the memory's device pointer was taken for.
    stream: usize,
    /// For a per-thread stream, the thread it is bound to: the handle names another
    /// stream on every other thread, where cudarc's waits were not made.
    thread: Option<ThreadId>,
    /// What cudarc's guard would have done when dropped.
    after: After,
}

/// The action of a disarmed `SyncOnDrop`, with its references turned into pointers
/// so that a [`Tracker`](crate::tracking::Tracker) (which has no lifetime) can hold
/// them; see [`Binding::after_queue`] for when they may be used.
enum After {
    /// cudarc keeps no event for this memory (event tracking off, or allocated
    /// before the context used more than one stream): nothing to record.
    Nothing,
    /// `SyncOnDrop::Record`: record `event` on `stream`.
    Record {
        event: NonNull<CudaEvent>,
        stream: NonNull<CudaStream>,
    },
    /// `SyncOnDrop::Sync`: synchronise `stream`.
    Synchronize { stream: NonNull<CudaStream> },
}

// SAFETY: the pointers stand for shared references to a `CudaEvent` and a
// `CudaStream`, both `Sync` (cudarc implements `Send` and `Sync` for them), so they
// may be sent to and shared with other threads as the references could.
unsafe impl Send for Binding {}
// SAFETY: as above.
unsafe impl Sync for Binding {}

impl Binding {
    /// Memory taken for `stream` (`cu_stream` is its handle, `thread` the thread a
    /// per-thread stream is bound to), with `guard`, the guard
    /// cudarc's `device_ptr` / `device_ptr_mut` returned for it, disarmed: what its
    /// `Drop` would have done is done by [`Binding::after_queue`] instead, after each
    /// operation queued on the memory, and nothing when the guard drops.
    pub(crate) fn new(
        cu_stream: CUstream,
        thread: Option<ThreadId>,
        mut guard: SyncOnDrop<'_>,
    ) -> Binding {
        let after = match &mut guard {
            SyncOnDrop::Record(target) => match target.take() {
                Some((event, stream)) => After::Record {
                    event: NonNull::from(event),
                    stream: NonNull::from(stream),
                },
                None => After::Nothing,
            },
            SyncOnDrop::Sync(target) => match target.take() {
                Some(stream) => After::Synchronize {
                    stream: NonNull::from(stream),
                },
                None => After::Nothing,
            },
        };
        // Emptied above: dropping it does nothing.
        drop(guard);
        Binding {
            stream: cu_stream as usize,
            thread,
            after,
        }
    }

    /// Whether an operation queued on `stream` (bound to `thread`, for a per-thread
    /// stream) may use the memory.
    pub(crate) fn allows(&self, stream: CUstream, thread: Option<ThreadId>) -> bool {
        self.stream == stream as usize && self.thread == thread
    }

    /// What cudarc's `SyncOnDrop::drop` does (cudarc 0.19), run right after an
    /// operation using the memory was queued on its stream: record the memory's read
    /// or write event there, when its context tracks events for several streams, so
    /// that cudarc's later uses of the memory on any stream, and its `Drop` (which
    /// frees the memory on its own stream), wait for the operation. Returns the error
    /// that `Drop` would have stored in the context (`CudaContext::check_err`); the
    /// caller then waits for the stream, so that nothing queued is left unordered.
    ///
    /// # Safety
    /// 1. The references the guard given to [`Binding::new`] held are still valid:
    ///    the borrow of cudarc's memory and stream they came from has not ended.
    pub(crate) unsafe fn after_queue(&self) -> Result<()> {
        match self.after {
            After::Nothing => Ok(()),
            After::Record { event, stream } => {
                // SAFETY: condition 1: both point to objects borrowed for as long as
                // the guard was.
                let (event, stream) = unsafe { (event.as_ref(), stream.as_ref()) };
                if stream.context().is_managing_stream_synchronization() {
                    event.record(stream).map_err(from_cudarc)
                } else {
                    Ok(())
                }
            }
            After::Synchronize { stream } => {
                // SAFETY: as above.
                let stream = unsafe { stream.as_ref() };
                stream.synchronize().map_err(from_cudarc)
            }
        }
    }
}

/// cudarc's driver error as ours: the same code, named and described by our driver
/// layer.
pub(crate) fn from_cudarc(e: cudarc::driver::DriverError) -> Error {
    Error::Driver(DriverError::new(e.0 as cuda_sys::CuResult))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_taken_for_a_per_thread_stream_is_for_that_thread_s_only() {
        let per_thread = cuda_sys::CU_STREAM_PER_THREAD;
        let here = Some(std::thread::current().id());
        let other = Some(
            std::thread::spawn(|| std::thread::current().id())
                .join()
                .unwrap(),
        );
        let b = Binding::new(per_thread, here, SyncOnDrop::Sync(None));
        assert!(b.allows(per_thread, here));
        assert!(
            !b.allows(per_thread, other),
            "the same handle, another thread's stream"
        );
        assert!(!b.allows(std::ptr::null_mut(), None));
        let legacy = Binding::new(std::ptr::null_mut(), None, SyncOnDrop::Sync(None));
        assert!(legacy.allows(std::ptr::null_mut(), None));
        assert!(!legacy.allows(per_thread, here));
    }
}
