//! Stream management: creation, destruction, queries, synchronisation, event waits,
//! host functions, and stream capture's begin and end.

use std::ffi::{c_int, c_uint, c_void};
use std::sync::Arc;

use super::{out, stream_of, Handle};
use crate::capture::{self, Graph};
use crate::context::current_usable;
use crate::errors::{
    Res, INVALID_HANDLE, INVALID_VALUE, NOT_READY, STREAM_CAPTURE_ISOLATION, STREAM_CAPTURE_MERGE,
};
use crate::ops::Work;
use crate::state::sim;
use crate::stream::{Stream, StreamKind, NON_BLOCKING};
use crate::submit::submit;

/// `CUstreamCaptureStatus`.
const CAPTURE_NONE: c_int = 0;
const CAPTURE_ACTIVE: c_int = 1;
const CAPTURE_INVALIDATED: c_int = 2;

fn create(phstream: *mut Handle, flags: c_uint, priority: c_int) -> Res<()> {
    let c = current_usable()?;
    if phstream.is_null() || flags & !NON_BLOCKING != 0 {
        return Err(INVALID_VALUE);
    }
    let h = sim().streams.reserve();
    let s = Stream::start_at(h, &c, StreamKind::Created, flags, priority.clamp(-5, 0));
    c.add_created(&s);
    sim().streams.insert_at(h, s);
    // SAFETY: the caller's out-pointer, not null.
    unsafe { out(phstream, h as Handle) }
}

/// `cuStreamWaitEvent`'s rules inside and around captures; `Ok(None)` when the wait
/// was a capture's (nothing to queue).
fn wait_in_capture(s: &Arc<Stream>, event: &crate::event::Event) -> Res<Option<()>> {
    match (event.capture(), capture::link_of(s)) {
        // An event of a capture: join it, or add its dependencies.
        (Some(elink), None) => {
            elink.cap.join(s, elink.deps);
            Ok(None)
        }
        (Some(elink), Some(l)) => {
            if !Arc::ptr_eq(&l.cap, &elink.cap) {
                return Err(STREAM_CAPTURE_MERGE);
            }
            l.cap.merge(s, elink.deps);
            Ok(None)
        }
        // Work outside the capture cannot become a dependency inside it.
        (None, Some(l)) if event.target().is_some() => {
            l.cap.invalidate();
            Err(STREAM_CAPTURE_ISOLATION)
        }
        (None, Some(_)) => Ok(None),
        (None, None) => Ok(Some(())),
    }
}

export! {
    /// `cuStreamCreate` in the current context.
    fn cuStreamCreate(phstream: *mut Handle, flags: c_uint) {
        create(phstream, flags, 0)
    }

    /// `cuStreamCreateWithPriority`.
    fn cuStreamCreateWithPriority(phstream: *mut Handle, flags: c_uint, priority: c_int) {
        create(phstream, flags, priority)
    }

    /// `cuStreamDestroy_v2`: returns at once; queued work still runs.
    fn cuStreamDestroy_v2(stream: Handle) {
        sim().ready()?;
        let s = sim().streams.remove(stream as usize).ok_or(INVALID_HANDLE)?;
        if let Some(l) = capture::link_of(&s) {
            l.cap.invalidate();
        }
        s.close();
        Ok(())
    }

    /// `cuStreamSynchronize`.
    fn cuStreamSynchronize(stream: Handle) {
        let s = stream_of(stream)?;
        capture::refuse_sync(&s)?;
        s.host_wait(s.last(), s.ctx.blocking_sync());
        s.ctx.usable()
    }

    /// `cuStreamQuery`: `CUDA_ERROR_NOT_READY` while work is queued.
    fn cuStreamQuery(stream: Handle) {
        let s = stream_of(stream)?;
        capture::refuse_sync(&s)?;
        if s.idle() { Ok(()) } else { Err(NOT_READY) }
    }

    /// `cuStreamWaitEvent`: later work on the stream waits for the event's last record.
    fn cuStreamWaitEvent(stream: Handle, event: Handle, flags: c_uint) {
        let s = stream_of(stream)?;
        let e = sim().events.get(event as usize).ok_or(INVALID_HANDLE)?;
        if flags > 1 {
            return Err(INVALID_VALUE);
        }
        if wait_in_capture(&s, &e)?.is_none() {
            return Ok(());
        }
        let deps = e.target().filter(|(t, seq)| t.completed() < *seq).into_iter().collect();
        submit(&s, Work::Nothing, "cuStreamWaitEvent", deps).map(drop)
    }

    /// `cuLaunchHostFunc`: `f(data)` on the stream's thread, in stream order.
    fn cuLaunchHostFunc(stream: Handle, f: Option<extern "C" fn(*mut c_void)>, data: *mut c_void) {
        let s = stream_of(stream)?;
        let f = f.ok_or(INVALID_VALUE)?;
        submit(&s, Work::HostFunc(f as usize, data as usize), "cuLaunchHostFunc", vec![]).map(drop)
    }

    /// `cuStreamGetFlags`.
    fn cuStreamGetFlags(stream: Handle, flags: *mut c_uint) {
        let s = stream_of(stream)?;
        // SAFETY: the caller's out-pointer.
        unsafe { out(flags, s.flags) }
    }

    /// `cuStreamGetPriority`.
    fn cuStreamGetPriority(stream: Handle, priority: *mut c_int) {
        let s = stream_of(stream)?;
        // SAFETY: the caller's out-pointer.
        unsafe { out(priority, s.priority) }
    }

    /// `cuStreamGetCtx`.
    fn cuStreamGetCtx(stream: Handle, pctx: *mut Handle) {
        let s = stream_of(stream)?;
        // SAFETY: the caller's out-pointer.
        unsafe { out(pctx, s.ctx.handle as Handle) }
    }

    /// `cuStreamIsCapturing`.
    fn cuStreamIsCapturing(stream: Handle, status: *mut c_int) {
        let s = stream_of(stream)?;
        let st = match capture::link_of(&s) {
            None => CAPTURE_NONE,
            Some(l) if l.cap.is_invalidated() => CAPTURE_INVALIDATED,
            Some(_) => CAPTURE_ACTIVE,
        };
        // SAFETY: the caller's out-pointer.
        unsafe { out(status, st) }
    }

    /// `cuStreamBeginCapture_v2`.
    fn cuStreamBeginCapture_v2(stream: Handle, mode: c_uint) {
        let s = stream_of(stream)?;
        capture::begin(&s, mode)
    }

    /// `cuStreamBeginCapture` (before CUDA 10.1: global mode).
    fn cuStreamBeginCapture(stream: Handle) {
        let s = stream_of(stream)?;
        capture::begin(&s, capture::MODE_GLOBAL)
    }

    /// `cuStreamEndCapture`: the graph, or null and the error.
    fn cuStreamEndCapture(stream: Handle, graph: *mut Handle) {
        let s = stream_of(stream)?;
        if graph.is_null() {
            return Err(INVALID_VALUE);
        }
        let (h, r) = match capture::end(&s) {
            Ok(nodes) => (sim().graphs.insert(Arc::new(Graph { nodes, ctx: Arc::clone(&s.ctx) })), Ok(())),
            Err(e) => (0, Err(e)),
        };
        // SAFETY: the caller's out-pointer, not null.
        unsafe { out(graph, h as Handle) }?;
        r
    }
}
