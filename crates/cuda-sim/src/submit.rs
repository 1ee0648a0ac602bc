//! Queueing an operation on a stream: the sticky-error check, capture (record a node
//! instead), the legacy stream's implicit synchronisation with blocking streams, and
//! the race checks' record of the memory it will use.

use std::sync::Arc;

use crate::errors::Res;
use crate::ops::Work;
use crate::state::sim;
use crate::stream::{Stream, StreamKind};
use crate::table::lock;

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
            sim().device(s.ctx.device).sticky()?;
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
    mut deps: Vec<(Arc<Stream>, u64)>,
) -> Res<Queued> {
    stream.ctx.usable()?;
    {
        let mut link = lock(&stream.capture);
        if let Some(l) = link.as_mut() {
            let cap = Arc::clone(&l.cap);
            cap.add(l, work, call)?;
            return Ok(Queued::Captured);
        }
    }
    let legacy = stream.kind == StreamKind::Legacy;
    if legacy {
        crate::capture::refuse_legacy_use(&stream.ctx)?;
    }
    let s = sim();
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
        unsafe { s.inflight.register(what, uses, s.cfg.poison) }
    });
    let event = match &work {
        Work::Record(e) => Some(Arc::clone(e)),
        _ => None,
    };
    let seq = stream.push(deps, work, call, inflight, |seq| {
        if let Some(e) = event {
            e.recorded(stream, seq);
        }
    });
    Ok(Queued::At(Arc::clone(stream), seq))
}
