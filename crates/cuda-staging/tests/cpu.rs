//! CPU-tier tests of `cuda-staging`: they need no GPU and no driver, and pass on a
//! GPU machine too (the few calls that reach for the driver accept both answers).
//!
//! The unit tests in `src/` already cover the growth policy, pipeline plans,
//! calibration thresholds and host-copy kernels; these tests cover the public API
//! as a user sees it without a device.

use std::collections::HashSet;

use cuda_staging::{
    default_copy_threads, Direction, Error, StagingBuffer, StagingStats,
    DEFAULT_AUTO_STAGE_MAX_BYTES, PIPELINE_WINDOW_BYTES,
};

static_assertions::assert_impl_all!(StagingBuffer: Send, Default, std::fmt::Debug);
static_assertions::assert_impl_all!(
    StagingStats: Copy,
    Clone,
    Default,
    std::fmt::Debug,
    PartialEq,
    Eq,
    Send,
    Sync
);
static_assertions::assert_impl_all!(
    Direction: Copy,
    Clone,
    std::fmt::Debug,
    PartialEq,
    Eq,
    std::hash::Hash
);
static_assertions::assert_not_impl_any!(StagingBuffer: Clone, Copy);
static_assertions::const_assert_eq!(DEFAULT_AUTO_STAGE_MAX_BYTES, 512 * 1024);

/// What a call that needs a current context answers without one: no driver here
/// (`DriverNotFound`), a driver but `cuInit` not called in this process
/// (`CUDA_ERROR_NOT_INITIALIZED`), or an initialised driver with no context current on
/// this thread (`NoContext`).
fn is_no_device_answer(e: &Error) -> bool {
    matches!(e, Error::DriverNotFound { .. } | Error::NoContext)
        || e.driver_code() == Some(cuda_core::sys::CUDA_ERROR_NOT_INITIALIZED)
}

#[test]
fn new_pins_nothing_and_has_the_documented_defaults() {
    let s = StagingBuffer::new();
    assert_eq!(s.capacity(), 0);
    assert_eq!(s.stats(), StagingStats::default());
    assert_eq!(s.stats().transfers(), 0);
    // The shipped default stages every size, per direction too.
    assert_eq!(s.auto_stage_max_bytes(), usize::MAX);
    assert_eq!(s.stage_max_bytes(Direction::HostToDevice), usize::MAX);
    assert_eq!(s.stage_max_bytes(Direction::DeviceToHost), usize::MAX);
    assert_eq!(s.copy_threads(), default_copy_threads());

    let d = StagingBuffer::default();
    assert_eq!(d.capacity(), 0);
    assert_eq!(d.stats(), StagingStats::default());
    assert_eq!(d.auto_stage_max_bytes(), usize::MAX);
}

#[test]
fn default_copy_threads_is_half_the_cores_within_one_to_sixteen() {
    let n = default_copy_threads();
    assert!((1..=16).contains(&n), "{n}");
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    assert_eq!(n, (cores / 2).clamp(1, 16));
}

#[test]
fn routing_threshold_setters() {
    let mut s = StagingBuffer::new();
    for bytes in [
        0,
        1,
        DEFAULT_AUTO_STAGE_MAX_BYTES,
        PIPELINE_WINDOW_BYTES,
        usize::MAX,
    ] {
        s.set_auto_stage_max_bytes(bytes);
        assert_eq!(s.auto_stage_max_bytes(), bytes);
        assert_eq!(s.stage_max_bytes(Direction::HostToDevice), bytes);
        assert_eq!(s.stage_max_bytes(Direction::DeviceToHost), bytes);
    }

    // Per direction; the combined getter reports the smaller.
    s.set_auto_stage_max_bytes(DEFAULT_AUTO_STAGE_MAX_BYTES);
    s.set_stage_max_bytes(Direction::DeviceToHost, 0);
    assert_eq!(
        s.stage_max_bytes(Direction::HostToDevice),
        DEFAULT_AUTO_STAGE_MAX_BYTES
    );
    assert_eq!(s.stage_max_bytes(Direction::DeviceToHost), 0);
    assert_eq!(s.auto_stage_max_bytes(), 0);
    s.set_stage_max_bytes(Direction::HostToDevice, 100);
    s.set_stage_max_bytes(Direction::DeviceToHost, usize::MAX);
    assert_eq!(s.auto_stage_max_bytes(), 100);

    // Setters pin nothing and count nothing.
    assert_eq!(s.capacity(), 0);
    assert_eq!(s.stats(), StagingStats::default());
}

#[test]
fn copy_threads_setter() {
    let mut s = StagingBuffer::new();
    s.set_copy_threads(0);
    assert_eq!(s.copy_threads(), 1, "0 means the calling thread alone");
    for n in [1, 2, 4, 8, 16] {
        s.set_copy_threads(n);
        assert_eq!(s.copy_threads(), n);
        s.set_copy_threads(n); // the same value again is a no-op
        assert_eq!(s.copy_threads(), n);
    }
    assert_eq!(s.capacity(), 0);
}

#[test]
fn direction_is_a_plain_value() {
    let all: HashSet<Direction> = [
        Direction::HostToDevice,
        Direction::DeviceToHost,
        Direction::HostToDevice,
    ]
    .into_iter()
    .collect();
    assert_eq!(all.len(), 2);
    let d = Direction::HostToDevice;
    let copy = d;
    assert_eq!(d, copy);
    assert_ne!(Direction::HostToDevice, Direction::DeviceToHost);
    assert_eq!(format!("{:?}", Direction::DeviceToHost), "DeviceToHost");
}

#[test]
fn staging_stats_default_copy_and_equality() {
    let zero = StagingStats::default();
    assert_eq!(zero.allocations, 0);
    assert_eq!(zero.staged_transfers, 0);
    assert_eq!(zero.direct_transfers, 0);
    assert_eq!(zero.pinned_source_transfers, 0);
    assert_eq!(zero.bytes_uploaded, 0);
    assert_eq!(zero.bytes_downloaded, 0);
    assert_eq!(zero.peak_capacity_bytes, 0);

    let a = StagingStats {
        allocations: 1,
        staged_transfers: 2,
        direct_transfers: 3,
        pinned_source_transfers: 4,
        bytes_uploaded: 5,
        bytes_downloaded: 6,
        peak_capacity_bytes: 7,
    };
    let b = a; // Copy: `a` is still usable
    assert_eq!(a, b);
    assert_eq!(a.transfers(), 2 + 3 + 4);
    let mut c = a;
    c.bytes_downloaded += 1;
    assert_ne!(a, c);
    assert_ne!(a, zero);
    let dbg = format!("{a:?}");
    for field in [
        "allocations",
        "staged_transfers",
        "direct_transfers",
        "pinned_source_transfers",
        "bytes_uploaded",
        "bytes_downloaded",
        "peak_capacity_bytes",
    ] {
        assert!(dbg.contains(field), "{dbg} lacks {field}");
    }
}

#[test]
fn with_capacity_without_a_context_is_an_error_not_a_panic() {
    // No context is current on this test thread (no driver here at all on CI).
    let e = StagingBuffer::with_capacity(1 << 20).unwrap_err();
    assert!(is_no_device_answer(&e), "{e:?}");
    // Zero needs nothing pinned, so nothing to ask the driver for.
    let s = StagingBuffer::with_capacity(0).expect("with_capacity(0) pins nothing");
    assert_eq!(s.capacity(), 0);
    assert_eq!(s.stats(), StagingStats::default());
}

#[test]
fn reserve_without_a_context_is_an_error_and_changes_nothing() {
    let mut s = StagingBuffer::new();
    s.set_auto_stage_max_bytes(1234);
    s.set_copy_threads(3);
    for bytes in [1, 4096, 1 << 20, 1 << 40] {
        let e = s.reserve(bytes).unwrap_err();
        assert!(is_no_device_answer(&e), "reserve({bytes}): {e:?}");
        assert_eq!(s.capacity(), 0);
        assert_eq!(s.stats(), StagingStats::default());
    }
    s.reserve(0).expect("reserve(0) is always satisfied");
    assert_eq!(s.auto_stage_max_bytes(), 1234);
    assert_eq!(s.copy_threads(), 3);
}

#[test]
fn shrink_and_reset_on_an_empty_buffer() {
    let mut s = StagingBuffer::new();
    s.shrink_to_fit();
    assert_eq!(s.capacity(), 0);
    s.reset_stats();
    assert_eq!(s.stats(), StagingStats::default());
    assert_eq!(s.stats().peak_capacity_bytes, 0);
}

#[test]
fn debug_shows_capacity_routing_and_stats() {
    let mut s = StagingBuffer::new();
    s.set_auto_stage_max_bytes(DEFAULT_AUTO_STAGE_MAX_BYTES);
    let dbg = format!("{s:?}");
    assert!(dbg.starts_with("StagingBuffer"), "{dbg}");
    for part in ["capacity: 0", "524288", "copy_threads", "stats"] {
        assert!(dbg.contains(part), "{dbg} lacks {part}");
    }
}

#[test]
fn buffer_moves_to_another_thread() {
    let mut s = StagingBuffer::new();
    s.set_auto_stage_max_bytes(42);
    let s = std::thread::spawn(move || {
        assert_eq!(s.auto_stage_max_bytes(), 42);
        s
    })
    .join()
    .expect("thread");
    assert_eq!(s.auto_stage_max_bytes(), 42);
}

/// `e` is `op`'s length mismatch (`host` source elements for `expected` destination
/// ones) and the destination still holds its 1s.
fn assert_refused<T: PartialEq + From<u8> + Copy>(
    e: Error,
    op: &str,
    host: usize,
    expected: usize,
    dst: &[T],
) {
    assert!(
        matches!(e, Error::LengthMismatch { op: o, host: h, expected: x }
            if o == op && h == host && x == expected),
        "{e:?}"
    );
    assert!(
        dst.iter().all(|&x| x == T::from(1)),
        "a refused copy changes nothing"
    );
}

#[test]
fn copy_for_dma_copies_exactly_or_refuses_a_length_mismatch() {
    // Sizes either side of the 4 KiB (per copy) and 32 KiB (per transfer) streaming
    // thresholds, at an odd element offset.
    for n in [0usize, 1, 1023, 1024, 1025, 8191, 8192, 8193, 50_001] {
        let src: Vec<u32> = (0..n as u32 + 1)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let mut dst = vec![0u32; n + 2];
        cuda_staging::copy_for_dma(&mut dst[1..n + 1], &src[1..]).expect("same lengths");
        assert_eq!(&dst[1..n + 1], &src[1..], "{n} elements");
        assert_eq!((dst[0], dst[n + 1]), (0, 0), "{n}: wrote outside the slice");
    }
    let mut dst = vec![1u16; 99];
    let e = cuda_staging::copy_for_dma(&mut dst, &[9u16; 100]).unwrap_err();
    assert_refused(e, "copy_for_dma", 100, 99, &dst);

    // The probe's always-streaming variant refuses the same way.
    let mut dst = vec![1u8; 9000];
    let e = cuda_staging::copy_streaming(&mut dst, &[7u8; 9001]).unwrap_err();
    assert_refused(e, "copy_streaming", 9001, 9000, &dst);
    cuda_staging::copy_streaming(&mut dst, &[7u8; 9000]).expect("same lengths");
    assert!(dst.iter().all(|&x| x == 7));
}
