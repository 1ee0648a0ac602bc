//! GPU test: once warmed up, a steady loop of 2-D transfers through every 2-D
//! entry point of `StagingBuffer` and `StagingRing` makes no heap allocation,
//! starts no thread and pins nothing more.
//!
//! Its own test binary, and the only test in it: the `#[global_allocator]` of
//! `counting_alloc` counts every heap allocation of the whole process (every
//! thread), so nothing else may run beside the measured loop (see `steady_state.rs`,
//! which this follows for the 1-D calls). Allocations made by the CUDA driver itself
//! (`malloc` from C) are not counted.
//!
//! Run with `cargo xtask test-gpu` (or `cargo test -p cuda-staging --test
//! steady_state_2d -- --ignored` on a GPU machine).
//!
//! Inside the measured region the test itself allocates nothing: every buffer is
//! made beforehand, and the checks are allocation-free comparisons.

mod common;
mod counting_alloc;

use cuda_staging::StagingConfig;
use std::hint::black_box;

use common::*;
use counting_alloc::allocations;
use cuda_staging::{
    Context, Layout2d, PitchedBuffer, StagingBuffer, StagingRing, Stream, Ticket2d,
};

/// Passes measured.
const PASSES: usize = 30;

/// The calls of one pass, in order.
const CALLS: [&str; 9] = [
    "upload_2d (padded host rows)",
    "upload_2d (contiguous host rows)",
    "upload_2d_with",
    "download_2d (padded host rows)",
    "download_2d_into",
    "StagingRing::upload_2d",
    "StagingRing::upload_2d_with",
    "StagingRing::download_2d + wait",
    "StagingRing::download_2d + wait + Rows::copy_to",
];

/// Everything one pass needs, made before the measurement: a 1920x1080 RGB surface
/// (rows 5760 bytes, the driver's pitch) and host frames at a padded pitch (5824)
/// and a packed one (5760).
struct Frames {
    surface: PitchedBuffer<u8>,
    padded: Layout2d,
    packed: Layout2d,
    /// Host frames at the padded pitch: source, and destination of downloads.
    src_padded: Vec<u8>,
    dst_padded: Vec<u8>,
    /// A host frame at the packed pitch.
    src_packed: Vec<u8>,
    /// Packed rows: what the device must hold after each upload.
    rows: Vec<u8>,
}

const WIDTH: usize = 1920 * 3;
const HEIGHT: usize = 1080;

impl Frames {
    fn new() -> Frames {
        let padded = Layout2d::new::<u8>("test", "host", WIDTH, HEIGHT, 5824).unwrap();
        let packed = Layout2d::new::<u8>("test", "host", WIDTH, HEIGHT, WIDTH).unwrap();
        let rows = pattern::<u8>(WIDTH * HEIGHT, seed());
        let mut src_padded = vec![0x11u8; padded.span_bytes()];
        for r in 0..HEIGHT {
            src_padded[padded.row_range(r)].copy_from_slice(&rows[r * WIDTH..(r + 1) * WIDTH]);
        }
        Frames {
            surface: PitchedBuffer::<u8>::alloc(WIDTH, HEIGHT).expect("PitchedBuffer::alloc"),
            padded,
            packed,
            dst_padded: vec![0x22u8; padded.span_bytes()],
            src_packed: rows.clone(),
            src_padded,
            rows,
        }
    }

    /// Whether the padded destination holds the rows (allocation-free).
    fn dst_holds_rows(&self) -> bool {
        (0..HEIGHT).all(|r| {
            self.dst_padded[self.padded.row_range(r)] == self.rows[r * WIDTH..(r + 1) * WIDTH]
        })
    }
}

/// Adds the allocations `f` makes (any thread) to `slot`.
fn counted<R>(slot: &mut u64, f: impl FnOnce() -> R) -> R {
    let before = allocations();
    let r = f();
    *slot += allocations() - before;
    r
}

/// One pass of [`CALLS`]; the first failed check.
fn pass(
    f: &mut Frames,
    staging: &mut StagingBuffer,
    ring: &mut StagingRing,
    stream: &Stream,
    allocs: &mut [u64; CALLS.len()],
) -> Option<&'static str> {
    let mut failed = None;
    let (padded_pitch, packed_pitch) = (f.padded.pitch_bytes(), f.packed.pitch_bytes());
    counted(&mut allocs[0], || {
        staging.upload_2d(&mut f.surface, &f.src_padded, padded_pitch, stream)
    })
    .expect("upload_2d (padded)");
    counted(&mut allocs[1], || {
        staging.upload_2d(&mut f.surface, &f.src_packed, packed_pitch, stream)
    })
    .expect("upload_2d (packed)");
    let rows = &f.rows;
    counted(&mut allocs[2], || {
        staging.upload_2d_with(&mut f.surface, stream, |px: &mut [u8]| {
            px.copy_from_slice(rows)
        })
    })
    .expect("upload_2d_with");
    f.dst_padded.fill(0x22);
    counted(&mut allocs[3], || {
        staging.download_2d(&mut f.dst_padded, padded_pitch, &f.surface, stream)
    })
    .expect("download_2d");
    if !f.dst_holds_rows() {
        failed.get_or_insert("download_2d");
    }
    let same = counted(&mut allocs[4], || {
        let got = staging
            .download_2d_into(&f.surface, stream)
            .expect("download_2d_into");
        got == &f.rows[..]
    });
    if !same {
        failed.get_or_insert("download_2d_into");
    }
    counted(&mut allocs[5], || {
        ring.upload_2d(&mut f.surface, &f.src_padded, padded_pitch, stream)
    })
    .expect("StagingRing::upload_2d");
    counted(&mut allocs[6], || {
        ring.upload_2d_with(&mut f.surface, stream, |px: &mut [u8]| {
            px.copy_from_slice(rows)
        })
    })
    .expect("StagingRing::upload_2d_with");
    let same = counted(&mut allocs[7], || {
        let t: Ticket2d<u8> = ring.download_2d(&f.surface, stream).expect("download_2d");
        ring.wait(&t).map(|rows| rows.as_slice()).expect("wait") == &f.rows[..]
    });
    if !same {
        failed.get_or_insert("StagingRing::download_2d + wait");
    }
    f.dst_padded.fill(0x22);
    counted(&mut allocs[8], || {
        let t = ring.download_2d(&f.surface, stream).expect("download_2d");
        ring.wait(&t)
            .and_then(|rows| rows.copy_to(&mut f.dst_padded, padded_pitch))
            .expect("wait, then Rows::copy_to");
    });
    if !f.dst_holds_rows() {
        failed.get_or_insert("StagingRing::download_2d + wait + Rows::copy_to");
    }
    failed
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn steady_2d_transfers_allocate_nothing_and_start_no_thread() {
    assert!(
        counting_alloc::counted_here(),
        "the test runs on the process's main thread, whose allocations are not counted"
    );
    let ctx = Context::new(0)
        .expect("this test needs CUDA device 0 (run GPU tests with cargo xtask test-gpu)");
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut staging = staged_buffer();
    staging
        .set_config(StagingConfig {
            copy_threads: 2,
            ..staging.config()
        })
        .expect("set_config");
    let mut ring = StagingRing::new();
    let mut frames = Frames::new();

    // Warm-up: first use of every call (growth, events, the pool's threads).
    let mut warm_allocs = [0u64; CALLS.len()];
    for p in 0..2 {
        if let Some(what) = pass(
            &mut frames,
            &mut staging,
            &mut ring,
            &stream,
            &mut warm_allocs,
        ) {
            panic!("warm-up pass {p}: {what}: data differ");
        }
    }
    let warm_stats = staging.stats();
    let warm_ring = ring.stats();
    let warm_capacity = (staging.capacity(), ring.capacity());
    let threads_before: Vec<u32> = tasks().iter().map(|t| t.tid).collect();

    // The counter counts.
    let before = allocations();
    black_box(vec![1u8; 16]);
    assert!(
        allocations() > before,
        "the counting allocator is not counting"
    );

    // ---- measured region: no allocation by the test from here ----
    let mut allocs = [0u64; CALLS.len()];
    let mut failed = None;
    let start = allocations();
    for p in 0..PASSES {
        if let Some(what) = pass(&mut frames, &mut staging, &mut ring, &stream, &mut allocs) {
            failed.get_or_insert((p, what));
        }
    }
    let total = allocations() - start;
    // ---- end of the measured region ----

    let threads_after: Vec<u32> = tasks().iter().map(|t| t.tid).collect();
    if let Some((p, what)) = failed {
        panic!("steady pass {p}: {what}: data differ");
    }
    let by_call: Vec<(&str, u64)> = CALLS
        .iter()
        .copied()
        .zip(allocs)
        .filter(|&(_, a)| a != 0)
        .collect();
    assert_eq!(
        total, 0,
        "{total} heap allocation(s) in {PASSES} steady passes; by call: {by_call:?}"
    );
    assert_eq!(threads_after, threads_before, "threads started or ended");
    let stats = staging.stats();
    assert_eq!(
        stats.allocations, warm_stats.allocations,
        "the buffer pinned again"
    );
    assert_eq!(
        ring.stats().allocations,
        warm_ring.allocations,
        "the ring pinned again"
    );
    assert_eq!((staging.capacity(), ring.capacity()), warm_capacity);
    let frame = (WIDTH * HEIGHT) as u64;
    assert_eq!(
        stats.staged_transfers - warm_stats.staged_transfers,
        5 * PASSES as u64,
        "every buffer transfer counted once"
    );
    assert_eq!(
        stats.bytes_uploaded - warm_stats.bytes_uploaded,
        3 * PASSES as u64 * frame
    );
    assert_eq!(
        stats.bytes_downloaded - warm_stats.bytes_downloaded,
        2 * PASSES as u64 * frame
    );
    let r = ring.stats();
    assert_eq!(r.uploads - warm_ring.uploads, 2 * PASSES as u64);
    assert_eq!(r.downloads - warm_ring.downloads, 2 * PASSES as u64);
    // The surface holds the last upload's rows, read back through a 1-D copy.
    let mut all = vec![0u8; frames.surface.byte_len()];
    stream
        .memcpy_dtoh_sync(&frames.surface.as_bytes(), &mut all)
        .expect("read back");
    let device = frames.surface.layout();
    for r in 0..HEIGHT {
        assert_eq!(
            &all[device.row_range(r)],
            &frames.rows[r * WIDTH..(r + 1) * WIDTH],
            "row {r} of the surface"
        );
    }
}
