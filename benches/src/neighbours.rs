//! The neighbour threads of `contended`: plain compute on the other cores, standing
//! in for a host's decoders and preprocessing, counting their work.
//!
//! Each neighbour runs an integer hash (xorshift) over its own L1-sized array
//! ([`ARRAY_WORDS`] words), adding the iterations of every batch of [`BATCH`] to
//! its own cache-line-padded counter (`Relaxed`: only the totals matter). The
//! threads start once and are joined at the end ([`Neighbours::stop`], or drop).
//!
//! [`Neighbours::pause`] parks every neighbour and returns once all are parked;
//! [`Neighbours::resume`] lets them run again. Read the CPU and work totals
//! ([`Neighbours::read`]) while they are parked: then the process's CPU clock has
//! counted their time exactly (see [`crate::cpu_time`]: a thread running on another
//! core is counted only up to its last tick), and no batch is half counted.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::cpu_time::ThreadCpuClock;

/// Words of each neighbour's array: 16 KiB, inside any L1 data cache.
pub const ARRAY_WORDS: usize = 2048;

/// Iterations between two looks at the state and two counter updates (a few µs).
pub const BATCH: u64 = 4096;

const RUN: u8 = 0;
const PAUSE: u8 = 1;
const STOP: u8 = 2;

/// One neighbour's work counter, alone on its cache lines (two, against the
/// adjacent-line prefetcher), so counting does not bounce lines between cores.
#[repr(align(128))]
#[derive(Debug, Default)]
struct PaddedCounter(AtomicU64);

/// What the neighbours and the thread driving them share.
#[derive(Debug)]
struct Shared {
    /// [`RUN`], [`PAUSE`] or [`STOP`]; a neighbour looks after every batch.
    state: AtomicU8,
    /// Neighbours in their parked section.
    parked: Mutex<usize>,
    /// Signalled when `parked` or the state changes.
    changed: Condvar,
    /// Iterations so far, per neighbour.
    counters: Vec<PaddedCounter>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, usize> {
        self.parked.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The neighbours' totals at one moment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NeighbourReading {
    /// CPU time of all neighbours so far; `None` where a thread's clock is
    /// unavailable ([`crate::cpu_time`]).
    pub cpu: Option<Duration>,
    /// Iterations of all neighbours so far.
    pub iterations: u64,
}

/// Running (or paused) neighbour threads.
#[derive(Debug)]
pub struct Neighbours {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    /// Each thread's CPU clock, `None` where unavailable.
    clocks: Vec<Option<ThreadCpuClock>>,
}

impl Neighbours {
    /// Starts `count` neighbours, running. A thread that cannot be started is an
    /// error (the ones already started are stopped).
    pub fn start(count: usize) -> Result<Neighbours, String> {
        let shared = Arc::new(Shared {
            state: AtomicU8::new(RUN),
            parked: Mutex::new(0),
            changed: Condvar::new(),
            counters: (0..count).map(|_| PaddedCounter::default()).collect(),
        });
        let mut started = Neighbours {
            shared: Arc::clone(&shared),
            threads: Vec::with_capacity(count),
            clocks: Vec::with_capacity(count),
        };
        let (clock_tx, clock_rx) = mpsc::channel();
        for k in 0..count {
            let (shared, clock_tx) = (Arc::clone(&shared), clock_tx.clone());
            let t = std::thread::Builder::new()
                .name(format!("bench-neighbour-{k}"))
                .spawn(move || {
                    // The receiver outlives the start-up; a failed send only means
                    // the start was abandoned.
                    let _ = clock_tx.send(ThreadCpuClock::of_current_thread());
                    drop(clock_tx);
                    neighbour(&shared, k);
                })
                .map_err(|e| format!("starting neighbour thread {k}: {e}"))?;
            started.threads.push(t);
        }
        drop(clock_tx);
        for _ in 0..count {
            let clock = clock_rx
                .recv()
                .map_err(|_| "a neighbour thread ended before it started".to_string())?;
            started.clocks.push(clock);
        }
        Ok(started)
    }

    /// How many neighbours run.
    pub fn count(&self) -> usize {
        self.threads.len()
    }

    /// Parks every neighbour; returns once all are parked.
    pub fn pause(&self) {
        self.shared.state.store(PAUSE, Ordering::Release);
        let mut parked = self.shared.lock();
        while *parked < self.count() {
            parked = self
                .shared
                .changed
                .wait(parked)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Lets the neighbours run again.
    pub fn resume(&self) {
        let _parked = self.shared.lock();
        self.shared.state.store(RUN, Ordering::Release);
        self.shared.changed.notify_all();
    }

    /// The neighbours' CPU time and iterations so far; exact while they are paused.
    pub fn read(&self) -> NeighbourReading {
        let cpu = self
            .clocks
            .iter()
            .try_fold(Duration::ZERO, |sum, c| Some(sum + c.as_ref()?.read()?));
        let iterations = self
            .shared
            .counters
            .iter()
            .map(|c| c.0.load(Ordering::Relaxed))
            .sum();
        NeighbourReading { cpu, iterations }
    }

    /// Stops and joins every neighbour.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for Neighbours {
    fn drop(&mut self) {
        {
            let _parked = self.shared.lock();
            self.shared.state.store(STOP, Ordering::Release);
            self.shared.changed.notify_all();
        }
        for t in self.threads.drain(..) {
            // A neighbour only computes; there is nothing to report if one panicked.
            let _ = t.join();
        }
    }
}

/// One step of xorshift64 (never 0 from a non-zero state).
pub fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

/// `iterations` steps of a neighbour's work on `array` from state `x`; returns the
/// new state. Each step hashes the state and adds it into a word it picks.
pub fn work(array: &mut [u64; ARRAY_WORDS], mut x: u64, iterations: u64) -> u64 {
    for _ in 0..iterations {
        x = xorshift(x);
        let w = &mut array[(x as usize) % ARRAY_WORDS];
        *w = w.wrapping_add(x);
    }
    x
}

/// A neighbour's loop: work in batches while the state is [`RUN`], park while it
/// is [`PAUSE`], return at [`STOP`].
fn neighbour(shared: &Shared, k: usize) {
    let mut array = [1u64; ARRAY_WORDS];
    let mut x = 0x9e37_79b9_7f4a_7c15 ^ (k as u64 + 1);
    let counter = &shared.counters[k].0;
    loop {
        if shared.state.load(Ordering::Acquire) == RUN {
            x = work(&mut array, x, BATCH);
            black_box(&mut array);
            counter.fetch_add(BATCH, Ordering::Relaxed);
            continue;
        }
        let mut parked = shared.lock();
        *parked += 1;
        shared.changed.notify_all();
        while shared.state.load(Ordering::Acquire) == PAUSE {
            parked = shared
                .changed
                .wait(parked)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *parked -= 1;
        if shared.state.load(Ordering::Acquire) == STOP {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_work_touches_the_array_and_never_sticks_at_zero() {
        let mut a = [0u64; ARRAY_WORDS];
        let x = work(&mut a, 1, 10_000);
        assert_ne!(x, 0);
        assert!(a.iter().filter(|&&w| w != 0).count() > ARRAY_WORDS / 2);
        assert_eq!(xorshift(1), work(&mut [0; ARRAY_WORDS], 1, 1));
        assert_eq!(std::mem::align_of::<PaddedCounter>(), 128);
    }

    #[test]
    fn paused_neighbours_do_no_work_and_resumed_ones_do() {
        let n = Neighbours::start(2).unwrap();
        assert_eq!(n.count(), 2);
        std::thread::sleep(Duration::from_millis(20));
        n.pause();
        let a = n.read();
        assert!(a.iterations > 0, "{a:?}");
        assert_eq!(a.iterations % BATCH, 0, "whole batches only");
        // Parked: the totals stand still, CPU included.
        std::thread::sleep(Duration::from_millis(20));
        let b = n.read();
        assert_eq!(b.iterations, a.iterations);
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            let (ca, cb) = (a.cpu.unwrap(), b.cpu.unwrap());
            assert!(ca > Duration::ZERO);
            assert!(cb - ca < Duration::from_millis(2), "{ca:?} -> {cb:?}");
        }
        n.resume();
        std::thread::sleep(Duration::from_millis(20));
        n.pause();
        assert!(n.read().iterations > b.iterations);
        // Pausing twice in a row, and stopping while paused, both return.
        n.pause();
        n.stop();
    }

    #[test]
    fn running_neighbours_stop_and_none_is_fine() {
        let n = Neighbours::start(2).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        n.stop();
        let none = Neighbours::start(0).unwrap();
        none.pause();
        none.resume();
        assert_eq!(none.read().iterations, 0);
        assert_eq!(none.read().cpu, Some(Duration::ZERO));
    }
}
