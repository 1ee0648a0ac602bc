//! How long a `frames` run takes on the H200: [`FrameSettings::estimated_run_time`],
//! which the bench prints before it starts. It adds up every scenario's cells from
//! the scenario runners' own constants (blocks, columns, pauses), so it lives above
//! them and [`crate::frames`]: the settings they all read import none of them.

use std::time::Duration;

use crate::chunks::{self, CHUNK_SIZES_BYTES, CHUNK_WARMUP_REPS};
use crate::contended::{CONTENDED_BLOCKS, CONTENDED_COLUMNS};
use crate::four_pipelines::{PipelineColumn, PIPELINE_GAP};
use crate::frames::{FrameColumn, FrameSettings, Gap, Scenario, CELL_QUIET};
use crate::scaling;
use crate::tight_loop::TIGHT_LOOP_QUIET;

impl FrameSettings {
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
                Scenario::TightLoop => self.tight_loop_time(),
                Scenario::Contended => self.contended_time(),
                Scenario::Sleep2ms | Scenario::Sleep16ms | Scenario::Busy2ms => {
                    self.frame_loop_time(s.gap().unwrap_or(Gap::Sleep(Duration::ZERO)))
                }
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
            total += (per_rep * reps + CELL_QUIET) * 2;
        }
        total
    }

    /// `tight-loop`: per cell and column, the warm-up calls, a block of at least
    /// [`FrameSettings::tight_block`] and [`FrameSettings::tight_min_calls`] calls,
    /// then the quiet pause.
    fn tight_loop_time(&self) -> Duration {
        let mut total = Duration::ZERO;
        for &bytes in &self.sizes {
            let cost = assumed_transfer_cost(bytes);
            let block = self.tight_block.max(cost * self.tight_min_calls as u32);
            let per_column = cost * self.tight_warmup_calls as u32 + block + TIGHT_LOOP_QUIET;
            total += per_column * FrameColumn::ALL.len() as u32 * 2;
        }
        total
    }

    /// `contended`: per cell, [`CONTENDED_BLOCKS`] blocks of warm-up plus measured
    /// 2 ms frames, a transfer in each frame of the column blocks, and the neighbours
    /// paused and resumed around each block.
    fn contended_time(&self) -> Duration {
        let gap = Gap::Sleep(Duration::from_millis(2)).assumed_cost();
        // The block's frames and its closing sleep.
        let frames = (self.warmup_reps + self.contended_frames) as u32;
        let sleeps = frames + 1;
        let mut total = ASSUMED_NEIGHBOURS_SETUP;
        for &bytes in &self.sizes {
            let blocks = (gap * sleeps + ASSUMED_PAUSE) * CONTENDED_BLOCKS as u32;
            let transfers = assumed_transfer_cost(bytes) * frames * CONTENDED_COLUMNS.len() as u32;
            total += (blocks + transfers) * 2;
        }
        total
    }

    fn pipelines_time(&self) -> Duration {
        let frames = (self.pipeline_warmup_frames + self.pipeline_frames) as u32;
        let frame = Gap::Sleep(PIPELINE_GAP).assumed_cost() + ASSUMED_PIPELINE_FRAME;
        (frame * frames + CELL_QUIET) * PipelineColumn::ALL.len() as u32
    }

    /// As if on two GPUs (with one it is skipped): every cell's transfers plus its
    /// data check and warm-up, and the lanes' set-up.
    fn scaling_time(&self) -> Duration {
        let cells = scaling::measured_cells() as u32;
        ASSUMED_SCALING_SETUP + (self.scaling_cell + ASSUMED_SCALING_CELL_CHECK) * cells
    }

    fn chunks_time(&self) -> Duration {
        let variants = chunks::variants().len() as u32 + 1;
        let reps = (self.chunk_reps + CHUNK_WARMUP_REPS) as u32;
        CHUNK_SIZES_BYTES
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

/// `contended`: starting and joining the neighbour threads.
const ASSUMED_NEIGHBOURS_SETUP: Duration = Duration::from_millis(50);

/// `contended`: pausing the neighbours at a block's end and resuming them at the
/// next one's start, generously.
const ASSUMED_PAUSE: Duration = Duration::from_millis(2);

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
    fn the_full_run_fits_four_minutes() {
        let f = FrameSettings::full();
        let t = f.estimated_run_time(&Scenario::DEFAULT);
        assert!(t <= Duration::from_secs(240), "{t:?}");
        assert!(
            t >= Duration::from_secs(150),
            "{t:?}: the 16 ms gaps alone take ~100 s"
        );
        let q = FrameSettings::quick().estimated_run_time(&Scenario::DEFAULT);
        assert!(q <= Duration::from_secs(25), "{q:?}");
        let c = f.estimated_run_time(&[Scenario::Chunks]);
        assert!(c <= Duration::from_secs(15), "{c:?}");
        // A few seconds on two GPUs: 16 cells of 200 ms.
        let s = f.estimated_run_time(&[Scenario::Scaling]) - ASSUMED_SETUP;
        assert!(
            s >= Duration::from_millis(3200) && s <= Duration::from_secs(5),
            "{s:?}"
        );
    }

    #[test]
    fn the_new_scenarios_take_a_quarter_minute_each() {
        let f = FrameSettings::full();
        let alone = |s| f.estimated_run_time(&[s]) - ASSUMED_SETUP;
        // 12 cells x 5 columns x 200 ms, the 16 MiB blocks longer, and the pauses.
        let tight = alone(Scenario::TightLoop);
        assert!(
            tight >= Duration::from_secs(12) && tight <= Duration::from_secs(20),
            "{tight:?}"
        );
        // 12 cells x 6 blocks x 106 frames of 2 ms.
        let contended = alone(Scenario::Contended);
        assert!(
            contended >= Duration::from_secs(15) && contended <= Duration::from_secs(22),
            "{contended:?}"
        );
        // The smallest block still holds its minimum of calls, the largest more.
        assert!(f.tight_min_calls >= 200, "a p99 needs a few hundred calls");
        let largest = assumed_transfer_cost(16 << 20) * f.tight_min_calls as u32;
        assert!(largest > f.tight_block, "{largest:?}");
        assert!(f.contended_frames >= 100);
        assert!(FrameSettings::smoke().contended_frames >= 1);
    }
}
