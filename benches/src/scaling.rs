//! `scaling`: aggregate host↔device throughput on one GPU against all GPUs (issue 14).
//!
//! One thread per GPU, each with its own context, stream, device buffer, host memory
//! and [`StagingBuffer`] (the copy pool is the process's one pool, shared), moves
//! transfers of one size back to back for [`FrameSettings::scaling_cell`]. A cell is
//! column × direction × size × GPUs:
//!
//! | column | what one transfer does |
//! |---|---|
//! | `resident` | `StagingBuffer::upload_with` (a fill that writes nothing) / `download_into` |
//! | `copy-in` | `StagingBuffer::upload` / `download` from / to an ordinary `Vec` |
//!
//! at 4915200 B and 64 MiB ([`SCALING_SIZES_BYTES`]), each on device 0 alone and on
//! every GPU at once (the two runs of a cell back to back, so they see the same
//! machine). A cell's figure is the bytes all threads moved over the wall time from
//! their common start to the last one's end, in GB/s (10^9 bytes per second). Before
//! each cell every thread checks its column's upload and download at the cell's
//! size against the driver's own copies, every byte compared.
//!
//! On a machine with one GPU it prints "scaling: skipped, needs 2 or more GPUs (found
//! 1)" and writes no records. The target, stated in the rendered table: two GPUs move
//! at least [`TARGET_RATIO`] times what one moves with `resident`.

use std::fmt::Write as _;
use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use cuda_core::{Context, DeviceBuffer, Error, Stream};
use cuda_staging::StagingBuffer;
use serde::Serialize;

use crate::frames::FrameSettings;
use crate::{column, compare, fill_pattern, Direction, Gpu};

/// The scenario name in records and tables.
pub const SCALING_SCENARIO: &str = "scaling";

/// Transfer sizes: a 640×640×3 `f32` tensor and 64 MiB.
pub const SCALING_SIZES_BYTES: [usize; 2] = [4_915_200, 64 << 20];

/// The fewest GPUs the scenario measures on.
pub const MIN_GPUS: usize = 2;

/// Issue 14's target: all-GPU `resident` throughput over one GPU's, with two GPUs.
pub const TARGET_RATIO: f64 = 1.8;

/// Transfers per thread before each cell's timing starts.
const WARMUP_TRANSFERS: usize = 3;

/// A column of `scaling`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalingColumn {
    /// `StagingBuffer::upload_with` / `download_into`: the data lives in pinned memory.
    Resident,
    /// `StagingBuffer::upload` / `download` from / to an ordinary `Vec`.
    CopyIn,
}

impl ScalingColumn {
    /// Every column, in run order.
    pub const ALL: [ScalingColumn; 2] = [ScalingColumn::Resident, ScalingColumn::CopyIn];

    /// The column name in records and tables.
    pub fn name(self) -> &'static str {
        match self {
            ScalingColumn::Resident => column::RESIDENT,
            ScalingColumn::CopyIn => column::COPY_IN,
        }
    }
}

/// One cell of `scaling`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScalingRecord {
    /// Always [`SCALING_SCENARIO`].
    pub scenario: &'static str,
    /// `H2D` or `D2H`.
    pub direction: &'static str,
    /// Bytes per transfer.
    pub bytes: u64,
    /// The column name ([`ScalingColumn::name`]).
    pub column: &'static str,
    /// GPUs moving at once, one thread each.
    pub gpus: u64,
    /// Bytes moved by all threads over the cell's wall time, 10^9 bytes per second.
    pub gb_per_s: f64,
    /// Transfers timed, all threads.
    pub samples: u64,
}

/// The one-line note for a machine with `found` GPUs, or `None` when the scenario
/// runs there.
pub fn skip_line(found: usize) -> Option<String> {
    (found < MIN_GPUS)
        .then(|| format!("scaling: skipped, needs {MIN_GPUS} or more GPUs (found {found})"))
}

/// The GPU counts each cell is measured with: one, then all of them.
pub fn gpu_counts(found: usize) -> [usize; 2] {
    [1, found]
}

/// `bytes` over `wall`, in GB/s (10^9 bytes per second); 0 for no time.
pub fn gb_per_s(bytes: u64, wall: Duration) -> f64 {
    let s = wall.as_secs_f64();
    if s > 0.0 {
        bytes as f64 / s / 1e9
    } else {
        0.0
    }
}

/// The `scaling` table for the log: a row per column, direction and size, with one
/// GPU's GB/s, all GPUs' GB/s and their ratio; empty without records.
pub fn scaling_table(records: &[ScalingRecord]) -> String {
    let mut out = String::new();
    let Some(most) = records.iter().map(|r| r.gpus).max() else {
        return out;
    };
    let _ = writeln!(
        out,
        "scaling: aggregate GB/s, one thread per GPU, 1 GPU against {most} \
         (target: {TARGET_RATIO:.1}x for resident with 2 GPUs)"
    );
    let _ = writeln!(
        out,
        "{:>9} {:>9} {:>10} {:>9} {:>10} {:>7}",
        "column",
        "direction",
        "bytes",
        "1 GPU",
        format!("{most} GPUs"),
        "ratio"
    );
    let mut rows: Vec<(&str, &str, u64)> = Vec::new();
    for r in records {
        if !rows.contains(&(r.column, r.direction, r.bytes)) {
            rows.push((r.column, r.direction, r.bytes));
        }
    }
    for (col, dir, bytes) in rows {
        let at = |gpus: u64| {
            records
                .iter()
                .find(|r| (r.column, r.direction, r.bytes, r.gpus) == (col, dir, bytes, gpus))
                .map(|r| r.gb_per_s)
        };
        let show = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.1}"));
        let ratio = match (at(1), at(most)) {
            (Some(one), Some(all)) if one > 0.0 => format!("{:.2}x", all / one),
            _ => "-".to_string(),
        };
        let _ = writeln!(
            out,
            "{col:>9} {dir:>9} {bytes:>10} {:>9} {:>10} {ratio:>7}",
            show(at(1)),
            show(at(most))
        );
    }
    out
}

/// One GPU's context, stream and memory, kept for the whole scenario.
struct Lane {
    ctx: Context,
    stream: Stream,
    device: DeviceBuffer<u8>,
    /// What uploads send (a pattern of this GPU).
    src: Vec<u8>,
    /// A second pattern, which the data check downloads.
    alt: Vec<u8>,
    /// Where downloads land.
    dst: Vec<u8>,
    staging: StagingBuffer,
}

impl Lane {
    /// Device `ordinal`'s lane, with room for the largest size. Makes `ordinal`'s
    /// context current on the calling thread.
    fn new(ordinal: usize) -> Result<Lane, Error> {
        let ctx = Context::new(ordinal)?;
        let stream = Stream::new(&ctx)?;
        let max = SCALING_SIZES_BYTES.iter().copied().max().unwrap_or(0);
        let device = DeviceBuffer::<u8>::alloc_in(&ctx, max)?;
        let (mut src, mut alt) = (vec![0u8; max], vec![0u8; max]);
        let seed = (ordinal as u8).wrapping_mul(2);
        fill_pattern(&mut src, seed.wrapping_add(1));
        fill_pattern(&mut alt, seed.wrapping_add(2));
        Ok(Lane {
            ctx,
            stream,
            device,
            src,
            alt,
            dst: vec![1u8; max],
            staging: StagingBuffer::new(),
        })
    }

    /// One transfer of `bytes`, as `column` moves it (resident: whatever pinned
    /// memory holds goes up; what lands is read in place, not copied).
    fn transfer(
        &mut self,
        column: ScalingColumn,
        direction: Direction,
        bytes: usize,
    ) -> Result<(), Error> {
        let (dev, s) = (&mut self.device, &self.stream);
        match (column, direction) {
            (ScalingColumn::Resident, Direction::HostToDevice) => {
                self.staging.upload_with(dev, bytes, s, |d: &mut [u8]| {
                    black_box(d);
                })
            }
            (ScalingColumn::Resident, Direction::DeviceToHost) => {
                self.staging.download_into(dev, bytes, s).map(|landed| {
                    black_box(landed);
                })
            }
            (ScalingColumn::CopyIn, Direction::HostToDevice) => {
                self.staging.upload(dev, black_box(&self.src[..bytes]), s)
            }
            (ScalingColumn::CopyIn, Direction::DeviceToHost) => {
                self.staging
                    .download(black_box(&mut self.dst[..bytes]), dev, s)
            }
        }
    }

    /// Checks `column`'s two transfers of `bytes`, every byte, against the driver's
    /// own copies: an upload into zeroed device memory, read back through the
    /// driver; then a download of a second pattern the driver wrote (so that bytes
    /// left in pinned memory by the upload cannot pass for it).
    fn verify(&mut self, column: ScalingColumn, bytes: usize) -> Result<(), String> {
        let name = column.name();
        let what = |e: Error| format!("{name} {bytes} B: {e}");
        let (dev, s) = (&mut self.device, &self.stream);
        let (src, alt, dst) = (
            &self.src[..bytes],
            &self.alt[..bytes],
            &mut self.dst[..bytes],
        );
        s.memset_zeros(dev).map_err(&what)?;
        match column {
            ScalingColumn::Resident => self
                .staging
                .upload_with(dev, bytes, s, |d: &mut [u8]| d.copy_from_slice(src)),
            ScalingColumn::CopyIn => self.staging.upload(dev, src, s),
        }
        .map_err(&what)?;
        s.memcpy_dtoh_sync(&dev.slice(..bytes).map_err(&what)?, dst)
            .map_err(&what)?;
        compare(dst, src).map_err(|e| format!("{name} {bytes} B up: {e}"))?;

        s.memcpy_htod_sync(alt, &mut dev.slice_mut(..bytes).map_err(&what)?)
            .map_err(&what)?;
        dst.fill(0);
        let landed = match column {
            ScalingColumn::Resident => self.staging.download_into(dev, bytes, s),
            ScalingColumn::CopyIn => self.staging.download(dst, dev, s).map(|()| &*dst),
        }
        .map_err(&what)?;
        compare(landed, alt).map_err(|e| format!("{name} {bytes} B down: {e}"))
    }
}

/// One thread's timed transfers.
struct LaneRun {
    start: Instant,
    end: Instant,
    transfers: u64,
}

/// One cell on one lane: bind its context, check the data, warm up, then (started
/// together with the other lanes) move transfers back to back for `time`.
fn lane_cell(
    lane: &mut Lane,
    cell: Cell,
    time: Duration,
    together: &Barrier,
) -> Result<LaneRun, String> {
    let ready = (|| {
        lane.ctx
            .bind_to_thread()
            .map_err(|e| format!("binding the context: {e}"))?;
        lane.verify(cell.column, cell.bytes)?;
        for _ in 0..WARMUP_TRANSFERS {
            lane.transfer(cell.column, cell.direction, cell.bytes)
                .map_err(|e| format!("warm-up: {e}"))?;
        }
        Ok::<_, String>(())
    })();
    // Every lane reaches the barrier, even after a failure, so none waits forever.
    together.wait();
    ready?;
    let start = Instant::now();
    let mut transfers = 0u64;
    loop {
        lane.transfer(cell.column, cell.direction, cell.bytes)
            .map_err(|e| format!("transfer {transfers}: {e}"))?;
        transfers += 1;
        if start.elapsed() >= time {
            break;
        }
    }
    Ok(LaneRun {
        start,
        end: Instant::now(),
        transfers,
    })
}

/// What one cell measures, apart from the number of GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cell {
    column: ScalingColumn,
    direction: Direction,
    bytes: usize,
}

/// Every cell, in run order: column, then direction, then size.
fn cells() -> Vec<Cell> {
    let mut out = Vec::new();
    for column in ScalingColumn::ALL {
        for direction in Direction::ALL {
            for bytes in SCALING_SIZES_BYTES {
                out.push(Cell {
                    column,
                    direction,
                    bytes,
                });
            }
        }
    }
    out
}

/// The cells of a run on two GPUs (each measured on one GPU and on all).
pub fn measured_cells() -> usize {
    cells().len() * gpu_counts(MIN_GPUS).len()
}

/// Runs `cell` on the first `lanes.len()` GPUs at once, one thread each.
fn run_cell(lanes: &mut [Lane], cell: Cell, time: Duration) -> Result<ScalingRecord, String> {
    let together = Barrier::new(lanes.len());
    let runs: Vec<Result<LaneRun, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = lanes
            .iter_mut()
            .map(|lane| {
                let together = &together;
                s.spawn(move || lane_cell(lane, cell, time, together))
            })
            .collect();
        crate::join_all(handles)
    });
    let (mut start, mut end, mut transfers) = (None::<Instant>, None::<Instant>, 0u64);
    for (ordinal, run) in runs.into_iter().enumerate() {
        let run = run.map_err(|e| {
            format!(
                "scaling {} {} {} B, device {ordinal}: {e}",
                cell.column.name(),
                cell.direction.label(),
                cell.bytes
            )
        })?;
        start = Some(start.map_or(run.start, |s| s.min(run.start)));
        end = Some(end.map_or(run.end, |e| e.max(run.end)));
        transfers += run.transfers;
    }
    let wall = match (start, end) {
        (Some(s), Some(e)) => e.duration_since(s),
        _ => Duration::ZERO,
    };
    Ok(ScalingRecord {
        scenario: SCALING_SCENARIO,
        direction: cell.direction.label(),
        bytes: cell.bytes as u64,
        column: cell.column.name(),
        gpus: lanes.len() as u64,
        gb_per_s: gb_per_s(transfers * cell.bytes as u64, wall),
        samples: transfers,
    })
}

/// Runs the scenario on every GPU, or prints why not ([`skip_line`]) and returns no
/// records. `progress` hears about each finished column. Device 0's context (`gpu`)
/// is current on the calling thread again afterwards.
pub fn run(
    gpu: &Gpu,
    settings: &FrameSettings,
    mut progress: impl FnMut(&str),
) -> Result<Vec<ScalingRecord>, String> {
    let found = Context::device_count().map_err(|e| format!("scaling: counting GPUs: {e}"))?;
    if let Some(line) = skip_line(found) {
        println!("{line}");
        return Ok(Vec::new());
    }
    let lanes: Result<Vec<Lane>, String> = (0..found)
        .map(|ordinal| Lane::new(ordinal).map_err(|e| format!("scaling: device {ordinal}: {e}")))
        .collect();
    // Lane::new made each device current in turn; the other scenarios use device 0.
    gpu.ctx
        .bind_to_thread()
        .map_err(|e| format!("scaling: re-binding device 0: {e}"))?;
    let mut lanes = lanes?;
    let mut records = Vec::new();
    for column in ScalingColumn::ALL {
        for cell in cells().into_iter().filter(|c| c.column == column) {
            for gpus in gpu_counts(found) {
                records.push(run_cell(&mut lanes[..gpus], cell, settings.scaling_cell)?);
            }
        }
        progress(&format!("scaling {} on 1 and {found} GPUs", column.name()));
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(column: &'static str, direction: &'static str, gpus: u64, gb: f64) -> ScalingRecord {
        ScalingRecord {
            scenario: SCALING_SCENARIO,
            direction,
            bytes: 4_915_200,
            column,
            gpus,
            gb_per_s: gb,
            samples: 100,
        }
    }

    #[test]
    fn one_gpu_is_skipped_with_one_line_and_two_or_more_run() {
        assert_eq!(
            skip_line(1).as_deref(),
            Some("scaling: skipped, needs 2 or more GPUs (found 1)")
        );
        assert_eq!(
            skip_line(0).as_deref(),
            Some("scaling: skipped, needs 2 or more GPUs (found 0)")
        );
        assert_eq!(skip_line(2), None);
        assert_eq!(skip_line(8), None);
        assert_eq!(gpu_counts(2), [1, 2]);
        assert_eq!(gpu_counts(4), [1, 4]);
    }

    #[test]
    fn throughput_is_bytes_over_wall_time_in_gb_per_s() {
        // 100 transfers of 64 MiB in 122 ms: 55 GB/s, the H200's pinned DMA speed.
        let gb = gb_per_s(100 * (64 << 20), Duration::from_millis(122));
        assert!((gb - 55.0).abs() < 0.1, "{gb}");
        assert_eq!(gb_per_s(1, Duration::ZERO), 0.0);
        assert_eq!(gb_per_s(0, Duration::from_secs(1)), 0.0);
    }

    #[test]
    fn every_column_direction_and_size_is_a_cell_measured_on_one_and_all_gpus() {
        let c = cells();
        assert_eq!(c.len(), 2 * 2 * 2);
        for column in ScalingColumn::ALL {
            for direction in Direction::ALL {
                for bytes in SCALING_SIZES_BYTES {
                    let cell = Cell {
                        column,
                        direction,
                        bytes,
                    };
                    assert_eq!(c.iter().filter(|&&x| x == cell).count(), 1, "{cell:?}");
                }
            }
        }
        assert_eq!(measured_cells(), 16);
        let names: Vec<&str> = ScalingColumn::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(names, ["resident", "copy-in"]);
        assert_eq!(SCALING_SIZES_BYTES, [4_915_200, 67_108_864]);
    }

    #[test]
    fn the_log_table_has_a_row_per_cell_with_the_ratio_of_all_gpus_to_one() {
        assert_eq!(scaling_table(&[]), "");
        let t = scaling_table(&[
            record("resident", "H2D", 1, 50.0),
            record("resident", "H2D", 2, 95.0),
            record("copy-in", "D2H", 2, 30.0),
        ]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert!(lines[0].contains("1 GPU against 2"), "{t}");
        assert!(lines[0].contains("target: 1.8x for resident"), "{t}");
        assert!(lines[1].contains("2 GPUs"), "{t}");
        assert!(
            lines[2].ends_with("resident       H2D    4915200      50.0       95.0   1.90x"),
            "{t}"
        );
        // A cell measured on all GPUs only has no ratio.
        assert!(lines[3].ends_with("30.0       -"), "{t}");
    }
}
