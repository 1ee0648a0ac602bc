//! The process-wide pool of copy threads that every [`crate::StagingBuffer`] shares.
//!
//! - **Bounded, and sized by the program:** one pool per process, started at the
//!   first copy that wants help, with [`crate::pool_threads`] helper threads (by
//!   default one fewer than the cores, at most 15; `CUDA_STAGING_COPY_THREADS` or
//!   [`crate::set_copy_pool_threads`] set it, 0 meaning every copy runs on its
//!   caller's thread alone). Never more threads, however many buffers exist.
//! - **Woken by the transfer that needs them, parked otherwise:** nothing of the
//!   pool runs between transfers. A copy is published as a [`Job`] in a free slot
//!   (32 slots, one per concurrent copy), offered to free workers that are awake
//!   through their own mailboxes (`mailbox.rs`), and to as many parked ones as its
//!   transfer may wake (`tuning::helpers_to_wake`: none for a small copy after a
//!   gap). The publishing thread starts on the parts at once and helpers join as
//!   they come; a copy is cut in small parts, so a helper that wakes late still
//!   finds work and one that the OS preempts holds up little. A pipelined download
//!   wakes its helpers when it starts ([`Pool::heat`]), so they are up when its
//!   first chunk lands.
//! - **Spinning only while work is microseconds away:** a worker spins for
//!   `tuning::LINGER` after its last part (the next chunk of the same transfer, the
//!   next transfer of a tight loop), then parks. Each worker counts its CPU time
//!   when it parks ([`crate::pool_stats`]).
//! - **Shared without waiting on each other:** two buffers copying at once each get
//!   the workers that are free; the publisher claims whatever is left and waits
//!   only for parts a running worker took.
//! - **Helpers ready before the source is:** a download's copy-out can be published
//!   before its DMA has landed, behind the job's gate (`gate.rs`, [`Pool::copy_after`]):
//!   helpers prefetch their part of the destination while the DMA runs and copy the
//!   moment it lands.
//!
//! Nothing allocates and no thread starts per transfer.

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::job::{Job, MAX_PARTS};
use crate::prefetch::prefetch_for_write;
use crate::stores::CopyKind;
use crate::sync::{fence, Ordering};

mod control;
mod gate;
mod idle;
mod mailbox;
mod worker;

pub(crate) use control::global;
pub use control::{
    pool_stats, pool_threads, pool_threads_started, set_copy_pool_threads, PoolStats,
    COPY_THREADS_ENV, MAX_POOL_THREADS,
};
use gate::{AtGate, Gate};
use idle::IdleCores;
use mailbox::Offer;
use worker::WorkerState;

/// Concurrent copies the pool takes; more copy on their own thread alone.
const MAX_JOBS: usize = 32;
/// Parts are cut at this granularity, so no two threads share a page.
const PART_ALIGN: usize = 4096;
/// The smallest part: about a µs of copying, against a claim of tens of ns.
const PART_MIN_BYTES: usize = 16 << 10;

/// How a copy is shared out: over up to `threads` threads, the caller included,
/// `helpers` of them pool workers (free ones that are awake first, then parked ones
/// woken for it), each spinning `linger_ns` after its last part for the next copy;
/// cut in about `parts_per_thread` parts per thread taking part (more when helpers
/// must be woken and arrive late, one when they are spinning already).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Share {
    pub(crate) threads: usize,
    pub(crate) helpers: usize,
    pub(crate) linger_ns: u64,
    pub(crate) parts_per_thread: usize,
}

/// One copy of `len` bytes cut into parts of `per` bytes.
#[derive(Clone, Copy)]
struct CopyDesc {
    dst: *mut u8,
    src: *const u8,
    len: usize,
    per: usize,
    kind: CopyKind,
    /// Published before the source is ready: parts wait at the job's gate.
    gated: bool,
    /// How long a helper spins after a part of this copy ([`Share::linger_ns`]).
    linger_ns: u64,
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
        kind: CopyKind::Plain,
        gated: false,
        linger_ns: 0,
    };

    /// Copies part `i`. When gated, first waits at `gate` (`gate.rs`): a part whose
    /// gate is closed has its destination prefetched while it waits; it is skipped
    /// if the gate is cancelled, and handed back to the publisher (not copied here)
    /// if the wait outlasts the spin and `may_defer`.
    ///
    /// # Safety
    /// 1. The publisher's ranges are valid (see [`Pool::copy`] and
    ///    [`Pool::copy_after`]) and `i` is a part of this publication, claimed by the
    ///    caller.
    /// 2. `gate` is the gate of this publication's job slot.
    unsafe fn run_part(&self, i: usize, gate: &Gate, may_defer: bool) {
        if self.gated {
            let at_gate = gate.pass(i, may_defer, || self.prefetch_part(i));
            if at_gate != AtGate::Copy {
                return;
            }
        }
        // SAFETY: condition 1; a gated source is ready once its gate opened
        // (condition 2).
        unsafe { self.copy_part(i) }
    }

    /// Copies part `i`, gate or not.
    ///
    /// # Safety
    /// 1. The publisher's ranges are valid and their source is ready; `i` is a part of
    ///    this publication that no other thread copies.
    unsafe fn copy_part(&self, i: usize) {
        let off = i * self.per;
        let n = self.per.min(self.len - off);
        // SAFETY: `off + n <= len`, inside both ranges (condition 1); parts do not
        // overlap each other.
        unsafe { self.kind.copy(self.dst.add(off), self.src.add(off), n) }
    }

    /// Asks the CPU for part `i`'s destination lines, for writing (never faults).
    fn prefetch_part(&self, i: usize) {
        let off = i * self.per;
        prefetch_for_write(self.dst.wrapping_add(off), self.per.min(self.len - off));
    }
}

/// The pool; see the module notes.
pub(crate) struct Pool {
    jobs: Box<[Job<CopyDesc>]>,
    /// One per job slot (`gate.rs`).
    gates: Box<[Gate]>,
    /// Every worker the pool can have; the first `started` have a thread.
    workers: Box<[WorkerState]>,
    /// Workers whose thread was started (`workers[..started]`).
    started: AtomicUsize,
    /// Workers copies may enlist (`workers[..limit]`, at most `started` once the
    /// pool is in use): the pool's size as the program set it.
    limit: AtomicUsize,
    /// Workers not parked.
    awake: AtomicUsize,
    /// Where [`Pool::heat`] starts its scan for an early wake-up, moved on by each
    /// so concurrent transfers wake different workers.
    next_heat: AtomicUsize,
    /// The machine's idle cores as last read ([`Pool::idle_cores`]).
    idle: IdleCores,
    /// The started threads, for [`Pool::stop`] (and growth, which takes the lock).
    handles: Mutex<Vec<JoinHandle<()>>>,
    shutdown: AtomicBool,
    epoch: Instant,
}

impl Pool {
    /// A pool that can grow to `capacity` workers, with none started yet and a size
    /// of `limit`.
    pub(crate) fn new(capacity: usize, limit: usize) -> Arc<Pool> {
        Arc::new(Pool {
            jobs: (0..MAX_JOBS).map(|_| Job::new(CopyDesc::EMPTY)).collect(),
            gates: (0..MAX_JOBS).map(|_| Gate::new()).collect(),
            workers: (0..capacity).map(|_| WorkerState::new()).collect(),
            started: AtomicUsize::new(0),
            limit: AtomicUsize::new(limit.min(capacity)),
            awake: AtomicUsize::new(0),
            next_heat: AtomicUsize::new(0),
            idle: IdleCores::new(),
            handles: Mutex::new(Vec::new()),
            shutdown: AtomicBool::new(false),
            epoch: Instant::now(),
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
            // Counted awake before it runs: it spins its linger first, then parks.
            self.awake.fetch_add(1, Ordering::Relaxed);
            let spawned = std::thread::Builder::new()
                .name(format!("staging-copy-{i}"))
                .spawn(move || p.worker(i));
            match spawned {
                Ok(h) => {
                    let _ = self.workers[i].thread.set(h.thread().clone());
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
        self.shutdown.store(true, Ordering::SeqCst);
        let handles = std::mem::take(&mut *self.handles.lock().unwrap_or_else(|e| e.into_inner()));
        for w in self.workers.iter() {
            w.unpark();
        }
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

    /// Workers not parked right now.
    pub(crate) fn awake(&self) -> usize {
        self.awake.load(Ordering::Relaxed)
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Pool-clock nanoseconds `d` from now.
    pub(crate) fn deadline_in(&self, d: Duration) -> u64 {
        self.now_ns() + d.as_nanos() as u64
    }

    /// Keeps up to `n` free workers spinning until `until` (pool clock), waking
    /// those that are parked, awake ones first: a pipelined download's helpers, so
    /// they run by the time its first chunk lands. The scan starts where the last
    /// call left off, so concurrent downloads wake different workers.
    pub(crate) fn heat(&self, n: usize, until: u64) {
        let count = self.enlistable();
        if count == 0 || n == 0 {
            return;
        }
        let base = self.next_heat.fetch_add(n, Ordering::Relaxed) % count;
        let mut left = n.min(count);
        for parked in [false, true] {
            for k in 0..count {
                if left == 0 {
                    return;
                }
                let w = &self.workers[(base + k) % count];
                if w.mailbox.is_sleeping() != parked || w.mailbox.take().is_some() {
                    continue;
                }
                w.hot_until.fetch_max(until, Ordering::SeqCst);
                // Pairs with the fence in `Mailbox::announce_sleep`: either the worker
                // sees `hot_until`, or this sees it parking (see `mailbox.rs`).
                fence(Ordering::SeqCst);
                if w.mailbox.is_sleeping() {
                    w.unpark();
                }
                left -= 1;
            }
        }
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
        kind: CopyKind,
        share: Share,
    ) {
        let job = if share.helpers == 0 {
            None
        } else {
            self.acquire_job(share.threads)
        };
        let Some((j, threads)) = job else {
            // SAFETY: condition 1.
            unsafe { kind.copy(dst, src, len) };
            return;
        };
        // SAFETY: we own slot `j`; condition 1 passes through.
        let (parts, _) = unsafe { self.publish(j, dst, src, len, kind, threads, share, false) };
        self.enlist(j, share.helpers.min(threads - 1));
        // SAFETY: we own slot `j` and published `parts` parts in it.
        unsafe { self.finish(j, parts) };
    }

    /// A free job slot for a copy shared by up to `threads` threads (clamped to the
    /// workers copies may enlist, plus the caller), with the clamped count; `None`
    /// for a copy not worth splitting or with every slot taken.
    fn acquire_job(&self, threads: usize) -> Option<(usize, usize)> {
        let threads = threads.min(self.enlistable() + 1);
        if threads < 2 {
            return None;
        }
        (0..self.jobs.len())
            .find(|&j| self.jobs[j].try_acquire())
            .map(|j| (j, threads))
    }

    /// Publishes the copy in slot `j`, cut in parts of whole pages, about
    /// `tuning::PARTS_PER_THREAD` per thread of `threads` (at least
    /// [`PART_MIN_BYTES`] each; at most [`gate::MAX_GATED_PARTS`] when `gated`);
    /// returns how many, and the description published.
    ///
    /// # Safety
    /// 1. We own slot `j` ([`Pool::acquire_job`]) and finished its last publication.
    /// 2. The ranges are as [`Pool::copy`] or, when `gated`, [`Pool::copy_after`] says.
    /// 3. When `gated`, slot `j`'s gate is closed: claimants wait at it before they
    ///    read the source.
    #[allow(clippy::too_many_arguments)]
    unsafe fn publish(
        &self,
        j: usize,
        dst: *mut u8,
        src: *const u8,
        len: usize,
        kind: CopyKind,
        threads: usize,
        share: Share,
        gated: bool,
    ) -> (usize, CopyDesc) {
        let taking_part = share.helpers.min(threads - 1) + 1;
        let per = part_bytes(len, taking_part, share.parts_per_thread, gated);
        let parts = len.div_ceil(per).max(1);
        let desc = CopyDesc {
            dst,
            src,
            len,
            per,
            kind,
            gated,
            linger_ns: share.linger_ns,
        };
        // SAFETY: condition 1; `parts <= MAX_PARTS` (`part_bytes`).
        unsafe { self.jobs[j].publish(desc, parts) };
        (parts, desc)
    }

    /// Claims and runs what is left of slot `j`'s publication of `parts` parts,
    /// waits for the parts helpers claimed, and gives the slot back.
    ///
    /// # Safety
    /// 1. We own slot `j` and published `parts` parts in it; when gated, its gate is
    ///    open or cancelled.
    unsafe fn finish(&self, j: usize, parts: usize) {
        let job = &self.jobs[j];
        let mut mine = 0;
        while let Some((i, d)) = job.claim() {
            // SAFETY: a part we claimed of our own publication, whose ranges the
            // publisher keeps valid (condition 1 of `copy`, `copy_after`); the gate
            // is the slot's, and no longer closed, so nothing is deferred.
            unsafe { d.run_part(i, &self.gates[j], false) };
            mine += 1;
        }
        job.wait_done(parts - mine);
        job.release();
    }

    /// Offers job `j` to up to `wanted` free workers: those awake first, then parked
    /// ones, which it wakes. Publishers start their scan at different workers, so
    /// concurrent copies rarely offer to the same one.
    fn enlist(&self, j: usize, wanted: usize) {
        let n = self.enlistable();
        if n == 0 || wanted == 0 {
            return;
        }
        let base = j * 5 % n;
        let mut got = 0;
        for parked in [false, true] {
            for k in 0..n {
                if got == wanted {
                    return;
                }
                let w = &self.workers[(base + k) % n];
                if w.mailbox.is_sleeping() != parked {
                    continue;
                }
                if let Offer::Taken { parked } = w.mailbox.offer(j) {
                    got += 1;
                    // A worker that woke in between finds the mail itself; unparking
                    // it would only leave a stale token that cuts its next park
                    // short.
                    if parked {
                        w.unpark();
                    }
                }
            }
        }
    }
}

/// The part size of a copy of `len` bytes shared by `threads` threads: whole pages,
/// about `per_thread` parts per thread, at least [`PART_MIN_BYTES`] (or the whole
/// copy), and never more parts than a job (or, `gated`, a gate) holds.
fn part_bytes(len: usize, threads: usize, per_thread: usize, gated: bool) -> usize {
    let most = if gated {
        gate::MAX_GATED_PARTS
    } else {
        MAX_PARTS
    };
    let parts = threads.saturating_mul(per_thread).clamp(1, most);
    len.div_ceil(parts)
        .max(PART_MIN_BYTES.min(len))
        .next_multiple_of(PART_ALIGN)
        .max(PART_ALIGN)
}

#[cfg(all(test, not(loom)))]
mod tests;
