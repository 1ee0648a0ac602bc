//! Event management: create, record (outside and inside a capture), query,
//! synchronise, elapsed time, destroy.

use std::ffi::c_uint;
use std::sync::{Arc, OnceLock};

use super::{out, stream_of, Handle};
use crate::capture::link_of;
use crate::context::current_usable;
use crate::errors::{Res, CAPTURED_EVENT, INVALID_HANDLE, INVALID_VALUE, NOT_READY};
use crate::event::{Event, DISABLE_TIMING, INTERPROCESS};

/// `CU_EVENT_BLOCKING_SYNC`: `cuEventSynchronize` blocks instead of spinning.
const BLOCKING_SYNC: u32 = 1;
use crate::ops::Work;
use crate::state::sim;
use crate::submit::submit_placed;

fn event_of(h: Handle) -> Res<Arc<Event>> {
    sim().ready()?;
    let e = sim().events.get(h as usize).ok_or(INVALID_HANDLE)?;
    e.ctx.usable()?;
    Ok(e)
}

fn record(event: Handle, stream: Handle) -> Res<()> {
    let e = event_of(event)?;
    let s = stream_of(stream)?;
    if !Arc::ptr_eq(&e.ctx, &s.ctx) {
        return Err(INVALID_HANDLE);
    }
    if let Some(link) = link_of(&s) {
        e.recorded_in_capture(link);
        return Ok(());
    }
    let at = Arc::new(OnceLock::new());
    let work = Work::Record(Arc::clone(&at));
    submit_placed(&s, work, "cuEventRecord", vec![], |seq| {
        e.recorded(&s, seq, at)
    })
    .map(drop)
}

fn elapsed(ms: *mut f32, start: Handle, end: Handle) -> Res<()> {
    let (a, b) = (event_of(start)?, event_of(end)?);
    if ms.is_null() || !Arc::ptr_eq(&a.ctx, &b.ctx) {
        return Err(INVALID_VALUE);
    }
    let (t0, t1) = (a.time()?, b.time()?);
    let v = if t1 >= t0 {
        t1.duration_since(t0).as_secs_f64() * 1e3
    } else {
        -(t0.duration_since(t1).as_secs_f64() * 1e3)
    };
    // SAFETY: the caller's out-pointer, not null.
    unsafe { out(ms, v as f32) }
}

export! {
    /// `cuEventCreate` in the current context.
    fn cuEventCreate(phevent: *mut Handle, flags: c_uint) {
        let c = current_usable()?;
        if phevent.is_null() || flags & !0x7 != 0 || (flags & INTERPROCESS != 0 && flags & DISABLE_TIMING == 0) {
            return Err(INVALID_VALUE);
        }
        let h = sim().events.insert(Arc::new(Event::new(c, flags)));
        // SAFETY: the caller's out-pointer, not null.
        unsafe { out(phevent, h as Handle) }
    }

    /// `cuEventDestroy_v2`: the handle ends; a queued record still completes.
    fn cuEventDestroy_v2(event: Handle) {
        sim().ready()?;
        let e = sim().events.remove(event as usize).ok_or(INVALID_HANDLE)?;
        e.ctx.usable()
    }

    /// `cuEventRecord`: the event completes once the work queued before it has.
    fn cuEventRecord(event: Handle, stream: Handle) {
        record(event, stream)
    }

    /// `cuEventRecordWithFlags` (`CU_EVENT_RECORD_DEFAULT` only).
    fn cuEventRecordWithFlags(event: Handle, stream: Handle, flags: c_uint) {
        if flags != 0 {
            return Err(INVALID_VALUE);
        }
        record(event, stream)
    }

    /// `cuEventQuery`: `CUDA_ERROR_NOT_READY` until the recorded work completes.
    fn cuEventQuery(event: Handle) {
        if event_of(event)?.query()? { Ok(()) } else { Err(NOT_READY) }
    }

    /// `cuEventSynchronize`: waits for the recorded work, spinning unless the event is
    /// blocking-sync.
    fn cuEventSynchronize(event: Handle) {
        let e = event_of(event)?;
        if e.capture().is_some() {
            return Err(CAPTURED_EVENT);
        }
        if let Some((s, seq)) = e.target() {
            s.host_wait(seq, e.flags & BLOCKING_SYNC != 0 || e.ctx.blocking_sync());
        }
        e.ctx.usable()
    }

    /// `cuEventElapsedTime`: milliseconds between two completed timing events.
    fn cuEventElapsedTime(ms: *mut f32, start: Handle, end: Handle) {
        elapsed(ms, start, end)
    }

    /// `cuEventElapsedTime_v2` (CUDA 12.8's name for the same call).
    fn cuEventElapsedTime_v2(ms: *mut f32, start: Handle, end: Handle) {
        elapsed(ms, start, end)
    }
}
