//! GPU test: once warmed up, a steady loop of transfers through every
//! `StagingBuffer` method makes no heap allocation, starts no thread and pins
//! nothing more.
//!
//! Its own test binary, and the only test in it: the `#[global_allocator]` below
//! counts every heap allocation of the whole process (every thread), so nothing else
//! may run beside the measured loop. Allocations made by the CUDA driver itself
//! (`malloc` from C) are not Rust heap allocations and are not counted; what is
//! counted is everything this workspace, std and the test do.
//!
//! Run with `cargo xtask test-gpu` (or `cargo test -p cuda-staging --test
//! steady_state -- --ignored` on a GPU machine).
//!
//! Inside the measured region the test itself allocates nothing: every buffer, label
//! and seed slot is made beforehand, checks are allocation-free comparisons
//! (`common::check` formats only when it fails), and nothing is printed.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use common::*;
use cuda_staging::{
    bytemuck, Context, DeviceBuffer, Direction, PinnedBuffer, StagingBuffer, Stream,
    PIPELINE_WINDOW_BYTES,
};

// ---------------------------------------------------------------------------------
// the counting allocator
// ---------------------------------------------------------------------------------

/// Heap allocations (alloc, alloc_zeroed, realloc) made by the process so far.
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// `System`, counting every allocation in [`ALLOCATIONS`].
struct CountingAllocator;

// SAFETY: every method forwards its arguments unchanged to `System`, which
// implements `GlobalAlloc` correctly; the only thing added is an atomic increment,
// which neither allocates nor touches the memory handed out.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: our caller meets `GlobalAlloc::alloc`'s contract (a layout of
        // non-zero size), which is all `System.alloc` requires.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: as for `alloc`: the caller's layout has a non-zero size.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: our caller guarantees that `ptr` was allocated by this allocator
        // (that is, by `System`, to which every allocation is forwarded) with
        // `layout`, and that `new_size` is non-zero and does not overflow when
        // rounded up to `layout.align()`: exactly `System.realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: our caller guarantees that `ptr` was allocated by this allocator
        // (by `System`) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::SeqCst)
}

/// Runs `f` and adds the allocations made meanwhile (by any thread) to `slot`.
fn counted<R>(slot: &mut u64, f: impl FnOnce() -> R) -> R {
    let before = allocations();
    let r = f();
    *slot += allocations() - before;
    r
}

/// Threads of this process (entries of /proc/self/task). Allocates: call it only
/// outside the measured region.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("read /proc/self/task")
        .count()
}

// ---------------------------------------------------------------------------------
// the transfers
// ---------------------------------------------------------------------------------

/// Passes run (and checked) before the measurement starts.
const WARM_UP_PASSES: usize = 1;
/// Passes measured.
const STEADY_PASSES: usize = 50;

/// Bytes of the f32 cases: the seed's three tensor shapes (112x112x3, 128x128x3,
/// 640x640x3 f32).
const F32_BYTES: [usize; 3] = [150_528, 196_608, 4_915_200];
/// Bytes of the u8 cases: 64 KiB, 4 KiB, and 17 MiB + 3, more than the 8 MiB
/// pipeline window, so the chunked ring path (with slot reuse) runs.
const U8_BYTES: [usize; 3] = [64 << 10, 4 << 10, (17 << 20) + 3];
const CASES: usize = F32_BYTES.len() + U8_BYTES.len();

/// The transfers of one pass over one case, in order.
const CALLS: [&str; 6] = [
    "upload (Vec)",
    "upload_with",
    "download_into",
    "download (Vec)",
    "upload (PinnedBuffer slice)",
    "download (PinnedBuffer slice)",
];

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
    /// Seeds of the last pass: [upload_with, upload (Vec), upload (pinned)].
    seeds: [u64; 3],
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
        Case {
            label: format!("{} x {n} ({bytes} B)", std::any::type_name::<T>()),
            dev_a: device_with(n, seed()),
            dev_b: device_with(n, seed()),
            host: pattern(n, seed()),
            got: pattern(n, seed()),
            got_into: pattern(n, seed()),
            pinned_up,
            pinned_down,
            seeds: [0; 3],
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
    let (s1, s2, s3) = (seed(), seed(), seed());
    c.seeds = [s1, s2, s3];
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
    let [s1, s2, s3] = c.seeds;
    let l = &c.label;
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

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn steady_state_transfers_allocate_nothing_and_start_no_thread() {
    let ctx = Context::new(0)
        .expect("this test needs CUDA device 0 (run GPU tests with cargo xtask test-gpu)");
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut staging = StagingBuffer::new();
    let largest = U8_BYTES[2];
    assert!(largest > PIPELINE_WINDOW_BYTES);
    assert!(
        staging.stages(Direction::HostToDevice, largest)
            && staging.stages(Direction::DeviceToHost, largest),
        "default routing must stage {largest} B both ways for the ring path to run \
         (routing changed? stage_min {:?}, stage_max {:?})",
        [
            staging.stage_min_bytes(Direction::HostToDevice),
            staging.stage_min_bytes(Direction::DeviceToHost)
        ],
        [
            staging.stage_max_bytes(Direction::HostToDevice),
            staging.stage_max_bytes(Direction::DeviceToHost)
        ],
    );

    let mut f32s: Vec<Case<f32>> = F32_BYTES.iter().map(|&b| Case::new(b)).collect();
    let mut u8s: Vec<Case<u8>> = U8_BYTES.iter().map(|&b| Case::new(b)).collect();
    let labels: Vec<String> = f32s
        .iter()
        .map(|c| c.label.clone())
        .chain(u8s.iter().map(|c| c.label.clone()))
        .collect();

    // Warm-up: first use of every method at every size (growth, events, copy threads).
    let mut warm_allocs = [[0u64; CALLS.len()]; CASES];
    for p in 0..WARM_UP_PASSES {
        if let Some((k, what)) =
            pass_all(&mut f32s, &mut u8s, &mut staging, &stream, &mut warm_allocs)
        {
            panic!("warm-up pass {p}, {}: {what}: data differ", labels[k]);
        }
    }
    let warm_stats = staging.stats();
    let warm_capacity = staging.capacity();
    let warm_threads = threads();

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
        let r = counted(slot, || {
            pass_all(&mut f32s, &mut u8s, &mut staging, &stream, &mut allocs)
        });
        if let Some((k, what)) = r {
            if failed.is_none() {
                failed = Some((p, k, what));
            }
        }
    }
    let elapsed = t.elapsed();
    let end_allocs = allocations();
    // ---- end of the measured region ----

    let steady_threads = threads();
    let stats = staging.stats();
    eprintln!(
        "{STEADY_PASSES} steady passes of {} transfers in {elapsed:?}: {} heap allocations \
         (warm-up made {}), threads {warm_threads} -> {steady_threads}, pinned capacity \
         {warm_capacity} B, stats {stats:?}",
        CASES * CALLS.len(),
        end_allocs - start_allocs,
        warm_allocs.iter().flatten().sum::<u64>(),
    );

    if let Some((p, k, what)) = failed {
        panic!("steady pass {p}, {}: {what}: data differ", labels[k]);
    }
    let total = end_allocs - start_allocs;
    if total != 0 {
        let mut report = String::new();
        for (k, calls) in allocs.iter().enumerate() {
            for (j, &a) in calls.iter().enumerate() {
                if a != 0 {
                    report += &format!("\n  {} {}: {a}", labels[k], CALLS[j]);
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
            "{total} heap allocation(s) during {STEADY_PASSES} steady-state passes \
             (the rest from other threads or between calls); by call:{report}\n\
             by pass (pass, allocations): {passes:?}"
        );
    }
    assert_eq!(
        steady_threads, warm_threads,
        "threads were started (or ended) during the steady-state passes"
    );
    assert_eq!(
        stats.allocations, warm_stats.allocations,
        "pinned memory was allocated during the steady-state passes"
    );
    assert_eq!(
        staging.capacity(),
        warm_capacity,
        "the pinned capacity changed"
    );
    assert_eq!(stats.peak_capacity_bytes, warm_stats.peak_capacity_bytes);
    let transfers = (STEADY_PASSES * CASES * CALLS.len()) as u64;
    assert_eq!(
        stats.transfers() - warm_stats.transfers(),
        transfers,
        "every steady-state transfer is counted once"
    );
    let bytes: usize = F32_BYTES.iter().chain(&U8_BYTES).sum();
    let moved = (STEADY_PASSES * bytes * 3) as u64;
    assert_eq!(stats.bytes_uploaded - warm_stats.bytes_uploaded, moved);
    assert_eq!(stats.bytes_downloaded - warm_stats.bytes_downloaded, moved);

    for c in &f32s {
        check_last_pass(c);
    }
    for c in &u8s {
        check_last_pass(c);
    }
}
