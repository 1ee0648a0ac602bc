//! Streams: a FIFO of operations per stream, executed in order by the stream's own
//! thread, as a copy engine would, after the operations each one depends on (event
//! waits, the legacy stream's implicit synchronisation) and after its seeded delay.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::context::Context;
use crate::jitter;
use crate::machine::machine;
use crate::ops::Work;
use crate::table::lock;

/// What a stream handle names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamKind {
    /// A context's legacy default stream (`NULL`, `CU_STREAM_LEGACY`).
    Legacy,
    /// A thread's per-thread default stream in a context (`CU_STREAM_PER_THREAD`).
    PerThread,
    /// A stream made by `cuStreamCreate`.
    Created,
}

/// `CU_STREAM_NON_BLOCKING`.
pub const NON_BLOCKING: u32 = 1;

/// One queued operation.
pub struct Op {
    /// Its place in its stream (1, 2, ...).
    pub seq: u64,
    /// Operations of other streams it starts after: (stream, place there).
    pub deps: Vec<(Arc<Stream>, u64)>,
    /// What it does.
    pub work: Work,
    /// The entry point that queued it.
    pub call: &'static str,
    /// Its entry in the record of in-flight memory.
    pub inflight: Option<u64>,
}

struct Queue {
    ops: VecDeque<Op>,
    enqueued: u64,
    closing: bool,
}

/// A stream.
pub struct Stream {
    /// Its handle (0 for a default stream, whose handle is a constant).
    pub handle: usize,
    /// Its context.
    pub ctx: Arc<Context>,
    /// Legacy, per-thread or created.
    pub kind: StreamKind,
    /// Created with `CU_STREAM_NON_BLOCKING`: no implicit synchronisation with the
    /// legacy stream.
    pub non_blocking: bool,
    /// Its creation flags.
    pub flags: u32,
    /// Its priority.
    pub priority: i32,
    key: u64,
    /// The name of the thread that made it (a per-thread stream's owner).
    origin: String,
    q: Mutex<Queue>,
    cv: Condvar,
    completed: AtomicU64,
}

impl Stream {
    /// A new stream with its thread running, waiting for work.
    pub fn start(ctx: &Arc<Context>, kind: StreamKind, flags: u32, priority: i32) -> Arc<Stream> {
        Self::start_at(0, ctx, kind, flags, priority)
    }

    /// [`Stream::start`], for a created stream whose handle is `handle`.
    pub fn start_at(
        handle: usize,
        ctx: &Arc<Context>,
        kind: StreamKind,
        flags: u32,
        priority: i32,
    ) -> Arc<Stream> {
        let key = jitter::stream_key(match kind {
            StreamKind::Legacy => "legacy",
            StreamKind::PerThread => "per-thread",
            StreamKind::Created => "created",
        });
        let s = Arc::new(Stream {
            handle,
            ctx: Arc::clone(ctx),
            kind,
            non_blocking: kind == StreamKind::Created && flags & NON_BLOCKING != 0,
            flags,
            priority,
            // The legacy stream's delays depend on its device only.
            key: if kind == StreamKind::Legacy {
                jitter::mix(ctx.device as u64 ^ 0x001E_6AC1)
            } else {
                key
            },
            origin: std::thread::current()
                .name()
                .unwrap_or("unnamed")
                .to_owned(),
            q: Mutex::new(Queue {
                ops: VecDeque::new(),
                enqueued: 0,
                closing: false,
            }),
            cv: Condvar::new(),
            completed: AtomicU64::new(0),
        });
        let worker = Arc::clone(&s);
        std::thread::Builder::new()
            .name(format!("cuda-sim-{}", s.short_name()))
            .spawn(move || worker.run())
            .unwrap_or_else(|e| {
                eprintln!("cuda-sim: cannot start a stream thread: {e}");
                std::process::abort()
            });
        s
    }

    fn short_name(&self) -> String {
        match self.kind {
            StreamKind::Legacy => format!("legacy{}", self.ctx.device),
            StreamKind::PerThread => "ptds".into(),
            StreamKind::Created => format!("{:x}", self.handle & 0xFFFF_FFFF),
        }
    }

    /// The stream as messages name it.
    pub fn label(&self) -> String {
        match self.kind {
            StreamKind::Legacy => format!("the legacy stream of context {:#x}", self.ctx.handle),
            StreamKind::PerThread => format!(
                "the per-thread stream of thread {:?} in context {:#x}",
                self.origin, self.ctx.handle
            ),
            StreamKind::Created => format!("stream {:#x}", self.handle),
        }
    }

    /// The place of the last operation queued.
    pub fn last(&self) -> u64 {
        lock(&self.q).enqueued
    }

    /// The place of the last operation completed (every one before it has too).
    pub fn completed(&self) -> u64 {
        self.completed.load(Ordering::Acquire)
    }

    /// Whether everything queued has completed.
    pub fn idle(&self) -> bool {
        self.completed() >= self.last()
    }

    /// Queues an operation; returns its place. `placed` learns the place before the
    /// operation can start (an event record notes it there).
    pub fn push(
        &self,
        deps: Vec<(Arc<Stream>, u64)>,
        work: Work,
        call: &'static str,
        inflight: Option<u64>,
        placed: impl FnOnce(u64),
    ) -> u64 {
        let mut q = lock(&self.q);
        if q.closing {
            // Its thread may be gone: the operation would never run.
            eprintln!(
                "cuda-sim: {call} on {}, which was destroyed (or whose context was reset) \
                 while this call was using it",
                self.label()
            );
            eprintln!("cuda-sim: aborting (this is a bug in the program under test, found by the simulator)");
            std::process::abort();
        }
        q.enqueued += 1;
        let seq = q.enqueued;
        placed(seq);
        q.ops.push_back(Op {
            seq,
            deps,
            work,
            call,
            inflight,
        });
        self.cv.notify_one();
        seq
    }

    /// Blocks until operation `seq` has completed.
    pub fn wait_for(&self, seq: u64) {
        if self.completed() < seq {
            machine().wait_until(|| self.completed() >= seq);
        }
    }

    /// Blocks until everything queued so far has completed.
    pub fn drain(&self) {
        self.wait_for(self.last());
    }

    /// A program's wait for operation `seq` (`cuStreamSynchronize`, `cuEventSynchronize`):
    /// as the driver waits by default, the calling thread spins (yielding its core
    /// to other threads between looks) unless `block`, for a blocking-sync event or
    /// a context made with `CU_CTX_SCHED_BLOCKING_SYNC`.
    pub fn host_wait(&self, seq: u64, block: bool) {
        if block {
            self.wait_for(seq);
        } else {
            while self.completed() < seq {
                std::thread::yield_now();
            }
        }
    }

    /// Lets the thread end once the queue is empty.
    pub fn close(&self) {
        lock(&self.q).closing = true;
        self.cv.notify_one();
    }

    /// The stream's thread: takes operations in order and executes them.
    fn run(self: Arc<Self>) {
        let m = machine();
        loop {
            let op = {
                let mut q = lock(&self.q);
                loop {
                    if let Some(op) = q.ops.pop_front() {
                        break op;
                    }
                    if q.closing {
                        return;
                    }
                    q = self.cv.wait(q).unwrap_or_else(|e| e.into_inner());
                }
            };
            for (other, seq) in &op.deps {
                other.wait_for(*seq);
            }
            let delay = jitter::delay(m.cfg.seed, self.key, op.seq, m.cfg.jitter_us);
            if !delay.is_zero() {
                std::thread::sleep(delay);
            }
            let device = self.ctx.dev;
            if m.cfg.trace {
                eprintln!(
                    "cuda-sim: {} op {}: {} ({}) after {delay:?}",
                    self.label(),
                    op.seq,
                    op.call,
                    op.work.kind()
                );
            }
            // After a fault nothing more runs on the device; records still complete.
            if device.sticky().is_ok() || matches!(op.work, Work::Record(_)) {
                if let Some(id) = op.inflight {
                    m.inflight.check(id);
                }
                if let Err(code) = op.work.execute() {
                    eprintln!(
                        "cuda-sim: {} on {} faulted: {}",
                        op.call,
                        self.label(),
                        crate::errors::name(code)
                    );
                    device.poison(code);
                }
            }
            if let Some(id) = op.inflight {
                m.inflight.done(id, m.cfg.poison);
            }
            self.completed.store(op.seq, Ordering::Release);
            drop(op);
            m.notify_progress();
        }
    }
}
