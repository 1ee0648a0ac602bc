//! Whether a buffer's transfers come back to back: a run of transfers, each
//! starting within [`BURST_GAP`] of the previous one's end, is a burst. A frame's
//! upload and download are a burst of two; a tight loop is a long one. Only tight
//! loops keep the copy pool's helpers busy enough to pay for waking them for small
//! copies and keeping them spinning between transfers (`tuning::helpers_to_wake`).

use std::time::{Duration, Instant};

/// A transfer that starts within this time of the previous one's end belongs to the
/// same burst.
pub(crate) const BURST_GAP: Duration = Duration::from_micros(200);

/// From this many transfers in one burst, transfers come back to back (a tight
/// loop rather than a frame's upload and download).
const BACK_TO_BACK_TRANSFERS: u32 = 3;

/// The burst a buffer's transfers are in; see the module notes.
#[derive(Debug, Default)]
pub(crate) struct Burst {
    last_end: Option<Instant>,
    /// Transfers in the current burst, the one starting now included.
    in_burst: u32,
    /// The transfer starting now follows an earlier one by at least [`BURST_GAP`].
    follows_gap: bool,
}

impl Burst {
    /// A transfer starts at `now`.
    pub(crate) fn start(&mut self, now: Instant) {
        let gap = self.last_end.map(|end| now.saturating_duration_since(end));
        let same_burst = gap.is_some_and(|g| g < BURST_GAP);
        self.follows_gap = gap.is_some_and(|g| g >= BURST_GAP);
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

    /// Whether the transfer starting now follows an earlier transfer of this buffer
    /// after a gap of at least [`BURST_GAP`] (not the buffer's first transfer, and
    /// not one of a burst).
    pub(crate) fn follows_gap(&self) -> bool {
        self.follows_gap
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
        // A frame: upload, then download 20 µs after it ended.
        a.start(us(0));
        assert!(!a.back_to_back());
        assert!(!a.follows_gap(), "the first transfer follows nothing");
        a.end(us(30));
        a.start(us(50));
        assert!(!a.back_to_back(), "a frame's second transfer wakes nobody");
        assert!(!a.follows_gap());
        a.end(us(80));
        // A third one right after: a tight loop.
        a.start(us(90));
        assert!(a.back_to_back());
        a.end(us(120));
        for k in 0..5 {
            a.start(us(130 + 40 * k));
            assert!(a.back_to_back());
            a.end(us(160 + 40 * k));
        }
        // After a gap longer than a burst, the count starts over.
        a.start(us(2_120));
        assert!(!a.back_to_back());
        assert!(a.follows_gap());
        a.end(us(2_150));
        // A gap of exactly the burst gap is a gap; just under it is not.
        a.start(us(2_350));
        assert!(a.follows_gap());
        a.end(us(2_400));
        a.start(us(2_599));
        assert!(!a.follows_gap());
    }
}
