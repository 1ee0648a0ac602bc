//! Ordering against work already queued on the stream, on every route and on both sides
//! of every routing bound.

use super::*;
use cuda_staging::StagingConfig;

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
    let mut staging = match route {
        OrderRoute::Pageable => seed_routing(0),
        _ => staged_buffer(),
    };
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
    let mut staging = match route {
        OrderRoute::Pageable => seed_routing(0),
        _ => staged_buffer(),
    };
    let mut dev = device_with::<u8>(bytes, seed());
    // Kept until the end: freed, its address could come back for the registered
    // source below, and the buffer's page-lock memo would then answer "pageable"
    // for it (a slower route, by design, for a few transfers; not the route this
    // test checks). That happened once under cargo-mutants' baseline.
    let warm = pattern::<u8>(bytes, seed());
    staging.upload(&mut dev, &warm, &stream).expect("warm-up");

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
    /// `seed_routing(DEFAULT_AUTO_STAGE_MAX_BYTES)`: staged up to 512 KiB, the driver
    /// above, both directions.
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
            Routing::Seed => staging = seed_routing(DEFAULT_AUTO_STAGE_MAX_BYTES),
            Routing::Chunk64K => staging
                .set_config(StagingConfig {
                    pipeline_chunk_bytes: 64 * KIB,
                    ..staging.config()
                })
                .expect("set_config"),
        }
        for direction in [Direction::HostToDevice, Direction::DeviceToHost] {
            for bytes in bound_sizes(routing, direction) {
                let route = expected_route(routing, direction, bytes);
                let what = format!("{routing:?} routing, {direction:?} {bytes} B ({route:?})");
                assert_eq!(
                    staging.config().stages(direction, bytes),
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
