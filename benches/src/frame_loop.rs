//! Runs the frame-loop scenarios (`sleep-2ms`, `sleep-16ms`, `busy-2ms`) on the GPU,
//! and owns the columns' buffers that `tight-loop` ([`crate::tight_loop`]) and
//! `contended` ([`crate::contended`]) run on too.
//!
//! Each column owns its buffers, as a user's loop keeps one staging buffer per
//! stream: a device buffer per size, a host `Vec` of the largest size (the pageable
//! and copy-in columns' source and destination), and, for the staging columns, its
//! own [`StagingBuffer`], pinned and grown by the data check before anything is
//! timed.
//!
//! A cell is one (scenario, size, direction). In it, after [`FrameSettings::warmup_reps`]
//! dropped repetitions, each repetition runs *gap, transfer* for every column of
//! [`FrameColumn::ALL`] in turn, so drift hits them alike, starting one
//! column later at each repetition, so that every column follows every other one
//! equally often (in a fixed order the same driver call measured up to 1.7 times
//! faster in one slot than in another on the H200 host, as the transfer before it
//! left the caches and the link warm or cold for it); the cell ends with
//! [`CELL_QUIET`]. Only the transfer call is timed, with an `Instant` around it.
//!
//! CPU per frame (`cpu_us`): the process's CPU time, all threads, over a window per
//! measured transfer, less the calling thread's CPU over the gap inside it, less what
//! the other threads spend over a gap with no transfer at all (the driver's own
//! threads tick in every CUDA process: measured per cell over [`IDLE_GAP_FRAMES`]
//! gaps before its loops, and noted in the records as `idle_cpu_us`). A
//! transfer's window runs from just before it starts to just before the next
//! measured transfer (of whichever column) starts, so it holds the transfer, whatever
//! the library's threads do after it, and the next gap; the last transfer of a loop
//! gets one more gap to close its window. `cpu_us` is the mean over the measured
//! repetitions: CPU per frame is the total over the frames. The clocks are read
//! outside the timed call, so latency does not pay for them.

use std::hint::black_box;
use std::time::{Duration, Instant};

use cuda_core::{DeviceBuffer, Error};
use cuda_staging::StagingBuffer;

use crate::cells::cell_name;
use crate::cpu_time::{self, CpuTally};
use crate::frames::{FrameColumn, FrameSettings, Gap, Scenario, CELL_QUIET};
use crate::gap::GapRunner;
use crate::records::{FrameRecord, Routes};
use crate::stats::Summary;
use crate::{compare, dtoh_pageable_async, fill_pattern, htod_pageable_async, Direction, Gpu};

/// Gaps with no transfer per cell, over which the process's CPU without transfers
/// is measured (see the module docs).
pub const IDLE_GAP_FRAMES: usize = 20;

/// One column's own memory.
struct ColumnBuffers {
    /// A device buffer per size, in the order of the sizes.
    device: Vec<DeviceBuffer<u8>>,
    /// Pageable host memory of the largest size.
    host: Vec<u8>,
    /// The staging columns' buffer.
    staging: Option<StagingBuffer>,
}

/// The frame-loop scenarios' columns, buffers and gaps.
pub struct FrameLoop<'g> {
    gpu: &'g Gpu,
    sizes: Vec<usize>,
    /// Indexed by [`FrameColumn::index`].
    columns: Vec<ColumnBuffers>,
    gaps: GapRunner,
}

impl<'g> FrameLoop<'g> {
    /// Allocates every column's buffers for `sizes` (nothing pinned yet).
    pub fn new(gpu: &'g Gpu, sizes: &[usize]) -> Result<FrameLoop<'g>, Error> {
        let max = sizes.iter().copied().max().unwrap_or(0);
        let mut columns = Vec::new();
        for column in FrameColumn::ALL {
            let device = sizes
                .iter()
                .map(|&n| DeviceBuffer::<u8>::alloc_in(&gpu.ctx, n))
                .collect::<Result<Vec<_>, _>>()?;
            let staging = match column {
                FrameColumn::Pageable | FrameColumn::PageableAsync => None,
                FrameColumn::CopyIn | FrameColumn::Resident => Some(StagingBuffer::new()),
            };
            columns.push(ColumnBuffers {
                device,
                host: vec![0u8; max],
                staging,
            });
        }
        Ok(FrameLoop {
            gpu,
            sizes: sizes.to_vec(),
            columns,
            gaps: GapRunner::new(),
        })
    }

    /// The sizes, in bytes, in the order of the device buffers.
    pub fn sizes(&self) -> &[usize] {
        &self.sizes
    }

    /// One transfer of `column` in `direction` at size index `i`, timed alone.
    pub(crate) fn transfer(
        &mut self,
        column: FrameColumn,
        direction: Direction,
        i: usize,
    ) -> Result<Duration, Error> {
        let n = self.sizes[i];
        let gpu = self.gpu;
        let stream = &gpu.stream;
        let ColumnBuffers {
            device,
            host,
            staging,
        } = &mut self.columns[column.index()];
        let dev = &mut device[i];
        let host = &mut host[..n];
        let started = Instant::now();
        match (column, direction) {
            (FrameColumn::Pageable, Direction::HostToDevice) => dev.copy_from_host(black_box(host)),
            (FrameColumn::Pageable, Direction::DeviceToHost) => dev.copy_to_host(black_box(host)),
            (FrameColumn::PageableAsync, Direction::HostToDevice) => {
                htod_pageable_async(dev, black_box(host), stream)
            }
            (FrameColumn::PageableAsync, Direction::DeviceToHost) => {
                dtoh_pageable_async(black_box(host), dev, stream)
            }
            (FrameColumn::CopyIn, dir) => {
                let staging = staging.as_mut().expect("staging columns own a buffer");
                match dir {
                    Direction::HostToDevice => staging.upload(dev, black_box(host), stream),
                    Direction::DeviceToHost => staging.download(black_box(host), dev, stream),
                }
            }
            (FrameColumn::Resident, dir) => {
                let staging = staging.as_mut().expect("staging columns own a buffer");
                match dir {
                    // The producer's writes into pinned memory are its own work.
                    Direction::HostToDevice => {
                        staging.upload_with(dev, n, stream, |dst: &mut [u8]| {
                            black_box(dst);
                        })
                    }
                    Direction::DeviceToHost => {
                        staging.download_into(dev, n, stream).map(|landed| {
                            black_box(landed);
                        })
                    }
                }
            }
        }?;
        Ok(started.elapsed())
    }

    /// Checks every column at every size, both ways, against a pattern that differs
    /// per element, column, size and direction (never zero); pins and grows the
    /// staging buffers on the way (largest size first, so each pins once) and
    /// starts the copy pool. Afterwards waits [`CELL_QUIET`].
    pub fn verify(&mut self) -> Result<(), String> {
        let max = self.sizes.iter().copied().max().unwrap_or(0);
        let mut expected = vec![0u8; max];
        let mut seen = vec![0u8; max];
        for i in (0..self.sizes.len()).rev() {
            let n = self.sizes[i];
            for column in FrameColumn::ALL {
                let seed = (column.index() * 16 + i * 2) as u8;
                for (direction, seed) in [
                    (Direction::HostToDevice, seed),
                    (Direction::DeviceToHost, seed + 1),
                ] {
                    fill_pattern(&mut expected[..n], seed);
                    self.check_once(column, direction, i, &expected[..n], &mut seen[..n])
                        .map_err(|e| {
                            format!("{} {} {n} B: {e}", column.name(), direction.label())
                        })?;
                }
            }
        }
        std::thread::sleep(CELL_QUIET);
        Ok(())
    }

    /// Moves `expected` through `column` once and checks what landed, reading or
    /// writing the device side through the plain synchronous path.
    fn check_once(
        &mut self,
        column: FrameColumn,
        direction: Direction,
        i: usize,
        expected: &[u8],
        seen: &mut [u8],
    ) -> Result<(), String> {
        let n = expected.len();
        let gpu = self.gpu;
        let stream = &gpu.stream;
        match direction {
            Direction::HostToDevice => {
                let c = &mut self.columns[column.index()];
                if column == FrameColumn::Resident {
                    let s = c.staging.as_mut().expect("staging columns own a buffer");
                    s.upload_with(&mut c.device[i], n, stream, |dst: &mut [u8]| {
                        dst.copy_from_slice(expected)
                    })
                    .map_err(|e| e.to_string())?;
                } else {
                    c.host[..n].copy_from_slice(expected);
                    self.transfer(column, direction, i)
                        .map_err(|e| e.to_string())?;
                }
                self.columns[column.index()].device[i]
                    .copy_to_host(seen)
                    .map_err(|e| format!("reading back: {e}"))?;
            }
            Direction::DeviceToHost => {
                let c = &mut self.columns[column.index()];
                c.device[i]
                    .copy_from_host(expected)
                    .map_err(|e| format!("writing the device: {e}"))?;
                if column == FrameColumn::Resident {
                    let s = c.staging.as_mut().expect("staging columns own a buffer");
                    let landed = s
                        .download_into(&c.device[i], n, stream)
                        .map_err(|e| e.to_string())?;
                    seen.copy_from_slice(landed);
                } else {
                    c.host[..n].fill(0);
                    self.transfer(column, direction, i)
                        .map_err(|e| e.to_string())?;
                    seen.copy_from_slice(&self.columns[column.index()].host[..n]);
                }
            }
        }
        compare(seen, expected)
    }

    /// `column`'s calls by route so far; `None` for the driver's columns.
    pub(crate) fn routes(&self, column: FrameColumn) -> Option<Routes> {
        let staging = self.columns[column.index()].staging.as_ref()?;
        Some(Routes::of(&staging.stats()))
    }

    /// Every column's calls by route so far ([`FrameLoop::routes`]).
    fn all_routes(&self) -> [Option<Routes>; FrameColumn::ALL.len()] {
        FrameColumn::ALL.map(|column| self.routes(column))
    }

    /// Pinned allocations of every staging column so far.
    pub(crate) fn allocations(&self) -> u64 {
        self.columns
            .iter()
            .filter_map(|c| c.staging.as_ref())
            .map(|s| s.stats().allocations)
            .sum()
    }

    /// One frame-loop scenario with a gap over every size and both directions: a
    /// record per cell and column ([`crate::frame_scenarios::run`] runs every
    /// scenario).
    pub(crate) fn run_gaps(
        &mut self,
        scenario: Scenario,
        settings: &FrameSettings,
        mut progress: impl FnMut(&str),
    ) -> Result<Vec<FrameRecord>, String> {
        let gap = scenario.gap().ok_or("not a frame-loop scenario")?;
        let reps = settings.reps(gap);
        let mut records = Vec::new();
        for i in 0..self.sizes.len() {
            let bytes = self.sizes[i];
            for direction in Direction::ALL {
                if !settings
                    .cells
                    .matches(&cell_name(scenario.name(), direction.label(), bytes))
                {
                    continue;
                }
                let mut cell = Cell::new(settings.warmup_reps, reps);
                cell.idle = self.idle_gap_cpu(gap, IDLE_GAP_FRAMES);
                let what = |column: FrameColumn| {
                    format!(
                        "{} {} {} {bytes} B",
                        scenario.name(),
                        column.name(),
                        direction.label()
                    )
                };
                let before = self.all_routes();
                self.gap_loop(gap, &FrameColumn::ALL, direction, i, &mut cell)
                    .map_err(|(column, e)| format!("{}: {e}", what(column)))?;
                let after = self.all_routes();
                std::thread::sleep(CELL_QUIET);
                for column in FrameColumn::ALL {
                    let s = Summary::of(&mut cell.samples[column.index()]).ok_or("no samples")?;
                    records.push(
                        FrameRecord::new(
                            scenario.name(),
                            direction,
                            bytes,
                            column,
                            &s,
                            cell.cpu[column.index()].mean_us(),
                        )
                        .with_idle_cpu(cell.idle.map(|d| d.as_secs_f64() * 1e6))
                        .with_routes(Routes::between(
                            before[column.index()],
                            after[column.index()],
                        )),
                    );
                }
                progress(&format!(
                    "{} {} {bytes} B",
                    scenario.name(),
                    direction.label()
                ));
            }
        }
        Ok(records)
    }

    /// The cell's warm-up and measured repetitions of *gap, transfer* for each of
    /// `columns` in turn; each measured transfer's time and CPU window go into `cell`
    /// (see the module docs). An error names the column that failed.
    fn gap_loop(
        &mut self,
        gap: Gap,
        columns: &[FrameColumn],
        direction: Direction,
        i: usize,
        cell: &mut Cell,
    ) -> Result<(), (FrameColumn, Error)> {
        // The measured transfer whose window is open, and the process's CPU at its start.
        let mut open: Option<(FrameColumn, Option<Duration>)> = None;
        for rep in 0..cell.warmup + cell.reps {
            for k in 0..columns.len() {
                let column = columns[(rep + k) % columns.len()];
                let gap_cpu = self.gaps.wait_counting_cpu(gap);
                let now = cpu_time::process_cpu();
                if let Some((c, start)) = open.take() {
                    cell.cpu[c.index()].add(window_cpu(start, now, gap_cpu, cell.idle));
                }
                let t = self
                    .transfer(column, direction, i)
                    .map_err(|e| (column, e))?;
                if rep >= cell.warmup {
                    cell.samples[column.index()].push(t);
                    open = Some((column, now));
                }
            }
        }
        // One more gap closes the last window.
        let gap_cpu = self.gaps.wait_counting_cpu(gap);
        let now = cpu_time::process_cpu();
        if let Some((c, start)) = open {
            cell.cpu[c.index()].add(window_cpu(start, now, gap_cpu, cell.idle));
        }
        Ok(())
    }

    /// The process's CPU per gap over `frames` gaps with no transfer, less the calling
    /// thread's own over each gap: what the other threads (the driver's, parked pool
    /// helpers' none) spend in a frame's gap anyway. `None` where a clock is
    /// unreadable.
    fn idle_gap_cpu(&mut self, gap: Gap, frames: usize) -> Option<Duration> {
        let mut total = Duration::ZERO;
        for _ in 0..frames {
            let start = cpu_time::process_cpu();
            let gap_cpu = self.gaps.wait_counting_cpu(gap);
            let end = cpu_time::process_cpu();
            total += window_cpu(start, end, gap_cpu, Some(Duration::ZERO))?;
        }
        Some(total / frames.max(1) as u32)
    }
}

/// One cell's plan and measurements, indexed by [`FrameColumn::index`].
struct Cell {
    /// Repetitions dropped at the start of each loop.
    warmup: usize,
    /// Measured repetitions per loop.
    reps: usize,
    samples: Vec<Vec<Duration>>,
    cpu: Vec<CpuTally>,
    /// The other threads' CPU over a gap with no transfer
    /// ([`FrameLoop::idle_gap_cpu`]).
    idle: Option<Duration>,
}

impl Cell {
    fn new(warmup: usize, reps: usize) -> Cell {
        Cell {
            warmup,
            reps,
            samples: (0..FrameColumn::ALL.len())
                .map(|_| Vec::with_capacity(reps))
                .collect(),
            cpu: vec![CpuTally::default(); FrameColumn::ALL.len()],
            idle: None,
        }
    }
}

/// A transfer's CPU: the process's CPU from `start` to `end`, less the calling
/// thread's CPU over the gap between them, less `idle` (the other threads' CPU over
/// a gap with no transfer); `None` where a clock was unreadable.
pub fn window_cpu(
    start: Option<Duration>,
    end: Option<Duration>,
    gap_cpu: Option<Duration>,
    idle: Option<Duration>,
) -> Option<Duration> {
    Some(
        cpu_time::elapsed(start, end)?
            .saturating_sub(gap_cpu?)
            .saturating_sub(idle?),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_loses_its_gap_s_own_cpu() {
        let us = Duration::from_micros;
        let z = Some(us(0));
        assert_eq!(
            window_cpu(Some(us(100)), Some(us(2150)), Some(us(2000)), z),
            Some(us(50))
        );
        // A sleeping gap costs next to nothing: the window is the transfer's and its
        // helpers'.
        assert_eq!(
            window_cpu(Some(us(100)), Some(us(180)), Some(us(3)), z),
            Some(us(77))
        );
        // What the process spends over a gap without a transfer goes too.
        assert_eq!(
            window_cpu(Some(us(100)), Some(us(180)), Some(us(3)), Some(us(7))),
            Some(us(70))
        );
        assert_eq!(
            window_cpu(Some(us(100)), Some(us(150)), Some(us(60)), z),
            Some(us(0))
        );
        assert_eq!(window_cpu(None, Some(us(150)), Some(us(60)), z), None);
        assert_eq!(window_cpu(Some(us(100)), Some(us(150)), None, z), None);
        assert_eq!(
            window_cpu(Some(us(100)), Some(us(150)), Some(us(6)), None),
            None
        );
    }
}
