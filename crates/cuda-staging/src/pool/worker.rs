//! A worker of the pool: its state as others see it, and its loop: help with the
//! job its mailbox holds, spin for the copy's linger (or while a transfer keeps it
//! hot), then count its CPU time and park.

use std::sync::OnceLock;
use std::thread::Thread;

use super::mailbox::Mailbox;
use super::Pool;
use crate::cpu_clock::thread_cpu_ns;
use crate::sync::{spin_hint, AtomicU64, Ordering};

/// A spinning worker reads its CPU clock (a system call) at most this often.
const CPU_READ_NS: u64 = 1_000_000;

/// A worker's state, as others see it.
#[repr(align(128))]
pub(super) struct WorkerState {
    /// Where publishers enlist the worker, and its "about to park" flag.
    pub(super) mailbox: Mailbox,
    /// Nanoseconds (pool clock) until which the worker spins even without work: a
    /// pipelined download's early wake-up ([`Pool::heat`]).
    pub(super) hot_until: AtomicU64,
    /// Times the worker came back from parking.
    pub(super) wakes: AtomicU64,
    /// Parts of other threads' copies the worker copied.
    pub(super) parts: AtomicU64,
    /// The worker's CPU time in nanoseconds, as of its last look at its clock
    /// (when it parks, and every [`CPU_READ_NS`] while it spins).
    pub(super) cpu_ns: AtomicU64,
    pub(super) thread: OnceLock<Thread>,
}

impl WorkerState {
    pub(super) fn new() -> WorkerState {
        WorkerState {
            mailbox: Mailbox::new(),
            hot_until: AtomicU64::new(0),
            wakes: AtomicU64::new(0),
            parts: AtomicU64::new(0),
            cpu_ns: AtomicU64::new(0),
            thread: OnceLock::new(),
        }
    }

    /// Unparks the worker's thread (once it has started).
    pub(super) fn unpark(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    /// Stores the worker's CPU time; called on the worker's own thread.
    fn record_cpu(&self) {
        if let Some(ns) = thread_cpu_ns() {
            self.cpu_ns.store(ns, Ordering::Relaxed);
        }
    }
}

impl Pool {
    /// The loop of worker `i`, until the pool shuts down.
    pub(super) fn worker(&self, i: usize) {
        let me = &self.workers[i];
        // Spin until then for more work (pool clock): the linger of the last copy
        // helped with.
        let mut linger_until = 0;
        let mut cpu_read = self.now_ns();
        loop {
            if self.shutdown.load(Ordering::Acquire) {
                me.record_cpu();
                return;
            }
            if let Some(j) = me.mailbox.take() {
                let linger = self.help(me, j);
                me.mailbox.clear();
                linger_until = self.now_ns() + linger;
                continue;
            }
            let now = self.now_ns();
            let spin_until = linger_until.max(me.hot_until.load(Ordering::Acquire));
            if now < spin_until {
                if now - cpu_read >= CPU_READ_NS {
                    me.record_cpu();
                    cpu_read = now;
                }
                // Watch the mailbox between pauses.
                for _ in 0..64 {
                    if me.mailbox.take().is_some() {
                        break;
                    }
                    spin_hint();
                }
                continue;
            }
            me.record_cpu();
            self.awake.fetch_sub(1, Ordering::Relaxed);
            // `announce_sleep` fails if an offer came in first (see `mailbox.rs`),
            // and `hot_until` is read after it (both SeqCst, as `heat`'s), so
            // neither an offer nor an early wake-up in between is missed.
            if me.mailbox.announce_sleep()
                && me.hot_until.load(Ordering::SeqCst) <= now
                && !self.shutdown.load(Ordering::SeqCst)
            {
                std::thread::park();
                me.wakes.fetch_add(1, Ordering::Relaxed);
            }
            self.awake.fetch_add(1, Ordering::Relaxed);
            me.mailbox.woke();
            linger_until = self.now_ns();
            cpu_read = linger_until;
        }
    }

    /// Runs every part of job `j` worker `me` can claim; returns how long to linger
    /// after it (the copy's [`Share::linger_ns`]; 0 when nothing was left to claim).
    fn help(&self, me: &WorkerState, j: usize) -> u64 {
        let job = &self.jobs[j];
        let mut linger = 0;
        while let Some((k, d)) = job.claim() {
            // SAFETY: a claimed part of a live publication: its publisher keeps the
            // ranges valid until it sees the part finished.
            unsafe { d.run_part(k, &self.gates[j], true) };
            job.finish_part();
            me.parts.fetch_add(1, Ordering::Relaxed);
            linger = d.linger_ns;
        }
        linger
    }
}
