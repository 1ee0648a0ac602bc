//! [`StagingConfig`]: how a [`StagingBuffer`](crate::StagingBuffer) routes, copies and waits, in one value,
//! and the buffer's methods that read and set it.

use cuda_core::{Result, WaitPolicy};

use crate::direction::{Direction, PerDirection};
use crate::errors::invalid;
use crate::plan::PIPELINE_WINDOW_BYTES;

/// Default lower routing bounds: below them `upload` / `download` hand the copy to
/// the driver. For uploads under 32 KiB the driver's pageable path is as fast as a
/// DMA from pinned memory, so a host copy can only add to it (32-core H200 host,
/// `copy_probe small`, interleaved: 16 KiB 9.87 µs pageable, 9.80 raw pinned,
/// 9.8-10.0 copy plus DMA at best); from 32 KiB staging wins (32 KiB: 10.1-11.4
/// against 10.7-12.1 µs; 48 KiB: 11.4-12.8 against 14.0-14.9). The 16-core
/// single-GPU H200 host agrees: staging 0.92-0.97x the driver from 4 to 24 KiB,
/// 1.02-1.06x at 32 KiB. Downloads gain from staging at every size.
pub const DEFAULT_STAGE_MIN_BYTES: PerDirection<usize> = PerDirection {
    upload: 32 << 10,
    download: 0,
};

/// The most copy threads one transfer uses (see [`StagingConfig::copy_threads`](crate::StagingConfig::copy_threads)).
pub const MAX_COPY_THREADS: usize = 64;

/// The most threads one transfer's host copy is split over by default, the caller
/// included: see [`default_copy_threads`].
pub const DEFAULT_COPY_THREADS: usize = 4;

/// The copy-thread default of a new buffer: [`DEFAULT_COPY_THREADS`] (the caller
/// and up to three pool helpers), fewer on a machine with fewer cores.
///
/// A split copy costs CPU on every thread that takes part for as long as the
/// transfer lasts, so more threads buy latency with the program's cores: back to
/// back, 16 threads took a 4915200 B `download` from 136 to 117 µs on the 16-core
/// H200 host, for about 16 cores busy during it. Four threads keep a transfer's CPU
/// per frame within twice the driver's own pageable path while staying faster than
/// it (see the crate docs' table).
pub fn default_copy_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, DEFAULT_COPY_THREADS))
}

/// How a [`StagingBuffer`](crate::StagingBuffer) routes, copies and waits. [`StagingConfig::default`] holds
/// the measured choices; a program changes the fields it needs and hands the value to
/// [`StagingBuffer::with_config`](crate::StagingBuffer::with_config) or [`StagingBuffer::set_config`](crate::StagingBuffer::set_config):
///
/// ```
/// use cuda_staging::{StagingBuffer, StagingConfig, WaitPolicy};
///
/// let staging = StagingBuffer::with_config(StagingConfig {
///     wait_policy: WaitPolicy::Block,
///     ..StagingConfig::default()
/// })?;
/// assert_eq!(staging.config().wait_policy, WaitPolicy::Block);
/// # Ok::<(), cuda_staging::Error>(())
/// ```
///
/// **Routing** (`upload` / `download`; the `_with` / `_into` calls and the 2-D ones
/// always stage): a transfer below `stage_min_bytes` goes to the driver's own copy;
/// otherwise page-locked host memory is DMA'd straight from or into; otherwise a
/// transfer of at most `stage_max_bytes` is staged, unless `driver_after_gap` sends it
/// to the driver, and a larger one goes to the driver's pageable path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StagingConfig {
    /// The lower routing bound of each direction: `upload` / `download` of fewer
    /// bytes go to the driver's pageable path. Default
    /// [`DEFAULT_STAGE_MIN_BYTES`](crate::DEFAULT_STAGE_MIN_BYTES): uploads from
    /// 32 KiB, downloads from any size.
    pub stage_min_bytes: PerDirection<usize>,
    /// The upper routing bound of each direction: pageable transfers of more bytes go
    /// to the driver's pageable path. Default: none (`usize::MAX`).
    /// [`StagingBuffer::set_auto_stage_max_bytes`](crate::StagingBuffer::set_auto_stage_max_bytes) sets both.
    pub stage_max_bytes: PerDirection<usize>,
    /// Whether a paced transfer goes to the driver's pageable path when the calling
    /// thread would copy it alone (no pool helper would take part). Paced: it
    /// follows this buffer's previous transfer after a gap (200 µs or
    /// more) or within a frame's few transfers, and is not one of a tight loop (five
    /// or more back to back); never the buffer's first transfer, which pins its
    /// memory. That is every such upload, and downloads over 512 KiB (outside tight
    /// loops no download wakes a helper): there the driver's own chunked copy is as
    /// fast as the caller's, and staging only adds the pinned round trip; smaller
    /// downloads are faster staged. After a gap of 8 ms or more (a frame loop at 60
    /// frames per second or fewer), uploads under 2 MiB wake no helper either, so
    /// they go to the driver too. Off, every transfer the bounds stage is staged,
    /// however long the gap before it. On by default.
    pub driver_after_gap: bool,
    /// How this buffer's calls wait for their transfers to land, on every route. The
    /// default, [`WaitPolicy::default`], polls for [`crate::DEFAULT_SPIN`], then polls
    /// with [`crate::POLL_SLEEP`] sleeps between, so a transfer queued behind a
    /// model's run sleeps through the run instead of spinning a core; a transfer with
    /// nothing queued ahead of it keeps a spinning wait's latency (a small one polls
    /// for its own link time too, one of 400 KB and more keeps to the driver's
    /// spinning wait). [`WaitPolicy::Spin`] spins through every wait (lowest latency,
    /// a core busy while the GPU works); [`WaitPolicy::Block`] blocks in the driver at
    /// once (the least CPU, and 100-180 µs of wake-up on every transfer on the H200
    /// host).
    pub wait_policy: WaitPolicy,
    /// How many threads (the calling one included) share a large host copy, from 1
    /// (every copy on the calling thread; the pool is not used) to
    /// [`MAX_COPY_THREADS`]. Default [`default_copy_threads`]. The helpers come from
    /// the process-wide pool ([`crate::pool_threads`] workers, started at the first
    /// copy that wants them), which every buffer shares, so more buffers do not mean
    /// more threads. Uploads copy in on at most 8 threads, and downloads of 8 MiB and
    /// more copy out on at most 8: their copy-out reads memory rather than cache, and
    /// more threads slowed the DMA they compete with on the 32-core H200 host (16 MiB:
    /// 631 µs on 16 threads, 522 µs on 8).
    pub copy_threads: usize,
    /// The chunk size of pipelined `upload` / `download` transfers, rounded up to
    /// 64 KiB, at most [`PIPELINE_WINDOW_BYTES`]. 0 (the default) picks per direction:
    /// uploads over 1 MiB in about quarters (256 KiB to 2 MiB), downloads over
    /// 512 KiB in about eighths (512 KiB to 2 MiB), and uploads of 64 KiB to 1 MiB in
    /// halves when the copy threads are parked. With a size set, every staged
    /// transfer larger than one chunk is pipelined.
    pub pipeline_chunk_bytes: usize,
    /// Whether batches ([`StagingBuffer::download_batch`](crate::StagingBuffer::download_batch),
    /// [`StagingBuffer::upload_batch`](crate::StagingBuffer::upload_batch)) go out as one `cuMemcpyBatchAsync` where the
    /// driver has it (the default), or as one queued copy per part; both end with one
    /// wait.
    pub batch_api: bool,
}

impl Default for StagingConfig {
    fn default() -> Self {
        StagingConfig {
            stage_min_bytes: DEFAULT_STAGE_MIN_BYTES,
            stage_max_bytes: PerDirection::both(usize::MAX),
            driver_after_gap: true,
            wait_policy: WaitPolicy::default(),
            copy_threads: default_copy_threads(),
            pipeline_chunk_bytes: 0,
            batch_api: true,
        }
    }
}

impl StagingConfig {
    /// Whether `upload` (`HostToDevice`) or `download` (`DeviceToHost`) of `bytes`
    /// from ordinary pageable memory is within the routing bounds (staged unless
    /// `driver_after_gap` sends it to the driver) or handed to the driver's pageable
    /// path (`false`). Page-locked memory at or above the lower bound is DMA'd
    /// directly whatever this says.
    pub fn stages(&self, direction: Direction, bytes: usize) -> bool {
        bytes >= self.stage_min_bytes.get(direction) && bytes <= self.stage_max_bytes.get(direction)
    }

    /// `self` as a buffer keeps it: the chunk size rounded up to 64 KiB; an error that
    /// names the field for a value no buffer can take.
    pub(crate) fn checked(mut self, op: &'static str) -> Result<StagingConfig> {
        check_copy_threads(op, self.copy_threads)?;
        if self.pipeline_chunk_bytes > PIPELINE_WINDOW_BYTES {
            let reason = format!(
                "pipeline_chunk_bytes is {}; it must be at most {PIPELINE_WINDOW_BYTES} (0: automatic)",
                self.pipeline_chunk_bytes
            );
            return Err(invalid(op, reason));
        }
        self.pipeline_chunk_bytes = self
            .pipeline_chunk_bytes
            .next_multiple_of(crate::capacity::GROW_GRANULE_BYTES);
        Ok(self)
    }
}

/// Slots of [`RingConfig::default`] (and [`crate::StagingRing::new`]): one in flight,
/// one being filled, one spare.
pub const DEFAULT_RING_SLOTS: usize = 3;
/// The most slots a ring can have.
pub const MAX_RING_SLOTS: usize = 64;

/// How a [`crate::StagingRing`] is made: its slots, the threads its `upload` copies
/// on, and how its waits wait. Fixed for the ring's life (a ring pins nothing until
/// its first transfer, so another configuration is another ring):
///
/// ```
/// use cuda_staging::{RingConfig, StagingRing, WaitPolicy};
///
/// let ring = StagingRing::with_config(RingConfig {
///     slots: 4,
///     wait_policy: WaitPolicy::Spin,
///     ..RingConfig::default()
/// })?;
/// assert_eq!(ring.config().slots, 4);
/// # Ok::<(), cuda_staging::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingConfig {
    /// Slots, 1 to [`MAX_RING_SLOTS`]: enough for the transfers in flight at once.
    /// Default [`DEFAULT_RING_SLOTS`].
    pub slots: usize,
    /// Threads (the calling one included) that share `upload`'s host copy from a
    /// slice, as [`StagingConfig::copy_threads`]. Default [`default_copy_threads`].
    pub copy_threads: usize,
    /// How the ring's waits (`wait`, a full ring's next transfer, `synchronize`)
    /// wait for the GPU. The default, [`WaitPolicy::default`], polls for
    /// [`crate::DEFAULT_SPIN`], then polls with [`crate::POLL_SLEEP`] sleeps between:
    /// a wait for a download queued behind a model's run sleeps through the run
    /// instead of spinning a core. [`WaitPolicy::Spin`] spins through every wait;
    /// [`WaitPolicy::Block`] blocks in the driver at once (the least CPU, and
    /// 100-180 µs of wake-up on every wait on the H200 host).
    pub wait_policy: WaitPolicy,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            slots: DEFAULT_RING_SLOTS,
            copy_threads: default_copy_threads(),
            wait_policy: WaitPolicy::default(),
        }
    }
}

impl RingConfig {
    /// `self`, or an error that names the field for a value no ring can take.
    pub(crate) fn checked(self, op: &'static str) -> Result<RingConfig> {
        if !(1..=MAX_RING_SLOTS).contains(&self.slots) {
            let reason = format!("slots is {}; a ring has 1 to {MAX_RING_SLOTS}", self.slots);
            return Err(invalid(op, reason));
        }
        check_copy_threads(op, self.copy_threads)?;
        Ok(self)
    }
}

/// `copy_threads` of a [`StagingConfig`] or a [`RingConfig`]: 1 to
/// [`MAX_COPY_THREADS`], or an error that names the field.
fn check_copy_threads(op: &'static str, copy_threads: usize) -> Result<()> {
    if (1..=MAX_COPY_THREADS).contains(&copy_threads) {
        return Ok(());
    }
    Err(invalid(
        op,
        format!("copy_threads is {copy_threads}; it must be from 1 (the calling thread alone) to {MAX_COPY_THREADS}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StagingBuffer;
    use cuda_core::Error;

    #[test]
    fn a_config_is_kept_as_given_and_a_bad_one_changes_nothing() {
        let mut s = StagingBuffer::new();
        assert_eq!(s.config(), StagingConfig::default());
        let c = StagingConfig {
            stage_min_bytes: PerDirection::both(7),
            stage_max_bytes: PerDirection {
                upload: 100,
                download: 200,
            },
            driver_after_gap: false,
            wait_policy: WaitPolicy::Block,
            copy_threads: MAX_COPY_THREADS,
            pipeline_chunk_bytes: 64 << 10,
            batch_api: false,
        };
        s.set_config(c).unwrap();
        assert_eq!(s.config(), c);
        assert_eq!(s.auto_stage_max_bytes(), 100);
        for bad in [
            StagingConfig {
                copy_threads: 0,
                ..StagingConfig::default()
            },
            StagingConfig {
                copy_threads: MAX_COPY_THREADS + 1,
                ..StagingConfig::default()
            },
            StagingConfig {
                pipeline_chunk_bytes: PIPELINE_WINDOW_BYTES + 1,
                ..StagingConfig::default()
            },
        ] {
            let e = s.set_config(bad).unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::InvalidArgument {
                        op: "StagingBuffer::set_config",
                        ..
                    }
                ),
                "{e}"
            );
            assert_eq!(s.config(), c, "a refused config changes nothing");
        }
    }

    #[test]
    fn chunk_sizes_round_up_to_the_granule_and_stop_at_the_window() {
        let mut s = StagingBuffer::new();
        for (asked, kept) in [
            (1, 64 << 10),
            (PIPELINE_WINDOW_BYTES, PIPELINE_WINDOW_BYTES),
            (0, 0),
        ] {
            s.set_config(StagingConfig {
                pipeline_chunk_bytes: asked,
                ..s.config()
            })
            .unwrap();
            assert_eq!(s.config().pipeline_chunk_bytes, kept, "{asked}");
        }
    }

    #[test]
    fn the_seed_s_threshold_sets_the_upper_bounds_alone() {
        let mut s = StagingBuffer::new();
        s.set_auto_stage_max_bytes(crate::DEFAULT_AUTO_STAGE_MAX_BYTES);
        assert_eq!(s.auto_stage_max_bytes(), 512 * 1024);
        let c = s.config();
        assert_eq!(c.stage_max_bytes, PerDirection::both(512 * 1024));
        assert_eq!(
            StagingConfig {
                stage_max_bytes: PerDirection::both(usize::MAX),
                ..c
            },
            StagingConfig::default(),
            "nothing else changed"
        );
        assert!(!c.stages(Direction::HostToDevice, (32 << 10) - 1));
        assert!(c.stages(Direction::HostToDevice, 32 << 10));
        assert!(c.stages(Direction::DeviceToHost, 512 * 1024));
        assert!(!c.stages(Direction::DeviceToHost, 512 * 1024 + 1));
    }

    #[test]
    fn a_ring_config_no_ring_can_take_names_its_field() {
        assert_eq!(
            RingConfig::default().checked("t"),
            Ok(RingConfig::default())
        );
        for (bad, field) in [
            (
                RingConfig {
                    slots: 0,
                    ..RingConfig::default()
                },
                "slots",
            ),
            (
                RingConfig {
                    slots: MAX_RING_SLOTS + 1,
                    ..RingConfig::default()
                },
                "slots",
            ),
            (
                RingConfig {
                    copy_threads: 0,
                    ..RingConfig::default()
                },
                "copy_threads",
            ),
            (
                RingConfig {
                    copy_threads: MAX_COPY_THREADS + 1,
                    ..RingConfig::default()
                },
                "copy_threads",
            ),
        ] {
            match bad.checked("StagingRing::with_config") {
                Err(Error::InvalidArgument { op, reason }) => {
                    assert_eq!(op, "StagingRing::with_config");
                    assert!(reason.starts_with(field), "{reason}");
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }
}
