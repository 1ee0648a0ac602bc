//! Reuse and growth: steady frames pin once, growth happens only for a larger transfer,
//! and the convenience path streams through its bounded window.

use super::*;
use cuda_staging::StagingConfig;

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
    staging
        .set_config(StagingConfig {
            driver_after_gap: false,
            ..staging.config()
        })
        .expect("set_config");
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

/// `with_capacity` and `reserve` on a thread that never made a context current (a
/// buffer set up before the thread uses the GPU): no error, nothing pinned yet, and
/// the reservation is pinned at the first transfer, in one allocation, so the loop
/// after it allocates nothing. `shrink_to_fit` drops a reservation not yet pinned.
#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn reserving_before_any_context_is_current_pins_at_the_first_transfer() {
    let (ctx, _stream) = gpu();
    std::thread::spawn(move || {
        let mut staging = StagingBuffer::with_capacity(4_915_200)
            .expect("with_capacity on a thread with no context current");
        staging.reserve(1 << 20).expect("reserve, smaller");
        assert_eq!(staging.capacity(), 0, "nothing pinned without a context");
        assert_eq!(staging.stats().allocations, 0);
        let mut dropped = StagingBuffer::new();
        dropped.reserve(64 << 20).expect("reserve");
        dropped.shrink_to_fit();

        ctx.bind_to_thread().expect("bind_to_thread");
        let stream = Stream::new(&ctx).expect("Stream::new");
        let mut devs = seed_shape_buffers();
        let n = devs[0].len();
        staging
            .upload_with(&mut devs[0], n, &stream, |d| fill_pattern(d, 1))
            .expect("first upload_with");
        let cap = staging.capacity();
        assert!(cap >= 4_915_200, "the reservation was pinned: {cap} B");
        assert_eq!(staging.stats().allocations, 1);
        for frame in 0..5 {
            seed_frame(&mut staging, &mut devs, &stream, frame);
        }
        assert_eq!(staging.stats().allocations, 1, "nothing more pinned");
        assert_eq!(staging.capacity(), cap);

        dropped
            .upload_with(&mut devs[0], n, &stream, |d| fill_pattern(d, 2))
            .expect("upload_with after a dropped reservation");
        assert!(
            dropped.capacity() < 64 << 20,
            "the dropped reservation stays dropped"
        );
    })
    .join()
    .expect("the test's thread");
}

/// `reserve` on a buffer that holds pinned memory grows at once, in that memory's
/// context, also on a thread where no context is current: it does not wait for the
/// next transfer as a buffer with nothing pinned does.
#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn reserve_grows_in_the_pinned_memorys_context_on_a_thread_without_one() {
    let (_ctx, stream) = gpu();
    let mut devs = seed_shape_buffers();
    let mut staging = StagingBuffer::new();
    let n = devs[0].len();
    staging
        .upload_with(&mut devs[0], n, &stream, |d| fill_pattern(d, 1))
        .expect("first upload_with");
    let before = staging.capacity();
    let want = 8 << 20;
    assert!(before > 0 && before < want, "pinned {before} B first");
    let mut staging = std::thread::spawn(move || {
        assert!(
            matches!(Context::current(), Err(Error::NoContext)),
            "a new thread has no context current"
        );
        staging.reserve(want).expect("reserve");
        assert!(
            staging.capacity() >= want,
            "pinned at once: {} B",
            staging.capacity()
        );
        staging
    })
    .join()
    .expect("the reserving thread");
    assert_eq!(staging.stats().allocations, 2);
    // The memory is the context's own: every seed shape moves through it here.
    for frame in 0..3 {
        seed_frame(&mut staging, &mut devs, &stream, frame);
    }
    assert_eq!(staging.stats().allocations, 2, "nothing more pinned");
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

    // reset_stats clears every counter, and the peak restarts from the capacity
    // pinned now (smaller than cap3, the peak before); later transfers count from
    // zero.
    let cap = staging.capacity();
    assert!(cap > 0 && cap < cap3, "capacity {cap}, earlier peak {cap3}");
    staging.reset_stats();
    assert_eq!(
        staging.stats(),
        StagingStats {
            peak_capacity_bytes: cap,
            ..StagingStats::default()
        }
    );
    round_trip(&mut staging, 1000);
    let st = staging.stats();
    assert_eq!(
        (
            st.allocations,
            st.staged_transfers,
            st.bytes_uploaded,
            st.bytes_downloaded
        ),
        (0, 2, 4000, 4000)
    );
    assert_eq!(st.peak_capacity_bytes, cap);
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

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn pipeline_events_are_made_at_the_first_chunked_transfer_only() {
    // A staged transfer in one piece waits for its stream and needs no event; the
    // first one cut into chunks makes every slot's event at once (8), so that no
    // later plan, whatever its slots, creates one inside a steady loop.
    let (_ctx, stream) = gpu();
    let mut staging = seed_routing(usize::MAX);
    let mut round_trip = |bytes: usize, what: &str| {
        let s = seed();
        let host = pattern::<u8>(bytes, s);
        let mut dev = device_with::<u8>(bytes, seed());
        staging.upload(&mut dev, &host, &stream).expect("upload");
        let mut back = vec![0u8; bytes];
        staging
            .download(&mut back, &dev, &stream)
            .expect("download");
        check(what, &back, s);
        staging.stats()
    };
    for round in 0..3 {
        let st = round_trip(32 << 10, &format!("one piece, round {round}"));
        assert_eq!(st.staged_transfers, 2 + 2 * round, "{st:?}");
        assert_eq!(st.event_creations, 0, "one piece, round {round}: {st:?}");
    }
    for round in 0..3 {
        let st = round_trip(4_915_200, &format!("chunked, round {round}"));
        assert_eq!(st.staged_transfers, 8 + 2 * round, "{st:?}");
        assert_eq!(st.event_creations, 8, "chunked, round {round}: {st:?}");
    }
}
