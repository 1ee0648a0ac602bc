//! CPU-tier tests of `cuda-staging`: they need no GPU and no driver, and pass on a
//! GPU machine too (the few calls that reach for the driver accept both answers).
//!
//! The unit tests in `src/` already cover the growth policy, pipeline plans,
//! calibration thresholds and host-copy kernels; these tests cover the public API
//! as a user sees it without a device.

use cuda_staging::StagingConfig;
use cuda_staging::{
    default_copy_threads, pool_threads, pool_threads_started, Direction, Error, StagingBuffer,
    StagingStats, DEFAULT_AUTO_STAGE_MAX_BYTES, DEFAULT_STAGE_MIN_BYTES, MAX_COPY_THREADS,
    PIPELINE_WINDOW_BYTES,
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
    assert_eq!(
        s.config().stage_max_bytes.get(Direction::HostToDevice),
        usize::MAX
    );
    assert_eq!(
        s.config().stage_max_bytes.get(Direction::DeviceToHost),
        usize::MAX
    );
    assert_eq!(s.config().copy_threads, default_copy_threads());

    let d = StagingBuffer::default();
    assert_eq!(d.capacity(), 0);
    assert_eq!(d.stats(), StagingStats::default());
    assert_eq!(d.auto_stage_max_bytes(), usize::MAX);
}

#[test]
fn default_copy_threads_fit_the_shared_pool() {
    // A buffer's copy is split over the calling thread and the pool's free workers, so
    // asking for more threads than the pool has plus the caller would only add parts
    // that wait for a worker; and the pool's helpers plus the caller never outnumber
    // the machine's cores.
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let n = default_copy_threads();
    assert!(n >= 1, "{n}");
    assert!(
        n <= pool_threads() + 1,
        "{n} default copy threads, but the pool has {} workers (plus the caller)",
        pool_threads()
    );
    assert!(n <= MAX_COPY_THREADS);
    assert!(
        pool_threads() < cores.max(2),
        "{} helpers plus the caller on {cores} cores",
        pool_threads()
    );
    assert_eq!(StagingBuffer::new().config().copy_threads, n);
}

#[test]
fn buffers_and_their_settings_start_no_thread() {
    // The pool starts at the first copy that wants helpers, never before; nothing in
    // this binary transfers, so no buffer, setter or failed reserve starts it.
    let mut buffers: Vec<StagingBuffer> = (0..100).map(|_| StagingBuffer::new()).collect();
    for s in &mut buffers {
        s.set_config(StagingConfig {
            copy_threads: 8,
            ..s.config()
        })
        .expect("set_config");
        s.set_config(StagingConfig {
            pipeline_chunk_bytes: 1 << 20,
            ..s.config()
        })
        .expect("set_config");
        let _ = s.reserve(4096); // no context here: an error
    }
    assert_eq!(pool_threads_started(), 0);
    let names: Vec<String> = std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .map(|c| c.trim_end().to_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        !names.iter().any(|n| n.starts_with("staging-")),
        "threads of this process: {names:?}"
    );
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
        assert_eq!(
            s.config().stage_max_bytes.get(Direction::HostToDevice),
            bytes
        );
        assert_eq!(
            s.config().stage_max_bytes.get(Direction::DeviceToHost),
            bytes
        );
    }

    // Per direction; the combined getter reports the smaller.
    s.set_auto_stage_max_bytes(DEFAULT_AUTO_STAGE_MAX_BYTES);
    s.set_config(StagingConfig {
        stage_max_bytes: s.config().stage_max_bytes.with(Direction::DeviceToHost, 0),
        ..s.config()
    })
    .expect("set_config");
    assert_eq!(
        s.config().stage_max_bytes.get(Direction::HostToDevice),
        DEFAULT_AUTO_STAGE_MAX_BYTES
    );
    assert_eq!(s.config().stage_max_bytes.get(Direction::DeviceToHost), 0);
    assert_eq!(s.auto_stage_max_bytes(), 0);
    s.set_config(StagingConfig {
        stage_max_bytes: s
            .config()
            .stage_max_bytes
            .with(Direction::HostToDevice, 100),
        ..s.config()
    })
    .expect("set_config");
    s.set_config(StagingConfig {
        stage_max_bytes: s
            .config()
            .stage_max_bytes
            .with(Direction::DeviceToHost, usize::MAX),
        ..s.config()
    })
    .expect("set_config");
    assert_eq!(s.auto_stage_max_bytes(), 100);

    // Setters pin nothing and count nothing.
    assert_eq!(s.capacity(), 0);
    assert_eq!(s.stats(), StagingStats::default());
}

#[test]
fn copy_threads_out_of_range_are_refused_and_change_nothing() {
    let mut s = StagingBuffer::new();
    for n in [1, 2, 4, 8, 16, MAX_COPY_THREADS] {
        s.set_config(StagingConfig {
            copy_threads: n,
            ..s.config()
        })
        .expect("set_config");
        assert_eq!(s.config().copy_threads, n);
    }
    for n in [0, MAX_COPY_THREADS + 1, usize::MAX] {
        let e = s
            .set_config(StagingConfig {
                copy_threads: n,
                ..s.config()
            })
            .expect_err("an impossible thread count");
        assert!(e.to_string().contains("copy_threads"), "{e}");
        assert_eq!(s.config().copy_threads, MAX_COPY_THREADS, "unchanged");
    }
    assert_eq!(s.capacity(), 0);
}

#[test]
fn transfers_counts_every_route_once() {
    let st = StagingStats {
        staged_transfers: 2,
        direct_transfers: 3,
        pinned_source_transfers: 5,
        batched_transfers: 19,
        // Not transfers.
        allocations: 7,
        bytes_uploaded: 11,
        bytes_downloaded: 13,
        peak_capacity_bytes: 17,
        event_creations: 23,
    };
    assert_eq!(st.transfers(), 2 + 3 + 5 + 19);
}

#[test]
fn default_routing_stages_by_direction_and_the_seed_s_threshold_sets_the_upper_bound() {
    let mut s = StagingBuffer::new();
    let (up, down) = (Direction::HostToDevice, Direction::DeviceToHost);
    assert_eq!(
        s.config().stage_min_bytes.get(up),
        DEFAULT_STAGE_MIN_BYTES.upload
    );
    assert_eq!(
        s.config().stage_min_bytes.get(down),
        DEFAULT_STAGE_MIN_BYTES.download
    );
    let min_up = DEFAULT_STAGE_MIN_BYTES.upload;
    assert!(min_up > 0, "small uploads go to the driver by default");
    assert!(!s.config().stages(up, min_up - 1));
    assert!(s.config().stages(up, min_up));
    assert!(
        s.config().stages(up, usize::MAX),
        "no upper bound by default"
    );
    assert_eq!(
        DEFAULT_STAGE_MIN_BYTES.download, 0,
        "downloads stage at every size"
    );
    assert!(s.config().stages(down, 1));
    assert!(s.config().stages(down, usize::MAX));

    // The seed's threshold: nothing above 512 KiB staged, both ways; the lower
    // bounds stay.
    s.set_auto_stage_max_bytes(DEFAULT_AUTO_STAGE_MAX_BYTES);
    assert!(!s.config().stages(up, min_up - 1));
    for d in [up, down] {
        assert_eq!(
            s.config().stage_min_bytes.get(d),
            DEFAULT_STAGE_MIN_BYTES.get(d),
            "{d:?}"
        );
        assert!(s.config().stages(d, min_up), "{d:?}");
        assert!(s.config().stages(d, DEFAULT_AUTO_STAGE_MAX_BYTES), "{d:?}");
        assert!(
            !s.config().stages(d, DEFAULT_AUTO_STAGE_MAX_BYTES + 1),
            "{d:?}"
        );
    }

    // Per-direction bounds.
    s.set_config(StagingConfig {
        stage_min_bytes: s.config().stage_min_bytes.with(up, 1000),
        ..s.config()
    })
    .expect("set_config");
    assert_eq!(s.config().stage_min_bytes.get(up), 1000);
    assert_eq!(s.config().stage_min_bytes.get(down), 0);
    assert!(!s.config().stages(up, 999) && s.config().stages(up, 1000));
    assert!(s.config().stages(down, 999));
}

#[test]
fn the_batch_api_setter_round_trips() {
    let mut s = StagingBuffer::new();
    assert!(s.config().batch_api, "on by default");
    s.set_config(StagingConfig {
        batch_api: false,
        ..s.config()
    })
    .expect("set_config");
    assert!(!s.config().batch_api);
    s.set_config(StagingConfig {
        batch_api: true,
        ..s.config()
    })
    .expect("set_config");
    assert!(s.config().batch_api);
    // Nothing pinned or counted, and other settings untouched.
    assert_eq!(s.capacity(), 0);
    assert_eq!(s.stats(), StagingStats::default());
    assert_eq!(s.config().copy_threads, default_copy_threads());
    assert!(format!("{s:?}").contains("batch_api: true"), "{s:?}");
}

/// Whether this thread can reach a driver with no context current on it (a GPU
/// machine), where `reserve` defers to the first transfer; elsewhere (CI: no driver
/// at all) it is the driver's or the device's error.
fn driver_without_a_context() -> bool {
    matches!(cuda_staging::Context::current(), Err(Error::NoContext))
}

#[test]
fn with_capacity_without_a_context_pins_nothing_and_never_panics() {
    // No context is current on this test thread (no driver here at all on CI).
    match StagingBuffer::with_capacity(1 << 20) {
        Ok(s) => {
            assert!(driver_without_a_context(), "pinned without a context?");
            assert_eq!(s.capacity(), 0, "pinned at the first transfer, not now");
            assert_eq!(s.stats(), StagingStats::default());
        }
        Err(e) => {
            assert!(
                !driver_without_a_context(),
                "deferred where a driver is: {e}"
            );
            assert!(is_no_device_answer(&e), "{e:?}");
        }
    }
    // Zero needs nothing pinned, so nothing to ask the driver for.
    let s = StagingBuffer::with_capacity(0).expect("with_capacity(0) pins nothing");
    assert_eq!(s.capacity(), 0);
    assert_eq!(s.stats(), StagingStats::default());
}

#[test]
fn reserve_without_a_context_pins_nothing_and_changes_no_setting() {
    let mut s = StagingBuffer::new();
    s.set_auto_stage_max_bytes(1234);
    s.set_config(StagingConfig {
        copy_threads: 3,
        ..s.config()
    })
    .expect("set_config");
    let deferred = driver_without_a_context();
    for bytes in [1, 4096, 1 << 20, 1 << 40] {
        match s.reserve(bytes) {
            Ok(()) => assert!(deferred, "reserve({bytes}) pinned without a context?"),
            Err(e) => {
                assert!(!deferred, "reserve({bytes}): {e}");
                assert!(is_no_device_answer(&e), "reserve({bytes}): {e:?}");
            }
        }
        assert_eq!(s.capacity(), 0);
        assert_eq!(s.stats(), StagingStats::default());
    }
    s.reserve(0).expect("reserve(0) is always satisfied");
    assert_eq!(s.auto_stage_max_bytes(), 1234);
    assert_eq!(s.config().copy_threads, 3);
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
    s.set_auto_stage_max_bytes(123_457);
    s.set_config(StagingConfig {
        copy_threads: 3,
        ..s.config()
    })
    .expect("set_config");
    let dbg = format!("{s:?}");
    assert!(dbg.starts_with("StagingBuffer"), "{dbg}");
    for part in ["capacity: 0", "123457", "copy_threads: 3", "stats"] {
        assert!(dbg.contains(part), "{dbg} lacks {part}");
    }
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
}
