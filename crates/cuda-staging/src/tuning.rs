//! The copy pool's tunables: how many helpers a transfer wakes, and when a paced
//! transfer goes to the driver. Constants, each with the measurement that chose it.
//! Programs size the pool with [`crate::set_copy_pool_threads`] and each buffer with
//! [`crate::StagingConfig::copy_threads`].

use std::time::Duration;

use crate::direction::{Direction, PerDirection};

/// Below this, a host copy runs on the calling thread alone.
pub(crate) const PARALLEL_MIN_BYTES: usize = 64 << 10;

/// After a gap, an upload smaller than this wakes no parked helper: the caller
/// copies alone (in two halves that overlap the DMA), because a parked thread on an
/// idle core takes tens of µs to run (26 µs at the median after a 2 ms sleep, 49 µs
/// after 16 ms, bare threads on the 16-core H200 host), longer than the copy.
pub(crate) const WAKE_MIN_BYTES: usize = 512 << 10;

/// A gap before a transfer at least this long is a long one: the pool's helpers have
/// been parked for all of it, and a parked thread takes longer to run the longer its
/// core has idled (26 µs at the median after a 2 ms sleep, 49 µs after 16 ms, bare
/// threads on the 16-core H200 host). Between the two gaps measured below; a frame
/// loop at 60 frames per second or fewer has long gaps.
pub(crate) const LONG_GAP: Duration = Duration::from_millis(8);

/// After a long gap ([`LONG_GAP`]), an upload smaller than this wakes no parked
/// helper; being paced, it then goes to the driver ([`DRIVER_AFTER_GAP_MIN_BYTES`]).
/// In the full bench run at 3e74ea9 on the 16-core H200 host, uploads with helpers
/// woken ran at 0.89 times the driver's speed at 1 MiB after a 16 ms sleep (228
/// against 202 µs at the median), though at 1.10 times after a 2 ms one; from
/// 4915200 B they won after either gap (1.15 and 1.13 times).
pub(crate) const LONG_GAP_WAKE_MIN_BYTES: usize = 2 << 20;

/// Outside a tight loop, a download wakes no parked helper (`usize::MAX`: from no
/// size; probes may set a size): its copy-out reads lines the DMA has just written
/// (memory, not cache), and helpers woken for it spend more than they save. Small
/// downloads are copied out by the caller; those in pieces (over 512 KiB) go to the
/// driver ([`DRIVER_AFTER_GAP_MIN_BYTES`]).
///
/// On the 16-core H200 host, in the full bench run at 79cc36c, downloads of
/// 4915200 B with two helpers woken from 2 MiB ran at 1.05, 0.93 and 1.11 times the
/// driver's speed after a 2 ms sleep, a 16 ms sleep and 2 ms of computing, for
/// 2.61, 2.77 and 2.38 times its CPU; 16 MiB at 1.22 and 1.12 times after the
/// sleeps for 2.26 and 2.44 times its CPU, and 0.81 times beside 15 busy threads.
/// Earlier, at 4521598, a 1 MiB download with two helpers ran at 0.98, 0.81 and
/// 0.97 times the driver's speed for 2.47, 2.33 and 2.87 times its CPU. A probe on
/// the same host then, variants interleaved (p50 / CPU per frame, µs): 4915200 B
/// after a 2 ms sleep 326 / 359 through the driver against 295 / 878 with two
/// helpers; 16 MiB 1156 / 1212 against 875 / 2544. Four pipelines (each frame
/// 150528 B and 4915200 B up and down after a 2 ms sleep): 1266 frames/s for
/// 1694 µs of CPU per frame against 1444 for 1982 with helpers (the driver's
/// pageable copy: 1126 for 1277). Helpers bought a download 1.1-1.3 times the
/// speed for 2.1-2.4 times the CPU; the copy-out of 4915200 B alone costs 580 µs
/// or more of thread time at the 8 GB/s one thread reads lines the DMA has just
/// written.
pub(crate) const DOWNLOAD_WAKE_MIN_BYTES: usize = usize::MAX;

/// A download's copy-out is split over at most this many threads, the caller
/// included. Its reads miss the caches (the DMA has just written the lines), so a
/// thread copies out at about half the speed it copies in, and a fourth thread
/// bought little for its CPU: on the 16-core H200 host (variants interleaved),
/// 4915200 B back to back took 224 µs on three threads against 221 on four, for
/// 1.81 against 2.32 times the driver's CPU; after a 2 ms sleep 327 against 323 µs,
/// for 1.40 against 1.68 times.
pub(crate) const DOWNLOAD_THREADS: usize = 3;

/// After a gap, a host copy wakes one parked helper per this many bytes (at least
/// one from [`WAKE_MIN_BYTES`]), up to the buffer's copy threads less the caller.
/// One per MiB (one helper for a 1 MiB copy) took a 1 MiB download after a 2 ms
/// sleep to 0.96 times the driver's speed in a full bench run on the 16-core H200
/// host, where one per 512 KiB (two helpers) had measured 1.47 times in a probe on
/// the same host: the lone helper arrives late and the caller waits for its parts.
pub(crate) const HELPER_BYTES: usize = 512 << 10;

/// In a tight loop (transfers back to back), one helper per
/// this many bytes of host copy, at least one from 64 KiB: each helper spins
/// through the whole transfer, so back to back a transfer's CPU is its latency
/// times its threads, and the count follows the copy.
pub(crate) const BACK_TO_BACK_HELPER_BYTES: usize = 512 << 10;

/// A paced transfer (one that follows an earlier transfer of its buffer, after a
/// gap or within a frame's few transfers, and is not part of a tight loop) that
/// the calling thread would copy alone (no pool helper takes part) goes to the
/// driver's pageable path from these sizes: every upload, and downloads cut in
/// pieces (over 512 KiB; outside tight loops no download wakes a helper, see
/// [`DOWNLOAD_WAKE_MIN_BYTES`]). There the driver's own chunked copy is as fast as
/// ours, and staging only adds the pinned round trip.
///
/// On the 16-core H200 host: in the full bench run at 4521598, uploads staged on the
/// caller alone ran at 0.79-0.99 times the driver's speed in every gap scenario
/// (64 KiB to 192 KiB after sleeps and busy gaps, 192 KiB to 16 MiB beside 15 busy
/// threads). In the run at 7008618 (columns taking turns at every slot), a 1 MiB
/// download staged on the caller alone ran at 1.00, 0.76 and 0.82 times the
/// driver's speed after a 2 ms sleep, a 16 ms sleep and 2 ms of computing, and 1.08
/// beside busy threads. Downloads in one piece (up to 512 KiB) stay staged: in that
/// run they ran at 0.92-1.12 times the driver's speed after gaps, 1.09 at the median
/// of the twelve cells.
///
/// With the rule off (`driver_after_gap: false`; `cargo xtask bench --ab` at 16f66a8
/// on an H100 host, 4 rounds), downloads of 4915200 B ran 1.30 and 1.51 times as
/// long after 2 ms and 16 ms sleeps, for 1.36 and 1.52 times the CPU, and of 1 MiB
/// 1.25 times after 16 ms; beside 15 busy threads 1 MiB ran 0.87 (down) and 0.89
/// (up) times as long.
pub(crate) const DRIVER_AFTER_GAP_MIN_BYTES: PerDirection<usize> = PerDirection {
    upload: 0,
    download: (512 << 10) + 1,
};

/// Whether a transfer of `bytes` moving `direction`, which is paced and which the
/// calling thread would copy alone, goes to the driver's pageable path
/// ([`DRIVER_AFTER_GAP_MIN_BYTES`]).
pub(crate) fn driver_after_gap(bytes: usize, direction: Direction) -> bool {
    bytes >= DRIVER_AFTER_GAP_MIN_BYTES.get(direction)
}

/// Pool helpers a transfer's host copy of `copy_bytes`, moving `direction`, enlists
/// when up to `threads` threads share it (the caller included): outside a tight loop
/// none below [`WAKE_MIN_BYTES`] (uploads; [`LONG_GAP_WAKE_MIN_BYTES`] after a
/// `long_gap`) or [`DOWNLOAD_WAKE_MIN_BYTES`] (downloads: none),
/// then one per [`HELPER_BYTES`] (at least one); `hot` (a tight loop, where
/// helpers are awake anyway) one per
/// [`BACK_TO_BACK_HELPER_BYTES`], at least one from 64 KiB. Never more than
/// `threads - 1`.
///
/// Small downloads after a gap are no exception: one helper woken for a download
/// of 128 KiB to 512 KiB (before its DMA, so it would be up by the time it lands)
/// was slower than the caller alone on the H200 host, 150528 B after a 2 ms sleep
/// 1.03 against 1.13 times the driver's speed and after 16 ms 0.96 against 1.02,
/// for 1.34 against 0.91 times its CPU.
pub(crate) fn helpers_to_wake(
    copy_bytes: usize,
    threads: usize,
    direction: Direction,
    hot: bool,
    long_gap: bool,
) -> usize {
    let (min, per) = if hot {
        (PARALLEL_MIN_BYTES, BACK_TO_BACK_HELPER_BYTES)
    } else {
        let min = match direction {
            Direction::HostToDevice if long_gap => LONG_GAP_WAKE_MIN_BYTES,
            Direction::HostToDevice => WAKE_MIN_BYTES,
            Direction::DeviceToHost => DOWNLOAD_WAKE_MIN_BYTES,
        };
        (min, HELPER_BYTES)
    };
    if threads < 2 || copy_bytes < min.max(PARALLEL_MIN_BYTES) {
        return 0;
    }
    (copy_bytes / per.max(1)).clamp(1, threads - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_copies_after_a_gap_wake_nobody_and_large_ones_wake_up_to_the_cap() {
        let (up, down) = (Direction::HostToDevice, Direction::DeviceToHost);
        // After a gap: uploads nothing under 512 KiB, then one per 512 KiB.
        assert_eq!(helpers_to_wake(150_528, 4, up, false, false), 0);
        assert_eq!(helpers_to_wake((512 << 10) - 1, 4, up, false, false), 0);
        assert_eq!(helpers_to_wake(512 << 10, 4, up, false, false), 1);
        assert_eq!(helpers_to_wake(1 << 20, 4, up, false, false), 2);
        assert_eq!(helpers_to_wake(4_915_200, 4, up, false, false), 3, "capped");
        assert_eq!(helpers_to_wake(4_915_200, 16, up, false, false), 9);
        // After a long gap: uploads nothing under 2 MiB.
        assert_eq!(helpers_to_wake((2 << 20) - 1, 4, up, false, true), 0);
        assert_eq!(helpers_to_wake(2 << 20, 4, up, false, true), 3);
        assert_eq!(
            helpers_to_wake(1 << 20, 4, up, true, true),
            2,
            "back to back"
        );
        // Downloads: nobody, at any size.
        for bytes in [1 << 20, 2 << 20, 4_915_200, 64 << 20] {
            assert_eq!(
                helpers_to_wake(bytes, 4, down, false, false),
                0,
                "{bytes} B"
            );
        }
        for dir in [up, down] {
            // Back to back: at least one from 64 KiB, one per 512 KiB.
            assert_eq!(helpers_to_wake((64 << 10) - 1, 4, dir, true, false), 0);
            assert_eq!(helpers_to_wake(64 << 10, 4, dir, true, false), 1);
            assert_eq!(helpers_to_wake(150_528, 4, dir, true, false), 1);
            assert_eq!(helpers_to_wake(1 << 20, 4, dir, true, false), 2);
            assert_eq!(helpers_to_wake(4_915_200, 4, dir, true, false), 3);
            // One thread: the caller alone.
            assert_eq!(helpers_to_wake(64 << 20, 1, dir, false, false), 0);
            assert_eq!(helpers_to_wake(64 << 20, 1, dir, true, false), 0);
            assert_eq!(helpers_to_wake(64 << 20, 0, dir, true, false), 0);
        }
    }

    #[test]
    fn after_a_gap_solo_uploads_and_downloads_in_pieces_go_to_the_driver() {
        let (up, down) = (Direction::HostToDevice, Direction::DeviceToHost);
        for bytes in [1, 64 << 10, 150_528, 4_915_200, usize::MAX] {
            assert!(driver_after_gap(bytes, up), "upload of {bytes} B");
        }
        for bytes in [1, 64 << 10, 150_528, 512 << 10] {
            assert!(!driver_after_gap(bytes, down), "download of {bytes} B");
        }
        for bytes in [(512 << 10) + 1, 1 << 20, 4_915_200] {
            assert!(driver_after_gap(bytes, down), "download of {bytes} B");
        }
    }
}
