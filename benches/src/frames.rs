//! The plan of the `frames` bench: scenarios, columns, sizes, repetitions and the
//! run time they cost.
//!
//! Users run frame loops, not criterion's back-to-back loops: one transfer per frame
//! with the calling thread asleep or busy in between, and a gap taxes the next
//! transfer (design.md, "Measuring what users run"). And latency alone hides how it
//! was bought: every frame-loop, `tight-loop`, `contended` and `four-pipelines`
//! record also carries the process's CPU time per frame, all threads, with the
//! gap's own CPU removed (`cpu_us`; design.md, "CPU per frame is part of every
//! claim"; clocks in [`crate::cpu_time`]).
//!
//! | scenario | the gap before each transfer | CPU per frame |
//! |---|---|---|
//! | `sleep-2ms` | `std::thread::sleep(2 ms)` | per transfer: process CPU from its start to the next measured transfer's, less the caller's CPU in the gap ([`crate::frame_loop`]) |
//! | `sleep-16ms` | `std::thread::sleep(16 ms)`: one frame at 60 fps | the same |
//! | `busy-2ms` | the calling thread writes a byte per cache line through a separate 32 MiB scratch buffer for 2 ms (preprocessing into other memory) | the same (the busy gap's own CPU removed) |
//! | `tight-loop` | none: each column's calls back to back, a block per column | process CPU over the block / calls ([`crate::tight_loop`]) |
//! | `contended` | `std::thread::sleep(2 ms)` while (cores − 1) neighbour threads compute; a block per column between blocks without transfers | (process CPU − neighbours' CPU) over the block / frames, and the neighbours' throughput against the blocks without transfers ([`crate::contended`]) |
//! | `four-pipelines` | 4 threads, own stream and buffers each, 2 ms sleep per frame, then 150528 B and 4915200 B up and down | process CPU over the phase / frames of all threads ([`crate::four_pipelines`]) |
//! | `scaling` | none: one thread per GPU moving 4915200 B or 64 MiB back to back, one GPU against all (skipped with one GPU) | — |
//! | `chunks` | none: the download chunk/thread diagnostic, only when asked for by name | — |
//!
//! Pure logic, tested without a GPU; repetitions and run time are in [`FrameSettings`],
//! percentiles in [`crate::stats`]; [`crate::frame_loop`], [`crate::tight_loop`],
//! [`crate::contended`], [`crate::four_pipelines`], [`crate::scaling`] and
//! [`crate::chunks`] run it.

use std::time::Duration;

use crate::cells::cell_name;
use crate::{column, Direction};

mod settings;
pub use settings::FrameSettings;

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
    /// No gap: each column's transfers back to back, a block per column; see
    /// [`crate::tight_loop`].
    TightLoop,
    /// Sleep 2 ms before each transfer while (cores − 1) neighbour threads compute;
    /// see [`crate::contended`].
    Contended,
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
    pub const ALL: [Scenario; 8] = [
        Scenario::Sleep2ms,
        Scenario::Sleep16ms,
        Scenario::Busy2ms,
        Scenario::TightLoop,
        Scenario::Contended,
        Scenario::FourPipelines,
        Scenario::Scaling,
        Scenario::Chunks,
    ];

    /// What runs without `FRAMES_ONLY`: all but the diagnostic.
    pub const DEFAULT: [Scenario; 7] = [
        Scenario::Sleep2ms,
        Scenario::Sleep16ms,
        Scenario::Busy2ms,
        Scenario::TightLoop,
        Scenario::Contended,
        Scenario::FourPipelines,
        Scenario::Scaling,
    ];

    /// The name in records, tables and `FRAMES_ONLY`.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Sleep2ms => "sleep-2ms",
            Scenario::Sleep16ms => "sleep-16ms",
            Scenario::Busy2ms => "busy-2ms",
            Scenario::TightLoop => "tight-loop",
            Scenario::Contended => "contended",
            Scenario::FourPipelines => "four-pipelines",
            Scenario::Scaling => "scaling",
            Scenario::Chunks => "chunks",
        }
    }

    /// The scenario called `name`.
    pub fn from_name(name: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The gap before each transfer: the frame-loop scenarios' and `contended`'s;
    /// `None` for the others.
    pub fn gap(self) -> Option<Gap> {
        match self {
            Scenario::Sleep2ms | Scenario::Contended => Some(Gap::Sleep(Duration::from_millis(2))),
            Scenario::Sleep16ms => Some(Gap::Sleep(Duration::from_millis(16))),
            Scenario::Busy2ms => Some(Gap::Busy(Duration::from_millis(2))),
            Scenario::TightLoop
            | Scenario::FourPipelines
            | Scenario::Scaling
            | Scenario::Chunks => None,
        }
    }

    /// The names of the scenario's cells ([`crate::cells`]) at `sizes`: one per
    /// direction and size for those on the frame-loop columns, else its name alone.
    pub fn cells(self, sizes: &[usize]) -> Vec<String> {
        if !self.uses_frame_columns() {
            return vec![self.name().to_string()];
        }
        sizes
            .iter()
            .flat_map(|&b| Direction::ALL.map(|d| cell_name(self.name(), d.label(), b)))
            .collect()
    }

    /// Whether the scenario runs on [`crate::frame_loop::FrameLoop`]'s columns and
    /// sizes: the frame loops with a gap, `tight-loop` and `contended`.
    pub fn uses_frame_columns(self) -> bool {
        matches!(
            self,
            Scenario::Sleep2ms
                | Scenario::Sleep16ms
                | Scenario::Busy2ms
                | Scenario::TightLoop
                | Scenario::Contended
        )
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
    /// `StagingBuffer::upload_with` (a fill that writes nothing: the producer's
    /// writes are its own work) / `download_into`.
    Resident,
}

impl FrameColumn {
    /// Every column, in table order; a frame loop interleaves them in this order.
    pub const ALL: [FrameColumn; 4] = [
        FrameColumn::Pageable,
        FrameColumn::PageableAsync,
        FrameColumn::CopyIn,
        FrameColumn::Resident,
    ];

    /// The column name in records and tables.
    pub fn name(self) -> &'static str {
        match self {
            FrameColumn::Pageable => column::PAGEABLE,
            FrameColumn::PageableAsync => column::PAGEABLE_ASYNC,
            FrameColumn::CopyIn => column::COPY_IN,
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

/// How long to stay idle after a cell before timing the next: the pool's helpers
/// park within a few hundred µs of their last copy, and the CPU package settles.
/// (150 ms, as it was when a low-latency mode kept helpers spinning for 100 ms, so
/// that runs stay comparable with earlier ones.)
pub const CELL_QUIET: Duration = Duration::from_millis(150);

/// Sizes of the frame-loop scenarios: 64 KiB, the seed's three tensors, 1 MiB and
/// 16 MiB.
pub const FRAME_SIZES_BYTES: [usize; 6] = [65_536, 150_528, 196_608, 1 << 20, 4_915_200, 16 << 20];

/// Sizes of a `BENCH_QUICK` run.
pub const QUICK_FRAME_SIZES_BYTES: [usize; 2] = [150_528, 4_915_200];

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
        assert_eq!(
            scenarios_from(Some("contended,tight-loop,sleep-16ms")).unwrap(),
            [
                Scenario::Sleep16ms,
                Scenario::TightLoop,
                Scenario::Contended
            ]
        );
        assert!(Scenario::DEFAULT.contains(&Scenario::TightLoop));
        assert!(Scenario::DEFAULT.contains(&Scenario::Contended));
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
    fn the_frame_columns_serve_the_gaps_the_tight_loop_and_contended() {
        let on_columns: Vec<&str> = Scenario::ALL
            .iter()
            .filter(|s| s.uses_frame_columns())
            .map(|s| s.name())
            .collect();
        assert_eq!(
            on_columns,
            [
                "sleep-2ms",
                "sleep-16ms",
                "busy-2ms",
                "tight-loop",
                "contended"
            ]
        );
        assert_eq!(Scenario::TightLoop.gap(), None);
        assert_eq!(
            Scenario::Contended.gap(),
            Some(Gap::Sleep(Duration::from_millis(2)))
        );
        assert_eq!(Scenario::FourPipelines.gap(), None);
    }

    #[test]
    fn every_column_is_measured_once_per_cell() {
        for c in FrameColumn::ALL {
            assert_eq!(FrameColumn::ALL[c.index()], c);
        }
        let names: Vec<&str> = FrameColumn::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(names, ["pageable", "pageable-async", "copy-in", "resident"]);
    }
}
