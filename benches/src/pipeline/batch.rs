//! The `batch` scenario: a model's four outputs (4 KiB `u8`, 16 KiB, 64 KiB and
//! 150528 B `f32`) downloaded back to back, four ways:
//!
//! | column | one repetition |
//! |---|---|
//! | `separate` | four `StagingBuffer::download_into`, each its own wait |
//! | `batched` | one `download_batch` (the default: `cuMemcpyBatchAsync` where the driver has it) |
//! | `batched-queued` | one `download_batch` with `batch_api: false`: four queued copies, one wait |
//! | `largest-alone` | `download_into` of the 150528 B output alone: the floor a batch can approach |
//!
//! Each column has its own [`StagingBuffer`]; each is checked against the outputs'
//! pattern once before timing. The columns run interleaved, one call each per
//! repetition, so drift hits them alike; only the call is timed.

use cuda_staging::StagingConfig;
use std::hint::black_box;
use std::time::{Duration, Instant};

use cuda_core::bytemuck;
use cuda_core::{DeviceBuffer, Error};
use cuda_staging::{DownloadBatch, Part, StagingBuffer, Stream};

use crate::stats::Summary;
use crate::{compare, fill_pattern, Gpu};

/// The four outputs' sizes in bytes, smallest first: 4 KiB `u8`, 16 KiB, 64 KiB and
/// 150528 B (112×112×3) `f32`.
pub const BATCH_PART_BYTES: [usize; 4] = [4096, 16384, 65536, 150_528];

/// A column of the `batch` scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchColumn {
    /// Four `download_into` calls, each its own wait.
    Separate,
    /// One `download_batch`, the batch API where the driver has it.
    Batched,
    /// One `download_batch` through queued copies (`batch_api: false`).
    BatchedQueued,
    /// The largest output alone.
    LargestAlone,
}

impl BatchColumn {
    /// Every column, in run and table order.
    pub const ALL: [BatchColumn; 4] = [
        BatchColumn::Separate,
        BatchColumn::Batched,
        BatchColumn::BatchedQueued,
        BatchColumn::LargestAlone,
    ];

    /// The column name in records and tables.
    pub fn name(self) -> &'static str {
        match self {
            BatchColumn::Separate => "separate",
            BatchColumn::Batched => "batched",
            BatchColumn::BatchedQueued => "batched-queued",
            BatchColumn::LargestAlone => "largest-alone",
        }
    }

    /// Bytes one repetition moves.
    pub fn bytes(self) -> usize {
        match self {
            BatchColumn::LargestAlone => BATCH_PART_BYTES[3],
            _ => BATCH_PART_BYTES.iter().sum(),
        }
    }
}

/// What one column measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchRun {
    /// The column.
    pub column: BatchColumn,
    /// Time per repetition.
    pub time: Summary,
}

/// The four device outputs.
struct Outputs {
    small_u8: DeviceBuffer<u8>,
    small_16k: DeviceBuffer<f32>,
    small_64k: DeviceBuffer<f32>,
    largest: DeviceBuffer<f32>,
}

impl Outputs {
    /// Allocates the outputs and fills each with its own pattern; returns the bytes.
    fn new(gpu: &Gpu) -> Result<(Outputs, [Vec<u8>; 4]), Error> {
        let expected: [Vec<u8>; 4] = std::array::from_fn(|i| {
            let mut b = vec![0u8; BATCH_PART_BYTES[i]];
            fill_pattern(&mut b, 40 + i as u8);
            b
        });
        let f32s = |i: usize| -> Result<DeviceBuffer<f32>, Error> {
            let mut d = DeviceBuffer::<f32>::alloc_in(&gpu.ctx, BATCH_PART_BYTES[i] / 4)?;
            d.copy_from_host(bytemuck::cast_slice(&expected[i]))?;
            Ok(d)
        };
        let mut small_u8 = DeviceBuffer::<u8>::alloc_in(&gpu.ctx, BATCH_PART_BYTES[0])?;
        small_u8.copy_from_host(&expected[0])?;
        let outputs = Outputs {
            small_u8,
            small_16k: f32s(1)?,
            small_64k: f32s(2)?,
            largest: f32s(3)?,
        };
        Ok((outputs, expected))
    }
}

/// The four outputs as one [`DownloadBatch`], with each part's place.
struct OutputBatch<'a> {
    batch: DownloadBatch<'a>,
    small_u8: Part<u8>,
    small_16k: Part<f32>,
    small_64k: Part<f32>,
    largest: Part<f32>,
}

impl<'a> OutputBatch<'a> {
    fn new(out: &'a Outputs) -> Result<OutputBatch<'a>, Error> {
        let mut batch = DownloadBatch::new();
        Ok(OutputBatch {
            small_u8: batch.add(&out.small_u8, out.small_u8.len())?,
            small_16k: batch.add(&out.small_16k, out.small_16k.len())?,
            small_64k: batch.add(&out.small_64k, out.small_64k.len())?,
            largest: batch.add(&out.largest, out.largest.len())?,
            batch,
        })
    }
}

/// Each column's staging buffer.
struct Columns {
    separate: StagingBuffer,
    batched: StagingBuffer,
    queued: StagingBuffer,
    largest: StagingBuffer,
}

impl Columns {
    fn new() -> Columns {
        let mut queued = StagingBuffer::new();
        queued
            .set_config(StagingConfig {
                batch_api: false,
                ..queued.config()
            })
            .expect("set_config");
        Columns {
            separate: StagingBuffer::new(),
            batched: StagingBuffer::new(),
            queued,
            largest: StagingBuffer::new(),
        }
    }
}

/// Hands `seen` (part `i`) to `black_box`, or with `expected`, checks every byte.
fn look(name: &str, expected: Option<&[Vec<u8>; 4]>, i: usize, seen: &[u8]) -> Result<(), String> {
    match expected {
        Some(want) => compare(seen, &want[i]).map_err(|m| format!("batch {name} part {i}: {m}")),
        None => {
            black_box(seen);
            Ok(())
        }
    }
}

/// Runs one repetition of `column`; with `expected`, checks every byte.
fn once(
    column: BatchColumn,
    out: &Outputs,
    batch: &OutputBatch<'_>,
    cols: &mut Columns,
    s: &Stream,
    expected: Option<&[Vec<u8>; 4]>,
) -> Result<(), String> {
    let name = column.name();
    let e = |e: Error| format!("batch {name}: {e}");
    let look = |i: usize, seen: &[u8]| look(name, expected, i, seen);
    match column {
        BatchColumn::Separate => {
            let c = &mut cols.separate;
            look(
                0,
                c.download_into(&out.small_u8, out.small_u8.len(), s)
                    .map_err(e)?,
            )?;
            let got = c
                .download_into(&out.small_16k, out.small_16k.len(), s)
                .map_err(e)?;
            look(1, bytemuck::cast_slice(got))?;
            let got = c
                .download_into(&out.small_64k, out.small_64k.len(), s)
                .map_err(e)?;
            look(2, bytemuck::cast_slice(got))?;
            let got = c
                .download_into(&out.largest, out.largest.len(), s)
                .map_err(e)?;
            look(3, bytemuck::cast_slice(got))
        }
        BatchColumn::Batched | BatchColumn::BatchedQueued => {
            let c = if column == BatchColumn::Batched {
                &mut cols.batched
            } else {
                &mut cols.queued
            };
            let landed = c.download_batch(&batch.batch, s).map_err(e)?;
            look(0, landed.get(batch.small_u8).map_err(e)?)?;
            look(
                1,
                bytemuck::cast_slice(landed.get(batch.small_16k).map_err(e)?),
            )?;
            look(
                2,
                bytemuck::cast_slice(landed.get(batch.small_64k).map_err(e)?),
            )?;
            look(
                3,
                bytemuck::cast_slice(landed.get(batch.largest).map_err(e)?),
            )
        }
        BatchColumn::LargestAlone => {
            let got = cols
                .largest
                .download_into(&out.largest, out.largest.len(), s)
                .map_err(e)?;
            look(3, bytemuck::cast_slice(got))
        }
    }
}

/// Runs the scenario: every column checked once, then `warmup` untimed and `reps`
/// timed repetitions, the columns interleaved within each. One [`BatchRun`] per
/// column, in [`BatchColumn::ALL`] order.
pub fn run(gpu: &Gpu, warmup: usize, reps: usize) -> Result<Vec<BatchRun>, String> {
    let (out, expected) =
        Outputs::new(gpu).map_err(|e| format!("batch: allocating the outputs: {e}"))?;
    let batch = OutputBatch::new(&out).map_err(|e| format!("batch: {e}"))?;
    let mut cols = Columns::new();
    let s = &gpu.stream;
    for column in BatchColumn::ALL {
        once(column, &out, &batch, &mut cols, s, Some(&expected))?;
    }
    let mut times: Vec<Vec<Duration>> = BatchColumn::ALL
        .iter()
        .map(|_| Vec::with_capacity(reps))
        .collect();
    for rep in 0..warmup + reps {
        for (c, column) in BatchColumn::ALL.into_iter().enumerate() {
            let started = Instant::now();
            once(column, &out, &batch, &mut cols, s, None)?;
            let took = started.elapsed();
            if rep >= warmup {
                times[c].push(took);
            }
        }
    }
    // Checked again after timing: nothing was overwritten along the way.
    for column in BatchColumn::ALL {
        once(column, &out, &batch, &mut cols, s, Some(&expected))?;
    }
    BatchColumn::ALL
        .into_iter()
        .zip(&mut times)
        .map(|(column, t)| {
            Summary::of(t)
                .map(|time| BatchRun { column, time })
                .ok_or_else(|| format!("batch {}: no repetitions timed", column.name()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_named_as_in_the_records_and_count_their_bytes() {
        let names: Vec<&str> = BatchColumn::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(
            names,
            ["separate", "batched", "batched-queued", "largest-alone"]
        );
        assert_eq!(BatchColumn::Separate.bytes(), 236_544);
        assert_eq!(BatchColumn::Batched.bytes(), 236_544);
        assert_eq!(BatchColumn::LargestAlone.bytes(), 150_528);
        assert!(BATCH_PART_BYTES.iter().all(|b| b.is_multiple_of(4)));
    }
}
