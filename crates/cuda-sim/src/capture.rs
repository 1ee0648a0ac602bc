//! Stream capture and graphs.
//!
//! Between `cuStreamBeginCapture` and `cuStreamEndCapture` an operation queued on a
//! capturing stream is recorded as a node of the capture's graph, not run. Another
//! stream joins the capture by waiting on an event recorded in it, and must join
//! back (its last node must be an ancestor of the origin's) before the capture ends.
//! Each `cuGraphLaunch` queues the nodes, in an order their dependencies allow, on
//! the launching stream; they read and write memory when they execute then.
//!
//! As the reference documents, querying or synchronising a capturing stream, or
//! synchronising its context, fails with `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`
//! and invalidates the capture; so does work on the legacy stream while a stream
//! that synchronises with it captures (`CUDA_ERROR_STREAM_CAPTURE_IMPLICIT`), and a
//! wait inside a capture on an event recorded outside it
//! (`CUDA_ERROR_STREAM_CAPTURE_ISOLATION`). Once invalidated, operations on the
//! capture's streams fail with `CUDA_ERROR_STREAM_CAPTURE_INVALIDATED` and
//! `cuStreamEndCapture` returns that code and no graph.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use crate::context::Context;
use crate::errors::{
    Res, ILLEGAL_STATE, STREAM_CAPTURE_IMPLICIT, STREAM_CAPTURE_INVALIDATED,
    STREAM_CAPTURE_UNJOINED, STREAM_CAPTURE_UNSUPPORTED,
};
use crate::ops::Work;
use crate::stream::{Stream, StreamKind};
use crate::table::lock;

/// `CU_STREAM_CAPTURE_MODE_GLOBAL`.
pub const MODE_GLOBAL: u32 = 0;
/// `CU_STREAM_CAPTURE_MODE_THREAD_LOCAL`.
pub const MODE_THREAD_LOCAL: u32 = 1;
/// `CU_STREAM_CAPTURE_MODE_RELAXED`.
pub const MODE_RELAXED: u32 = 2;

/// One recorded operation.
#[derive(Clone)]
pub struct Node {
    /// What it does when launched.
    pub work: Work,
    /// The nodes it comes after.
    pub deps: Vec<usize>,
    /// The call that recorded it.
    pub call: &'static str,
}

/// A capture sequence.
pub struct Capture {
    /// The stream it began on.
    pub origin: Arc<Stream>,
    /// Its mode.
    pub mode: u32,
    /// The thread that began it.
    pub thread: ThreadId,
    st: Mutex<State>,
}

struct State {
    nodes: Vec<Node>,
    active: bool,
    invalidated: bool,
    /// Every stream taking part, the origin first. A stream takes part in one capture
    /// at most, and in none once that capture has ended.
    members: Vec<Member>,
}

/// A stream taking part in a capture.
struct Member {
    /// The stream.
    stream: Arc<Stream>,
    /// The nodes the stream's next work depends on.
    deps: Vec<usize>,
}

impl State {
    /// Where `stream` stands among the members, if it takes part.
    fn member(&mut self, stream: &Stream) -> Option<&mut Member> {
        self.members
            .iter_mut()
            .find(|m| std::ptr::eq(Arc::as_ptr(&m.stream), stream))
    }
}

/// A stream's (or an event's) place in a capture: the capture and the nodes that
/// whatever comes next depends on.
#[derive(Clone)]
pub struct CaptureLink {
    /// The capture.
    pub cap: Arc<Capture>,
    /// The nodes next work depends on.
    pub deps: Vec<usize>,
}

/// Captures going on now (begun, not ended), for the checks of calls made meanwhile.
static ACTIVE: Mutex<Vec<Arc<Capture>>> = Mutex::new(Vec::new());

impl Capture {
    /// Whether the capture has not ended yet.
    pub fn is_active(&self) -> bool {
        lock(&self.st).active
    }

    /// Whether a rule was broken during it.
    pub fn is_invalidated(&self) -> bool {
        lock(&self.st).invalidated
    }

    /// Breaks the capture: it ends in `CUDA_ERROR_STREAM_CAPTURE_INVALIDATED`.
    pub fn invalidate(&self) {
        lock(&self.st).invalidated = true;
    }

    /// `stream`'s place in this capture, if it takes part.
    fn link(self: &Arc<Self>, stream: &Stream) -> Option<CaptureLink> {
        let deps = lock(&self.st).member(stream)?.deps.clone();
        Some(CaptureLink {
            cap: Arc::clone(self),
            deps,
        })
    }

    /// Records `work`, queued on `stream`, after the stream's dependencies; the
    /// stream's next work then depends on it.
    pub fn add(&self, stream: &Stream, work: Work, call: &'static str) -> Res<()> {
        let mut st = lock(&self.st);
        if st.invalidated || !st.active {
            return Err(STREAM_CAPTURE_INVALIDATED);
        }
        let node = st.nodes.len();
        let m = st.member(stream).ok_or(STREAM_CAPTURE_INVALIDATED)?;
        let deps = std::mem::replace(&mut m.deps, vec![node]);
        st.nodes.push(Node { work, deps, call });
        Ok(())
    }

    /// Takes `stream` into the capture; its next work depends on `deps`.
    pub fn join(&self, stream: &Arc<Stream>, deps: Vec<usize>) {
        let mut st = lock(&self.st);
        match st.member(stream) {
            Some(m) => m.deps = deps,
            None => st.members.push(Member {
                stream: Arc::clone(stream),
                deps,
            }),
        }
    }

    /// Makes the next work of `stream`, which takes part, depend on `deps` too.
    pub fn merge(&self, stream: &Stream, deps: Vec<usize>) {
        if let Some(m) = lock(&self.st).member(stream) {
            for d in deps {
                if !m.deps.contains(&d) {
                    m.deps.push(d);
                }
            }
        }
    }
}

/// The capture `stream` takes part in, with its place there.
pub fn link_of(stream: &Stream) -> Option<CaptureLink> {
    lock(&ACTIVE).iter().find_map(|c| c.link(stream))
}

/// `cuStreamBeginCapture` on `stream`.
pub fn begin(stream: &Arc<Stream>, mode: u32) -> Res<()> {
    if stream.kind == StreamKind::Legacy {
        return Err(STREAM_CAPTURE_UNSUPPORTED);
    }
    if mode > MODE_RELAXED {
        return Err(crate::errors::INVALID_VALUE);
    }
    let mut active = lock(&ACTIVE);
    if active.iter().any(|c| c.link(stream).is_some()) {
        return Err(ILLEGAL_STATE);
    }
    active.push(Arc::new(Capture {
        origin: Arc::clone(stream),
        mode,
        thread: std::thread::current().id(),
        st: Mutex::new(State {
            nodes: Vec::new(),
            active: true,
            invalidated: false,
            members: vec![Member {
                stream: Arc::clone(stream),
                deps: vec![],
            }],
        }),
    }));
    Ok(())
}

/// `cuStreamEndCapture` on `stream`: the graph, or why there is none.
pub fn end(stream: &Arc<Stream>) -> Res<Vec<Node>> {
    let cap = link_of(stream).ok_or(ILLEGAL_STATE)?.cap;
    if !Arc::ptr_eq(&cap.origin, stream) {
        return Err(crate::errors::STREAM_CAPTURE_UNMATCHED);
    }
    if cap.mode != MODE_RELAXED && cap.thread != std::thread::current().id() {
        return Err(crate::errors::STREAM_CAPTURE_WRONG_THREAD);
    }
    let (nodes, members, invalidated, joined) = {
        let mut st = lock(&cap.st);
        // Every node must come before the origin's last: the other streams joined back.
        let mut seen = BTreeSet::new();
        let mut todo = st
            .member(stream)
            .map(|m| m.deps.clone())
            .unwrap_or_default();
        while let Some(n) = todo.pop() {
            if seen.insert(n) {
                todo.extend(st.nodes[n].deps.iter().copied());
            }
        }
        st.active = false;
        let joined = seen.len() == st.nodes.len();
        (
            std::mem::take(&mut st.nodes),
            // The streams no longer take part.
            std::mem::take(&mut st.members),
            st.invalidated,
            joined,
        )
    };
    drop(members);
    lock(&ACTIVE).retain(|c| !Arc::ptr_eq(c, &cap));
    if invalidated {
        return Err(STREAM_CAPTURE_INVALIDATED);
    }
    if !joined {
        return Err(STREAM_CAPTURE_UNJOINED);
    }
    Ok(nodes)
}

/// The capture `stream` takes part in, invalidated (for a query or synchronisation
/// made on it): `Err(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)` when there is one.
pub fn refuse_sync(stream: &Stream) -> Res<()> {
    match link_of(stream) {
        Some(link) => {
            link.cap.invalidate();
            Err(STREAM_CAPTURE_UNSUPPORTED)
        }
        None => Ok(()),
    }
}

/// For `cuCtxSynchronize`: refuses (and invalidates) when a stream of `ctx` captures.
pub fn refuse_context_sync(ctx: &Arc<Context>) -> Res<()> {
    let caps: Vec<Arc<Capture>> = lock(&ACTIVE)
        .iter()
        .filter(|c| Arc::ptr_eq(&c.origin.ctx, ctx))
        .cloned()
        .collect();
    if caps.is_empty() {
        return Ok(());
    }
    caps.iter().for_each(|c| c.invalidate());
    Err(STREAM_CAPTURE_UNSUPPORTED)
}

/// For work queued on the legacy stream of `ctx`: refuses (and invalidates) when a
/// stream that synchronises with it captures.
pub fn refuse_legacy_use(ctx: &Arc<Context>) -> Res<()> {
    let caps: Vec<Arc<Capture>> = lock(&ACTIVE)
        .iter()
        .filter(|c| {
            lock(&c.st)
                .members
                .iter()
                .any(|m| Arc::ptr_eq(&m.stream.ctx, ctx) && !m.stream.non_blocking)
        })
        .cloned()
        .collect();
    if caps.is_empty() {
        return Ok(());
    }
    caps.iter().for_each(|c| c.invalidate());
    Err(STREAM_CAPTURE_IMPLICIT)
}

/// For a "potentially unsafe" call (one that may synchronise implicitly: a
/// synchronous copy or memset, `cuMemAlloc`, `cuMemFree`, page-locking): refused
/// with `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`, invalidating the capture, while
/// the calling thread has a capture of its own in global or thread-local mode, or
/// another thread one in global mode.
pub fn refuse_unsafe_call() -> Res<()> {
    let me = std::thread::current().id();
    let caps: Vec<Arc<Capture>> = lock(&ACTIVE)
        .iter()
        .filter(|c| match c.mode {
            MODE_GLOBAL => true,
            MODE_THREAD_LOCAL => c.thread == me,
            _ => false,
        })
        .cloned()
        .collect();
    if caps.is_empty() {
        return Ok(());
    }
    caps.iter().for_each(|c| c.invalidate());
    Err(STREAM_CAPTURE_UNSUPPORTED)
}

/// A captured graph (`CUgraph`).
pub struct Graph {
    /// Its nodes, each after the ones it depends on.
    pub nodes: Vec<Node>,
    /// The context it was captured in.
    pub ctx: Arc<Context>,
}

/// An instantiated graph (`CUgraphExec`): a copy of the graph's nodes.
pub struct GraphExec {
    /// Its nodes, each after the ones it depends on.
    pub nodes: Vec<Node>,
    /// The context it was captured in.
    pub ctx: Arc<Context>,
}
