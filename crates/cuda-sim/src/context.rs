//! Contexts: primary and created ones, and the calling thread's stack of current
//! contexts. A context's streams are kept beside it (`src/context_streams.rs`): a
//! stream refers to its context, so the context cannot refer to its streams' type.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::device::Device;
use crate::errors::{Res, CONTEXT_IS_DESTROYED, INVALID_CONTEXT};
use crate::table::lock;

/// `CU_CTX_SCHED_BLOCKING_SYNC`.
pub const SCHED_BLOCKING_SYNC: u32 = 4;

/// A context.
pub struct Context {
    /// Its handle (`CUcontext`).
    pub handle: usize,
    /// Its device's ordinal.
    pub device: usize,
    /// Its device (whose sticky error the context returns).
    pub dev: &'static Device,
    /// Whether this is the device's primary context.
    pub primary: bool,
    /// Retains of a primary context (a created context counts 1 until destroyed).
    refs: Mutex<u32>,
    /// False for a released primary context and a destroyed one.
    active: AtomicBool,
    /// Flags given at creation (or set on the primary context).
    pub flags: AtomicU32,
    /// Held while an operation is queued on a stream that synchronises with the legacy
    /// stream, so that the implicit dependencies of two such operations queued at once
    /// never point at each other.
    enqueue: Mutex<()>,
}

impl Context {
    /// A context of `dev` with `handle`; a primary one starts inactive.
    pub fn new(handle: usize, dev: &'static Device, primary: bool, flags: u32) -> Context {
        Context {
            handle,
            device: dev.ordinal,
            dev,
            primary,
            refs: Mutex::new(u32::from(!primary)),
            active: AtomicBool::new(!primary),
            flags: AtomicU32::new(flags),
            enqueue: Mutex::new(()),
        }
    }

    /// `Ok` while the context can be used, with its device's sticky error otherwise
    /// passed through.
    pub fn usable(&self) -> Res<()> {
        if !self.active.load(Ordering::Acquire) {
            // A released primary context too, as the driver answers on the H200.
            return Err(CONTEXT_IS_DESTROYED);
        }
        self.dev.sticky()
    }

    /// Whether a program's waits in this context block rather than spin
    /// (`CU_CTX_SCHED_BLOCKING_SYNC`).
    pub fn blocking_sync(&self) -> bool {
        self.flags.load(Ordering::Relaxed) & SCHED_BLOCKING_SYNC != 0
    }

    /// Whether the context is retained (primary) or not destroyed (created).
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// `cuDevicePrimaryCtxRetain`.
    pub fn retain(&self) {
        let mut refs = lock(&self.refs);
        *refs += 1;
        self.active.store(true, Ordering::Release);
    }

    /// `cuDevicePrimaryCtxRelease`: after the last retain, runs `reset` (which frees
    /// what the context owns) before any thread can retain it again: a retain waits
    /// for the reset, so nothing made after it is freed by it.
    pub fn release(&self, reset: impl FnOnce()) -> Res<()> {
        let mut refs = lock(&self.refs);
        if *refs == 0 {
            return Err(INVALID_CONTEXT);
        }
        *refs -= 1;
        if *refs == 0 {
            self.active.store(false, Ordering::Release);
            reset();
        }
        Ok(())
    }

    /// Runs `reset` with retains held off (`cuDevicePrimaryCtxReset`).
    pub fn reset_now(&self, reset: impl FnOnce()) {
        let _refs = lock(&self.refs);
        reset();
    }

    /// Marks a created context destroyed.
    pub fn deactivate(&self) {
        *lock(&self.refs) = 0;
        self.active.store(false, Ordering::Release);
    }

    /// The lock held while queueing on a stream that synchronises with the legacy one.
    pub fn enqueue_lock(&self) -> MutexGuard<'_, ()> {
        lock(&self.enqueue)
    }
}

thread_local! {
    /// The calling thread's context stack; the last entry is current.
    static STACK: RefCell<Vec<Arc<Context>>> = const { RefCell::new(Vec::new()) };
}

/// The calling thread's current context, if any.
pub fn current() -> Option<Arc<Context>> {
    STACK.with(|s| s.borrow().last().cloned())
}

/// The current context, usable, or the error the driver gives without one.
pub fn current_usable() -> Res<Arc<Context>> {
    let ctx = current().ok_or(INVALID_CONTEXT)?;
    ctx.usable()?;
    Ok(ctx)
}

/// `cuCtxSetCurrent`: replaces the top of the stack (`None` pops it).
pub fn set_current(ctx: Option<Arc<Context>>) {
    STACK.with(|s| {
        let mut s = s.borrow_mut();
        s.pop();
        s.extend(ctx);
    });
}

/// `cuCtxPushCurrent`.
pub fn push(ctx: Arc<Context>) {
    STACK.with(|s| s.borrow_mut().push(ctx));
}

/// `cuCtxPopCurrent`: the context popped, if the stack was not empty.
pub fn pop() -> Option<Arc<Context>> {
    STACK.with(|s| s.borrow_mut().pop())
}
