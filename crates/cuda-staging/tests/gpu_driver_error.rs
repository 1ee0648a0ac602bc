//! GPU test: a driver error during a copy is returned as an error, is not counted,
//! and leaves the `StagingBuffer` working.
//!
//! Its own test binary (its own process, so its own primary context): the copies
//! target an address no allocation covers, and were the driver ever to report that
//! as an asynchronous fault rather than an immediate error, the sticky error would
//! otherwise fail every other GPU test running beside it. Run with
//! `cargo xtask test-gpu` (or `cargo test -p cuda-staging --test gpu_driver_error --
//! --ignored` on a GPU machine).
//!
//! Note for `cargo xtask test-gpu --sanitize`: compute-sanitizer reports the
//! deliberate failing API calls of this binary.

mod common;

use common::*;
use cuda_staging::{DeviceBuffer, PinnedBuffer};

/// An address that is no device allocation.
const BAD_DEVICE_PTR: u64 = 0xdead_0000;

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn driver_error_during_a_copy_is_returned_and_not_counted() {
    let (ctx, stream) = gpu();
    let mut staging = staged_buffer();

    // A successful transfer first, so the counters are not all zero.
    let n = 1 << 20;
    let mut good = DeviceBuffer::<u8>::alloc(n).expect("alloc");
    let s = seed();
    staging
        .upload(&mut good, &pattern(n, s), &stream)
        .expect("upload");
    check("upload before the errors", &device_contents(&good), s);
    let before = staging.stats();

    // Single-piece (1 MiB) and pipelined (4 MiB) sizes.
    for len in [1 << 20, 4 << 20] {
        // SAFETY: deliberately violates condition 1 (no memory behind the pointer) to
        // provoke a driver error; the buffer is never read or written by the host, it
        // is borrowed (so never freed), and every use below is a driver copy that the
        // driver rejects.
        let mut bad = unsafe { DeviceBuffer::<u8>::from_raw_borrowed(&ctx, BAD_DEVICE_PTR, len) }
            .expect("from_raw_borrowed");
        let src = pattern::<u8>(len, seed());
        let mut host = vec![0u8; len];

        let mut attempts: Vec<(String, cuda_staging::Error)> = Vec::new();
        for threshold in [usize::MAX, 0] {
            staging.set_auto_stage_max_bytes(threshold);
            let what = format!("{len} B, threshold {threshold}");
            let e = staging
                .upload(&mut bad, &src, &stream)
                .expect_err("upload to a bad pointer must fail");
            attempts.push((format!("upload {what}"), e));
            let e = staging
                .download(&mut host, &bad, &stream)
                .expect_err("download from a bad pointer must fail");
            attempts.push((format!("download {what}"), e));
        }
        staging.set_auto_stage_max_bytes(usize::MAX);
        let e = staging
            .upload_with(&mut bad, len, &stream, |d| fill_pattern(d, 1))
            .expect_err("upload_with to a bad pointer must fail");
        attempts.push((format!("upload_with {len} B"), e));
        let e = staging
            .download_into(&bad, len, &stream)
            .expect_err("download_into from a bad pointer must fail");
        attempts.push((format!("download_into {len} B"), e));

        let mut pinned = PinnedBuffer::<u8>::alloc(len).expect("PinnedBuffer::alloc");
        let e = staging
            .upload(&mut bad, &pinned, &stream)
            .expect_err("upload from pinned to a bad pointer must fail");
        attempts.push((format!("upload from pinned {len} B"), e));
        let e = staging
            .download(&mut pinned, &bad, &stream)
            .expect_err("download into pinned from a bad pointer must fail");
        attempts.push((format!("download into pinned {len} B"), e));

        for (what, e) in &attempts {
            eprintln!("{what}: {e}");
            assert!(
                e.driver_code().is_some(),
                "{what}: expected a driver error, got {e:?}"
            );
        }
        assert_eq!(
            transfer_counters(&staging.stats()),
            transfer_counters(&before),
            "failed transfers must not be counted"
        );
    }

    // The stream and the buffer still work, on every route.
    stream.synchronize().expect("the stream is still usable");
    for threshold in [usize::MAX, 0] {
        staging.set_auto_stage_max_bytes(threshold);
        for len in [150_528, 4 << 20] {
            let mut dev = DeviceBuffer::<u8>::alloc(len).expect("alloc");
            let s = seed();
            staging
                .upload(&mut dev, &pattern(len, s), &stream)
                .expect("upload after the errors");
            check("upload after the errors", &device_contents(&dev), s);
            let s = seed();
            set_device(&mut dev, s);
            let mut host = pattern::<u8>(len, seed());
            staging
                .download(&mut host, &dev, &stream)
                .expect("download after the errors");
            check("download after the errors", &host, s);
        }
    }
    let s = seed();
    staging
        .upload_with(&mut good, n, &stream, |d| fill_pattern(d, s))
        .expect("upload_with after the errors");
    check("upload_with after the errors", &device_contents(&good), s);
    let s = seed();
    set_device(&mut good, s);
    let got = staging
        .download_into(&good, n, &stream)
        .expect("download_into after the errors");
    check("download_into after the errors", got, s);
    let after = staging.stats();
    assert_eq!(after.staged_transfers, before.staged_transfers + 2 * 2 + 2);
    assert_eq!(after.direct_transfers, before.direct_transfers + 2 * 2);
    assert_eq!(
        after.pinned_source_transfers,
        before.pinned_source_transfers
    );
}
