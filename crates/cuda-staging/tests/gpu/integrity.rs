//! Data integrity: every method at every size for four element types, around every
//! chunk boundary, with one to four copy threads, and from unaligned host slices.

use super::*;
use cuda_staging::StagingConfig;

// ---------------------------------------------------------------------------------
// data integrity of every method, every size, four element types
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
    let mut seed_routing = common::seed_routing(DEFAULT_AUTO_STAGE_MAX_BYTES);
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
            let route_up = if staging.config().stages(Direction::HostToDevice, nbytes) {
                Route::Staged
            } else {
                Route::Direct
            };
            let route_down = if staging.config().stages(Direction::DeviceToHost, nbytes) {
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
// fast-path integrity at chunk boundaries, copy threads, unaligned host slices
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
    reused
        .set_config(StagingConfig {
            copy_threads: threads,
            ..reused.config()
        })
        .expect("set_config");
    reused
        .set_config(StagingConfig {
            pipeline_chunk_bytes: chunk,
            ..reused.config()
        })
        .expect("set_config");
    assert_eq!(reused.config().copy_threads, threads);
    assert_eq!(reused.config().pipeline_chunk_bytes, chunk);
    let mut fast = staged_buffer();
    fast.set_config(StagingConfig {
        copy_threads: threads,
        ..fast.config()
    })
    .expect("set_config");
    // Stage every size here, small uploads too: this test is about the copy paths.
    reused
        .set_config(StagingConfig {
            stage_min_bytes: reused
                .config()
                .stage_min_bytes
                .with(Direction::HostToDevice, 0),
            ..reused.config()
        })
        .expect("set_config");
    fast.set_config(StagingConfig {
        stage_min_bytes: fast
            .config()
            .stage_min_bytes
            .with(Direction::HostToDevice, 0),
        ..fast.config()
    })
    .expect("set_config");

    for bytes in BOUNDARY_BYTES {
        let what = format!("{bytes} B, {threads} copy thread(s), chunk {chunk}");
        let mut dev = device_with::<u8>(bytes, seed());
        let mut fresh = staged_buffer();
        fresh
            .set_config(StagingConfig {
                copy_threads: threads,
                ..fresh.config()
            })
            .expect("set_config");
        fresh
            .set_config(StagingConfig {
                pipeline_chunk_bytes: chunk,
                ..fresh.config()
            })
            .expect("set_config");
        fresh
            .set_config(StagingConfig {
                stage_min_bytes: fresh
                    .config()
                    .stage_min_bytes
                    .with(Direction::HostToDevice, 0),
                ..fresh.config()
            })
            .expect("set_config");

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
        staging
            .set_config(StagingConfig {
                copy_threads: threads,
                ..staging.config()
            })
            .expect("set_config");
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
