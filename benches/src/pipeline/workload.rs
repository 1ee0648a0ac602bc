//! Everything one pipeline owns, shared by the bench and the example: the frames and
//! their expected results, the device side, and the host memory of each way to run
//! it (ordinary `Vec`s, a [`StagingBuffer`], two [`StagingRing`]s, and the pinned
//! buffers the GPU stage is timed with).
//!
//! Every frame's result is checked against the checksum computed on the CPU alone
//! at start: a wrong or stale output is an error, never a measurement.

use std::time::Duration;

use cuda_core::{Error, PinnedBuffer};
use cuda_staging::{RingConfig, StagingBuffer, StagingRing, WaitPolicy};

use super::cpu::{
    expected_checksums, preprocessed, source_frames, Best, ANCHORS, INPUT_LEN, SCORES_LEN,
    SMALL_16K_LEN, SMALL_64K_LEN, SMALL_U8_LEN,
};
use super::device::{DeviceSide, Work};
use crate::Gpu;

/// The host side of the `pageable-sync` loop: ordinary `Vec`s.
pub(super) struct PageableHost {
    pub(super) input: Vec<f32>,
    pub(super) scores: Vec<f32>,
    pub(super) small_u8: Vec<u8>,
    pub(super) small_16k: Vec<f32>,
    pub(super) small_64k: Vec<f32>,
}

/// Pinned memory for timing the stages alone: preprocessed inputs (the CPU stage
/// writes one after another, as the ring's upload slots are written; the GPU stage
/// uploads the last one written) and one buffer per output.
pub(super) struct StageHost {
    /// As many as the upload ring has slots.
    pub(super) inputs: Vec<PinnedBuffer<f32>>,
    /// The input the CPU stage wrote last.
    pub(super) last: usize,
    /// The source frame `inputs[last]` holds.
    pub(super) input_frame: usize,
    /// The source frame whose outputs the buffers below hold, once the GPU stage
    /// has run.
    pub(super) outputs_frame: usize,
    pub(super) scores: PinnedBuffer<f32>,
    pub(super) small_u8: PinnedBuffer<u8>,
    pub(super) small_16k: PinnedBuffer<f32>,
    pub(super) small_64k: PinnedBuffer<f32>,
}

/// One pipeline: frames, expected results, device side, and host memory.
pub struct Workload<'g> {
    pub(super) gpu: &'g Gpu,
    /// The decoded frames, HWC `u8`, in ordinary memory.
    pub(super) frames: Vec<Vec<u8>>,
    /// Each frame's expected checksum.
    pub(super) expected: Vec<u64>,
    pub(super) dev: DeviceSide,
    /// The stand-in model's extra GPU time ([`Workload::set_work`]).
    pub(super) work: Work,
    /// Post-processing results, reused by every frame.
    pub(super) best: Vec<Best>,
    pub(super) pageable: PageableHost,
    pub(super) stage: StageHost,
    /// The `staging-sync` loop's buffer.
    pub(super) staging: StagingBuffer,
    /// The `ring` loop's uploads.
    pub(super) up: StagingRing,
    /// Where the calling thread's time went in the last ring loop.
    pub(super) ring_split: RingSplit,
    /// The `ring` loop's downloads.
    pub(super) down: StagingRing,
    /// The `ring-spin` loop's uploads and downloads: rings like `up` and `down`
    /// that spin through their waits (a ring's configuration is fixed when made).
    pub(super) spin: (StagingRing, StagingRing),
}

impl<'g> Workload<'g> {
    /// Makes the frames and their expected results, and allocates everything, with
    /// scratch buffers of `scratch_bytes` for the stand-in model. The GPU work starts
    /// at [`Work::NONE`].
    pub fn new(gpu: &'g Gpu, scratch_bytes: usize) -> Result<Workload<'g>, String> {
        let frames = source_frames();
        let reference = preprocessed(&frames);
        let expected = expected_checksums(&reference)?;
        let alloc = |e: Error| format!("allocating the pipeline's memory: {e}");
        let ctx = &gpu.ctx;
        let up = StagingRing::new();
        let mut inputs = Vec::new();
        for _ in 0..up.config().slots {
            let mut input = PinnedBuffer::<f32>::alloc_in(ctx, INPUT_LEN).map_err(alloc)?;
            input
                .as_mut_slice()
                .map_err(alloc)?
                .copy_from_slice(&reference[0]);
            inputs.push(input);
        }
        let stage = StageHost {
            inputs,
            last: 0,
            input_frame: 0,
            outputs_frame: 0,
            scores: PinnedBuffer::alloc_in(ctx, SCORES_LEN).map_err(alloc)?,
            small_u8: PinnedBuffer::alloc_in(ctx, SMALL_U8_LEN).map_err(alloc)?,
            small_16k: PinnedBuffer::alloc_in(ctx, SMALL_16K_LEN).map_err(alloc)?,
            small_64k: PinnedBuffer::alloc_in(ctx, SMALL_64K_LEN).map_err(alloc)?,
        };
        Ok(Workload {
            gpu,
            frames,
            expected,
            dev: DeviceSide::new(ctx, scratch_bytes).map_err(alloc)?,
            work: Work::NONE,
            best: vec![(0, 0.0); ANCHORS],
            pageable: PageableHost {
                input: vec![0.0; INPUT_LEN],
                scores: vec![0.0; SCORES_LEN],
                small_u8: vec![0; SMALL_U8_LEN],
                small_16k: vec![0.0; SMALL_16K_LEN],
                small_64k: vec![0.0; SMALL_64K_LEN],
            },
            stage,
            staging: StagingBuffer::new(),
            up,
            down: StagingRing::new(),
            spin: (spinning_ring()?, spinning_ring()?),
            ring_split: RingSplit::default(),
        })
    }

    /// The stand-in model's extra GPU time.
    pub fn work(&self) -> Work {
        self.work
    }

    /// Sets the stand-in model's extra GPU time for the loops.
    pub fn set_work(&mut self, work: Work) {
        self.work = work;
    }

    /// Bytes of each scratch buffer of the stand-in model.
    pub fn scratch_bytes(&self) -> usize {
        self.dev.scratch_bytes()
    }

    /// The `staging-sync` loop's buffer (for its stats).
    pub fn staging(&self) -> &StagingBuffer {
        &self.staging
    }

    /// The `ring` loop's upload ring (for its stats).
    pub fn upload_ring(&self) -> &StagingRing {
        &self.up
    }

    /// The `ring` loop's download ring (for its stats).
    pub fn download_ring(&self) -> &StagingRing {
        &self.down
    }
}

/// `Ok` when `checksum` is the expected result of frame `k` (source frame
/// `k % expected.len()`); otherwise an error that says whether it is another
/// frame's result (stale data) or nobody's.
pub fn check_frame(expected: &[u64], what: &str, k: usize, checksum: u64) -> Result<(), String> {
    let source = k % expected.len().max(1);
    match expected.get(source) {
        Some(&want) if want == checksum => Ok(()),
        want => {
            let whose = expected.iter().position(|&e| e == checksum).map_or_else(
                || "no frame's result".to_string(),
                |j| format!("the result of source frame {j} (stale data?)"),
            );
            Err(format!(
                "{what}: frame {k} (source frame {source}) gave a wrong result: checksum \
                 {checksum:#018x}, expected {:#018x}; it is {whose}",
                want.copied().unwrap_or_default()
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrong_result_names_the_frame_and_a_stale_one_its_source() {
        let expected = [10, 11, 12, 13];
        assert!(check_frame(&expected, "ring", 6, 12).is_ok());
        let e = check_frame(&expected, "ring", 6, 11).unwrap_err();
        assert!(
            e.contains("ring: frame 6 (source frame 2) gave a wrong result"),
            "{e}"
        );
        assert!(
            e.contains("the result of source frame 1 (stale data?)"),
            "{e}"
        );
        let e = check_frame(&expected, "ring", 0, 99).unwrap_err();
        assert!(e.contains("no frame's result"), "{e}");
    }
}

/// Where the calling thread's time went in a ring loop, summed over its frames: the
/// upload (the preprocessing inside its fill, and queueing it), the wait for a
/// frame's outputs, and the post-processing with its check. Thread CPU
/// (`CLOCK_THREAD_CPUTIME_ID`) and wall time; zero where the clock is unavailable.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RingSplit {
    /// Frames summed.
    pub frames: u32,
    /// The upload's thread CPU.
    pub upload_cpu: Duration,
    /// The wait's wall time.
    pub wait_wall: Duration,
    /// The wait's thread CPU.
    pub wait_cpu: Duration,
    /// The post-processing's thread CPU.
    pub post_cpu: Duration,
}

impl RingSplit {
    /// Per frame, µs: (upload CPU, wait wall, wait CPU, post-processing CPU).
    pub fn per_frame_us(&self) -> (f64, f64, f64, f64) {
        let n = f64::from(self.frames.max(1));
        let us = |d: Duration| d.as_secs_f64() * 1e6 / n;
        (
            us(self.upload_cpu),
            us(self.wait_wall),
            us(self.wait_cpu),
            us(self.post_cpu),
        )
    }
}

/// A ring of the default configuration that spins through its waits.
fn spinning_ring() -> Result<StagingRing, String> {
    StagingRing::with_config(RingConfig {
        wait_policy: WaitPolicy::Spin,
        ..RingConfig::default()
    })
    .map_err(|e| format!("a spinning ring: {e}"))
}
