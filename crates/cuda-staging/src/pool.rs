//! The process-wide pool of copy threads that every [`crate::StagingBuffer`] shares.
//!
//! - **Bounded:** one pool per process, started at the first copy that wants help,
//!   with [`pool_threads`] workers (one fewer than the cores, at most 15) plus one
//!   scheduler thread: never more threads than cores, however many buffers exist.
//! - **Shared without waiting on each other:** a copy is published as a [`Job`] in a
//!   free slot (32 slots, one per concurrent copy) and offered to free workers
//!   through their own mailboxes (`mailbox.rs`), awake ones first. Enlisted workers
//!   claim its parts; the publishing thread claims whatever is left and waits only
//!   for parts a running worker took (bounded by one part). Two buffers copying at
//!   once each get the workers that are free, and neither waits for the other's copy.
//! - **Awake when a transfer comes:** a worker spins on its own mailbox for [`SPIN`]
//!   after its last part (back-to-back transfers pay no wake-up), then parks. A
//!   buffer whose transfers arrive periodically (a frame loop) tells the pool when
//!   it expects the next one and how many helpers it will want; the scheduler
//!   thread wakes that many workers shortly before, and buffers in low-latency mode
//!   keep theirs spinning (see `schedule.rs`).
//! - **Helpers ready before the source is:** a download's copy-out can be published
//!   before its DMA has landed, behind the job's gate (`gate.rs`, [`Pool::copy_after`]):
//!   helpers prefetch their part of the destination while the DMA runs and copy the
//!   moment it lands.
//! - **Never waiting for a cold worker:** a parked worker is enlisted only for copies
//!   of at least [`WAKE_MIN_BYTES`] or of a buffer called back to back (at most two
//!   directly; each that wakes to find work left brings one more); otherwise the
//!   publisher copies the parts itself, and never waits for a worker to wake.
//!
//! Nothing allocates and no thread starts per transfer.

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use crate::copy::CopyKind;
use crate::job::{Job, MAX_PARTS};
use crate::prefetch::prefetch_for_write;
use crate::sync::{spin_hint, AtomicU64, Ordering};

mod gate;
mod mailbox;
mod schedule;

use gate::{AtGate, Gate};
use mailbox::{Mailbox, Offer};
pub(crate) use schedule::Client;
use schedule::{ClientSlot, MAX_CLIENTS};

/// How long a worker spins after its last part before it parks.
pub(crate) const SPIN: Duration = Duration::from_micros(200);
/// A copy of at least this size wakes parked workers when too few are awake.
pub(crate) const WAKE_MIN_BYTES: usize = 512 << 10;
/// Concurrent copies the pool takes; more copy on their own thread alone.
const MAX_JOBS: usize = 32;
/// Parts are cut at this granularity, so no two threads share a page.
const PART_ALIGN: usize = 4096;

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

/// A worker's state, as others see it.
#[repr(align(128))]
struct WorkerState {
    /// Where publishers enlist the worker, and its "about to park" flag.
    mailbox: Mailbox,
    /// Nanoseconds (pool clock) until which the worker spins even without work.
    hot_until: AtomicU64,
    /// Times the worker came back from parking.
    wakes: AtomicU64,
    thread: OnceLock<Thread>,
}

impl WorkerState {
    /// Unparks the worker's thread (once it has started).
    fn unpark(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }
}

/// The pool; see the module notes.
pub(crate) struct Pool {
    jobs: Box<[Job<CopyDesc>]>,
    /// One per job slot (`gate.rs`).
    gates: Box<[Gate]>,
    workers: Box<[WorkerState]>,
    /// Workers not parked.
    awake: AtomicUsize,
    clients: Box<[ClientSlot]>,
    scheduler: OnceLock<Thread>,
    scheduler_idle: AtomicBool,
    shutdown: AtomicBool,
    epoch: Instant,
}

/// Workers of the process-wide pool: one fewer than the cores, at most 15, so with
/// the scheduler the pool never has more threads than cores. 0 on a one-core
/// machine, where no pool starts and every copy runs on its caller's thread.
///
/// Why at most 15 on larger machines too, measured on the 32-core host of two
/// H200s: a pool of 31 workers took two GPUs' concurrent 4915200-byte `download`s
/// from 33-38 to 52-54 GB/s in all (interleaved A/B, two rounds; uploads unchanged),
/// but in a full `cargo xtask bench` run with it two GPUs' 64 MiB `upload`s moved
/// 36.4 GB/s, less than one GPU's 40.6, with up to 34 threads wanting 32 cores
/// (that run's pageable baselines were also 20-30% slower than an hour before, so
/// the host may share the blame). Raising the cap waits for a run that tells the two
/// apart.
pub fn pool_threads() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get().min(16) - 1)
}

static GLOBAL: OnceLock<Option<Arc<Pool>>> = OnceLock::new();

/// The process-wide pool, started on first use; `None` when its threads could not
/// be started (then every copy runs on its caller's thread).
pub(crate) fn global() -> Option<&'static Arc<Pool>> {
    GLOBAL
        .get_or_init(|| match pool_threads() {
            0 => None,
            n => Pool::start(n).ok().map(|(p, _)| p),
        })
        .as_ref()
}

/// Threads the process-wide pool has started: 0 before the first copy that wants
/// helpers, then [`pool_threads`] workers plus its scheduler, for the life of the
/// process, however many buffers use it.
pub fn pool_threads_started() -> usize {
    GLOBAL
        .get()
        .and_then(Option::as_ref)
        .map_or(0, |p| p.workers() + 1)
}

impl Pool {
    /// Starts a pool of `workers` workers and its scheduler; returns the join
    /// handles (the process-wide pool never joins them).
    pub(crate) fn start(workers: usize) -> std::io::Result<(Arc<Pool>, Vec<JoinHandle<()>>)> {
        let pool = Arc::new(Pool {
            jobs: (0..MAX_JOBS).map(|_| Job::new(CopyDesc::EMPTY)).collect(),
            gates: (0..MAX_JOBS).map(|_| Gate::new()).collect(),
            workers: (0..workers)
                .map(|_| WorkerState {
                    mailbox: Mailbox::new(),
                    hot_until: AtomicU64::new(0),
                    wakes: AtomicU64::new(0),
                    thread: OnceLock::new(),
                })
                .collect(),
            awake: AtomicUsize::new(workers),
            clients: (0..MAX_CLIENTS).map(|_| ClientSlot::new()).collect(),
            scheduler: OnceLock::new(),
            scheduler_idle: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            epoch: Instant::now(),
        });
        let mut handles = Vec::with_capacity(workers + 1);
        let spawned = (|| -> std::io::Result<()> {
            for i in 0..workers {
                let p = Arc::clone(&pool);
                let h = std::thread::Builder::new()
                    .name(format!("staging-copy-{i}"))
                    .spawn(move || p.worker(i))?;
                let _ = pool.workers[i].thread.set(h.thread().clone());
                handles.push(h);
            }
            let p = Arc::clone(&pool);
            let h = std::thread::Builder::new()
                .name("staging-sched".into())
                .spawn(move || p.schedule())?;
            let _ = pool.scheduler.set(h.thread().clone());
            handles.push(h);
            Ok(())
        })();
        if let Err(e) = spawned {
            pool.stop(handles);
            return Err(e);
        }
        Ok((pool, handles))
    }

    /// Stops the workers and the scheduler and joins them (for pools other than the
    /// process-wide one).
    pub(crate) fn stop(&self, handles: Vec<JoinHandle<()>>) {
        self.shutdown.store(true, Ordering::SeqCst);
        for w in self.workers.iter() {
            w.unpark();
        }
        if let Some(t) = self.scheduler.get() {
            t.unpark();
        }
        for h in handles {
            let _ = h.join();
        }
    }

    /// Workers in the pool.
    pub(crate) fn workers(&self) -> usize {
        self.workers.len()
    }

    /// Workers not parked right now.
    pub(crate) fn awake(&self) -> usize {
        self.awake.load(Ordering::Relaxed)
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Pool-clock nanoseconds of `t`.
    pub(crate) fn at(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_nanos() as u64
    }

    /// Copies `len` bytes split over up to `parts` threads (the caller and free
    /// workers), returning when every byte is copied. Parked workers are woken for
    /// it when `wake` or when `len` is at least [`WAKE_MIN_BYTES`].
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
        parts: usize,
        wake: bool,
    ) {
        let Some((j, parts)) = self.acquire_job(parts) else {
            // SAFETY: condition 1.
            unsafe { kind.copy(dst, src, len) };
            return;
        };
        // SAFETY: we own slot `j`; condition 1 passes through.
        let (parts, _) = unsafe { self.publish(j, dst, src, len, kind, parts, false) };
        self.enlist(j, parts - 1, wake || len >= WAKE_MIN_BYTES);
        // SAFETY: we own slot `j` and published `parts` parts in it.
        unsafe { self.finish(j, parts) };
    }

    /// A free job slot for a copy split `parts` ways (clamped to the threads there
    /// are), with the clamped count; `None` for a copy not worth splitting or with
    /// every slot taken.
    fn acquire_job(&self, parts: usize) -> Option<(usize, usize)> {
        let parts = parts.clamp(1, (self.workers.len() + 1).min(MAX_PARTS));
        if parts < 2 {
            return None;
        }
        (0..self.jobs.len())
            .find(|&j| self.jobs[j].try_acquire())
            .map(|j| (j, parts))
    }

    /// Publishes the copy in slot `j` in at most `parts` parts of whole pages;
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
        parts: usize,
        gated: bool,
    ) -> (usize, CopyDesc) {
        let per = len
            .div_ceil(parts)
            .next_multiple_of(PART_ALIGN)
            .max(PART_ALIGN);
        let parts = len.div_ceil(per).max(1);
        let desc = CopyDesc {
            dst,
            src,
            len,
            per,
            kind,
            gated,
        };
        // SAFETY: condition 1; `parts <= MAX_PARTS` (`acquire_job` clamped it, and
        // whole-page parts are never more).
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

    /// Offers job `j` to up to `wanted` free workers that are awake; when `wake`,
    /// also to parked ones, at most two (each woken worker that finds work left
    /// brings one more). Publishers start their scan at different workers, so
    /// concurrent copies rarely offer to the same one.
    fn enlist(&self, j: usize, wanted: usize, wake: bool) {
        let n = self.workers.len();
        let base = j * 5 % n;
        let mut got = 0;
        for k in 0..n {
            if got == wanted {
                return;
            }
            let w = &self.workers[(base + k) % n];
            if w.mailbox.is_sleeping() {
                continue;
            }
            if let Offer::Taken { parked } = w.mailbox.offer(j) {
                got += 1;
                if parked {
                    w.unpark();
                }
            }
        }
        if wake {
            self.wake_for(j, (wanted - got).min(2));
        }
    }

    /// Offers job `j` to up to `count` parked workers and wakes them.
    fn wake_for(&self, j: usize, mut count: usize) {
        for w in self.workers.iter() {
            if count == 0 {
                return;
            }
            if !w.mailbox.is_sleeping() {
                continue;
            }
            if let Offer::Taken { parked } = w.mailbox.offer(j) {
                // A worker that woke in between finds the mail itself; unparking it
                // would only leave a stale token that cuts its next park short.
                if parked {
                    w.unpark();
                }
                count -= 1;
            }
        }
    }

    fn worker(&self, i: usize) {
        let me = &self.workers[i];
        let mut last_work = self.now_ns();
        loop {
            if self.shutdown.load(Ordering::Acquire) {
                return;
            }
            if let Some(j) = me.mailbox.take() {
                self.help(j);
                me.mailbox.clear();
                last_work = self.now_ns();
                continue;
            }
            let now = self.now_ns();
            let spin_until =
                (last_work + SPIN.as_nanos() as u64).max(me.hot_until.load(Ordering::Acquire));
            if now < spin_until {
                // Watch the mailbox between pauses.
                for _ in 0..64 {
                    if me.mailbox.take().is_some() {
                        break;
                    }
                    spin_hint();
                }
                continue;
            }
            self.awake.fetch_sub(1, Ordering::Relaxed);
            // `announce_sleep` fails if an offer came in first (see `mailbox.rs`),
            // and `hot_until` is read after it (both SeqCst, as the scheduler's
            // `heat`), so neither an offer nor a wake-up in between is missed.
            if me.mailbox.announce_sleep()
                && me.hot_until.load(Ordering::SeqCst) <= now
                && !self.shutdown.load(Ordering::SeqCst)
            {
                std::thread::park();
            }
            me.wakes.fetch_add(1, Ordering::Relaxed);
            self.awake.fetch_add(1, Ordering::Relaxed);
            me.mailbox.woke();
            last_work = self.now_ns();
            if let Some(j) = me.mailbox.take() {
                if self.jobs[j].has_unclaimed() {
                    // Enlisted while parked (or just before parking) and work is
                    // left: bring one more helper along. A small copy offered to a
                    // worker just as it went to sleep can start this chain too;
                    // the publisher never waits for it.
                    self.wake_for(j, 1);
                }
            }
        }
    }

    /// Runs every part of job `j` this worker can claim.
    fn help(&self, j: usize) {
        let job = &self.jobs[j];
        while let Some((k, d)) = job.claim() {
            // SAFETY: a claimed part of a live publication: its publisher keeps the
            // ranges valid until it sees the part finished.
            unsafe { d.run_part(k, &self.gates[j], true) };
            job.finish_part();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
