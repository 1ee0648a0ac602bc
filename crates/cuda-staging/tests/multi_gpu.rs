//! Multi-GPU: one context, stream and staging buffer per device, driven from parallel
//! threads, every byte verified. Needs at least two GPUs, so it is ignored by default
//! and run by `cargo xtask test-gpu --multi-gpu` (it fails, rather than passes, on a
//! machine with fewer).

use cuda_staging::{Context, DeviceBuffer, StagingBuffer, Stream};

#[test]
#[ignore = "needs two or more CUDA GPUs: run with cargo xtask test-gpu --multi-gpu"]
fn one_staging_buffer_per_gpu_in_parallel_threads() {
    let count = Context::device_count().expect("CUDA driver");
    assert!(
        count >= 2,
        "this test needs at least two GPUs, found {count}"
    );
    let threads: Vec<_> = (0..count)
        .map(|ordinal| {
            std::thread::spawn(move || {
                let ctx = Context::new(ordinal).unwrap_or_else(|e| panic!("device {ordinal}: {e}"));
                assert_eq!(ctx.ordinal(), ordinal);
                let stream = Stream::new(&ctx).expect("stream");
                let mut staging = StagingBuffer::new();
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
    let count = Context::device_count().expect("CUDA driver");
    assert!(
        count >= 2,
        "this test needs at least two GPUs, found {count}"
    );
    let ctx1 = Context::new(1).expect("device 1");
    let foreign = DeviceBuffer::<u8>::alloc(1024).expect("buffer on device 1");
    let ctx0 = Context::new(0).expect("device 0");
    let stream0 = Stream::new(&ctx0).expect("stream on device 0");
    let mut staging = StagingBuffer::new();
    let err = staging.download_into(&foreign, 16, &stream0).unwrap_err();
    assert!(
        matches!(err, cuda_staging::Error::ContextMismatch { .. }),
        "{err}"
    );
    assert_eq!(staging.stats(), Default::default());
    assert_eq!(staging.capacity(), 0);
    drop(ctx1);
}
