//! Which route each transfer took, and how long it took: the `tracing` feature's
//! spans, printed by `tracing-subscriber`'s fmt layer as each one closes.
//!
//! ```text
//! cargo run --release -p cuda-staging --features tracing --example tracing
//! ```
//!
//! (In a bundle from `cargo xtask test-gpu --bundle DIR`: `DIR/bin/cuda-staging-example-tracing`;
//! `bash DIR/run.sh` runs it after the tests.)
//!
//! On device 0 it moves the seed's shapes: 150528 B (112x112x3 f32) and 4915200 B
//! (640x640x3 f32) up and back down, each twice back to back (the first pins the
//! buffer's memory) and once more after a 2 ms sleep, as a frame loop would; a 4 KiB
//! upload, an upload from page-locked memory, a `StagingRing` upload and download,
//! and a `DownloadBatch` of a model's four outputs. Every transfer's data is checked.
//!
//! Each span prints as one line when it closes, for instance (times made up)
//!
//! ```text
//! 2026-01-01T12:00:00.000000Z DEBUG transfer{op="download" direction="d2h" bytes=4915200 route="pipelined" chunks=8 copy_threads=4 helpers=3 elapsed_us=131.4}: cuda_staging: close time.busy=132µs time.idle=1.02µs
//! ```
//!
//! The fields are documented in the crate docs ("Seeing which route a transfer
//! took"); `time.busy` is the span's own duration as the subscriber measured it
//! (the span is entered for the whole call). A ring transfer's span ends once the
//! transfer is queued, so its time is the call's, not the DMA's.
//!
//! The subscriber here: `tracing_subscriber::registry()` with the fmt layer
//! (`FmtSpan::CLOSE`) and a `Targets` filter passing `cuda_staging` at `DEBUG`.
//! The spans are at `DEBUG`; a subscriber that keeps `INFO` and above sees none of
//! them, and they then cost a level check each.
//!
//! Without a GPU it says so on stderr and exits with status 1.
#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::time::Duration;

use cuda_staging::{
    Context, DeviceBuffer, DownloadBatch, Error, PinnedBuffer, StagingBuffer, StagingRing, Stream,
};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Bytes of the seed's 112x112x3 and 640x640x3 f32 tensors.
const SHAPES: [usize; 2] = [150_528, 4_915_200];

/// Element `i` of transfer `call`: never zero, different per element and per call.
fn value(call: usize, i: usize) -> f32 {
    (call + 1) as f32 + i as f32 * 1e-3
}

/// The values of transfer `call`.
fn frame(call: usize, n: usize) -> Vec<f32> {
    (0..n).map(|i| value(call, i)).collect()
}

/// Whether `got` holds the values of transfer `call`, bit for bit.
fn check(what: &str, got: &[f32], call: usize) -> Result<(), String> {
    match got
        .iter()
        .enumerate()
        .find(|&(i, v)| v.to_bits() != value(call, i).to_bits())
    {
        None => Ok(()),
        Some((i, v)) => Err(format!(
            "{what}: element {i} came back as {v}, expected {}",
            value(call, i)
        )),
    }
}

fn cuda(what: &'static str) -> impl Fn(Error) -> String {
    move |e| format!("{what}: {e}")
}

fn run() -> Result<(), String> {
    let ctx = Context::new(0).map_err(|e| {
        format!("no usable CUDA device ({e}); this example needs an NVIDIA GPU and its driver")
    })?;
    let stream = Stream::new(&ctx).map_err(cuda("creating a stream"))?;
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_span_events(FmtSpan::CLOSE))
        .with(Targets::new().with_target("cuda_staging", LevelFilter::DEBUG))
        .try_init()
        .map_err(|e| format!("installing the subscriber: {e}"))?;
    println!(
        "{}: one line per transfer, as its span closes",
        ctx.name().unwrap_or_else(|_| "device 0".into())
    );

    let mut staging = StagingBuffer::new();
    let mut call = 0;
    for bytes in SHAPES {
        let n = bytes / 4;
        let mut dev = DeviceBuffer::<f32>::alloc(n).map_err(cuda("device allocation"))?;
        let mut back = vec![0f32; n];
        for pass in ["back to back", "back to back", "after a 2 ms sleep"] {
            if pass.starts_with("after") {
                std::thread::sleep(Duration::from_millis(2));
            }
            println!("-- {bytes} B up and down, {pass}");
            call += 1;
            let src = frame(call, n);
            staging
                .upload(&mut dev, &src, &stream)
                .map_err(cuda("upload"))?;
            staging
                .download(&mut back, &dev, &stream)
                .map_err(cuda("download"))?;
            check("upload then download", &back, call)?;
        }
    }

    println!("-- 4 KiB up: below the staging threshold");
    call += 1;
    let small = frame(call, 1024);
    let mut dev_small = DeviceBuffer::<f32>::alloc(1024).map_err(cuda("device allocation"))?;
    staging
        .upload(&mut dev_small, &small, &stream)
        .map_err(cuda("upload"))?;
    let mut small_back = vec![0f32; 1024];
    dev_small
        .copy_to_host(&mut small_back)
        .map_err(cuda("copy_to_host"))?;
    check("small upload", &small_back, call)?;

    println!("-- 150528 B up from page-locked memory (a PinnedBuffer)");
    call += 1;
    let n = SHAPES[0] / 4;
    let mut pinned = PinnedBuffer::<f32>::alloc(n).map_err(cuda("PinnedBuffer::alloc"))?;
    for (i, v) in pinned.iter_mut().enumerate() {
        *v = value(call, i);
    }
    let mut dev = DeviceBuffer::<f32>::alloc(n).map_err(cuda("device allocation"))?;
    staging
        .upload(&mut dev, &pinned, &stream)
        .map_err(cuda("upload"))?;
    let mut back = vec![0f32; n];
    dev.copy_to_host(&mut back).map_err(cuda("copy_to_host"))?;
    check("upload from pinned memory", &back, call)?;

    println!("-- a StagingRing: 150528 B up, and down (its span ends once queued)");
    call += 1;
    let mut ring = StagingRing::new();
    let src = frame(call, n);
    ring.upload(&mut dev, &src, &stream)
        .map_err(cuda("ring upload"))?;
    let ticket = ring
        .download(&dev, n, &stream)
        .map_err(cuda("ring download"))?;
    check(
        "ring upload then download",
        ring.wait(&ticket).map_err(cuda("ring wait"))?,
        call,
    )?;

    println!("-- a DownloadBatch of a model's four outputs, one wait");
    let sizes = [1024usize, 4096, 16384, n];
    let mut outputs = Vec::new();
    let mut calls = Vec::new();
    for &len in &sizes {
        call += 1;
        let mut d = DeviceBuffer::<f32>::alloc(len).map_err(cuda("device allocation"))?;
        d.copy_from_host(&frame(call, len))
            .map_err(cuda("copy_from_host"))?;
        outputs.push(d);
        calls.push(call);
    }
    let mut batch = DownloadBatch::new();
    let mut parts = Vec::new();
    for (d, &len) in outputs.iter().zip(&sizes) {
        parts.push(batch.add(d, len).map_err(cuda("DownloadBatch::add"))?);
    }
    let landed = staging
        .download_batch(&batch, &stream)
        .map_err(cuda("download_batch"))?;
    for (part, &c) in parts.into_iter().zip(&calls) {
        check(
            "batch part",
            landed.get(part).map_err(cuda("Landed::get"))?,
            c,
        )?;
    }

    println!("-- the buffer's totals: {:?}", staging.stats());
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tracing example: {e}");
            ExitCode::FAILURE
        }
    }
}
