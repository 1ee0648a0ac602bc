//! The process-wide pool of copy threads that every [`crate::StagingBuffer`] shares:
//! a plain wake-on-demand pool.
//!
//! - **Bounded, and sized by the program:** one pool per process, started at the
//!   first copy that wants help, with [`crate::pool_threads`] helper threads (by
//!   default one fewer than the cores, at most 15; `CUDA_STAGING_COPY_THREADS` or
//!   [`crate::set_copy_pool_threads`] set it, 0 meaning every copy runs on its
//!   caller's thread alone). Never more threads, however many buffers exist.
//! - **Woken by the copy that needs them, waiting otherwise:** a copy is published
//!   as a [`Job`] in a free slot (32 slots, one per concurrent copy) and cut in
//!   parts of whole pages; the publisher marks how many helpers the slot wants,
//!   wakes as many waiting workers through a condition variable as spinning ones
//!   cannot cover, and starts on the parts at once. A worker takes one of a slot's
//!   wanted places, claims parts until none are left, and waits again when nothing
//!   is wanted. A copy is cut in small parts, so a helper that wakes late still
//!   finds work and one that the OS preempts holds up little. Each worker counts
//!   its CPU time when it goes back to waiting ([`crate::pool_stats`]).
//! - **Spinning only while work is microseconds away:** a worker spins for
//!   [`LINGER`] after its part of a copy when more is coming (the next chunk of the
//!   same transfer, the next transfer of a tight loop), then waits. After the last
//!   copy of a transfer that followed a gap nobody spins: nothing of the pool runs
//!   between frames.
//! - **No helpers where no core is free:** a transfer enlists no more helpers than
//!   there are idle cores plus spinning workers ([`Pool::idle_cores`], `idle.rs`).
//! - **Shared without waiting on each other:** two buffers copying at once each get
//!   the workers that are free; the publisher waits only for parts a running
//!   worker took, and takes back the places nobody took.
//!
//! Nothing allocates and no thread starts per transfer.

use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::cpu_clock::thread_cpu_ns;
use crate::job::{Job, MAX_PARTS};
use crate::stores::copy;
use crate::sync::{spin_hint, Ordering};

mod control;
mod idle;

pub(crate) use control::global;
pub use control::{
    pool_stats, pool_threads, pool_threads_started, set_copy_pool_threads, PoolStats,
    COPY_THREADS_ENV, MAX_POOL_THREADS,
};
use idle::IdleCores;

/// Concurrent copies the pool takes; more copy on their own thread alone.
const MAX_JOBS: usize = 32;
/// Parts are cut at this granularity, so no two threads share a page.
const PART_ALIGN: usize = 4096;
/// The smallest part: about a µs of copying, against a claim of tens of ns.
const PART_MIN_BYTES: usize = 16 << 10;
/// A split copy is cut into about this many parts per thread taking part, so that
/// helpers arriving late (woken by the copy itself) still find work, and a helper
/// the OS preempts holds up only a small part.
const PARTS_PER_THREAD: usize = 4;
/// A helper spins this long after its part of a copy before it waits again, when
/// more is coming soon ([`Share::linger`]): the next chunk of the same pipelined
/// transfer (a chunk's DMA takes 10-25 µs on the H200 host), the next transfer of
/// a tight loop. With no helper lingering (`cargo xtask bench --ab` at 16f66a8 on
/// an H100 host, 4 rounds), `upload` / `download` ran 1.27-1.88 times as long back
/// to back and 1.19-1.97 times in tight loops (at 0.79-1.41 times the CPU), and an
/// upload of 4915200 B after a 2 ms sleep 1.20 times.
const LINGER: Duration = Duration::from_micros(50);

/// How a copy is shared out: over up to `threads` threads, the caller included,
/// `helpers` of them pool workers (spinning ones first, then waiting ones woken for
/// it), which spin for [`LINGER`] after it when `linger`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Share {
    pub(crate) threads: usize,
    pub(crate) helpers: usize,
    pub(crate) linger: bool,
    /// Transfers come back to back, so the helpers are spinning already: one part
    /// per thread (each part claimed is a cache line passed between cores), instead
    /// of small parts that leave work for helpers woken late.
    pub(crate) hot: bool,
}

/// One copy of `len` bytes cut into parts of `per` bytes.
#[derive(Clone, Copy)]
struct CopyDesc {
    dst: *mut u8,
    src: *const u8,
    len: usize,
    per: usize,
    streaming: bool,
    linger: bool,
}

// SAFETY: the pointers are plain addresses handed over under the job protocol; the
// publisher keeps both ranges valid and untouched until every part is done.
unsafe impl Send for CopyDesc {}

impl CopyDesc {
    const EMPTY: CopyDesc = CopyDesc {
        dst: std::ptr::null_mut(),
        src: std::ptr::null(),
        len: 0,
        per: 1,
        streaming: false,
        linger: false,
    };

    /// Copies part `i`.
    ///
    /// # Safety
    /// 1. The publisher's ranges are valid (see [`Pool::copy`]) and `i` is a part of
    ///    this publication, claimed by the caller.
    unsafe fn copy_part(&self, i: usize) {
        let off = i * self.per;
        let n = self.per.min(self.len - off);
        // SAFETY: `off + n <= len`, inside both ranges (condition 1); parts do not
        // overlap each other.
        unsafe { copy(self.dst.add(off), self.src.add(off), n, self.streaming) }
    }
}

/// What a worker has done, as [`crate::pool_stats`] reads it.
#[derive(Default)]
#[repr(align(128))]
struct WorkerStats {
    /// Times the worker came back from waiting.
    wakes: AtomicU64,
    /// Parts of other threads' copies the worker copied.
    parts: AtomicU64,
    /// The worker's CPU time in nanoseconds, as of its last wait.
    cpu_ns: AtomicU64,
}

impl WorkerStats {
    /// Stores the calling worker's CPU time (where the platform has the clock).
    fn record_cpu(&self) {
        if let Some(ns) = thread_cpu_ns() {
            self.cpu_ns.store(ns, Ordering::Relaxed);
        }
    }
}

/// Helpers a job slot's publisher still wants, taken one by one by workers.
#[derive(Default)]
#[repr(align(128))]
struct Wanted(AtomicUsize);

/// The pool; see the module notes.
pub(crate) struct Pool {
    jobs: Box<[Job<CopyDesc>]>,
    /// Per job slot: helpers its publisher still wants.
    wanted: Box<[Wanted]>,
    /// The sum of `wanted`: what spinning and waking workers look at first.
    pending: AtomicUsize,
    /// Every worker the pool can have; the first `started` have a thread.
    workers: Box<[WorkerStats]>,
    /// Workers whose thread was started (`workers[..started]`).
    started: AtomicUsize,
    /// Workers copies may enlist (`workers[..limit]`, at most `started` once the
    /// pool is in use): the pool's size as the program set it.
    limit: AtomicUsize,
    /// Workers not waiting on `offered`.
    awake: AtomicUsize,
    /// Workers spinning for their linger.
    spinning: AtomicUsize,
    /// The machine's idle cores as last read ([`Pool::idle_cores`]).
    idle: IdleCores,
    epoch: Instant,
    /// Held while a worker checks `pending` and starts to wait, and by a publisher
    /// between raising `pending` and waking one, so no wake-up is lost; holds
    /// whether the pool is stopping.
    sleep: Mutex<bool>,
    /// Signalled once per waiting worker a publisher wakes.
    offered: Condvar,
    /// The started threads, for [`Pool::stop`] (and growth, which takes the lock).
    handles: Mutex<Vec<JoinHandle<()>>>,
}

impl Pool {
    /// A pool that can grow to `capacity` workers, with none started yet and a size
    /// of `limit`.
    pub(crate) fn new(capacity: usize, limit: usize) -> Arc<Pool> {
        Arc::new(Pool {
            jobs: (0..MAX_JOBS).map(|_| Job::new(CopyDesc::EMPTY)).collect(),
            wanted: (0..MAX_JOBS).map(|_| Wanted::default()).collect(),
            pending: AtomicUsize::new(0),
            workers: (0..capacity).map(|_| WorkerStats::default()).collect(),
            started: AtomicUsize::new(0),
            limit: AtomicUsize::new(limit.min(capacity)),
            awake: AtomicUsize::new(0),
            spinning: AtomicUsize::new(0),
            idle: IdleCores::new(),
            epoch: Instant::now(),
            sleep: Mutex::new(false),
            offered: Condvar::new(),
            handles: Mutex::new(Vec::new()),
        })
    }

    /// A pool with `workers` workers started (for tests; the process-wide one
    /// starts through [`global`]). Stop it with [`Pool::stop`].
    #[cfg(all(test, not(loom)))]
    pub(crate) fn start(workers: usize) -> std::io::Result<Arc<Pool>> {
        let pool = Pool::new(workers, workers);
        match pool.grow() {
            Ok(_) => Ok(pool),
            Err(e) => {
                pool.stop();
                Err(e)
            }
        }
    }

    /// Starts threads for the workers up to the pool's size; returns how many run.
    /// On an error the size drops to the threads that did start.
    pub(crate) fn grow(self: &Arc<Self>) -> std::io::Result<usize> {
        let mut handles = self.handles.lock().unwrap_or_else(|e| e.into_inner());
        let want = self.limit.load(Ordering::Relaxed).min(self.workers.len());
        let mut started = self.started.load(Ordering::Relaxed);
        while started < want {
            let p = Arc::clone(self);
            let i = started;
            // Counted awake until it first waits.
            self.awake.fetch_add(1, Ordering::Relaxed);
            let spawned = std::thread::Builder::new()
                .name(format!("staging-copy-{i}"))
                .spawn(move || p.worker(i));
            match spawned {
                Ok(h) => {
                    handles.push(h);
                    started += 1;
                    self.started.store(started, Ordering::Release);
                }
                Err(e) => {
                    self.awake.fetch_sub(1, Ordering::Relaxed);
                    self.limit.store(started, Ordering::Relaxed);
                    return Err(e);
                }
            }
        }
        Ok(started)
    }

    /// Stops every worker and joins it (for pools other than the process-wide one).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn stop(&self) {
        *self.lock() = true;
        self.offered.notify_all();
        let handles = std::mem::take(&mut *self.handles.lock().unwrap_or_else(|e| e.into_inner()));
        for h in handles {
            let _ = h.join();
        }
    }

    /// Workers copies may enlist now: the pool's size, and no more than have started.
    pub(crate) fn enlistable(&self) -> usize {
        self.limit
            .load(Ordering::Relaxed)
            .min(self.started.load(Ordering::Acquire))
    }

    /// Workers not waiting for work right now.
    pub(crate) fn awake(&self) -> usize {
        self.awake.load(Ordering::Relaxed)
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Cores that run nothing now, by the kernel's count of runnable threads (read at
    /// most every `idle.rs`'s `READ_EVERY`; every core where it cannot be read).
    /// When the program's own decoders and preprocessing or other processes keep
    /// every core busy, a woken helper takes a core from one of them, and the OS
    /// preempts the helpers or the caller in the middle of a copy, which then waits
    /// a time slice: a transfer enlists no more helpers than there are idle cores.
    pub(crate) fn idle_cores(&self) -> usize {
        self.idle.get(self.now_ns())
    }

    fn lock(&self) -> MutexGuard<'_, bool> {
        // Nothing panics while holding the lock; a poisoned one holds a valid flag.
        self.sleep.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Copies `len` bytes shared out as `share` says, returning when every byte is
    /// copied; with no helper to enlist, the caller copies alone.
    ///
    /// # Safety
    /// 1. `src` is readable and `dst` writable for `len` bytes; they do not overlap;
    ///    nothing else touches either range until this returns.
    pub(crate) unsafe fn copy(
        &self,
        dst: *mut u8,
        src: *const u8,
        len: usize,
        streaming: bool,
        share: Share,
    ) {
        let helpers = share
            .helpers
            .min(share.threads.saturating_sub(1))
            .min(self.enlistable());
        let slot = if helpers == 0 {
            None
        } else {
            (0..self.jobs.len()).find(|&j| self.jobs[j].try_acquire())
        };
        let Some(j) = slot else {
            // SAFETY: condition 1.
            unsafe { copy(dst, src, len, streaming) };
            return;
        };
        let job = &self.jobs[j];
        let per_thread = if share.hot { 1 } else { PARTS_PER_THREAD };
        let per = part_bytes(len, helpers + 1, per_thread);
        let parts = len.div_ceil(per).max(1);
        let desc = CopyDesc {
            dst,
            src,
            len,
            per,
            streaming,
            linger: share.linger,
        };
        // SAFETY: we own slot `j` and the last publication in it was waited for
        // before the slot was released; `parts <= MAX_PARTS` (`part_bytes`).
        unsafe { job.publish(desc, parts) };
        self.offer(j, helpers);
        let mut mine = 0;
        while let Some((i, d)) = job.claim() {
            // SAFETY: a part we claimed of our own publication, whose ranges are
            // valid until we return (condition 1).
            unsafe { d.copy_part(i) };
            mine += 1;
        }
        self.withdraw(j);
        job.wait_done(parts - mine);
        job.release();
    }

    /// Offers job slot `j` to `helpers` workers: spinning ones take it on their own,
    /// and as many waiting ones as they cannot cover are woken.
    fn offer(&self, j: usize, helpers: usize) {
        self.wanted[j].0.store(helpers, Ordering::SeqCst);
        self.pending.fetch_add(helpers, Ordering::SeqCst);
        let wake = helpers.saturating_sub(self.spinning.load(Ordering::SeqCst));
        if wake > 0 {
            // A worker checks `pending` under the lock before it waits: taking the
            // lock here orders that check before this wake-up or after the raise.
            drop(self.lock());
            for _ in 0..wake {
                self.offered.notify_one();
            }
        }
    }

    /// Takes back job slot `j`'s offers that no worker took: every part is claimed.
    fn withdraw(&self, j: usize) {
        let left = self.wanted[j].0.swap(0, Ordering::SeqCst);
        if left > 0 {
            self.pending.fetch_sub(left, Ordering::SeqCst);
        }
    }

    /// Takes one offer: the slot of a job that still wants a helper, if any.
    fn take_offer(&self) -> Option<usize> {
        if self.pending.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let j = self.wanted.iter().position(|w| {
            (w.0)
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        })?;
        self.pending.fetch_sub(1, Ordering::SeqCst);
        Some(j)
    }

    /// Spins until an offer can be taken or [`LINGER`] has passed.
    fn linger(&self) -> Option<usize> {
        self.spinning.fetch_add(1, Ordering::SeqCst);
        let until = self.now_ns() + LINGER.as_nanos() as u64;
        let mut took = None;
        while self.now_ns() < until {
            took = self.take_offer();
            if took.is_some() {
                break;
            }
            for _ in 0..64 {
                spin_hint();
            }
        }
        self.spinning.fetch_sub(1, Ordering::SeqCst);
        took
    }

    /// The loop of worker `i`, until the pool shuts down.
    fn worker(&self, i: usize) {
        let me = &self.workers[i];
        loop {
            let mut next = self.take_offer();
            while let Some(j) = next {
                next = if self.help(me, j) {
                    self.linger()
                } else {
                    self.take_offer()
                };
            }
            let mut stopping = self.lock();
            loop {
                if *stopping {
                    drop(stopping);
                    me.record_cpu();
                    return;
                }
                if self.pending.load(Ordering::SeqCst) > 0 {
                    break;
                }
                me.record_cpu();
                self.awake.fetch_sub(1, Ordering::Relaxed);
                stopping = self
                    .offered
                    .wait(stopping)
                    .unwrap_or_else(|e| e.into_inner());
                self.awake.fetch_add(1, Ordering::Relaxed);
                me.wakes.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Runs every part of job slot `j` that worker `me` can claim; returns whether
    /// to linger after it (the copy's [`Share::linger`]; no when nothing was left).
    fn help(&self, me: &WorkerStats, j: usize) -> bool {
        let job = &self.jobs[j];
        let mut linger = false;
        while let Some((k, d)) = job.claim() {
            // SAFETY: a claimed part of a live publication: its publisher keeps the
            // ranges valid until it sees the part finished.
            unsafe { d.copy_part(k) };
            job.finish_part();
            me.parts.fetch_add(1, Ordering::Relaxed);
            linger = d.linger;
        }
        linger
    }
}

/// The part size of a copy of `len` bytes shared by `threads` threads: whole pages,
/// about `per_thread` parts per thread, at least [`PART_MIN_BYTES`] (or the whole
/// copy), and never more parts than a job holds.
fn part_bytes(len: usize, threads: usize, per_thread: usize) -> usize {
    let parts = threads.saturating_mul(per_thread).clamp(1, MAX_PARTS);
    len.div_ceil(parts)
        .max(PART_MIN_BYTES.min(len))
        .next_multiple_of(PART_ALIGN)
        .max(PART_ALIGN)
}

#[cfg(all(test, not(loom)))]
mod tests;
