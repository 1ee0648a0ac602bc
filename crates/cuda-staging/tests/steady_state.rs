//! GPU test: once warmed up, a steady loop of transfers through every
//! `StagingBuffer` method, into and out of whole device buffers and views at an
//! offset, makes no heap allocation, starts no thread and pins nothing more: with
//! one buffer, and with eight buffers in eight threads sharing the process-wide copy
//! pool.
//!
//! Its own test binary, and the only test in it (the two scenarios run one after
//! the other inside it): the `#[global_allocator]` of `counting_alloc` counts every
//! heap allocation of the whole process (every thread), so nothing else may run
//! beside the measured loops, not even the test harness starting another test.
//! Allocations made by the CUDA driver itself (`malloc` from C) are not Rust heap
//! allocations and are not counted; what is counted is everything this workspace,
//! std and the test do.
//!
//! Run with `cargo xtask test-gpu` (or `cargo test -p cuda-staging --test
//! steady_state -- --ignored` on a GPU machine).
//!
//! Inside the measured region the test itself allocates nothing: every buffer, label
//! and seed slot is made beforehand, checks are allocation-free comparisons
//! (`common::check` formats only when it fails), and nothing is printed.

mod common;
mod counting_alloc;

use cuda_staging::StagingConfig;
use std::hint::black_box;
use std::panic::AssertUnwindSafe;
use std::time::Instant;

use common::*;
use counting_alloc::{allocations, thread_allocations};
use cuda_staging::{
    bytemuck, default_copy_threads, pool_threads, pool_threads_started, Context, DeviceBuffer,
    Direction, PinnedBuffer, StagingBuffer, StagingStats, Stream, PIPELINE_WINDOW_BYTES,
};

/// Runs `f` and adds the allocations the calling thread made meanwhile to `slot`
/// (the process-wide total is checked apart, so allocations on other threads show too).
fn counted<R>(slot: &mut u64, f: impl FnOnce() -> R) -> R {
    let before = thread_allocations();
    let r = f();
    *slot += thread_allocations() - before;
    r
}

/// The ids of this process's threads (/proc/self/task). Comparing the sets before
/// and after the measured region shows a thread started or ended in it; a Rust
/// thread started and ended inside it would also show as heap allocations (the
/// spawn allocates). Allocates: call it only outside the measured region.
fn thread_ids() -> Vec<u32> {
    tasks().iter().map(|t| t.tid).collect()
}

// ---------------------------------------------------------------------------------
// the transfers
// ---------------------------------------------------------------------------------

/// Passes run (and checked) before the measurement starts.
const WARM_UP_PASSES: usize = 1;
/// Passes measured with one buffer: 100 transfers each way per case, long past any
/// lazy start. (50 passes, and 10 per thread below, made this one test 45-61 s of
/// each simulated CI pass, a quarter of the suite; 20 and 5 take 28 s.)
const STEADY_PASSES: usize = 20;
/// Buffers (and threads) of the concurrent scenario.
const THREADS: usize = 8;
/// Passes measured in each of the [`THREADS`] threads.
const THREADED_PASSES: usize = 5;

/// Bytes of the f32 cases: the seed's three tensor shapes (112x112x3, 128x128x3,
/// 640x640x3 f32).
const F32_BYTES: [usize; 3] = [150_528, 196_608, 4_915_200];
/// Bytes of the u8 cases: 64 KiB, 4 KiB, and 17 MiB + 3, more than the 8 MiB
/// pipeline window, so the chunked ring path (with slot reuse) runs.
const U8_BYTES: [usize; 3] = [64 << 10, 4 << 10, (17 << 20) + 3];
const CASES: usize = F32_BYTES.len() + U8_BYTES.len();

/// The transfers of one pass over one case, in order.
const CALLS: [&str; 10] = [
    "upload (Vec)",
    "upload_with",
    "download_into",
    "download (Vec)",
    "upload (PinnedBuffer slice)",
    "download (PinnedBuffer slice)",
    "upload_with (view)",
    "download (Vec, from a view)",
    "upload (Vec, into a view)",
    "download_into (view)",
];

/// Uploads, and downloads, each pass makes per case: every call above moves the
/// case's bytes one way.
const TRANSFERS_EACH_WAY: usize = 5;

/// The views of the last four calls start at this element of `dev_c`.
const VIEW_OFFSET: usize = 3;

/// Everything one size needs, made before the measurement.
struct Case<T: Pattern> {
    label: String,
    dev_a: DeviceBuffer<T>,
    dev_b: DeviceBuffer<T>,
    /// Source of the Vec upload.
    host: Vec<T>,
    /// Destination of the Vec download.
    got: Vec<T>,
    /// A copy of what `download_into` returned (its slice borrows the staging buffer).
    got_into: Vec<T>,
    pinned_up: PinnedBuffer<T>,
    pinned_down: PinnedBuffer<T>,
    /// `n + VIEW_OFFSET` elements, transferred through views of `VIEW_OFFSET..`.
    dev_c: DeviceBuffer<T>,
    /// The pattern `dev_c` starts with (outside the view, it keeps it).
    seed_c: u64,
    /// Destination of the download from a view.
    got_view: Vec<T>,
    /// A copy of what `download_into` from a view returned.
    got_into_view: Vec<T>,
    /// Seeds of the last pass: [upload_with, upload (Vec), upload (pinned),
    /// upload_with (view), upload (view)].
    seeds: [u64; 5],
}

impl<T: Pattern> Case<T> {
    fn new(bytes: usize) -> Case<T> {
        let n = bytes / std::mem::size_of::<T>();
        assert_eq!(n * std::mem::size_of::<T>(), bytes, "whole elements");
        let mut pinned_up = PinnedBuffer::<T>::alloc(n).expect("PinnedBuffer::alloc");
        let mut pinned_down = PinnedBuffer::<T>::alloc(n).expect("PinnedBuffer::alloc");
        fill_pattern(&mut pinned_up, seed());
        fill_pattern(&mut pinned_down, seed());
        // Every buffer starts with a pattern of its own (never zeros), so a transfer
        // that moved nothing cannot match.
        let seed_c = seed();
        Case {
            label: format!("{} x {n} ({bytes} B)", std::any::type_name::<T>()),
            dev_c: device_with(n + VIEW_OFFSET, seed_c),
            seed_c,
            got_view: pattern(n, seed()),
            got_into_view: pattern(n, seed()),
            dev_a: device_with(n, seed()),
            dev_b: device_with(n, seed()),
            host: pattern(n, seed()),
            got: pattern(n, seed()),
            got_into: pattern(n, seed()),
            pinned_up,
            pinned_down,
            seeds: [0; 5],
        }
    }

    fn n(&self) -> usize {
        self.host.len()
    }
}

fn same_bytes<T: Pattern>(a: &[T], b: &[T]) -> bool {
    bytemuck::cast_slice::<T, u8>(a) == bytemuck::cast_slice::<T, u8>(b)
}

/// Whether `got` holds the pattern of `seed`, without allocating.
fn is_pattern<T: Pattern>(got: &[T], seed: u64) -> bool {
    got.iter()
        .enumerate()
        .all(|(i, g)| bytemuck::bytes_of(g) == bytemuck::bytes_of(&T::at(i, seed)))
}

/// One pass over one case: the six transfers of [`CALLS`], each with a pattern of
/// its own, and allocation-free checks of every result. Adds each call's
/// allocations to `allocs`; returns the first check that failed.
///
/// The order keeps every check meaningful: before `download_into` the staging buffer
/// holds what `upload_with` wrote (not what `download_into` must return), before the
/// Vec download it holds what `download_into` read, and the pinned destination
/// holds the previous pass's data.
fn pass<T: Pattern>(
    c: &mut Case<T>,
    staging: &mut StagingBuffer,
    stream: &Stream,
    allocs: &mut [u64; CALLS.len()],
) -> Option<&'static str> {
    let n = c.n();
    let (s1, s2, s3, s4, s5) = (seed(), seed(), seed(), seed(), seed());
    c.seeds = [s1, s2, s3, s4, s5];
    let mut failed = None;

    // dev_b <- s2 from a Vec.
    fill_pattern(&mut c.host, s2);
    counted(&mut allocs[0], || {
        staging.upload(&mut c.dev_b, &c.host, stream)
    })
    .expect("upload");
    // dev_a <- s1, written straight into pinned memory.
    counted(&mut allocs[1], || {
        staging.upload_with(&mut c.dev_a, n, stream, |d: &mut [T]| fill_pattern(d, s1))
    })
    .expect("upload_with");
    // dev_b -> pinned: must be s2.
    counted(&mut allocs[2], || {
        let got = staging
            .download_into(&c.dev_b, n, stream)
            .expect("download_into");
        c.got_into.copy_from_slice(got);
    });
    if !same_bytes(&c.got_into, &c.host) {
        failed.get_or_insert("download_into after upload (Vec)");
    }
    // dev_a -> Vec: must be s1.
    counted(&mut allocs[3], || {
        staging.download(&mut c.got, &c.dev_a, stream)
    })
    .expect("download");
    if !is_pattern(&c.got, s1) {
        failed.get_or_insert("download (Vec) after upload_with");
    }
    // dev_a <- s3 straight from a PinnedBuffer, and back into another.
    fill_pattern(&mut c.pinned_up, s3);
    counted(&mut allocs[4], || {
        staging.upload(&mut c.dev_a, &c.pinned_up[..], stream)
    })
    .expect("upload from a PinnedBuffer slice");
    counted(&mut allocs[5], || {
        staging.download(&mut c.pinned_down[..], &c.dev_a, stream)
    })
    .expect("download into a PinnedBuffer slice");
    if !same_bytes(&c.pinned_down, &c.pinned_up) {
        failed.get_or_insert("download (PinnedBuffer) after upload (PinnedBuffer)");
    }

    // The same through views at an offset of dev_c: making a view allocates
    // nothing, and neither does a transfer through one.
    let range = VIEW_OFFSET..VIEW_OFFSET + n;
    // dev_c[range] <- s4, written straight into pinned memory.
    counted(&mut allocs[6], || {
        let mut view = c.dev_c.slice_mut(range.clone()).expect("slice_mut");
        staging.upload_with(&mut view, n, stream, |d: &mut [T]| fill_pattern(d, s4))
    })
    .expect("upload_with into a view");
    // dev_c[range] -> Vec: must be s4.
    counted(&mut allocs[7], || {
        let view = c.dev_c.slice(range.clone()).expect("slice");
        staging.download(&mut c.got_view, &view, stream)
    })
    .expect("download from a view");
    if !is_pattern(&c.got_view, s4) {
        failed.get_or_insert("download (view) after upload_with (view)");
    }
    // dev_c[range] <- s5 from a Vec.
    fill_pattern(&mut c.host, s5);
    counted(&mut allocs[8], || {
        let mut view = c.dev_c.slice_mut(range.clone()).expect("slice_mut");
        staging.upload(&mut view, &c.host, stream)
    })
    .expect("upload into a view");
    // dev_c[range] -> pinned: must be s5.
    counted(&mut allocs[9], || {
        let view = c.dev_c.slice(range.clone()).expect("slice");
        let got = staging
            .download_into(&view, n, stream)
            .expect("download_into from a view");
        c.got_into_view.copy_from_slice(got);
    });
    if !same_bytes(&c.got_into_view, &c.host) {
        failed.get_or_insert("download_into (view) after upload (view)");
    }
    failed
}

/// One pass over every case; the first failed check as (case index, what).
fn pass_all(
    f32s: &mut [Case<f32>],
    u8s: &mut [Case<u8>],
    staging: &mut StagingBuffer,
    stream: &Stream,
    allocs: &mut [[u64; CALLS.len()]; CASES],
) -> Option<(usize, &'static str)> {
    let mut failed = None;
    for (k, c) in f32s.iter_mut().enumerate() {
        if let Some(what) = pass(c, staging, stream, &mut allocs[k]) {
            failed.get_or_insert((k, what));
        }
    }
    for (k, c) in u8s.iter_mut().enumerate() {
        let k = f32s.len() + k;
        if let Some(what) = pass(c, staging, stream, &mut allocs[k]) {
            failed.get_or_insert((k, what));
        }
    }
    failed
}

/// Full checks of the last pass, outside the measured region: every result against
/// its pattern, and both device buffers read back through the driver's own
/// synchronous path (independent of the code under test).
fn check_last_pass<T: Pattern>(c: &Case<T>) {
    let [s1, s2, s3, s4, s5] = c.seeds;
    let l = &c.label;
    check(&format!("{l}: download (view)"), &c.got_view, s4);
    check(&format!("{l}: download_into (view)"), &c.got_into_view, s5);
    check_regions(
        &format!("{l}: dev_c (upload into a view)"),
        &device_contents(&c.dev_c),
        c.seed_c,
        &[(VIEW_OFFSET, c.n(), s5)],
    );
    check(&format!("{l}: download_into"), &c.got_into, s2);
    check(&format!("{l}: download (Vec)"), &c.got, s1);
    check(&format!("{l}: download (PinnedBuffer)"), &c.pinned_down, s3);
    check(
        &format!("{l}: dev_a (pinned upload)"),
        &device_contents(&c.dev_a),
        s3,
    );
    check(
        &format!("{l}: dev_b (Vec upload)"),
        &device_contents(&c.dev_b),
        s2,
    );
}

/// A staging buffer set up as every scenario here uses it: default routing (which
/// must stage the largest case both ways, for the ring path to run), and helpers
/// from the process-wide copy pool (at least 2 threads, so the pool is used whatever
/// the core count).
fn staging_buffer() -> StagingBuffer {
    let mut staging = staged_buffer();
    staging
        .set_config(StagingConfig {
            copy_threads: default_copy_threads().max(2),
            ..staging.config()
        })
        .expect("set_config");
    let largest = U8_BYTES[2];
    assert!(largest > PIPELINE_WINDOW_BYTES);
    assert!(
        staging.config().stages(Direction::HostToDevice, largest)
            && staging.config().stages(Direction::DeviceToHost, largest),
        "default routing must stage {largest} B both ways for the ring path to run \
         (routing changed? stage_min {:?}, stage_max {:?})",
        [
            staging
                .config()
                .stage_min_bytes
                .get(Direction::HostToDevice),
            staging
                .config()
                .stage_min_bytes
                .get(Direction::DeviceToHost)
        ],
        [
            staging
                .config()
                .stage_max_bytes
                .get(Direction::HostToDevice),
            staging
                .config()
                .stage_max_bytes
                .get(Direction::DeviceToHost)
        ],
    );
    staging
}

/// Every case of one scenario's buffer.
struct Cases {
    f32s: Vec<Case<f32>>,
    u8s: Vec<Case<u8>>,
    labels: Vec<String>,
}

impl Cases {
    fn new() -> Cases {
        let f32s: Vec<Case<f32>> = F32_BYTES.iter().map(|&b| Case::new(b)).collect();
        let u8s: Vec<Case<u8>> = U8_BYTES.iter().map(|&b| Case::new(b)).collect();
        let labels = f32s
            .iter()
            .map(|c| c.label.clone())
            .chain(u8s.iter().map(|c| c.label.clone()))
            .collect();
        Cases { f32s, u8s, labels }
    }

    fn pass(
        &mut self,
        staging: &mut StagingBuffer,
        stream: &Stream,
        allocs: &mut [[u64; CALLS.len()]; CASES],
    ) -> Option<(usize, &'static str)> {
        pass_all(&mut self.f32s, &mut self.u8s, staging, stream, allocs)
    }

    /// Full checks of the last pass (outside any measured region).
    fn check_last_pass(&self) {
        for c in &self.f32s {
            check_last_pass(c);
        }
        for c in &self.u8s {
            check_last_pass(c);
        }
    }
}

/// What `passes` steady passes must have counted, from `warm` to `now`.
fn check_steady_stats(who: &str, warm: StagingStats, now: StagingStats, passes: usize) {
    assert_eq!(
        now.allocations, warm.allocations,
        "{who}: pinned memory was allocated during the steady-state passes"
    );
    assert_eq!(
        now.peak_capacity_bytes, warm.peak_capacity_bytes,
        "{who}: the pinned capacity grew"
    );
    let transfers = (passes * CASES * CALLS.len()) as u64;
    assert_eq!(
        now.transfers() - warm.transfers(),
        transfers,
        "{who}: every steady-state transfer is counted once"
    );
    let bytes: usize = F32_BYTES.iter().chain(&U8_BYTES).sum();
    let moved = (passes * bytes * TRANSFERS_EACH_WAY) as u64;
    assert_eq!(now.bytes_uploaded - warm.bytes_uploaded, moved, "{who}");
    assert_eq!(now.bytes_downloaded - warm.bytes_downloaded, moved, "{who}");
}

/// The threads around a measured region: none started or ended in it, and the copy
/// pool is the one pool of [`pool_threads`] helpers.
fn check_threads(who: &str, before: &[u32], after: &[u32], pool_before: usize) {
    assert_eq!(
        after, before,
        "{who}: threads were started (or ended) during the steady-state passes"
    );
    assert_eq!(
        pool_threads_started(),
        pool_threads(),
        "{who}: the copy pool's threads (its helpers)"
    );
    assert_eq!(pool_threads_started(), pool_before, "{who}: the pool grew");
    assert_eq!(
        pool_tasks().len(),
        pool_threads_started(),
        "{who}: threads named staging-*: {:?}",
        pool_tasks()
    );
}

/// One buffer, one thread.
fn one_buffer(ctx: &Context) {
    let stream = Stream::new(ctx).expect("Stream::new");
    let mut staging = staging_buffer();
    let mut cases = Cases::new();

    // Warm-up: first use of every method at every size (growth, events, the pool).
    let mut warm_allocs = [[0u64; CALLS.len()]; CASES];
    for p in 0..WARM_UP_PASSES {
        if let Some((k, what)) = cases.pass(&mut staging, &stream, &mut warm_allocs) {
            panic!("warm-up pass {p}, {}: {what}: data differ", cases.labels[k]);
        }
    }
    let warm_stats = staging.stats();
    let warm_capacity = staging.capacity();
    let warm_threads = thread_ids();
    let pool_before = pool_threads_started();

    // The counter counts (and this binary runs only this test).
    let before = allocations();
    black_box(vec![1u8; 16]);
    assert!(
        allocations() > before,
        "the counting allocator is not counting"
    );

    // ---- measured region: no allocation by the test from here ----
    let mut allocs = [[0u64; CALLS.len()]; CASES];
    let mut per_pass = [0u64; STEADY_PASSES];
    let mut failed: Option<(usize, usize, &'static str)> = None;
    let start_allocs = allocations();
    let t = Instant::now();
    for (p, slot) in per_pass.iter_mut().enumerate() {
        let r = counted(slot, || cases.pass(&mut staging, &stream, &mut allocs));
        if let Some((k, what)) = r {
            if failed.is_none() {
                failed = Some((p, k, what));
            }
        }
    }
    let elapsed = t.elapsed();
    let end_allocs = allocations();
    // ---- end of the measured region ----

    let steady_threads = thread_ids();
    let stats = staging.stats();
    eprintln!(
        "one buffer: {STEADY_PASSES} steady passes of {} transfers in {elapsed:?}: {} heap \
         allocations (warm-up made {}), {} threads before and {} after, pinned capacity \
         {warm_capacity} B, stats {stats:?}",
        CASES * CALLS.len(),
        end_allocs - start_allocs,
        warm_allocs.iter().flatten().sum::<u64>(),
        warm_threads.len(),
        steady_threads.len(),
    );

    if let Some((p, k, what)) = failed {
        panic!(
            "one buffer: steady pass {p}, {}: {what}: data differ",
            cases.labels[k]
        );
    }
    let total = end_allocs - start_allocs;
    if total != 0 {
        let mut report = String::new();
        for (k, calls) in allocs.iter().enumerate() {
            for (j, &a) in calls.iter().enumerate() {
                if a != 0 {
                    report += &format!("\n  {} {}: {a}", cases.labels[k], CALLS[j]);
                }
            }
        }
        let passes: Vec<(usize, u64)> = per_pass
            .iter()
            .copied()
            .enumerate()
            .filter(|&(_, a)| a != 0)
            .collect();
        panic!(
            "one buffer: {total} heap allocation(s) during {STEADY_PASSES} steady-state passes \
             (the rest from other threads or between calls); by call:{report}\n\
             by pass (pass, allocations): {passes:?}"
        );
    }
    check_threads("one buffer", &warm_threads, &steady_threads, pool_before);
    assert_eq!(
        staging.capacity(),
        warm_capacity,
        "one buffer: the pinned capacity changed"
    );
    check_steady_stats("one buffer", warm_stats, stats, STEADY_PASSES);
    cases.check_last_pass();
}

/// [`THREADS`] buffers, each in its own thread with its own stream and cases, all
/// transferring at once; the main thread reads the counters between the phases.
fn eight_buffers_in_eight_threads(ctx: &Context) {
    // Phases, each ended by every thread (and the main one) arriving: warm-ups done;
    // counters read; measured passes done; counters read again.
    let step = Lockstep::new(THREADS + 1);
    let _main = step.member();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let step = &step;
                scope.spawn(move || {
                    let _member = step.member();
                    let who = format!("buffer {t} of {THREADS}");
                    // The cases allocate in the context current on the thread.
                    ctx.bind_to_thread().expect("Context::bind_to_thread");
                    let stream = Stream::new(ctx).expect("Stream::new");
                    let mut staging = staging_buffer();
                    let mut cases = Cases::new();
                    let mut warm_allocs = [[0u64; CALLS.len()]; CASES];
                    for p in 0..WARM_UP_PASSES {
                        if let Some((k, what)) = cases.pass(&mut staging, &stream, &mut warm_allocs)
                        {
                            panic!(
                                "{who}: warm-up pass {p}, {}: {what}: data differ",
                                cases.labels[k]
                            );
                        }
                    }
                    let warm_stats = staging.stats();
                    let warm_capacity = staging.capacity();
                    step.wait(); // warm
                    step.wait(); // the main thread has read the counters
                                 // ---- measured region ----
                    let mut allocs = [[0u64; CALLS.len()]; CASES];
                    let mut failed: Option<(usize, usize, &'static str)> = None;
                    for p in 0..THREADED_PASSES {
                        if let Some((k, what)) = cases.pass(&mut staging, &stream, &mut allocs) {
                            failed.get_or_insert((p, k, what));
                        }
                    }
                    step.wait(); // passes done
                    step.wait(); // the main thread has read the counters and threads again
                                 // ---- end of the measured region ----
                    if let Some((p, k, what)) = failed {
                        panic!(
                            "{who}: steady pass {p}, {}: {what}: data differ",
                            cases.labels[k]
                        );
                    }
                    // Which calls allocated, if any (the main thread checks the total).
                    for (k, calls) in allocs.iter().enumerate() {
                        for (j, &a) in calls.iter().enumerate() {
                            if a != 0 {
                                eprintln!(
                                    "{who}: {} {}: {a} allocation(s)",
                                    cases.labels[k], CALLS[j]
                                );
                            }
                        }
                    }
                    assert_eq!(
                        staging.capacity(),
                        warm_capacity,
                        "{who}: the pinned capacity changed"
                    );
                    check_steady_stats(&who, warm_stats, staging.stats(), THREADED_PASSES);
                    cases.check_last_pass();
                })
            })
            .collect();

        step.wait(); // every thread warm
        let threads_before = thread_ids();
        let pool_before = pool_threads_started();
        let start_allocs = allocations();
        let t = Instant::now();
        step.wait(); // go
        step.wait(); // passes done
        let end_allocs = allocations();
        let elapsed = t.elapsed();
        // Read while every thread still waits below: none has ended yet.
        let threads_after = thread_ids();
        step.wait(); // threads may go on
        let total = end_allocs - start_allocs;
        eprintln!(
            "{THREADS} buffers in {THREADS} threads: {THREADED_PASSES} steady passes of {} \
             transfers each in {elapsed:?}: {total} heap allocations, {} threads before and \
             {} after, {} pool threads",
            CASES * CALLS.len(),
            threads_before.len(),
            threads_after.len(),
            pool_threads_started(),
        );
        let mut failed = 0;
        for h in handles {
            failed += usize::from(h.join().is_err());
        }
        assert_eq!(
            failed, 0,
            "{failed} of {THREADS} threads failed (see their panics above)"
        );
        assert_eq!(
            total, 0,
            "{total} heap allocation(s) while {THREADS} buffers ran {THREADED_PASSES} \
             steady-state passes each"
        );
        check_threads(
            &format!("{THREADS} buffers"),
            &threads_before,
            &threads_after,
            pool_before,
        );
    });
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn steady_state_transfers_allocate_nothing_and_start_no_thread() {
    assert!(
        counting_alloc::counted_here(),
        "the test runs on the process's main thread, whose allocations are not counted"
    );
    let ctx = Context::new(0)
        .expect("this test needs CUDA device 0 (run GPU tests with cargo xtask test-gpu)");
    // Both scenarios run (one after the other, never beside each other); the first
    // failure is reported once both have.
    let one = std::panic::catch_unwind(AssertUnwindSafe(|| one_buffer(&ctx)));
    let eight = std::panic::catch_unwind(AssertUnwindSafe(|| eight_buffers_in_eight_threads(&ctx)));
    for r in [one, eight] {
        if let Err(panic) = r {
            std::panic::resume_unwind(panic);
        }
    }
}
