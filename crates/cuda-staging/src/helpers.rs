//! How many copy-pool helpers a buffer asks the pool to wake ahead of a predicted
//! frame, and to keep spinning in low-latency mode.

use std::time::Duration;

/// Low-latency mode keeps one helper hot per this many bytes of a frame's largest
/// host copy, up to [`PREDICTED_HELPERS_MAX`]: 150528 B keeps 2, 448 KiB and more
/// keep 7.
const HOT_HELPER_BYTES: usize = 64 << 10;

/// The most helpers a predicted transfer wakes (and low-latency mode keeps hot):
/// the CPU cost stated in the crate docs. A transfer still uses every copy thread
/// it finds awake.
///
/// A predicted transfer wakes as many helpers as its largest host copy will use
/// (one per 16 KiB from 64 KiB, the caller included; see `copy::copy_parts`), up
/// to this: 64 KiB wakes 3, 128 KiB and more wake 7. Waking fewer left the
/// copy to the caller's cold core. On the 16-core H200 host (`frames`-style
/// loop, columns interleaved, p50 against the faster pageable path), one helper
/// per 64 KiB (2 for 150528 B), per 32 KiB (4) and per 16 KiB (7):
///
/// | gap | transfer | one per 64 KiB | per 32 KiB | per 16 KiB |
/// |---|---|---:|---:|---:|
/// | sleep 16 ms | D2H 150528 B | 65.4 µs (1.09x) | 61.9 (1.15x) | 57.8 (1.23x) |
/// | sleep 16 ms | D2H 196608 B | 67.3 (1.16x) | 64.0 (1.22x) | 62.2 (1.25x) |
/// | sleep 2 ms | D2H 150528 B | 31.5 (1.27x) | 28.7 (1.40x) | 28.2 (1.42x) |
/// | sleep 2 ms | H2D 150528 B | 35.2 (1.48x) | 31.0 (1.69x) | 30.0 (1.74x) |
/// | busy 2 ms | D2H 150528 B | 32.9 (1.43x) | 30.1 (1.56x) | 27.8 (1.69x) |
///
/// All 15 cells measured (64 KiB to 192 KiB, both ways, three gaps) were faster
/// with one helper per 16 KiB than per 64 KiB; the least, sleep 2 ms, D2H 64 KiB:
/// 25.8 against 26.5 µs.
const PREDICTED_HELPERS_MAX: usize = 7;

/// Low-latency mode keeps helpers spinning while transfers come at least this
/// often.
pub(crate) const KEEP_HOT: Duration = Duration::from_millis(100);

/// Helpers a predicted transfer wakes for a frame whose largest host copy is `bytes`,
/// with `copy_threads` per transfer: every one the copy will use, at most
/// [`PREDICTED_HELPERS_MAX`].
pub(crate) fn predicted_helpers(bytes: usize, copy_threads: usize) -> usize {
    (crate::copy::copy_parts(bytes, copy_threads) - 1).min(PREDICTED_HELPERS_MAX)
}

/// Helpers low-latency mode keeps hot for the same frame: one per
/// [`HOT_HELPER_BYTES`], at least one, at most [`PREDICTED_HELPERS_MAX`] and the
/// helpers a transfer may use.
pub(crate) fn hot_helpers(bytes: usize, copy_threads: usize) -> usize {
    (bytes / HOT_HELPER_BYTES)
        .min(copy_threads.saturating_sub(1))
        .clamp(1, PREDICTED_HELPERS_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predicted_transfers_wake_every_helper_their_copy_uses_and_low_latency_fewer() {
        // Copies under 64 KiB run on the caller alone: nothing to wake.
        assert_eq!(predicted_helpers((64 << 10) - 1, 16), 0);
        // One part per 16 KiB, the caller taking one.
        assert_eq!(predicted_helpers(64 << 10, 16), 3);
        assert_eq!(predicted_helpers(112 << 10, 16), 6);
        assert_eq!(predicted_helpers(128 << 10, 16), 7);
        assert_eq!(predicted_helpers(150_528, 16), 7);
        assert_eq!(predicted_helpers(16 << 20, 16), 7);
        // Never more than the transfer's own copy threads allow.
        assert_eq!(predicted_helpers(150_528, 4), 3);
        assert_eq!(predicted_helpers(150_528, 1), 0);
        // Low-latency mode spins continuously, so it keeps one per 64 KiB.
        assert_eq!(hot_helpers(150_528, 16), 2);
        assert_eq!(hot_helpers(448 << 10, 16), 7);
        assert_eq!(hot_helpers(16 << 20, 4), 3);
        assert_eq!(hot_helpers(4096, 16), 1);
    }
}
