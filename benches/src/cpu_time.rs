//! CPU clocks: the whole process's, the calling thread's, and another thread's, as
//! the benches use them to report CPU per frame beside latency (design.md, "CPU per
//! frame is part of every claim").
//!
//! | reading | clock |
//! |---|---|
//! | [`process_cpu`] | `clock_gettime(CLOCK_PROCESS_CPUTIME_ID)`: every thread of the process, the library's copy helpers and the driver's threads included |
//! | [`thread_cpu`] | `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`: the calling thread only |
//! | [`ThreadCpuClock`] | `pthread_getcpuclockid` of a thread, read from any thread of the process while that thread lives |
//!
//! Availability: the process and thread clocks on every unix, the clock of another
//! thread on Linux and Android. Elsewhere (Windows, macOS for [`ThreadCpuClock`]) the
//! functions compile and return `None`, and the benches report no CPU figure
//! (`cpu_us: null`).
//!
//! Precision, as Linux keeps these clocks: a thread's own clock, and a clock read
//! through `pthread_getcpuclockid`, is exact to the nanosecond. The process clock is
//! exact for the calling thread and for threads that are parked, but a thread that is
//! *running on another core* when it is read is counted only up to its last
//! scheduler tick (1–4 ms ago). So a difference of two process readings is exact when
//! the other threads are parked at both ends, and otherwise off by up to one tick per
//! thread that was running at either end, in either direction. The benches read it
//! where other threads are parked (the `contended` scenario pauses its neighbour
//! threads at each reading), over windows long against a tick (`tight-loop`), or
//! average many windows whose errors cancel (the frame loops).

use std::time::Duration;

/// CPU time used so far by every thread of this process, dead ones included;
/// `None` where the clock is unavailable (not unix) or fails.
pub fn process_cpu() -> Option<Duration> {
    #[cfg(unix)]
    {
        sys::read_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// CPU time used so far by the calling thread; `None` where the clock is unavailable
/// (not unix) or fails.
pub fn thread_cpu() -> Option<Duration> {
    #[cfg(unix)]
    {
        sys::read_clock(libc::CLOCK_THREAD_CPUTIME_ID)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The CPU clock of one thread, obtained on that thread and readable from any
/// thread of the process.
///
/// Read it only while its thread lives: Linux names the clock by the thread's id,
/// so after the thread exits a reading fails (`None`) or, once the id is reused by a
/// new thread of this process, reads that thread instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadCpuClock {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    id: libc::clockid_t,
}

impl ThreadCpuClock {
    /// The calling thread's clock (`pthread_getcpuclockid(pthread_self())`); `None`
    /// where that is unavailable (anything but Linux and Android) or fails.
    pub fn of_current_thread() -> Option<ThreadCpuClock> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            sys::current_thread_clock().map(|id| ThreadCpuClock { id })
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        {
            None
        }
    }

    /// The CPU time its thread has used so far; `None` when the reading fails.
    pub fn read(&self) -> Option<Duration> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            sys::read_clock(self.id)
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        {
            None
        }
    }
}

/// `d` in µs.
pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The mean of `total` over `n` in µs; `None` for no total or `n == 0`.
pub fn mean_us(total: Option<Duration>, n: usize) -> Option<f64> {
    let total = total?;
    (n > 0).then(|| us(total) / n as f64)
}

/// `end − start`, where both readings exist; a clock that went backwards (a process
/// reading after another thread's pending time was counted, see the module docs)
/// gives zero.
pub fn elapsed(start: Option<Duration>, end: Option<Duration>) -> Option<Duration> {
    Some(end?.saturating_sub(start?))
}

/// Adds up CPU windows (one per measured transfer or frame) for their mean; once a
/// window could not be read, the mean is `None` rather than a mean of the rest.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuTally {
    total: Duration,
    windows: usize,
    unreadable: bool,
}

impl CpuTally {
    /// Adds one window's CPU; `None` marks the tally unreadable.
    pub fn add(&mut self, window: Option<Duration>) {
        match window {
            Some(d) => {
                self.total += d;
                self.windows += 1;
            }
            None => self.unreadable = true,
        }
    }

    /// Adds `other`'s windows to these.
    pub fn merge(&mut self, other: &CpuTally) {
        self.total += other.total;
        self.windows += other.windows;
        self.unreadable |= other.unreadable;
    }

    /// How many windows were added (readable ones).
    pub fn windows(&self) -> usize {
        self.windows
    }

    /// The mean window in µs; `None` with no window or an unreadable one.
    pub fn mean_us(&self) -> Option<f64> {
        if self.unreadable {
            return None;
        }
        mean_us(Some(self.total), self.windows)
    }
}

/// The raw calls; every `unsafe` block of the benches' CPU clocks is here.
#[cfg(unix)]
mod sys {
    use std::mem::MaybeUninit;
    use std::time::Duration;

    /// `clock_gettime(id)` as a `Duration`; `None` when the call fails.
    pub(super) fn read_clock(id: libc::clockid_t) -> Option<Duration> {
        let mut ts = MaybeUninit::<libc::timespec>::uninit();
        // SAFETY: `ts.as_mut_ptr()` points to writable memory the size and alignment
        // of a `timespec`, valid for the whole call, and clock_gettime writes nothing
        // else. An unknown or stale clock id is reported through the return code
        // (EINVAL), not undefined behaviour.
        let rc = unsafe { libc::clock_gettime(id, ts.as_mut_ptr()) };
        if rc != 0 {
            return None;
        }
        // SAFETY: clock_gettime returned 0, so it filled the whole `timespec`.
        let ts = unsafe { ts.assume_init() };
        let secs = u64::try_from(ts.tv_sec).ok()?;
        let nanos = u32::try_from(ts.tv_nsec).ok()?;
        Some(Duration::new(secs, nanos))
    }

    /// `pthread_getcpuclockid(pthread_self())`; `None` when the call fails.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub(super) fn current_thread_clock() -> Option<libc::clockid_t> {
        let mut id = MaybeUninit::<libc::clockid_t>::uninit();
        // SAFETY: pthread_self() names the calling thread, which is alive for the
        // whole call; `id.as_mut_ptr()` points to a writable `clockid_t`, the only
        // memory pthread_getcpuclockid writes.
        let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), id.as_mut_ptr()) };
        if rc != 0 {
            return None;
        }
        // SAFETY: pthread_getcpuclockid returned 0, so it wrote the clock id.
        Some(unsafe { id.assume_init() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spins the calling thread for `d` of wall time.
    #[cfg(unix)]
    fn spin(d: Duration) -> u64 {
        use std::hint::black_box;
        let start = std::time::Instant::now();
        let mut x = 1u64;
        while start.elapsed() < d {
            for _ in 0..1000 {
                x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
        x
    }

    #[test]
    #[cfg(unix)]
    fn the_thread_clock_counts_spinning_and_not_sleeping() {
        let t0 = thread_cpu().unwrap();
        spin(Duration::from_millis(30));
        let t1 = thread_cpu().unwrap();
        std::thread::sleep(Duration::from_millis(30));
        let t2 = thread_cpu().unwrap();
        // A loaded test machine may deschedule the spinner: at least a third counts.
        assert!(t1 - t0 >= Duration::from_millis(10), "{:?}", t1 - t0);
        assert!(t1 - t0 <= Duration::from_millis(300), "{:?}", t1 - t0);
        assert!(
            t2 - t1 < Duration::from_millis(5),
            "sleeping cost {:?}",
            t2 - t1
        );
    }

    #[test]
    #[cfg(unix)]
    fn the_process_clock_counts_other_threads() {
        let p0 = process_cpu().unwrap();
        let own0 = thread_cpu().unwrap();
        // Another thread spins, then exits: its CPU stays in the process's clock.
        std::thread::spawn(|| spin(Duration::from_millis(40)))
            .join()
            .unwrap();
        let p1 = process_cpu().unwrap();
        let own = thread_cpu().unwrap() - own0;
        let others = (p1 - p0).saturating_sub(own);
        assert!(others >= Duration::from_millis(13), "{others:?}");
        assert!(own < Duration::from_millis(10), "joining cost {own:?}");
    }

    #[test]
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn another_thread_s_clock_reads_that_thread_only() {
        use std::sync::mpsc;
        let (clock_tx, clock_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            clock_tx
                .send(ThreadCpuClock::of_current_thread().unwrap())
                .unwrap();
            go_rx.recv().unwrap();
            spin(Duration::from_millis(40));
            done_tx.send(()).unwrap();
            // Stay alive until the main thread has read the clock.
            let _ = go_rx.recv();
        });
        let clock = clock_rx.recv().unwrap();
        let before = clock.read().unwrap();
        let own0 = thread_cpu().unwrap();
        go_tx.send(()).unwrap();
        done_rx.recv().unwrap();
        let spent = clock.read().unwrap() - before;
        assert!(spent >= Duration::from_millis(13), "{spent:?}");
        assert!(spent <= Duration::from_millis(400), "{spent:?}");
        // Waiting cost the main thread next to nothing: the clock is the worker's.
        assert!(thread_cpu().unwrap() - own0 < Duration::from_millis(10));
        assert_ne!(Some(clock), ThreadCpuClock::of_current_thread());
        drop(go_tx);
        worker.join().unwrap();
    }

    #[test]
    fn means_and_differences() {
        let ms = Duration::from_millis;
        assert_eq!(mean_us(Some(ms(3)), 4), Some(750.0));
        assert_eq!(mean_us(Some(ms(3)), 0), None);
        assert_eq!(mean_us(None, 4), None);
        assert_eq!(elapsed(Some(ms(2)), Some(ms(5))), Some(ms(3)));
        assert_eq!(elapsed(Some(ms(5)), Some(ms(2))), Some(Duration::ZERO));
        assert_eq!(elapsed(None, Some(ms(2))), None);
        assert_eq!(us(Duration::from_nanos(1500)), 1.5);
    }

    #[test]
    fn a_tally_means_its_windows_unless_one_was_unreadable() {
        let us = Duration::from_micros;
        let mut t = CpuTally::default();
        assert_eq!(t.mean_us(), None);
        t.add(Some(us(10)));
        t.add(Some(us(30)));
        assert_eq!((t.windows(), t.mean_us()), (2, Some(20.0)));
        let mut u = CpuTally::default();
        u.add(Some(us(50)));
        u.merge(&t);
        assert_eq!((u.windows(), u.mean_us()), (3, Some(30.0)));
        t.add(None);
        assert_eq!((t.windows(), t.mean_us()), (2, None));
        u.merge(&t);
        assert_eq!(
            u.mean_us(),
            None,
            "an unreadable window spoils the merge too"
        );
    }
}
