//! Each stage of the pipeline timed alone, and the stand-in model sized so that the
//! GPU stage takes about as long as the CPU stage.
//!
//! - CPU stage: preprocess one frame into pinned memory (as the staging loops do,
//!   into one of as many buffers as the ring has upload slots, in turn), then
//!   post-process the outputs of the frame before and check the result.
//! - GPU stage: upload those 4915200 B from pinned memory, queue the stand-in model,
//!   download the four outputs into pinned memory, wait for the stream: the GPU's
//!   side of one frame, with nothing to overlap it.
//!
//! The two run one after the other, as in a synchronous loop, each with its own
//! clock ([`Workload::time_stages`]), so each meets memory as the loops leave it: the
//! upload reads pinned memory the CPU has just written, post-processing reads
//! outputs a DMA has just written.
//!
//! `ideal` frames per second is `1 / max(CPU stage, GPU stage)` (medians): what a
//! pipeline that overlaps the two perfectly would reach. The stages are timed first
//! to size the model, then again right before and right after the ring's loop, and
//! `ideal` (with the `cpu-stage` and `gpu-stage` rows) comes from those samples
//! pooled ([`StageTimes::around`]): the ring is compared with its bound as the
//! machine ran at the same time. On the 16-core H200 host six runs of the bench with
//! the stages timed only at the start put the ring at 0.69x to 1.00x of `ideal`,
//! while the CPU stage alone took 1143 to 1747 µs from one run to the next.
//!
//! Each stage run also reads the process's CPU clock (all threads) before and after
//! it: the `cpu-stage` and `gpu-stage` rows' CPU per run ([`StageCpu`]).

use std::time::{Duration, Instant};

use cuda_core::Error;

use super::cpu::{postprocess, preprocess, Outputs, SOURCE_FRAMES};
use super::device::Work;
use super::workload::{check_frame, Workload};
use crate::cpu_time::{self, CpuTally};
use crate::stats::Summary;

/// Untimed runs before each stage's timed ones.
pub const STAGE_WARMUP: usize = 2;
/// Most GPU-stage measurements while sizing the work.
pub const CALIBRATION_STEPS: usize = 4;
/// Sizing stops once the GPU stage's median is within this fraction of the CPU's.
pub const CALIBRATION_TOLERANCE: f64 = 0.03;
/// The work never exceeds this many scratch copies.
pub const MAX_WORK_COPIES: usize = 64;
/// `pipeline-gpu-heavy`: the GPU stage is sized to this many times the CPU stage, so
/// that the ring waits for the GPU on every frame, about a CPU stage long.
pub const GPU_HEAVY_FACTOR: f64 = 2.0;

/// The two stages timed alone, and the work that sized the GPU stage.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StageTimes {
    /// Preprocess + post-process + check.
    pub cpu: Summary,
    /// Upload + model + download + wait, with [`StageTimes::work`].
    pub gpu: Summary,
    /// The same with no extra work (transfers and outputs only).
    pub bare_gpu: Summary,
    /// The stand-in model's extra work.
    pub work: Work,
    /// Calls the work takes.
    pub work_copies: usize,
    /// Median time of one full scratch copy, queued and waited for.
    pub scratch_copy: Duration,
    /// The process's CPU per run of each stage.
    pub process_cpu: StageCpu,
}

/// The process's CPU time (all threads) per run of each stage, µs; `None` where the
/// CPU clock is unavailable.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageCpu {
    /// Per run of the CPU stage.
    pub cpu_stage_us: Option<f64>,
    /// Per run of the GPU stage.
    pub gpu_stage_us: Option<f64>,
}

/// Both stages' raw measurements, in the order taken.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StageSamples {
    /// The CPU stage's times.
    pub cpu: Vec<Duration>,
    /// The GPU stage's times.
    pub gpu: Vec<Duration>,
    /// The process's CPU over each CPU-stage run.
    pub cpu_stage_cpu: CpuTally,
    /// The process's CPU over each GPU-stage run.
    pub gpu_stage_cpu: CpuTally,
}

impl StageSamples {
    /// Adds `other`'s measurements to these.
    pub fn extend(&mut self, other: StageSamples) {
        self.cpu.extend(other.cpu);
        self.gpu.extend(other.gpu);
        self.cpu_stage_cpu.merge(&other.cpu_stage_cpu);
        self.gpu_stage_cpu.merge(&other.gpu_stage_cpu);
    }

    /// The CPU per run of each stage.
    pub fn process_cpu(&self) -> StageCpu {
        StageCpu {
            cpu_stage_us: self.cpu_stage_cpu.mean_us(),
            gpu_stage_us: self.gpu_stage_cpu.mean_us(),
        }
    }

    /// Both stages' summaries (the samples sorted); `None` when there are none.
    pub fn summaries(&mut self) -> Option<(Summary, Summary)> {
        Some((Summary::of(&mut self.cpu)?, Summary::of(&mut self.gpu)?))
    }
}

impl StageTimes {
    /// The same sizing, with the stages' times and CPU taken from `samples` (timed
    /// around the ring's loop); `None` when they hold no times.
    pub fn around(&self, samples: &mut StageSamples) -> Option<StageTimes> {
        let (cpu, gpu) = samples.summaries()?;
        Some(StageTimes {
            cpu,
            gpu,
            process_cpu: samples.process_cpu(),
            ..*self
        })
    }

    /// The slower stage's median: the period of a perfectly overlapped pipeline.
    pub fn bottleneck(&self) -> Duration {
        self.cpu.p50.max(self.gpu.p50)
    }

    /// `1 / max(CPU stage, GPU stage)`, frames per second.
    pub fn ideal_fps(&self) -> f64 {
        1.0 / self.bottleneck().as_secs_f64().max(f64::MIN_POSITIVE)
    }
}

/// The next work size: `work` gave a GPU stage of `measured` where `target` was
/// wanted and no work gives `bare`. Scales the work by the time it must add over
/// the time it added (the GPU stage grows linearly with the bytes copied), rounded
/// to whole 4 KiB and capped at [`MAX_WORK_COPIES`] scratch copies. Unchanged when
/// the work added no time.
pub fn resize_work(
    work: Work,
    scratch_bytes: usize,
    target: Duration,
    bare: Duration,
    measured: Duration,
) -> Work {
    let added = measured.saturating_sub(bare).as_secs_f64();
    if added <= 0.0 || work.bytes == 0 {
        return work;
    }
    let need = target.saturating_sub(bare).as_secs_f64();
    let factor = work.bytes as f64 / scratch_bytes as f64 * (need / added);
    let max = MAX_WORK_COPIES as f64;
    Work::scaled(scratch_bytes, factor.min(max))
}

impl Workload<'_> {
    /// The CPU stage once: preprocesses source frame `k` into pinned input `slot`,
    /// then post-processes and checks the outputs the last GPU stage landed.
    fn cpu_stage(&mut self, k: usize, slot: usize) -> Result<(), String> {
        let e = |e: Error| format!("cpu-stage: {e}");
        let st = &mut self.stage;
        preprocess(&self.frames[k], st.inputs[slot].as_mut_slice().map_err(e)?);
        st.last = slot;
        st.input_frame = k;
        let outputs = Outputs {
            scores: st.scores.as_slice().map_err(e)?,
            small_u8: st.small_u8.as_slice().map_err(e)?,
            small_16k: st.small_16k.as_slice().map_err(e)?,
            small_64k: st.small_64k.as_slice().map_err(e)?,
        };
        let sum = postprocess(&outputs, &mut self.best);
        check_frame(&self.expected, "stages", st.outputs_frame, sum)
    }

    /// The GPU stage once: uploads the input the CPU stage wrote last, queues the
    /// model with `work`, downloads the four outputs and waits.
    fn gpu_stage(&mut self, work: Work) -> Result<(), String> {
        let e = |e: Error| format!("gpu-stage: {e}");
        let s = &self.gpu.stream;
        let st = &mut self.stage;
        s.memcpy_htod(&st.inputs[st.last], &mut self.dev.input)
            .map_err(e)?;
        self.dev.queue_work(s, work).map_err(e)?;
        s.memcpy_dtoh(&self.dev.scores, &mut st.scores).map_err(e)?;
        s.memcpy_dtoh(&self.dev.small_u8, &mut st.small_u8)
            .map_err(e)?;
        s.memcpy_dtoh(&self.dev.small_16k, &mut st.small_16k)
            .map_err(e)?;
        s.memcpy_dtoh(&self.dev.small_64k, &mut st.small_64k)
            .map_err(e)?;
        s.synchronize().map_err(e)?;
        st.outputs_frame = st.input_frame;
        Ok(())
    }

    /// Times the two stages, `samples` times each after [`STAGE_WARMUP`], one after
    /// the other as a synchronous loop runs them but with a clock around each: the
    /// CPU stage's preprocessing writes the pinned input the GPU stage then uploads,
    /// and its post-processing reads the outputs the GPU stage landed before, so
    /// each stage meets the memory as the loops leave it. Every result is checked.
    /// Returns the CPU stage's times, the GPU stage's, and the CPU each run used.
    pub fn time_stages(
        &mut self,
        work: Work,
        samples: usize,
    ) -> Result<(Summary, Summary, StageCpu), String> {
        let mut s = self.stage_samples(work, samples)?;
        let (cpu, gpu) = s
            .summaries()
            .ok_or_else(|| "stages: no samples".to_string())?;
        Ok((cpu, gpu, s.process_cpu()))
    }

    /// [`Workload::time_stages`]' raw samples: `samples` CPU-stage times and as many
    /// GPU-stage times, in the order measured, and the process's CPU over each run.
    pub fn stage_samples(&mut self, work: Work, samples: usize) -> Result<StageSamples, String> {
        let mut s = StageSamples {
            cpu: Vec::with_capacity(samples),
            gpu: Vec::with_capacity(samples),
            ..StageSamples::default()
        };
        // Outputs for the first CPU stage to check.
        self.gpu_stage(work)?;
        let slots = self.stage.inputs.len();
        for i in 0..STAGE_WARMUP + samples {
            let c0 = cpu_time::process_cpu();
            let t0 = Instant::now();
            self.cpu_stage((self.stage.input_frame + 1) % SOURCE_FRAMES, i % slots)?;
            let t1 = Instant::now();
            let c1 = cpu_time::process_cpu();
            self.gpu_stage(work)?;
            let t2 = Instant::now();
            let c2 = cpu_time::process_cpu();
            if i >= STAGE_WARMUP {
                s.cpu.push(t1 - t0);
                s.gpu.push(t2 - t1);
                s.cpu_stage_cpu.add(cpu_time::elapsed(c0, c1));
                s.gpu_stage_cpu.add(cpu_time::elapsed(c1, c2));
            }
        }
        Ok(s)
    }

    /// The median time of one full scratch copy, queued and waited for.
    fn time_scratch_copy(&mut self, samples: usize) -> Result<Duration, String> {
        let e = |e: Error| format!("timing a scratch copy: {e}");
        let one = Work {
            bytes: self.dev.scratch_bytes(),
        };
        let s = &self.gpu.stream;
        let mut times = Vec::with_capacity(samples);
        for i in 0..STAGE_WARMUP + samples {
            let started = Instant::now();
            self.dev.queue_scratch_copies(s, one).map_err(e)?;
            s.synchronize().map_err(e)?;
            if i >= STAGE_WARMUP {
                times.push(started.elapsed());
            }
        }
        Summary::of(&mut times)
            .map(|s| s.p50)
            .ok_or_else(|| "timing a scratch copy: no samples".to_string())
    }

    /// Times both stages alone and sizes the stand-in model so that the GPU stage's
    /// median is within [`CALIBRATION_TOLERANCE`] of the CPU stage's (at most
    /// [`CALIBRATION_STEPS`] tries; no work when the transfers alone already take
    /// longer). Sets the loops' work to it. The times returned are those of the last
    /// measurement, made with the work returned. `progress` hears about each step.
    pub fn calibrate(
        &mut self,
        samples: usize,
        mut progress: impl FnMut(&str),
    ) -> Result<StageTimes, String> {
        let (mut cpu, bare, mut process_cpu) = self.time_stages(Work::NONE, samples)?;
        let scratch = self.dev.scratch_bytes();
        let scratch_copy = self.time_scratch_copy(5)?;
        progress(&format!(
            "cpu-stage p50 {:.0} us; gpu-stage without work p50 {:.0} us; one {} MiB device \
             copy {:.0} us",
            cpu.p50_us(),
            bare.p50_us(),
            scratch >> 20,
            scratch_copy.as_secs_f64() * 1e6
        ));
        let mut work = Work::NONE;
        let mut gpu = bare;
        if cpu.p50 > bare.p50 && !scratch_copy.is_zero() {
            let factor = (cpu.p50 - bare.p50).as_secs_f64() / scratch_copy.as_secs_f64();
            work = Work::scaled(scratch, factor.min(MAX_WORK_COPIES as f64));
            for step in 1..=CALIBRATION_STEPS {
                (cpu, gpu, process_cpu) = self.time_stages(work, samples)?;
                let off = gpu.p50.as_secs_f64() / cpu.p50.as_secs_f64() - 1.0;
                progress(&format!(
                    "sizing the GPU work, step {step}: {} MiB in {} copies -> gpu-stage p50 \
                     {:.0} us, cpu-stage p50 {:.0} us ({:+.1}%)",
                    work.bytes >> 20,
                    work.copies(scratch),
                    gpu.p50_us(),
                    cpu.p50_us(),
                    off * 100.0
                ));
                if off.abs() <= CALIBRATION_TOLERANCE || step == CALIBRATION_STEPS {
                    break;
                }
                let next = resize_work(work, scratch, cpu.p50, bare.p50, gpu.p50);
                if next == work {
                    break;
                }
                work = next;
            }
        }
        self.work = work;
        Ok(StageTimes {
            cpu,
            gpu,
            bare_gpu: bare,
            work,
            work_copies: work.copies(scratch),
            scratch_copy,
            process_cpu,
        })
    }
}

impl Workload<'_> {
    /// Sizes the stand-in model for the `pipeline-gpu-heavy` scenario: a GPU stage
    /// of about [`GPU_HEAVY_FACTOR`] times the CPU stage of `stages` (from
    /// [`Workload::calibrate`]), in at most [`CALIBRATION_STEPS`] tries. Sets the
    /// loops' work to it and returns the stages timed with it.
    pub fn calibrate_gpu_heavy(
        &mut self,
        stages: &StageTimes,
        samples: usize,
        mut progress: impl FnMut(&str),
    ) -> Result<StageTimes, String> {
        let scratch = self.dev.scratch_bytes();
        let target = stages.cpu.p50.mul_f64(GPU_HEAVY_FACTOR);
        let bare = stages.bare_gpu.p50;
        let mut work = if stages.work == Work::NONE || stages.gpu.p50 <= bare {
            let copy = stages.scratch_copy.as_secs_f64().max(f64::MIN_POSITIVE);
            let factor = target.saturating_sub(bare).as_secs_f64() / copy;
            Work::scaled(scratch, factor.min(MAX_WORK_COPIES as f64))
        } else {
            resize_work(stages.work, scratch, target, bare, stages.gpu.p50)
        };
        let (mut cpu, mut gpu, mut process_cpu);
        let mut step = 1;
        loop {
            (cpu, gpu, process_cpu) = self.time_stages(work, samples)?;
            let off = gpu.p50.as_secs_f64() / target.as_secs_f64().max(f64::MIN_POSITIVE) - 1.0;
            progress(&format!(
                "sizing the GPU-heavy work, step {step}: {} MiB in {} copies -> gpu-stage p50 \
                 {:.0} us for a target of {:.0} us ({:+.1}%)",
                work.bytes >> 20,
                work.copies(scratch),
                gpu.p50_us(),
                target.as_secs_f64() * 1e6,
                off * 100.0
            ));
            let next = resize_work(work, scratch, target, bare, gpu.p50);
            if off.abs() <= CALIBRATION_TOLERANCE || step == CALIBRATION_STEPS || next == work {
                break;
            }
            work = next;
            step += 1;
        }
        self.work = work;
        Ok(StageTimes {
            cpu,
            gpu,
            work,
            work_copies: work.copies(scratch),
            process_cpu,
            ..*stages
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(x: u64) -> Duration {
        Duration::from_micros(x)
    }

    #[test]
    fn resizing_scales_the_work_by_the_time_still_missing() {
        let scratch = 1 << 20;
        let w = Work { bytes: 4 << 20 };
        // 4 MiB added 1000 us; 1500 us are needed: 6 MiB.
        let next = resize_work(w, scratch, us(2000), us(500), us(1500));
        assert_eq!(next.bytes, 6 << 20);
        // Too much: shrink.
        let next = resize_work(w, scratch, us(1500), us(500), us(2500));
        assert_eq!(next.bytes, 2 << 20);
        // No time added, or no work: unchanged.
        assert_eq!(resize_work(w, scratch, us(2000), us(500), us(400)), w);
        assert_eq!(
            resize_work(Work::NONE, scratch, us(2000), us(500), us(600)),
            Work::NONE
        );
        // Capped.
        let next = resize_work(w, scratch, us(1_000_000), us(0), us(1));
        assert_eq!(next.copies(scratch), MAX_WORK_COPIES);
    }

    #[test]
    fn ideal_is_the_slower_stage() {
        let s = |p50| Summary {
            p50: us(p50),
            p99: us(p50 * 2),
            samples: 30,
        };
        let t = StageTimes {
            cpu: s(4000),
            gpu: s(5000),
            bare_gpu: s(300),
            work: Work::NONE,
            work_copies: 0,
            scratch_copy: us(300),
            process_cpu: StageCpu::default(),
        };
        assert_eq!(t.bottleneck(), us(5000));
        assert!((t.ideal_fps() - 200.0).abs() < 1e-9);
    }

    #[test]
    fn times_around_the_ring_replace_the_stages_and_keep_the_sizing() {
        let s = |p50| Summary {
            p50: us(p50),
            p99: us(p50),
            samples: 30,
        };
        let t = StageTimes {
            cpu: s(4000),
            gpu: s(4000),
            bare_gpu: s(300),
            work: Work { bytes: 7 << 20 },
            work_copies: 3,
            scratch_copy: us(300),
            process_cpu: StageCpu {
                cpu_stage_us: Some(4100.0),
                gpu_stage_us: Some(900.0),
            },
        };
        // Before the ring the machine ran slower than at the start, after it faster.
        let tally = |runs: &[u64]| {
            let mut t = CpuTally::default();
            runs.iter().for_each(|&r| t.add(Some(us(r))));
            t
        };
        let mut before = StageSamples {
            cpu: vec![us(6000), us(6200)],
            gpu: vec![us(3000), us(3100)],
            cpu_stage_cpu: tally(&[6000, 6400]),
            gpu_stage_cpu: tally(&[1000, 1200]),
        };
        before.extend(StageSamples {
            cpu: vec![us(5000), us(5100), us(5200)],
            gpu: vec![us(3000), us(2900), us(3050)],
            cpu_stage_cpu: tally(&[5000, 5100, 5000]),
            gpu_stage_cpu: tally(&[1000, 900, 900]),
        });
        let a = t.around(&mut before).unwrap();
        assert_eq!((a.cpu.p50, a.cpu.samples), (us(5200), 5));
        assert_eq!(a.gpu.p50, us(3000));
        assert_eq!((a.work, a.work_copies, a.bare_gpu), (t.work, 3, t.bare_gpu));
        assert_eq!(a.bottleneck(), us(5200));
        // The CPU per run: the mean over both sets of runs.
        assert_eq!(a.process_cpu.cpu_stage_us, Some(5500.0));
        assert_eq!(a.process_cpu.gpu_stage_us, Some(1000.0));
        assert!(t.around(&mut StageSamples::default()).is_none());
    }
}
