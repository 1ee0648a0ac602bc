//! The three ways to run the pipeline, each a loop over frames:
//!
//! | column | per frame |
//! |---|---|
//! | `pageable-sync` | preprocess into a `Vec<f32>`; `Stream::memcpy_htod_sync`; queue the model; `memcpy_dtoh_sync` of each output into a `Vec`; post-process |
//! | `staging-sync` | `StagingBuffer::upload_with` (preprocessing inside the fill); queue the model; `download_batch` of the four outputs (one wait); post-process from the landed batch |
//! | `ring` | `StagingRing::upload_with` (preprocessing in the fill; returns once queued); queue the model; `download_batch` on a second ring (a ticket); then redeem the previous frame's ticket and post-process it |
//!
//! In the ring, the CPU's work on frame k+1 (post-processing frame k-1, then
//! preprocessing frame k+1) overlaps the GPU's on frame k. Every frame's result is
//! checked. A frame's time is the time between its completion (its result checked)
//! and the previous frame's; frames per second is the timed frames over the time from
//! the last warm-up frame's completion to the last timed one's, and CPU per frame the
//! process's CPU time (all threads) over the same span, over the timed frames.
//! Nothing is allocated per frame: buffers, rings and the completion times are all
//! set up before.

use std::time::{Duration, Instant};

use cuda_core::Error;
use cuda_staging::BatchTicket;

use super::cpu::{postprocess, preprocess, Outputs, INPUT_LEN, SOURCE_FRAMES};
use super::device::OutputParts;
use super::workload::{check_frame, RingSplit, Workload};
use crate::cpu_time;
use crate::stats::Summary;

/// A way to run the pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopColumn {
    /// The driver's pageable copies from and into `Vec`s, synchronous.
    PageableSync,
    /// A [`cuda_staging::StagingBuffer`], synchronous.
    StagingSync,
    /// Two [`cuda_staging::StagingRing`]s: frame k's GPU work overlaps the CPU work
    /// on its neighbours.
    Ring,
    /// [`LoopColumn::Ring`] with both rings waiting by spinning
    /// ([`cuda_staging::WaitPolicy::Spin`]) instead of the default poll-then-block
    /// (`pipeline-gpu-heavy` only).
    RingSpin,
}

impl LoopColumn {
    /// Every loop, in run order.
    pub const ALL: [LoopColumn; 3] = [
        LoopColumn::PageableSync,
        LoopColumn::StagingSync,
        LoopColumn::Ring,
    ];

    /// The `pipeline-gpu-heavy` loops, in run order (the two rings one after the
    /// other).
    pub const GPU_HEAVY: [LoopColumn; 4] = [
        LoopColumn::PageableSync,
        LoopColumn::StagingSync,
        LoopColumn::RingSpin,
        LoopColumn::Ring,
    ];

    /// The column name in records and tables.
    pub fn name(self) -> &'static str {
        match self {
            LoopColumn::PageableSync => "pageable-sync",
            LoopColumn::StagingSync => "staging-sync",
            LoopColumn::Ring => "ring",
            LoopColumn::RingSpin => "ring-spin",
        }
    }
}

/// What one loop measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoopRun {
    /// The loop.
    pub column: LoopColumn,
    /// Timed frames over their wall time.
    pub fps: f64,
    /// Frame times: p50, p99 and the number of timed frames.
    pub frame_time: Summary,
    /// The process's CPU time per timed frame, µs; `None` where the CPU clock is
    /// unavailable.
    pub cpu_us: Option<f64>,
}

/// The calling thread's CPU time spent in `f`, and its result.
fn thread_cpu_of<R>(f: impl FnOnce() -> R) -> (Duration, R) {
    let c0 = cpu_time::thread_cpu();
    let r = f();
    (
        cpu_time::elapsed(c0, cpu_time::thread_cpu()).unwrap_or_default(),
        r,
    )
}

/// When each frame completed, and the process's CPU time then.
#[derive(Debug, Default)]
pub struct Completions {
    /// Completion instants, one per frame.
    pub at: Vec<Instant>,
    /// The process's CPU time at each completion.
    pub cpu: Vec<Option<Duration>>,
}

impl Completions {
    /// Room for `frames` completions.
    pub fn with_capacity(frames: usize) -> Completions {
        Completions {
            at: Vec::with_capacity(frames),
            cpu: Vec::with_capacity(frames),
        }
    }

    /// Records a completion now.
    pub fn push(&mut self) {
        self.at.push(Instant::now());
        self.cpu.push(cpu_time::process_cpu());
    }
}

/// CPU per frame, µs, over the span [`frame_times`] times: from the completion of
/// frame `first − 1` to that of frame `first + frames − 1`; `None` when `cpu` is too
/// short or a reading is missing.
pub fn cpu_per_frame(cpu: &[Option<Duration>], first: usize, frames: usize) -> Option<f64> {
    if first == 0 || frames == 0 || cpu.len() < first + frames {
        return None;
    }
    let spent = cpu_time::elapsed(cpu[first - 1], cpu[first + frames - 1]);
    cpu_time::mean_us(spent, frames)
}

/// Frame times from completion instants: frames `first..first + frames` are timed,
/// each from the completion of the one before it (so `first` ≥ 1). Returns the
/// times and the wall time they span; `None` when `done` is too short.
pub fn frame_times(
    done: &[Instant],
    first: usize,
    frames: usize,
) -> Option<(Vec<Duration>, Duration)> {
    if first == 0 || frames == 0 || done.len() < first + frames {
        return None;
    }
    let span = &done[first - 1..first + frames];
    let times = span.windows(2).map(|w| w[1] - w[0]).collect();
    Some((times, span[frames] - span[0]))
}

impl Workload<'_> {
    /// Runs `column` for `warmup` (at least 1) untimed frames, `frames` timed ones
    /// and one more (so the last timed frame is followed by another, as in a
    /// running pipeline), checking every frame.
    pub fn run_loop(
        &mut self,
        column: LoopColumn,
        warmup: usize,
        frames: usize,
    ) -> Result<LoopRun, String> {
        let first = warmup.max(1);
        let total = first + frames + 1;
        let mut done = Completions::with_capacity(total);
        match column {
            LoopColumn::PageableSync => {
                for k in 0..total {
                    self.pageable_frame(k)?;
                    done.push();
                }
            }
            LoopColumn::StagingSync => {
                for k in 0..total {
                    self.staging_frame(k)?;
                    done.push();
                }
            }
            LoopColumn::Ring => self.ring_frames(total, &mut done)?,
            LoopColumn::RingSpin => {
                // The spinning rings stand in for `up` and `down` for this loop.
                std::mem::swap(&mut self.up, &mut self.spin.0);
                std::mem::swap(&mut self.down, &mut self.spin.1);
                let r = self.ring_frames(total, &mut done);
                std::mem::swap(&mut self.up, &mut self.spin.0);
                std::mem::swap(&mut self.down, &mut self.spin.1);
                r?;
            }
        }
        let (mut times, wall) = frame_times(&done.at, first, frames)
            .ok_or_else(|| format!("{}: no frames timed", column.name()))?;
        let frame_time =
            Summary::of(&mut times).ok_or_else(|| format!("{}: no frames timed", column.name()))?;
        Ok(LoopRun {
            column,
            fps: frames as f64 / wall.as_secs_f64().max(f64::MIN_POSITIVE),
            frame_time,
            cpu_us: cpu_per_frame(&done.cpu, first, frames),
        })
    }

    /// One `pageable-sync` frame.
    fn pageable_frame(&mut self, k: usize) -> Result<(), String> {
        let what = "pageable-sync";
        let e = |e: Error| format!("{what} frame {k}: {e}");
        let s = &self.gpu.stream;
        let h = &mut self.pageable;
        preprocess(&self.frames[k % SOURCE_FRAMES], &mut h.input);
        s.memcpy_htod_sync(&h.input, &mut self.dev.input)
            .map_err(e)?;
        self.dev.queue_work(s, self.work).map_err(e)?;
        s.memcpy_dtoh_sync(&self.dev.scores, &mut h.scores)
            .map_err(e)?;
        s.memcpy_dtoh_sync(&self.dev.small_u8, &mut h.small_u8)
            .map_err(e)?;
        s.memcpy_dtoh_sync(&self.dev.small_16k, &mut h.small_16k)
            .map_err(e)?;
        s.memcpy_dtoh_sync(&self.dev.small_64k, &mut h.small_64k)
            .map_err(e)?;
        let outputs = Outputs {
            scores: &h.scores,
            small_u8: &h.small_u8,
            small_16k: &h.small_16k,
            small_64k: &h.small_64k,
        };
        let sum = postprocess(&outputs, &mut self.best);
        check_frame(&self.expected, what, k, sum)
    }

    /// One `staging-sync` frame.
    fn staging_frame(&mut self, k: usize) -> Result<(), String> {
        let what = "staging-sync";
        let e = |e: Error| format!("{what} frame {k}: {e}");
        let s = &self.gpu.stream;
        let frame = &self.frames[k % SOURCE_FRAMES];
        self.staging
            .upload_with(&mut self.dev.input, INPUT_LEN, s, |px: &mut [f32]| {
                preprocess(frame, px)
            })
            .map_err(e)?;
        self.dev.queue_work(s, self.work).map_err(e)?;
        let (batch, parts) = self.dev.output_batch().map_err(e)?;
        let landed = self.staging.download_batch(&batch, s).map_err(e)?;
        let sum = postprocess(&parts.outputs(&landed).map_err(e)?, &mut self.best);
        check_frame(&self.expected, what, k, sum)
    }

    /// `total` frames through the rings, pushing each completion into `done`.
    fn ring_frames(&mut self, total: usize, done: &mut Completions) -> Result<(), String> {
        let s = &self.gpu.stream;
        self.ring_split = RingSplit::default();
        let mut pending: Option<(usize, BatchTicket, OutputParts)> = None;
        for k in 0..total {
            let e = |e: Error| format!("ring frame {k}: {e}");
            let frame = &self.frames[k % SOURCE_FRAMES];
            let (cpu, r) = thread_cpu_of(|| {
                self.up
                    .upload_with(&mut self.dev.input, INPUT_LEN, s, |px: &mut [f32]| {
                        preprocess(frame, px)
                    })
            });
            self.ring_split.upload_cpu += cpu;
            r.map_err(e)?;
            self.dev.queue_work(s, self.work).map_err(e)?;
            let (batch, parts) = self.dev.output_batch().map_err(e)?;
            let ticket = self.down.download_batch(&batch, s).map_err(e)?;
            drop(batch);
            if let Some((j, ticket, parts)) = pending.replace((k, ticket, parts)) {
                self.finish_ring_frame(j, &ticket, &parts)?;
                done.push();
            }
        }
        if let Some((j, ticket, parts)) = pending.take() {
            self.finish_ring_frame(j, &ticket, &parts)?;
            done.push();
        }
        Ok(())
    }

    /// Waits for frame `k`'s outputs, post-processes and checks them.
    fn finish_ring_frame(
        &mut self,
        k: usize,
        ticket: &BatchTicket,
        parts: &OutputParts,
    ) -> Result<(), String> {
        let e = |e: Error| format!("ring frame {k}: {e}");
        let t0 = Instant::now();
        let (wait_cpu, landed) = thread_cpu_of(|| self.down.wait(ticket));
        self.ring_split.wait_wall += t0.elapsed();
        self.ring_split.wait_cpu += wait_cpu;
        let landed = landed.map_err(e)?;
        let best = &mut self.best;
        let (post_cpu, sum) = thread_cpu_of(|| {
            parts
                .outputs(&landed)
                .map(|outputs| postprocess(&outputs, best))
        });
        self.ring_split.post_cpu += post_cpu;
        self.ring_split.frames += 1;
        check_frame(&self.expected, "ring", k, sum.map_err(e)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loops_are_named_as_in_the_records() {
        let names: Vec<&str> = LoopColumn::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(names, ["pageable-sync", "staging-sync", "ring"]);
        assert_eq!(LoopColumn::RingSpin.name(), "ring-spin");
        assert!(LoopColumn::GPU_HEAVY.contains(&LoopColumn::RingSpin));
    }

    #[test]
    fn frame_times_run_from_completion_to_completion() {
        let t0 = Instant::now();
        let ms = |x: u64| t0 + Duration::from_millis(x);
        // Completions of frames 0..6; frame 0 is the warm-up, 1..=4 timed, 5 extra.
        let done = [ms(0), ms(10), ms(13), ms(17), ms(22), ms(28)];
        let (times, wall) = frame_times(&done, 1, 4).unwrap();
        let want: Vec<Duration> = [10, 3, 4, 5].map(Duration::from_millis).to_vec();
        assert_eq!(times, want);
        assert_eq!(wall, Duration::from_millis(22));
        assert!(frame_times(&done, 0, 4).is_none());
        assert!(frame_times(&done, 3, 4).is_none());
        assert!(frame_times(&done, 1, 0).is_none());
    }

    #[test]
    fn cpu_per_frame_spans_the_timed_frames() {
        let ms = |x: u64| Some(Duration::from_millis(x));
        // The process's CPU at the completions of frames 0..6, as above.
        let cpu = [ms(1), ms(5), ms(6), ms(8), ms(13), ms(20)];
        // Frames 1..=4: from frame 0's completion (1 ms) to frame 4's (13 ms).
        assert_eq!(cpu_per_frame(&cpu, 1, 4), Some(3000.0));
        assert_eq!(cpu_per_frame(&cpu, 2, 2), Some(1500.0));
        assert_eq!(cpu_per_frame(&cpu, 0, 4), None);
        assert_eq!(cpu_per_frame(&cpu, 3, 4), None);
        assert_eq!(cpu_per_frame(&cpu, 1, 0), None);
        let mut unread = cpu;
        unread[4] = None;
        assert_eq!(cpu_per_frame(&unread, 1, 4), None);
    }
}
