//! Whether a buffer's transfers come back to back: a run of transfers, each
//! starting within [`BURST_GAP`] of the previous one's end, is a burst. A frame's
//! upload and download are a burst of two; a tight loop is a long one. Only tight
//! loops keep the copy pool's helpers busy enough to pay for waking them for small
//! copies and keeping them spinning between transfers (`tuning::helpers_to_wake`).
//!
//! Without it (no tight-loop shape, no paced route, no long-gap rule: every
//! transfer planned as after a short gap), `cargo xtask bench --ab` at 16f66a8 on an
//! H100 host, 4 rounds: `upload` / `download` ran 1.10-2.07 times as long in tight
//! loops, for 0.56-0.81 times the CPU, and 1.14-2.00 times back to back; a download
//! of 4915200 B after a 16 ms sleep 1.37 times, and an upload of 1 MiB after it
//! spent 1.55 times the CPU.

use std::time::{Duration, Instant};

/// A transfer that starts within this time of the previous one's end belongs to the
/// same burst.
pub(crate) const BURST_GAP: Duration = Duration::from_micros(200);

/// From this many transfers in one burst, transfers come back to back (a tight
/// loop rather than a frame's few transfers: an input or two up, a few outputs
/// down). With 3, four pipelines each moving 150528 B and 4915200 B up and down per
/// frame spent 5% more CPU per frame for the same frames/s: on the 16-core H200
/// host, phases interleaved, 2017 against 1916 µs of process CPU per frame at
/// 1460 and 1457 frames/s (the driver's pageable path: 1356 µs at 1121).
pub(crate) const BACK_TO_BACK_TRANSFERS: u32 = 5;

/// The burst a buffer's transfers are in; see the module notes.
#[derive(Debug, Default)]
pub(crate) struct Burst {
    last_end: Option<Instant>,
    /// Transfers in the current burst, the one starting now included.
    in_burst: u32,
    /// The transfer starting now follows an earlier one by at least [`BURST_GAP`].
    follows_gap: bool,
    /// ... by at least `tuning::LONG_GAP`.
    follows_long_gap: bool,
}

impl Burst {
    /// A transfer starts at `now`.
    pub(crate) fn start(&mut self, now: Instant) {
        let gap = self.last_end.map(|end| now.saturating_duration_since(end));
        let same_burst = gap.is_some_and(|g| g < BURST_GAP);
        self.follows_gap = gap.is_some_and(|g| g >= BURST_GAP);
        self.follows_long_gap = gap.is_some_and(|g| g >= crate::tuning::LONG_GAP);
        self.in_burst = if same_burst {
            self.in_burst.saturating_add(1)
        } else {
            1
        };
    }

    /// The transfer that started last ended at `now`.
    pub(crate) fn end(&mut self, now: Instant) {
        self.last_end = Some(now);
    }

    /// Whether the transfer starting now is paced: it follows an earlier transfer of
    /// this buffer (after a gap, or within a frame's few transfers) and is not one
    /// of a run of back-to-back ones. Paced transfers find the copy pool's helpers
    /// parked; see `tuning::DRIVER_AFTER_GAP_MIN_BYTES`.
    pub(crate) fn paced(&self) -> bool {
        (self.follows_gap || self.in_burst > 1) && !self.back_to_back()
    }

    /// Whether the transfer starting now follows this buffer's previous one after a
    /// long gap (`tuning::LONG_GAP`), which the pool's helpers have spent parked.
    pub(crate) fn long_gap(&self) -> bool {
        self.follows_long_gap
    }

    /// When the last transfer ended, if one did.
    #[cfg(test)]
    pub(crate) fn last_end(&self) -> Option<Instant> {
        self.last_end
    }

    /// Whether the transfer starting now is one of a run of back-to-back transfers
    /// (at least [`BACK_TO_BACK_TRANSFERS`] with gaps under [`BURST_GAP`]).
    pub(crate) fn back_to_back(&self) -> bool {
        self.in_burst >= BACK_TO_BACK_TRANSFERS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_burst_is_not_back_to_back_and_a_tight_loop_is() {
        let t0 = Instant::now();
        let us = |n: u64| t0 + Duration::from_micros(n);
        let mut a = Burst::default();
        // A frame of four transfers, 20 µs apart.
        for k in 0..4 {
            a.start(us(50 * k));
            assert!(!a.back_to_back(), "a frame's transfer {k} wakes nobody");
            assert!(!a.follows_gap, "transfer {k} follows no gap");
            assert_eq!(
                a.paced(),
                k > 0,
                "transfer {k}: only the first is not paced"
            );
            a.end(us(50 * k + 30));
        }
        // A fifth one right after: a tight loop.
        a.start(us(200));
        assert!(a.back_to_back());
        assert!(!a.paced(), "a tight loop's transfers are not paced");
        a.end(us(230));
        for k in 0..5 {
            a.start(us(240 + 40 * k));
            assert!(a.back_to_back());
            a.end(us(270 + 40 * k));
        }
        // After a gap longer than a burst, the count starts over.
        a.start(us(2_120));
        assert!(!a.back_to_back());
        assert!(a.follows_gap);
        assert!(a.paced());
        a.end(us(2_150));
        // A gap of exactly the burst gap is a gap; just under it is not.
        a.start(us(2_350));
        assert!(a.follows_gap);
        a.end(us(2_400));
        a.start(us(2_599));
        assert!(!a.follows_gap);
        assert!(!a.long_gap(), "a gap of 2 ms is not long");
        a.end(us(2_650));
        // A long gap: one of a frame loop at 60 frames per second.
        let long = crate::tuning::LONG_GAP.as_micros() as u64;
        a.start(us(2_650 + long - 1));
        assert!(a.follows_gap && !a.long_gap(), "just under the long gap");
        a.end(us(2_650 + long));
        a.start(us(2_650 + 2 * long + 16_000));
        assert!(a.long_gap() && a.paced());
        // Right after it, within the burst: not long.
        a.end(us(2_650 + 2 * long + 16_030));
        a.start(us(2_650 + 2 * long + 16_050));
        assert!(!a.long_gap() && a.paced());
    }
}
