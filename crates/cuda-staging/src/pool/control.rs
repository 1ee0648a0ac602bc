//! The process-wide pool, and the program's handle on it: its size (the
//! `CUDA_STAGING_COPY_THREADS` environment variable, [`set_copy_pool_threads`]) and
//! what it has cost ([`pool_stats`]).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::Pool;
use crate::sync::Ordering;

/// The most helper threads the process-wide pool can have
/// ([`set_copy_pool_threads`] clamps to it).
pub const MAX_POOL_THREADS: usize = 63;

/// The environment variable that sets the pool's size when the process-wide pool
/// is first used: a number of helper threads, `0` for none (every copy on its
/// caller's thread). Anything else, or unset, leaves the default.
pub const COPY_THREADS_ENV: &str = "CUDA_STAGING_COPY_THREADS";

static GLOBAL: OnceLock<Arc<Pool>> = OnceLock::new();

/// The default size: one helper fewer than the cores, at most 15 (the 16-core H200
/// host's whole machine); 0 on one core.
fn default_pool_threads() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get().min(16) - 1)
}

/// The size `value` of [`COPY_THREADS_ENV`] asks for, clamped to
/// [`MAX_POOL_THREADS`]; `None` unless it is a whole number.
fn size_from_env(value: Option<&str>) -> Option<usize> {
    value?
        .trim()
        .parse::<usize>()
        .ok()
        .map(|n| n.min(MAX_POOL_THREADS))
}

/// The process-wide pool, made (with no thread yet) on first use, sized by
/// [`COPY_THREADS_ENV`] or the default.
fn pool() -> &'static Arc<Pool> {
    GLOBAL.get_or_init(|| {
        let env = std::env::var(COPY_THREADS_ENV).ok();
        let size = size_from_env(env.as_deref()).unwrap_or_else(default_pool_threads);
        Pool::new(MAX_POOL_THREADS, size)
    })
}

/// The process-wide pool for a copy that wants helpers, its threads started up to
/// its size; `None` when its size is 0 (or no thread could be started): then every
/// copy runs on its caller's thread.
pub(crate) fn global() -> Option<&'static Pool> {
    let p = pool();
    let limit = p.limit.load(Ordering::Relaxed);
    if limit == 0 {
        return None;
    }
    if p.started.load(Ordering::Acquire) < limit {
        // A failure lowers the size to the threads that did start.
        let _ = p.grow();
    }
    (p.enlistable() > 0).then_some(&**p)
}

/// The size of the process-wide copy pool: helper threads that share large host
/// copies with their callers. By default one fewer than the cores, at most 15;
/// [`COPY_THREADS_ENV`] (`CUDA_STAGING_COPY_THREADS`) or [`set_copy_pool_threads`]
/// set it, and 0 means every copy runs on its caller's thread alone. The threads
/// start at the first copy that wants help; between transfers they are parked.
pub fn pool_threads() -> usize {
    pool().limit.load(Ordering::Relaxed)
}

/// Helper threads the process-wide pool has started: 0 before the first copy that
/// wants help, then [`pool_threads`] of them for the life of the process, however
/// many buffers use it (more if [`set_copy_pool_threads`] raised the size later).
pub fn pool_threads_started() -> usize {
    GLOBAL
        .get()
        .map_or(0, |p| p.started.load(Ordering::Acquire))
}

/// Sets the size of the process-wide copy pool: `threads` helper threads (at most
/// [`MAX_POOL_THREADS`]; 0 switches the pool off, and every copy then runs on its
/// caller's thread alone). Takes effect from the next copy; a larger size starts
/// the new threads at the next copy that wants help, a smaller one leaves the extra
/// threads parked. Returns the size set. Overrides [`COPY_THREADS_ENV`].
///
/// Each buffer still splits a copy over at most
/// [`StagingConfig::copy_threads`](crate::StagingConfig::copy_threads) threads,
/// its caller included.
pub fn set_copy_pool_threads(threads: usize) -> usize {
    let n = threads.min(MAX_POOL_THREADS);
    pool().limit.store(n, Ordering::Relaxed);
    n
}

/// What the process-wide copy pool holds and has spent ([`pool_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolStats {
    /// The pool's size: helper threads copies may use ([`pool_threads`]).
    pub threads: usize,
    /// Helper threads started so far ([`pool_threads_started`]).
    pub threads_started: usize,
    /// Helper threads not waiting for work right now: copying, or woken and on
    /// their way to a copy.
    pub threads_awake: usize,
    /// Times a helper was woken from parking.
    pub wakes: u64,
    /// Parts of copies the helpers copied (a copy is cut in parts of 16 KiB or
    /// more; the caller copies the rest).
    pub parts_copied: u64,
    /// CPU time the helper threads have used, all together, as each last read its
    /// clock (each time it went back to waiting); `None` where
    /// the platform has no per-thread CPU clock (it is read on unix).
    pub cpu_time: Option<Duration>,
}

/// What the process-wide copy pool holds and has spent so far: its size, the
/// threads started and awake, their wake-ups and their CPU time. Starts no thread.
///
/// ```
/// let s = cuda_staging::pool_stats();
/// assert!(s.threads_awake <= s.threads_started);
/// ```
pub fn pool_stats() -> PoolStats {
    let Some(p) = GLOBAL.get() else {
        return PoolStats {
            threads: pool_threads(),
            cpu_time: crate::cpu_clock::AVAILABLE.then_some(Duration::ZERO),
            ..PoolStats::default()
        };
    };
    p.stats()
}

impl Pool {
    /// This pool's [`PoolStats`].
    pub(crate) fn stats(&self) -> PoolStats {
        let started = self.started.load(Ordering::Acquire);
        let workers = &self.workers[..started];
        let cpu_ns: u64 = workers
            .iter()
            .map(|w| w.cpu_ns.load(Ordering::Relaxed))
            .sum();
        PoolStats {
            threads: self.limit.load(Ordering::Relaxed),
            threads_started: started,
            threads_awake: self.awake().min(started),
            wakes: workers
                .iter()
                .map(|w| w.wakes.load(Ordering::Relaxed))
                .sum(),
            parts_copied: workers
                .iter()
                .map(|w| w.parts.load(Ordering::Relaxed))
                .sum(),
            cpu_time: crate::cpu_clock::AVAILABLE.then(|| Duration::from_nanos(cpu_ns)),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_environment_variable_takes_whole_numbers_only() {
        assert_eq!(size_from_env(Some("0")), Some(0));
        assert_eq!(size_from_env(Some(" 3 ")), Some(3));
        assert_eq!(size_from_env(Some("1000")), Some(MAX_POOL_THREADS));
        assert_eq!(size_from_env(Some("-1")), None);
        assert_eq!(size_from_env(Some("four")), None);
        assert_eq!(size_from_env(Some("")), None);
        assert_eq!(size_from_env(None), None);
    }

    #[test]
    fn the_default_size_leaves_a_core_for_the_caller() {
        let n = default_pool_threads();
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        assert!(n <= 15, "{n}");
        assert_eq!(
            n + 1,
            cores.min(16),
            "{n} helpers and the caller fill the cores"
        );
    }
}
