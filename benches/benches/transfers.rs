//! Host↔device transfer benchmarks: every column of `benches`' crate docs, per
//! direction and size, in one process on one context and one non-blocking stream.
//!
//! Criterion group `"{H2D|D2H}/{bytes}"`, function id = column name (the contract with
//! `cargo xtask bench`'s renderer). `BENCH_QUICK=1` runs a short smoke pass.
//!
//! Without a CUDA GPU: `--list` still lists every benchmark; otherwise the binary
//! says "no CUDA GPU/driver found: ..." and exits 1 under `cargo bench` (nothing was
//! measured) or 0 in test mode (`cargo test --benches`, which it then skips).
#![forbid(unsafe_code)]

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use benches::cells::{cell_name, CellFilter};
use benches::{
    bridge_measured, column, dtoh_pageable_async, dtoh_raw_pinned, every_column,
    exit_on_error as ok, fill_pattern, group_id, htod_pageable_async, htod_raw_pinned,
    BenchSettings, CudarcBuffers, CudarcGpu, Direction, Gpu, RunMode, BRIDGE_COLUMNS, COLUMNS,
};
use criterion::measurement::WallTime;
use criterion::{Bencher, BenchmarkGroup, Criterion, Throughput};
use cuda_core::{DeviceBuffer, HostRegistration, PinnedBuffer};
use cuda_staging::{CudarcView, CudarcViewMut, StagingBuffer};

type Group<'a> = BenchmarkGroup<'a, WallTime>;

/// Pattern seeds, so every buffer holds different non-zero bytes.
const SEED_PAGEABLE: u8 = 1;
const SEED_REGISTERED: u8 = 2;
const SEED_RAW_PINNED: u8 = 3;
const SEED_CUDARC: u8 = 4;

fn main() -> ExitCode {
    let settings = BenchSettings::from_env();
    let mode = RunMode::from_args(std::env::args());
    let mut c = settings.criterion();

    if mode == RunMode::List {
        list(&mut c, &settings);
        return ExitCode::SUCCESS;
    }

    if settings.sizes.is_empty() {
        // `BENCH_CELLS` names only other executables' cells (an `--ab` of frame
        // cells): nothing to measure here, and no empty host buffer to register.
        eprintln!("benches: no cell of this executable is selected by BENCH_CELLS");
        return ExitCode::SUCCESS;
    }
    let gpu = match Gpu::open_for("benches", mode) {
        Ok(g) => g,
        Err(exit) => return exit,
    };

    let cudarc = match CudarcGpu::open(&gpu) {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("benches: WARNING: cudarc columns skipped, cudarc could not start: {e}");
            None
        }
    };
    let (columns, bridge) = if cudarc.is_some() {
        (COLUMNS.len(), settings.bridge_benchmark_count())
    } else {
        (COLUMNS.len() - 2, 0)
    };
    let count = settings.benchmark_count(columns) + bridge;
    eprintln!(
        "benches: {} | {} sizes x 2 directions x {columns} columns + {bridge} of the \
         cudarc bridge at the seed sizes = {count} benchmarks, expected about {:.0} s{}",
        gpu.describe(),
        settings.sizes.len(),
        settings.estimated_time_of(count).as_secs_f64(),
        if settings.quick { " (BENCH_QUICK)" } else { "" },
    );

    let started = Instant::now();
    run(&mut c, &settings, &gpu, cudarc.as_ref());
    c.final_summary();
    if let Some(rc) = &cudarc {
        ok("cudarc reported a deferred error", rc.ctx.check_err());
    }
    eprintln!("benches: done in {:.1} s", started.elapsed().as_secs_f64());
    ExitCode::SUCCESS
}

/// `--list`: registers every benchmark with a body that never runs (criterion only
/// prints the ids in list mode), so it needs no GPU.
fn list(c: &mut Criterion, settings: &BenchSettings) {
    for &bytes in &settings.sizes {
        for dir in Direction::ALL {
            let mut g = c.benchmark_group(group_id(dir, bytes));
            for col in COLUMNS {
                g.bench_function(col, |b| b.iter(|| ()));
            }
            if bridge_measured(bytes) {
                for col in BRIDGE_COLUMNS {
                    g.bench_function(col, |b| b.iter(|| ()));
                }
            }
            g.finish();
        }
    }
}

/// The scenario of every cell here ([`benches::cells`]): `back-to-back/H2D/150528/copy-in`.
const BACK_TO_BACK: &str = "back-to-back";

/// One direction and size's criterion group, measuring only the columns whose cells
/// `BENCH_CELLS` names.
struct Cells<'a, 'f> {
    group: Group<'a>,
    /// `back-to-back/{direction}/{bytes}`.
    prefix: String,
    filter: &'f CellFilter,
}

impl Cells<'_, '_> {
    /// Measures `column` with `f` if its cell is named.
    fn bench_function<F: FnMut(&mut Bencher<'_, WallTime>)>(&mut self, column: &str, f: F) {
        if self.filter.matches(&format!("{}/{column}", self.prefix)) {
            self.group.bench_function(column, f);
        }
    }
}

/// Host memory and staging shared by every size: allocated once, for the largest.
struct Host<'a> {
    /// An ordinary (pageable) `Vec`, source and destination of the pageable columns.
    pageable: Vec<u8>,
    /// Another `Vec`, page-locked with `cuMemHostRegister` for the whole run.
    registered: HostRegistration<'a, u8>,
    /// One staging buffer with default settings, as a user would keep per stream.
    staging: StagingBuffer,
}

/// Device and pinned memory of one size, allocated before its groups run.
struct SizeFixture {
    bytes: usize,
    device: DeviceBuffer<u8>,
    pinned: PinnedBuffer<u8>,
    cudarc: Option<CudarcBuffers>,
}

impl SizeFixture {
    fn new(gpu: &Gpu, cudarc: Option<&CudarcGpu>, bytes: usize, pattern: &[u8]) -> SizeFixture {
        let mut device = ok(
            "DeviceBuffer::alloc_in",
            DeviceBuffer::<u8>::alloc_in(&gpu.ctx, bytes),
        );
        ok("copy_from_host", device.copy_from_host(pattern));
        let mut pinned = ok(
            "PinnedBuffer::alloc_in",
            PinnedBuffer::<u8>::alloc_in(&gpu.ctx, bytes),
        );
        fill_pattern(&mut pinned, SEED_RAW_PINNED);
        let cudarc = cudarc.map(|rc| ok("cudarc buffers", rc.buffers(bytes, SEED_CUDARC)));
        SizeFixture {
            bytes,
            device,
            pinned,
            cudarc,
        }
    }
}

fn run(c: &mut Criterion, settings: &BenchSettings, gpu: &Gpu, cudarc: Option<&CudarcGpu>) {
    let max = settings.max_bytes();
    let mut pageable = vec![0u8; max];
    fill_pattern(&mut pageable, SEED_PAGEABLE);
    let mut registered_vec = vec![0u8; max];
    fill_pattern(&mut registered_vec, SEED_REGISTERED);
    let mut host = Host {
        pageable,
        registered: ok(
            "HostRegistration::new",
            HostRegistration::new(&gpu.ctx, &mut registered_vec),
        ),
        staging: StagingBuffer::new(),
    };

    for &bytes in &settings.sizes {
        // Rewrite the pageable source before each size, as a producer would. Large
        // pageable sources depend on the host, not only the GPU: on a two-GPU H200
        // host (32 cores) `copy_probe source` put `upload` and the driver's pageable
        // path alike at 8 to 14 ms for 64 MiB in every run, where the single-GPU
        // H200 host (16 cores) took 1.5 to 1.9 ms, though 16 threads read DRAM at
        // 70 to 85 GB/s on both (`copy_probe membw`). The tables name their host.
        fill_pattern(&mut host.pageable[..bytes], SEED_PAGEABLE);
        let mut fx = SizeFixture::new(gpu, cudarc, bytes, &host.pageable[..bytes]);
        warm_up_staging(gpu, &mut host, &mut fx);
        if let (Some(rc), true) = (cudarc, bridge_measured(bytes)) {
            warm_up_bridge(rc, &mut host, &mut fx);
        }
        // Every column finds our context current (cudarc binds the same primary
        // context), so `Context::enter` pushes nothing inside the timed loops.
        ok("Context::bind_to_thread", gpu.ctx.bind_to_thread());
        let allocations = host.staging.stats().allocations;

        for dir in Direction::ALL {
            let prefix = cell_name(BACK_TO_BACK, dir.label(), bytes);
            if !settings
                .cells
                .any(every_column().map(|col| format!("{prefix}/{col}")))
            {
                continue;
            }
            let mut group = c.benchmark_group(group_id(dir, bytes));
            group
                .throughput(Throughput::Bytes(bytes as u64))
                .sampling_mode(settings.sampling_mode(bytes));
            let mut g = Cells {
                group,
                prefix,
                filter: &settings.cells,
            };
            match dir {
                Direction::HostToDevice => bench_h2d(&mut g, gpu, cudarc, &mut host, &mut fx),
                Direction::DeviceToHost => bench_d2h(&mut g, gpu, cudarc, &mut host, &mut fx),
            }
            g.group.finish();
        }

        let now = host.staging.stats().allocations;
        if now != allocations {
            eprintln!(
                "benches: WARNING: the staging buffer pinned memory {} time(s) while \
                 timing {bytes}-byte transfers",
                now - allocations
            );
        }
    }

    let stats = host.staging.stats();
    eprintln!(
        "benches: staging stats: {} pinned allocation(s), peak {} bytes, {} staged / \
         {} pinned-source / {} direct transfers",
        stats.allocations,
        stats.peak_capacity_bytes,
        stats.staged_transfers,
        stats.pinned_source_transfers,
        stats.direct_transfers,
    );
}

/// Pins (and grows) the staging buffer and starts its copy threads for this size,
/// through every path the timed loops use, so no allocation lands in the timing.
fn warm_up_staging(gpu: &Gpu, host: &mut Host<'_>, fx: &mut SizeFixture) {
    let n = fx.bytes;
    let s = &gpu.stream;
    let src = &host.pageable[..n];
    ok(
        "warm-up upload_with",
        host.staging
            .upload_with(&mut fx.device, n, s, |dst: &mut [u8]| {
                dst.copy_from_slice(src)
            }),
    );
    ok(
        "warm-up download_into",
        host.staging.download_into(&fx.device, n, s).map(|_| ()),
    );
    ok(
        "warm-up upload",
        host.staging.upload(&mut fx.device, src, s),
    );
    ok(
        "warm-up upload (registered)",
        host.staging
            .upload(&mut fx.device, &host.registered[..n], s),
    );
    ok(
        "warm-up download",
        host.staging
            .download(&mut host.pageable[..n], &fx.device, s),
    );
    ok(
        "warm-up download (registered)",
        host.staging
            .download(&mut host.registered[..n], &fx.device, s),
    );
}

/// The same warm-up through the bridge, on cudarc's stream and slice, so that the
/// bridge's columns find the staging buffer pinned and its helpers started too.
fn warm_up_bridge(rc: &CudarcGpu, host: &mut Host<'_>, fx: &mut SizeFixture) {
    let n = fx.bytes;
    let s = &rc.bridge;
    let src = &host.pageable[..n];
    let rb = fx.cudarc.as_mut().expect("cudarc buffers next to cudarc");
    let mut dst = ok("CudarcViewMut::new", CudarcViewMut::new(&mut rb.device, s));
    ok(
        "warm-up bridge upload",
        host.staging.upload(&mut dst, src, s),
    );
    ok(
        "warm-up bridge upload_with",
        host.staging
            .upload_with(&mut dst, n, s, |d: &mut [u8]| d.copy_from_slice(src)),
    );
    let src = ok("CudarcView::new", CudarcView::new(&rb.device, s));
    ok(
        "warm-up bridge download",
        host.staging.download(&mut host.pageable[..n], &src, s),
    );
    ok(
        "warm-up bridge download_into",
        host.staging.download_into(&src, n, s).map(|_| ()),
    );
}

fn bench_h2d(
    g: &mut Cells<'_, '_>,
    gpu: &Gpu,
    cudarc: Option<&CudarcGpu>,
    host: &mut Host<'_>,
    fx: &mut SizeFixture,
) {
    let n = fx.bytes;
    let stream = &gpu.stream;
    let src = &host.pageable[..n];
    let device = &mut fx.device;

    g.bench_function(column::PAGEABLE, |b| {
        b.iter(|| ok("copy_from_host", device.copy_from_host(black_box(src))))
    });
    g.bench_function(column::PAGEABLE_ASYNC, |b| {
        b.iter(|| {
            let r = htod_pageable_async(device, black_box(src), stream);
            ok("memcpy_htod_sync (pageable)", r)
        })
    });
    g.bench_function(column::COPY_IN, |b| {
        b.iter(|| {
            ok(
                "upload",
                host.staging.upload(device, black_box(src), stream),
            )
        })
    });
    let registered = &host.registered[..n];
    g.bench_function(column::COPY_IN_REGISTERED, |b| {
        b.iter(|| {
            let r = host.staging.upload(device, black_box(registered), stream);
            ok("upload (registered)", r)
        })
    });
    g.bench_function(column::RESIDENT, |b| {
        b.iter(|| {
            // The producer's own writes are its work, not the transfer's: leave the
            // pinned bytes as they are.
            let r = host
                .staging
                .upload_with(device, n, stream, |dst: &mut [u8]| {
                    black_box(dst);
                });
            ok("upload_with", r)
        })
    });
    let pinned = &fx.pinned;
    g.bench_function(column::RAW_PINNED, |b| {
        b.iter(|| {
            let r = htod_raw_pinned(device, black_box(pinned), stream);
            ok("memcpy_htod (pinned) + synchronize", r)
        })
    });

    if let (Some(rc), Some(rb)) = (cudarc, fx.cudarc.as_mut()) {
        g.bench_function(column::CUDARC_PINNED, |b| {
            b.iter(|| {
                let r = rc
                    .stream
                    .memcpy_htod(black_box(&rb.pinned), &mut rb.device)
                    .and_then(|()| rc.stream.synchronize());
                ok("cudarc memcpy_htod (pinned)", r)
            })
        });
        g.bench_function(column::CUDARC_PAGEABLE, |b| {
            b.iter(|| {
                let r = rc
                    .stream
                    .memcpy_htod(black_box(src), &mut rb.device)
                    .and_then(|()| rc.stream.synchronize());
                ok("cudarc memcpy_htod (pageable)", r)
            })
        });
        if bridge_measured(n) {
            let s = &rc.bridge;
            // The view is made per call, as a cudarc user's loop would: it is where
            // cudarc's event waits happen, and part of the cost measured.
            g.bench_function(column::CUDARC_COPY_IN, |b| {
                b.iter(|| {
                    let r = CudarcViewMut::new(&mut rb.device, s)
                        .and_then(|mut dst| host.staging.upload(&mut dst, black_box(src), s));
                    ok("upload (cudarc bridge)", r)
                })
            });
            g.bench_function(column::CUDARC_RESIDENT, |b| {
                b.iter(|| {
                    let r = CudarcViewMut::new(&mut rb.device, s).and_then(|mut dst| {
                        host.staging.upload_with(&mut dst, n, s, |d: &mut [u8]| {
                            black_box(d);
                        })
                    });
                    ok("upload_with (cudarc bridge)", r)
                })
            });
        }
    }
}

fn bench_d2h(
    g: &mut Cells<'_, '_>,
    gpu: &Gpu,
    cudarc: Option<&CudarcGpu>,
    host: &mut Host<'_>,
    fx: &mut SizeFixture,
) {
    let n = fx.bytes;
    let stream = &gpu.stream;
    let device = &fx.device;

    g.bench_function(column::PAGEABLE, |b| {
        b.iter(|| {
            let dst = black_box(&mut host.pageable[..n]);
            ok("copy_to_host", device.copy_to_host(dst))
        })
    });
    g.bench_function(column::PAGEABLE_ASYNC, |b| {
        b.iter(|| {
            let dst = black_box(&mut host.pageable[..n]);
            let r = dtoh_pageable_async(dst, device, stream);
            ok("memcpy_dtoh_sync (pageable)", r)
        })
    });
    g.bench_function(column::COPY_IN, |b| {
        b.iter(|| {
            let dst = black_box(&mut host.pageable[..n]);
            ok("download", host.staging.download(dst, device, stream))
        })
    });
    g.bench_function(column::COPY_IN_REGISTERED, |b| {
        b.iter(|| {
            let dst = black_box(&mut host.registered[..n]);
            ok(
                "download (registered)",
                host.staging.download(dst, device, stream),
            )
        })
    });
    g.bench_function(column::RESIDENT, |b| {
        b.iter(|| {
            let r = host.staging.download_into(device, n, stream);
            black_box(ok("download_into", r));
        })
    });
    let pinned = &mut fx.pinned;
    g.bench_function(column::RAW_PINNED, |b| {
        b.iter(|| {
            let r = dtoh_raw_pinned(black_box(&mut *pinned), device, stream);
            ok("memcpy_dtoh (pinned) + synchronize", r)
        })
    });

    if let (Some(rc), Some(rb)) = (cudarc, fx.cudarc.as_mut()) {
        g.bench_function(column::CUDARC_PINNED, |b| {
            b.iter(|| {
                let r = rc
                    .stream
                    .memcpy_dtoh(&rb.device, black_box(&mut rb.pinned))
                    .and_then(|()| rc.stream.synchronize());
                ok("cudarc memcpy_dtoh (pinned)", r)
            })
        });
        g.bench_function(column::CUDARC_PAGEABLE, |b| {
            b.iter(|| {
                let dst = black_box(&mut host.pageable[..n]);
                let r = rc
                    .stream
                    .memcpy_dtoh(&rb.device, dst)
                    .and_then(|()| rc.stream.synchronize());
                ok("cudarc memcpy_dtoh (pageable)", r)
            })
        });
        if bridge_measured(n) {
            let s = &rc.bridge;
            g.bench_function(column::CUDARC_COPY_IN, |b| {
                b.iter(|| {
                    let dst = black_box(&mut host.pageable[..n]);
                    let r = CudarcView::new(&rb.device, s)
                        .and_then(|src| host.staging.download(dst, &src, s));
                    ok("download (cudarc bridge)", r)
                })
            });
            g.bench_function(column::CUDARC_RESIDENT, |b| {
                b.iter(|| {
                    let r = CudarcView::new(&rb.device, s).and_then(|src| {
                        host.staging
                            .download_into(&src, n, s)
                            .map(|landed| black_box(landed.len()))
                    });
                    ok("download_into (cudarc bridge)", r);
                })
            });
        }
    }
}
