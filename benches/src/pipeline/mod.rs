//! The `pipeline` bench and example (issue 13): one inference-shaped pipeline of
//! frames, synchronous or overlapped, and a model's outputs downloaded separately or
//! as a batch. (Not to be confused with [`crate::four_pipelines`], the `frames` bench's
//! `four-pipelines` scenario of bare transfers on four threads.)
//!
//! Per frame: a 640×640×3 `u8` frame in ordinary memory (as a decoder hands it over)
//! is preprocessed on the CPU (scale to `f32`, normalise, HWC to CHW) into the
//! upload's memory and uploaded (4915200 B); a stand-in model queued on the stream
//! derives four outputs from it and spends GPU time; the outputs (84×8400 `f32`,
//! 2822400 B, and 4, 16 and 64 KiB) are downloaded and post-processed on the CPU
//! (the best of the 84 rows of each of the 8400 columns), and the result is checked.
//!
//! | file | concern |
//! |---|---|
//! | [`cpu`] | frames, preprocess, post-process, checksums (pure) |
//! | [`device`] | device buffers and the stand-in model |
//! | [`workload`] | everything one pipeline owns; the per-frame check |
//! | [`stages`] | each stage timed alone; sizing the model so GPU ≈ CPU |
//! | [`loops`] | `pageable-sync`, `staging-sync`, `ring` |
//! | [`batch`] | the `batch` scenario |
//! | [`behind_work`] | the `behind-work` scenario: a download queued behind GPU work, under each wait policy |
//! | [`report`] | records, tables, targets |
//!
//! [`run`] runs it all in bench order; the example runs the loops alone.

pub mod batch;
pub mod behind_work;
pub mod cpu;
pub mod device;
pub mod log_tables;
pub mod loops;
pub mod report;
pub mod stages;
pub mod workload;

use std::time::Duration;

use cuda_staging::{RingStats, StagingStats};

use self::batch::BatchRun;
use self::behind_work::BEHIND_WORK_SCENARIO;
use self::loops::{LoopColumn, LoopRun};
use self::report::{
    BatchRecord, FpsRecord, Record, BATCH_SCENARIO, GPU_HEAVY_SCENARIO, PIPELINE_SCENARIO,
};
use self::stages::StageTimes;
pub use self::workload::Workload;
use crate::cells::CellFilter;
use crate::{quick_from_env, Gpu};

/// How long the `pipeline` bench measures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipelineSettings {
    /// `BENCH_QUICK` was set (or this is a smoke pass).
    pub quick: bool,
    /// Untimed frames at the start of each loop.
    pub warmup_frames: usize,
    /// Timed frames per loop.
    pub frames: usize,
    /// Timed runs of each stage alone (and of each sizing step).
    pub stage_samples: usize,
    /// Untimed repetitions of the batch scenario.
    pub batch_warmup: usize,
    /// Timed repetitions of the batch scenario (every column each).
    pub batch_reps: usize,
    /// Bytes of each of the stand-in model's two scratch buffers.
    pub scratch_bytes: usize,
    /// Timed repetitions of each `behind-work` cell (every policy each).
    pub behind_work_reps: usize,
    /// The cells to measure (`BENCH_CELLS`, [`crate::cells`]): `pipeline`,
    /// `pipeline-gpu-heavy` (which times the pipeline's stages first, so it runs the
    /// `pipeline` loops too), `batch` and `behind-work`.
    pub cells: CellFilter,
}

impl PipelineSettings {
    /// The full run: 300 timed frames per loop after 20, 30 runs per stage, 1000
    /// batch repetitions.
    pub fn full() -> PipelineSettings {
        PipelineSettings {
            quick: false,
            warmup_frames: 20,
            frames: 300,
            stage_samples: 30,
            batch_warmup: 20,
            batch_reps: 1000,
            scratch_bytes: device::SCRATCH_BYTES,
            behind_work_reps: 100,
            cells: CellFilter::all(),
        }
    }

    /// `BENCH_QUICK`: 60 frames per loop, 10 runs per stage, 200 batch repetitions.
    pub fn quick() -> PipelineSettings {
        PipelineSettings {
            quick: true,
            warmup_frames: 5,
            frames: 60,
            stage_samples: 10,
            batch_warmup: 5,
            batch_reps: 200,
            behind_work_reps: 20,
            ..PipelineSettings::full()
        }
    }

    /// Test mode (`cargo test --benches`): a few of everything.
    pub fn smoke() -> PipelineSettings {
        PipelineSettings {
            quick: true,
            warmup_frames: 2,
            frames: 5,
            stage_samples: 3,
            batch_warmup: 1,
            batch_reps: 5,
            behind_work_reps: 2,
            ..PipelineSettings::full()
        }
    }

    /// [`PipelineSettings::quick`] under `BENCH_QUICK`, else [`PipelineSettings::full`].
    pub fn from_env() -> PipelineSettings {
        let settings = if quick_from_env() {
            PipelineSettings::quick()
        } else {
            PipelineSettings::full()
        };
        PipelineSettings {
            cells: CellFilter::from_env(),
            ..settings
        }
    }

    /// Frames each loop runs, warm-up and the one trailing frame included.
    pub fn frames_per_loop(&self) -> usize {
        self.warmup_frames.max(1) + self.frames + 1
    }

    /// A rough estimate of the run time left once the stages are timed: each
    /// synchronous loop takes about CPU + GPU stage per frame (pageable transfers
    /// about 1 ms more), the ring the slower stage, and each batch repetition about
    /// 150 µs.
    pub fn estimated_rest(&self, stages: &StageTimes) -> Duration {
        let (c, g) = (stages.cpu.p50, stages.gpu.p50);
        let per_frame = (c + g) * 2 + Duration::from_millis(1) + c.max(g);
        let batch = Duration::from_micros(150) * (self.batch_warmup + self.batch_reps) as u32;
        per_frame * self.frames_per_loop() as u32 + batch
    }
}

/// Everything a bench run measured, up to a failure if any.
#[derive(Debug, Default)]
pub struct PipelineResults {
    /// The stages timed alone and the model's size.
    pub stages: Option<StageTimes>,
    /// Bytes of each scratch buffer of the model.
    pub scratch_bytes: usize,
    /// The loops measured, in [`LoopColumn::ALL`] order.
    pub loops: Vec<LoopRun>,
    /// The `staging-sync` buffer's stats after its loop.
    pub staging_stats: Option<StagingStats>,
    /// The upload and download rings' stats after the `ring` loop.
    pub ring_stats: Option<(RingStats, RingStats)>,
    /// `pipeline-gpu-heavy`: the stages timed with its work, and its loops in
    /// [`LoopColumn::GPU_HEAVY`] order.
    pub gpu_heavy: Option<(StageTimes, Vec<LoopRun>)>,
    /// The batch scenario's columns.
    pub batch: Vec<BatchRun>,
    /// The `behind-work` records.
    pub behind_work: Vec<behind_work::BehindWorkRecord>,
    /// What stopped the run.
    pub failed: Option<String>,
}

impl PipelineResults {
    /// The `pipeline` records (none before the stages are timed).
    pub fn fps_records(&self) -> Vec<FpsRecord> {
        let mut records = self
            .stages
            .as_ref()
            .map(|s| report::fps_records(s, &self.loops))
            .unwrap_or_default();
        if let Some((stages, loops)) = &self.gpu_heavy {
            records.extend(
                report::fps_records(stages, loops)
                    .into_iter()
                    .map(|r| r.in_scenario(report::GPU_HEAVY_SCENARIO)),
            );
        }
        records
    }

    /// The `batch` records.
    pub fn batch_records(&self) -> Vec<BatchRecord> {
        self.batch.iter().map(BatchRecord::of).collect()
    }

    /// Every record, pipeline first.
    pub fn records(&self) -> Vec<Record> {
        self.fps_records()
            .into_iter()
            .map(Record::Fps)
            .chain(self.batch_records().into_iter().map(Record::Batch))
            .chain(self.behind_work.iter().cloned().map(Record::BehindWork))
            .collect()
    }

    /// The tables, the library's counters and the targets, for stdout.
    pub fn report(&self) -> String {
        let fps = self.fps_records();
        let batch = self.batch_records();
        let mut out = String::new();
        if let Some(stages) = &self.stages {
            out.push_str(&log_tables::pipeline_table(
                stages,
                self.scratch_bytes,
                &fps,
            ));
        }
        if let Some(s) = &self.staging_stats {
            out.push_str(&format!(
                "  staging-sync StagingBuffer: {} pinned allocation(s), {} batched \
                 transfers\n",
                s.allocations, s.batched_transfers
            ));
        }
        if let Some((up, down)) = &self.ring_stats {
            out.push_str(&format!(
                "  ring: uploads {} (slot waits {}, allocations {}), downloads {} (slot \
                 waits {}, allocations {})\n",
                up.uploads,
                up.slot_waits,
                up.allocations,
                down.downloads,
                down.slot_waits,
                down.allocations
            ));
        }
        out.push_str(&log_tables::batch_table(&batch));
        out.push_str(&log_tables::targets_table(&report::targets(&fps, &batch)));
        out
    }
}

/// Runs the bench: the stages alone and the model sized, the three loops, then the
/// batch scenario. A failure stops the run; what was measured before it is kept.
/// `progress` hears about each step.
pub fn run(
    gpu: &Gpu,
    settings: &PipelineSettings,
    mut progress: impl FnMut(&str),
) -> PipelineResults {
    let mut results = PipelineResults::default();
    let cells = &settings.cells;
    let heavy = cells.matches(GPU_HEAVY_SCENARIO);
    if heavy || cells.matches(PIPELINE_SCENARIO) {
        if let Err(e) = run_pipeline(gpu, settings, &mut results, &mut progress) {
            results.failed = Some(e);
            return results;
        }
    }
    if heavy {
        if let Err(e) = run_gpu_heavy(gpu, settings, &mut results, &mut progress) {
            results.failed = Some(e);
            return results;
        }
    }
    if cells.matches(BATCH_SCENARIO) {
        match batch::run(gpu, settings.batch_warmup, settings.batch_reps) {
            Ok(b) => {
                results.batch = b;
                progress("batch: every column checked before and after timing");
            }
            Err(e) => {
                results.failed = Some(e);
                return results;
            }
        }
    }
    if !cells.matches(BEHIND_WORK_SCENARIO) {
        return results;
    }
    match behind_work::run(
        gpu,
        5.min(settings.behind_work_reps),
        settings.behind_work_reps,
    ) {
        Ok(b) => {
            for r in &b {
                progress(&format!(
                    "behind-work {} B behind {:.0} us of GPU work, {}: p50 {:.0} us, cpu {} us",
                    r.bytes,
                    r.gpu_work_us,
                    r.column,
                    r.median_us,
                    r.cpu_us.map_or_else(|| "-".into(), |c| format!("{c:.0}"))
                ));
            }
            results.behind_work = b;
        }
        Err(e) => results.failed = Some(e),
    }
    results
}

fn run_pipeline(
    gpu: &Gpu,
    settings: &PipelineSettings,
    results: &mut PipelineResults,
    progress: &mut impl FnMut(&str),
) -> Result<(), String> {
    let mut w = Workload::new(gpu, settings.scratch_bytes)?;
    results.scratch_bytes = w.scratch_bytes();
    let stages = w.calibrate(settings.stage_samples, &mut *progress)?;
    results.stages = Some(stages);
    progress(&format!(
        "stages timed alone: cpu {:.0} us, gpu {:.0} us (p50); the rest takes about {:.0} s",
        stages.cpu.p50_us(),
        stages.gpu.p50_us(),
        settings.estimated_rest(&stages).as_secs_f64()
    ));
    for column in LoopColumn::ALL {
        // The ring's bound is timed around its loop (see `stages.rs`).
        let before = if column == LoopColumn::Ring {
            Some(w.stage_samples(stages.work, settings.stage_samples)?)
        } else {
            None
        };
        let run = w.run_loop(column, settings.warmup_frames, settings.frames)?;
        if let Some(mut samples) = before {
            samples.extend(w.stage_samples(stages.work, settings.stage_samples)?);
            let around = stages
                .around(&mut samples)
                .ok_or_else(|| "stages around the ring: no samples".to_string())?;
            progress(&format!(
                "stages timed again before and after the ring: cpu {:.0} us, gpu {:.0} us \
                 (p50; the ring's ideal)",
                around.cpu.p50_us(),
                around.gpu.p50_us()
            ));
            results.stages = Some(around);
        }
        progress(&format!(
            "{}: {:.1} frames/s, p50 {:.0} us, p99 {:.0} us, every frame checked",
            column.name(),
            run.fps,
            run.frame_time.p50_us(),
            run.frame_time.p99_us()
        ));
        if column == LoopColumn::Ring {
            progress(&ring_split_line("ring", &w.ring_split));
        }
        results.loops.push(run);
        match column {
            LoopColumn::StagingSync => results.staging_stats = Some(w.staging().stats()),
            LoopColumn::Ring => {
                results.ring_stats = Some((w.upload_ring().stats(), w.download_ring().stats()));
            }
            LoopColumn::PageableSync | LoopColumn::RingSpin => {}
        }
    }
    Ok(())
}

/// A progress line: where the calling thread's time went per frame of ring loop
/// `name`.
fn ring_split_line(name: &str, split: &workload::RingSplit) -> String {
    let (up, wait_wall, wait_cpu, post) = split.per_frame_us();
    format!(
        "{name}: the calling thread per frame: upload (with preprocessing) {up:.0} us of CPU, \
         wait {wait_wall:.0} us for {wait_cpu:.0} us of CPU, post-processing {post:.0} us of CPU"
    )
}

/// `pipeline-gpu-heavy`: the model resized to a GPU stage of about twice the CPU
/// stage (from the stages `run_pipeline` timed), then [`LoopColumn::GPU_HEAVY`].
fn run_gpu_heavy(
    gpu: &Gpu,
    settings: &PipelineSettings,
    results: &mut PipelineResults,
    progress: &mut impl FnMut(&str),
) -> Result<(), String> {
    let stages = results
        .stages
        .ok_or_else(|| "pipeline-gpu-heavy: the pipeline's stages were not timed".to_string())?;
    let mut w = Workload::new(gpu, settings.scratch_bytes)?;
    let heavy = w.calibrate_gpu_heavy(&stages, settings.stage_samples, &mut *progress)?;
    let mut loops = Vec::with_capacity(LoopColumn::GPU_HEAVY.len());
    for column in LoopColumn::GPU_HEAVY {
        let run = w.run_loop(column, settings.warmup_frames, settings.frames)?;
        progress(&format!(
            "pipeline-gpu-heavy {}: {:.1} frames/s, p50 {:.0} us, cpu {} us per frame, \
             every frame checked",
            column.name(),
            run.fps,
            run.frame_time.p50_us(),
            run.cpu_us.map_or_else(|| "-".into(), |c| format!("{c:.0}"))
        ));
        if matches!(column, LoopColumn::Ring | LoopColumn::RingSpin) {
            let name = format!("pipeline-gpu-heavy {}", column.name());
            progress(&ring_split_line(&name, &w.ring_split));
        }
        loops.push(run);
    }
    results.gpu_heavy = Some((heavy, loops));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_and_smoke_runs_are_shorter() {
        let (full, quick, smoke) = (
            PipelineSettings::full(),
            PipelineSettings::quick(),
            PipelineSettings::smoke(),
        );
        assert_eq!(full.frames_per_loop(), 321);
        assert!(quick.frames < full.frames && smoke.frames < quick.frames);
        assert!(quick.quick && smoke.quick && !full.quick);
        assert_eq!(full.scratch_bytes, device::SCRATCH_BYTES);
    }

    #[test]
    fn the_estimate_grows_with_the_stages() {
        let s = |ms| crate::stats::Summary {
            p50: Duration::from_millis(ms),
            p99: Duration::from_millis(ms),
            samples: 30,
        };
        let stages = |c, g| StageTimes {
            cpu: s(c),
            gpu: s(g),
            bare_gpu: s(0),
            work: device::Work::NONE,
            work_copies: 0,
            scratch_copy: Duration::ZERO,
            process_cpu: stages::StageCpu::default(),
        };
        let full = PipelineSettings::full();
        // 321 frames x (2 x 8 + 1 + 4 ms) + 1020 x 150 us = 6.894 s.
        assert_eq!(
            full.estimated_rest(&stages(4, 4)),
            Duration::from_micros(6_741_000 + 153_000)
        );
        assert!(full.estimated_rest(&stages(8, 8)) > full.estimated_rest(&stages(4, 4)));
    }
}
