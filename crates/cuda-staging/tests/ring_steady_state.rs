//! GPU test: once warmed up, a frame loop through a `StagingRing` (an upload through
//! `upload_with`, a device step, a download redeemed a frame later, and one batch
//! download redeemed at once), every transfer through a view of one of two frame
//! slots of its device buffer, makes no heap allocation, starts no thread and pins
//! nothing more.
//!
//! Its own test binary, with one test: the `#[global_allocator]` of `counting_alloc`
//! counts the heap allocations of every thread of the process, so nothing else may
//! run beside the measured loop. Allocations the CUDA driver makes itself (`malloc`
//! from C) are not Rust heap allocations and are not counted; everything this
//! workspace, std and the test do is.
//!
//! Run with `cargo xtask test-gpu` (or `cargo test -p cuda-staging --test
//! ring_steady_state -- --ignored` on a GPU machine).
//!
//! Inside the measured region the test itself allocates nothing: buffers are made
//! beforehand, each frame's batch lives on the stack (`DownloadBatch` holds its parts
//! inline), checks compare against a pattern computed on the fly and format only
//! when they fail, and nothing is printed.

mod common;
mod counting_alloc;

use common::gpu;
use counting_alloc::{allocations, thread_allocations};
use cuda_staging::{DeviceBuffer, DownloadBatch, StagingRing, Stream, Ticket};

// ---------------------------------------------------------------------------------
// threads
// ---------------------------------------------------------------------------------

/// The ids of this process's threads (entries of /proc/self/task), sorted. Allocates:
/// call it only outside the measured region. `None` where there is no /proc.
fn threads() -> Option<Vec<u64>> {
    let dir = std::fs::read_dir("/proc/self/task").ok()?;
    let mut ids: Vec<u64> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    ids.sort_unstable();
    Some(ids)
}

// ---------------------------------------------------------------------------------
// the frame loop
// ---------------------------------------------------------------------------------

/// Elements of one frame: 112x112x3 f32, 150528 bytes.
const N: usize = 150_528 / 4;
/// Elements of the second output (class scores, say).
const N_SCORES: usize = 1000;
const WARM_UP_FRAMES: u64 = 50;
const STEADY_FRAMES: u64 = 1000;

/// Frame `k`'s value at element `i`: differs per element and per frame, finite.
fn value(i: usize, k: u64) -> f32 {
    let mut z = (i as u64) ^ k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    f32::from_bits((z ^ (z >> 32)) as u32 & 0xBFFF_FFFF)
}

/// The memset value of frame `k`'s scores.
fn score_bits(k: u64) -> u32 {
    0x3F00_0000 | (k as u32 & 0x00FF_FFFF)
}

/// Panics (formatting only then) unless `got` is frame `k`'s data from element 0.
#[track_caller]
fn check_frame(what: &str, got: &[f32], k: u64) {
    assert_eq!(got.len(), N, "{what} of frame {k}: length");
    for (i, v) in got.iter().enumerate() {
        if v.to_bits() != value(i, k).to_bits() {
            panic!(
                "{what} of frame {k}: element {i} is {v:?}, want {:?}",
                value(i, k)
            );
        }
    }
}

/// Frame slots of `input` and `output`: frame `k` uses slot `k % SLOTS`, through
/// views.
const SLOTS: u64 = 2;

/// Everything a frame uses, made before the measurement.
struct Pipeline {
    stream: Stream,
    /// `[SLOTS, N]`.
    input: DeviceBuffer<f32>,
    /// `[SLOTS, N]`.
    output: DeviceBuffer<f32>,
    scores: DeviceBuffer<u32>,
    /// Four slots: three transfers a frame, and each download is redeemed in the
    /// next frame, three transfers later, before its slot comes round again.
    ring: StagingRing,
    previous: Option<(u64, Ticket<f32>)>,
}

impl Pipeline {
    fn frame(&mut self, k: u64) {
        let Pipeline {
            stream,
            input,
            output,
            scores,
            ring,
            previous,
        } = self;
        let slot = (k % SLOTS) as usize * N..(k % SLOTS + 1) as usize * N;
        ring.upload_with(
            &mut input.slice_mut(slot.clone()).expect("input slot"),
            N,
            stream,
            |px| {
                for (i, v) in px.iter_mut().enumerate() {
                    *v = value(i, k);
                }
            },
        )
        .expect("upload_with");
        // The device step: the "model" copies its input slot to its output slot and
        // writes its scores.
        stream
            .memcpy_dtod(
                &input.slice(slot.clone()).expect("input slot"),
                &mut output.slice_mut(slot.clone()).expect("output slot"),
            )
            .expect("memcpy_dtod");
        stream
            .memset_u32(scores, score_bits(k))
            .expect("memset_u32");
        let out_slot = output.slice(slot).expect("output slot");
        let ticket = ring.download(&out_slot, N, stream).expect("download");

        // Post-process the previous frame (its download was three transfers ago).
        if let Some((j, t)) = previous.replace((k, ticket)) {
            check_frame("download", ring.wait(&t).expect("wait"), j);
        }

        // Both outputs as one batch, redeemed at once.
        let mut batch = DownloadBatch::new();
        let p_out = batch.add(&out_slot, N).expect("add output");
        let p_scores = batch.add(&*scores, N_SCORES).expect("add scores");
        let bt = ring.download_batch(&batch, stream).expect("download_batch");
        let landed = ring.wait(&bt).expect("wait_batch");
        check_frame("batch output", landed.get(p_out).expect("get output"), k);
        let got = landed.get(p_scores).expect("get scores");
        assert!(
            got.len() == N_SCORES && got.iter().all(|&s| s == score_bits(k)),
            "batch scores of frame {k}"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_warm_ring_frame_loop_allocates_nothing_and_starts_no_thread() {
    assert!(
        counting_alloc::counted_here(),
        "the test runs on the process's main thread, whose allocations are not counted"
    );
    let (_ctx, stream) = gpu();
    let mut p = Pipeline {
        stream,
        input: DeviceBuffer::alloc(SLOTS as usize * N).expect("alloc input"),
        output: DeviceBuffer::alloc(SLOTS as usize * N).expect("alloc output"),
        scores: DeviceBuffer::alloc(N_SCORES).expect("alloc scores"),
        ring: StagingRing::with_config(cuda_staging::RingConfig {
            slots: 4,
            ..Default::default()
        })
        .expect("four slots"),
        previous: None,
    };
    for k in 0..WARM_UP_FRAMES {
        p.frame(k);
    }
    let warm = p.ring.stats();
    let capacity = p.ring.capacity();
    let threads_before = threads();

    let before = (allocations(), thread_allocations());
    for k in WARM_UP_FRAMES..WARM_UP_FRAMES + STEADY_FRAMES {
        p.frame(k);
    }
    let after = (allocations(), thread_allocations());

    let threads_after = threads();
    let steady = p.ring.stats();
    let (j, t) = p.previous.take().expect("a last frame");
    check_frame("last download", p.ring.wait(&t).expect("wait"), j);

    assert_eq!(
        after.1 - before.1,
        0,
        "heap allocations on the frame loop's thread in {STEADY_FRAMES} frames"
    );
    assert_eq!(
        after.0 - before.0,
        0,
        "heap allocations of the process in {STEADY_FRAMES} frames"
    );
    match (threads_before, threads_after) {
        (Some(b), Some(a)) => assert_eq!(a, b, "threads started or ended meanwhile"),
        _ => eprintln!("no /proc/self/task here: thread count not checked"),
    }
    assert_eq!(
        steady.allocations, warm.allocations,
        "nothing pinned: {steady:?}"
    );
    assert_eq!(p.ring.capacity(), capacity);
    assert_eq!(steady.uploads - warm.uploads, STEADY_FRAMES);
    assert_eq!(steady.downloads - warm.downloads, 2 * STEADY_FRAMES);
}
