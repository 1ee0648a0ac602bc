//! [`Tracker`]: what queued work still uses one piece of memory (see the notes of
//! [`super`]), waiting for it on the host, and [`queue`], which every queued operation
//! of this crate goes through.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::StreamState;
use crate::deferred;
use crate::error::Result;

/// Bits of [`Tracker::pending`].
const READS: u8 = 1;
const WRITES: u8 = 2;

/// How a queued operation uses a piece of memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// The operation reads it (a copy's source).
    Read,
    /// The operation writes it (a copy's destination, a memset).
    Write,
}

#[derive(Clone, Default)]
struct Pending {
    stream: Option<Arc<StreamState>>,
    /// The last ticket of any queued use (0: none).
    last_use: u64,
    /// The last ticket of a queued write (0: none).
    last_write: u64,
}

/// The queued work that still uses one piece of memory; see the module notes.
pub struct Tracker {
    /// `READS` / `WRITES` while a use of that kind may still be pending: lets host
    /// access skip the lock (one atomic load) when nothing is queued.
    pending: AtomicU8,
    state: Mutex<Pending>,
    /// cudarc memory (`crate::cudarc_bridge`): the one stream it may be used on, and
    /// cudarc's event to record after each operation queued there.
    #[cfg(feature = "cudarc")]
    binding: Option<crate::cudarc_binding::Binding>,
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker::new()
    }
}

impl Tracker {
    pub(crate) const fn new() -> Tracker {
        Tracker {
            pending: AtomicU8::new(0),
            state: Mutex::new(Pending {
                stream: None,
                last_use: 0,
                last_write: 0,
            }),
            #[cfg(feature = "cudarc")]
            binding: None,
        }
    }

    /// A tracker for cudarc memory taken for one stream: see
    /// [`crate::cudarc_binding`].
    #[cfg(feature = "cudarc")]
    pub(crate) fn bound(binding: crate::cudarc_binding::Binding) -> Tracker {
        Tracker {
            binding: Some(binding),
            ..Tracker::new()
        }
    }

    /// Whether an operation queued on `stream` may use this memory: always, except
    /// for cudarc memory taken for another stream (another per-thread stream's
    /// thread included).
    pub(crate) fn allows_stream(&self, stream: &StreamState) -> bool {
        #[cfg(feature = "cudarc")]
        if let Some(b) = &self.binding {
            return b.allows(stream.raw, stream.thread);
        }
        let _ = stream;
        true
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        // A panic while holding the lock leaves consistent state (plain stores).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new tracker that starts with this one's pending work (for a view that
    /// takes over part of this memory).
    pub(crate) fn snapshot(&self) -> Tracker {
        let st = self.lock().clone();
        Tracker {
            pending: AtomicU8::new(self.pending.load(Ordering::Acquire)),
            state: Mutex::new(st),
            // Views of pinned (host) memory only: no cudarc binding to carry.
            #[cfg(feature = "cudarc")]
            binding: None,
        }
    }

    /// Whether no queued use may still be pending, as far as synchronisations
    /// through this crate have seen (no driver call).
    pub(crate) fn is_idle(&self) -> bool {
        if self.pending.load(Ordering::Acquire) == 0 {
            return true;
        }
        let mut st = self.lock();
        let done = st
            .stream
            .as_ref()
            .is_none_or(|s| s.is_complete(st.last_use));
        if done {
            *st = Pending::default();
            self.pending.store(0, Ordering::Release);
        }
        done
    }

    /// Waits until the host may read (`write == false`) or write and free
    /// (`write == true`) this memory: until queued writes, or all queued uses, are
    /// complete. One atomic load when nothing is pending.
    pub(crate) fn wait_host(&self, write: bool) -> Result<()> {
        if !self.may_be_pending(write) {
            return Ok(());
        }
        let mut st = self.lock();
        wait_pending(&self.pending, &mut st, write)
    }

    /// [`Tracker::wait_host`] for an accessor that cannot return an error (`Deref`):
    /// a failed wait is recorded ([`crate::check_deferred_errors`]) and the access
    /// goes ahead when the failure ended the work (a sticky fault). When it did not,
    /// a queued copy may still use the memory and no reference to it may be handed
    /// out: this panics, naming `what` and the error.
    pub(crate) fn wait_for_deref(&self, write: bool, what: &'static str) {
        if let Err(e) = self.wait_host(write) {
            if self.may_be_pending(write) {
                panic!(
                    "{what}: a copy queued on this memory may still be running and cannot \
                     be waited for ({e}); was a capture of its stream begun after the copy \
                     was queued? Wait for it (e.g. synchronize the stream) before the capture"
                );
            }
            deferred::record(what, e);
        }
    }

    /// Whether a queued use that host access (`write`: exclusive) must wait for may
    /// still be pending: after a failed [`Tracker::wait_host`], whether the failure
    /// left that work running, for all the crate can tell (see the module notes).
    pub(crate) fn may_be_pending(&self, write: bool) -> bool {
        let mask = if write { READS | WRITES } else { WRITES };
        self.pending.load(Ordering::Acquire) & mask != 0
    }
}

/// [`Tracker::wait_host`] with the lock held.
fn wait_pending(flag: &AtomicU8, st: &mut Pending, write: bool) -> Result<()> {
    let Some(stream) = st.stream.clone() else {
        flag.store(0, Ordering::Release);
        return Ok(());
    };
    let needed = if write { st.last_use } else { st.last_write };
    let r = stream.wait_for(needed);
    // After an error too, the watermark says what is known to be over.
    if stream.is_complete(st.last_use) {
        *st = Pending::default();
        flag.store(0, Ordering::Release);
    } else if stream.is_complete(st.last_write) {
        st.last_write = 0;
        flag.store(READS, Ordering::Release);
    }
    r
}

/// One tracker locked for an operation about to be queued, with how the operation
/// uses its memory.
pub(crate) struct Use<'a> {
    flag: &'a AtomicU8,
    state: MutexGuard<'a, Pending>,
    access: Access,
    /// The memory's cudarc binding, run once the operation is queued.
    #[cfg(feature = "cudarc")]
    binding: Option<&'a crate::cudarc_binding::Binding>,
}

impl<'a> Use<'a> {
    /// Locks `tracker` for an operation that uses its memory as `access`.
    pub(crate) fn lock(tracker: &'a Tracker, access: Access) -> Use<'a> {
        Use {
            flag: &tracker.pending,
            state: tracker.lock(),
            access,
            #[cfg(feature = "cudarc")]
            binding: tracker.binding.as_ref(),
        }
    }

    /// Makes the memory ready for an operation queued on `stream`: work queued on
    /// another stream that the operation could race with is waited for on the host.
    fn prepare(&mut self, stream: &Arc<StreamState>) -> Result<()> {
        if self
            .state
            .stream
            .as_ref()
            .is_some_and(|s| !Arc::ptr_eq(s, stream))
        {
            // One tracker follows one stream: wait for every use on the old one.
            wait_pending(self.flag, &mut self.state, true)?;
        }
        Ok(())
    }

    fn record(&mut self, stream: &Arc<StreamState>, ticket: u64) {
        let st = &mut *self.state;
        if !st.stream.as_ref().is_some_and(|s| Arc::ptr_eq(s, stream)) {
            st.stream = Some(Arc::clone(stream));
        }
        st.last_use = st.last_use.max(ticket);
        let mut bits = READS;
        if self.access == Access::Write {
            st.last_write = st.last_write.max(ticket);
            bits |= WRITES;
        }
        self.flag.fetch_or(bits, Ordering::AcqRel);
    }
}

/// Queues one operation `op` on `stream` with `enqueue`, for memory whose trackers
/// are `uses` (already locked, in a fixed order: host before device): first waits
/// for work on other streams that would race with it, refuses a stream being
/// captured ([`StreamState::refuse_capture`]), then enqueues, then records the
/// ticket in every tracker. The stream's context must be current.
///
/// A failed `enqueue` is recorded too, as if it had queued everything: an operation
/// made of several driver calls (a batch queued copy by copy) may have queued some
/// before one failed, and those must be waited for before their memory is reused or
/// freed. For one that queued nothing it costs the next host access one wait.
///
/// cudarc memory (`crate::cudarc_bridge`) then has cudarc's own record made, right
/// after the operation is queued, whatever the caller does with its view next
/// (dropping it or `mem::forget`-ing it changes nothing). Should cudarc fail to
/// record it, the operation is waited for before the error is returned, so that no
/// use of the memory is left in flight that cudarc does not know of.
pub(crate) fn queue(
    stream: &Arc<StreamState>,
    op: &'static str,
    uses: &mut [Option<Use<'_>>],
    enqueue: impl FnOnce() -> Result<()>,
) -> Result<()> {
    for u in uses.iter_mut().flatten() {
        u.prepare(stream)?;
    }
    stream.refuse_capture(op)?;
    let queued = enqueue();
    let ticket = stream.issue();
    // Before any tracker holds the ticket, so that a wait on another thread finds
    // it covered.
    stream.record_end(ticket);
    for u in uses.iter_mut().flatten() {
        u.record(stream, ticket);
    }
    #[cfg(feature = "cudarc")]
    let recorded = after_queue(stream, uses);
    queued?;
    #[cfg(feature = "cudarc")]
    recorded?;
    Ok(())
}

/// Runs the cudarc bindings of `uses` once their operation is queued on `stream`;
/// see [`queue`].
#[cfg(feature = "cudarc")]
fn after_queue(stream: &StreamState, uses: &[Option<Use<'_>>]) -> Result<()> {
    let mut first_error = None;
    for b in uses.iter().flatten().filter_map(|u| u.binding) {
        // SAFETY: a tracker with a binding lives inside a `CudarcView` /
        // `CudarcViewMut` whose borrows of cudarc's memory and stream are those the
        // binding's guard held, and it is reached only through borrows of that view
        // (`device_access`), as here: they are still valid.
        if let Err(e) = unsafe { b.after_queue() } {
            first_error.get_or_insert(e);
        }
    }
    match first_error {
        None => Ok(()),
        Some(e) => {
            // cudarc's event does not cover the operation: wait for it instead. That
            // wait's own error is not returned (cudarc's is the one to report); should
            // it fail, the operation stays tracked as pending in our trackers.
            let _ = stream.synchronize();
            Err(e)
        }
    }
}
