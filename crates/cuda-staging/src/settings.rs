//! [`StagingBuffer`]'s knobs: routing thresholds, copy threads, pipeline chunk,
//! low-latency mode and the batch API.

use crate::buffer::MAX_COPY_THREADS;
use crate::pipeline::PIPELINE_WINDOW_BYTES;
use crate::routing::{Direction, PerDirection};
use crate::{StagingBuffer, WaitPolicy};

impl StagingBuffer {
    /// The routing threshold of `upload` / `download`: transfers of at most this many
    /// bytes are staged, larger ones go to the driver's pageable path. When the two
    /// directions differ (after [`StagingBuffer::calibrate`] or
    /// [`StagingBuffer::set_stage_max_bytes`]), the smaller.
    pub fn auto_stage_max_bytes(&self) -> usize {
        self.routing.max.upload.min(self.routing.max.download)
    }

    /// Sets the routing threshold for both directions and clears the lower bounds
    /// (and [`StagingBuffer::driver_after_gap`]): afterwards transfers of at most `bytes` are staged and larger ones go to the
    /// driver's pageable path. `0` sends every non-empty convenience transfer to the
    /// driver; `usize::MAX` stages all. [`crate::DEFAULT_AUTO_STAGE_MAX_BYTES`] is
    /// 512 KiB.
    pub fn set_auto_stage_max_bytes(&mut self, bytes: usize) {
        self.routing.max = PerDirection::both(bytes);
        self.routing.min = PerDirection::both(0);
        self.routing.driver_after_gap = false;
    }

    /// The lower routing bound of one direction: `upload` / `download` of fewer
    /// bytes go to the driver's pageable path. Defaults to
    /// [`crate::DEFAULT_STAGE_MIN_BYTES`].
    pub fn stage_min_bytes(&self, direction: Direction) -> usize {
        self.routing.min.get(direction)
    }

    /// Sets the lower routing bound of one direction.
    pub fn set_stage_min_bytes(&mut self, direction: Direction, bytes: usize) {
        self.routing.min.set(direction, bytes);
    }

    /// Whether `upload` (`HostToDevice`) or `download` (`DeviceToHost`) of `bytes`
    /// from ordinary pageable memory is staged (`true`) or handed to the driver's
    /// pageable path (`false`). Page-locked slices at or above the lower bound are
    /// DMA'd directly whatever this says.
    pub fn stages(&self, direction: Direction, bytes: usize) -> bool {
        self.routing.stages(direction, bytes)
    }

    /// The routing threshold of one direction.
    pub fn stage_max_bytes(&self, direction: Direction) -> usize {
        self.routing.max.get(direction)
    }

    /// Sets the routing threshold of one direction.
    pub fn set_stage_max_bytes(&mut self, direction: Direction, bytes: usize) {
        self.routing.max.set(direction, bytes);
    }

    /// Whether `upload` / `download` hand a paced transfer to the driver's pageable
    /// path when the calling thread would copy it alone (no pool helper would take
    /// part; not in low-latency mode). Paced: it follows this buffer's previous
    /// transfer after a gap (200 µs or more) or within a frame's few transfers, and
    /// is not one of a tight loop (five or more back to back); never the buffer's
    /// first transfer, which pins its memory.
    /// That is every such upload, and downloads over 512 KiB (outside tight loops
    /// no download wakes a helper): there the driver's own chunked copy is as fast
    /// as the caller's, and staging only adds the pinned round trip; smaller
    /// downloads are faster staged. On by default.
    pub fn driver_after_gap(&self) -> bool {
        self.routing.driver_after_gap
    }

    /// Turns [`StagingBuffer::driver_after_gap`] routing on or off. Off, every
    /// transfer the routing bounds stage is staged, however long the gap before it
    /// (for measuring or testing the staged path itself, or a host where staging
    /// wins after gaps too).
    pub fn set_driver_after_gap(&mut self, on: bool) {
        self.routing.driver_after_gap = on;
    }

    /// How this buffer's calls wait for the GPU; see
    /// [`StagingBuffer::set_wait_policy`].
    pub fn wait_policy(&self) -> WaitPolicy {
        self.wait
    }

    /// Sets how this buffer's calls wait for their transfers to land. The default,
    /// [`WaitPolicy::default`], polls for [`crate::DEFAULT_SPIN`], then polls with
    /// [`crate::POLL_SLEEP`] sleeps between, so a transfer queued behind a model's
    /// run sleeps through the run instead of spinning a core; a transfer with
    /// nothing queued ahead of it keeps a spinning wait's latency (a small one polls
    /// for its own link time too, one of 400 KB and more keeps to the driver's
    /// spinning wait; see the `waiting` module).
    /// [`WaitPolicy::Spin`] spins through every wait (lowest latency, a core busy
    /// while the GPU works); [`WaitPolicy::Block`] blocks in the driver at once (the
    /// least CPU, and 100-180 µs of wake-up on every transfer on the H200 host).
    pub fn set_wait_policy(&mut self, policy: WaitPolicy) {
        self.wait = policy;
    }

    /// Threads (the calling one included) that share a large host copy.
    pub fn copy_threads(&self) -> usize {
        self.copy_threads
    }

    /// Sets how many threads (the calling one included) share a large host copy,
    /// from 1 (every copy on the calling thread; the pool is not used) to
    /// [`MAX_COPY_THREADS`]. The helpers come from the process-wide pool
    /// ([`crate::pool_threads`] workers, started at the first copy that wants them),
    /// which every buffer shares, so more buffers do not mean more threads.
    /// Uploads copy in on at most 8 threads, and downloads of 8 MiB and more copy out
    /// on at most 8: their copy-out reads memory rather than cache, and more threads
    /// slowed the DMA they compete with on the 32-core H200 host (16 MiB: 631 µs on
    /// 16 threads, 522 µs on 8).
    pub fn set_copy_threads(&mut self, threads: usize) {
        self.copy_threads = threads.clamp(1, MAX_COPY_THREADS);
    }

    /// The chunk size of pipelined `upload` / `download` transfers; 0 (the default)
    /// picks per direction: uploads over 1 MiB in about quarters (256 KiB to 2 MiB),
    /// downloads over 512 KiB in about eighths (512 KiB to 2 MiB), and uploads of
    /// 64 KiB to 1 MiB in halves when the copy threads are parked.
    pub fn pipeline_chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    /// Sets the chunk size of pipelined `upload` / `download` transfers (rounded up
    /// to 64 KiB, at most [`PIPELINE_WINDOW_BYTES`]; 0 restores the automatic
    /// choice). With a size set, every staged transfer larger than one chunk is
    /// pipelined.
    pub fn set_pipeline_chunk_bytes(&mut self, bytes: usize) {
        self.chunk_bytes = bytes
            .min(PIPELINE_WINDOW_BYTES)
            .next_multiple_of(crate::capacity::GROW_GRANULE_BYTES);
    }

    /// Whether low-latency mode is on (see [`StagingBuffer::set_low_latency`]).
    pub fn low_latency(&self) -> bool {
        self.low_latency
    }

    /// Low-latency mode, off by default: trades cores for latency. When on, every
    /// transfer of this buffer leaves [`StagingBuffer::copy_threads`] `- 1` pool
    /// helpers spinning until its next transfer, as long as transfers keep coming
    /// at least every 100 ms, so no transfer finds them parked; and its copies use
    /// them as a tight loop would (one per 128 KiB of host copy, from 64 KiB).
    ///
    /// **CPU cost:** while on and in use, one core per helper spins continuously
    /// (three by default), whatever the frame rate. The default parks helpers
    /// between transfers and wakes them only for copies that pay for it (see the
    /// crate docs). Switching it off lets every helper park after its current
    /// linger.
    pub fn set_low_latency(&mut self, on: bool) {
        let was = self.low_latency;
        self.low_latency = on;
        if was && !on {
            if let Some(pool) = crate::pool::existing() {
                pool.cool();
            }
        }
    }

    /// Whether batches ([`StagingBuffer::download_batch`], [`StagingBuffer::upload_batch`])
    /// go out as one `cuMemcpyBatchAsync` where the driver has it (the default), or
    /// as one queued copy per part; both end with one wait.
    pub fn batch_api(&self) -> bool {
        self.batch_api
    }

    /// Sets whether batches use `cuMemcpyBatchAsync` (see [`StagingBuffer::batch_api`]).
    pub fn set_batch_api(&mut self, on: bool) {
        self.batch_api = on;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_are_set_per_direction_and_together() {
        let mut s = StagingBuffer::new();
        s.set_auto_stage_max_bytes(crate::DEFAULT_AUTO_STAGE_MAX_BYTES);
        assert_eq!(s.auto_stage_max_bytes(), 512 * 1024);
        assert_eq!(
            s.stage_min_bytes(Direction::HostToDevice),
            0,
            "the seed's routing has no lower bound"
        );
        s.set_stage_max_bytes(Direction::DeviceToHost, 0);
        assert_eq!(s.stage_max_bytes(Direction::HostToDevice), 512 * 1024);
        assert_eq!(s.auto_stage_max_bytes(), 0);
        s.set_auto_stage_max_bytes(usize::MAX);
        assert_eq!(s.stage_max_bytes(Direction::DeviceToHost), usize::MAX);
        s.set_copy_threads(0);
        assert_eq!(s.copy_threads(), 1);
        s.set_copy_threads(1000);
        assert_eq!(s.copy_threads(), MAX_COPY_THREADS);
    }

    #[test]
    fn chunk_sizes_round_up_to_the_granule_and_stop_at_the_window() {
        let mut s = StagingBuffer::new();
        s.set_pipeline_chunk_bytes(1);
        assert_eq!(s.pipeline_chunk_bytes(), 64 << 10);
        s.set_pipeline_chunk_bytes(usize::MAX);
        assert_eq!(s.pipeline_chunk_bytes(), PIPELINE_WINDOW_BYTES);
        s.set_pipeline_chunk_bytes(0);
        assert_eq!(s.pipeline_chunk_bytes(), 0);
    }
}
