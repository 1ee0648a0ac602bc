//! The pipeline's device side: the input and output buffers, and the stand-in for a
//! model, queued on the stream after the upload.
//!
//! The stand-in copies parts of the input into the four outputs (so every output is
//! a known function of the frame, and the CPU can check it), then spends GPU time
//! with device-to-device copies between two scratch buffers: [`Work`] bytes of them,
//! in as few calls as the scratch size allows, so that the calling thread spends
//! little time queueing them (each call costs a few µs of CPU, which a ring loop pays
//! on its critical path and the GPU stage timed alone would hide).

use cuda_core::{Context, DeviceBuffer, Error};
use cuda_staging::{DownloadBatch, Landed, Part, Stream};

use super::cpu::{
    Outputs, INPUT_LEN, SCORES_FROM, SCORES_LEN, SMALL_16K_FROM, SMALL_16K_LEN, SMALL_64K_FROM,
    SMALL_64K_LEN, SMALL_U8_FROM, SMALL_U8_LEN,
};

/// Bytes of each of the two scratch buffers: 512 MiB (one copy of it takes a few
/// hundred µs on an H200, so a few ms of work is about ten calls).
pub const SCRATCH_BYTES: usize = 512 << 20;

/// How much GPU time the stand-in spends beyond producing the outputs: bytes of
/// device-to-device copies between the scratch buffers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Bytes copied in all.
    pub bytes: usize,
}

impl Work {
    /// No extra work: the outputs only.
    pub const NONE: Work = Work { bytes: 0 };

    /// Calls it takes with scratch buffers of `scratch_bytes`.
    pub fn copies(self, scratch_bytes: usize) -> usize {
        self.bytes.div_ceil(scratch_bytes.max(1))
    }

    /// `scratch_bytes` scaled by `factor` (≥ 0), rounded to whole 4 KiB.
    pub fn scaled(scratch_bytes: usize, factor: f64) -> Work {
        let bytes = (scratch_bytes as f64 * factor.max(0.0)) as usize;
        Work {
            bytes: bytes / 4096 * 4096,
        }
    }
}

/// Where a frame's outputs sit in a landed batch.
#[derive(Clone, Copy, Debug)]
pub struct OutputParts {
    scores: Part<f32>,
    small_u8: Part<u8>,
    small_16k: Part<f32>,
    small_64k: Part<f32>,
}

impl OutputParts {
    /// The outputs in `landed` (a batch made by [`DeviceSide::output_batch`]).
    pub fn outputs<'s>(&self, landed: &Landed<'s>) -> Result<Outputs<'s>, Error> {
        Ok(Outputs {
            scores: landed.get(self.scores)?,
            small_u8: landed.get(self.small_u8)?,
            small_16k: landed.get(self.small_16k)?,
            small_64k: landed.get(self.small_64k)?,
        })
    }
}

/// The pipeline's device memory.
#[derive(Debug)]
pub struct DeviceSide {
    /// The preprocessed frame: 3×640×640 `f32`.
    pub input: DeviceBuffer<f32>,
    /// The YOLO-shaped output: 84×8400 `f32`.
    pub scores: DeviceBuffer<f32>,
    /// A 4 KiB `u8` output.
    pub small_u8: DeviceBuffer<u8>,
    /// A 16 KiB `f32` output.
    pub small_16k: DeviceBuffer<f32>,
    /// A 64 KiB `f32` output.
    pub small_64k: DeviceBuffer<f32>,
    scratch: [DeviceBuffer<u8>; 2],
}

impl DeviceSide {
    /// Allocates the buffers in `ctx`, with two scratch buffers of `scratch_bytes`
    /// (outputs zeroed, scratch contents left as they come).
    pub fn new(ctx: &Context, scratch_bytes: usize) -> Result<DeviceSide, Error> {
        let zeroed_f32 = |len| -> Result<DeviceBuffer<f32>, Error> {
            let mut b = DeviceBuffer::<f32>::alloc_in(ctx, len)?;
            b.copy_from_host(&vec![0f32; len])?;
            Ok(b)
        };
        let mut small_u8 = DeviceBuffer::<u8>::alloc_in(ctx, SMALL_U8_LEN)?;
        small_u8.copy_from_host(&[0u8; SMALL_U8_LEN])?;
        Ok(DeviceSide {
            input: zeroed_f32(INPUT_LEN)?,
            scores: zeroed_f32(SCORES_LEN)?,
            small_u8,
            small_16k: zeroed_f32(SMALL_16K_LEN)?,
            small_64k: zeroed_f32(SMALL_64K_LEN)?,
            scratch: [
                DeviceBuffer::<u8>::alloc_in(ctx, scratch_bytes)?,
                DeviceBuffer::<u8>::alloc_in(ctx, scratch_bytes)?,
            ],
        })
    }

    /// Bytes of each scratch buffer.
    pub fn scratch_bytes(&self) -> usize {
        self.scratch[0].len()
    }

    /// Queues the stand-in model on `stream`, after whatever is queued there (the
    /// frame's upload): the four outputs from parts of the input, then `work`.
    pub fn queue_work(&mut self, stream: &Stream, work: Work) -> Result<(), Error> {
        let input = &self.input;
        stream.memcpy_dtod(
            &input.slice(SCORES_FROM..SCORES_FROM + SCORES_LEN)?,
            &mut self.scores,
        )?;
        let u8_from = SMALL_U8_FROM * 4;
        stream.memcpy_dtod(
            &input.as_bytes().subview(u8_from..u8_from + SMALL_U8_LEN)?,
            &mut self.small_u8,
        )?;
        stream.memcpy_dtod(
            &input.slice(SMALL_16K_FROM..SMALL_16K_FROM + SMALL_16K_LEN)?,
            &mut self.small_16k,
        )?;
        stream.memcpy_dtod(
            &input.slice(SMALL_64K_FROM..SMALL_64K_FROM + SMALL_64K_LEN)?,
            &mut self.small_64k,
        )?;
        self.queue_scratch_copies(stream, work)
    }

    /// Queues `work` alone: copies back and forth between the scratch buffers.
    pub fn queue_scratch_copies(&mut self, stream: &Stream, work: Work) -> Result<(), Error> {
        let [a, b] = &mut self.scratch;
        let chunk = a.len();
        let mut left = work.bytes;
        let mut forward = true;
        while left > 0 {
            let n = left.min(chunk);
            if forward {
                stream.memcpy_dtod(&a.slice(..n)?, b)?;
            } else {
                stream.memcpy_dtod(&b.slice(..n)?, a)?;
            }
            forward = !forward;
            left -= n;
        }
        Ok(())
    }

    /// A batch of the four outputs, to download together, and where each will sit.
    pub fn output_batch(&self) -> Result<(DownloadBatch<'_>, OutputParts), Error> {
        let mut batch = DownloadBatch::new();
        let parts = OutputParts {
            scores: batch.add(&self.scores, SCORES_LEN)?,
            small_u8: batch.add(&self.small_u8, SMALL_U8_LEN)?,
            small_16k: batch.add(&self.small_16k, SMALL_16K_LEN)?,
            small_64k: batch.add(&self.small_64k, SMALL_64K_LEN)?,
        };
        Ok((batch, parts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_is_split_into_whole_scratch_copies() {
        assert_eq!(Work::NONE.copies(SCRATCH_BYTES), 0);
        let w = Work::scaled(SCRATCH_BYTES, 2.5);
        assert_eq!(w.bytes, SCRATCH_BYTES * 5 / 2);
        assert_eq!(w.copies(SCRATCH_BYTES), 3);
        assert_eq!(Work::scaled(10_000, 1.0).bytes, 8192);
        assert_eq!(Work::scaled(SCRATCH_BYTES, -1.0), Work::NONE);
    }
}
