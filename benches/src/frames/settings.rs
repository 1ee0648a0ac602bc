//! How long the `frames` bench measures: repetitions, warm-ups and sizes
//! ([`FrameSettings`]), and the run time they cost on the H200
//! ([`FrameSettings::estimated_run_time`]).

use std::time::Duration;

use super::{Gap, Scenario, FRAME_SIZES_BYTES, QUICK_FRAME_SIZES_BYTES};
use crate::cells::CellFilter;

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
    /// `tight-loop`: each column's timed block runs back-to-back calls until this
    /// long has passed and at least [`FrameSettings::tight_min_calls`] were made.
    pub tight_block: Duration,
    /// `tight-loop`: the fewest timed calls per block.
    pub tight_min_calls: usize,
    /// `tight-loop`: untimed calls before each block.
    pub tight_warmup_calls: usize,
    /// `contended`: measured frames per block, after [`FrameSettings::warmup_reps`]
    /// frames that count for CPU and throughput but not for latency.
    pub contended_frames: usize,
    /// Measured frames per thread and phase of `four-pipelines`.
    pub pipeline_frames: usize,
    /// Frames per thread run before each phase's timing starts.
    pub pipeline_warmup_frames: usize,
    /// Measured repetitions per size of `chunks`.
    pub chunk_reps: usize,
    /// Back-to-back transfer time per thread and cell of `scaling`.
    pub scaling_cell: Duration,
    /// The cells to measure (`BENCH_CELLS`, [`crate::cells`]); the runners skip the
    /// others.
    pub cells: CellFilter,
}

impl FrameSettings {
    /// The full run: at most about 4 minutes on the H200 (see
    /// [`FrameSettings::estimated_run_time`]).
    pub fn full() -> FrameSettings {
        FrameSettings {
            quick: false,
            sizes: FRAME_SIZES_BYTES.to_vec(),
            reps_short_gap: 250,
            reps_long_gap: 100,
            warmup_reps: 6,
            // 12 cells x 5 columns x 200 ms (16 MiB pageable: 200 calls, ~300 ms),
            // and the pauses: about 16 s on the H200.
            tight_block: Duration::from_millis(200),
            tight_min_calls: 200,
            tight_warmup_calls: 20,
            contended_frames: 100,
            pipeline_frames: 300,
            pipeline_warmup_frames: 10,
            chunk_reps: 200,
            scaling_cell: Duration::from_millis(200),
            cells: CellFilter::all(),
        }
    }

    /// `BENCH_QUICK=1`: 20 repetitions, two sizes (under 25 seconds).
    pub fn quick() -> FrameSettings {
        FrameSettings {
            quick: true,
            sizes: QUICK_FRAME_SIZES_BYTES.to_vec(),
            reps_short_gap: 20,
            reps_long_gap: 20,
            warmup_reps: 6,
            tight_block: Duration::from_millis(15),
            tight_min_calls: 20,
            tight_warmup_calls: 5,
            contended_frames: 20,
            pipeline_frames: 40,
            pipeline_warmup_frames: 10,
            chunk_reps: 20,
            scaling_cell: Duration::from_millis(25),
            cells: CellFilter::all(),
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
            tight_block: Duration::from_millis(1),
            tight_min_calls: 2,
            tight_warmup_calls: 1,
            contended_frames: 2,
            pipeline_frames: 3,
            pipeline_warmup_frames: 1,
            chunk_reps: 2,
            scaling_cell: Duration::from_millis(2),
            cells: CellFilter::all(),
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

    /// These settings for the cells `cells` names, and the scenarios of `scenarios`
    /// that have such cells. Without a pattern, nothing changes; with one, the sizes
    /// are those of every size the bench knows ([`FRAME_SIZES_BYTES`]) at which some
    /// scenario has a named cell, quick or not.
    pub fn for_cells(
        mut self,
        cells: CellFilter,
        scenarios: &[Scenario],
    ) -> (FrameSettings, Vec<Scenario>) {
        if cells.is_all() {
            return (self, scenarios.to_vec());
        }
        let picked: Vec<Scenario> = scenarios
            .iter()
            .copied()
            .filter(|s| cells.any(s.cells(&FRAME_SIZES_BYTES)))
            .collect();
        self.sizes = FRAME_SIZES_BYTES
            .into_iter()
            .filter(|&b| {
                picked
                    .iter()
                    .any(|s| s.uses_frame_columns() && cells.any(s.cells(&[b])))
            })
            .collect();
        self.cells = cells;
        (self, picked)
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
}

#[cfg(test)]
mod tests {
    use super::super::Scenario;
    use super::*;

    #[test]
    fn cells_pick_the_scenarios_and_sizes_they_name() {
        let all = Scenario::DEFAULT;
        let (same, scenarios) = FrameSettings::quick().for_cells(CellFilter::all(), &all);
        assert_eq!((same, scenarios), (FrameSettings::quick(), all.to_vec()));

        let cells = CellFilter::parse(Some(
            "sleep-2ms/*/1048576,tight-loop/H2D/196608,four-pipelines,back-to-back",
        ));
        let (s, scenarios) = FrameSettings::quick().for_cells(cells.clone(), &all);
        assert_eq!(
            scenarios,
            [
                Scenario::Sleep2ms,
                Scenario::TightLoop,
                Scenario::FourPipelines
            ]
        );
        // Sizes the quick run does not have are there when a cell names them.
        assert_eq!(s.sizes, [196_608, 1_048_576]);
        assert_eq!(s.reps_short_gap, FrameSettings::quick().reps_short_gap);
        assert_eq!(s.cells, cells);

        let (s, scenarios) =
            FrameSettings::full().for_cells(CellFilter::parse(Some("batch")), &all);
        assert!(scenarios.is_empty() && s.sizes.is_empty());
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
        let q = FrameSettings::quick();
        assert_eq!(q.sizes, [150_528, 4_915_200]);
        assert_eq!(q.reps(Scenario::Sleep2ms.gap().unwrap()), 20);
    }
}
