//! The gaps of the frame-loop scenarios: sleeping, or computing into other memory.

use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::frames::Gap;

/// The scratch buffer a busy gap writes through: 32 MiB, larger than the caches, as
/// preprocessing into other memory would be.
pub const SCRATCH_BYTES: usize = 32 << 20;

/// A busy gap writes one byte per line of this size.
pub const CACHE_LINE_BYTES: usize = 64;

/// A busy gap looks at the clock after each chunk of this many bytes (64 lines).
pub const BUSY_CHUNK_BYTES: usize = 4096;

/// Runs gaps; owns the scratch memory of busy gaps.
#[derive(Debug)]
pub struct GapRunner {
    scratch: Vec<u8>,
    /// Where the next busy chunk starts.
    pos: usize,
}

impl Default for GapRunner {
    fn default() -> Self {
        GapRunner::new()
    }
}

impl GapRunner {
    /// Allocates the scratch buffer and touches every page of it, so no busy gap
    /// pays first-touch page faults.
    pub fn new() -> GapRunner {
        GapRunner {
            scratch: vec![1u8; SCRATCH_BYTES],
            pos: 0,
        }
    }

    /// Sleeps, or computes, for `gap`.
    pub fn wait(&mut self, gap: Gap) {
        match gap {
            Gap::Sleep(d) => std::thread::sleep(d),
            Gap::Busy(d) => {
                self.busy(d);
            }
        }
    }

    /// [`GapRunner::wait`], returning the calling thread's CPU time over the gap
    /// (the gap's own CPU, which the frame loops remove from a frame's); `None`
    /// where the thread's clock is unavailable.
    pub fn wait_counting_cpu(&mut self, gap: Gap) -> Option<Duration> {
        let before = crate::cpu_time::thread_cpu();
        self.wait(gap);
        crate::cpu_time::elapsed(before, crate::cpu_time::thread_cpu())
    }

    /// Increments one byte per cache line through the scratch buffer, wrapping
    /// around, until `d` has passed; returns how many bytes it walked.
    pub fn busy(&mut self, d: Duration) -> usize {
        let start = Instant::now();
        let mut walked = 0;
        loop {
            let chunk = &mut self.scratch[self.pos..self.pos + BUSY_CHUNK_BYTES];
            for b in chunk.iter_mut().step_by(CACHE_LINE_BYTES) {
                *b = b.wrapping_add(1);
            }
            self.pos = (self.pos + BUSY_CHUNK_BYTES) % self.scratch.len();
            walked += BUSY_CHUNK_BYTES;
            if start.elapsed() >= d {
                break;
            }
        }
        // The writes are the point: keep the optimiser from dropping them.
        black_box(&mut self.scratch);
        walked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scratch_is_walked_in_whole_chunks() {
        assert_eq!(SCRATCH_BYTES % BUSY_CHUNK_BYTES, 0);
        assert_eq!(BUSY_CHUNK_BYTES % CACHE_LINE_BYTES, 0);
    }

    #[test]
    fn a_busy_gap_lasts_its_time_and_writes_memory() {
        let mut g = GapRunner::new();
        let t = Instant::now();
        let walked = g.busy(Duration::from_millis(2));
        assert!(t.elapsed() >= Duration::from_millis(2));
        assert!(walked >= BUSY_CHUNK_BYTES);
        // Each walked chunk incremented its lines once (at most a few laps here).
        let touched = g
            .scratch
            .iter()
            .step_by(CACHE_LINE_BYTES)
            .filter(|&&b| b != 1)
            .count();
        assert!(touched > 0);
        assert!(g
            .scratch
            .iter()
            .skip(1)
            .step_by(CACHE_LINE_BYTES)
            .all(|&b| b == 1));
        // A zero-length gap still walks one chunk and returns.
        assert_eq!(g.busy(Duration::ZERO), BUSY_CHUNK_BYTES);
    }

    #[test]
    #[cfg(unix)]
    fn a_gap_reports_its_own_cpu() {
        let mut g = GapRunner::new();
        let busy = g
            .wait_counting_cpu(Gap::Busy(Duration::from_millis(20)))
            .unwrap();
        let asleep = g
            .wait_counting_cpu(Gap::Sleep(Duration::from_millis(20)))
            .unwrap();
        // A loaded test machine may deschedule the busy gap: a quarter counts.
        assert!(busy >= Duration::from_millis(5), "{busy:?}");
        assert!(asleep < Duration::from_millis(5), "{asleep:?}");
    }
}
