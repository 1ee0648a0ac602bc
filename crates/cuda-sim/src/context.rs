//! Contexts: primary and created ones, each with its legacy default stream, its
//! per-thread default streams and its created streams; and the calling thread's
//! stack of current contexts.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread::ThreadId;

use crate::errors::{Res, CONTEXT_IS_DESTROYED, INVALID_CONTEXT};
use crate::state::sim;
use crate::stream::{Stream, StreamKind};
use crate::table::lock;

/// `CU_CTX_SCHED_BLOCKING_SYNC`.
pub const SCHED_BLOCKING_SYNC: u32 = 4;

/// A context.
pub struct Context {
    /// Its handle (`CUcontext`).
    pub handle: usize,
    /// Its device's ordinal.
    pub device: usize,
    /// Whether this is the device's primary context.
    pub primary: bool,
    /// Retains of a primary context (a created context counts 1 until destroyed).
    refs: Mutex<u32>,
    /// False for a released primary context and a destroyed one.
    active: AtomicBool,
    /// Flags given at creation (or set on the primary context).
    pub flags: AtomicU32,
    /// The legacy default stream (made at first use).
    legacy: Mutex<Option<Arc<Stream>>>,
    /// Each thread's per-thread default stream (made at first use).
    per_thread: Mutex<HashMap<ThreadId, Arc<Stream>>>,
    /// Streams created in this context (still alive or not).
    created: Mutex<Vec<Weak<Stream>>>,
    /// Held while an operation is queued on a stream that synchronises with the legacy
    /// stream, so that the implicit dependencies of two such operations queued at once
    /// never point at each other.
    enqueue: Mutex<()>,
}

impl Context {
    /// A context of `device` with `handle`; a primary one starts inactive.
    pub fn new(handle: usize, device: usize, primary: bool, flags: u32) -> Context {
        Context {
            handle,
            device,
            primary,
            refs: Mutex::new(u32::from(!primary)),
            active: AtomicBool::new(!primary),
            flags: AtomicU32::new(flags),
            legacy: Mutex::new(None),
            per_thread: Mutex::new(HashMap::new()),
            created: Mutex::new(Vec::new()),
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
        sim().device(self.device).sticky()
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

    /// The legacy default stream.
    pub fn legacy(self: &Arc<Self>) -> Arc<Stream> {
        let mut l = lock(&self.legacy);
        Arc::clone(l.get_or_insert_with(|| Stream::start(self, StreamKind::Legacy, 0, 0)))
    }

    /// The calling thread's per-thread default stream.
    pub fn per_thread(self: &Arc<Self>) -> Arc<Stream> {
        let mut m = lock(&self.per_thread);
        let s = m
            .entry(std::thread::current().id())
            .or_insert_with(|| Stream::start(self, StreamKind::PerThread, 0, 0));
        Arc::clone(s)
    }

    /// Records a stream created in this context.
    pub fn add_created(&self, s: &Arc<Stream>) {
        let mut c = lock(&self.created);
        c.retain(|w| w.strong_count() > 0);
        c.push(Arc::downgrade(s));
    }

    /// Every stream of the context that exists now: legacy, per-thread, created.
    pub fn streams(&self) -> Vec<Arc<Stream>> {
        let mut all: Vec<Arc<Stream>> = lock(&self.legacy).iter().cloned().collect();
        all.extend(lock(&self.per_thread).values().cloned());
        all.extend(lock(&self.created).iter().filter_map(Weak::upgrade));
        all
    }

    /// Streams that synchronise with the legacy stream: the per-thread ones and the
    /// created ones without `CU_STREAM_NON_BLOCKING`.
    pub fn blocking_streams(&self) -> Vec<Arc<Stream>> {
        self.streams()
            .into_iter()
            .filter(|s| s.kind != StreamKind::Legacy && !s.non_blocking)
            .collect()
    }

    /// The lock held while queueing on a stream that synchronises with the legacy one.
    pub fn enqueue_lock(&self) -> MutexGuard<'_, ()> {
        lock(&self.enqueue)
    }

    /// Forgets the per-thread and legacy streams (at a reset or destroy, once drained).
    pub fn drop_default_streams(&self) {
        lock(&self.legacy).take();
        lock(&self.per_thread).clear();
        lock(&self.created).clear();
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
