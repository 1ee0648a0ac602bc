//! A per-frame loop written the cudarc way (a `CudaContext`, its stream, `CudaSlice`s,
//! a cudarc device-to-device copy standing in for the model), moving its frames three
//! ways: cudarc's own `memcpy_htod` / `memcpy_dtoh` from and into `Vec`s, then
//! `StagingBuffer` and `StagingRing` on the same `CudaSlice`s through the bridge
//! (feature `cudarc`), with every element checked.
//!
//! ```text
//! cargo run --release -p cuda-staging --features cudarc --example cudarc_frames
//! ```
//!
//! Per frame: a fresh 3x640x640 `f32` frame is written into a `Vec` (the decoder's
//! output; not timed), then uploaded into `input`, copied by cudarc into `output` (the
//! model), and `output` is downloaded and compared with the frame. The first two ways
//! are synchronous: the p50 is the latency of upload + model + download. The ring
//! queues frame k's upload, model and download and only then waits for frame k-1's
//! download, so its p50 is the loop's period with one frame in flight. Each way runs
//! `WARMUP_FRAMES` frames, then `FRAMES` timed ones.
//!
//! The change from cudarc's way is one line per transfer: the `CudaSlice` is handed
//! to the staging call as `&mut CudarcViewMut::new(&mut slice, &stream)?` (or
//! `&CudarcView::new(&slice, &stream)?`), with `stream = Stream::borrow_cudarc(&cu)?`
//! made once; cudarc's events are waited for and recorded as its own copies do.
//!
//! Without a GPU it says so on stderr and exits with status 1; a wrong element or
//! any error also exits with status 1.
#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuda_staging::cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use cuda_staging::{CudarcView, CudarcViewMut, StagingBuffer, StagingRing, Stream, Ticket};

const WARMUP_FRAMES: usize = 10;
const FRAMES: usize = 200;
/// Elements per frame: 3x640x640 f32, the seed's largest tensor.
const N: usize = 3 * 640 * 640;

/// Element `i` of frame `frame`: never zero, different at every position of a frame
/// and at the same position of the next frame.
fn value(frame: usize, i: usize) -> f32 {
    (frame + 1) as f32 + i as f32 * 1e-3
}

/// Writes frame `frame` into `dst`, as a decoder would.
fn produce(frame: usize, dst: &mut [f32]) {
    for (i, v) in dst.iter_mut().enumerate() {
        *v = value(frame, i);
    }
}

/// Checks every element of `got` against frame `frame`.
fn check(frame: usize, got: &[f32]) -> Result<(), String> {
    match (0..N).find(|&i| got[i].to_bits() != value(frame, i).to_bits()) {
        None => Ok(()),
        Some(i) => Err(format!(
            "frame {frame}: element {i} came back as {} but was sent as {}",
            got[i],
            value(frame, i)
        )),
    }
}

/// The GPU side, cudarc's way, with our stream borrowed from cudarc's.
struct Gpu {
    ctx: Arc<CudaContext>,
    cu: Arc<CudaStream>,
    stream: Stream,
    input: CudaSlice<f32>,
    output: CudaSlice<f32>,
}

/// "the model": cudarc's device-to-device copy of the input into the output.
fn model(gpu: &mut Gpu) -> Result<(), String> {
    gpu.cu
        .memcpy_dtod(&gpu.input, &mut gpu.output)
        .map_err(|e| format!("the model (cudarc memcpy_dtod): {e}"))
}

fn err(what: &'static str) -> impl Fn(cuda_staging::Error) -> String {
    move |e| format!("{what}: {e}")
}

/// cudarc's documented way: `memcpy_htod` from the frame's `Vec` and `memcpy_dtoh`
/// into another, each synchronised by cudarc (pageable host memory).
fn cudarc_way(gpu: &mut Gpu, frames: usize) -> Result<Vec<Duration>, String> {
    let mut frame = vec![0f32; N];
    let mut out = vec![0f32; N];
    let mut times = Vec::with_capacity(frames);
    for k in 0..frames {
        produce(k, &mut frame);
        let t0 = Instant::now();
        gpu.cu
            .memcpy_htod(&frame, &mut gpu.input)
            .map_err(|e| format!("cudarc memcpy_htod: {e}"))?;
        model(gpu)?;
        gpu.cu
            .memcpy_dtoh(&gpu.output, &mut out)
            .map_err(|e| format!("cudarc memcpy_dtoh: {e}"))?;
        times.push(t0.elapsed());
        check(k, &out)?;
    }
    Ok(times)
}

/// The same loop with `StagingBuffer::upload` / `download` on cudarc's slices.
fn buffer_way(
    gpu: &mut Gpu,
    staging: &mut StagingBuffer,
    frames: usize,
) -> Result<Vec<Duration>, String> {
    let mut frame = vec![0f32; N];
    let mut out = vec![0f32; N];
    let mut times = Vec::with_capacity(frames);
    for k in 0..frames {
        produce(k, &mut frame);
        let t0 = Instant::now();
        let mut input = CudarcViewMut::new(&mut gpu.input, &gpu.stream).map_err(err("input"))?;
        staging
            .upload(&mut input, &frame, &gpu.stream)
            .map_err(err("upload"))?;
        model(gpu)?;
        let output = CudarcView::new(&gpu.output, &gpu.stream).map_err(err("output"))?;
        staging
            .download(&mut out, &output, &gpu.stream)
            .map_err(err("download"))?;
        times.push(t0.elapsed());
        check(k, &out)?;
    }
    Ok(times)
}

/// The same loop on two `StagingRing`s, one frame in flight: frame k's upload, model
/// and download are queued before frame k-1's download is waited for and checked.
/// Times the loop's period (queue frame k, wait for frame k-1): one time fewer than
/// frames, since frame 0 waits for nothing.
fn ring_way(
    gpu: &mut Gpu,
    up: &mut StagingRing,
    down: &mut StagingRing,
    frames: usize,
) -> Result<Vec<Duration>, String> {
    let mut frame = vec![0f32; N];
    let mut times = Vec::with_capacity(frames);
    let mut in_flight: Option<(usize, Ticket<f32>)> = None;
    // One more round than frames, to wait for the last one.
    for k in 0..=frames {
        let mut started = None;
        let mut next = None;
        if k < frames {
            produce(k, &mut frame);
            started = Some(Instant::now());
            let mut input =
                CudarcViewMut::new(&mut gpu.input, &gpu.stream).map_err(err("input"))?;
            up.upload(&mut input, &frame, &gpu.stream)
                .map_err(err("ring upload"))?;
            model(gpu)?;
            let output = CudarcView::new(&gpu.output, &gpu.stream).map_err(err("output"))?;
            let ticket = down
                .download(&output, N, &gpu.stream)
                .map_err(err("ring download"))?;
            next = Some((k, ticket));
        }
        if let Some((j, ticket)) = std::mem::replace(&mut in_flight, next) {
            let got = down.wait(&ticket).map_err(err("ring wait"))?;
            if let Some(t0) = started {
                times.push(t0.elapsed());
            }
            check(j, got)?;
        }
    }
    up.synchronize().map_err(err("ring synchronize"))?;
    Ok(times)
}

/// Nearest-rank percentile `p` of `v` (sorted here), in µs.
fn percentile_us(v: &mut [Duration], p: usize) -> f64 {
    v.sort_unstable();
    let rank = (p * v.len()).div_ceil(100).clamp(1, v.len());
    v[rank - 1].as_secs_f64() * 1e6
}

fn run() -> Result<(), String> {
    // Our context first: without a driver it says so, where cudarc would panic.
    let ours = cuda_staging::Context::new(0).map_err(|e| {
        format!("no usable CUDA device ({e}); this example needs an NVIDIA GPU and its driver")
    })?;
    let name = ours.name().unwrap_or_else(|_| "unknown device".into());

    // cudarc's way of setting up: a context, a stream, device memory.
    let ctx = CudaContext::new(0).map_err(|e| format!("CudaContext::new: {e}"))?;
    let cu = ctx.new_stream().map_err(|e| format!("new_stream: {e}"))?;
    let alloc = |e| format!("cudarc alloc_zeros: {e}");
    let mut gpu = Gpu {
        input: cu.alloc_zeros::<f32>(N).map_err(alloc)?,
        output: cu.alloc_zeros::<f32>(N).map_err(alloc)?,
        // Ours, on cudarc's stream: made once, for the whole loop.
        stream: Stream::borrow_cudarc(&cu).map_err(|e| format!("Stream::borrow_cudarc: {e}"))?,
        cu,
        ctx,
    };

    println!(
        "{name}: {FRAMES} frames per way ({WARMUP_FRAMES} warm-up frames before), \
         3x640x640 f32 = {} bytes each way, every element checked",
        N * 4
    );
    println!(
        "synchronous ways: upload + model + download per frame; the ring: the loop's period \
         with one frame in flight"
    );
    println!("{:<58} {:>9} {:>9}", "way", "p50 us", "p99 us");
    let total = WARMUP_FRAMES + FRAMES;
    let mut staging = StagingBuffer::new();
    let (mut up, mut down) = (StagingRing::new(), StagingRing::new());
    let ways: [(&str, Vec<Duration>); 3] = [
        (
            "cudarc: memcpy_htod / memcpy_dtoh from and into Vecs",
            cudarc_way(&mut gpu, total)?,
        ),
        (
            "StagingBuffer: upload / download on the CudaSlices",
            buffer_way(&mut gpu, &mut staging, total)?,
        ),
        (
            "StagingRing: upload / download, one frame in flight",
            ring_way(&mut gpu, &mut up, &mut down, total)?,
        ),
    ];
    for (way, mut times) in ways {
        let timed = &mut times[WARMUP_FRAMES..];
        println!(
            "{way:<58} {:>9.1} {:>9.1}",
            percentile_us(timed, 50),
            percentile_us(timed, 99)
        );
    }

    let stats = staging.stats();
    println!(
        "StagingBuffer: {} pinned allocation(s) of {} bytes, {} bytes up, {} bytes down",
        stats.allocations,
        staging.capacity(),
        stats.bytes_uploaded,
        stats.bytes_downloaded
    );
    if stats.allocations != 1 {
        return Err(format!(
            "expected one pinned allocation for the whole run, saw {}",
            stats.allocations
        ));
    }
    println!(
        "StagingRing: {} + {} pinned allocation(s), {} slot wait(s) uploading",
        up.stats().allocations,
        down.stats().allocations,
        up.stats().slot_waits
    );
    gpu.ctx
        .check_err()
        .map_err(|e| format!("cudarc recorded an error: {e}"))?;
    cuda_staging::check_deferred_errors().map_err(|e| format!("an error recorded in a drop: {e}"))
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cudarc_frames: {e}");
            ExitCode::FAILURE
        }
    }
}
