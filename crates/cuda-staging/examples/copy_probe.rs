//! Tuning probe: times `upload` / `download` (copy-in) against the driver's pageable
//! path and against `upload_with` / `download_into` for several copy-thread counts
//! and pipeline chunk sizes, so the defaults can be chosen from measurements.
//!
//! `cargo run --release -p cuda-staging --example copy_probe [SECTION...]` on a GPU
//! machine, sections `query` (page-lock query answers and cost), `small` (where
//! the upload lower bound belongs), `stores` (plain
//! against streaming stores before a DMA), `registered` (DMA from registered memory),
//! `interleaved` (candidate defaults), `copyout` (copy-out rates, also under a
//! concurrent DMA), `idle` (2 ms gaps between transfers), `sweep` (threads
//! against chunk sizes), `source` (a 64 MiB pageable source under the bench's
//! memory pattern) and `membw` (host read and copy rates by size and thread
//! count) and `chunks` (pipeline chunk sizes at the default thread count); none
//! runs them all. Not a benchmark of record (that is
//! `cargo xtask bench`): a quick look at the knobs.

use std::time::Instant;

use std::sync::Barrier;

use cuda_core::result;
use cuda_staging::{
    Context, DeviceBuffer, Direction, HostRegistration, PinnedBuffer, StagingBuffer, Stream,
};

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

    // Sections named on the command line, or all of them.
    let wanted: Vec<String> = std::env::args().skip(1).collect();
    let run = |name: &str| wanted.is_empty() || wanted.iter().any(|w| w == name);
    if run("query") {
        query_costs(&ctx, &dev, &mut host);
    }
    if run("stores") {
        h2d_store_kinds(&stream, &mut dev, &host);
    }
    if run("small") {
        small_uploads(&stream, &mut dev, &mut host);
    }
    if run("registered") {
        registered_dma(&ctx, &stream, &mut dev);
    }
    if run("interleaved") {
        interleaved(&stream, &mut dev, &mut host);
    }
    if run("copyout") {
        copy_out_rates(&stream, &dev, &mut host);
    }
    if run("idle") {
        idle_frames(&stream, &mut dev, &mut host);
    }
    if run("sweep") {
        sweep(&stream, &mut dev, &mut host);
    }
    if run("source") {
        source_reads(&ctx, &stream);
    }
    if run("membw") {
        memory_rates();
    }
    if run("chunks") {
        chunk_choices(&stream, &mut dev, &mut host);
    }
    let _ = DeviceBuffer::<u8>::free(dev);
}

/// The bench's memory pattern (a 64 MiB pageable source and a registered 64 MiB
/// `Vec` held throughout, per size a device buffer, two pinned buffers and a growing
/// staging buffer): per 8 MiB block of the source, one thread's read rate and where
/// the block's first page lies in physical memory, then `upload` and the driver's
/// pageable path. Looks for the slow-source episodes seen at H2D 64 MiB.
fn source_reads(ctx: &Context, stream: &Stream) {
    const BLOCK: usize = 8 << 20;
    let max = 64 << 20;
    let mut src = vec![0u8; max];
    src.iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = (i % 249) as u8 + 1);
    let mut reg_vec = vec![0u8; max];
    reg_vec
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = (i % 241) as u8 + 1);
    let _reg = HostRegistration::new(ctx, &mut reg_vec[..]).expect("register");
    let mut staging = StagingBuffer::new();
    let pagemap = std::fs::File::open("/proc/self/pagemap").ok();
    let frame_gib = |addr: usize| -> String {
        use std::os::unix::fs::FileExt;
        let mut e = [0u8; 8];
        match &pagemap {
            Some(f) if f.read_exact_at(&mut e, (addr / 4096 * 8) as u64).is_ok() => {
                let pfn = u64::from_le_bytes(e) & ((1 << 55) - 1);
                format!("{:.1}G", (pfn * 4096) as f64 / (1u64 << 30) as f64)
            }
            _ => "?".into(),
        }
    };
    let report = |staging: &mut StagingBuffer,
                  label: &str,
                  bytes: usize,
                  dev: &mut DeviceBuffer<u8>,
                  src: &mut [u8]| {
        let reads: Vec<String> = src
            .chunks_exact(BLOCK)
            .map(|b| {
                let t = Instant::now();
                let sum = b.chunks_exact(8).fold(0u64, |a, w| {
                    a.wrapping_add(u64::from_ne_bytes(w.try_into().unwrap()))
                });
                std::hint::black_box(sum);
                let gbps = BLOCK as f64 / t.elapsed().as_secs_f64() / 1e9;
                format!("{gbps:.1}@{}", frame_gib(b.as_ptr() as usize))
            })
            .collect();
        let up = time(7, || {
            staging.upload(dev, &src[..bytes], stream).expect("upload")
        });
        let pg = time(7, || {
            pageable_copy(Direction::HostToDevice, dev, src, bytes, stream)
        });
        let dptr = dev.as_device_ptr();
        let rg = time(5, || {
            let mut reg = HostRegistration::new(ctx, &mut src[..bytes]).expect("register");
            // SAFETY: the registration holds `bytes`; nothing else touches it or the
            // device buffer until `raw_copy` has synchronised.
            unsafe {
                raw_copy(
                    Direction::HostToDevice,
                    dptr,
                    reg.as_mut_ptr(),
                    bytes,
                    stream,
                )
            }
        });
        println!(
            "source {label} {bytes:>8}: upload {up:.0} us, pageable {pg:.0} us, register+DMA+\
             unregister {rg:.0} us; 1-thread read GB/s@frame per 8 MiB block: {}",
            reads.join(" ")
        );
    };
    for bytes in [4usize << 20, 16 << 20, 32 << 20, 64 << 20] {
        src[..bytes]
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = (i % 249) as u8 + 1);
        let mut dev = DeviceBuffer::<u8>::alloc(bytes).expect("device");
        let mut p1 = PinnedBuffer::<u8>::alloc(bytes).expect("pinned");
        let mut p2 = PinnedBuffer::<u8>::alloc(bytes).expect("pinned");
        p1.fill(3);
        p2.fill(4);
        staging
            .upload(&mut dev, &src[..bytes], stream)
            .expect("warm-up");
        report(&mut staging, "fresh", bytes, &mut dev, &mut src);
        if bytes == max {
            for _ in 0..3 {
                std::thread::sleep(std::time::Duration::from_secs(1));
                report(&mut staging, "later", bytes, &mut dev, &mut src);
            }
        }
    }
}

/// Pipeline chunk sizes at the default thread count, interleaved, for the sizes
/// where downloads are copy-bound; `t16` is the automatic chunk on 16 threads.
fn chunk_choices(stream: &Stream, dev: &mut DeviceBuffer<u8>, host: &mut [u8]) {
    let chunks = [
        0usize,
        256 << 10,
        384 << 10,
        512 << 10,
        768 << 10,
        1 << 20,
        1280 << 10,
    ];
    for dir in [Direction::DeviceToHost, Direction::HostToDevice] {
        for &bytes in &[2usize << 20, 4 << 20, 4_915_200, 8 << 20] {
            let mut bufs: Vec<StagingBuffer> = chunks
                .iter()
                .map(|&c| {
                    let mut s = StagingBuffer::new();
                    s.set_pipeline_chunk_bytes(c);
                    s
                })
                .collect();
            let mut wide = StagingBuffer::new();
            wide.set_copy_threads(16);
            bufs.push(wide);
            let (base, m) = against_pageable(&mut bufs, dir, dev, host, bytes, stream, 20, 4);
            let mut line = format!(
                "chunks {dir:?} {bytes:>8} (t{}): pageable-async {base:.1} |",
                bufs[0].copy_threads()
            );
            for (i, us) in m.into_iter().enumerate() {
                let name = match chunks.get(i) {
                    Some(0) => "auto".to_string(),
                    Some(c) => format!("{}K", c >> 10),
                    None => "t16-auto".to_string(),
                };
                line.push_str(&format!(" {name} {us:.1} ({:.2}x)", base / us));
            }
            println!("{line}");
        }
    }
}

/// Host memory rates (GB/s) by buffer size and thread count: reading (a sum),
/// copying with streaming stores and copying with `copy_from_slice`. Buffers far
/// larger than the L3 show what the cores get from DRAM.
fn memory_rates() {
    let max = 1usize << 30;
    let src: Vec<u8> = (0..max).map(|i| (i % 247) as u8).collect();
    let mut dst = vec![1u8; max];
    for bytes in [16usize << 20, 64 << 20, 256 << 20, 1 << 30] {
        for threads in [1usize, 4, 8, 16] {
            let part = bytes / threads;
            let mut rates = [0.0f64; 3];
            for (kind, rate) in rates.iter_mut().enumerate() {
                let us = time(5, || {
                    std::thread::scope(|s| {
                        for (d, r) in dst[..bytes].chunks_mut(part).zip(src[..bytes].chunks(part)) {
                            s.spawn(move || match kind {
                                0 => {
                                    let sum = r.chunks_exact(8).fold(0u64, |a, w| {
                                        a.wrapping_add(u64::from_ne_bytes(w.try_into().unwrap()))
                                    });
                                    std::hint::black_box(sum);
                                }
                                1 => cuda_staging::copy_streaming(d, r).expect("copy"),
                                _ => d.copy_from_slice(r),
                            });
                        }
                    })
                });
                *rate = bytes as f64 / us / 1e3;
            }
            println!(
                "membw {:>5} MiB {threads:>2} threads: read {:.1} GB/s, streaming copy {:.1} \
                 GB/s, copy_from_slice {:.1} GB/s",
                bytes >> 20,
                rates[0],
                rates[1],
                rates[2]
            );
        }
    }
}

/// Copy threads against pipeline chunk sizes, per direction and size.
fn sweep(stream: &Stream, dev: &mut DeviceBuffer<u8>, host: &mut [u8]) {
    let sizes = [
        65_536usize,
        150_528,
        256 << 10,
        512 << 10,
        1 << 20,
        2 << 20,
        4_915_200,
        8 << 20,
        16 << 20,
    ];
    let threads = [1usize, 4, 8, 12, 16];
    let chunks = [
        0usize,
        64 << 10,
        128 << 10,
        256 << 10,
        512 << 10,
        1 << 20,
        2 << 20,
    ];
    for dir in [Direction::HostToDevice, Direction::DeviceToHost] {
        for &bytes in &sizes {
            let reps = if bytes >= 4 << 20 { 40 } else { 200 };
            let base = time(reps, || pageable_copy(dir, dev, host, bytes, stream));
            let mut resident_buf = StagingBuffer::new();
            let resident = time(reps, || match dir {
                Direction::HostToDevice => {
                    resident_buf
                        .upload_with(dev, bytes, stream, |d: &mut [u8]| {
                            std::hint::black_box(d);
                        })
                        .expect("upload_with");
                }
                Direction::DeviceToHost => {
                    std::hint::black_box(
                        resident_buf
                            .download_into(dev, bytes, stream)
                            .expect("download_into"),
                    );
                }
            });
            let mut line =
                format!("{dir:?} {bytes:>9}: pageable-async {base:8.1} resident {resident:8.1} |");
            for &t in &threads {
                for &c in &chunks {
                    if c >= bytes || (c != 0 && c * 16 < bytes) {
                        continue; // not pipelined, or too many chunks to matter
                    }
                    let mut s = StagingBuffer::new();
                    s.set_copy_threads(t);
                    s.set_pipeline_chunk_bytes(c);
                    s.set_stage_min_bytes(Direction::HostToDevice, 0);
                    let us = time(reps, || {
                        convenience_copy(&mut s, dir, dev, host, bytes, stream)
                    });
                    line.push_str(&format!(" t{t}/c{}K {us:.1}", c >> 10));
                }
            }
            println!("{line}");
        }
    }
}

/// What the page-lock query answers for each kind of memory, and what it costs.
fn query_costs(ctx: &Context, dev: &DeviceBuffer<u8>, host: &mut [u8]) {
    let _g = ctx.enter().expect("enter");
    let pinned = PinnedBuffer::<u8>::alloc(1 << 20).expect("pinned");
    let time_query = |what: &str, p: *const u8, bytes: usize| {
        let n = 20_000;
        let t = Instant::now();
        let mut hits = 0usize;
        for i in 0..n {
            hits += result::page_locked_block(p.wrapping_add(i % 64).cast()).is_some() as usize;
        }
        let block_us = t.elapsed().as_secs_f64() * 1e6 / n as f64;
        let t = Instant::now();
        let mut whole = 0usize;
        for _ in 0..n {
            whole += result::is_page_locked_range(p.cast(), bytes) as usize;
        }
        let range_us = t.elapsed().as_secs_f64() * 1e6 / n as f64;
        println!(
            "query {what:>10}: block {:?} (p = {:#x}, {bytes} B); page_locked_block {block_us:.3} us \
             ({hits}/{n} locked), is_page_locked_range {range_us:.3} us ({whole}/{n})",
            result::page_locked_block(p.cast()),
            p as usize,
        );
    };
    time_query("pinned", pinned.as_ptr(), pinned.len());
    time_query("pageable", host.as_ptr(), 1 << 20);
    time_query("device", dev.as_device_ptr() as *const u8, 4096);
    let (head, rest) = host.split_at_mut(12_345);
    let reg = HostRegistration::new(ctx, &mut rest[..(1 << 20) + 7]).expect("register");
    time_query("registered", reg.as_ptr(), reg.len());
    println!(
        "query registered+1: whole range plus one byte page-locked? {}; from one byte before? {}",
        result::is_page_locked_range(reg.as_ptr().cast(), reg.len() + 1),
        result::is_page_locked_range(head.as_ptr().wrapping_add(12_344).cast(), 2),
    );
}

/// H2D on one thread, by how the pinned bytes were written: plain stores, streaming
/// stores (always, whatever the size), or not written at all (the DMA alone).
fn h2d_store_kinds(stream: &Stream, dev: &mut DeviceBuffer<u8>, host: &[u8]) {
    let mut pinned = PinnedBuffer::<u8>::alloc(1 << 20).expect("pinned");
    for &bytes in &[
        4_096usize, 8_192, 16_384, 24_576, 32_768, 49_152, 65_536, 131_072, 150_528, 262_144,
        524_288,
    ] {
        let dptr = dev.as_device_ptr();
        let dma = |p: &PinnedBuffer<u8>| {
            // SAFETY: `pinned` and `dev` hold at least `bytes`; nothing writes the
            // pinned bytes until `raw_copy` has synchronised.
            unsafe {
                raw_copy(
                    Direction::HostToDevice,
                    dptr,
                    p.as_ptr().cast_mut(),
                    bytes,
                    stream,
                )
            }
        };
        let plain = time(200, || {
            pinned[..bytes].copy_from_slice(&host[..bytes]);
            dma(&pinned);
        });
        let streaming = time(200, || {
            cuda_staging::copy_streaming(&mut pinned[..bytes], &host[..bytes]).expect("copy");
            dma(&pinned);
        });
        let copy_only = time(200, || {
            cuda_staging::copy_streaming(&mut pinned[..bytes], &host[..bytes]).expect("copy");
        });
        let dma_only = time(200, || dma(&pinned));
        let base = time(200, || {
            // SAFETY: `host` holds at least `bytes` and is only read; the driver
            // stages the pageable source itself.
            unsafe {
                raw_copy(
                    Direction::HostToDevice,
                    dptr,
                    host.as_ptr().cast_mut(),
                    bytes,
                    stream,
                )
            }
        });
        println!(
            "h2d one thread {bytes:>7}: plain+dma {plain:6.1} streaming+dma {streaming:6.1} \
             (streaming copy {copy_only:5.1}) dma {dma_only:6.1} pageable-async {base:6.1} us"
        );
    }
}

/// The raw DMA (`cuMemcpy*Async` and a sync, nothing of ours) from driver-allocated
/// pinned memory against the same from a registered `Vec`, interleaved, and
/// `upload` / `download` from that registered `Vec`: where the registered
/// column's gap to `resident` comes from.
fn registered_dma(ctx: &Context, stream: &Stream, dev: &mut DeviceBuffer<u8>) {
    let max = 1 << 20;
    let pinned = PinnedBuffer::<u8>::alloc(max).expect("pinned");
    let mut v: Vec<u8> = (0..max + 4096).map(|i| (i % 253) as u8).collect();
    let mut reg = HostRegistration::new(ctx, &mut v[..]).expect("register");
    let mut staging = StagingBuffer::new();
    for &bytes in &[
        4_096usize, 16_384, 32_768, 65_536, 131_072, 150_528, 196_608, 262_144,
    ] {
        for dir in [Direction::HostToDevice, Direction::DeviceToHost] {
            let dptr = dev.as_device_ptr();
            let m = interleave(3, 30, 20, std::time::Duration::ZERO, |v| match v {
                // SAFETY: both buffers hold over `bytes` and are touched by nothing
                // else until `raw_copy` has synchronised.
                0 => unsafe { raw_copy(dir, dptr, pinned.as_ptr().cast_mut(), bytes, stream) },
                // SAFETY: as above.
                1 => unsafe { raw_copy(dir, dptr, reg.as_mut_ptr(), bytes, stream) },
                _ => match dir {
                    Direction::HostToDevice => {
                        staging.upload(dev, &reg[..bytes], stream).expect("upload")
                    }
                    Direction::DeviceToHost => staging
                        .download(&mut reg[..bytes], dev, stream)
                        .expect("download"),
                },
            });
            println!(
                "registered {dir:?} {bytes:>7}: raw from PinnedBuffer {:.2} us, raw from \
                 registered {:.2} us ({:+.1}%), upload/download from registered {:.2} us ({:+.1}%)",
                m[0],
                m[1],
                (m[1] / m[0] - 1.0) * 100.0,
                m[2],
                (m[2] / m[0] - 1.0) * 100.0
            );
        }
    }
}

/// Small uploads, interleaved: the driver's pageable path, `upload` as shipped,
/// `upload` staging everything (lower bound 0), and a raw DMA from pinned memory.
/// Where the H2D lower bound belongs.
fn small_uploads(stream: &Stream, dev: &mut DeviceBuffer<u8>, host: &mut [u8]) {
    let mut shipped = StagingBuffer::new();
    let mut staged = StagingBuffer::new();
    staged.set_stage_min_bytes(Direction::HostToDevice, 0);
    let pinned = PinnedBuffer::<u8>::alloc(1 << 20).expect("pinned");
    let dptr = dev.as_device_ptr();
    let names = ["pageable-async", "upload", "upload-staged", "raw-pinned"];
    for &bytes in &[
        4_096usize, 8_192, 16_384, 24_576, 32_768, 49_152, 65_536, 98_304,
    ] {
        let m = interleave(
            names.len(),
            40,
            25,
            std::time::Duration::ZERO,
            |v| match v {
                0 => pageable_copy(Direction::HostToDevice, dev, host, bytes, stream),
                1 => shipped.upload(dev, &host[..bytes], stream).expect("upload"),
                2 => staged.upload(dev, &host[..bytes], stream).expect("upload"),
                // SAFETY: `pinned` and `dev` hold at least `bytes`; nothing writes the
                // pinned bytes.
                _ => unsafe {
                    raw_copy(
                        Direction::HostToDevice,
                        dptr,
                        pinned.as_ptr().cast_mut(),
                        bytes,
                        stream,
                    )
                },
            },
        );
        let mut line = format!("small H2D {bytes:>6}:");
        for (i, us) in m.iter().enumerate() {
            line.push_str(&format!(" {} {us:.2} ({:.2}x)", names[i], m[0] / us));
        }
        println!("{line}");
    }
}

/// Candidate defaults side by side, interleaved round by round so drift in the
/// machine hits them all alike: the previous default (8 threads, pipelining only
/// over 1 MiB) and the current automatic chunking with 8, 12 and 16 threads.
fn interleaved(stream: &Stream, dev: &mut DeviceBuffer<u8>, host: &mut [u8]) {
    let old_chunk = |bytes: usize, dir: Direction| {
        if bytes <= 1 << 20 {
            return bytes.next_multiple_of(64 << 10);
        }
        let (pieces, min) = match dir {
            Direction::HostToDevice => (4, 256 << 10),
            Direction::DeviceToHost => (8, 512 << 10),
        };
        (bytes / pieces)
            .clamp(min, 2 << 20)
            .next_multiple_of(64 << 10)
    };
    let sizes = [
        65_536usize,
        150_528,
        262_144,
        524_288,
        1 << 20,
        2 << 20,
        4_915_200,
        8 << 20,
        16 << 20,
    ];
    for dir in [Direction::HostToDevice, Direction::DeviceToHost] {
        for &bytes in &sizes {
            let configs = [
                ("t8-old", 8, old_chunk(bytes, dir)),
                ("t8", 8, 0),
                ("t12", 12, 0),
                ("t16", 16, 0),
            ];
            let mut bufs: Vec<StagingBuffer> = configs
                .iter()
                .map(|&(_, t, c)| {
                    let mut s = StagingBuffer::new();
                    s.set_copy_threads(t);
                    s.set_pipeline_chunk_bytes(c);
                    s
                })
                .collect();
            let per_round = if bytes >= 4 << 20 { 4 } else { 20 };
            let (base, m) =
                against_pageable(&mut bufs, dir, dev, host, bytes, stream, 15, per_round);
            let mut line = format!("interleaved {dir:?} {bytes:>9}: pageable-async {base:7.1} |");
            for (i, us) in m.into_iter().enumerate() {
                line.push_str(&format!(" {} {us:.1} ({:.2}x)", configs[i].0, base / us));
            }
            println!("{line}");
        }
    }
}

/// Host copy-out rate from pinned memory into pageable memory, split over `threads`
/// (spawned once per configuration, released by a barrier per repetition), right
/// after a DMA wrote the pinned bytes ("fresh"), again without a DMA ("again"), and
/// fresh while a DMA of the same size lands in other pinned memory ("busy": the copy
/// time, then the time until both the copy and that DMA are done).
fn copy_out_rates(stream: &Stream, dev: &DeviceBuffer<u8>, host: &mut [u8]) {
    let max = dev.len();
    let mut pinned = PinnedBuffer::<u8>::alloc(max).expect("pinned");
    let mut other = PinnedBuffer::<u8>::alloc(max).expect("pinned");
    let dtoh = |to: usize, bytes: usize| {
        // SAFETY: `to` is one of the pinned buffers, both at least `bytes` long, not
        // read by the copy threads until synchronised (or, for `other`, never).
        unsafe {
            result::memcpy_dtoh_async(
                to as *mut std::ffi::c_void,
                dev.as_device_ptr(),
                bytes,
                stream.as_raw(),
            )
        }
        .expect("dtoh");
    };
    for &bytes in &[1usize << 20, 4_915_200, 16 << 20] {
        for &threads in &[1usize, 4, 8, 16] {
            let mut line = format!("copy-out {bytes:>9} B, {threads:>2} threads:");
            for mode in ["fresh", "again", "busy"] {
                let reps = 30;
                let per = bytes.div_ceil(threads).next_multiple_of(4096);
                let src_addr = pinned.as_ptr() as usize;
                let other_addr = other.as_mut_ptr() as usize;
                let dst_addr = host.as_mut_ptr() as usize;
                let start = Barrier::new(threads + 1);
                let done = Barrier::new(threads + 1);
                let mut times = Vec::with_capacity(reps);
                let mut both = Vec::with_capacity(reps);
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
                        if mode != "again" || rep == 0 {
                            dtoh(src_addr, bytes);
                            stream.synchronize().expect("sync");
                        }
                        let t0 = Instant::now();
                        if mode == "busy" {
                            dtoh(other_addr, bytes);
                        }
                        start.wait();
                        done.wait();
                        let copied = t0.elapsed().as_secs_f64() * 1e6;
                        stream.synchronize().expect("sync");
                        if rep > 0 {
                            times.push(copied);
                            both.push(t0.elapsed().as_secs_f64() * 1e6);
                        }
                    }
                });
                let us = median(times);
                line.push_str(&format!(
                    " {mode} {us:.1} us ({:.1} GB/s)",
                    bytes as f64 / us / 1e3
                ));
                if mode == "busy" {
                    line.push_str(&format!(" both done {:.1} us", median(both)));
                }
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
    // Uploads also through `upload_with` on the calling thread alone, filled with
    // ordinary stores and with streaming ones: which store kind suits a cold copy.
    let variants = ["copy-in", "pageable-async", "with-plain", "with-streaming"];
    for &bytes in &[65_536usize, 150_528, 262_144, 1 << 20, 4_915_200] {
        for dir in [Direction::HostToDevice, Direction::DeviceToHost] {
            let n = if dir == Direction::HostToDevice { 4 } else { 2 };
            let m = interleave(n, 40, 1, gap, |v| match (dir, v) {
                (Direction::HostToDevice, 0) => {
                    staging.upload(dev, &host[..bytes], stream).expect("upload")
                }
                (Direction::DeviceToHost, 0) => staging
                    .download(&mut host[..bytes], dev, stream)
                    .expect("download"),
                (_, 1) => pageable_copy(dir, dev, host, bytes, stream),
                (_, 2) => staging
                    .upload_with(dev, bytes, stream, |d: &mut [u8]| {
                        d.copy_from_slice(&host[..bytes])
                    })
                    .expect("upload_with"),
                _ => staging
                    .upload_with(dev, bytes, stream, |d: &mut [u8]| {
                        cuda_staging::copy_for_dma(d, &host[..bytes]).expect("copy")
                    })
                    .expect("upload_with"),
            });
            let mut line = format!("idle 2 ms {dir:?} {bytes:>9}:");
            for (v, us) in m.iter().enumerate() {
                line.push_str(&format!(" {} {us:.1} ({:.2}x)", variants[v], m[1] / us));
            }
            println!("{line}");
        }
    }
}

/// One `upload` or `download` of `bytes` through `s`.
fn convenience_copy(
    s: &mut StagingBuffer,
    dir: Direction,
    dev: &mut DeviceBuffer<u8>,
    host: &mut [u8],
    bytes: usize,
    stream: &Stream,
) {
    match dir {
        Direction::HostToDevice => s.upload(dev, &host[..bytes], stream).expect("upload"),
        Direction::DeviceToHost => s
            .download(&mut host[..bytes], dev, stream)
            .expect("download"),
    }
}

/// Medians (µs) of the driver's pageable path and of each buffer's `upload` or
/// `download`, all run in turns by [`interleave`].
#[allow(clippy::too_many_arguments)]
fn against_pageable(
    bufs: &mut [StagingBuffer],
    dir: Direction,
    dev: &mut DeviceBuffer<u8>,
    host: &mut [u8],
    bytes: usize,
    stream: &Stream,
    rounds: usize,
    per_round: usize,
) -> (f64, Vec<f64>) {
    let n = bufs.len();
    let mut m = interleave(n + 1, rounds, per_round, std::time::Duration::ZERO, |v| {
        if v == n {
            pageable_copy(dir, dev, host, bytes, stream);
        } else {
            convenience_copy(&mut bufs[v], dir, dev, host, bytes, stream);
        }
    });
    let base = m.pop().expect("baseline");
    (base, m)
}

/// The driver's pageable path, async on `stream` then a sync: the baseline.
fn pageable_copy(
    dir: Direction,
    dev: &mut DeviceBuffer<u8>,
    host: &mut [u8],
    bytes: usize,
    stream: &Stream,
) {
    assert!(bytes <= host.len() && bytes <= dev.len());
    // SAFETY: both ranges hold `bytes` (checked above) and stay borrowed until the
    // sync inside; the driver stages pageable memory itself.
    unsafe { raw_copy(dir, dev.as_device_ptr(), host.as_mut_ptr(), bytes, stream) }
}

/// One `cuMemcpy{HtoD,DtoH}Async` of `bytes` between `host` and `dptr`, then a sync:
/// nothing of ours in the way.
///
/// # Safety
/// 1. `host` is readable (H2D) or writable (D2H), and `dptr` device memory of the
///    stream's context, for `bytes` bytes; nothing else touches either until this
///    returns.
unsafe fn raw_copy(dir: Direction, dptr: u64, host: *mut u8, bytes: usize, stream: &Stream) {
    // SAFETY: condition 1; the copy has landed when `synchronize` returns.
    unsafe {
        match dir {
            Direction::HostToDevice => {
                result::memcpy_htod_async(dptr, host.cast(), bytes, stream.as_raw())
            }
            Direction::DeviceToHost => {
                result::memcpy_dtoh_async(host.cast(), dptr, bytes, stream.as_raw())
            }
        }
    }
    .expect("copy");
    stream.synchronize().expect("sync");
}

/// Medians (µs) of `variants` alternatives run in turns, `per_round` calls each per
/// round, so drift in the machine hits them alike. The first round warms up and is
/// not counted; `pause` is slept, untimed, before every call.
fn interleave(
    variants: usize,
    rounds: usize,
    per_round: usize,
    pause: std::time::Duration,
    mut run: impl FnMut(usize),
) -> Vec<f64> {
    let mut times = vec![Vec::with_capacity(rounds * per_round); variants];
    for round in 0..=rounds {
        for (v, slot) in times.iter_mut().enumerate() {
            for _ in 0..per_round {
                if !pause.is_zero() {
                    std::thread::sleep(pause);
                }
                let t = Instant::now();
                run(v);
                if round > 0 {
                    slot.push(t.elapsed().as_secs_f64() * 1e6);
                }
            }
        }
    }
    times.into_iter().map(median).collect()
}
