//! The calling thread's CPU time, for counting what the copy pool's own threads
//! spend ([`crate::pool_stats`]). Unix only (`CLOCK_THREAD_CPUTIME_ID`, a system
//! call of about half a µs, made when a worker parks); elsewhere there is no
//! reading and the pool reports none.

/// Whether this platform has the per-thread CPU clock [`thread_cpu_ns`] reads.
pub(crate) const AVAILABLE: bool = cfg!(unix);

/// CPU time the calling thread has used, in nanoseconds; `None` where the platform
/// has no per-thread CPU clock.
pub(crate) fn thread_cpu_ns() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec; the call writes only it.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        if rc != 0 {
            return None;
        }
        Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_thread_that_computes_sees_its_cpu_time_grow_and_a_sleeping_one_does_not() {
        let start = thread_cpu_ns().expect("a thread CPU clock on unix");
        let t = std::time::Instant::now();
        let mut x = 1u64;
        while t.elapsed() < std::time::Duration::from_millis(20) {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let busy = thread_cpu_ns().unwrap() - start;
        assert!(busy >= 5_000_000, "20 ms of computing counted {busy} ns");
        let before = thread_cpu_ns().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let slept = thread_cpu_ns().unwrap() - before;
        assert!(
            slept < 10_000_000,
            "50 ms of sleeping counted {slept} ns of CPU"
        );
    }
}
