//! Multi-GPU (issue 14): staging buffers and rings on two or more devices, from
//! parallel threads and from one thread switching devices, every byte verified.
//!
//! - one staging buffer per GPU, each in its own thread;
//! - one staging buffer that one thread drives on device 0 and device 1 in turn, every
//!   transfer, without re-pinning or re-creating pipeline events per switch;
//! - a `StagingRing` pair per GPU, each GPU driven by its own thread;
//! - two threads, one per GPU, sharing the process-wide copy pool with large copy-in
//!   transfers both ways;
//! - a device buffer of one GPU, or a view of one, with a stream of the other is a
//!   clear error.
//!
//! They need at least two GPUs, so they are ignored by default and run by
//! `cargo xtask test-gpu --multi-gpu` (or `bash DIR/run.sh --multi-gpu` in a bundle);
//! on a machine with fewer GPUs each one fails, rather than passes. Patterns, checks
//! and the lockstep barrier are in `tests/common`.

mod common;

use common::*;
use cuda_staging::StagingConfig;
use cuda_staging::{
    pool_threads, pool_threads_started, Context, DeviceBuffer, DownloadBatch, StagingBuffer,
    StagingRing, StagingStats, Stream, UploadBatch,
};

/// How many GPUs there are; fails the test (never skips it) with fewer than two.
#[track_caller]
fn gpu_count() -> usize {
    let count = Context::device_count().expect("CUDA driver");
    assert!(
        count >= 2,
        "this test needs at least two GPUs, found {count}"
    );
    count
}

/// Device `ordinal`'s context, made current on this thread, and a stream of it.
fn gpu_at(ordinal: usize) -> (Context, Stream) {
    let ctx = Context::new(ordinal).unwrap_or_else(|e| panic!("device {ordinal}: {e}"));
    assert_eq!(ctx.ordinal(), ordinal);
    let stream = Stream::new(&ctx).unwrap_or_else(|e| panic!("stream on device {ordinal}: {e}"));
    (ctx, stream)
}

#[test]
#[ignore = "needs two or more CUDA GPUs: run with cargo xtask test-gpu --multi-gpu"]
fn one_staging_buffer_per_gpu_in_parallel_threads() {
    let count = gpu_count();
    let threads: Vec<_> = (0..count)
        .map(|ordinal| {
            std::thread::spawn(move || {
                let ctx = Context::new(ordinal).unwrap_or_else(|e| panic!("device {ordinal}: {e}"));
                assert_eq!(ctx.ordinal(), ordinal);
                let stream = Stream::new(&ctx).expect("stream");
                let mut staging = staged_buffer();
                let n = 4_915_200 / 4;
                let mut dev = DeviceBuffer::<f32>::alloc(n).expect("device buffer");
                let mut back = vec![0f32; n];
                for frame in 0..20u32 {
                    let value =
                        |i: usize| (ordinal * 1_000_003 + frame as usize * 7_919 + i) as f32;
                    let src: Vec<f32> = (0..n).map(value).collect();
                    if frame % 2 == 0 {
                        staging.upload(&mut dev, &src, &stream).expect("upload");
                    } else {
                        staging
                            .upload_with(&mut dev, n, &stream, |d: &mut [f32]| {
                                d.copy_from_slice(&src)
                            })
                            .expect("upload_with");
                    }
                    staging
                        .download(&mut back, &dev, &stream)
                        .expect("download");
                    assert_eq!(back, src, "device {ordinal} frame {frame}");
                    let direct = staging
                        .download_into(&dev, n, &stream)
                        .expect("download_into");
                    assert_eq!(direct, &src[..], "device {ordinal} frame {frame}");
                }
                (ordinal, ctx.name().expect("name"), staging.stats())
            })
        })
        .collect();
    for t in threads {
        let (ordinal, name, stats) = t.join().expect("GPU thread panicked");
        println!("MULTI-GPU: device {ordinal} ({name}): {stats:?}");
        assert_eq!(stats.transfers(), 60);
    }
}

#[test]
#[ignore = "needs two or more CUDA GPUs: run with cargo xtask test-gpu --multi-gpu"]
fn a_device_buffer_from_another_gpu_is_a_clear_error() {
    gpu_count();
    let ctx1 = Context::new(1).expect("device 1");
    let foreign = DeviceBuffer::<u8>::alloc(1024).expect("buffer on device 1");
    let ctx0 = Context::new(0).expect("device 0");
    let stream0 = Stream::new(&ctx0).expect("stream on device 0");
    let mut staging = staged_buffer();
    let err = staging.download_into(&foreign, 16, &stream0).unwrap_err();
    assert!(
        matches!(err, cuda_staging::Error::ContextMismatch { .. }),
        "{err}"
    );
    assert_eq!(staging.stats(), Default::default());
    assert_eq!(staging.capacity(), 0);
    drop(ctx1);
}

/// A view of a device buffer of one GPU, with a stream of the other: every
/// entry point refuses it before any driver call, as it refuses the whole buffer,
/// and nothing changes (no pinned memory, no counter, no slot, the device memory).
#[test]
#[ignore = "needs two or more CUDA GPUs: run with cargo xtask test-gpu --multi-gpu"]
fn a_view_from_another_gpu_is_a_clear_error() {
    gpu_count();
    let ctx1 = Context::new(1).expect("device 1");
    let sentinel = seed();
    let mut foreign = device_with::<u32>(1024, sentinel);
    assert!(foreign.context().same_as(&ctx1));
    let ctx0 = Context::new(0).expect("device 0");
    let stream0 = Stream::new(&ctx0).expect("stream on device 0");
    let mut staging = staged_buffer();
    let mut ring = StagingRing::new();
    let is_mismatch =
        |e: &cuda_staging::Error| matches!(e, cuda_staging::Error::ContextMismatch { .. });

    let mut view = foreign.slice_mut(256..512).expect("slice_mut");
    let mut ran = false;
    let e = staging
        .upload_with(&mut view, 16, &stream0, |_: &mut [u32]| ran = true)
        .unwrap_err();
    assert!(is_mismatch(&e), "{e}");
    assert!(e.to_string().contains("different CUDA context"), "{e}");
    let e = staging
        .try_upload_with(&mut view, 16, &stream0, |_: &mut [u32]| {
            ran = true;
            Ok::<(), ()>(())
        })
        .unwrap_err();
    assert!(
        matches!(&e, cuda_staging::FillError::Cuda(inner) if is_mismatch(inner)),
        "{e:?}"
    );
    let e = staging
        .upload(&mut view, &[7u32; 16], &stream0)
        .unwrap_err();
    assert!(is_mismatch(&e), "{e}");
    let e = ring
        .upload_with(&mut view, 16, &stream0, |_: &mut [u32]| ran = true)
        .unwrap_err();
    assert!(is_mismatch(&e), "{e}");
    let e = ring.upload(&mut view, &[7u32; 16], &stream0).unwrap_err();
    assert!(is_mismatch(&e), "{e}");
    assert!(!ran, "no fill runs for a refused view");

    let shared = foreign.slice(256..512).expect("slice");
    let e = staging.download_into(&shared, 16, &stream0).unwrap_err();
    assert!(is_mismatch(&e), "{e}");
    let mut host = [0u32; 16];
    let e = staging.download(&mut host, &shared, &stream0).unwrap_err();
    assert!(is_mismatch(&e), "{e}");
    assert_eq!(host, [0; 16]);
    let e = ring.download(&shared, 16, &stream0).unwrap_err();
    assert!(is_mismatch(&e), "{e}");
    let mut batch = DownloadBatch::new();
    batch.add(&shared, 16).expect("adding checks lengths only");
    let e = staging.download_batch(&batch, &stream0).unwrap_err();
    assert!(is_mismatch(&e), "{e}");
    let e = ring.download_batch(&batch, &stream0).unwrap_err();
    assert!(is_mismatch(&e), "{e}");
    drop(batch);
    let src = [9u32; 16];
    let mut view = foreign.slice_mut(256..512).expect("slice_mut");
    let mut batch = UploadBatch::new();
    batch
        .add(&mut view, &src)
        .expect("adding checks lengths only");
    let e = staging.upload_batch(&mut batch, &stream0).unwrap_err();
    assert!(is_mismatch(&e), "{e}");
    drop(batch);

    assert_eq!(staging.stats(), Default::default());
    assert_eq!(staging.capacity(), 0);
    assert_eq!(ring.stats(), Default::default());
    assert_eq!(ring.capacity(), 0);
    check(
        "the foreign buffer after refused calls",
        &device_contents(&foreign),
        sentinel,
    );
    drop(ctx1);
}

/// Sizes the switching and ring tests move: 4915200 B (a 640×640×3 `f32` tensor) goes
/// through the chunked pipeline both ways, with its per-slot events; 150528 B
/// (112×112×3) is staged in one piece, or in two halves when the copy pool is parked.
const FRAME_SIZES_BYTES: [usize; 2] = [4_915_200, 150_528];

/// The four transfers of a staging buffer.
#[derive(Clone, Copy, Debug)]
enum Op {
    Upload,
    Download,
    UploadWith,
    DownloadInto,
}

const OPS: [Op; 4] = [Op::Upload, Op::Download, Op::UploadWith, Op::DownloadInto];

/// Moves a fresh pattern through `staging` with `op`, all of `dev` (a buffer of
/// `stream`'s GPU), and checks every element: uploads by reading the device back
/// through the driver's own path, downloads after filling the device through it.
fn transfer_and_check(
    staging: &mut StagingBuffer,
    op: Op,
    dev: &mut DeviceBuffer<u32>,
    stream: &Stream,
    what: &str,
) {
    let n = dev.len();
    let s = seed();
    match op {
        Op::Upload => {
            staging
                .upload(dev, &pattern::<u32>(n, s), stream)
                .expect(what);
            check(&format_args!("{what}"), &device_contents(dev), s);
        }
        Op::UploadWith => {
            staging
                .upload_with(dev, n, stream, |d: &mut [u32]| fill_pattern(d, s))
                .expect(what);
            check(&format_args!("{what}"), &device_contents(dev), s);
        }
        Op::Download => {
            set_device(dev, s);
            let mut host = pattern::<u32>(n, seed());
            staging.download(&mut host, dev, stream).expect(what);
            check(&format_args!("{what}"), &host, s);
        }
        Op::DownloadInto => {
            set_device(dev, s);
            let landed = staging.download_into(dev, n, stream).expect(what);
            check(&format_args!("{what}"), landed, s);
        }
    }
}

/// One round of [`one_staging_buffer_switching_gpus_every_transfer_keeps_its_memory_and_events`]:
/// every size and transfer, each on device 0 and then device 1, so consecutive
/// transfers are always on different GPUs.
fn switching_round(
    staging: &mut StagingBuffer,
    streams: &[Stream; 2],
    devs: &mut [Vec<DeviceBuffer<u32>>; 2],
    round: usize,
) {
    for size in 0..FRAME_SIZES_BYTES.len() {
        for op in OPS {
            for (d, stream) in streams.iter().enumerate() {
                let what = format!(
                    "round {round}, {op:?} of {} B on device {d}",
                    FRAME_SIZES_BYTES[size]
                );
                transfer_and_check(staging, op, &mut devs[d][size], stream, &what);
            }
        }
    }
}

#[test]
#[ignore = "needs two or more CUDA GPUs: run with cargo xtask test-gpu --multi-gpu"]
fn one_staging_buffer_switching_gpus_every_transfer_keeps_its_memory_and_events() {
    gpu_count();
    let (ctx0, stream0) = gpu_at(0);
    let (ctx1, stream1) = gpu_at(1);
    let streams = [stream0, stream1];
    let alloc = |ctx: &Context| -> Vec<DeviceBuffer<u32>> {
        FRAME_SIZES_BYTES
            .iter()
            .map(|&b| DeviceBuffer::alloc_in(ctx, b / 4).expect("DeviceBuffer::alloc_in"))
            .collect()
    };
    let mut devs = [alloc(&ctx0), alloc(&ctx1)];
    let mut staging = staged_buffer();

    // The first round pins, creates each GPU's pipeline events and starts the pool.
    switching_round(&mut staging, &streams, &mut devs, 0);
    let warm = staging.stats();
    let capacity = staging.capacity();
    let pool = pool_threads_started();
    assert!(warm.allocations >= 1, "{warm:?}");
    assert!(
        warm.event_creations >= 2,
        "each GPU's pipelined transfers need events of their own: {warm:?}"
    );

    // Then the pinned memory (portable: every context DMAs from it), the events of
    // both contexts and the pool are reused at every switch.
    const ROUNDS: usize = 10;
    for round in 1..=ROUNDS {
        switching_round(&mut staging, &streams, &mut devs, round);
        let st = staging.stats();
        assert_eq!(
            (st.allocations, st.event_creations, staging.capacity()),
            (warm.allocations, warm.event_creations, capacity),
            "round {round}: re-pinned or re-created events on a device switch; {warm:?} -> {st:?}"
        );
        assert_eq!(pool_threads_started(), pool, "round {round}");
    }

    let st = staging.stats();
    let rounds = (ROUNDS + 1) as u64;
    let per_direction: u64 = FRAME_SIZES_BYTES.iter().map(|&b| b as u64).sum::<u64>() * 2 * 2;
    assert_eq!(
        st,
        StagingStats {
            staged_transfers: rounds * (OPS.len() * FRAME_SIZES_BYTES.len() * 2) as u64,
            bytes_uploaded: rounds * per_direction,
            bytes_downloaded: rounds * per_direction,
            ..warm_counters_only(&warm)
        },
        "every transfer is staged once and counted once"
    );
}

/// `s` with its transfer counters cleared: what stays fixed in a steady loop.
fn warm_counters_only(s: &StagingStats) -> StagingStats {
    StagingStats {
        allocations: s.allocations,
        peak_capacity_bytes: s.peak_capacity_bytes,
        event_creations: s.event_creations,
        ..StagingStats::default()
    }
}

/// Frames of the ring test, per GPU.
const RING_FRAMES: usize = 60;

/// One GPU's frame loop on a ring pair: upload frame k (straight into a slot, or
/// copied from a slice), copy it on the device to an output buffer, queue its
/// download, and meanwhile redeem and check frame k-1's download.
fn ring_frames(ordinal: usize, start: &Lockstep) -> (StagingRing, StagingRing) {
    let _member = start.member();
    let (_ctx, stream) = gpu_at(ordinal);
    let alloc = || -> Vec<DeviceBuffer<u32>> {
        FRAME_SIZES_BYTES
            .iter()
            .map(|&b| DeviceBuffer::alloc(b / 4).expect("DeviceBuffer::alloc"))
            .collect()
    };
    let (mut input, mut output) = (alloc(), alloc());
    let (mut up, mut down) = (StagingRing::new(), StagingRing::new());
    let mut pending = None;
    start.wait();
    for frame in 0..RING_FRAMES {
        let k = frame % FRAME_SIZES_BYTES.len();
        let n = input[k].len();
        let s = seed();
        let what = format!("device {ordinal}, frame {frame}, {} B", n * 4);
        if frame % 4 < 2 {
            up.upload_with(&mut input[k], n, &stream, |d: &mut [u32]| {
                fill_pattern(d, s)
            })
        } else {
            up.upload(&mut input[k], &pattern::<u32>(n, s), &stream)
        }
        .expect(&what);
        stream
            .memcpy_dtod(&input[k], &mut output[k])
            .expect("memcpy_dtod");
        let ticket = down.download(&output[k], n, &stream).expect(&what);
        if let Some((t, s, what)) = pending.replace((ticket, s, what)) {
            check(&what, down.wait(&t).expect(&what), s);
        }
    }
    let (t, s, what) = pending.expect("at least one frame");
    check(&what, down.wait(&t).expect(&what), s);
    up.synchronize().expect("synchronize");
    down.synchronize().expect("synchronize");
    (up, down)
}

#[test]
#[ignore = "needs two or more CUDA GPUs: run with cargo xtask test-gpu --multi-gpu"]
fn a_staging_ring_pair_per_gpu_each_driven_by_its_own_thread() {
    let count = gpu_count();
    let start = Lockstep::new(count);
    let rings: Vec<(StagingRing, StagingRing)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..count)
            .map(|ordinal| {
                let start = &start;
                scope.spawn(move || ring_frames(ordinal, start))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("GPU thread panicked"))
            .collect()
    });
    let bytes: u64 = (0..RING_FRAMES)
        .map(|f| FRAME_SIZES_BYTES[f % FRAME_SIZES_BYTES.len()] as u64)
        .sum();
    for (ordinal, (up, down)) in rings.iter().enumerate() {
        let (u, d) = (up.stats(), down.stats());
        println!("MULTI-GPU ring: device {ordinal}: up {u:?}, down {d:?}");
        assert_eq!(
            (u.uploads, u.downloads, u.bytes_uploaded),
            (RING_FRAMES as u64, 0, bytes),
            "device {ordinal}"
        );
        assert_eq!(
            (d.uploads, d.downloads, d.bytes_downloaded),
            (0, RING_FRAMES as u64, bytes),
            "device {ordinal}"
        );
        // Each slot pins at most twice (for the small size, then grown for the large
        // one); the rest of the loop reuses them.
        for (ring, st) in [(up, u), (down, d)] {
            assert!(
                st.allocations <= 2 * ring.config().slots as u64,
                "device {ordinal}: {st:?}"
            );
        }
    }
}

/// Sizes of the shared-pool test: 16 MiB streams through the 8 MiB pinned window;
/// 4915200 B is pipelined inside it.
const POOL_SIZES_BYTES: [usize; 2] = [16 << 20, 4_915_200];

/// One GPU's share of the shared-pool test: `rounds` copy-in uploads and downloads of
/// every size, each started together with the other GPU's, every element checked,
/// and the pool's threads never more than the cores.
fn copy_in_rounds(ordinal: usize, together: &Lockstep, rounds: usize) -> StagingStats {
    let _member = together.member();
    let (_ctx, stream) = gpu_at(ordinal);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut staging = staged_buffer();
    staging
        .set_config(StagingConfig {
            copy_threads: cuda_staging::default_copy_threads().max(2),
            ..staging.config()
        })
        .expect("set_config");
    let mut devs: Vec<DeviceBuffer<u32>> = POOL_SIZES_BYTES
        .iter()
        .map(|&b| DeviceBuffer::alloc(b / 4).expect("DeviceBuffer::alloc"))
        .collect();
    for round in 0..rounds {
        for dev in &mut devs {
            let n = dev.len();
            let what = format!("device {ordinal}, round {round}, {} B", n * 4);
            let s = seed();
            let src = pattern::<u32>(n, s);
            together.wait();
            staging.upload(dev, &src, &stream).expect(&what);
            check(&format_args!("upload, {what}"), &device_contents(dev), s);

            let s = seed();
            set_device(dev, s);
            let mut host = pattern::<u32>(n, seed());
            together.wait();
            staging.download(&mut host, dev, &stream).expect(&what);
            check(&format_args!("download, {what}"), &host, s);

            let started = pool_threads_started();
            assert!(
                started <= cores,
                "{what}: {started} pool threads on {cores} cores"
            );
        }
    }
    staging.stats()
}

#[test]
#[ignore = "needs two or more CUDA GPUs: run with cargo xtask test-gpu --multi-gpu"]
fn two_gpus_share_the_copy_pool_with_large_copy_in_transfers_both_ways() {
    gpu_count();
    const ROUNDS: usize = 8;
    let together = Lockstep::new(2);
    let stats: Vec<StagingStats> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2)
            .map(|ordinal| {
                let together = &together;
                scope.spawn(move || copy_in_rounds(ordinal, together, ROUNDS))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("GPU thread panicked"))
            .collect()
    });
    let per_direction = ROUNDS as u64 * POOL_SIZES_BYTES.iter().sum::<usize>() as u64;
    for (ordinal, st) in stats.iter().enumerate() {
        println!("MULTI-GPU shared pool: device {ordinal}: {st:?}");
        assert_eq!(
            transfer_counters(st),
            [
                (2 * ROUNDS * POOL_SIZES_BYTES.len()) as u64,
                0,
                0,
                per_direction,
                per_direction
            ],
            "device {ordinal}: every copy-in transfer staged (staged, direct, pinned, up, down)"
        );
    }
    // One pool for the process, however many GPUs: its helpers, never more threads
    // than cores.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let started = pool_threads_started();
    assert!(started <= cores, "{started} pool threads on {cores} cores");
    if pool_threads() > 0 {
        assert_eq!(
            started,
            pool_threads(),
            "the copies started the one pool: its helpers"
        );
    } else {
        assert_eq!(started, 0, "a one-core machine starts no pool");
    }
}
