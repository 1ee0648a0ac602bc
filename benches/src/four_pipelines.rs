//! `four-pipelines`: four frame loops at once, as a process serving four camera
//! streams would run them.
//!
//! Four threads, one [`Context`] for the process (bound on each thread), each thread
//! with its own [`Stream`], device buffers, host memory and [`StagingBuffer`]. Per
//! frame a thread sleeps [`PIPELINE_GAP`], then uploads 150528 B and 4915200 B and
//! downloads both back, back to back; the four transfers are the frame's time.
//! Each column is one phase: all four threads run it, started together by a
//! [`Barrier`] after a data check and a few warm-up frames; the phase's wall time runs
//! from the first thread's start to the last thread's end.
//!
//! CPU per frame (`cpu_us`): the process's CPU time (all threads: the four loops,
//! the library's helpers, the driver's) from the moment every thread has passed the
//! start barrier to the moment every thread has finished its timed frames, read by
//! the thread that started them (it waits at both barriers too), over the frames of
//! all threads. The gaps are sleeps, so they cost next to nothing.

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use cuda_core::{Context, DeviceBuffer, Error, Stream};
use cuda_staging::StagingBuffer;

use crate::cpu_time;
use crate::frames::{FrameSettings, CELL_QUIET};
use crate::records::PipelineRecord;
use crate::stats::Summary;
use crate::{column, compare, dtoh_pageable_async, fill_pattern, htod_pageable_async, Gpu};

/// Threads, each its own pipeline.
pub const PIPELINE_THREADS: usize = 4;

/// What each frame moves up, then down: a 112×112×3 and a 640×640×3 `f32` tensor.
pub const PIPELINE_SIZES_BYTES: [usize; 2] = [150_528, 4_915_200];

/// The sleep before each frame's transfers.
pub const PIPELINE_GAP: Duration = Duration::from_millis(2);

/// A column (phase) of `four-pipelines`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PipelineColumn {
    /// `Stream::memcpy_htod_sync` / `memcpy_dtoh_sync` from / to `Vec`s.
    Pageable,
    /// `StagingBuffer::upload` / `download`.
    CopyIn,
    /// `StagingBuffer::upload_with` (a fill that writes nothing) / `download_into`.
    Resident,
}

impl PipelineColumn {
    /// Every phase, in run order.
    pub const ALL: [PipelineColumn; 3] = [
        PipelineColumn::Pageable,
        PipelineColumn::CopyIn,
        PipelineColumn::Resident,
    ];

    /// The column name in records and tables.
    pub fn name(self) -> &'static str {
        match self {
            PipelineColumn::Pageable => column::PAGEABLE,
            PipelineColumn::CopyIn => column::COPY_IN,
            PipelineColumn::Resident => column::RESIDENT,
        }
    }
}

/// One thread's stream and memory.
struct Pipeline {
    column: PipelineColumn,
    stream: Stream,
    /// Per size of [`PIPELINE_SIZES_BYTES`].
    device: Vec<DeviceBuffer<u8>>,
    src: Vec<Vec<u8>>,
    dst: Vec<Vec<u8>>,
    staging: StagingBuffer,
}

impl Pipeline {
    /// Binds `ctx` to this thread and creates this pipeline's stream and buffers.
    fn new(ctx: &Context, column: PipelineColumn) -> Result<Pipeline, Error> {
        ctx.bind_to_thread()?;
        let stream = Stream::new(ctx)?;
        let device = PIPELINE_SIZES_BYTES
            .iter()
            .map(|&n| DeviceBuffer::<u8>::alloc_in(ctx, n))
            .collect::<Result<Vec<_>, _>>()?;
        let staging = StagingBuffer::new();
        Ok(Pipeline {
            column,
            stream,
            device,
            src: PIPELINE_SIZES_BYTES.iter().map(|&n| vec![1u8; n]).collect(),
            dst: PIPELINE_SIZES_BYTES.iter().map(|&n| vec![1u8; n]).collect(),
            staging,
        })
    }

    /// Size `k` up, from `src[k]` (resident: whatever pinned memory holds).
    fn up(&mut self, k: usize) -> Result<(), Error> {
        let (dev, src, s) = (&mut self.device[k], &self.src[k], &self.stream);
        match self.column {
            PipelineColumn::Pageable => htod_pageable_async(dev, black_box(src), s),
            PipelineColumn::CopyIn => self.staging.upload(dev, black_box(src), s),
            PipelineColumn::Resident => {
                self.staging
                    .upload_with(dev, src.len(), s, |dst: &mut [u8]| {
                        black_box(dst);
                    })
            }
        }
    }

    /// Size `k` down, into `dst[k]` (resident: read in place, not copied).
    fn down(&mut self, k: usize) -> Result<(), Error> {
        let (dev, dst, s) = (&self.device[k], &mut self.dst[k], &self.stream);
        match self.column {
            PipelineColumn::Pageable => dtoh_pageable_async(black_box(dst), dev, s),
            PipelineColumn::CopyIn => self.staging.download(black_box(dst), dev, s),
            PipelineColumn::Resident => {
                self.staging.download_into(dev, dst.len(), s).map(|landed| {
                    black_box(landed);
                })
            }
        }
    }

    /// One frame's transfers: every size up, then every size down.
    fn frame(&mut self) -> Result<(), Error> {
        for k in 0..PIPELINE_SIZES_BYTES.len() {
            self.up(k)?;
        }
        for k in 0..PIPELINE_SIZES_BYTES.len() {
            self.down(k)?;
        }
        Ok(())
    }

    /// Each of the frame's four transfers once, through this column, with a pattern
    /// of `seed` (per size) that nothing left behind can match: every size goes up
    /// and comes back down into zeroed memory.
    fn verify(&mut self, seed: u8) -> Result<(), String> {
        let name = self.column.name();
        for (k, &n) in PIPELINE_SIZES_BYTES.iter().enumerate() {
            let what = |e: Error| format!("{name} {n} B round trip: {e}");
            let mut expected = vec![0u8; n];
            fill_pattern(&mut expected, seed.wrapping_add(k as u8));
            if self.column == PipelineColumn::Resident {
                let (dev, s) = (&mut self.device[k], &self.stream);
                self.staging
                    .upload_with(dev, n, s, |dst: &mut [u8]| dst.copy_from_slice(&expected))
                    .map_err(&what)?;
                let landed = self
                    .staging
                    .download_into(&self.device[k], n, &self.stream)
                    .map_err(&what)?;
                compare(landed, &expected).map_err(|e| format!("{name} {n} B: {e}"))?;
            } else {
                self.src[k].copy_from_slice(&expected);
                self.up(k).map_err(&what)?;
                self.dst[k].fill(0);
                self.down(k).map_err(&what)?;
                compare(&self.dst[k], &expected).map_err(|e| format!("{name} {n} B: {e}"))?;
            }
        }
        Ok(())
    }
}

/// One thread's timed frames.
struct ThreadRun {
    start: Instant,
    end: Instant,
    samples: Vec<Duration>,
}

fn pipeline_thread(
    ctx: &Context,
    column: PipelineColumn,
    seed: u8,
    settings: &FrameSettings,
    together: &Barrier,
) -> Result<ThreadRun, String> {
    let ready = (|| {
        let mut p = Pipeline::new(ctx, column).map_err(|e| format!("setting up: {e}"))?;
        p.verify(seed)?;
        for _ in 0..settings.pipeline_warmup_frames {
            std::thread::sleep(PIPELINE_GAP);
            p.frame().map_err(|e| format!("warm-up frame: {e}"))?;
        }
        Ok::<_, String>(p)
    })();
    // Every thread reaches the barrier, even after a failure, so none waits forever.
    together.wait();
    let mut p = ready?;
    let mut samples = Vec::with_capacity(settings.pipeline_frames);
    let start = Instant::now();
    let timed = (0..settings.pipeline_frames).try_for_each(|f| {
        std::thread::sleep(PIPELINE_GAP);
        let t = Instant::now();
        p.frame().map_err(|e| format!("frame {f}: {e}"))?;
        samples.push(t.elapsed());
        Ok::<_, String>(())
    });
    let end = Instant::now();
    // The second check waits until no thread is timing any more (and every thread
    // gets here, even after a failure).
    together.wait();
    timed?;
    p.verify(seed.wrapping_add(128))?;
    Ok(ThreadRun {
        start,
        end,
        samples,
    })
}

/// Runs one phase: every thread runs `column`.
fn run_phase(
    gpu: &Gpu,
    column: PipelineColumn,
    phase: usize,
    settings: &FrameSettings,
) -> Result<PipelineRecord, String> {
    // The pipelines and this thread, which reads the process's CPU clock when all
    // have started timing and when all have stopped.
    let barrier = Barrier::new(PIPELINE_THREADS + 1);
    let (runs, cpu): (Vec<Result<ThreadRun, String>>, _) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..PIPELINE_THREADS)
            .map(|t| {
                let (ctx, barrier) = (&gpu.ctx, &barrier);
                let seed = (phase * 32 + t * 4 + 1) as u8;
                s.spawn(move || pipeline_thread(ctx, column, seed, settings, barrier))
            })
            .collect();
        barrier.wait();
        let before = cpu_time::process_cpu();
        barrier.wait();
        let cpu = cpu_time::elapsed(before, cpu_time::process_cpu());
        (crate::join_all(handles), cpu)
    });
    let mut samples = Vec::new();
    let (mut start, mut end) = (None::<Instant>, None::<Instant>);
    for (t, run) in runs.into_iter().enumerate() {
        let run = run.map_err(|e| format!("four-pipelines {} thread {t}: {e}", column.name()))?;
        start = Some(start.map_or(run.start, |s| s.min(run.start)));
        end = Some(end.map_or(run.end, |e| e.max(run.end)));
        samples.extend(run.samples);
    }
    let wall = match (start, end) {
        (Some(s), Some(e)) => e.duration_since(s),
        _ => Duration::ZERO,
    };
    let s = Summary::of(&mut samples).ok_or("four-pipelines: no frames timed")?;
    Ok(PipelineRecord {
        scenario: "four-pipelines",
        column: column.name(),
        fps: s.samples as f64 / wall.as_secs_f64().max(f64::MIN_POSITIVE),
        p50_us: s.p50_us(),
        p99_us: s.p99_us(),
        cpu_us: cpu_time::mean_us(cpu, s.samples),
        samples: s.samples as u64,
        copy_threads: cuda_staging::pool_threads_started() as u64,
    })
}

/// Runs every phase, in [`PipelineColumn::ALL`] order, each followed by
/// [`CELL_QUIET`]. `progress` hears about each finished phase.
pub fn run(
    gpu: &Gpu,
    settings: &FrameSettings,
    mut progress: impl FnMut(&str),
) -> Result<Vec<PipelineRecord>, String> {
    let mut records = Vec::new();
    for (phase, column) in PipelineColumn::ALL.into_iter().enumerate() {
        records.push(run_phase(gpu, column, phase, settings)?);
        std::thread::sleep(CELL_QUIET);
        progress(&format!("four-pipelines {}", column.name()));
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_settings_time_a_thousand_frames_or_more() {
        assert!(FrameSettings::full().pipeline_frames * PIPELINE_THREADS >= 1000);
    }

    #[test]
    fn phases_are_named_as_in_the_records() {
        let names: Vec<&str> = PipelineColumn::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(names, ["pageable", "copy-in", "resident"]);
    }
}
