//! Queueing an operation on a stream: the sticky-error check, capture (record a node
//! instead), the legacy stream's implicit synchronisation with blocking streams, and
//! the race checks' record of the memory it will use.

use std::sync::Arc;

use crate::capture::{link_of, refuse_legacy_use};
use crate::errors::Res;
use crate::machine::machine;
use crate::ops::Work;
use crate::stream::{Stream, StreamKind};

/// Where an operation went.
pub enum Queued {
    /// Queued on the stream at this place.
    At(Arc<Stream>, u64),
    /// Recorded in the stream's capture.
    Captured,
}

impl Queued {
    /// Waits until the operation has completed (at once for a captured one), as a
    /// synchronous call of the driver waits: spinning unless the context is
    /// blocking-sync ([`Stream::host_wait`]); then returns the device's sticky error
    /// if a fault came meanwhile.
    pub fn wait(&self) -> Res<()> {
        if let Queued::At(s, seq) = self {
            s.host_wait(*seq, s.ctx.blocking_sync());
            s.ctx.dev.sticky()?;
        }
        Ok(())
    }
}

/// Queues `work` on `stream`, after the operations in `deps` (besides its own
/// stream's and the legacy stream's implicit ones).
pub fn submit(
    stream: &Arc<Stream>,
    work: Work,
    call: &'static str,
    deps: Vec<(Arc<Stream>, u64)>,
) -> Res<Queued> {
    submit_placed(stream, work, call, deps, |_| {})
}

/// [`submit`], where `placed` learns the operation's place in the stream before the
/// operation can start (an event record notes it there); not called when the
/// operation is recorded in a capture instead.
pub fn submit_placed(
    stream: &Arc<Stream>,
    work: Work,
    call: &'static str,
    mut deps: Vec<(Arc<Stream>, u64)>,
    placed: impl FnOnce(u64),
) -> Res<Queued> {
    stream.ctx.usable()?;
    if let Some(link) = link_of(stream) {
        link.cap.add(stream, work, call)?;
        return Ok(Queued::Captured);
    }
    let legacy = stream.kind == StreamKind::Legacy;
    if legacy {
        refuse_legacy_use(&stream.ctx)?;
    }
    let m = machine();
    let _order = (legacy || !stream.non_blocking).then(|| stream.ctx.enqueue_lock());
    if legacy {
        for b in stream.ctx.blocking_streams() {
            let last = b.last();
            if b.completed() < last {
                deps.push((b, last));
            }
        }
    } else if !stream.non_blocking {
        let l = stream.ctx.legacy();
        let last = l.last();
        if l.completed() < last {
            deps.push((l, last));
        }
    }
    let uses = work.uses();
    let inflight = (!uses.host.is_empty() || !uses.device.is_empty()).then(|| {
        let what = format!("{call} on {} (a {})", stream.label(), work.kind());
        // SAFETY: the host areas are page-locked memory of the program's (from the
        // memory tables), which cannot be freed or unregistered while the entry exists
        // (`Inflight::assert_host_unused`); the entry ends when the operation has run.
        unsafe { m.inflight.register(what, uses, m.cfg.poison) }
    });
    let seq = stream.push(deps, work, call, inflight, placed);
    Ok(Queued::At(Arc::clone(stream), seq))
}
