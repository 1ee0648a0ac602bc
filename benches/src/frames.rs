//! The plan of the `frames` bench: scenarios, columns, sizes, repetitions and the
//! run time they cost.
//!
//! Users run frame loops, not criterion's back-to-back loops: one transfer per frame
//! with the calling thread asleep or busy in between, and a gap taxes the next
//! transfer (design.md, "Measuring what users run"). Every measured transfer here
//! follows a gap:
//!
//! | scenario | the gap before each transfer |
//! |---|---|
//! | `sleep-2ms` | `std::thread::sleep(2 ms)` |
//! | `sleep-16ms` | `std::thread::sleep(16 ms)`: one frame at 60 fps |
//! | `busy-2ms` | the calling thread writes a byte per cache line through a separate 32 MiB scratch buffer for 2 ms (preprocessing into other memory) |
//! | `four-pipelines` | 4 threads, own stream and buffers each, 2 ms sleep per frame, then 150528 B and 4915200 B up and down |
//! | `scaling` | none: one thread per GPU moving 4915200 B or 64 MiB back to back, one GPU against all (skipped with one GPU) |
//! | `chunks` | none: the download chunk/thread diagnostic, only when asked for by name |
//!
//! Pure logic, tested without a GPU; percentiles are in [`crate::stats`]; [`crate::frame_loop`], [`crate::four_pipelines`],
//! [`crate::scaling`] and [`crate::chunks`] run it.

use std::time::Duration;

use crate::column;

/// What the calling thread does before each measured transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gap {
    /// `std::thread::sleep` for this long.
    Sleep(Duration),
    /// Writes through a scratch buffer until this long has passed
    /// ([`crate::gap::GapRunner`]).
    Busy(Duration),
}

impl Gap {
    /// The time a gap takes in the run-time estimate: sleeps overshoot (timer slack,
    /// wake-up), busy gaps stop within one scratch chunk of their end.
    pub fn assumed_cost(self) -> Duration {
        match self {
            Gap::Sleep(d) => d + Duration::from_micros(80),
            Gap::Busy(d) => d + Duration::from_micros(5),
        }
    }
}

/// One scenario of the `frames` bench, named as in its records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scenario {
    /// Sleep 2 ms before each transfer.
    Sleep2ms,
    /// Sleep 16 ms (one frame at 60 fps) before each transfer.
    Sleep16ms,
    /// Compute for 2 ms (writing other memory) before each transfer.
    Busy2ms,
    /// Four threads, each its own frame loop; see [`crate::four_pipelines`].
    FourPipelines,
    /// One GPU against all, one thread each; see [`crate::scaling`]. Skipped, with a
    /// line saying so, on a machine with one GPU.
    Scaling,
    /// Back-to-back download variants, a tuning diagnostic; see [`crate::chunks`].
    Chunks,
}

impl Scenario {
    /// Every scenario, in run order.
    pub const ALL: [Scenario; 6] = [
        Scenario::Sleep2ms,
        Scenario::Sleep16ms,
        Scenario::Busy2ms,
        Scenario::FourPipelines,
        Scenario::Scaling,
        Scenario::Chunks,
    ];

    /// What runs without `FRAMES_ONLY`: all but the diagnostic.
    pub const DEFAULT: [Scenario; 5] = [
        Scenario::Sleep2ms,
        Scenario::Sleep16ms,
        Scenario::Busy2ms,
        Scenario::FourPipelines,
        Scenario::Scaling,
    ];

    /// The name in records, tables and `FRAMES_ONLY`.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Sleep2ms => "sleep-2ms",
            Scenario::Sleep16ms => "sleep-16ms",
            Scenario::Busy2ms => "busy-2ms",
            Scenario::FourPipelines => "four-pipelines",
            Scenario::Scaling => "scaling",
            Scenario::Chunks => "chunks",
        }
    }

    /// The scenario called `name`.
    pub fn from_name(name: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The gap before each transfer of a frame-loop scenario; `None` for the others.
    pub fn gap(self) -> Option<Gap> {
        match self {
            Scenario::Sleep2ms => Some(Gap::Sleep(Duration::from_millis(2))),
            Scenario::Sleep16ms => Some(Gap::Sleep(Duration::from_millis(16))),
            Scenario::Busy2ms => Some(Gap::Busy(Duration::from_millis(2))),
            Scenario::FourPipelines | Scenario::Scaling | Scenario::Chunks => None,
        }
    }
}

/// The environment variable that picks a subset of scenarios (comma list of names).
pub const FRAMES_ONLY_ENV: &str = "FRAMES_ONLY";

/// The scenarios to run, in run order, from the value of `FRAMES_ONLY`: unset or
/// empty runs [`Scenario::DEFAULT`]; otherwise a comma list of names (spaces and
/// repeats allowed). An unknown name is an error that lists the known ones.
pub fn scenarios_from(only: Option<&str>) -> Result<Vec<Scenario>, String> {
    let Some(only) = only.filter(|s| !s.trim().is_empty()) else {
        return Ok(Scenario::DEFAULT.to_vec());
    };
    let mut picked = Vec::new();
    for name in only.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match Scenario::from_name(name) {
            Some(s) => picked.push(s),
            None => {
                let known: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
                return Err(format!(
                    "{FRAMES_ONLY_ENV}: unknown scenario {name:?} (known: {})",
                    known.join(", ")
                ));
            }
        }
    }
    picked.sort_unstable();
    picked.dedup();
    Ok(picked)
}

/// A column of the frame-loop scenarios.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameColumn {
    /// `DeviceBuffer::copy_from_host` / `copy_to_host` (synchronous driver copy).
    Pageable,
    /// `Stream::memcpy_htod_sync` / `memcpy_dtoh_sync` (the driver's async pageable
    /// copy on our stream, then a wait).
    PageableAsync,
    /// `StagingBuffer::upload` / `download`, default settings.
    CopyIn,
    /// `StagingBuffer::upload` / `download` with `set_low_latency(true)`.
    CopyInLowLatency,
    /// `StagingBuffer::upload_with` (a fill that writes nothing: the producer's
    /// writes are its own work) / `download_into`.
    Resident,
}

impl FrameColumn {
    /// Every column, in table order.
    pub const ALL: [FrameColumn; 5] = [
        FrameColumn::Pageable,
        FrameColumn::PageableAsync,
        FrameColumn::CopyIn,
        FrameColumn::CopyInLowLatency,
        FrameColumn::Resident,
    ];

    /// The columns measured interleaved within each repetition.
    ///
    /// `copy-in-low-latency` is not among them: after each of its transfers the
    /// process-wide copy pool keeps its helpers spinning for 100 ms (`KEEP_HOT`), and
    /// nothing public cools them sooner, so any column timed in those 100 ms would
    /// borrow hot helpers (copy-in would measure low-latency mode) and a busy CPU
    /// package (cheaper wake-ups for the pageable paths too). It runs as its own
    /// loop right after the interleaved one, in the same cell, followed by
    /// [`LOW_LATENCY_QUIET`].
    pub const INTERLEAVED: [FrameColumn; 4] = [
        FrameColumn::Pageable,
        FrameColumn::PageableAsync,
        FrameColumn::CopyIn,
        FrameColumn::Resident,
    ];

    /// The columns measured in a loop of their own (see [`FrameColumn::INTERLEAVED`]).
    pub const ALONE: [FrameColumn; 1] = [FrameColumn::CopyInLowLatency];

    /// The column name in records and tables.
    pub fn name(self) -> &'static str {
        match self {
            FrameColumn::Pageable => column::PAGEABLE,
            FrameColumn::PageableAsync => column::PAGEABLE_ASYNC,
            FrameColumn::CopyIn => column::COPY_IN,
            FrameColumn::CopyInLowLatency => column::COPY_IN_LOW_LATENCY,
            FrameColumn::Resident => column::RESIDENT,
        }
    }

    /// Position in [`FrameColumn::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether this is one of the pageable baselines (the table's ratios divide
    /// the faster of them by each column).
    pub fn is_pageable(self) -> bool {
        matches!(self, FrameColumn::Pageable | FrameColumn::PageableAsync)
    }
}

/// How long to stay idle after low-latency transfers before timing anything else:
/// the pool's helpers spin 100 ms after the last one (`KEEP_HOT`), then up to
/// 200 µs more (`SPIN`).
pub const LOW_LATENCY_QUIET: Duration = Duration::from_millis(150);

/// Sizes of the frame-loop scenarios: 64 KiB, the seed's three tensors, 1 MiB and
/// 16 MiB.
pub const FRAME_SIZES_BYTES: [usize; 6] = [65_536, 150_528, 196_608, 1 << 20, 4_915_200, 16 << 20];

/// Sizes of a `BENCH_QUICK` run.
pub const QUICK_FRAME_SIZES_BYTES: [usize; 2] = [150_528, 4_915_200];

/// Repetitions, warm-ups and sizes of one `frames` run.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameSettings {
    /// `BENCH_QUICK` (or test mode): fewer repetitions and sizes.
    pub quick: bool,
    /// Frame-loop sizes in bytes, ascending.
    pub sizes: Vec<usize>,
    /// Measured repetitions per cell with a 2 ms gap (sleep or busy).
    pub reps_short_gap: usize,
    /// Measured repetitions per cell with the 16 ms gap.
    pub reps_long_gap: usize,
    /// Repetitions dropped at the start of each cell's loop. The staging buffers
    /// predict a frame rhythm from 4 gaps, so 6 lets them find it.
    pub warmup_reps: usize,
    /// Measured frames per thread and phase of `four-pipelines`.
    pub pipeline_frames: usize,
    /// Frames per thread run before each phase's timing starts.
    pub pipeline_warmup_frames: usize,
    /// Measured repetitions per size of `chunks`.
    pub chunk_reps: usize,
    /// Back-to-back transfer time per thread and cell of `scaling`.
    pub scaling_cell: Duration,
}

impl FrameSettings {
    /// The full run: at most about 3.4 minutes on the H200 (see
    /// [`FrameSettings::estimated_run_time`]).
    pub fn full() -> FrameSettings {
        FrameSettings {
            quick: false,
            sizes: FRAME_SIZES_BYTES.to_vec(),
            reps_short_gap: 250,
            reps_long_gap: 100,
            warmup_reps: 6,
            pipeline_frames: 300,
            pipeline_warmup_frames: 10,
            chunk_reps: 200,
            scaling_cell: Duration::from_millis(200),
        }
    }

    /// `BENCH_QUICK=1`: 20 repetitions, two sizes (under 20 seconds).
    pub fn quick() -> FrameSettings {
        FrameSettings {
            quick: true,
            sizes: QUICK_FRAME_SIZES_BYTES.to_vec(),
            reps_short_gap: 20,
            reps_long_gap: 20,
            warmup_reps: 6,
            pipeline_frames: 40,
            pipeline_warmup_frames: 10,
            chunk_reps: 20,
            scaling_cell: Duration::from_millis(25),
        }
    }

    /// Test mode (`cargo test --benches` on a GPU machine): every path once or
    /// twice, to show it runs and its data is right.
    pub fn smoke() -> FrameSettings {
        FrameSettings {
            quick: true,
            sizes: QUICK_FRAME_SIZES_BYTES.to_vec(),
            reps_short_gap: 2,
            reps_long_gap: 2,
            warmup_reps: 1,
            pipeline_frames: 3,
            pipeline_warmup_frames: 1,
            chunk_reps: 2,
            scaling_cell: Duration::from_millis(2),
        }
    }

    /// [`FrameSettings::quick`] under `BENCH_QUICK`, else [`FrameSettings::full`].
    pub fn from_env() -> FrameSettings {
        if crate::quick_from_env() {
            FrameSettings::quick()
        } else {
            FrameSettings::full()
        }
    }

    /// Measured repetitions per cell of a frame-loop scenario.
    pub fn reps(&self, gap: Gap) -> usize {
        let d = match gap {
            Gap::Sleep(d) | Gap::Busy(d) => d,
        };
        if d >= Duration::from_millis(10) {
            self.reps_long_gap
        } else {
            self.reps_short_gap
        }
    }

    /// A conservative estimate of the wall time of `scenarios` on the H200, from
    /// [`assumed_transfer_cost`]; the bench prints it first and its elapsed time
    /// last.
    pub fn estimated_run_time(&self, scenarios: &[Scenario]) -> Duration {
        let mut total = ASSUMED_SETUP;
        for &s in scenarios {
            total += match s {
                Scenario::FourPipelines => self.pipelines_time(),
                Scenario::Scaling => self.scaling_time(),
                Scenario::Chunks => self.chunks_time(),
                _ => self.frame_loop_time(s.gap().expect("a frame-loop scenario has a gap")),
            };
        }
        total
    }

    /// One frame-loop scenario: per cell (size × direction), warm-up plus measured
    /// repetitions of a gap and a transfer for every column, then the quiet time.
    fn frame_loop_time(&self, gap: Gap) -> Duration {
        let reps = (self.warmup_reps + self.reps(gap)) as u32;
        let columns = FrameColumn::ALL.len() as u32;
        let mut total = Duration::ZERO;
        for &bytes in &self.sizes {
            let per_rep = (gap.assumed_cost() + assumed_transfer_cost(bytes)) * columns;
            total += (per_rep * reps + LOW_LATENCY_QUIET) * 2;
        }
        total
    }

    fn pipelines_time(&self) -> Duration {
        let frames = (self.pipeline_warmup_frames + self.pipeline_frames) as u32;
        let frame =
            Gap::Sleep(crate::four_pipelines::PIPELINE_GAP).assumed_cost() + ASSUMED_PIPELINE_FRAME;
        (frame * frames + LOW_LATENCY_QUIET)
            * crate::four_pipelines::PipelineColumn::ALL.len() as u32
    }

    /// As if on two GPUs (with one it is skipped): every cell's transfers plus its
    /// data check and warm-up, and the lanes' set-up.
    fn scaling_time(&self) -> Duration {
        let cells = crate::scaling::measured_cells() as u32;
        ASSUMED_SCALING_SETUP + (self.scaling_cell + ASSUMED_SCALING_CELL_CHECK) * cells
    }

    fn chunks_time(&self) -> Duration {
        let variants = crate::chunks::variants().len() as u32 + 1;
        let reps = (self.chunk_reps + crate::chunks::CHUNK_WARMUP_REPS) as u32;
        crate::chunks::CHUNK_SIZES_BYTES
            .iter()
            .map(|&b| assumed_transfer_cost(b) * variants * reps)
            .sum()
    }
}

/// Context creation, allocations, pinning, the scratch buffer and the data checks.
const ASSUMED_SETUP: Duration = Duration::from_secs(3);

/// `scaling`'s set-up: per GPU (in turn), a context, 64 MiB of device memory and a
/// 64 MiB host pattern.
const ASSUMED_SCALING_SETUP: Duration = Duration::from_millis(500);

/// A `scaling` cell's data check (a round trip of up to 64 MiB through zeroed device
/// memory, compared; 64 MiB pinned at a lane's first resident cell) and warm-up
/// transfers, generously.
const ASSUMED_SCALING_CELL_CHECK: Duration = Duration::from_millis(40);

/// One `four-pipelines` frame (four transfers, four threads sharing the link and
/// the copy pool), generously: 4 ms.
const ASSUMED_PIPELINE_FRAME: Duration = Duration::from_millis(4);

/// A transfer's assumed cost in the run-time estimate, whatever the column:
/// 25 µs plus 10 GB/s. That is the pageable path's speed on the H200 (16 MiB in
/// 1.7 ms, 4915200 B in 0.52 ms), which the staged columns beat, so the estimate
/// errs long.
pub fn assumed_transfer_cost(bytes: usize) -> Duration {
    Duration::from_micros(25) + Duration::from_nanos(bytes as u64 / 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_only_picks_known_scenarios_in_run_order() {
        assert_eq!(scenarios_from(None).unwrap(), Scenario::DEFAULT);
        assert_eq!(scenarios_from(Some(" ")).unwrap(), Scenario::DEFAULT);
        assert_eq!(
            scenarios_from(Some("busy-2ms, sleep-2ms,busy-2ms")).unwrap(),
            [Scenario::Sleep2ms, Scenario::Busy2ms]
        );
        assert_eq!(scenarios_from(Some("chunks")).unwrap(), [Scenario::Chunks]);
        let e = scenarios_from(Some("sleep-2ms,sleep-3ms")).unwrap_err();
        assert!(
            e.contains("\"sleep-3ms\"") && e.contains("four-pipelines"),
            "{e}"
        );
        assert!(!Scenario::DEFAULT.contains(&Scenario::Chunks));
        for s in Scenario::ALL {
            assert_eq!(Scenario::from_name(s.name()), Some(s));
        }
    }

    #[test]
    fn every_column_is_measured_once_per_cell() {
        let mut seen: Vec<FrameColumn> = FrameColumn::INTERLEAVED.to_vec();
        seen.extend(FrameColumn::ALONE);
        assert_eq!(seen.len(), FrameColumn::ALL.len());
        for c in FrameColumn::ALL {
            assert!(seen.contains(&c), "{c:?}");
            assert_eq!(FrameColumn::ALL[c.index()], c);
        }
        let names: Vec<&str> = FrameColumn::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(
            names,
            [
                "pageable",
                "pageable-async",
                "copy-in",
                "copy-in-low-latency",
                "resident"
            ]
        );
    }

    #[test]
    fn settings_give_enough_samples_for_a_p99() {
        let f = FrameSettings::full();
        assert_eq!(
            f.sizes,
            [65_536, 150_528, 196_608, 1_048_576, 4_915_200, 16_777_216]
        );
        for s in [Scenario::Sleep2ms, Scenario::Sleep16ms, Scenario::Busy2ms] {
            assert!(f.reps(s.gap().unwrap()) >= 100, "{s:?}");
        }
        assert_eq!(f.reps(Scenario::Sleep16ms.gap().unwrap()), 100);
        assert_eq!(f.reps(Scenario::Busy2ms.gap().unwrap()), 250);
        assert!(f.warmup_reps >= 5, "the rhythm predictor needs 4 gaps");
        assert!(f.pipeline_frames * crate::four_pipelines::PIPELINE_THREADS >= 1000);
        let q = FrameSettings::quick();
        assert_eq!(q.sizes, [150_528, 4_915_200]);
        assert_eq!(q.reps(Scenario::Sleep2ms.gap().unwrap()), 20);
    }

    #[test]
    fn the_full_run_fits_three_and_a_half_minutes() {
        let f = FrameSettings::full();
        let t = f.estimated_run_time(&Scenario::DEFAULT);
        assert!(t <= Duration::from_secs(210), "{t:?}");
        assert!(
            t >= Duration::from_secs(150),
            "{t:?}: the 16 ms gaps alone take ~100 s"
        );
        let q = FrameSettings::quick().estimated_run_time(&Scenario::DEFAULT);
        assert!(q <= Duration::from_secs(20), "{q:?}");
        let c = f.estimated_run_time(&[Scenario::Chunks]);
        assert!(c <= Duration::from_secs(15), "{c:?}");
        // A few seconds on two GPUs: 16 cells of 200 ms.
        let s = f.estimated_run_time(&[Scenario::Scaling]) - ASSUMED_SETUP;
        assert!(
            s >= Duration::from_millis(3200) && s <= Duration::from_secs(5),
            "{s:?}"
        );
    }
}
