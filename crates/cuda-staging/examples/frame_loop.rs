//! A per-frame inference-style loop over one reused `StagingBuffer`.
//!
//! ```text
//! cargo run --release -p cuda-staging --example frame_loop
//! ```
//!
//! For each of 300 frames: preprocess a 3×640×640 f32 frame straight into pinned
//! memory with `upload_with`, run a stand-in device step (a device-to-device copy into
//! an output buffer, queued on the same stream), read the output straight out of
//! pinned memory with `download_into` and check every element. Prints the median
//! upload and download time per frame and the staging stats: one pinned allocation
//! for the whole run.
//!
//! Without a GPU it says so on stderr and exits with status 1.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use cuda_core::result;
use cuda_staging::{Context, DeviceBuffer, StagingBuffer, Stream};

const FRAMES: usize = 300;
const CHANNELS: usize = 3;
const SIDE: usize = 640;
const N: usize = CHANNELS * SIDE * SIDE;

/// The "preprocessed pixel" at index `i` of `frame`: differs per element and frame.
fn pixel(frame: usize, i: usize) -> f32 {
    let c = i / (SIDE * SIDE);
    let raw = ((i * 7 + frame * 131 + c * 17) % 256) as f32;
    raw / 255.0 - 0.5 + frame as f32
}

fn median_us(v: &mut [Duration]) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e6
}

fn run() -> Result<(), String> {
    let ctx = Context::new(0).map_err(|e| {
        format!("no usable CUDA device ({e}); this example needs an NVIDIA GPU and its driver")
    })?;
    let name = ctx.name().unwrap_or_else(|_| "unknown device".into());
    let stream = Stream::new(&ctx).map_err(|e| format!("creating a stream: {e}"))?;
    let mut d_input =
        DeviceBuffer::<f32>::alloc(N).map_err(|e| format!("device allocation: {e}"))?;
    let d_output = DeviceBuffer::<f32>::alloc(N).map_err(|e| format!("device allocation: {e}"))?;
    let mut staging = StagingBuffer::new();

    let mut up = Vec::with_capacity(FRAMES);
    let mut down = Vec::with_capacity(FRAMES);
    for frame in 0..FRAMES {
        // Preprocess straight into pinned memory.
        let t = Instant::now();
        staging
            .upload_with(&mut d_input, N, &stream, |dst: &mut [f32]| {
                for (i, v) in dst.iter_mut().enumerate() {
                    *v = pixel(frame, i);
                }
            })
            .map_err(|e| format!("frame {frame}: upload_with: {e}"))?;
        up.push(t.elapsed());

        // The "model": copy input to output on the same stream.
        {
            let _g = ctx.enter().map_err(|e| e.to_string())?;
            // SAFETY: both buffers hold N f32 and live until after the stream is
            // synchronised (download_into below waits for this copy); the stream is
            // live and its context current.
            unsafe {
                result::memcpy_dtod_async(
                    d_output.as_device_ptr(),
                    d_input.as_device_ptr(),
                    N * std::mem::size_of::<f32>(),
                    stream.as_raw(),
                )
            }
            .map_err(|e| format!("frame {frame}: device step: {e}"))?;
        }

        // Read the result straight out of pinned memory (ordered after the step).
        let t = Instant::now();
        let out = staging
            .download_into(&d_output, N, &stream)
            .map_err(|e| format!("frame {frame}: download_into: {e}"))?;
        down.push(t.elapsed());

        if let Some(i) = (0..N).find(|&i| out[i].to_bits() != pixel(frame, i).to_bits()) {
            return Err(format!(
                "frame {frame}: element {i} is {} but should be {}",
                out[i],
                pixel(frame, i)
            ));
        }
    }

    let stats = staging.stats();
    println!(
        "{name}: {FRAMES} frames of {CHANNELS}x{SIDE}x{SIDE} f32 ({} bytes), all verified",
        N * 4
    );
    println!(
        "median per frame: upload_with {:.1} us (includes preprocessing), download_into {:.1} us",
        median_us(&mut up),
        median_us(&mut down)
    );
    println!("stats: {stats:#?}");
    println!(
        "pinned allocations: {} (capacity {} bytes)",
        stats.allocations,
        staging.capacity()
    );
    if stats.allocations != 1 {
        return Err(format!(
            "expected one pinned allocation for the whole run, saw {}",
            stats.allocations
        ));
    }
    Ok(())
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
