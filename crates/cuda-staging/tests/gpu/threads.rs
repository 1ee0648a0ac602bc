//! Threads: one buffer per thread, a buffer moved between threads, buffers transferring
//! at the same time, and the copy pool staying bounded.

use super::*;
use cuda_staging::StagingConfig;

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
                        staging
                            .set_config(StagingConfig {
                                copy_threads: 2,
                                ..staging.config()
                            })
                            .expect("set_config");
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
                        staging
                            .set_config(StagingConfig {
                                copy_threads: default_copy_threads().max(2),
                                ..staging.config()
                            })
                            .expect("set_config");
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
    staging
        .set_config(StagingConfig {
            copy_threads,
            ..staging.config()
        })
        .expect("set_config");
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
                    staging
                        .set_config(StagingConfig {
                            copy_threads,
                            ..staging.config()
                        })
                        .expect("set_config");
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
