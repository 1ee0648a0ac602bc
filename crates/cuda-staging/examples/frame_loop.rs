//! A 60 fps frame loop, three ways: the driver's pageable copies, `upload` /
//! `download`, and `upload_with` / `download_into`.
//!
//! ```text
//! cargo run --release -p cuda-staging --example frame_loop
//! ```
//!
//! A producer thread delivers a 3×640×640 `f32` frame every 1/60 s through a
//! bounded channel (its values differ per frame and per element), and the loop
//! sleeps in `recv` while it waits for each one, as a video pipeline's loop does.
//! Per frame the loop uploads the frame, runs a stand-in device step (a
//! device-to-device copy from the input to the output buffer, queued on the same
//! stream), downloads the output, and checks every element. Each path runs
//! 5 warm-up frames and then 120 timed frames (2 s), one path after another, and
//! prints the p50 and p99 of the per-frame latency (upload + device step +
//! download) and its staging buffer's stats: one pinned allocation per buffer.
//!
//! For `upload_with` the loop copies the received frame into pinned memory inside
//! `fill` with `copy_for_dma`; in a real pipeline that is where preprocessing would
//! write its output. `download_into` is checked in place, in pinned memory.
//!
//! Without a GPU it says so on stderr and exits with status 1.
#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::thread;
use std::time::{Duration, Instant};

use cuda_staging::{copy_for_dma, Context, DeviceBuffer, Error, StagingBuffer, Stream};

const FPS: u32 = 60;
const WARMUP_FRAMES: usize = 5;
const FRAMES: usize = 120;
const CHANNELS: usize = 3;
const SIDE: usize = 640;
/// Elements per frame.
const N: usize = CHANNELS * SIDE * SIDE;

/// Element `i` of frame `frame`: never zero, different at every position of a
/// frame and at the same position of the next frame.
fn value(frame: usize, i: usize) -> f32 {
    (frame + 1) as f32 + i as f32 * 1e-3
}

/// One delivered frame.
struct Frame {
    index: usize,
    data: Vec<f32>,
}

/// Sends `frames` frames at `FPS`, reusing the buffers the loop hands back.
fn produce(frames: usize, tx: SyncSender<Frame>, recycled: Receiver<Vec<f32>>) {
    let period = Duration::from_secs(1) / FPS;
    let start = Instant::now();
    for index in 0..frames {
        let mut data = recycled.try_recv().unwrap_or_else(|_| vec![0.0; N]);
        for (i, v) in data.iter_mut().enumerate() {
            *v = value(index, i);
        }
        let due = start + period * index as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            thread::sleep(wait);
        }
        if tx.send(Frame { index, data }).is_err() {
            return; // the loop stopped early
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Path {
    /// `Stream::memcpy_htod_sync` / `memcpy_dtoh_sync` from and into `Vec`s: the
    /// driver's pageable path, on the same stream as the device step.
    Pageable,
    /// `StagingBuffer::upload` / `download` with the same `Vec`s.
    CopyIn,
    /// `StagingBuffer::upload_with` / `download_into`.
    Resident,
}

impl Path {
    const ALL: [Path; 3] = [Path::Pageable, Path::CopyIn, Path::Resident];

    fn name(self) -> &'static str {
        match self {
            Path::Pageable => "pageable (memcpy_htod_sync / memcpy_dtoh_sync)",
            Path::CopyIn => "upload / download",
            Path::Resident => "upload_with / download_into",
        }
    }
}

/// The GPU side every path shares.
struct Gpu {
    stream: Stream,
    input: DeviceBuffer<f32>,
    output: DeviceBuffer<f32>,
}

/// Upload, device step, download of one frame; returns the time they took, once
/// every element of the output has been checked against the frame.
fn one_frame(
    path: Path,
    gpu: &mut Gpu,
    staging: &mut StagingBuffer,
    out: &mut [f32],
    frame: &Frame,
) -> Result<Duration, String> {
    let index = frame.index;
    let fail = |what: &'static str| move |e: Error| format!("frame {index}: {what}: {e}");
    let Gpu {
        stream,
        input,
        output,
    } = gpu;
    let started = Instant::now();
    let landed: &[f32] = match path {
        Path::Pageable => {
            stream
                .memcpy_htod_sync(&frame.data, input)
                .map_err(fail("memcpy_htod_sync"))?;
            stream
                .memcpy_dtod(input, output)
                .map_err(fail("device step"))?;
            stream
                .memcpy_dtoh_sync(output, out)
                .map_err(fail("memcpy_dtoh_sync"))?;
            out
        }
        Path::CopyIn => {
            staging
                .upload(input, &frame.data, stream)
                .map_err(fail("upload"))?;
            stream
                .memcpy_dtod(input, output)
                .map_err(fail("device step"))?;
            staging
                .download(out, output, stream)
                .map_err(fail("download"))?;
            out
        }
        Path::Resident => {
            let mut copied = Ok(());
            staging
                .upload_with(input, N, stream, |dst: &mut [f32]| {
                    copied = copy_for_dma(dst, &frame.data);
                })
                .and(copied)
                .map_err(fail("upload_with"))?;
            stream
                .memcpy_dtod(input, output)
                .map_err(fail("device step"))?;
            staging
                .download_into(output, N, stream)
                .map_err(fail("download_into"))?
        }
    };
    let elapsed = started.elapsed();
    if let Some(i) = (0..N).find(|&i| landed[i].to_bits() != frame.data[i].to_bits()) {
        return Err(format!(
            "frame {index}: element {i} came back as {} but was sent as {}",
            landed[i], frame.data[i]
        ));
    }
    Ok(elapsed)
}

/// The timed frames of one path and its staging buffer.
struct PathRun {
    latencies: Vec<Duration>,
    staging: StagingBuffer,
}

/// Runs one path over a fresh producer's `WARMUP_FRAMES + FRAMES` frames.
fn run_path(path: Path, gpu: &mut Gpu) -> Result<PathRun, String> {
    let (tx, frames) = mpsc::sync_channel::<Frame>(2);
    let (give_back, recycled) = mpsc::channel::<Vec<f32>>();
    let producer = thread::spawn(move || produce(WARMUP_FRAMES + FRAMES, tx, recycled));
    let mut staging = StagingBuffer::new();
    let mut out = vec![0f32; N];
    let mut latencies = Vec::with_capacity(FRAMES);
    let mut result = Ok(());
    // `recv` blocks: the loop sleeps until the producer delivers the next frame.
    for frame in frames.iter() {
        match one_frame(path, gpu, &mut staging, &mut out, &frame) {
            Ok(t) if frame.index >= WARMUP_FRAMES => latencies.push(t),
            Ok(_) => {}
            Err(e) => {
                result = Err(e);
                break;
            }
        }
        let _ = give_back.send(frame.data);
    }
    drop(frames); // a producer still sending stops
    producer
        .join()
        .map_err(|_| "the producer thread panicked".to_string())?;
    result?;
    if latencies.len() != FRAMES {
        return Err(format!(
            "{} timed frames, expected {FRAMES}",
            latencies.len()
        ));
    }
    Ok(PathRun { latencies, staging })
}

/// Nearest-rank percentile `p` of sorted, non-empty `v`, in µs.
fn percentile_us(v: &[Duration], p: usize) -> f64 {
    let rank = (p * v.len()).div_ceil(100).clamp(1, v.len());
    v[rank - 1].as_secs_f64() * 1e6
}

fn run() -> Result<(), String> {
    let ctx = Context::new(0).map_err(|e| {
        format!("no usable CUDA device ({e}); this example needs an NVIDIA GPU and its driver")
    })?;
    let name = ctx.name().unwrap_or_else(|_| "unknown device".into());
    let alloc = |what| move |e: Error| format!("{what}: {e}");
    let mut gpu = Gpu {
        stream: Stream::new(&ctx).map_err(alloc("creating a stream"))?,
        input: DeviceBuffer::alloc_in(&ctx, N).map_err(alloc("device allocation"))?,
        output: DeviceBuffer::alloc_in(&ctx, N).map_err(alloc("device allocation"))?,
    };

    println!(
        "{name}: {FRAMES} frames per path at {FPS} fps ({WARMUP_FRAMES} warm-up frames \
         before), {CHANNELS}x{SIDE}x{SIDE} f32 = {} bytes, every element checked",
        N * 4
    );
    println!("per-frame latency: upload + device step + download, the loop asleep in between");
    println!(
        "{:<48} {:>8} {:>8} {:>8}",
        "path", "p50 us", "p99 us", "max us"
    );
    let mut runs = Vec::new();
    for path in Path::ALL {
        let mut run = run_path(path, &mut gpu).map_err(|e| format!("{}: {e}", path.name()))?;
        run.latencies.sort_unstable();
        println!(
            "{:<48} {:>8.1} {:>8.1} {:>8.1}",
            path.name(),
            percentile_us(&run.latencies, 50),
            percentile_us(&run.latencies, 99),
            percentile_us(&run.latencies, 100),
        );
        runs.push((path, run));
    }

    for (path, run) in &runs {
        if *path == Path::Pageable {
            continue;
        }
        let stats = run.staging.stats();
        println!(
            "{}: {} pinned allocation(s) of {} bytes, {} staged / {} direct transfers, \
             {} bytes up, {} bytes down",
            path.name(),
            stats.allocations,
            run.staging.capacity(),
            stats.staged_transfers,
            stats.direct_transfers,
            stats.bytes_uploaded,
            stats.bytes_downloaded,
        );
        if stats.allocations != 1 {
            return Err(format!(
                "{}: expected one pinned allocation for the whole run, saw {}",
                path.name(),
                stats.allocations
            ));
        }
    }
    cuda_staging::check_deferred_errors().map_err(|e| format!("an error recorded in a drop: {e}"))
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("frame_loop: {e}");
            ExitCode::FAILURE
        }
    }
}
