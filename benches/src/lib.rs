//! Shared setup for the benchmarks in `benches/transfers.rs` (criterion, back to
//! back) and `benches/frames.rs` (frame loops).
//!
//! `transfers` compares, per transfer size and direction, every honest way this
//! workspace (and cudarc) offers to move bytes between host and device, all in one
//! process, on one [`Context`] and one non-blocking [`Stream`]:
//!
//! | column | what one iteration does |
//! |---|---|
//! | `pageable` | `DeviceBuffer::copy_from_host` / `copy_to_host` with an ordinary `Vec` (synchronous `cuMemcpyHtoD` / `DtoH`) |
//! | `pageable-async` | `Stream::memcpy_htod_sync` / `memcpy_dtoh_sync` from / to the same `Vec`: the driver's async pageable copy on the stream, then a stream sync |
//! | `copy-in` | `StagingBuffer::upload` / `download` with the same `Vec` |
//! | `copy-in-registered` | `StagingBuffer::upload` / `download` with a `Vec` page-locked by `HostRegistration` |
//! | `resident` | `StagingBuffer::upload_with` / `download_into`: the data already lives in pinned memory |
//! | `raw-pinned` | `Stream::memcpy_htod` / `memcpy_dtoh` from / to a `PinnedBuffer`, then `Stream::synchronize`: the floor |
//! | `cudarc-pinned` | cudarc 0.19: `memcpy_htod` / `memcpy_dtoh` with its `alloc_pinned` slice, then `synchronize` |
//! | `cudarc-pageable` | cudarc 0.19: the same with an ordinary `Vec` |
//! | `cudarc+copy-in` | `StagingBuffer::upload` / `download` with the same `Vec`, into / from cudarc's `CudaSlice` through the bridge (`CudarcViewMut::new` / `CudarcView::new` per call), on cudarc's stream; the seed's sizes only |
//! | `cudarc+resident` | `StagingBuffer::upload_with` / `download_into` into / from cudarc's `CudaSlice` through the bridge, on cudarc's stream; the seed's sizes only |
//!
//! Naming contract with the `xtask` renderer: criterion group `"{H2D|D2H}/{bytes}"`
//! ([`group_id`]), function id = column name ([`COLUMNS`]).
//!
//! Settings: [`BenchSettings::from_env`] (`BENCH_QUICK=1` for a smoke run).
//!
//! The `frames` bench (frame loops: a sleep or busy gap before every transfer, or
//! none) keeps its plan in [`frames`], its gaps in [`gap`], its runners in
//! [`frame_loop`], [`tight_loop`], [`contended`] (with [`neighbours`]),
//! [`four_pipelines`], [`scaling`] (one GPU against all) and [`chunks`], its
//! percentiles in [`stats`], its CPU clocks in [`cpu_time`] and its output in
//! [`records`] and [`log_tables`]. Both benches check their data with [`pattern`].
//!
//! The `pipeline` bench (issue 13: one inference-shaped pipeline of frames, run
//! synchronously or through the staging ring, and batched downloads) and the
//! `pipeline` example share [`pipeline`]. The `pitched` bench (issue 24: a padded
//! full-HD frame through the 2-D calls against the driver's `cuMemcpy2D`) is
//! [`pitched`].
#![deny(unsafe_op_in_unsafe_fn)]

pub mod cells;
pub mod chunks;
pub mod contended;
pub mod cpu_time;
mod cudarc_gpu;
pub mod four_pipelines;
pub mod frame_loop;
pub mod frame_scenarios;
pub mod frames;
pub mod gap;
pub mod log_tables;
pub mod neighbours;
pub mod pattern;
pub mod pipeline;
pub mod pitched;
pub mod records;
pub mod run_time;
pub mod scaling;
pub mod stats;
pub mod tight_loop;

/// The README examples, compiled by `cargo test --workspace` as doctests. They live
/// here because this crate is never packaged: a published crate cannot include files
/// from outside its folder.
#[cfg(doctest)]
mod readme_examples {
    #[doc = include_str!("../../README.md")]
    struct WorkspaceReadme;
    #[doc = include_str!("../../crates/cuda-staging/README.md")]
    struct CudaStagingReadme;
    #[doc = include_str!("../../crates/cuda-core/README.md")]
    struct CudaCoreReadme;
    #[doc = include_str!("../../crates/cuda-sys/README.md")]
    struct CudaSysReadme;
}

use std::fmt::Display;
use std::time::Duration;

use criterion::{Criterion, SamplingMode};
use cuda_core::bytemuck::Pod;
use cuda_core::{Context, DeviceBuffer, Error, PinnedBuffer, Stream, WaitPolicy};

pub use cudarc;
pub use cudarc_gpu::{CudarcBuffers, CudarcGpu};
pub use pattern::{compare, fill_pattern};

/// Column (criterion function id) names, in the order they are run and rendered.
pub mod column {
    /// `DeviceBuffer::copy_from_host` / `copy_to_host` from / to an ordinary `Vec`.
    pub const PAGEABLE: &str = "pageable";
    /// The driver's async pageable path on our non-blocking stream, then a sync.
    pub const PAGEABLE_ASYNC: &str = "pageable-async";
    /// `StagingBuffer::upload` / `download` from / to an ordinary `Vec`.
    pub const COPY_IN: &str = "copy-in";
    /// `StagingBuffer::upload` / `download` from / to a `HostRegistration`'d `Vec`.
    pub const COPY_IN_REGISTERED: &str = "copy-in-registered";
    /// `StagingBuffer::upload_with` / `download_into`.
    pub const RESIDENT: &str = "resident";
    /// `PinnedBuffer` + `Stream::memcpy_htod` / `memcpy_dtoh` + `synchronize`: the floor.
    pub const RAW_PINNED: &str = "raw-pinned";
    /// cudarc 0.19 from / to its pinned host slice.
    pub const CUDARC_PINNED: &str = "cudarc-pinned";
    /// cudarc 0.19 from / to an ordinary `Vec`.
    pub const CUDARC_PAGEABLE: &str = "cudarc-pageable";
    /// `StagingBuffer::upload` / `download` from / to an ordinary `Vec`, into / from
    /// cudarc's `CudaSlice` through the bridge, on cudarc's stream.
    pub const CUDARC_COPY_IN: &str = "cudarc+copy-in";
    /// `StagingBuffer::upload_with` / `download_into` into / from cudarc's `CudaSlice`
    /// through the bridge, on cudarc's stream.
    pub const CUDARC_RESIDENT: &str = "cudarc+resident";
}

/// Every column, in run order.
pub const COLUMNS: [&str; 8] = [
    column::PAGEABLE,
    column::PAGEABLE_ASYNC,
    column::COPY_IN,
    column::COPY_IN_REGISTERED,
    column::RESIDENT,
    column::RAW_PINNED,
    column::CUDARC_PINNED,
    column::CUDARC_PAGEABLE,
];

/// The columns of our staging on cudarc's memory (the bridge), measured at
/// [`SEED_SIZES_BYTES`] only, next to `copy-in` and `resident`.
pub const BRIDGE_COLUMNS: [&str; 2] = [column::CUDARC_COPY_IN, column::CUDARC_RESIDENT];

/// Every column of the back-to-back benchmarks: [`COLUMNS`], then [`BRIDGE_COLUMNS`].
pub fn every_column() -> impl Iterator<Item = &'static str> {
    COLUMNS.into_iter().chain(BRIDGE_COLUMNS)
}

/// The seed's rows: 112×112×3, 128×128×3 and 640×640×3 `f32` tensors, in bytes.
pub const SEED_SIZES_BYTES: [usize; 3] = [150_528, 196_608, 4_915_200];

/// Whether the [`BRIDGE_COLUMNS`] are measured at `bytes`: the seed's sizes.
pub fn bridge_measured(bytes: usize) -> bool {
    SEED_SIZES_BYTES.contains(&bytes)
}

/// Smallest size of the power-of-two sweep: 4 KiB.
pub const SWEEP_MIN_BYTES: usize = 4 << 10;

/// Largest size of the power-of-two sweep: 64 MiB.
pub const SWEEP_MAX_BYTES: usize = 64 << 20;

/// Sizes from here up are sampled flat (the same iteration count per sample), so
/// that slow large transfers do not multiply criterion's linear sampling time.
pub const FLAT_SAMPLING_MIN_BYTES: usize = 1 << 20;

/// The direction of a transfer, named as the renderer expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Host to device.
    HostToDevice,
    /// Device to host.
    DeviceToHost,
}

impl Direction {
    /// Both directions, in run order.
    pub const ALL: [Direction; 2] = [Direction::HostToDevice, Direction::DeviceToHost];

    /// `"H2D"` or `"D2H"`.
    pub fn label(self) -> &'static str {
        match self {
            Direction::HostToDevice => "H2D",
            Direction::DeviceToHost => "D2H",
        }
    }
}

/// The criterion group id of one row: `"H2D/150528"`.
pub fn group_id(direction: Direction, bytes: usize) -> String {
    format!("{}/{bytes}", direction.label())
}

/// Every size of the full run, ascending: the power-of-two sweep from
/// [`SWEEP_MIN_BYTES`] to [`SWEEP_MAX_BYTES`] (15 sizes) plus [`SEED_SIZES_BYTES`]: 18 sizes.
pub fn full_sizes() -> Vec<usize> {
    let mut sizes: Vec<usize> = std::iter::successors(Some(SWEEP_MIN_BYTES), |&b| b.checked_mul(2))
        .take_while(|&b| b <= SWEEP_MAX_BYTES)
        .chain(SEED_SIZES_BYTES)
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// The smoke-run sizes, ascending: the seed sizes plus the two ends of the sweep.
pub fn quick_sizes() -> Vec<usize> {
    let mut sizes = vec![SWEEP_MIN_BYTES, SWEEP_MAX_BYTES];
    sizes.extend(SEED_SIZES_BYTES);
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// How long and how often criterion measures, and which sizes.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchSettings {
    /// `BENCH_QUICK` was set: fewer sizes, shorter times.
    pub quick: bool,
    /// Transfer sizes in bytes, ascending.
    pub sizes: Vec<usize>,
    /// Criterion warm-up time per benchmark.
    pub warm_up: Duration,
    /// Criterion measurement time per benchmark.
    pub measurement: Duration,
    /// Criterion samples per benchmark.
    pub sample_size: usize,
    /// Bootstrap resamples of criterion's analysis.
    pub nresamples: usize,
    /// The cells to measure (`BENCH_CELLS`, [`cells`]): `back-to-back/H2D/150528/copy-in`.
    pub cells: cells::CellFilter,
}

impl BenchSettings {
    /// The full run: 18 sizes × 2 directions × 8 columns (288 benchmarks), under three
    /// minutes.
    pub fn full() -> BenchSettings {
        BenchSettings {
            quick: false,
            sizes: full_sizes(),
            // 0.25 s per benchmark (40 samples) keeps the whole `cargo xtask bench`,
            // whose frame loops need almost four minutes of real gaps and blocks, inside
            // one 10-minute device call with room to spare: about 6 minutes on the H200.
            warm_up: Duration::from_millis(80),
            measurement: Duration::from_millis(250),
            sample_size: 40,
            nresamples: 2000,
            cells: cells::CellFilter::all(),
        }
    }

    /// The smoke run: 5 sizes, shorter times (about 15 seconds).
    pub fn quick() -> BenchSettings {
        BenchSettings {
            quick: true,
            sizes: quick_sizes(),
            warm_up: Duration::from_millis(50),
            measurement: Duration::from_millis(100),
            sample_size: 20,
            nresamples: 1000,
            cells: cells::CellFilter::all(),
        }
    }

    /// [`BenchSettings::quick`] when the environment variable `BENCH_QUICK` is set to
    /// anything but empty or `0`, else [`BenchSettings::full`].
    ///
    /// With `BENCH_CELLS`, the sizes are those of the full run at which it names a
    /// cell (quick or not).
    pub fn from_env() -> BenchSettings {
        let settings = if quick_from_env() {
            BenchSettings::quick()
        } else {
            BenchSettings::full()
        };
        settings.for_cells(cells::CellFilter::from_env())
    }

    /// These settings for the cells `cells` names: the sizes of the full run at
    /// which it names a cell of some direction and column; without a pattern,
    /// nothing changes.
    pub fn for_cells(mut self, cells: cells::CellFilter) -> BenchSettings {
        if !cells.is_all() {
            self.sizes = full_sizes()
                .into_iter()
                .filter(|&b| {
                    Direction::ALL.iter().any(|d| {
                        let prefix = cells::cell_name("back-to-back", d.label(), b);
                        cells.any(every_column().map(|c| format!("{prefix}/{c}")))
                    })
                })
                .collect();
            self.cells = cells;
        }
        self
    }

    /// The largest size.
    pub fn max_bytes(&self) -> usize {
        self.sizes.iter().copied().max().unwrap_or(0)
    }

    /// How many benchmarks a run with `columns` columns registers (besides the
    /// [`BRIDGE_COLUMNS`]: [`BenchSettings::bridge_benchmark_count`]).
    pub fn benchmark_count(&self, columns: usize) -> usize {
        self.sizes.len() * Direction::ALL.len() * columns
    }

    /// How many benchmarks the [`BRIDGE_COLUMNS`] add: both at each seed size run.
    pub fn bridge_benchmark_count(&self) -> usize {
        let seed_sizes = self.sizes.iter().filter(|&&b| bridge_measured(b)).count();
        seed_sizes * Direction::ALL.len() * BRIDGE_COLUMNS.len()
    }

    /// A rough upper estimate of the run's wall time for `columns` columns: each
    /// benchmark spends up to about 1.5× the warm-up (criterion doubles its batches
    /// until the warm-up time is over), the measurement time, and ~20 ms of
    /// analysis and file output.
    pub fn estimated_run_time(&self, columns: usize) -> Duration {
        self.estimated_time_of(self.benchmark_count(columns))
    }

    /// The estimate of [`BenchSettings::estimated_run_time`] for `benchmarks`
    /// benchmarks.
    pub fn estimated_time_of(&self, benchmarks: usize) -> Duration {
        let per_bench = self.warm_up.mul_f64(1.5) + self.measurement + Duration::from_millis(20);
        per_bench * benchmarks as u32
    }

    /// Criterion configured with these settings (no plots), then from the command
    /// line (so `--list`, filters, `--sample-size` and the like still work).
    pub fn criterion(&self) -> Criterion {
        Criterion::default()
            .warm_up_time(self.warm_up)
            .measurement_time(self.measurement)
            .sample_size(self.sample_size)
            .nresamples(self.nresamples)
            .without_plots()
            .configure_from_args()
    }

    /// Linear sampling below [`FLAT_SAMPLING_MIN_BYTES`], flat from there up.
    pub fn sampling_mode(&self, bytes: usize) -> SamplingMode {
        if bytes >= FLAT_SAMPLING_MIN_BYTES {
            SamplingMode::Flat
        } else {
            SamplingMode::Linear
        }
    }
}

/// Whether the environment asks for a smoke run: `BENCH_QUICK` set to anything but
/// empty or `0`.
pub fn quick_from_env() -> bool {
    is_quick(std::env::var("BENCH_QUICK").ok().as_deref())
}

/// [`quick_from_env`] for a given value of `BENCH_QUICK`.
pub fn is_quick(value: Option<&str>) -> bool {
    value.is_some_and(|v| !v.is_empty() && v != "0")
}

/// What the bench binary was asked to do, read from its arguments the way criterion
/// reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunMode {
    /// `cargo bench` (`--bench`, or `--profile-time`): measure.
    Bench,
    /// `cargo test --benches` (no `--bench`, or `--test`): run each benchmark once.
    Test,
    /// `--list`: print the benchmark ids; needs no GPU.
    List,
}

impl RunMode {
    /// Reads the mode from the process arguments (the program name included or not).
    pub fn from_args<I, S>(args: I) -> RunMode
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let (mut list, mut bench, mut test, mut profile) = (false, false, false, false);
        for a in args {
            match a.as_ref() {
                "--list" => list = true,
                "--bench" => bench = true,
                "--test" => test = true,
                "--profile-time" => profile = true,
                s if s.starts_with("--profile-time=") => profile = true,
                _ => {}
            }
        }
        if list {
            RunMode::List
        } else if profile || (bench && !test) {
            RunMode::Bench
        } else {
            RunMode::Test
        }
    }
}

/// Joins threads of a `std::thread::scope`, each returning its own result; a
/// thread that panicked gives an error instead.
pub fn join_all<T>(
    handles: Vec<std::thread::ScopedJoinHandle<'_, Result<T, String>>>,
) -> Vec<Result<T, String>> {
    handles
        .into_iter()
        .map(|h| {
            h.join()
                .unwrap_or_else(|_| Err("the thread panicked".to_string()))
        })
        .collect()
}

/// Prints `what: error` to stderr and exits with status 1 (no panic, no backtrace).
pub fn exit_on_error<T, E: Display>(what: &str, r: Result<T, E>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => {
            eprintln!("benches: {what}: {e}");
            std::process::exit(1);
        }
    }
}

/// Our side of the GPU: device 0's primary context, current on the calling thread,
/// and one non-blocking stream.
#[derive(Debug)]
pub struct Gpu {
    /// Device 0's retained primary context.
    pub ctx: Context,
    /// A non-blocking stream in `ctx`.
    pub stream: Stream,
}

impl Gpu {
    /// Opens device 0. The error message says why there is no GPU (no driver library,
    /// no device, ...).
    pub fn open() -> Result<Gpu, Error> {
        let ctx = Context::new(0)?;
        let stream = Stream::new(&ctx)?;
        Ok(Gpu { ctx, stream })
    }

    /// Opens device 0 for the bench executable `bench`, or says why not and gives
    /// the exit status: without a GPU, `--bench` (`cargo bench`, a bundle's run.sh)
    /// fails, because nothing was measured, while test mode (`cargo test --benches`)
    /// skips with success.
    pub fn open_for(bench: &str, mode: RunMode) -> Result<Gpu, std::process::ExitCode> {
        Gpu::open().map_err(|e| {
            eprintln!("no CUDA GPU/driver found: {e}");
            if mode == RunMode::Bench {
                eprintln!(
                    "{bench}: nothing measured. Build the bench executable here and run it on \
                     a machine with a CUDA GPU (cargo xtask bench --bundle DIR)."
                );
                std::process::ExitCode::FAILURE
            } else {
                eprintln!("{bench}: skipped in test mode");
                std::process::ExitCode::SUCCESS
            }
        })
    }

    /// One line naming the device and the driver, e.g.
    /// `NVIDIA H200 (device 0), driver API 13.0`.
    pub fn describe(&self) -> String {
        let name = self
            .ctx
            .name()
            .unwrap_or_else(|e| format!("<name unavailable: {e}>"));
        let driver = Context::driver_version()
            .map_or_else(|e| format!("<unknown: {e}>"), |(a, b)| format!("{a}.{b}"));
        format!(
            "{name} (device {}), driver API {driver}",
            self.ctx.ordinal()
        )
    }
}

fn check_lengths(op: &'static str, host: usize, device: usize) -> Result<(), Error> {
    if host == device {
        Ok(())
    } else {
        Err(Error::LengthMismatch {
            op,
            host,
            expected: device,
        })
    }
}

/// The `pageable-async` column, host to device: [`Stream::memcpy_htod_sync`] of all
/// of `src` (any host memory; the driver stages pageable memory itself) into `dst`,
/// queued on `stream`, then the driver's own spinning wait for the stream (the
/// driver's path as it is, the baseline). `src.len()` must equal `dst.len()`.
pub fn htod_pageable_async<T: Pod>(
    dst: &mut DeviceBuffer<T>,
    src: &[T],
    stream: &Stream,
) -> Result<(), Error> {
    check_lengths("htod_pageable_async", src.len(), dst.len())?;
    stream.memcpy_htod_sync_with(src, dst, WaitPolicy::Spin)
}

/// The `pageable-async` column, device to host: [`Stream::memcpy_dtoh_sync`] of all
/// of `src` into `dst` (any host memory), queued on `stream`, then the driver's own
/// spinning wait for the stream. `dst.len()` must equal `src.len()`.
pub fn dtoh_pageable_async<T: Pod>(
    dst: &mut [T],
    src: &DeviceBuffer<T>,
    stream: &Stream,
) -> Result<(), Error> {
    check_lengths("dtoh_pageable_async", dst.len(), src.len())?;
    stream.memcpy_dtoh_sync_with(src, dst, WaitPolicy::Spin)
}

/// The `raw-pinned` floor, host to device: [`Stream::memcpy_htod`] from a
/// [`PinnedBuffer`], then the driver's own spinning wait
/// ([`Stream::synchronize_with`] [`WaitPolicy::Spin`]). `src.len()` must equal
/// `dst.len()`.
pub fn htod_raw_pinned<T: Pod>(
    dst: &mut DeviceBuffer<T>,
    src: &PinnedBuffer<T>,
    stream: &Stream,
) -> Result<(), Error> {
    check_lengths("htod_raw_pinned", src.len(), dst.len())?;
    stream.memcpy_htod(src, dst)?;
    stream.synchronize_with(WaitPolicy::Spin)
}

/// The `raw-pinned` floor, device to host: [`Stream::memcpy_dtoh`] into a
/// [`PinnedBuffer`], then the driver's own spinning wait (so reading `dst`
/// afterwards waits for nothing). `dst.len()` must equal `src.len()`.
pub fn dtoh_raw_pinned<T: Pod>(
    dst: &mut PinnedBuffer<T>,
    src: &DeviceBuffer<T>,
    stream: &Stream,
) -> Result<(), Error> {
    check_lengths("dtoh_raw_pinned", dst.len(), src.len())?;
    stream.memcpy_dtoh(src, dst)?;
    stream.synchronize_with(WaitPolicy::Spin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_run_has_18_sizes_with_the_seed_rows() {
        let sizes = full_sizes();
        assert_eq!(sizes.len(), 18);
        assert!(sizes.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(sizes.first(), Some(&4096));
        assert_eq!(sizes.last(), Some(&(64 << 20)));
        for s in SEED_SIZES_BYTES {
            assert!(sizes.contains(&s));
        }
        assert_eq!(BenchSettings::full().benchmark_count(COLUMNS.len()), 288);
        // The bridge's two columns at the three seed sizes, both directions.
        assert_eq!(BenchSettings::full().bridge_benchmark_count(), 12);
        assert_eq!(BenchSettings::quick().bridge_benchmark_count(), 12);
        assert!(bridge_measured(150_528) && !bridge_measured(4096));
    }

    #[test]
    fn quick_run_has_5_sizes() {
        assert_eq!(quick_sizes(), [4096, 150_528, 196_608, 4_915_200, 64 << 20]);
    }

    #[test]
    fn full_criterion_run_fits_two_and_a_half_minutes() {
        let t = BenchSettings::full().estimated_run_time(COLUMNS.len());
        assert!(t < Duration::from_secs(150), "{t:?}");
    }

    #[test]
    fn cells_pick_the_transfer_sizes_they_name_and_frame_cells_pick_none() {
        let one = cells::CellFilter::parse(Some("back-to-back/H2D/150528/copy-in"));
        assert_eq!(BenchSettings::full().for_cells(one).sizes, [150_528]);
        let by_size = cells::CellFilter::parse(Some("*/4915200"));
        assert_eq!(BenchSettings::full().for_cells(by_size).sizes, [4_915_200]);
        // An `--ab` of frame cells leaves `transfers` nothing, which its `main`
        // reports and exits 0 on, instead of registering an empty host buffer.
        let frames = cells::CellFilter::parse(Some("sleep-16ms/H2D/1048576,busy-2ms"));
        let settings = BenchSettings::full().for_cells(frames);
        assert!(settings.sizes.is_empty());
        assert_eq!(settings.max_bytes(), 0);
    }

    #[test]
    fn group_ids_follow_the_renderer_contract() {
        assert_eq!(group_id(Direction::HostToDevice, 150_528), "H2D/150528");
        assert_eq!(group_id(Direction::DeviceToHost, 4096), "D2H/4096");
    }

    #[test]
    fn bench_quick_is_any_value_but_empty_or_zero() {
        assert!(is_quick(Some("1")));
        assert!(is_quick(Some("yes")));
        assert!(!is_quick(Some("0")));
        assert!(!is_quick(Some("")));
        assert!(!is_quick(None));
    }

    #[test]
    fn run_mode_reads_args_like_criterion() {
        assert_eq!(RunMode::from_args(["x", "--bench"]), RunMode::Bench);
        assert_eq!(RunMode::from_args(["x"]), RunMode::Test);
        assert_eq!(
            RunMode::from_args(["x", "--bench", "--test"]),
            RunMode::Test
        );
        assert_eq!(
            RunMode::from_args(["x", "--bench", "--list"]),
            RunMode::List
        );
        assert_eq!(
            RunMode::from_args(["x", "--profile-time", "5"]),
            RunMode::Bench
        );
    }
}
