//! When a buffer's next transfer will come.
//!
//! In a frame loop a buffer's transfers arrive in *bursts* (an upload, or an upload
//! and a download, back to back) at a steady rhythm: one burst per frame, or a
//! repeating pattern of a few (upload at the frame's start, download after the model
//! ran). [`Arrivals`] keeps the last burst starts and predicts the next one when the
//! recent gaps repeat with a cycle of 1, 2 or 3 bursts; otherwise it predicts
//! nothing, and the pool wakes no thread ahead of time.

use std::time::{Duration, Instant};

/// A transfer that starts within this time of the previous one's end belongs to the
/// same burst (the pool's workers are still spinning then).
pub(crate) const BURST_GAP: Duration = Duration::from_micros(200);
/// Gaps longer than this are not a frame rhythm worth waking threads for.
const MAX_PERIOD: Duration = Duration::from_millis(250);
/// Gaps remembered (one more burst start than that).
const HISTORY: usize = 8;

/// Burst starts of one buffer; see the module notes.
#[derive(Debug, Default)]
pub(crate) struct Arrivals {
    last_start: Option<Instant>,
    last_end: Option<Instant>,
    /// Gaps between burst starts, in nanoseconds, oldest first.
    gaps: [u64; HISTORY],
    len: usize,
    /// The largest host copy of the current burst, and of the previous one.
    burst_copy_bytes: usize,
    last_burst_copy_bytes: usize,
    /// Transfers in the current burst, the one starting now included.
    in_burst: u32,
}

/// From this many transfers in one burst, transfers come back to back (a tight
/// loop rather than a frame's upload and download): they are worth waking parked
/// helpers for (the first ones pay the wake-up, those after it find them
/// spinning).
const BACK_TO_BACK_TRANSFERS: u32 = 3;

/// From this many transfers in one burst, a buffer runs in a tight loop (not a
/// frame's few transfers), and a pipelined download's copy-out flushes what it read
/// (see `copy.rs`).
const TIGHT_LOOP_TRANSFERS: u32 = 8;

impl Arrivals {
    /// A transfer starts at `now`.
    pub(crate) fn start(&mut self, now: Instant) {
        let same_burst = self
            .last_end
            .is_some_and(|end| now.saturating_duration_since(end) < BURST_GAP);
        if same_burst {
            self.in_burst = self.in_burst.saturating_add(1);
            return;
        }
        self.in_burst = 1;
        if let Some(prev) = self.last_start {
            let gap = now.saturating_duration_since(prev);
            if gap > MAX_PERIOD {
                self.len = 0;
            } else {
                if self.len == HISTORY {
                    self.gaps.copy_within(1.., 0);
                    self.len -= 1;
                }
                self.gaps[self.len] = gap.as_nanos() as u64;
                self.len += 1;
            }
        }
        self.last_start = Some(now);
        self.last_burst_copy_bytes = self.burst_copy_bytes;
        self.burst_copy_bytes = 0;
    }

    /// The transfer that started last ended at `now`, after a host copy of
    /// `copy_bytes` (0 for none).
    pub(crate) fn end(&mut self, now: Instant, copy_bytes: usize) {
        self.last_end = Some(now);
        self.burst_copy_bytes = self.burst_copy_bytes.max(copy_bytes);
    }

    /// The largest host copy of a burst, the current one or the previous one.
    pub(crate) fn burst_copy_bytes(&self) -> usize {
        self.burst_copy_bytes.max(self.last_burst_copy_bytes)
    }

    /// Whether the transfer starting now is one of a run of back-to-back transfers
    /// (at least [`BACK_TO_BACK_TRANSFERS`] with gaps under [`BURST_GAP`]).
    pub(crate) fn back_to_back(&self) -> bool {
        self.in_burst >= BACK_TO_BACK_TRANSFERS
    }

    /// Whether the transfer starting now runs in a tight loop (at least
    /// [`TIGHT_LOOP_TRANSFERS`] with gaps under [`BURST_GAP`]).
    pub(crate) fn tight_loop(&self) -> bool {
        self.in_burst >= TIGHT_LOOP_TRANSFERS
    }

    /// The predicted start of the next burst, if the recent gaps repeat.
    pub(crate) fn predict(&self) -> Option<Instant> {
        let last = self.last_start?;
        let next_gap = predict_gap(&self.gaps[..self.len])?;
        Some(last + Duration::from_nanos(next_gap))
    }
}

/// The next gap after `gaps` (oldest first), if the last three repeat with a cycle
/// of 1, 2 or 3 gaps within a tolerance of 5% of the cycle's mean gap, and at least
/// 100 µs: the gap one cycle back.
pub(crate) fn predict_gap(gaps: &[u64]) -> Option<u64> {
    const CHECKED: usize = 3;
    for cycle in 1..=3usize {
        if gaps.len() < cycle + CHECKED {
            break;
        }
        let m = gaps.len();
        let recent = &gaps[m - cycle..];
        let mean = recent.iter().sum::<u64>() / cycle as u64;
        let tolerance = (mean / 20).max(100_000);
        let repeats =
            (0..CHECKED).all(|j| gaps[m - 1 - j].abs_diff(gaps[m - 1 - j - cycle]) <= tolerance);
        if repeats {
            return Some(gaps[m - cycle]);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_steady_rhythm_predicts_its_gap_and_noise_predicts_nothing() {
        assert_eq!(
            predict_gap(&[16 * MS, 16 * MS, 16 * MS, 16 * MS]),
            Some(16 * MS)
        );
        // Jitter within 5% still counts.
        assert_eq!(
            predict_gap(&[2 * MS, 2 * MS + 50_000, 2 * MS - 40_000, 2 * MS + 10_000]),
            Some(2 * MS + 10_000),
            "the gap one cycle back"
        );
        assert_eq!(
            predict_gap(&[16 * MS, 3 * MS, 40 * MS, 7 * MS, 22 * MS]),
            None
        );
        assert_eq!(predict_gap(&[16 * MS, 16 * MS]), None, "too little history");
    }

    #[test]
    fn an_alternating_rhythm_predicts_the_gap_one_cycle_back() {
        // Upload at the frame start, download 5 ms later, next frame 11 ms after that.
        let gaps = [5 * MS, 11 * MS, 5 * MS, 11 * MS, 5 * MS];
        assert_eq!(predict_gap(&gaps), Some(11 * MS));
        let gaps = [5 * MS, 11 * MS, 5 * MS, 11 * MS, 5 * MS, 11 * MS];
        assert_eq!(predict_gap(&gaps), Some(5 * MS));
    }

    #[test]
    fn bursts_count_once_and_long_pauses_start_over() {
        let t0 = Instant::now();
        let mut a = Arrivals::default();
        let ms = |n: u64| Duration::from_millis(n);
        for frame in 0..6u64 {
            let start = t0 + ms(10 * frame);
            a.start(start);
            a.end(start + Duration::from_micros(50), 150_528);
            // A second transfer right after the first: same burst.
            a.start(start + Duration::from_micros(100));
            a.end(start + Duration::from_micros(400), 4_915_200);
        }
        assert_eq!(a.len, 5, "one gap per frame");
        assert_eq!(a.predict(), Some(t0 + ms(60)));
        assert_eq!(a.burst_copy_bytes(), 4_915_200);
        a.start(t0 + ms(2000));
        assert_eq!(
            a.predict(),
            None,
            "a pause past MAX_PERIOD forgets the rhythm"
        );
    }

    #[test]
    fn a_frame_burst_is_not_back_to_back_and_a_tight_loop_is() {
        let t0 = Instant::now();
        let us = |n: u64| t0 + Duration::from_micros(n);
        let mut a = Arrivals::default();
        // A frame: upload, then download 20 µs after it ended.
        a.start(us(0));
        assert!(!a.back_to_back());
        a.end(us(30), 150_528);
        a.start(us(50));
        assert!(!a.back_to_back(), "a frame's second transfer wakes nobody");
        a.end(us(80), 150_528);
        // A third one right after: a tight loop.
        a.start(us(90));
        assert!(a.back_to_back());
        assert!(!a.tight_loop(), "three transfers are a burst, not a loop");
        a.end(us(120), 150_528);
        for k in 0..5 {
            a.start(us(130 + 40 * k));
            a.end(us(160 + 40 * k), 150_528);
        }
        assert!(a.tight_loop(), "eight in a row are a tight loop");
        // After a gap longer than a burst, the count starts over.
        a.start(us(2_120));
        assert!(!a.back_to_back());
    }
}
