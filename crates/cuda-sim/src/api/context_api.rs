//! Context management: primary contexts, created contexts, the current-context stack.

use std::ffi::{c_int, c_uint, c_void};
use std::sync::Arc;

use super::{context_of, out, Handle};
use crate::context::{self, Context};
use crate::errors::{Res, INVALID_CONTEXT, INVALID_VALUE};
use crate::machine::machine;
use crate::state::sim;

/// Waits for everything queued in `ctx`, then frees what it owns: its device
/// allocations, page-locked memory, streams, events and modules (a primary context
/// released for the last time, or a destroyed one).
fn reset(ctx: &Arc<Context>) {
    let (s, m) = (sim(), machine());
    for st in ctx.streams() {
        st.drain();
    }
    for a in m.mem.device_allocs_of(ctx) {
        m.inflight.assert_device_unused(
            a.range(),
            "the context's reset (last release or destroy)",
            None,
        );
        let _ = m.mem.free_device(a.start);
    }
    for b in m.mem.host_blocks_of(ctx) {
        m.inflight
            .assert_host_unused(b.range(), "the context's reset");
        m.mem.free_host(&b);
    }
    for (h, st) in s.streams.select(|st| Arc::ptr_eq(&st.ctx, ctx)) {
        s.streams.remove(h);
        st.close();
    }
    for st in ctx.streams() {
        st.close();
    }
    ctx.drop_default_streams();
    for (h, _) in s.events.select(|e| Arc::ptr_eq(&e.ctx, ctx)) {
        s.events.remove(h);
    }
    for (h, _) in s.modules.select(|m| Arc::ptr_eq(&m.ctx, ctx)) {
        s.modules.remove(h);
    }
}

/// The primary context of `device`, checked.
fn primary_of(device: c_int) -> Res<&'static Arc<Context>> {
    Ok(sim().primary(machine().device_checked(device)?.ordinal))
}

/// A new created context on `device`, made current (as `cuCtxCreate` does).
fn create(pctx: *mut Handle, flags: c_uint, device: c_int) -> Res<()> {
    sim().ready()?;
    let d = machine().device_checked(device)?;
    d.sticky()?;
    let h = sim().contexts.reserve();
    let ctx = Arc::new(Context::new(h, d, false, flags));
    sim().contexts.insert_at(h, Arc::clone(&ctx));
    context::push(ctx);
    // SAFETY: the caller's out-pointer.
    unsafe { out(pctx, h as Handle) }
}

export! {
    /// `cuDevicePrimaryCtxRetain`.
    fn cuDevicePrimaryCtxRetain(pctx: *mut Handle, device: c_int) {
        sim().ready()?;
        let p = primary_of(device)?;
        if pctx.is_null() {
            return Err(INVALID_VALUE);
        }
        p.retain();
        // SAFETY: the caller's out-pointer, not null.
        unsafe { out(pctx, p.handle as Handle) }
    }

    /// `cuDevicePrimaryCtxRelease_v2`: the last release resets the context.
    fn cuDevicePrimaryCtxRelease_v2(device: c_int) {
        sim().ready()?;
        let p = primary_of(device)?;
        p.release(|| reset(p))
    }

    /// `cuDevicePrimaryCtxReset_v2`: frees everything of the primary context now.
    fn cuDevicePrimaryCtxReset_v2(device: c_int) {
        sim().ready()?;
        let p = primary_of(device)?;
        p.reset_now(|| reset(p));
        Ok(())
    }

    /// `cuDevicePrimaryCtxGetState`: its flags and whether it is retained.
    fn cuDevicePrimaryCtxGetState(device: c_int, flags: *mut c_uint, active: *mut c_int) {
        sim().ready()?;
        let p = primary_of(device)?;
        let on = p.is_active();
        // SAFETY: the caller's out-pointers.
        unsafe { out(flags, p.flags.load(std::sync::atomic::Ordering::Relaxed))? };
        // SAFETY: as above.
        unsafe { out(active, c_int::from(on)) }
    }

    /// `cuDevicePrimaryCtxSetFlags_v2`.
    fn cuDevicePrimaryCtxSetFlags_v2(device: c_int, flags: c_uint) {
        sim().ready()?;
        let p = primary_of(device)?;
        p.flags.store(flags, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// `cuCtxCreate_v2`.
    fn cuCtxCreate_v2(pctx: *mut Handle, flags: c_uint, device: c_int) {
        create(pctx, flags, device)
    }

    /// `cuCtxCreate_v3` (execution-affinity parameters are ignored).
    fn cuCtxCreate_v3(pctx: *mut Handle, _params: *mut c_void, _count: c_int, flags: c_uint, device: c_int) {
        create(pctx, flags, device)
    }

    /// `cuCtxCreate_v4` (creation parameters are ignored).
    fn cuCtxCreate_v4(pctx: *mut Handle, _params: *mut c_void, flags: c_uint, device: c_int) {
        create(pctx, flags, device)
    }

    /// `cuCtxDestroy_v2`: waits for its work, frees what it owns, and pops it from the
    /// calling thread's stack if it is current.
    fn cuCtxDestroy_v2(ctx: Handle) {
        let c = context_of(ctx)?;
        if c.primary {
            return Err(INVALID_CONTEXT);
        }
        reset(&c);
        c.deactivate();
        sim().contexts.remove(c.handle);
        if context::current().is_some_and(|cur| Arc::ptr_eq(&cur, &c)) {
            context::pop();
        }
        Ok(())
    }

    /// `cuCtxSetCurrent`.
    fn cuCtxSetCurrent(ctx: Handle) {
        sim().ready()?;
        let c = if ctx.is_null() { None } else { Some(context_of(ctx)?) };
        context::set_current(c);
        Ok(())
    }

    /// `cuCtxGetCurrent`: null when none is current.
    fn cuCtxGetCurrent(pctx: *mut Handle) {
        sim().ready()?;
        let h = context::current().map_or(std::ptr::null_mut(), |c| c.handle as Handle);
        // SAFETY: the caller's out-pointer.
        unsafe { out(pctx, h) }
    }

    /// `cuCtxPushCurrent_v2`.
    fn cuCtxPushCurrent_v2(ctx: Handle) {
        let c = context_of(ctx)?;
        context::push(c);
        Ok(())
    }

    /// `cuCtxPopCurrent_v2`: `CUDA_ERROR_INVALID_CONTEXT` when the stack is empty.
    fn cuCtxPopCurrent_v2(pctx: *mut Handle) {
        sim().ready()?;
        let c = context::pop().ok_or(INVALID_CONTEXT)?;
        if !pctx.is_null() {
            // SAFETY: the caller's out-pointer, not null.
            unsafe { out(pctx, c.handle as Handle) }?;
        }
        Ok(())
    }

    /// `cuCtxGetDevice` of the current context.
    fn cuCtxGetDevice(device: *mut c_int) {
        sim().ready()?;
        let c = context::current().ok_or(INVALID_CONTEXT)?;
        // SAFETY: the caller's out-pointer.
        unsafe { out(device, c.device as c_int) }
    }

    /// `cuCtxSynchronize`: waits for every stream of the current context.
    fn cuCtxSynchronize() {
        sim().ready()?;
        let c = context::current_usable()?;
        crate::capture::refuse_context_sync(&c)?;
        for s in c.streams() {
            s.host_wait(s.last(), c.blocking_sync());
        }
        c.usable()
    }

    /// `cuCtxGetApiVersion`.
    fn cuCtxGetApiVersion(ctx: Handle, version: *mut c_uint) {
        let c = if ctx.is_null() { context::current().ok_or(INVALID_CONTEXT)? } else { context_of(ctx)? };
        let _ = c;
        // SAFETY: the caller's out-pointer.
        unsafe { out(version, 3020) }
    }

    /// `cuCtxGetFlags` of the current context.
    fn cuCtxGetFlags(flags: *mut c_uint) {
        let c = context::current_usable()?;
        // SAFETY: the caller's out-pointer.
        unsafe { out(flags, c.flags.load(std::sync::atomic::Ordering::Relaxed)) }
    }

    /// `cuCtxSetFlags` of the current context.
    fn cuCtxSetFlags(flags: c_uint) {
        let c = context::current_usable()?;
        c.flags.store(flags, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// `cuCtxGetStreamPriorityRange`: 0 (least) to -5 (greatest), as on recent GPUs.
    fn cuCtxGetStreamPriorityRange(least: *mut c_int, greatest: *mut c_int) {
        context::current_usable()?;
        if !least.is_null() {
            // SAFETY: the caller's out-pointer, not null.
            unsafe { out(least, 0) }?;
        }
        if !greatest.is_null() {
            // SAFETY: as above.
            unsafe { out(greatest, -5) }?;
        }
        Ok(())
    }
}
