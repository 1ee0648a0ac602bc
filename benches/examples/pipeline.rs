//! An inference-shaped pipeline, three ways: the driver's pageable copies, a
//! `StagingBuffer`, and two `StagingRing`s that overlap the CPU with the GPU.
//!
//! ```text
//! cargo run --release -p benches --example pipeline
//! ```
//!
//! Per frame a 640×640×3 `u8` frame in ordinary memory is preprocessed on the CPU
//! (to normalised CHW `f32`) and uploaded; a stand-in model queued on the stream
//! derives four outputs from it (84×8400 `f32` and 4, 16 and 64 KiB) and spends GPU
//! time sized to match the CPU's; the outputs are downloaded and post-processed (the
//! best of the 84 rows of each of the 8400 columns), and the result is checked
//! against one computed on the CPU alone. With the ring, frame k's GPU work runs
//! while the CPU post-processes frame k-1 and preprocesses frame k+1:
//!
//! ```text
//! loop over frames k:
//!     up.upload_with(&mut input, n, &stream, |px| preprocess(frame(k), px))?;  // queued
//!     queue the model on `stream`;
//!     let ticket = down.download_batch(&outputs_of(k), &stream)?;                // queued
//!     let landed = down.wait(&ticket_of(k - 1))?;  // frame k-1's outputs, in place
//!     postprocess(landed);
//! ```
//!
//! Each way runs 10 warm-up and 200 timed frames; the example prints frames per
//! second, the p50 and p99 frame time, and the staging buffer's and rings' counters,
//! and exits with status 1 on any wrong result or error (or without a GPU). The
//! benchmark with the same workload: `cargo bench -p benches --bench pipeline`.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use benches::pipeline::loops::LoopColumn;
use benches::pipeline::{PipelineSettings, Workload};
use benches::Gpu;

const WARMUP_FRAMES: usize = 10;
const FRAMES: usize = 200;
const STAGE_SAMPLES: usize = 15;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pipeline example: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let gpu = Gpu::open().map_err(|e| format!("no CUDA GPU/driver found: {e}"))?;
    println!("{}", gpu.describe());
    let mut w = Workload::new(&gpu, PipelineSettings::full().scratch_bytes)?;
    let stages = w.calibrate(STAGE_SAMPLES, |step| println!("  {step}"))?;
    println!(
        "stages alone (p50): cpu {:.0} us, gpu {:.0} us with {} MiB of device copies; \
         ideal {:.1} frames/s",
        stages.cpu.p50_us(),
        stages.gpu.p50_us(),
        stages.work.bytes >> 20,
        stages.ideal_fps()
    );
    println!(
        "{:>14} {:>9} {:>9} {:>9} {:>9}",
        "loop", "frames/s", "vs ideal", "p50 us", "p99 us"
    );
    for column in LoopColumn::ALL {
        let r = w.run_loop(column, WARMUP_FRAMES, FRAMES)?;
        println!(
            "{:>14} {:>9.1} {:>8.2}x {:>9.0} {:>9.0}",
            column.name(),
            r.fps,
            r.fps / stages.ideal_fps(),
            r.frame_time.p50_us(),
            r.frame_time.p99_us()
        );
    }
    println!(
        "every frame checked ({} per loop)",
        WARMUP_FRAMES + FRAMES + 1
    );
    let s = w.staging().stats();
    println!(
        "StagingBuffer: {} pinned allocation(s), {} staged and {} batched transfers",
        s.allocations, s.staged_transfers, s.batched_transfers
    );
    for (name, ring) in [("upload", w.upload_ring()), ("download", w.download_ring())] {
        println!("{name} ring: {:?}", ring.stats());
    }
    cuda_core::check_deferred_errors().map_err(|e| format!("an error recorded in a drop: {e}"))
}
