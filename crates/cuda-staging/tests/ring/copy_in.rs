//! Copy-in from a pageable slice: upload copies the slice before it returns.

use super::*;

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn upload_copies_the_slice_before_returning() {
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let mut ring = StagingRing::new();
    warm(&mut ring, &stream, 4_915_200);
    for bytes in [4 * KIB, 150_528, MIB + 4, 4_915_200] {
        let n = bytes / 4;
        let (s_sent, s_after) = (seed(), seed());
        let mut src = pattern::<f32>(n, s_sent);
        let mut d = DeviceBuffer::<f32>::alloc(n).unwrap();
        // The DMA waits behind ~1 ms of work; the slice is overwritten at once.
        busy.queue(&stream);
        ring.upload(&mut d, &src, &stream).unwrap();
        fill_pattern(&mut src, s_after);
        drop(src);
        check(
            &format_args!("upload of {bytes} B"),
            &device_contents(&d),
            s_sent,
        );
    }
    // Single-threaded copy-in gives the same.
    let mut ring = StagingRing::with_config(RingConfig {
        copy_threads: 1,
        ..RingConfig::default()
    })
    .unwrap();
    let n = 4_915_200 / 4;
    let s = seed();
    let mut src = pattern::<f32>(n, s);
    let mut d = DeviceBuffer::<f32>::alloc(n).unwrap();
    busy.queue(&stream);
    ring.upload(&mut d, &src, &stream).unwrap();
    fill_pattern(&mut src, seed());
    check(
        &format_args!("single-threaded upload"),
        &device_contents(&d),
        s,
    );
}
