//! The `pitched` bench (issue 24, part 2): a 1920x1080 RGB `u8` frame moved between
//! host rows and a `cuMemAllocPitch` surface, through staging and through the
//! driver's own 2-D copies, in both directions.
//!
//! Two scenarios, one host pitch each:
//!
//! | scenario | host rows |
//! |---|---|
//! | `pitched-2d` | 64-byte aligned: `round_up(1920 * 3, 64)` = 5760 bytes, which is the row itself, so the host rows are contiguous |
//! | `pitched-2d-padded` | `round_up(1920 * 3 + 1, 64)` = 5824 bytes: 64 bytes of padding after each row |
//!
//! | column (H2D / D2H) | one call |
//! |---|---|
//! | `driver-2d` | `PitchedBuffer::copy_from_host` / `copy_to_host`: the driver's synchronous `cuMemcpy2D` from / into the pageable `Vec` |
//! | `driver-2d-async` | `Stream::memcpy_2d_htod_sync` / `memcpy_2d_dtoh_sync`: `cuMemcpy2DAsync` from / into the same `Vec` on our non-blocking stream, then the driver's spinning wait |
//! | `upload-2d` / `download-2d` | `StagingBuffer::upload_2d` / `download_2d` with the same `Vec` |
//! | `upload-2d-with` / `download-2d-into` | `StagingBuffer::upload_2d_with` / `download_2d_into`: the rows are written or read packed in pinned memory (the writes are the producer's work, not timed) |
//! | `raw-pinned-2d` | `Stream::memcpy_2d_htod` / `memcpy_2d_dtoh` from / into a `PinnedBuffer` at the host pitch, then the spinning wait: the floor |
//!
//! The columns run interleaved, one call each per repetition, so drift hits them
//! alike; each call is timed alone, with the process's CPU time over it (all
//! threads). Every column is checked once before timing and once after, against the
//! frame's pattern, with the destination cleared first.

use std::hint::black_box;
use std::time::{Duration, Instant};

use cuda_core::{Error, Layout2d, PinnedBuffer, PitchedBuffer, Stream, WaitPolicy};
use cuda_staging::StagingBuffer;
use serde::Serialize;

use crate::cpu_time::{elapsed, process_cpu, CpuTally};
use crate::stats::Summary;
use crate::{compare, fill_pattern, quick_from_env, Direction, Gpu};

/// The file name of the records.
pub const PITCHED_FILE: &str = "pitched.json";

/// The frame: pixels per row.
pub const FRAME_WIDTH_PX: usize = 1920;
/// The frame: rows.
pub const FRAME_HEIGHT: usize = 1080;
/// Bytes per pixel (RGB).
pub const CHANNELS: usize = 3;
/// Bytes per row of the frame: 5760.
pub const ROW_BYTES: usize = FRAME_WIDTH_PX * CHANNELS;
/// Bytes the frame holds, without padding: 6220800.
pub const FRAME_BYTES: usize = ROW_BYTES * FRAME_HEIGHT;

/// One host layout of the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scenario {
    /// The scenario's name in the records.
    pub name: &'static str,
    /// Bytes from one host row's start to the next's.
    pub host_pitch: usize,
}

/// Both scenarios, in run order.
pub const SCENARIOS: [Scenario; 2] = [
    Scenario {
        name: "pitched-2d",
        host_pitch: ROW_BYTES.next_multiple_of(64),
    },
    Scenario {
        name: "pitched-2d-padded",
        host_pitch: (ROW_BYTES + 1).next_multiple_of(64),
    },
];

/// A column of the scenarios.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    /// The driver's synchronous `cuMemcpy2D`.
    Driver,
    /// The driver's `cuMemcpy2DAsync` on our stream, then a spinning wait.
    DriverAsync,
    /// `upload_2d` / `download_2d`.
    Staged,
    /// `upload_2d_with` / `download_2d_into`.
    Resident,
    /// A queued 2-D copy from / into a `PinnedBuffer`, then a spinning wait.
    RawPinned,
}

impl Column {
    /// Every column, in run and table order.
    pub const ALL: [Column; 5] = [
        Column::Driver,
        Column::DriverAsync,
        Column::Staged,
        Column::Resident,
        Column::RawPinned,
    ];

    /// The column's name in records and tables, per direction.
    pub fn name(self, direction: Direction) -> &'static str {
        let up = direction == Direction::HostToDevice;
        match self {
            Column::Driver => "driver-2d",
            Column::DriverAsync => "driver-2d-async",
            Column::Staged if up => "upload-2d",
            Column::Staged => "download-2d",
            Column::Resident if up => "upload-2d-with",
            Column::Resident => "download-2d-into",
            Column::RawPinned => "raw-pinned-2d",
        }
    }
}

/// How long the bench measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PitchedSettings {
    /// `BENCH_QUICK` was set (or this is a smoke pass).
    pub quick: bool,
    /// Untimed repetitions (every column each).
    pub warmup: usize,
    /// Timed repetitions (every column each).
    pub reps: usize,
}

impl PitchedSettings {
    /// The full run: 400 timed repetitions of each direction and scenario (about
    /// 5 s on the H200).
    pub fn full() -> PitchedSettings {
        PitchedSettings {
            quick: false,
            warmup: 20,
            reps: 400,
        }
    }

    /// `BENCH_QUICK`: 60 repetitions.
    pub fn quick() -> PitchedSettings {
        PitchedSettings {
            quick: true,
            warmup: 5,
            reps: 60,
        }
    }

    /// Test mode (`cargo test --benches`): a smoke pass of 3 repetitions.
    pub fn smoke() -> PitchedSettings {
        PitchedSettings {
            quick: true,
            warmup: 1,
            reps: 3,
        }
    }

    /// [`PitchedSettings::quick`] under `BENCH_QUICK`, else [`PitchedSettings::full`].
    pub fn from_env() -> PitchedSettings {
        if quick_from_env() {
            PitchedSettings::quick()
        } else {
            PitchedSettings::full()
        }
    }
}

/// One cell: a column of one scenario and direction.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PitchedRecord {
    /// `pitched-2d` or `pitched-2d-padded`.
    pub scenario: &'static str,
    /// `H2D` or `D2H`.
    pub direction: &'static str,
    /// Bytes of the frame's rows, without padding: 6220800.
    pub bytes: u64,
    /// The column's name ([`Column::name`]).
    pub column: &'static str,
    /// Nearest-rank median of the call's time, µs.
    pub median_us: f64,
    /// Nearest-rank 99th percentile, µs.
    pub p99_us: f64,
    /// The process's CPU time per call, all threads, µs; `null` where the clock is
    /// unavailable.
    pub cpu_us: Option<f64>,
    /// Timed calls.
    pub samples: u64,
    /// Bytes from one host row's start to the next's.
    pub host_pitch_bytes: u64,
    /// The surface's pitch, as the driver chose it.
    pub device_pitch_bytes: u64,
}

/// Everything one scenario moves: the surface, the host frames and the staging
/// buffer.
struct Fixture {
    surface: PitchedBuffer<u8>,
    host: Layout2d,
    /// The frame's packed rows: what every transfer must move.
    rows: Vec<u8>,
    /// The frame at the host pitch (the uploads' source, padding `0x11`).
    src: Vec<u8>,
    /// Where downloads land (cleared before a checked call).
    dst: Vec<u8>,
    pinned_src: PinnedBuffer<u8>,
    pinned_dst: PinnedBuffer<u8>,
    staging: StagingBuffer,
}

impl Fixture {
    fn new(gpu: &Gpu, scenario: Scenario) -> Result<Fixture, Error> {
        let host = Layout2d::new::<u8>(
            "pitched bench",
            "the host frame",
            ROW_BYTES,
            FRAME_HEIGHT,
            scenario.host_pitch,
        )?;
        let mut rows = vec![0u8; FRAME_BYTES];
        fill_pattern(&mut rows, 24);
        let mut src = vec![0x11u8; host.span_bytes()];
        put_rows(&mut src, &host, &rows);
        let mut pinned_src = PinnedBuffer::<u8>::alloc_in(&gpu.ctx, host.span_bytes())?;
        pinned_src.copy_from_slice(&src);
        Ok(Fixture {
            surface: PitchedBuffer::<u8>::alloc_in(&gpu.ctx, ROW_BYTES, FRAME_HEIGHT)?,
            host,
            rows,
            dst: vec![0u8; host.span_bytes()],
            src,
            pinned_src,
            pinned_dst: PinnedBuffer::<u8>::alloc_in(&gpu.ctx, host.span_bytes())?,
            staging: StagingBuffer::new(),
        })
    }

    /// One call of `column` in `direction`; with `check`, the destination is cleared
    /// first and every row compared after.
    fn once(
        &mut self,
        direction: Direction,
        column: Column,
        s: &Stream,
        check: bool,
    ) -> Result<(), String> {
        let name = column.name(direction);
        let e = |e: Error| format!("{} {name}: {e}", direction.label());
        let pitch = self.host.pitch_bytes();
        if check {
            self.clear(direction, s).map_err(e)?;
        }
        match (direction, column) {
            (Direction::HostToDevice, Column::Driver) => {
                self.surface.copy_from_host(&self.src, pitch).map_err(e)?
            }
            (Direction::HostToDevice, Column::DriverAsync) => s
                .memcpy_2d_htod_sync_with(&self.src, pitch, &mut self.surface, WaitPolicy::Spin)
                .map_err(e)?,
            (Direction::HostToDevice, Column::Staged) => self
                .staging
                .upload_2d(&mut self.surface, &self.src, pitch, s)
                .map_err(e)?,
            (Direction::HostToDevice, Column::Resident) => {
                let rows = &self.rows;
                self.staging
                    .upload_2d_with(&mut self.surface, s, |px: &mut [u8]| {
                        // The producer's own writes are its work, not the transfer's:
                        // they happen only in checked calls.
                        if check {
                            px.copy_from_slice(rows);
                        }
                        black_box(px);
                    })
                    .map_err(e)?
            }
            (Direction::HostToDevice, Column::RawPinned) => s
                .memcpy_2d_htod(&self.pinned_src, pitch, &mut self.surface)
                .and_then(|()| s.synchronize_with(WaitPolicy::Spin))
                .map_err(e)?,
            (Direction::DeviceToHost, Column::Driver) => {
                self.surface.copy_to_host(&mut self.dst, pitch).map_err(e)?
            }
            (Direction::DeviceToHost, Column::DriverAsync) => s
                .memcpy_2d_dtoh_sync_with(&self.surface, &mut self.dst, pitch, WaitPolicy::Spin)
                .map_err(e)?,
            (Direction::DeviceToHost, Column::Staged) => self
                .staging
                .download_2d(&mut self.dst, pitch, &self.surface, s)
                .map_err(e)?,
            (Direction::DeviceToHost, Column::Resident) => {
                let got = self.staging.download_2d_into(&self.surface, s).map_err(e)?;
                if check {
                    return compare(got, &self.rows).map_err(|m| format!("D2H {name}: {m}"));
                }
                black_box(got);
            }
            (Direction::DeviceToHost, Column::RawPinned) => s
                .memcpy_2d_dtoh(&self.surface, &mut self.pinned_dst, pitch)
                .and_then(|()| s.synchronize_with(WaitPolicy::Spin))
                .map_err(e)?,
        }
        if check {
            self.check(direction, column, s)?;
        }
        Ok(())
    }

    /// Clears the destination of `direction`: the surface for uploads, the host
    /// frames for downloads; and, for downloads, fills the surface with the rows.
    /// (Through 1-D copies of the whole surface, independent of the 2-D code
    /// measured.)
    fn clear(&mut self, direction: Direction, s: &Stream) -> Result<(), Error> {
        let mut all = vec![0u8; self.surface.byte_len()];
        if direction == Direction::DeviceToHost {
            self.dst.fill(0);
            self.pinned_dst.fill(0);
            put_rows(&mut all, &self.surface.layout(), &self.rows);
        }
        s.memcpy_htod_sync(&all, &mut self.surface.as_bytes_mut())
    }

    /// Compares the rows `column` moved with the frame's.
    fn check(&self, direction: Direction, column: Column, s: &Stream) -> Result<(), String> {
        let name = format!("{} {}", direction.label(), column.name(direction));
        let (bytes, layout) = match direction {
            Direction::HostToDevice => {
                let mut all = vec![0u8; self.surface.byte_len()];
                s.memcpy_dtoh_sync(&self.surface.as_bytes(), &mut all)
                    .map_err(|e| format!("{name}: reading the surface back: {e}"))?;
                (all, self.surface.layout())
            }
            Direction::DeviceToHost if column == Column::RawPinned => {
                (self.pinned_dst.to_vec(), self.host)
            }
            Direction::DeviceToHost => (self.dst.clone(), self.host),
        };
        let mut got = vec![0u8; FRAME_BYTES];
        for (r, out) in got.chunks_exact_mut(ROW_BYTES).enumerate() {
            out.copy_from_slice(&bytes[layout.row_range(r)]);
        }
        compare(&got, &self.rows).map_err(|m| format!("{name}: {m}"))
    }
}

/// Writes the packed `rows` into `buf` at `layout`'s places.
fn put_rows(buf: &mut [u8], layout: &Layout2d, rows: &[u8]) {
    for (r, row) in rows.chunks_exact(layout.row_bytes()).enumerate() {
        buf[layout.row_range(r)].copy_from_slice(row);
    }
}

/// Runs one scenario in one direction: every column checked, `warmup` untimed and
/// `reps` timed repetitions (the columns interleaved), every column checked again.
fn run_direction(
    fx: &mut Fixture,
    gpu: &Gpu,
    scenario: Scenario,
    direction: Direction,
    settings: &PitchedSettings,
) -> Result<Vec<PitchedRecord>, String> {
    let s = &gpu.stream;
    for column in Column::ALL {
        fx.once(direction, column, s, true)?;
    }
    let mut times: Vec<Vec<Duration>> = Column::ALL
        .iter()
        .map(|_| Vec::with_capacity(settings.reps))
        .collect();
    let mut cpu = [CpuTally::default(); Column::ALL.len()];
    for rep in 0..settings.warmup + settings.reps {
        for (c, column) in Column::ALL.into_iter().enumerate() {
            let cpu0 = process_cpu();
            let started = Instant::now();
            fx.once(direction, column, s, false)?;
            let took = started.elapsed();
            let cpu1 = process_cpu();
            if rep >= settings.warmup {
                times[c].push(took);
                cpu[c].add(elapsed(cpu0, cpu1));
            }
        }
    }
    for column in Column::ALL {
        fx.once(direction, column, s, true)?;
    }
    Column::ALL
        .into_iter()
        .zip(&mut times)
        .zip(&cpu)
        .map(|((column, t), cpu)| {
            let time = Summary::of(t).ok_or_else(|| {
                format!(
                    "{} {}: no repetitions timed",
                    scenario.name,
                    column.name(direction)
                )
            })?;
            Ok(PitchedRecord {
                scenario: scenario.name,
                direction: direction.label(),
                bytes: FRAME_BYTES as u64,
                column: column.name(direction),
                median_us: time.p50_us(),
                p99_us: time.p99_us(),
                cpu_us: cpu.mean_us(),
                samples: time.samples as u64,
                host_pitch_bytes: scenario.host_pitch as u64,
                device_pitch_bytes: fx.surface.pitch_bytes() as u64,
            })
        })
        .collect()
}

/// Runs every scenario in both directions; the records in run order, or the first
/// failure.
pub fn run(gpu: &Gpu, settings: &PitchedSettings) -> Result<Vec<PitchedRecord>, String> {
    let mut records = Vec::new();
    for scenario in SCENARIOS {
        let mut fx = Fixture::new(gpu, scenario)
            .map_err(|e| format!("{}: setting up: {e}", scenario.name))?;
        for direction in Direction::ALL {
            records.extend(run_direction(&mut fx, gpu, scenario, direction, settings)?);
        }
        let stats = fx.staging.stats();
        eprintln!(
            "pitched: {}: device pitch {} B, staging: {} pinned allocation(s), {} staged \
             transfers",
            scenario.name,
            fx.surface.pitch_bytes(),
            stats.allocations,
            stats.staged_transfers
        );
    }
    Ok(records)
}

/// The records as a compact table for the log.
pub fn log_table(records: &[PitchedRecord]) -> String {
    let mut s =
        String::from("scenario           dir  column            median µs   p99 µs  cpu µs\n");
    for r in records {
        s.push_str(&format!(
            "{:<18} {:<4} {:<17} {:>9.1} {:>8.1} {:>7}\n",
            r.scenario,
            r.direction,
            r.column,
            r.median_us,
            r.p99_us,
            r.cpu_us
                .map_or_else(|| "-".to_string(), |c| format!("{c:.1}"))
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frame_and_its_host_pitches() {
        assert_eq!(ROW_BYTES, 5760);
        assert_eq!(FRAME_BYTES, 6_220_800);
        assert_eq!(
            SCENARIOS[0].host_pitch, 5760,
            "64-byte aligned rows: the row itself"
        );
        assert_eq!(SCENARIOS[1].host_pitch, 5824, "64 bytes of padding per row");
    }

    #[test]
    fn columns_are_named_per_direction() {
        let names = |d| Column::ALL.map(|c| c.name(d));
        assert_eq!(
            names(Direction::HostToDevice),
            [
                "driver-2d",
                "driver-2d-async",
                "upload-2d",
                "upload-2d-with",
                "raw-pinned-2d"
            ]
        );
        assert_eq!(
            names(Direction::DeviceToHost),
            [
                "driver-2d",
                "driver-2d-async",
                "download-2d",
                "download-2d-into",
                "raw-pinned-2d"
            ]
        );
    }

    #[test]
    fn records_have_the_fields_the_renderer_reads() {
        let r = PitchedRecord {
            scenario: "pitched-2d",
            direction: "H2D",
            bytes: 6_220_800,
            column: "upload-2d",
            median_us: 412.5,
            p99_us: 480.0,
            cpu_us: Some(900.0),
            samples: 400,
            host_pitch_bytes: 5760,
            device_pitch_bytes: 6144,
        };
        let v = serde_json::to_value(&r).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "bytes",
                "column",
                "cpu_us",
                "device_pitch_bytes",
                "direction",
                "host_pitch_bytes",
                "median_us",
                "p99_us",
                "samples",
                "scenario"
            ]
        );
        assert!(log_table(&[r]).contains("pitched-2d         H2D  upload-2d"));
    }

    #[test]
    fn the_full_run_is_longer_than_the_quick_one() {
        assert!(PitchedSettings::full().reps > PitchedSettings::quick().reps);
        assert!(PitchedSettings::smoke().reps >= 1);
    }
}
