//! Tuning probe: times `upload` / `download` (copy-in) against the driver's pageable
//! path and against `upload_with` / `download_into` for several copy-thread counts
//! and pipeline chunk sizes, so the defaults can be chosen from measurements.
//!
//! `cargo run --release -p cuda-staging --example copy_probe` on a GPU machine.
//! Not a benchmark of record (that is `cargo xtask bench`): a quick sweep of knobs.

use std::time::Instant;

use std::sync::Barrier;

use cuda_core::result;
use cuda_staging::{Context, DeviceBuffer, Direction, PinnedBuffer, StagingBuffer, Stream};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn time<F: FnMut()>(reps: usize, mut f: F) -> f64 {
    for _ in 0..3 {
        f();
    }
    median(
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect(),
    )
}

fn main() {
    let ctx = match Context::new(0) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("copy_probe needs a CUDA GPU: {e}");
            std::process::exit(1);
        }
    };
    let stream = Stream::new(&ctx).expect("stream");
    let max = 16 << 20;
    let mut dev = DeviceBuffer::<u8>::alloc(max).expect("device buffer");
    let mut host: Vec<u8> = (0..max).map(|i| (i % 251) as u8 + 1).collect();
    println!(
        "device {}, {} cores",
        ctx.name().unwrap_or_default(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    // Cost of the page-lock query on a pageable pointer.
    {
        let _g = ctx.enter().expect("enter");
        let n = 20_000;
        let t = Instant::now();
        let mut locked = 0;
        for i in 0..n {
            locked += result::is_page_locked(host[i % 1000..].as_ptr().cast()) as usize;
        }
        println!(
            "is_page_locked(pageable): {:.3} us per call ({locked} true)",
            t.elapsed().as_secs_f64() * 1e6 / n as f64
        );
    }

    copy_out_rates(&stream, &dev, &mut host);
    idle_frames(&stream, &mut dev, &mut host);

    let sizes = [65_536usize, 150_528, 1 << 20, 4_915_200, 8 << 20, 16 << 20];
    let threads = [1usize, 4, 8, 12, 16];
    let chunks = [0usize, 256 << 10, 512 << 10, 1 << 20, 2 << 20];
    for dir in [Direction::HostToDevice, Direction::DeviceToHost] {
        for &bytes in &sizes {
            let reps = if bytes >= 4 << 20 { 40 } else { 200 };
            let base = time(reps, || {
                pageable_copy(dir, &mut dev, &mut host, bytes, &stream)
            });
            let mut resident_buf = StagingBuffer::new();
            let resident = time(reps, || match dir {
                Direction::HostToDevice => {
                    resident_buf
                        .upload_with(&mut dev, bytes, &stream, |d: &mut [u8]| {
                            std::hint::black_box(d);
                        })
                        .expect("upload_with");
                }
                Direction::DeviceToHost => {
                    std::hint::black_box(
                        resident_buf
                            .download_into(&dev, bytes, &stream)
                            .expect("download_into"),
                    );
                }
            });
            let mut line =
                format!("{dir:?} {bytes:>9}: pageable-async {base:8.1} resident {resident:8.1} |");
            for &t in &threads {
                for &c in &chunks {
                    if c != 0 && bytes <= 1 << 20 {
                        continue; // not pipelined
                    }
                    let mut s = StagingBuffer::new();
                    s.set_copy_threads(t);
                    s.set_pipeline_chunk_bytes(c);
                    s.set_stage_min_bytes(Direction::HostToDevice, 0);
                    let us = time(reps, || match dir {
                        Direction::HostToDevice => {
                            s.upload(&mut dev, &host[..bytes], &stream).expect("upload")
                        }
                        Direction::DeviceToHost => s
                            .download(&mut host[..bytes], &dev, &stream)
                            .expect("download"),
                    });
                    line.push_str(&format!(" t{t}/c{}K {us:.1}", c >> 10));
                }
            }
            println!("{line}");
        }
    }
    let _ = DeviceBuffer::<u8>::free(dev);
}

/// Host copy-out rate from pinned memory into pageable memory, split over `threads`
/// (spawned once per configuration, released by a barrier per repetition), right
/// after a DMA wrote the pinned bytes ("fresh") and again without a DMA ("again").
fn copy_out_rates(stream: &Stream, dev: &DeviceBuffer<u8>, host: &mut [u8]) {
    let max = dev.len();
    let mut pinned = PinnedBuffer::<u8>::alloc(max).expect("pinned");
    for &bytes in &[1usize << 20, 4_915_200, 16 << 20] {
        for &threads in &[1usize, 4, 8, 16] {
            let mut line = format!("copy-out {bytes:>9} B, {threads:>2} threads:");
            for fresh in [true, false] {
                let reps = 30;
                let per = bytes.div_ceil(threads).next_multiple_of(4096);
                let src_addr = pinned.as_ptr() as usize;
                let dst_addr = host.as_mut_ptr() as usize;
                let start = Barrier::new(threads + 1);
                let done = Barrier::new(threads + 1);
                let mut times = Vec::with_capacity(reps);
                std::thread::scope(|scope| {
                    for t in 0..threads {
                        let (start, done) = (&start, &done);
                        scope.spawn(move || {
                            for _ in 0..reps + 1 {
                                start.wait();
                                let off = (t * per).min(bytes);
                                let n = per.min(bytes - off);
                                // SAFETY: each thread copies its own disjoint range
                                // inside both buffers; the main thread touches neither
                                // between the two barriers.
                                unsafe {
                                    std::ptr::copy_nonoverlapping(
                                        (src_addr + off) as *const u8,
                                        (dst_addr + off) as *mut u8,
                                        n,
                                    )
                                };
                                done.wait();
                            }
                        });
                    }
                    for rep in 0..reps + 1 {
                        if fresh || rep == 0 {
                            // SAFETY: `pinned` and `dev` hold at least `bytes`; synchronised
                            // before the copy threads read it.
                            unsafe {
                                result::memcpy_dtoh_async(
                                    src_addr as *mut std::ffi::c_void,
                                    dev.as_device_ptr(),
                                    bytes,
                                    stream.as_raw(),
                                )
                            }
                            .expect("dtoh");
                            stream.synchronize().expect("sync");
                        }
                        let t0 = Instant::now();
                        start.wait();
                        done.wait();
                        if rep > 0 {
                            times.push(t0.elapsed().as_secs_f64() * 1e6);
                        }
                    }
                });
                let us = median(times);
                line.push_str(&format!(
                    " {} {us:.1} us ({:.1} GB/s)",
                    if fresh { "fresh" } else { "again" },
                    bytes as f64 / us / 1e3
                ));
            }
            println!("{line}");
        }
    }
    pinned.fill(0);
}

/// The once-per-frame case: a 2 ms gap before every transfer, so the copy workers
/// have parked (they spin 200 µs) and caches have moved on. Semantic 6 must hold
/// here too: `upload` / `download` no slower than the driver's pageable path.
fn idle_frames(stream: &Stream, dev: &mut DeviceBuffer<u8>, host: &mut [u8]) {
    let gap = std::time::Duration::from_millis(2);
    let mut staging = StagingBuffer::new();
    for &bytes in &[65_536usize, 150_528, 1 << 20, 4_915_200] {
        for dir in [Direction::HostToDevice, Direction::DeviceToHost] {
            let mut timed = |staged: bool| {
                let mut times = Vec::with_capacity(40);
                for rep in 0..43 {
                    std::thread::sleep(gap);
                    let t = Instant::now();
                    match (dir, staged) {
                        (Direction::HostToDevice, true) => {
                            staging.upload(dev, &host[..bytes], stream).expect("upload")
                        }
                        (Direction::DeviceToHost, true) => staging
                            .download(&mut host[..bytes], dev, stream)
                            .expect("download"),
                        (_, false) => pageable_copy(dir, dev, host, bytes, stream),
                    }
                    if rep >= 3 {
                        times.push(t.elapsed().as_secs_f64() * 1e6);
                    }
                }
                median(times)
            };
            let staged = timed(true);
            let pageable = timed(false);
            println!(
                "idle 2 ms {dir:?} {bytes:>9}: copy-in {staged:8.1} us, pageable-async {pageable:8.1} us ({:.2}x)",
                pageable / staged
            );
        }
    }
}

/// The driver's pageable path, async on `stream` then a sync: the baseline.
fn pageable_copy(
    dir: Direction,
    dev: &mut DeviceBuffer<u8>,
    host: &mut [u8],
    bytes: usize,
    stream: &Stream,
) {
    match dir {
        Direction::HostToDevice => {
            // SAFETY: both ranges hold `bytes` (callers pass `bytes <= len` of both);
            // synchronised before either is touched again.
            unsafe {
                result::memcpy_htod_async(
                    dev.as_device_ptr(),
                    host.as_ptr().cast(),
                    bytes,
                    stream.as_raw(),
                )
            }
            .expect("htod");
        }
        Direction::DeviceToHost => {
            // SAFETY: as above.
            unsafe {
                result::memcpy_dtoh_async(
                    host.as_mut_ptr().cast(),
                    dev.as_device_ptr(),
                    bytes,
                    stream.as_raw(),
                )
            }
            .expect("dtoh");
        }
    }
    stream.synchronize().expect("sync");
}
