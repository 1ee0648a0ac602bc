//! GPU tests of `StagingBuffer`: data integrity on every route and at every chunk
//! boundary, stream ordering on both sides of the routing threshold, prefixes,
//! page-locked routing, reuse and growth, bad input, panics in `fill`, calibration
//! and threads.
//!
//! Every test is `#[ignore]`d so that `cargo test` passes without a GPU; run them
//! with `cargo xtask test-gpu` (or `cargo test -p cuda-staging --test gpu --
//! --ignored` on a GPU machine). Without a device each one fails loudly.
//!
//! Conventions: every transfer moves a pattern that differs per element and per
//! call (never zeros), and every element is compared. Uploads are checked by reading
//! the device back through the driver's own synchronous `copy_to_host`; downloads by
//! filling the device through `copy_from_host` first. Each test has its own stream
//! and `StagingBuffer` (tests run in parallel threads).
//!
//! The driver-error test (an invalid device pointer) lives in its own binary,
//! `gpu_driver_error.rs`: were the driver ever to report it as an asynchronous
//! fault, the sticky error would poison the process's primary context and fail
//! every test running beside it.

mod common;

use std::mem::size_of;
use std::panic::{catch_unwind, AssertUnwindSafe};

use common::*;
use cuda_staging::{
    default_copy_threads, pool_threads, pool_threads_started, Context, DeviceBuffer, Direction,
    Error, HostRegistration, PinnedBuffer, StagingBuffer, StagingStats, Stream,
    DEFAULT_AUTO_STAGE_MAX_BYTES, PIPELINE_WINDOW_BYTES,
};

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;
/// Bytes of the seed's three tensor shapes (112×112×3, 128×128×3, 640×640×3 f32).
const SEED_SHAPES: [usize; 3] = [150_528, 196_608, 4_915_200];

// ---------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------

/// Queues a memset of all of `d` to `value` on `stream` (asynchronous).
fn memset_async(d: &mut DeviceBuffer<u8>, value: u8, stream: &Stream) {
    stream.memset_bytes(d, value).expect("memset_bytes");
}

/// Semantic 1, checked where work was queued ahead of the transfer: when a transfer
/// returns, nothing queued on its stream is still running (`cuStreamQuery`). Reading
/// the device back cannot show this by itself: cuda-core's synchronous reads wait
/// for queued writes to the buffer first.
fn assert_stream_idle(what: &str, stream: &Stream) {
    assert!(
        stream.query().expect("Stream::query"),
        "{what}: the call returned while work on its stream was still running"
    );
}

/// A `Vec` holding a page-aligned region of `n` elements with at least a page of
/// slack after it, so that registrations made by tests running in parallel never
/// share a page. Returns the Vec and the region's first index.
fn registrable<T: Pattern>(n: usize) -> (Vec<T>, usize) {
    const PAGE: usize = 4096;
    let sz = size_of::<T>();
    let v = vec![T::zeroed(); n + 2 * PAGE / sz + 1];
    let addr = v.as_ptr() as usize;
    let off_bytes = (PAGE - addr % PAGE) % PAGE;
    assert_eq!(off_bytes % sz, 0, "element alignment divides the page size");
    (v, off_bytes / sz)
}

fn elems<T>(bytes: usize) -> usize {
    (bytes / size_of::<T>()).max(1)
}

// ---------------------------------------------------------------------------------
// 1. data integrity of every method, every size, four element types
// ---------------------------------------------------------------------------------

/// 1 element, 4 KiB, the seed's two small shapes, exactly the seed threshold, one
/// element past it, 4.7 MiB and 64 MiB.
fn integrity_sizes<T>() -> [usize; 8] {
    [
        size_of::<T>(),
        4 * KIB,
        150_528,
        196_608,
        DEFAULT_AUTO_STAGE_MAX_BYTES,
        DEFAULT_AUTO_STAGE_MAX_BYTES + size_of::<T>(),
        4_915_200,
        64 * MIB,
    ]
}

fn integrity<T: Pattern>() {
    let (_ctx, stream) = gpu();
    let ty = std::any::type_name::<T>();
    let sz = size_of::<T>();
    let mut fast = staged_buffer();
    let mut stage_all = staged_buffer();
    assert_eq!(stage_all.auto_stage_max_bytes(), usize::MAX);
    let mut seed_routing = staged_buffer();
    seed_routing.set_auto_stage_max_bytes(DEFAULT_AUTO_STAGE_MAX_BYTES);
    assert_eq!(
        seed_routing.auto_stage_max_bytes(),
        DEFAULT_AUTO_STAGE_MAX_BYTES
    );

    for bytes in integrity_sizes::<T>() {
        let n = elems::<T>(bytes);
        let nbytes = n * sz;
        let what = format!("{ty} x {n} ({nbytes} B)");
        let mut dev = DeviceBuffer::<T>::alloc(n).expect("DeviceBuffer::alloc");

        // upload_with: fill writes straight into pinned memory.
        let s = seed();
        let before = fast.stats();
        let mut fill_len = None;
        fast.upload_with(&mut dev, n, &stream, |dst: &mut [T]| {
            fill_len = Some(dst.len());
            fill_pattern(dst, s);
        })
        .expect("upload_with");
        assert_eq!(fill_len, Some(n), "{what}: fill gets exactly n elements");
        check(&format!("upload_with {what}"), &device_contents(&dev), s);
        assert_counted(
            &format!("upload_with {what}"),
            before,
            fast.stats(),
            Route::Staged,
            nbytes,
            0,
        );
        assert!(fast.capacity() >= nbytes, "{what}: capacity");

        // download_into: read straight out of pinned memory.
        let s = seed();
        set_device(&mut dev, s);
        let before = fast.stats();
        let got = fast.download_into(&dev, n, &stream).expect("download_into");
        assert_eq!(got.len(), n);
        check(&format!("download_into {what}"), got, s);
        assert_counted(
            &format!("download_into {what}"),
            before,
            fast.stats(),
            Route::Staged,
            0,
            nbytes,
        );

        // upload / download, stage-all default routing and the seed's 512 KiB routing.
        for (routing, staging) in [
            ("default routing", &mut stage_all),
            ("512 KiB routing", &mut seed_routing),
        ] {
            let route_up = if staging.stages(Direction::HostToDevice, nbytes) {
                Route::Staged
            } else {
                Route::Direct
            };
            let route_down = if staging.stages(Direction::DeviceToHost, nbytes) {
                Route::Staged
            } else {
                Route::Direct
            };
            if routing == "default routing" {
                // Uploads under 32 KiB go to the driver (DEFAULT_STAGE_MIN_BYTES);
                // everything else is staged.
                let up = if nbytes >= 32 << 10 {
                    Route::Staged
                } else {
                    Route::Direct
                };
                assert_eq!((route_up, route_down), (up, Route::Staged));
            }

            let s = seed();
            let src = pattern::<T>(n, s);
            set_device(&mut dev, seed()); // something else there first
            let before = staging.stats();
            staging.upload(&mut dev, &src, &stream).expect("upload");
            check(
                &format!("upload {what}, {routing}"),
                &device_contents(&dev),
                s,
            );
            assert_counted(
                &format!("upload {what}, {routing}"),
                before,
                staging.stats(),
                route_up,
                nbytes,
                0,
            );

            let s = seed();
            set_device(&mut dev, s);
            let mut host = pattern::<T>(n, seed()); // something else there first
            let before = staging.stats();
            staging
                .download(&mut host, &dev, &stream)
                .expect("download");
            check(&format!("download {what}, {routing}"), &host, s);
            assert_counted(
                &format!("download {what}, {routing}"),
                before,
                staging.stats(),
                route_down,
                0,
                nbytes,
            );
        }
    }
    // The convenience path never pins more than its window.
    assert!(stage_all.capacity() <= PIPELINE_WINDOW_BYTES);
    assert!(seed_routing.capacity() <= PIPELINE_WINDOW_BYTES);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn integrity_u8_every_method_every_size() {
    integrity::<u8>();
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn integrity_f32_every_method_every_size() {
    integrity::<f32>();
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn integrity_f64_every_method_every_size() {
    integrity::<f64>();
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn integrity_user_pod_struct_every_method_every_size() {
    assert_eq!(size_of::<Detection>(), 16);
    integrity::<Detection>();
}

// ---------------------------------------------------------------------------------
// 2. fast-path integrity at chunk boundaries, copy threads, unaligned host slices
// ---------------------------------------------------------------------------------

/// Around the streaming-store threshold (32 KiB), the parallel-copy threshold
/// (64 KiB), the download and upload pipelining thresholds (256 KiB, 1 MiB), an odd
/// size, and past the 8 MiB window (ring reuse).
const BOUNDARY_BYTES: [usize; 17] = [
    32 * KIB - 1,
    32 * KIB,
    32 * KIB + 1,
    64 * KIB - 1,
    64 * KIB,
    64 * KIB + 1,
    256 * KIB - 1,
    256 * KIB,
    256 * KIB + 1,
    MIB - 1,
    MIB,
    MIB + 1,
    3 * MIB + 7,
    PIPELINE_WINDOW_BYTES - 1,
    PIPELINE_WINDOW_BYTES + 1,
    17 * MIB + 3,
    33 * MIB + 5,
];

fn chunk_boundaries(threads: usize, chunk: usize) {
    let (_ctx, stream) = gpu();
    // One buffer reused over growing sizes, and a fresh one per size (a window of
    // exactly the rounded size).
    let mut reused = staged_buffer();
    reused.set_copy_threads(threads);
    reused.set_pipeline_chunk_bytes(chunk);
    assert_eq!(reused.copy_threads(), threads);
    assert_eq!(reused.pipeline_chunk_bytes(), chunk);
    let mut fast = staged_buffer();
    fast.set_copy_threads(threads);
    // Stage every size here, small uploads too: this test is about the copy paths.
    reused.set_stage_min_bytes(Direction::HostToDevice, 0);
    fast.set_stage_min_bytes(Direction::HostToDevice, 0);

    for bytes in BOUNDARY_BYTES {
        let what = format!("{bytes} B, {threads} copy thread(s), chunk {chunk}");
        let mut dev = device_with::<u8>(bytes, seed());
        let mut fresh = staged_buffer();
        fresh.set_copy_threads(threads);
        fresh.set_pipeline_chunk_bytes(chunk);
        fresh.set_stage_min_bytes(Direction::HostToDevice, 0);

        for (which, staging) in [("reused", &mut reused), ("fresh", &mut fresh)] {
            let s = seed();
            let src = pattern::<u8>(bytes, s);
            let before = staging.stats();
            staging.upload(&mut dev, &src, &stream).expect("upload");
            check(
                &format!("upload {what}, {which} buffer"),
                &device_contents(&dev),
                s,
            );
            assert_counted(&what, before, staging.stats(), Route::Staged, bytes, 0);
            assert!(staging.capacity() <= PIPELINE_WINDOW_BYTES.max(bytes));

            let s = seed();
            set_device(&mut dev, s);
            let mut host = pattern::<u8>(bytes, seed());
            let before = staging.stats();
            staging
                .download(&mut host, &dev, &stream)
                .expect("download");
            check(&format!("download {what}, {which} buffer"), &host, s);
            assert_counted(&what, before, staging.stats(), Route::Staged, 0, bytes);
        }
        assert!(
            fresh.capacity() <= PIPELINE_WINDOW_BYTES,
            "{what}: convenience path pinned {} B, more than its window",
            fresh.capacity()
        );

        // The fast path at the same sizes (one contiguous pinned slice).
        let s = seed();
        fast.upload_with(&mut dev, bytes, &stream, |d| fill_pattern(d, s))
            .expect("upload_with");
        check(&format!("upload_with {what}"), &device_contents(&dev), s);
        let s = seed();
        set_device(&mut dev, s);
        let got = fast
            .download_into(&dev, bytes, &stream)
            .expect("download_into");
        check(&format!("download_into {what}"), got, s);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn chunk_boundaries_with_one_copy_thread() {
    chunk_boundaries(1, 0);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn chunk_boundaries_with_four_copy_threads() {
    chunk_boundaries(4, 0);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn chunk_boundaries_with_64_kib_chunks() {
    // Every size above 64 KiB is pipelined, and above 512 KiB the slots are reused.
    chunk_boundaries(4, 64 << 10);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn ring_reuse_with_a_window_larger_than_the_default() {
    // upload_with grows the buffer past the convenience window; the convenience path
    // then uses all of it, with a different chunk/slot plan.
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let big = 12 * MIB + 5;
    let mut dev = device_with::<u8>(big, seed());
    staging
        .upload_with(&mut dev, big, &stream, |d| fill_pattern(d, 1))
        .expect("upload_with");
    assert!(staging.capacity() >= big);
    for bytes in [17 * MIB + 3, 40 * MIB + 1] {
        let mut dev = DeviceBuffer::<u8>::alloc(bytes).expect("alloc");
        let s = seed();
        staging
            .upload(&mut dev, &pattern(bytes, s), &stream)
            .expect("upload");
        check(&format!("upload {bytes} B"), &device_contents(&dev), s);
        let s = seed();
        set_device(&mut dev, s);
        let mut host = pattern::<u8>(bytes, seed());
        staging
            .download(&mut host, &dev, &stream)
            .expect("download");
        check(&format!("download {bytes} B"), &host, s);
    }
    assert_eq!(staging.stats().allocations, 1, "no growth past the window");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn unaligned_host_slices_upload_and_download() {
    let (_ctx, stream) = gpu();
    for threads in [1, 4] {
        let mut staging = staged_buffer();
        staging.set_copy_threads(threads);
        for bytes in [
            4 * KIB + 3,
            150_528,
            MIB + 1,
            4_915_200,
            PIPELINE_WINDOW_BYTES + 1,
            17 * MIB + 3,
        ] {
            let what = format!("{bytes} B from offset 1, {threads} copy thread(s)");
            let mut dev = device_with::<u8>(bytes, seed());

            let s = seed();
            let mut v = vec![0xEEu8; bytes + 1];
            fill_pattern(&mut v[1..], s);
            let src = &v[1..];
            assert_eq!(src.as_ptr() as usize % 2, 1, "slice is really unaligned");
            staging.upload(&mut dev, src, &stream).expect("upload");
            check(&format!("upload {what}"), &device_contents(&dev), s);

            let s = seed();
            set_device(&mut dev, s);
            let mut v = vec![0xEEu8; bytes + 1];
            staging
                .download(&mut v[1..], &dev, &stream)
                .expect("download");
            assert_eq!(v[0], 0xEE, "{what}: byte before the slice untouched");
            check(&format!("download {what}"), &v[1..], s);
        }
    }
}

// ---------------------------------------------------------------------------------
// 3. ordering against work already queued on the stream, every route
// ---------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum OrderRoute {
    /// `upload_with` / `download_into`.
    Fast,
    /// `upload` / `download` with the default (stage everything) routing.
    Staged,
    /// `upload` / `download` with threshold 0: the driver's pageable path.
    Pageable,
    /// `upload` / `download` with a `PinnedBuffer` host side.
    Pinned,
    /// `upload` / `download` with a `HostRegistration` host side.
    Registered,
}

const VALUE_AFTER_BUSY: u8 = 0x5A;
const STALE_VALUE: u8 = 0x11;

/// (a) A download must see a memset queued after 1 ms of work on the same stream,
/// with no manual synchronisation in between.
fn download_sees_queued_work(route: OrderRoute, bytes: usize) {
    let (ctx, stream) = gpu();
    let what = format!("download {route:?} {bytes} B");
    let mut busy = Busy::new();
    let mut staging = staged_buffer();
    if let OrderRoute::Pageable = route {
        staging.set_auto_stage_max_bytes(0);
    }
    // A warm-up so the measured call does not spend its time pinning.
    let mut dev = device_with::<u8>(bytes, seed());
    let mut warm = vec![0u8; bytes];
    staging.download(&mut warm, &dev, &stream).expect("warm-up");

    // Host memory prepared before any work is queued (page-locking takes time).
    let mut pageable = vec![0u8; bytes];
    let mut pinned = match route {
        OrderRoute::Pinned => Some(PinnedBuffer::<u8>::alloc(bytes).expect("PinnedBuffer::alloc")),
        _ => None,
    };
    let reg_len = if let OrderRoute::Registered = route {
        bytes
    } else {
        1
    };
    let (mut v, off) = registrable::<u8>(reg_len);
    let mut reg = match route {
        OrderRoute::Registered => Some(
            HostRegistration::new(&ctx, &mut v[off..off + bytes]).expect("HostRegistration::new"),
        ),
        _ => None,
    };

    for round in 0..2u8 {
        let what = format!("{what}, round {round}");
        let host: &mut [u8] = match route {
            OrderRoute::Pinned => pinned.as_deref_mut().expect("pinned"),
            OrderRoute::Registered => reg.as_deref_mut().expect("registered"),
            _ => &mut pageable,
        };
        fill_pattern(host, seed()); // something else there first
        set_device(&mut dev, seed()); // a pattern, not the memset value
        busy.queue_one_way(&stream);
        // A different value each round, so nothing left from the previous round
        // (in pinned memory or on the host) can pass for it.
        let value = VALUE_AFTER_BUSY.wrapping_add(0x21 * round);
        memset_async(&mut dev, value, &stream);
        let before = staging.stats();
        let expected_route = if let OrderRoute::Fast = route {
            let got = staging.download_into(&dev, bytes, &stream).expect(&what);
            assert_stream_idle(&what, &stream);
            check_all_eq(&what, got, value);
            Route::Staged
        } else {
            staging.download(host, &dev, &stream).expect(&what);
            assert_stream_idle(&what, &stream);
            check_all_eq(&what, host, value);
            match route {
                OrderRoute::Staged => Route::Staged,
                OrderRoute::Pageable => Route::Direct,
                _ => Route::PinnedSource,
            }
        };
        assert_counted(&what, before, staging.stats(), expected_route, 0, bytes);
    }
    stream.synchronize().expect("synchronize");
}

/// (b) An upload must land after work already queued on the stream: a memset of the
/// destination queued behind 1 ms of work must not overwrite the uploaded data.
fn upload_lands_after_queued_work(route: OrderRoute, bytes: usize) {
    let (ctx, stream) = gpu();
    let what = format!("upload {route:?} {bytes} B");
    let mut busy = Busy::new();
    let mut staging = staged_buffer();
    if let OrderRoute::Pageable = route {
        staging.set_auto_stage_max_bytes(0);
    }
    let mut dev = device_with::<u8>(bytes, seed());
    staging
        .upload(&mut dev, &pattern::<u8>(bytes, seed()), &stream)
        .expect("warm-up");

    for round in 0..2 {
        let what = format!("{what}, round {round}");
        set_device(&mut dev, seed());
        let s = seed();
        let before = staging.stats();
        let expected_route = match route {
            OrderRoute::Fast => {
                busy.queue_one_way(&stream);
                memset_async(&mut dev, STALE_VALUE, &stream);
                staging
                    .upload_with(&mut dev, bytes, &stream, |d| fill_pattern(d, s))
                    .expect(&what);
                assert_stream_idle(&what, &stream);
                Route::Staged
            }
            OrderRoute::Staged | OrderRoute::Pageable => {
                let src = pattern::<u8>(bytes, s);
                busy.queue_one_way(&stream);
                memset_async(&mut dev, STALE_VALUE, &stream);
                staging.upload(&mut dev, &src, &stream).expect(&what);
                assert_stream_idle(&what, &stream);
                if let OrderRoute::Staged = route {
                    Route::Staged
                } else {
                    Route::Direct
                }
            }
            OrderRoute::Pinned => {
                let mut src = PinnedBuffer::<u8>::alloc(bytes).expect("PinnedBuffer::alloc");
                fill_pattern(&mut src, s);
                busy.queue_one_way(&stream);
                memset_async(&mut dev, STALE_VALUE, &stream);
                staging.upload(&mut dev, &src, &stream).expect(&what);
                assert_stream_idle(&what, &stream);
                Route::PinnedSource
            }
            OrderRoute::Registered => {
                let (mut v, off) = registrable::<u8>(bytes);
                fill_pattern(&mut v[off..off + bytes], s);
                let reg = HostRegistration::new(&ctx, &mut v[off..off + bytes])
                    .expect("HostRegistration::new");
                busy.queue_one_way(&stream);
                memset_async(&mut dev, STALE_VALUE, &stream);
                staging.upload(&mut dev, &reg, &stream).expect(&what);
                assert_stream_idle(&what, &stream);
                drop(reg);
                Route::PinnedSource
            }
        };
        // Landed when the call returned (semantic 1: `assert_stream_idle` in each
        // arm), and the memset queued before it did not overwrite it (semantic 2).
        check(&format!("{what}: device"), &device_contents(&dev), s);
        assert_counted(&what, before, staging.stats(), expected_route, bytes, 0);
    }
}

/// Pipelined (4.7 MiB) and single-piece (150 KiB) sizes.
const ORDER_SIZES: [usize; 2] = [4_915_200, 150_528];

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn ordering_fast_path() {
    for bytes in ORDER_SIZES {
        download_sees_queued_work(OrderRoute::Fast, bytes);
        upload_lands_after_queued_work(OrderRoute::Fast, bytes);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn ordering_staged_default_routing() {
    for bytes in ORDER_SIZES {
        download_sees_queued_work(OrderRoute::Staged, bytes);
        upload_lands_after_queued_work(OrderRoute::Staged, bytes);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn ordering_pageable_route_threshold_zero() {
    for bytes in ORDER_SIZES {
        download_sees_queued_work(OrderRoute::Pageable, bytes);
        upload_lands_after_queued_work(OrderRoute::Pageable, bytes);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn ordering_pinned_buffer_host_side() {
    for bytes in ORDER_SIZES {
        download_sees_queued_work(OrderRoute::Pinned, bytes);
        upload_lands_after_queued_work(OrderRoute::Pinned, bytes);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn ordering_host_registration_host_side() {
    for bytes in ORDER_SIZES {
        download_sees_queued_work(OrderRoute::Registered, bytes);
        upload_lands_after_queued_work(OrderRoute::Registered, bytes);
    }
}

/// The routing configurations of [`ordering_on_both_sides_of_every_routing_bound`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Routing {
    /// `StagingBuffer::new()`: uploads under 32 KiB to the driver, the rest staged;
    /// uploads pipelined over 1 MiB, downloads over 256 KiB, through an 8 MiB window.
    Default,
    /// `set_auto_stage_max_bytes(DEFAULT_AUTO_STAGE_MAX_BYTES)`: staged up to 512 KiB,
    /// the driver above, both directions.
    Seed,
    /// Default routing with `set_pipeline_chunk_bytes(64 KiB)`: every staged transfer
    /// over 64 KiB is pipelined, and past 512 KiB the 8 slots are reused.
    Chunk64K,
}

/// Sizes on both sides of every bound of `routing`, per direction.
fn bound_sizes(routing: Routing, direction: Direction) -> Vec<usize> {
    match (routing, direction) {
        // The lower bound (32 KiB), the cold split (64 KiB), the pipelining bound
        // (1 MiB), the window (8 MiB).
        (Routing::Default, Direction::HostToDevice) => vec![
            32 * KIB - 1,
            32 * KIB,
            64 * KIB - 1,
            64 * KIB,
            MIB,
            MIB + 1,
            PIPELINE_WINDOW_BYTES,
            PIPELINE_WINDOW_BYTES + 1,
        ],
        // No lower bound; the pipelining bound (256 KiB), the window.
        (Routing::Default, Direction::DeviceToHost) => vec![
            4,
            256 * KIB,
            256 * KIB + 1,
            PIPELINE_WINDOW_BYTES,
            PIPELINE_WINDOW_BYTES + 1,
        ],
        (Routing::Seed, _) => vec![
            4,
            DEFAULT_AUTO_STAGE_MAX_BYTES,
            DEFAULT_AUTO_STAGE_MAX_BYTES + 1,
        ],
        (Routing::Chunk64K, _) => vec![64 * KIB, 64 * KIB + 1, 512 * KIB + 1, 8 * MIB + 3],
    }
}

/// The route the documented rules give a pageable transfer.
fn expected_route(routing: Routing, direction: Direction, bytes: usize) -> Route {
    let staged = match routing {
        Routing::Default | Routing::Chunk64K => {
            bytes >= cuda_staging::DEFAULT_STAGE_MIN_BYTES.get(direction)
        }
        Routing::Seed => bytes <= DEFAULT_AUTO_STAGE_MAX_BYTES,
    };
    if staged {
        Route::Staged
    } else {
        Route::Direct
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn ordering_on_both_sides_of_every_routing_bound() {
    // Semantic 2: changing a tensor's size never changes ordering. Before each
    // transfer, about 1 ms of device-to-device copies and then a memset of the
    // device buffer are queued on the stream: a download must see the memset, an
    // upload must land after it (the memset must not overwrite it), and the call
    // must return with nothing left running on the stream (semantic 1).
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let mut case = 0u8;
    for routing in [Routing::Default, Routing::Seed, Routing::Chunk64K] {
        let mut staging = staged_buffer();
        match routing {
            Routing::Default => {}
            Routing::Seed => staging.set_auto_stage_max_bytes(DEFAULT_AUTO_STAGE_MAX_BYTES),
            Routing::Chunk64K => staging.set_pipeline_chunk_bytes(64 * KIB),
        }
        for direction in [Direction::HostToDevice, Direction::DeviceToHost] {
            for bytes in bound_sizes(routing, direction) {
                let route = expected_route(routing, direction, bytes);
                let what = format!("{routing:?} routing, {direction:?} {bytes} B ({route:?})");
                assert_eq!(
                    staging.stages(direction, bytes),
                    route == Route::Staged,
                    "{what}: stages() disagrees with the documented rule"
                );
                let mut dev = device_with::<u8>(bytes, seed());
                let before = staging.stats();
                case = case.wrapping_add(1);
                if direction == Direction::DeviceToHost {
                    // A value no earlier case left anywhere.
                    let value = 0x40u8.wrapping_add(case);
                    let mut host = pattern::<u8>(bytes, seed());
                    busy.queue_one_way(&stream);
                    memset_async(&mut dev, value, &stream);
                    staging.download(&mut host, &dev, &stream).expect(&what);
                    assert_stream_idle(&what, &stream);
                    check_all_eq(&what, &host, value);
                    assert_counted(&what, before, staging.stats(), route, 0, bytes);
                } else {
                    let s = seed();
                    let src = pattern::<u8>(bytes, s);
                    busy.queue_one_way(&stream);
                    memset_async(&mut dev, STALE_VALUE, &stream);
                    staging.upload(&mut dev, &src, &stream).expect(&what);
                    assert_stream_idle(&what, &stream);
                    check(&what, &device_contents(&dev), s);
                    assert_counted(&what, before, staging.stats(), route, bytes, 0);
                }
            }
        }
        assert!(
            staging.capacity() <= PIPELINE_WINDOW_BYTES,
            "{routing:?}: the convenience path pinned {} B",
            staging.capacity()
        );
    }
}

// ---------------------------------------------------------------------------------
// 4. prefixes leave the rest of the device buffer untouched
// ---------------------------------------------------------------------------------

fn prefix_case(label: &str, staging: &mut StagingBuffer, stream: &Stream, len: usize, n: usize) {
    let what = format!("{label}: {n} of {len} f32");
    let sentinel = seed();
    let mut dev = device_with::<f32>(len, sentinel);

    // upload_with of a prefix.
    let s = seed();
    staging
        .upload_with(&mut dev, n, stream, |d| {
            assert_eq!(d.len(), n);
            fill_pattern(d, s)
        })
        .expect("upload_with");
    let back = device_contents(&dev);
    check(&format!("upload_with {what}: prefix"), &back[..n], s);
    check_at(
        &format!("upload_with {what}: rest"),
        &back[n..],
        n,
        sentinel,
    );

    // upload of a shorter slice.
    set_device(&mut dev, sentinel);
    let s = seed();
    staging
        .upload(&mut dev, &pattern(n, s), stream)
        .expect("upload");
    let back = device_contents(&dev);
    check(&format!("upload {what}: prefix"), &back[..n], s);
    check_at(&format!("upload {what}: rest"), &back[n..], n, sentinel);

    // download_into / download of a prefix: exactly src[..n], device unchanged.
    let s = seed();
    set_device(&mut dev, s);
    let got = staging
        .download_into(&dev, n, stream)
        .expect("download_into");
    assert_eq!(got.len(), n);
    check(&format!("download_into {what}"), got, s);
    let mut host = pattern::<f32>(n, seed());
    staging.download(&mut host, &dev, stream).expect("download");
    check(&format!("download {what}"), &host, s);
    check(
        &format!("{what}: device after downloads"),
        &device_contents(&dev),
        s,
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn prefix_transfers_leave_the_rest_untouched() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let mut pageable = staged_buffer();
    pageable.set_auto_stage_max_bytes(0);
    // (len, n): single piece, pipelined, pipelined past the window, one element.
    for (len, n) in [
        (50_000, 37_632),
        (1_228_800, 1_228_799),
        (1_228_800, 300_001),
        (3 * MIB, 2 * MIB + 3),
        (1000, 1),
    ] {
        prefix_case("default routing", &mut staging, &stream, len, n);
        prefix_case("pageable routing", &mut pageable, &stream, len, n);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn prefix_from_a_page_locked_slice_leaves_the_rest_untouched() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let (len, n) = (1_228_800, 37_632);
    let sentinel = seed();
    let mut dev = device_with::<f32>(len, sentinel);
    let s = seed();
    let mut src = PinnedBuffer::<f32>::alloc(n).expect("PinnedBuffer::alloc");
    fill_pattern(&mut src, s);
    let before = staging.stats();
    staging.upload(&mut dev, &src, &stream).expect("upload");
    assert_counted(
        "pinned prefix",
        before,
        staging.stats(),
        Route::PinnedSource,
        n * 4,
        0,
    );
    let back = device_contents(&dev);
    check("pinned prefix upload", &back[..n], s);
    check_at("pinned prefix upload: rest", &back[n..], n, sentinel);
}

// ---------------------------------------------------------------------------------
// 5. page-locked host slices are DMA'd straight from / into
// ---------------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn pinned_buffer_slices_are_dmad_directly() {
    let (_ctx, stream) = gpu();
    for threshold in [usize::MAX, DEFAULT_AUTO_STAGE_MAX_BYTES, 0] {
        let mut staging = staged_buffer();
        staging.set_auto_stage_max_bytes(threshold);
        for bytes in [4, 150_528, 4_915_200, 17 * MIB] {
            let n = bytes / 4;
            let what = format!("PinnedBuffer<f32> x {n}, threshold {threshold}");
            let mut dev = device_with::<f32>(n, seed());
            let mut host = PinnedBuffer::<f32>::alloc(n).expect("PinnedBuffer::alloc");

            let s = seed();
            fill_pattern(&mut host, s);
            let before = staging.stats();
            staging.upload(&mut dev, &host, &stream).expect("upload");
            check(&format!("upload {what}"), &device_contents(&dev), s);
            assert_counted(
                &what,
                before,
                staging.stats(),
                Route::PinnedSource,
                bytes,
                0,
            );

            let s = seed();
            set_device(&mut dev, s);
            fill_pattern(&mut host, seed());
            let before = staging.stats();
            staging
                .download(&mut host, &dev, &stream)
                .expect("download");
            check(&format!("download {what}"), &host, s);
            assert_counted(
                &what,
                before,
                staging.stats(),
                Route::PinnedSource,
                0,
                bytes,
            );
        }
        // Nothing needed staging, so nothing was pinned.
        assert_eq!(staging.capacity(), 0);
        assert_eq!(staging.stats().allocations, 0);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn host_registration_slices_are_dmad_directly() {
    let (ctx, stream) = gpu();
    for threshold in [usize::MAX, 0] {
        let mut staging = staged_buffer();
        staging.set_auto_stage_max_bytes(threshold);
        for bytes in [150_528, 4_915_200] {
            let n = bytes / 4;
            let what = format!("HostRegistration<f32> x {n}, threshold {threshold}");
            let mut dev = device_with::<f32>(n, seed());
            let (mut v, off) = registrable::<f32>(n);
            let mut reg =
                HostRegistration::new(&ctx, &mut v[off..off + n]).expect("HostRegistration");

            let s = seed();
            fill_pattern(&mut reg, s);
            let before = staging.stats();
            staging.upload(&mut dev, &reg, &stream).expect("upload");
            check(&format!("upload {what}"), &device_contents(&dev), s);
            assert_counted(
                &what,
                before,
                staging.stats(),
                Route::PinnedSource,
                bytes,
                0,
            );

            let s = seed();
            set_device(&mut dev, s);
            fill_pattern(&mut reg, seed());
            let before = staging.stats();
            staging.download(&mut reg, &dev, &stream).expect("download");
            check(&format!("download {what}"), &reg, s);
            assert_counted(
                &what,
                before,
                staging.stats(),
                Route::PinnedSource,
                0,
                bytes,
            );
            reg.unregister().expect("unregister");
        }
        assert_eq!(staging.stats().allocations, 0);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn interior_slices_of_page_locked_memory_are_dmad_directly() {
    // A slice that starts inside a page-locked allocation (not at its start) is still
    // page-locked memory.
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    // 37 KB uploads would go to the driver by default; route them by source here.
    staging.set_stage_min_bytes(Direction::HostToDevice, 0);
    let n = 37_632;
    let mut host = PinnedBuffer::<u8>::alloc(n + 64).expect("PinnedBuffer::alloc");
    let mut dev = device_with::<u8>(n, seed());
    let s = seed();
    fill_pattern(&mut host[3..3 + n], s);
    let before = staging.stats();
    staging
        .upload(&mut dev, &host[3..3 + n], &stream)
        .expect("upload");
    check("upload from pinned[3..]", &device_contents(&dev), s);
    assert_counted(
        "upload from pinned[3..]",
        before,
        staging.stats(),
        Route::PinnedSource,
        n,
        0,
    );

    let s = seed();
    set_device(&mut dev, s);
    let before = staging.stats();
    staging
        .download(&mut host[5..5 + n], &dev, &stream)
        .expect("download");
    check("download into pinned[5..]", &host[5..5 + n], s);
    assert_counted(
        "download into pinned[5..]",
        before,
        staging.stats(),
        Route::PinnedSource,
        0,
        n,
    );
}

/// Granularity of the registrations below: a multiple of every host page size.
const LOCK_BLOCK: usize = 64 * KIB;

/// `blocks` blocks of [`LOCK_BLOCK`] bytes, starting on a block boundary, holding a
/// pattern, with the block ranges `locked` page-locked by "another library": raw
/// `cuMemHostRegister` calls, as a foreign pinned allocator would make them, which
/// `upload` / `download` only learn about from the driver. This is the raw-handle
/// interop the test is about, so it uses the raw layer; dropping the result
/// unregisters the ranges. The slack before and after the blocks is never
/// registered, so registrations of tests running in parallel never share a page
/// with these.
struct ForeignLocked {
    memory: Box<[u8]>,
    /// Offset of the first block in `memory`.
    off: usize,
    blocks: usize,
    registered: Vec<*mut std::ffi::c_void>,
    ctx: Context,
}

impl ForeignLocked {
    fn new(ctx: &Context, blocks: usize, locked: &[std::ops::Range<usize>]) -> ForeignLocked {
        let mut memory = vec![0u8; (blocks + 2) * LOCK_BLOCK].into_boxed_slice();
        let off = memory.as_ptr().align_offset(LOCK_BLOCK);
        fill_pattern(&mut memory[off..off + blocks * LOCK_BLOCK], seed());
        let _g = ctx.enter().expect("enter");
        let mut registered = Vec::new();
        for r in locked {
            let bytes = &mut memory[off + r.start * LOCK_BLOCK..off + r.end * LOCK_BLOCK];
            let p = bytes.as_mut_ptr().cast();
            // SAFETY: `bytes` lies inside `memory`, which this struct owns and keeps
            // (a boxed slice does not move) until `Drop` unregisters `p` first.
            unsafe {
                cuda_core::result::mem_host_register(
                    p,
                    bytes.len(),
                    cuda_core::sys::CU_MEMHOSTREGISTER_PORTABLE,
                )
            }
            .expect("cuMemHostRegister");
            registered.push(p);
        }
        ForeignLocked {
            memory,
            off,
            blocks,
            registered,
            ctx: ctx.clone(),
        }
    }

    /// The blocks, as the test reads and writes them.
    fn region(&mut self) -> &mut [u8] {
        &mut self.memory[self.off..self.off + self.blocks * LOCK_BLOCK]
    }
}

impl Drop for ForeignLocked {
    fn drop(&mut self) {
        let _g = self.ctx.enter().expect("enter");
        for &p in &self.registered {
            // SAFETY: `p` starts a range registered in `new`; the transfers that
            // used it all returned (they are synchronous), and it is unregistered
            // once, before `memory` is freed.
            unsafe { cuda_core::result::mem_host_unregister(p) }.expect("cuMemHostUnregister");
        }
    }
}

/// Uploads `region[range]` and downloads into it with a fresh `StagingBuffer` (no
/// page-lock answer remembered from an earlier transfer), checking the data, the
/// bytes of `region` outside `range`, and that each transfer took `route`.
fn round_trip_slice(
    what: &str,
    region: &mut [u8],
    range: std::ops::Range<usize>,
    route: Route,
    stream: &Stream,
) {
    let bytes = range.len();
    let mut dev = device_with::<u8>(bytes, seed());

    let s = seed();
    fill_pattern(&mut region[range.clone()], s);
    let mut staging = staged_buffer();
    staging
        .upload(&mut dev, &region[range.clone()], stream)
        .expect(what);
    check(&format!("upload {what}"), &device_contents(&dev), s);
    assert_counted(
        &format!("upload {what}"),
        StagingStats::default(),
        staging.stats(),
        route,
        bytes,
        0,
    );

    let s = seed();
    set_device(&mut dev, s);
    let outside = seed();
    fill_pattern(region, outside);
    let mut staging = staged_buffer();
    staging
        .download(&mut region[range.clone()], &dev, stream)
        .expect(what);
    check(&format!("download {what}"), &region[range.clone()], s);
    check(
        &format!("download {what}: before the slice"),
        &region[..range.start],
        outside,
    );
    check_at(
        &format!("download {what}: after the slice"),
        &region[range.end..],
        range.end,
        outside,
    );
    assert_counted(
        &format!("download {what}"),
        StagingStats::default(),
        staging.stats(),
        route,
        0,
        bytes,
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn page_locked_ranges_end_where_the_registration_ends() {
    // The range rule (routing.rs): a host slice is DMA'd straight from or into only
    // when all of it lies in one page-locked block (one allocation or registration);
    // anything else is staged. Blocks of 64 KiB: 0 pageable, 1-2 registered (A), 3 a
    // pageable gap, 4 registered (B), 5 registered separately right after B (C),
    // 6-7 pageable.
    let (ctx, stream) = gpu();
    let mut foreign = ForeignLocked::new(&ctx, 8, &[1..3, 4..5, 5..6]);
    let region = foreign.region();
    let b = LOCK_BLOCK;
    let cases: [(&str, std::ops::Range<usize>, Route); 9] = [
        ("all of A", b..3 * b, Route::PinnedSource),
        (
            "inside A, odd ends",
            b + 101..3 * b - 99,
            Route::PinnedSource,
        ),
        ("all of B", 4 * b..5 * b, Route::PinnedSource),
        (
            "the end of A and a block past it",
            2 * b..4 * b,
            Route::Staged,
        ),
        (
            "the end of A and one byte past it",
            2 * b..3 * b + 1,
            Route::Staged,
        ),
        ("a block before A and its start", 0..2 * b, Route::Staged),
        ("A, the gap and B", b..5 * b, Route::Staged),
        ("B and C, side by side", 4 * b..6 * b, Route::Staged),
        ("pageable blocks only", 6 * b..8 * b, Route::Staged),
    ];
    for (what, range, route) in cases {
        round_trip_slice(what, region, range, route, &stream);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn page_locked_detection_follows_the_registration() {
    // PinnedBuffer memory and a live HostRegistration are DMA'd straight from; an
    // ordinary Vec, and the same memory once unregistered, are staged.
    let (ctx, stream) = gpu();
    let n = 3 * LOCK_BLOCK / 4;
    let bytes = n * 4;
    let mut dev = device_with::<f32>(n, seed());
    let transfer =
        |staging: &mut StagingBuffer, host: &mut [f32], dev: &mut DeviceBuffer<f32>, what: &str| {
            let s = seed();
            fill_pattern(host, s);
            staging.upload(dev, host, &stream).expect(what);
            check(&format!("upload {what}"), &device_contents(dev), s);
            let s = seed();
            set_device(dev, s);
            staging.download(host, dev, &stream).expect(what);
            check(&format!("download {what}"), host, s);
        };

    let mut pinned = PinnedBuffer::<f32>::alloc(n).expect("PinnedBuffer::alloc");
    let mut staging = staged_buffer();
    transfer(&mut staging, &mut pinned, &mut dev, "PinnedBuffer");
    assert_eq!(
        staging.stats().pinned_source_transfers,
        2,
        "PinnedBuffer: {:?}",
        staging.stats()
    );
    assert_eq!(
        staging.stats().allocations,
        0,
        "nothing to stage, nothing pinned"
    );

    let (mut v, off) = registrable::<f32>(n);
    let mut staging = staged_buffer();
    transfer(&mut staging, &mut v[off..off + n], &mut dev, "a Vec");
    assert_eq!(
        staging.stats().staged_transfers,
        2,
        "a Vec: {:?}",
        staging.stats()
    );

    for round in 0..2 {
        let what = format!("a registered Vec, round {round}");
        let mut reg =
            HostRegistration::new(&ctx, &mut v[off..off + n]).expect("HostRegistration::new");
        let mut staging = staged_buffer();
        transfer(&mut staging, &mut reg, &mut dev, &what);
        assert_eq!(
            staging.stats().pinned_source_transfers,
            2,
            "{what}: {:?}",
            staging.stats()
        );
        reg.unregister().expect("unregister");

        // Once unregistered (and registrable again, next round), it is pageable.
        let what = format!("the same Vec unregistered, round {round}");
        let mut staging = staged_buffer();
        transfer(&mut staging, &mut v[off..off + n], &mut dev, &what);
        assert_eq!(
            staging.stats().staged_transfers,
            2,
            "{what}: {:?}",
            staging.stats()
        );
        assert_eq!(staging.stats().bytes_uploaded, bytes as u64);
    }

    // A buffer that saw the memory registered may remember that answer for a while
    // (routing.rs keeps the last answer per direction): the driver's copy it then
    // uses handles pageable memory too, so the data must arrive either way.
    let mut staging = staged_buffer();
    {
        let mut reg =
            HostRegistration::new(&ctx, &mut v[off..off + n]).expect("HostRegistration::new");
        transfer(&mut staging, &mut reg, &mut dev, "registered, remembered");
    }
    for k in 0..3 {
        transfer(
            &mut staging,
            &mut v[off..off + n],
            &mut dev,
            &format!("unregistered, remembered answer {k}"),
        );
    }
    assert_eq!(staging.stats().transfers(), 8);
}

// ---------------------------------------------------------------------------------
// 6. reuse and growth
// ---------------------------------------------------------------------------------

/// One frame over the seed's three shapes: `upload_with` into each, then
/// `download_into` each, in the same order. Every upload overwrites the pinned bytes
/// the previous one used, so a download that returned stale pinned memory instead of
/// the device's contents shows up as a mismatch.
fn seed_frame(
    staging: &mut StagingBuffer,
    devs: &mut [DeviceBuffer<f32>],
    stream: &Stream,
    frame: usize,
) {
    let mut seeds = Vec::new();
    for (k, dev) in devs.iter_mut().enumerate() {
        let s = seed();
        seeds.push(s);
        let n = dev.len();
        staging
            .upload_with(dev, n, stream, |d| fill_pattern(d, s))
            .unwrap_or_else(|e| panic!("frame {frame} shape {k}: upload_with: {e}"));
    }
    if frame % 25 == 0 {
        for (k, dev) in devs.iter().enumerate() {
            check(
                &format!("frame {frame} shape {k}: device after upload_with"),
                &device_contents(dev),
                seeds[k],
            );
        }
    }
    for (k, dev) in devs.iter().enumerate() {
        let got = staging
            .download_into(dev, dev.len(), stream)
            .unwrap_or_else(|e| panic!("frame {frame} shape {k}: download_into: {e}"));
        check(
            &format!("frame {frame} shape {k}: round trip"),
            got,
            seeds[k],
        );
    }
}

fn seed_shape_buffers() -> Vec<DeviceBuffer<f32>> {
    SEED_SHAPES
        .iter()
        .map(|&b| DeviceBuffer::<f32>::alloc(b / 4).expect("alloc"))
        .collect()
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn steady_frames_allocate_only_while_growing() {
    let (_ctx, stream) = gpu();
    let mut devs = seed_shape_buffers();
    let mut staging = staged_buffer();

    seed_frame(&mut staging, &mut devs, &stream, 0);
    // The growth policy (at least the request, at least 1.5x, rounded up to 64 KiB):
    // 150528 B pins 192 KiB, which also holds 196608 B; 4915200 B (exactly 75 x 64 KiB)
    // grows once more. So two allocations, the second on the larger size.
    let after_first = staging.stats();
    assert_eq!(after_first.allocations, 2, "{after_first:?}");
    assert_eq!(staging.capacity(), 4_915_200);
    assert_eq!(after_first.peak_capacity_bytes, 4_915_200);

    for frame in 1..100 {
        seed_frame(&mut staging, &mut devs, &stream, frame);
        assert_eq!(
            staging.stats().allocations,
            2,
            "frame {frame}: steady frames must not re-pin"
        );
        assert_eq!(staging.capacity(), 4_915_200);
    }
    let st = staging.stats();
    assert_eq!(st.staged_transfers, 600);
    let frame_bytes: u64 = SEED_SHAPES.iter().map(|&b| b as u64).sum();
    assert_eq!(st.bytes_uploaded, 100 * frame_bytes);
    assert_eq!(st.bytes_downloaded, 100 * frame_bytes);
    assert_eq!(st.direct_transfers, 0);
    assert_eq!(st.pinned_source_transfers, 0);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn largest_shape_first_or_with_capacity_allocates_once() {
    let (_ctx, stream) = gpu();
    let mut devs = seed_shape_buffers();

    // with_capacity(largest) then the loop: exactly one allocation, ever.
    let mut staging = StagingBuffer::with_capacity(4_915_200).expect("with_capacity");
    staging.set_driver_after_gap(false);
    assert_eq!(staging.stats().allocations, 1);
    let cap = staging.capacity();
    assert!(cap >= 4_915_200);
    for frame in 0..30 {
        seed_frame(&mut staging, &mut devs, &stream, frame);
    }
    assert_eq!(staging.stats().allocations, 1);
    assert_eq!(staging.capacity(), cap);

    // A fresh buffer whose first transfer is the largest shape: also one.
    let mut staging = staged_buffer();
    devs.reverse();
    for frame in 0..30 {
        seed_frame(&mut staging, &mut devs, &stream, frame);
    }
    assert_eq!(staging.stats().allocations, 1);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn growth_happens_only_on_a_larger_size_and_shrink_repins() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    assert_eq!(staging.capacity(), 0);

    let round_trip = |staging: &mut StagingBuffer, n: usize| {
        let mut dev = DeviceBuffer::<f32>::alloc(n).expect("alloc");
        let s = seed();
        staging
            .upload_with(&mut dev, n, &stream, |d| fill_pattern(d, s))
            .expect("upload_with");
        check(&format!("upload_with {n}"), &device_contents(&dev), s);
        let s = seed();
        set_device(&mut dev, s);
        let got = staging
            .download_into(&dev, n, &stream)
            .expect("download_into");
        check(&format!("download_into {n}"), got, s);
    };

    round_trip(&mut staging, 37_632);
    assert_eq!(staging.stats().allocations, 1);
    let cap1 = staging.capacity();
    assert!(cap1 >= 150_528);

    // Anything that fits: no growth.
    for n in [1, 1000, cap1 / 4] {
        round_trip(&mut staging, n);
        assert_eq!(staging.stats().allocations, 1, "n = {n}");
        assert_eq!(staging.capacity(), cap1);
    }

    // One element more than the capacity: one growth.
    let n = cap1 / 4 + 1;
    round_trip(&mut staging, n);
    assert_eq!(staging.stats().allocations, 2);
    let cap2 = staging.capacity();
    assert!(cap2 >= n * 4, "capacity {cap2} < {} B", n * 4);
    assert_eq!(staging.stats().peak_capacity_bytes, cap2);
    round_trip(&mut staging, n);
    round_trip(&mut staging, 37_632);
    assert_eq!(staging.stats().allocations, 2);

    // reserve within the capacity: nothing; beyond: one growth.
    staging.reserve(cap2).expect("reserve");
    assert_eq!(staging.stats().allocations, 2);
    staging.reserve(cap2 + 1).expect("reserve");
    assert_eq!(staging.stats().allocations, 3);
    let cap3 = staging.capacity();
    assert!(cap3 > cap2);

    // shrink_to_fit releases everything; the next transfer pins again.
    let stats = staging.stats();
    staging.shrink_to_fit();
    assert_eq!(staging.capacity(), 0);
    assert_eq!(staging.stats(), stats, "shrink_to_fit keeps the counters");
    round_trip(&mut staging, 37_632);
    assert_eq!(staging.stats().allocations, 4);
    assert!(staging.capacity() >= 150_528);
    round_trip(&mut staging, 37_632);
    assert_eq!(staging.stats().allocations, 4);
    assert_eq!(staging.stats().peak_capacity_bytes, cap3);

    // The convenience path after shrinking pins again too, and works.
    staging.shrink_to_fit();
    // 160 KB: above DEFAULT_STAGE_MIN_BYTES, so the upload is staged.
    let mut dev = DeviceBuffer::<f32>::alloc(40_000).expect("alloc");
    let s = seed();
    staging
        .upload(&mut dev, &pattern(40_000, s), &stream)
        .expect("upload");
    check("upload after shrink", &device_contents(&dev), s);
    assert_eq!(staging.stats().allocations, 5);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn convenience_path_streams_64_mib_through_its_window() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let n = 16 * MIB; // f32: 64 MiB
    let mut dev = DeviceBuffer::<f32>::alloc(n).expect("alloc");
    let mut allocations = None;
    for round in 0..3 {
        let s = seed();
        staging
            .upload(&mut dev, &pattern(n, s), &stream)
            .expect("upload");
        check(
            &format!("round {round}: upload 64 MiB"),
            &device_contents(&dev),
            s,
        );
        let s = seed();
        set_device(&mut dev, s);
        let mut host = pattern::<f32>(n, seed());
        staging
            .download(&mut host, &dev, &stream)
            .expect("download");
        check(&format!("round {round}: download 64 MiB"), &host, s);

        assert!(
            staging.capacity() <= PIPELINE_WINDOW_BYTES,
            "round {round}: pinned {} B for a 64 MiB transfer",
            staging.capacity()
        );
        let a = staging.stats().allocations;
        assert_eq!(*allocations.get_or_insert(a), a, "round {round}: re-pinned");
    }
    assert_eq!(allocations, Some(1));
    assert_eq!(staging.stats().staged_transfers, 6);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn convenience_path_never_pins_more_than_its_window() {
    // PIPELINE_WINDOW_BYTES is documented as "the largest pinned window the
    // convenience path grows to". Growing from 6 MiB for a transfer just under the
    // window must not overshoot it by the 1.5x growth factor.
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    for bytes in [
        6 * MIB,
        PIPELINE_WINDOW_BYTES - 1,
        PIPELINE_WINDOW_BYTES,
        3 * PIPELINE_WINDOW_BYTES + 1,
    ] {
        let mut dev = DeviceBuffer::<u8>::alloc(bytes).expect("alloc");
        let s = seed();
        staging
            .upload(&mut dev, &pattern(bytes, s), &stream)
            .expect("upload");
        check(&format!("upload {bytes} B"), &device_contents(&dev), s);
        let s = seed();
        set_device(&mut dev, s);
        let mut host = pattern::<u8>(bytes, seed());
        staging
            .download(&mut host, &dev, &stream)
            .expect("download");
        check(&format!("download {bytes} B"), &host, s);
        assert!(
            staging.capacity() <= PIPELINE_WINDOW_BYTES,
            "after {bytes} B: the convenience path pinned {} B, more than its {} B window",
            staging.capacity(),
            PIPELINE_WINDOW_BYTES
        );
    }
}

// ---------------------------------------------------------------------------------
// 7. bad input changes nothing
// ---------------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn bad_input_is_an_error_and_changes_nothing() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let len = 1000;
    let mut dev = DeviceBuffer::<f32>::alloc(len).expect("alloc");
    // Some history first, so there is something to leave unchanged.
    staging
        .upload_with(&mut dev, len, &stream, |d| fill_pattern(d, 7))
        .expect("upload_with");
    let mut host = vec![0.0f32; len];
    staging
        .download(&mut host, &dev, &stream)
        .expect("download");
    let sentinel = seed();
    set_device(&mut dev, sentinel);
    let stats0 = staging.stats();
    let cap0 = staging.capacity();
    assert!(cap0 > 0);

    // n > len
    let mut fill_called = false;
    let e = staging
        .upload_with(&mut dev, len + 1, &stream, |_: &mut [f32]| {
            fill_called = true
        })
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::ExceedsDeviceBuffer {
                n: 1001,
                len: 1000,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(!fill_called, "fill must not run for a rejected transfer");
    let e = staging.download_into(&dev, len + 1, &stream).unwrap_err();
    assert!(
        matches!(
            e,
            Error::ExceedsDeviceBuffer {
                n: 1001,
                len: 1000,
                ..
            }
        ),
        "{e:?}"
    );

    // host slice longer than the device buffer
    let long_seed = seed();
    let long = pattern::<f32>(len + 1, long_seed);
    let e = staging.upload(&mut dev, &long, &stream).unwrap_err();
    assert!(matches!(e, Error::ExceedsDeviceBuffer { .. }), "{e:?}");
    let mut long_dst = long.clone();
    let e = staging.download(&mut long_dst, &dev, &stream).unwrap_err();
    assert!(matches!(e, Error::ExceedsDeviceBuffer { .. }), "{e:?}");
    check("host slice after rejected download", &long_dst, long_seed);

    // the same through the pageable route
    staging.set_auto_stage_max_bytes(0);
    let e = staging.upload(&mut dev, &long, &stream).unwrap_err();
    assert!(matches!(e, Error::ExceedsDeviceBuffer { .. }), "{e:?}");
    let e = staging.download(&mut long_dst, &dev, &stream).unwrap_err();
    assert!(matches!(e, Error::ExceedsDeviceBuffer { .. }), "{e:?}");
    staging.set_auto_stage_max_bytes(usize::MAX);

    // n * size_of::<T>() overflows
    for n in [usize::MAX, usize::MAX / 4 + 1] {
        let e = staging
            .upload_with(&mut dev, n, &stream, |_: &mut [f32]| fill_called = true)
            .unwrap_err();
        assert!(
            matches!(e, Error::SizeOverflow { elem_bytes: 4, .. }),
            "{e:?}"
        );
        let e = staging.download_into(&dev, n, &stream).unwrap_err();
        assert!(
            matches!(e, Error::SizeOverflow { elem_bytes: 4, .. }),
            "{e:?}"
        );
    }
    assert!(!fill_called);

    assert_eq!(staging.stats(), stats0, "rejected calls changed the stats");
    assert_eq!(
        staging.capacity(),
        cap0,
        "rejected calls changed the capacity"
    );
    check(
        "device buffer after rejected calls",
        &device_contents(&dev),
        sentinel,
    );

    // And the buffer still works.
    let s = seed();
    staging
        .upload(&mut dev, &pattern(len, s), &stream)
        .expect("upload after errors");
    check("upload after errors", &device_contents(&dev), s);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn zero_elements_succeed_and_do_nothing() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let sentinel = seed();
    let mut dev = device_with::<f32>(100, sentinel);
    let mut empty_dev = DeviceBuffer::<f32>::alloc(0).expect("alloc(0)");

    for d in [&mut dev, &mut empty_dev] {
        let mut calls = Vec::new();
        staging
            .upload_with(d, 0, &stream, |s: &mut [f32]| calls.push(s.len()))
            .expect("upload_with of 0");
        assert_eq!(calls, [0], "fill is called once, with an empty slice");
        let got = staging
            .download_into(d, 0, &stream)
            .expect("download_into of 0");
        assert!(got.is_empty());
        staging.upload(d, &[], &stream).expect("upload of 0");
        staging
            .download(&mut [], d, &stream)
            .expect("download of 0");
    }
    assert_eq!(staging.stats(), StagingStats::default());
    assert_eq!(staging.capacity(), 0, "zero elements pin nothing");
    check(
        "device after empty transfers",
        &device_contents(&dev),
        sentinel,
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn failed_reserve_leaves_the_old_buffer_usable() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    staging.reserve(MIB).expect("reserve 1 MiB");
    let cap0 = staging.capacity();
    assert!(cap0 >= MIB);
    let stats0 = staging.stats();
    assert_eq!(stats0.allocations, 1);

    let e = staging
        .reserve(1 << 40)
        .expect_err("pinning 1 TiB must fail");
    eprintln!("reserve(1 TiB) failed as expected: {e}");
    assert_eq!(
        staging.capacity(),
        cap0,
        "a failed grow keeps the old buffer"
    );
    assert_eq!(staging.stats(), stats0);

    // The old buffer still serves transfers, without a new allocation.
    let n = MIB / 4;
    let mut dev = DeviceBuffer::<f32>::alloc(n).expect("alloc");
    let s = seed();
    staging
        .upload_with(&mut dev, n, &stream, |d| fill_pattern(d, s))
        .expect("upload_with");
    check(
        "upload_with after failed reserve",
        &device_contents(&dev),
        s,
    );
    let s = seed();
    set_device(&mut dev, s);
    let got = staging
        .download_into(&dev, n, &stream)
        .expect("download_into");
    check("download_into after failed reserve", got, s);
    assert_eq!(staging.stats().allocations, 1);
}

// ---------------------------------------------------------------------------------
// 8. a panic inside fill
// ---------------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn panic_inside_fill_leaves_the_buffer_usable() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let n = 1_228_800;
    let sentinel = seed();
    let mut dev = device_with::<f32>(n, sentinel);

    for attempt in 0..2 {
        let before = staging.stats();
        let r = catch_unwind(AssertUnwindSafe(|| {
            staging.upload_with(&mut dev, n, &stream, |d: &mut [f32]| {
                fill_pattern(&mut d[..n / 2], 99);
                panic!("fill panicked on purpose (this message is expected)");
            })
        }));
        assert!(r.is_err(), "attempt {attempt}: the panic propagates");
        let after = staging.stats();
        assert_eq!(
            transfer_counters(&after),
            transfer_counters(&before),
            "attempt {attempt}: a panicked call is not counted as a transfer"
        );
        // The pinned memory stays allocated and counted: one allocation in all.
        assert_eq!(after.allocations, 1, "attempt {attempt}");
        assert!(staging.capacity() >= n * 4);
        check(
            &format!("attempt {attempt}: device after panic in fill"),
            &device_contents(&dev),
            sentinel,
        );
    }

    // The next calls work and move the right data.
    let s = seed();
    staging
        .upload_with(&mut dev, n, &stream, |d| fill_pattern(d, s))
        .expect("upload_with after panic");
    check("upload_with after panic", &device_contents(&dev), s);
    let s = seed();
    set_device(&mut dev, s);
    let got = staging
        .download_into(&dev, n, &stream)
        .expect("download_into");
    check("download_into after panic", got, s);
    let s = seed();
    staging
        .upload(&mut dev, &pattern(n, s), &stream)
        .expect("upload after panic");
    check("upload after panic", &device_contents(&dev), s);
    let st = staging.stats();
    assert_eq!(st.allocations, 1);
    assert_eq!(st.staged_transfers, 3);
    assert_eq!(st.bytes_uploaded, 2 * n as u64 * 4);
}

// ---------------------------------------------------------------------------------
// 9. calibration
// ---------------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn calibrate_measures_both_directions_and_keeps_counters() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    let n = 37_632;
    let mut dev = DeviceBuffer::<f32>::alloc(n).expect("alloc");
    staging
        .upload(&mut dev, &pattern(n, seed()), &stream)
        .expect("upload");
    let mut host = vec![0.0f32; n];
    staging
        .download(&mut host, &dev, &stream)
        .expect("download");
    let before = staging.stats();

    let cal = staging.calibrate(&stream).expect("calibrate");
    eprintln!("calibration: {cal:#?}");

    for direction in [Direction::HostToDevice, Direction::DeviceToHost] {
        let samples: Vec<_> = cal
            .samples
            .iter()
            .filter(|s| s.direction == direction)
            .collect();
        assert!(!samples.is_empty(), "{direction:?}: no samples");
        for s in &samples {
            assert!(
                s.staged_us.is_finite() && s.staged_us > 0.0,
                "{direction:?} {s:?}"
            );
            assert!(
                s.pageable_us.is_finite() && s.pageable_us > 0.0,
                "{direction:?} {s:?}"
            );
        }
        let threshold = match direction {
            Direction::HostToDevice => cal.upload_stage_max_bytes,
            Direction::DeviceToHost => cal.download_stage_max_bytes,
        };
        assert!(
            threshold == usize::MAX
                || threshold == 0
                || samples.iter().any(|s| s.bytes == threshold),
            "{direction:?}: threshold {threshold} is none of MAX, 0 or a timed size"
        );
        assert_eq!(staging.stage_max_bytes(direction), threshold);
        let lower = match direction {
            Direction::HostToDevice => cal.upload_stage_min_bytes,
            Direction::DeviceToHost => cal.download_stage_min_bytes,
        };
        assert!(
            lower == 0 || samples.iter().any(|s| s.bytes == lower),
            "{direction:?}: lower bound {lower} is neither 0 nor a timed size"
        );
        assert!(
            lower <= threshold,
            "{direction:?}: bounds {lower}..={threshold}"
        );
        assert_eq!(staging.stage_min_bytes(direction), lower);
    }

    let after = staging.stats();
    assert_eq!(
        transfer_counters(&after),
        transfer_counters(&before),
        "calibration must not show in the transfer counters"
    );
    // The staged runs grew the pinned buffer from the 192 KiB the 150528-byte
    // transfers pinned to the 8 MiB window, by the growth policy (at least the
    // request, at least 1.5x, in 64 KiB steps): 256 KiB pins 320 KiB, then 1, 4 and
    // 8 MiB (16 MiB streams through the window). Those four allocations are counted.
    assert_eq!(before.allocations, 1, "{before:?}");
    assert_eq!(
        after.allocations,
        before.allocations + 4,
        "calibration's pinned allocations: {before:?} -> {after:?}"
    );
    assert_eq!(staging.capacity(), PIPELINE_WINDOW_BYTES);
    assert_eq!(after.peak_capacity_bytes, PIPELINE_WINDOW_BYTES);

    // Transfers still work, on whatever route calibration chose.
    for bytes in [150_528, 4_915_200] {
        let n = bytes / 4;
        let mut dev = DeviceBuffer::<f32>::alloc(n).expect("alloc");
        let s = seed();
        staging
            .upload(&mut dev, &pattern(n, s), &stream)
            .expect("upload after calibrate");
        check("upload after calibrate", &device_contents(&dev), s);
        let s = seed();
        set_device(&mut dev, s);
        let mut host = pattern::<f32>(n, seed());
        staging
            .download(&mut host, &dev, &stream)
            .expect("download after calibrate");
        check("download after calibrate", &host, s);
    }
}

// ---------------------------------------------------------------------------------
// 10. threads
// ---------------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn eight_threads_each_with_its_own_stream_and_buffer() {
    let (ctx, _stream) = gpu();
    const SIZES: [usize; 6] = [4, 4 * KIB, 150_528, 196_608, MIB + 4, 4_915_200];
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let ctx = ctx.clone();
                scope.spawn(move || {
                    // Nothing is bound on this thread: every call enters the context
                    // of its stream or buffer.
                    let stream = Stream::new(&ctx).expect("Stream::new");
                    let mut staging = staged_buffer();
                    if t % 2 == 1 {
                        staging.set_copy_threads(2);
                    }
                    for iter in 0..50 {
                        let bytes = SIZES[(t + iter) % SIZES.len()];
                        let n = bytes / 4;
                        let what = format!("thread {t} iteration {iter} ({bytes} B)");
                        let mut a = DeviceBuffer::<f32>::alloc_in(&ctx, n).expect("alloc_in");
                        let mut b = DeviceBuffer::<f32>::alloc_in(&ctx, n).expect("alloc_in");
                        let (sa, sb) = (seed(), seed());
                        // Two uploads (the second overwrites the pinned bytes of the
                        // first), then two downloads in the same order.
                        if iter % 2 == 0 {
                            staging
                                .upload_with(&mut a, n, &stream, |d| fill_pattern(d, sa))
                                .expect(&what);
                            staging
                                .upload(&mut b, &pattern(n, sb), &stream)
                                .expect(&what);
                            let got = staging.download_into(&a, n, &stream).expect(&what);
                            check(&format!("{what}: a"), got, sa);
                            let mut host = pattern::<f32>(n, seed());
                            staging.download(&mut host, &b, &stream).expect(&what);
                            check(&format!("{what}: b"), &host, sb);
                        } else {
                            staging
                                .upload(&mut a, &pattern(n, sa), &stream)
                                .expect(&what);
                            staging
                                .upload_with(&mut b, n, &stream, |d| fill_pattern(d, sb))
                                .expect(&what);
                            let mut host = pattern::<f32>(n, seed());
                            staging.download(&mut host, &a, &stream).expect(&what);
                            check(&format!("{what}: a"), &host, sa);
                            let got = staging.download_into(&b, n, &stream).expect(&what);
                            check(&format!("{what}: b"), got, sb);
                        }
                        if iter % 10 == 0 {
                            check(&format!("{what}: device a"), &device_contents(&a), sa);
                            check(&format!("{what}: device b"), &device_contents(&b), sb);
                        }
                    }
                    let st = staging.stats();
                    // Small uploads go to the driver by default; every transfer counts.
                    assert_eq!(st.transfers(), 200, "thread {t}: {st:?}");
                })
            })
            .collect();
        for h in handles {
            h.join()
                .expect("a worker thread failed (see its panic above)");
        }
    });
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_buffer_moved_to_another_thread_keeps_working() {
    let (ctx, stream) = gpu();
    let n = 1_228_800;
    let mut staging = staged_buffer();
    let mut dev = device_with::<f32>(n, seed());
    let s = seed();
    staging
        .upload(&mut dev, &pattern(n, s), &stream)
        .expect("upload");
    check("upload before the move", &device_contents(&dev), s);
    let stats = staging.stats();

    let (mut staging, mut dev) = std::thread::spawn(move || {
        let stream = Stream::new(&ctx).expect("Stream::new");
        let mut staging = staging;
        let mut dev = dev;
        assert_eq!(staging.stats(), stats);
        let s = seed();
        staging
            .upload_with(&mut dev, n, &stream, |d| fill_pattern(d, s))
            .expect("upload_with on the other thread");
        check("upload_with on the other thread", &device_contents(&dev), s);
        let s = seed();
        set_device(&mut dev, s);
        let mut host = pattern::<f32>(n, seed());
        staging
            .download(&mut host, &dev, &stream)
            .expect("download on the other thread");
        check("download on the other thread", &host, s);
        (staging, dev)
    })
    .join()
    .expect("the other thread failed");

    let s = seed();
    set_device(&mut dev, s);
    let got = staging
        .download_into(&dev, n, &stream)
        .expect("download_into");
    check("download_into back on the first thread", got, s);
    assert_eq!(staging.stats().allocations, 1);
    assert_eq!(staging.stats().staged_transfers, 4);
}

/// Uploads and downloads `bytes / size_of::<T>()` elements of `T` with `staging` on
/// `stream`, checking every element; `together` is waited on before each transfer,
/// so that the threads sharing it transfer at the same time (the caller holds a
/// member guard of it).
fn round_trips_in_step<T: Pattern>(
    who: &str,
    staging: &mut StagingBuffer,
    stream: &Stream,
    together: &Lockstep,
    sizes: &[usize],
    rounds: usize,
) {
    for round in 0..rounds {
        for &bytes in sizes {
            let n = bytes / size_of::<T>();
            let what = format!("{who}, round {round}, {n} x {}", std::any::type_name::<T>());
            let mut dev = DeviceBuffer::<T>::alloc_in(stream.context(), n).expect("alloc_in");
            let s = seed();
            let src = pattern::<T>(n, s);
            together.wait();
            staging.upload(&mut dev, &src, stream).expect(&what);
            check(&format!("upload {what}"), &device_contents(&dev), s);

            let s = seed();
            set_device(&mut dev, s);
            let mut host = pattern::<T>(n, seed());
            together.wait();
            staging.download(&mut host, &dev, stream).expect(&what);
            check(&format!("download {what}"), &host, s);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn two_buffers_transferring_at_the_same_time_both_land_intact() {
    // Two buffers share the process-wide copy pool: their large host copies run at
    // the same time, each split over the free workers, and neither may see the
    // other's bytes. Once with a stream per thread, once with both on one stream.
    let (ctx, shared) = gpu();
    const SIZES: [usize; 4] = [150_528, 4_915_200, 17 * MIB + 4, 2 * MIB + 4];
    for one_stream in [false, true] {
        let together = Lockstep::new(2);
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..2)
                .map(|t| {
                    let (ctx, shared, together) = (&ctx, &shared, &together);
                    scope.spawn(move || {
                        let _member = together.member();
                        let own;
                        let stream = if one_stream {
                            shared
                        } else {
                            own = Stream::new(ctx).expect("Stream::new");
                            &own
                        };
                        let who = format!("thread {t}, one stream: {one_stream}");
                        let mut staging = staged_buffer();
                        staging.set_copy_threads(default_copy_threads().max(2));
                        if t == 0 {
                            round_trips_in_step::<u8>(
                                &who,
                                &mut staging,
                                stream,
                                together,
                                &SIZES,
                                3,
                            );
                        } else {
                            round_trips_in_step::<f32>(
                                &who,
                                &mut staging,
                                stream,
                                together,
                                &SIZES,
                                3,
                            );
                        }
                        assert_eq!(staging.stats().staged_transfers, 2 * 3 * SIZES.len() as u64);
                    })
                })
                .collect();
            for h in handles {
                h.join()
                    .expect("a transferring thread failed (see its panic above)");
            }
        });
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn copy_threads_stay_bounded_with_eight_concurrent_buffers() {
    // One process-wide pool: however many buffers copy at once, the threads named
    // staging-copy-* are the pool's, started once, never more than the cores, never
    // restarted.
    let (ctx, stream) = gpu();
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let copy_threads = default_copy_threads().max(2);

    // Start the pool (if no other test did): a staged copy that wants helpers.
    let n = 4 * MIB;
    let mut dev = DeviceBuffer::<u8>::alloc(n).expect("alloc");
    let mut staging = staged_buffer();
    staging.set_copy_threads(copy_threads);
    let s = seed();
    staging
        .upload(&mut dev, &pattern(n, s), &stream)
        .expect("upload");
    check("the upload that starts the pool", &device_contents(&dev), s);
    let started = pool_threads_started();
    assert_eq!(started, pool_threads(), "the pool's helpers");
    assert!(
        started <= cores.max(2),
        "{started} pool threads on {cores} cores"
    );
    let before = pool_tasks();
    let tids = |v: &[TaskInfo]| v.iter().map(|t| t.tid).collect::<Vec<_>>();
    assert_eq!(before.len(), started, "threads named staging-*: {before:?}");

    let stop = std::sync::atomic::AtomicBool::new(false);
    let together = Lockstep::new(8);
    let samples = std::thread::scope(|scope| {
        let sampler = scope.spawn(|| {
            let mut samples = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                samples.push(pool_tasks());
                std::thread::sleep(std::time::Duration::from_micros(500));
            }
            samples
        });
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let (ctx, together) = (&ctx, &together);
                scope.spawn(move || {
                    let _member = together.member();
                    let stream = Stream::new(ctx).expect("Stream::new");
                    let mut staging = staged_buffer();
                    staging.set_copy_threads(copy_threads);
                    round_trips_in_step::<u8>(
                        &format!("buffer {t} of 8"),
                        &mut staging,
                        &stream,
                        together,
                        &[4_915_200, 17 * MIB + 3],
                        3,
                    );
                })
            })
            .collect();
        let mut failed = 0;
        for h in handles {
            failed += usize::from(h.join().is_err());
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let samples = sampler.join().expect("sampler");
        assert_eq!(
            failed, 0,
            "transferring threads failed (see their panics above)"
        );
        samples
    });

    assert!(!samples.is_empty());
    for (k, sample) in samples.iter().enumerate() {
        assert_eq!(
            tids(sample),
            tids(&before),
            "sample {k} of {} during the transfers: the pool's threads changed \
             ({} now, {started} started): {sample:?}",
            samples.len(),
            sample.len()
        );
    }
    let after = pool_tasks();
    assert_eq!(
        tids(&after),
        tids(&before),
        "after the transfers: {after:?}"
    );
    assert_eq!(pool_threads_started(), started);
}
