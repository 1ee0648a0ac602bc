//! Tuning probe: times `upload` / `download` (copy-in) against the driver's pageable
//! path and against `upload_with` / `download_into` for several copy-thread counts
//! and pipeline chunk sizes, so the defaults can be chosen from measurements.
//!
//! `cargo run --release -p cuda-staging --example copy_probe` on a GPU machine.
//! Not a benchmark of record (that is `cargo xtask bench`): a quick sweep of knobs.

use std::time::Instant;

use cuda_core::result;
use cuda_staging::{Context, DeviceBuffer, Direction, StagingBuffer, Stream};

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

    let sizes = [65_536usize, 150_528, 1 << 20, 4_915_200, 8 << 20, 16 << 20];
    let threads = [1usize, 4, 8, 12, 16];
    let chunks = [0usize, 256 << 10, 512 << 10, 1 << 20, 2 << 20];
    for dir in [Direction::HostToDevice, Direction::DeviceToHost] {
        for &bytes in &sizes {
            let reps = if bytes >= 4 << 20 { 40 } else { 200 };
            let base = time(reps, || match dir {
                Direction::HostToDevice => {
                    // SAFETY: both ranges hold `bytes`; synchronised before reuse.
                    unsafe {
                        result::memcpy_htod_async(
                            dev.as_device_ptr(),
                            host.as_ptr().cast(),
                            bytes,
                            stream.as_raw(),
                        )
                    }
                    .expect("htod");
                    stream.synchronize().expect("sync");
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
                    stream.synchronize().expect("sync");
                }
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
