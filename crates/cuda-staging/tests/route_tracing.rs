//! GPU tests of the `tracing` feature: each transfer, on every route, makes exactly
//! one `transfer` span (target `cuda_staging`, level DEBUG) whose fields say what it
//! did: its method, direction, bytes, route, chunks or parts, copy threads and time.
//!
//! Built only with the feature (`required-features = ["tracing"]`); `cargo xtask
//! test-gpu` builds and bundles it with the feature on. The tests are `#[ignore]`d so
//! that `cargo test -p cuda-staging --features tracing` passes without a GPU; on a
//! GPU machine `cargo test -p cuda-staging --features tracing --test route_tracing
//! -- --ignored`. Without a device each one fails loudly.
//!
//! Each test captures the spans of its own thread (`tests/spans`: a capturing layer
//! installed as the thread's default subscriber), runs one transfer per capture, and
//! checks the data moved as every GPU test does (patterns that differ per element
//! and per call, every element compared) and that the route agrees with the
//! buffer's own counters.

mod common;
mod spans;

use common::*;
use cuda_staging::StagingConfig;
use cuda_staging::{
    DeviceBuffer, DownloadBatch, PinnedBuffer, PitchedBuffer, StagingBuffer, StagingRing,
    UploadBatch,
};
use spans::{capture, transfers, SpanRecord};

/// Bytes of the seed's 112x112x3 and 640x640x3 f32 tensors.
const SMALL: usize = 150_528;
const LARGE: usize = 4_915_200;
const F32: usize = std::mem::size_of::<f32>();

/// The one transfer span among `spans`; panics naming `what` when there is not
/// exactly one.
#[track_caller]
fn one_span(what: &str, spans: &[SpanRecord]) -> SpanRecord {
    let t = transfers(spans);
    assert_eq!(
        t.len(),
        1,
        "{what}: expected exactly one transfer span, got {spans:#?}"
    );
    t[0].clone()
}

/// Checks what every transfer span carries: `op`, `direction`, `bytes` and
/// `route` as given, a time, no `failed`, and copy threads that add up (the caller
/// plus its helpers, or none).
#[track_caller]
fn check_span(span: &SpanRecord, op: &str, direction: &str, bytes: usize, route: &str) {
    assert_eq!(span.level, tracing::Level::DEBUG, "{span:?}");
    assert_eq!(span.str("op"), Some(op), "op of {span:?}");
    assert_eq!(
        span.str("direction"),
        Some(direction),
        "direction of {span:?}"
    );
    assert_eq!(span.u64("bytes"), Some(bytes as u64), "bytes of {span:?}");
    assert_eq!(span.str("route"), Some(route), "route of {span:?}");
    let elapsed = span.f64("elapsed_us").expect("elapsed_us");
    assert!(elapsed > 0.0 && elapsed < 10e6, "elapsed_us of {span:?}");
    assert_eq!(
        span.bool("failed"),
        None,
        "a transfer that succeeded: {span:?}"
    );
    let threads = span.u64("copy_threads").expect("copy_threads");
    let helpers = span.u64("helpers").expect("helpers");
    assert_eq!(helpers, threads.saturating_sub(1), "helpers of {span:?}");
    assert!(
        span.recorded.values().all(|&n| n == 1),
        "every field recorded once: {span:?}"
    );
}

/// The copy threads a span reports.
fn copy_threads(span: &SpanRecord) -> u64 {
    span.u64("copy_threads").expect("copy_threads")
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn an_upload_of_150528_bytes_in_one_piece_is_staged() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    // One chunk larger than the transfer: staged in one piece whether or not the
    // pool's helpers take part (without them the automatic plan cuts it in two).
    staging
        .set_config(StagingConfig {
            pipeline_chunk_bytes: 1 << 20,
            ..staging.config()
        })
        .expect("set_config");
    let seed = seed();
    let src = pattern::<f32>(SMALL / F32, seed);
    let mut dev = DeviceBuffer::<f32>::alloc(SMALL / F32).expect("alloc");
    let (r, spans) = capture(|| staging.upload(&mut dev, &src, &stream));
    r.expect("upload");
    check("upload", &device_contents(&dev), seed);
    let span = one_span("upload", &spans);
    check_span(&span, "upload", "h2d", SMALL, "staged");
    assert_eq!(span.u64("chunks"), Some(1), "{span:?}");
    let threads = copy_threads(&span);
    assert!(
        (1..=staging.config().copy_threads as u64).contains(&threads),
        "{span:?}"
    );
    assert_eq!(staging.stats().staged_transfers, 1);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_download_of_4915200_bytes_is_pipelined() {
    let (_ctx, stream) = gpu();
    // Staged after a gap too, so the route does not depend on the test's timing.
    let mut staging = staged_buffer();
    let seed = seed();
    let dev = device_with::<f32>(LARGE / F32, seed);
    let mut dst = vec![0f32; LARGE / F32];
    let (r, spans) = capture(|| staging.download(&mut dst, &dev, &stream));
    r.expect("download");
    check("download", &dst, seed);
    let span = one_span("download", &spans);
    check_span(&span, "download", "d2h", LARGE, "pipelined");
    let chunks = span.u64("chunks").expect("chunks");
    assert!(chunks >= 2, "cut into chunks: {span:?}");
    let threads = copy_threads(&span);
    assert!(
        (1..=staging.config().copy_threads as u64).contains(&threads),
        "{span:?}"
    );
    assert_eq!(staging.stats().staged_transfers, 1);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn the_seed_shapes_report_the_plan_they_ran_with_default_settings() {
    let (_ctx, stream) = gpu();
    let mut staging = staged_buffer();
    for bytes in [SMALL, LARGE] {
        let n = bytes / F32;
        let up_seed = seed();
        let src = pattern::<f32>(n, up_seed);
        let mut dev = DeviceBuffer::<f32>::alloc(n).expect("alloc");
        let down_seed = seed();
        let from = device_with::<f32>(n, down_seed);
        let mut dst = vec![0f32; n];
        for (what, direction) in [("upload", "h2d"), ("download", "d2h")] {
            let (r, spans) = capture(|| match direction {
                "h2d" => staging.upload(&mut dev, &src, &stream),
                _ => staging.download(&mut dst, &from, &stream),
            });
            r.unwrap_or_else(|e| panic!("{what} of {bytes} B: {e}"));
            let span = one_span(what, &spans);
            // Staged: in one piece or in chunks, as the plan had it.
            let chunks = span.u64("chunks").expect("chunks");
            let route = if chunks > 1 { "pipelined" } else { "staged" };
            check_span(&span, what, direction, bytes, route);
            assert!(copy_threads(&span) >= 1, "{span:?}");
        }
        check("upload", &device_contents(&dev), up_seed);
        check("download", &dst, down_seed);
    }
    assert_eq!(staging.stats().staged_transfers, 4);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn page_locked_memory_is_dmad_straight_with_no_host_copy() {
    let (_ctx, stream) = gpu();
    let mut staging = StagingBuffer::new();
    let n = SMALL / F32;
    let seed = seed();
    let mut pinned = PinnedBuffer::<f32>::alloc(n).expect("PinnedBuffer::alloc");
    fill_pattern(&mut pinned, seed);
    let mut dev = DeviceBuffer::<f32>::alloc(n).expect("alloc");
    let (r, spans) = capture(|| staging.upload(&mut dev, &pinned, &stream));
    r.expect("upload from pinned memory");
    check("upload", &device_contents(&dev), seed);
    let span = one_span("upload from pinned memory", &spans);
    check_span(&span, "upload", "h2d", SMALL, "page-locked");
    assert_eq!(copy_threads(&span), 0, "{span:?}");

    let back_seed = common::seed();
    set_device(&mut dev, back_seed);
    let (r, spans) = capture(|| staging.download(&mut pinned, &dev, &stream));
    r.expect("download into pinned memory");
    check("download", &pinned, back_seed);
    let span = one_span("download into pinned memory", &spans);
    check_span(&span, "download", "d2h", SMALL, "page-locked");
    assert_eq!(copy_threads(&span), 0, "{span:?}");
    assert_eq!(staging.stats().pinned_source_transfers, 2);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_small_upload_goes_to_the_driver() {
    let (_ctx, stream) = gpu();
    let mut staging = StagingBuffer::new();
    let bytes = 4096;
    let seed = seed();
    let src = pattern::<u8>(bytes, seed);
    let mut dev = DeviceBuffer::<u8>::alloc(bytes).expect("alloc");
    let (r, spans) = capture(|| staging.upload(&mut dev, &src, &stream));
    r.expect("upload");
    check("upload", &device_contents(&dev), seed);
    let span = one_span("small upload", &spans);
    check_span(&span, "upload", "h2d", bytes, "driver");
    assert_eq!(copy_threads(&span), 0, "{span:?}");
    assert_eq!(span.u64("chunks"), None, "{span:?}");
    assert_eq!(staging.stats().direct_transfers, 1);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn upload_with_and_download_into_are_staged_with_no_host_copy() {
    let (_ctx, stream) = gpu();
    let mut staging = StagingBuffer::new();
    let n = SMALL / F32;
    let seed = seed();
    let mut dev = DeviceBuffer::<f32>::alloc(n).expect("alloc");
    let (r, spans) = capture(|| {
        staging.upload_with(&mut dev, n, &stream, |px: &mut [f32]| {
            fill_pattern(px, seed)
        })
    });
    r.expect("upload_with");
    check("upload_with", &device_contents(&dev), seed);
    let span = one_span("upload_with", &spans);
    check_span(&span, "upload_with", "h2d", SMALL, "staged");
    assert_eq!(copy_threads(&span), 0, "{span:?}");

    let (landed_ok, spans) = capture(|| {
        let landed = staging
            .download_into(&dev, n, &stream)
            .expect("download_into");
        check("download_into", landed, seed);
        true
    });
    assert!(landed_ok);
    let span = one_span("download_into", &spans);
    check_span(&span, "download_into", "d2h", SMALL, "staged");
    assert_eq!(copy_threads(&span), 0, "{span:?}");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_batch_is_one_span_with_its_parts() {
    let (_ctx, stream) = gpu();
    let mut staging = StagingBuffer::new();
    // A model's four outputs.
    let sizes = [4096usize, 16384, 65536, SMALL];
    let seeds: Vec<u64> = sizes.iter().map(|_| seed()).collect();
    let outputs: Vec<DeviceBuffer<u8>> = sizes
        .iter()
        .zip(&seeds)
        .map(|(&b, &s)| device_with::<u8>(b, s))
        .collect();
    let mut batch = DownloadBatch::new();
    let parts: Vec<_> = outputs
        .iter()
        .zip(sizes)
        .map(|(d, b)| batch.add(d, b).expect("add"))
        .collect();
    let total: usize = sizes.iter().sum();
    let (checked, spans) = capture(|| {
        let landed = staging
            .download_batch(&batch, &stream)
            .expect("download_batch");
        for ((part, s), b) in parts.iter().zip(&seeds).zip(sizes) {
            check(
                &format_args!("part of {b} B"),
                landed.get(*part).expect("get"),
                *s,
            );
        }
        parts.len()
    });
    assert_eq!(checked, 4);
    let span = one_span("download_batch", &spans);
    check_span(&span, "download_batch", "d2h", total, "batched");
    assert_eq!(span.u64("parts"), Some(4), "{span:?}");
    assert_eq!(copy_threads(&span), 0, "{span:?}");

    // And up: the host copies of the parts are this crate's.
    let up_seeds: Vec<u64> = sizes.iter().map(|_| seed()).collect();
    let srcs: Vec<Vec<u8>> = sizes
        .iter()
        .zip(&up_seeds)
        .map(|(&b, &s)| pattern::<u8>(b, s))
        .collect();
    let mut inputs: Vec<DeviceBuffer<u8>> = sizes
        .iter()
        .map(|&b| DeviceBuffer::alloc(b).expect("alloc"))
        .collect();
    let mut up = UploadBatch::new();
    for (d, s) in inputs.iter_mut().zip(&srcs) {
        up.add(d, s).expect("add");
    }
    let (r, spans) = capture(|| staging.upload_batch(&mut up, &stream));
    r.expect("upload_batch");
    drop(up);
    for ((d, s), b) in inputs.iter().zip(&up_seeds).zip(sizes) {
        check(
            &format_args!("uploaded part of {b} B"),
            &device_contents(d),
            *s,
        );
    }
    let span = one_span("upload_batch", &spans);
    check_span(&span, "upload_batch", "h2d", total, "batched");
    assert_eq!(span.u64("parts"), Some(4), "{span:?}");
    assert!(copy_threads(&span) >= 1, "{span:?}");
    assert_eq!(staging.stats().batched_transfers, 2);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn ring_transfers_are_one_span_each_and_waits_none() {
    let (_ctx, stream) = gpu();
    let mut ring = StagingRing::new();
    let n = SMALL / F32;
    let seed = seed();
    let src = pattern::<f32>(n, seed);
    let mut dev = DeviceBuffer::<f32>::alloc(n).expect("alloc");
    let (r, spans) = capture(|| ring.upload(&mut dev, &src, &stream));
    r.expect("ring upload");
    ring.synchronize().expect("synchronize");
    check("ring upload", &device_contents(&dev), seed);
    let span = one_span("StagingRing::upload", &spans);
    check_span(&span, "StagingRing::upload", "h2d", SMALL, "ring");
    assert!(copy_threads(&span) >= 1, "{span:?}");

    let back_seed = common::seed();
    let from = device_with::<f32>(n, back_seed);
    let (ticket, spans) = capture(|| ring.download(&from, n, &stream).expect("download"));
    let span = one_span("StagingRing::download", &spans);
    check_span(&span, "StagingRing::download", "d2h", SMALL, "ring");
    assert_eq!(copy_threads(&span), 0, "{span:?}");
    // Redeeming the ticket is no transfer of its own.
    let ((), spans) = capture(|| {
        check(
            "ring download",
            ring.wait(&ticket).expect("wait"),
            back_seed,
        )
    });
    assert!(transfers(&spans).is_empty(), "{spans:?}");
    assert_eq!(ring.stats().uploads + ring.stats().downloads, 2);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn two_d_transfers_are_staged_spans_of_their_rows_bytes() {
    let (_ctx, stream) = gpu();
    let mut staging = StagingBuffer::new();
    // Eight rows of a 1920-pixel RGB frame from a decoder whose lines are 5824 B.
    let (width, height, pitch) = (1920 * 3, 8, 5824);
    let seed = seed();
    let frame = pattern::<u8>(pitch * height, seed);
    let mut surface = PitchedBuffer::<u8>::alloc(width, height).expect("PitchedBuffer::alloc");
    let (r, spans) = capture(|| staging.upload_2d(&mut surface, &frame, pitch, &stream));
    r.expect("upload_2d");
    let span = one_span("upload_2d", &spans);
    check_span(&span, "upload_2d", "h2d", width * height, "staged");
    // Padded host rows are copied row by row on the calling thread.
    assert_eq!(copy_threads(&span), 1, "{span:?}");

    let (rows_ok, spans) = capture(|| {
        let rows = staging
            .download_2d_into(&surface, &stream)
            .expect("download_2d_into");
        for r in 0..height {
            check_at(
                &format_args!("row {r}"),
                &rows[r * width..(r + 1) * width],
                r * pitch,
                seed,
            );
        }
        true
    });
    assert!(rows_ok);
    let span = one_span("download_2d_into", &spans);
    check_span(&span, "download_2d_into", "d2h", width * height, "staged");
    assert_eq!(copy_threads(&span), 0, "{span:?}");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn empty_transfers_and_refused_input_make_no_span() {
    let (_ctx, stream) = gpu();
    let mut staging = StagingBuffer::new();
    let mut dev = DeviceBuffer::<f32>::alloc(16).expect("alloc");
    let too_long = vec![1f32; 17];
    let ((), spans) = capture(|| {
        staging
            .upload(&mut dev, &[], &stream)
            .expect("empty upload");
        staging
            .download(&mut [] as &mut [f32], &dev, &stream)
            .expect("empty download");
        assert!(staging.upload(&mut dev, &too_long, &stream).is_err());
    });
    assert!(transfers(&spans).is_empty(), "{spans:#?}");
    assert_eq!(staging.stats().transfers(), 0);
}
