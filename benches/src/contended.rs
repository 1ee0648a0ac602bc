//! `contended`: the `sleep-2ms` frame loop on a busy host. While the calling thread
//! sleeps 2 ms before every transfer, (cores − 1) neighbour threads
//! ([`crate::neighbours`]) compute beside it, standing in for the decoders and
//! preprocessing that share a real inference host's cores (issue 23: on a busy host
//! a copy split over helper threads waits for its slowest, descheduled helper, and
//! the helpers take cores from the neighbours).
//!
//! The neighbours start once for the scenario and are joined at its end. Per cell
//! (size × direction), blocks of [`FrameSettings::warmup_reps`] +
//! [`FrameSettings::contended_frames`] frames run one after another: a baseline block
//! (the calling thread only sleeps, no transfer), then one block per column of
//! [`CONTENDED_COLUMNS`], then the baseline again. A frame is a 2 ms sleep and a
//! transfer; a block ends with one more sleep, so whatever the library's threads do
//! after the last transfer is billed to the block, and they are parked again when it
//! ends. The neighbours are paused between blocks, so the clocks are read while they
//! are parked (exactly, see [`crate::neighbours`]).
//!
//! Per column:
//! - p50 / p99 of the transfer, over the block's frames after the warm-up ones;
//! - `cpu_us`: (the process's CPU over the block − the neighbours' CPU over it) /
//!   the block's frames, less the same per frame of the two baseline blocks
//!   (`idle_cpu_us`: waking from a sleep on a busy host, and the driver's own
//!   threads, cost CPU with no transfer too): the calling thread's, the library's
//!   and the driver's CPU per frame spent on the transfer;
//! - `neighbour_throughput`: the neighbours' iterations per second during the
//!   column's block over the mean of the two baseline blocks'.

use std::time::{Duration, Instant};

use cuda_core::Error;

use crate::cells::cell_name;
use crate::cpu_time::{self, CpuTally};
use crate::frame_loop::FrameLoop;
use crate::frames::{FrameColumn, FrameSettings, Scenario};
use crate::neighbours::Neighbours;
use crate::records::{ContendedRecord, FrameRecord, Routes};
use crate::stats::Summary;
use crate::Direction;

/// The columns of `contended`, in run order: the two pageable baselines, the default
/// staging paths. (Low-latency mode, whose helpers spin through the gaps, is left
/// out: on a host with no idle core it can only take the neighbours' cores.)
pub const CONTENDED_COLUMNS: [FrameColumn; 4] = [
    FrameColumn::Pageable,
    FrameColumn::PageableAsync,
    FrameColumn::CopyIn,
    FrameColumn::Resident,
];

/// Blocks per cell: the baseline, each column, the baseline again.
pub const CONTENDED_BLOCKS: usize = CONTENDED_COLUMNS.len() + 2;

/// The sleep before every frame's transfer.
pub const CONTENDED_GAP: Duration = Duration::from_millis(2);

/// How long the neighbours run before the first block (clocks up, caches warm).
pub const NEIGHBOUR_WARMUP: Duration = Duration::from_millis(50);

/// The neighbour threads to start here: one per core but the calling thread's.
pub fn neighbour_count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()) - 1
}

/// What one block measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// The transfer times after the warm-up frames (none in a baseline block).
    pub samples: Vec<Duration>,
    /// The process's CPU less the neighbours', over the block; `None` where a clock
    /// is unavailable.
    pub cpu: Option<Duration>,
    /// Frames in the block, warm-up included.
    pub frames: usize,
    /// The neighbours' iterations over the block's wall time, per second; `None`
    /// without neighbours.
    pub neighbour_rate: Option<f64>,
    /// The column's calls by route over the block; `None` for a baseline block and
    /// the driver's columns.
    pub routes: Option<Routes>,
}

impl Block {
    /// CPU per frame, µs.
    pub fn cpu_us(&self) -> Option<f64> {
        cpu_time::mean_us(self.cpu, self.frames)
    }
}

/// Iterations over `wall`, per second; `None` without iterations to count (no
/// neighbours) or time.
pub fn rate(iterations: u64, wall: Duration, neighbours: usize) -> Option<f64> {
    (neighbours > 0 && !wall.is_zero()).then(|| iterations as f64 / wall.as_secs_f64())
}

/// A column block's neighbour rate over the mean of the baselines' rates.
pub fn throughput(column: Option<f64>, baselines: &[Option<f64>]) -> Option<f64> {
    let rates: Option<Vec<f64>> = baselines.iter().copied().collect();
    let rates = rates.filter(|r| !r.is_empty())?;
    let base = rates.iter().sum::<f64>() / rates.len() as f64;
    let column = column?;
    (base > 0.0).then(|| column / base)
}

/// A column's CPU per frame less the baseline blocks' (`idle`, the same sleeps with
/// no transfer), never below 0; `None` where either is unknown.
fn less_idle(cpu_us: Option<f64>, idle_us: Option<f64>) -> Option<f64> {
    Some((cpu_us? - idle_us?).max(0.0))
}

/// Runs `contended` over every size and both directions: a record per cell and
/// column. `progress` hears about each finished cell.
pub fn run(
    fl: &mut FrameLoop<'_>,
    settings: &FrameSettings,
    mut progress: impl FnMut(&str),
) -> Result<Vec<ContendedRecord>, String> {
    let scenario = Scenario::Contended.name();
    let neighbours = Neighbours::start(neighbour_count())?;
    std::thread::sleep(NEIGHBOUR_WARMUP);
    neighbours.pause();
    let sizes = fl.sizes().to_vec();
    let mut records = Vec::new();
    for (i, &bytes) in sizes.iter().enumerate() {
        for direction in Direction::ALL {
            if !settings
                .cells
                .matches(&cell_name(scenario, direction.label(), bytes))
            {
                continue;
            }
            let what = |column: Option<FrameColumn>, e: Error| {
                let name = column.map_or("baseline", FrameColumn::name);
                format!("{scenario} {name} {} {bytes} B: {e}", direction.label())
            };
            let mut run_block = |column: Option<FrameColumn>| {
                block(fl, &neighbours, column, direction, i, settings).map_err(|e| what(column, e))
            };
            let first = run_block(None)?;
            let mut columns = Vec::with_capacity(CONTENDED_COLUMNS.len());
            for column in CONTENDED_COLUMNS {
                columns.push((column, run_block(Some(column))?));
            }
            let last = run_block(None)?;
            let baselines = [first.neighbour_rate, last.neighbour_rate];
            let mut base_cpu = CpuTally::default();
            base_cpu.add(first.cpu.map(|c| c / first.frames.max(1) as u32));
            base_cpu.add(last.cpu.map(|c| c / last.frames.max(1) as u32));
            let idle = base_cpu.mean_us();
            for (column, mut b) in columns {
                let s = Summary::of(&mut b.samples).ok_or("no samples")?;
                let cpu = less_idle(b.cpu_us(), idle);
                records.push(ContendedRecord {
                    cell: FrameRecord::new(scenario, direction, bytes, column, &s, cpu)
                        .with_idle_cpu(idle)
                        .with_routes(b.routes),
                    neighbours: neighbours.count() as u64,
                    neighbour_throughput: throughput(b.neighbour_rate, &baselines),
                });
            }
            progress(&format!(
                "{scenario} {} {bytes} B ({} neighbours; {} us of CPU per frame without \
                 transfers)",
                direction.label(),
                neighbours.count(),
                base_cpu
                    .mean_us()
                    .map_or_else(|| "-".to_string(), |c| format!("{c:.1}"))
            ));
        }
    }
    neighbours.stop();
    Ok(records)
}

/// One block with the neighbours paused at both ends: `column`'s transfer after
/// every sleep, or (`None`, a baseline) the sleeps alone, then one more sleep.
fn block(
    fl: &mut FrameLoop<'_>,
    neighbours: &Neighbours,
    column: Option<FrameColumn>,
    direction: Direction,
    i: usize,
    settings: &FrameSettings,
) -> Result<Block, Error> {
    let frames = settings.warmup_reps + settings.contended_frames;
    let mut samples = Vec::with_capacity(settings.contended_frames);
    let routes_before = column.and_then(|c| fl.routes(c));
    let before = neighbours.read();
    let process_before = cpu_time::process_cpu();
    neighbours.resume();
    let started = Instant::now();
    for f in 0..frames {
        std::thread::sleep(CONTENDED_GAP);
        if let Some(column) = column {
            let t = fl.transfer(column, direction, i)?;
            if f >= settings.warmup_reps {
                samples.push(t);
            }
        }
    }
    // The last transfer's aftermath belongs to this block (see the module docs).
    std::thread::sleep(CONTENDED_GAP);
    let wall = started.elapsed();
    neighbours.pause();
    let process = cpu_time::elapsed(process_before, cpu_time::process_cpu());
    let after = neighbours.read();
    let theirs = cpu_time::elapsed(before.cpu, after.cpu);
    Ok(Block {
        samples,
        cpu: process.zip(theirs).map(|(p, n)| p.saturating_sub(n)),
        frames,
        neighbour_rate: rate(
            after.iterations - before.iterations,
            wall,
            neighbours.count(),
        ),
        routes: Routes::between(routes_before, column.and_then(|c| fl.routes(c))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_columns_and_blocks() {
        let names: Vec<&str> = CONTENDED_COLUMNS.iter().map(|c| c.name()).collect();
        assert_eq!(names, ["pageable", "pageable-async", "copy-in", "resident"]);
        assert_eq!(CONTENDED_BLOCKS, 6);
        assert_eq!(
            Scenario::Contended.gap(),
            Some(crate::frames::Gap::Sleep(CONTENDED_GAP))
        );
        assert!(neighbour_count() < std::thread::available_parallelism().unwrap().get());
    }

    #[test]
    fn throughput_is_over_the_mean_baseline() {
        let t = throughput(Some(90.0), &[Some(100.0), Some(80.0)]).unwrap();
        assert!((t - 1.0).abs() < 1e-12, "{t}");
        assert_eq!(throughput(Some(50.0), &[Some(100.0)]), Some(0.5));
        assert_eq!(throughput(None, &[Some(100.0)]), None);
        assert_eq!(throughput(Some(50.0), &[None, Some(100.0)]), None);
        assert_eq!(throughput(Some(50.0), &[]), None);
        assert_eq!(throughput(Some(50.0), &[Some(0.0)]), None);
        assert_eq!(rate(1000, Duration::from_millis(500), 3), Some(2000.0));
        assert_eq!(rate(1000, Duration::from_millis(500), 0), None);
        assert_eq!(rate(1000, Duration::ZERO, 3), None);
    }

    #[test]
    fn cpu_per_frame_counts_the_warm_up_frames() {
        let b = Block {
            samples: vec![Duration::from_micros(10); 100],
            cpu: Some(Duration::from_micros(106 * 40)),
            frames: 106,
            neighbour_rate: None,
            routes: None,
        };
        assert_eq!(b.cpu_us(), Some(40.0));
        assert_eq!(Block { cpu: None, ..b }.cpu_us(), None);
        assert_eq!(less_idle(Some(40.0), Some(12.5)), Some(27.5));
        assert_eq!(
            less_idle(Some(10.0), Some(12.5)),
            Some(0.0),
            "never below 0"
        );
        assert_eq!(less_idle(None, Some(12.5)), None);
        assert_eq!(less_idle(Some(40.0), None), None);
    }
}
