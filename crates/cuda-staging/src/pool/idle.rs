//! How many of the machine's cores run nothing: the cores less the kernel's count of
//! runnable threads, the fourth field of `/proc/loadavg` (`running/total`, counted
//! at the moment of reading, not averaged), read at most every [`READ_EVERY`] by
//! whichever transfer asks first after that (about 3 µs, a file open and read into a
//! buffer on the stack: nothing allocates). Where the file does not exist (not
//! Linux), every core counts as idle.
//!
//! Why: with every core busy (the program's decoders and preprocessing, other
//! processes), helpers do not make a copy faster. On the 16-core H200 host with 15
//! threads computing beside a frame loop that slept 2 ms per frame, copies split
//! with helpers ran at 0.40-0.86 times the driver's pageable speed from 1 MiB to
//! 16 MiB, though a woken helper ran within 4-7 µs (the OS gives a thread that slept
//! the next slice): once more threads want to run than there are cores, the OS
//! preempts the helpers or the caller in the middle of the copy, which then waits a
//! time slice.

use std::sync::atomic::AtomicUsize;

use crate::sync::{AtomicU64, Ordering};

/// The count is read again once it is this old (pool-clock ns).
pub(super) const READ_EVERY: u64 = 10_000_000;

/// The machine's idle cores, as last read.
pub(super) struct IdleCores {
    cores: usize,
    /// Idle cores at the last reading.
    idle: AtomicUsize,
    /// Pool-clock ns of the last reading (0: never).
    read_at: AtomicU64,
}

impl IdleCores {
    pub(super) fn new() -> IdleCores {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        IdleCores {
            cores,
            idle: AtomicUsize::new(cores),
            read_at: AtomicU64::new(0),
        }
    }

    /// Idle cores at pool-clock `now`, read again if the last reading is older than
    /// [`READ_EVERY`] (by one caller; the others use the last one meanwhile).
    pub(super) fn get(&self, now: u64) -> usize {
        let at = self.read_at.load(Ordering::Relaxed);
        if (at == 0 || now.saturating_sub(at) >= READ_EVERY)
            && self
                .read_at
                .compare_exchange(at, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            let idle = match running_threads() {
                Some(r) => self.cores.saturating_sub(r),
                None => self.cores,
            };
            self.idle.store(idle, Ordering::Relaxed);
        }
        self.idle.load(Ordering::Relaxed)
    }

    /// Stores a reading of `idle` cores taken at pool-clock `at`, as [`IdleCores::get`]
    /// does after reading the kernel's count (for tests of what reads it).
    #[cfg(all(test, not(loom)))]
    pub(super) fn store_reading(&self, idle: usize, at: u64) {
        self.idle.store(idle, Ordering::Relaxed);
        self.read_at.store(at.max(1), Ordering::Relaxed);
    }
}

/// The kernel's count of runnable threads now (the caller included), from
/// `/proc/loadavg`; `None` where it cannot be read.
fn running_threads() -> Option<usize> {
    use std::io::Read;
    let mut buf = [0u8; 128];
    let mut f = std::fs::File::open("/proc/loadavg").ok()?;
    let n = f.read(&mut buf).ok()?;
    parse_running(&buf[..n])
}

/// The running count of a `/proc/loadavg` line: `"0.52 0.58 0.59 3/1024 12345"` → 3.
fn parse_running(line: &[u8]) -> Option<usize> {
    let field = line.split(|&b| b == b' ').nth(3)?;
    let running = field.split(|&b| b == b'/').next()?;
    std::str::from_utf8(running).ok()?.parse().ok()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_running_count_is_the_fourth_fields_numerator() {
        assert_eq!(parse_running(b"0.52 0.58 0.59 3/1024 12345\n"), Some(3));
        assert_eq!(parse_running(b"12.00 9.10 4.00 17/300 99"), Some(17));
        assert_eq!(parse_running(b"0.52 0.58 0.59"), None);
        assert_eq!(parse_running(b"0.52 0.58 0.59 x/1024 1"), None);
        assert_eq!(parse_running(b""), None);
    }

    #[test]
    fn a_reading_is_kept_for_its_period_and_taken_again_after() {
        let idle = IdleCores::new();
        let first = idle.get(1);
        assert!(first <= idle.cores);
        if cfg!(target_os = "linux") {
            // This thread runs while it reads: at least one core is not idle.
            assert!(first < idle.cores, "{first} idle of {}", idle.cores);
        }
        // Within the period the stored value is used, whatever it is.
        idle.idle.store(usize::MAX, Ordering::Relaxed);
        assert_eq!(idle.get(READ_EVERY / 2), usize::MAX);
        // After it, read again.
        let again = idle.get(1 + READ_EVERY);
        assert!(again <= idle.cores);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn busy_threads_leave_fewer_idle_cores() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            for _ in 0..cores {
                s.spawn(|| {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                });
            }
            // With a spinning thread per core (and this one), none is idle; other
            // processes can only add to the count.
            let t = std::time::Instant::now();
            let mut seen = usize::MAX;
            while t.elapsed() < std::time::Duration::from_secs(2) && seen != 0 {
                std::thread::sleep(std::time::Duration::from_millis(5));
                seen = running_threads().map_or(usize::MAX, |r| cores.saturating_sub(r));
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            assert_eq!(seen, 0, "{cores} spinning threads left cores idle");
        });
    }
}
