//! GPU tests of the default routing after a gap: an upload that follows its buffer's
//! previous transfer by 200 µs or more, and that the calling thread would copy
//! alone, goes to the driver's pageable path; downloads after a gap stay staged up to 512 KiB and go to the driver above, at any
//! size; a frame's later transfers (right after its first) count as paced too;
//! `StagingConfig::driver_after_gap` off turns the rule off. Every route
//! keeps the data and the stream order (semantics 1 and 2).
//!
//! No route asserted here depends on timing: a 2 ms sleep is a gap however late the
//! thread runs, and transfers right after each other are paced whether or not a
//! preemption splits them. Back to back (a tight loop, under 200 µs apart) is read
//! from the clock, so there only the bytes and the counts are asserted, and the
//! staged route is forced by turning the rule off.
//!
//! Its own test binary, run one test at a time (`SERIAL`), so that no other test's
//! transfers interleave with these buffers' bursts. The uploads stay under 512 KiB
//! and downloads wake no helper outside a tight loop, so no test depends on whether
//! a helper would have been free.
//!
//! Every test is `#[ignore]`d; run them with `cargo xtask test-gpu` (or `cargo test
//! -p cuda-staging --test after_gap -- --ignored` on a GPU machine).

mod common;

use cuda_staging::StagingConfig;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use common::*;
use cuda_staging::{DeviceBuffer, PitchedBuffer, StagingBuffer, StagingStats, Stream};

/// The seed shape 112x112x3 f32 (150528 B), in bytes.
const FRAME: usize = 150_528;
/// Longer than the 200 µs that separates a gap from a burst.
const GAP: Duration = Duration::from_millis(2);

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// `(staged, direct)` transfers counted since `before`.
fn routed(staging: &StagingBuffer, before: StagingStats) -> (u64, u64) {
    let now = staging.stats();
    (
        now.staged_transfers - before.staged_transfers,
        now.direct_transfers - before.direct_transfers,
    )
}

/// Runs `tight_loop` (transfers with nothing between them) after a gap and returns
/// its `(staged, direct)` counts. Whether transfers come back to back is read from
/// the clock (under 200 µs apart), and a thread preempted for longer between two of
/// them splits the loop, so which route each took is not asserted here: the routing
/// table (`routing.rs`) and the burst rule (`burst.rs`) pin it without a clock. What
/// timing cannot change is asserted instead: every transfer is counted once, its
/// bytes land, and with the rule off every one is staged.
fn tight_loop(staging: &mut StagingBuffer, mut run: impl FnMut(&mut StagingBuffer)) -> (u64, u64) {
    let before = staging.stats();
    std::thread::sleep(GAP);
    run(staging);
    routed(staging, before)
}

/// Sleeps past a gap, then uploads `src` into `dev` and checks it landed; returns the
/// `(staged, direct)` counts of that one upload.
fn upload_after_gap(
    staging: &mut StagingBuffer,
    dev: &mut DeviceBuffer<u8>,
    src: &[u8],
    stream: &Stream,
    seed: u64,
) -> (u64, u64) {
    let before = staging.stats();
    std::thread::sleep(GAP);
    staging
        .upload(dev, src, stream)
        .expect("upload after a gap");
    let r = routed(staging, before);
    check("upload after a gap", &device_contents(dev), seed);
    r
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn an_upload_after_a_gap_goes_to_the_driver_and_a_tight_loop_lands_either_way() {
    let _serial = serial();
    let (_ctx, stream) = gpu();
    let mut staging = StagingBuffer::new();
    assert!(staging.config().driver_after_gap, "on by default");
    let mut dev = DeviceBuffer::<u8>::alloc(FRAME).expect("alloc");

    // The buffer's first transfer follows nothing: staged, and it pins.
    let s = seed();
    staging
        .upload(&mut dev, &pattern::<u8>(FRAME, s), &stream)
        .expect("first upload");
    assert_eq!(routed(&staging, StagingStats::default()), (1, 0));
    assert_eq!(staging.stats().allocations, 1);
    check("first upload", &device_contents(&dev), s);

    // After a gap: the driver's path, and nothing pinned or grown.
    for _ in 0..3 {
        let s = seed();
        let src = pattern::<u8>(FRAME, s);
        assert_eq!(
            upload_after_gap(&mut staging, &mut dev, &src, &stream, s),
            (0, 1)
        );
    }
    assert_eq!(staging.stats().allocations, 1);

    // A tight loop: the first follows the gap (the driver's path); which route the
    // rest take depends on the clock (see `tight_loop`), so only what timing cannot
    // change is asserted. Sources are made beforehand so nothing but the loop runs
    // between the uploads.
    let seeds: Vec<u64> = (0..10).map(|_| seed()).collect();
    let srcs: Vec<Vec<u8>> = seeds.iter().map(|&s| pattern::<u8>(FRAME, s)).collect();
    let mut run = |staging: &mut StagingBuffer| {
        for src in &srcs {
            staging
                .upload(&mut dev, src, &stream)
                .expect("tight-loop upload");
        }
        check("last tight-loop upload", &device_contents(&dev), seeds[9]);
    };
    let (staged, direct) = tight_loop(&mut staging, &mut run);
    assert_eq!(staged + direct, 10, "every upload counted once");
    assert!(direct >= 1, "the first follows the gap: the driver's path");
    let st = staging.stats();
    assert_eq!(st.bytes_uploaded, 14 * FRAME as u64);
    assert_eq!(st.allocations, 1);
    // With the rule off, the same loop is staged throughout.
    staging
        .set_config(StagingConfig {
            driver_after_gap: false,
            ..staging.config()
        })
        .expect("set_config");
    assert_eq!(tight_loop(&mut staging, &mut run), (10, 0));
    assert_eq!(staging.stats().allocations, 1);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn downloads_in_one_piece_after_a_gap_stay_staged_and_larger_ones_go_to_the_driver() {
    let _serial = serial();
    let (_ctx, stream) = gpu();
    let mut staging = StagingBuffer::new();
    // Outside a tight loop no download wakes a helper, at any size: the caller
    // would copy alone, so from 512 KiB the driver copies.
    for (bytes, route) in [
        (64 << 10, (1, 0)),
        (FRAME, (1, 0)),
        (512 << 10, (1, 0)),
        ((512 << 10) + 4096, (0, 1)),
        (1 << 20, (0, 1)),
        (4_915_200, (0, 1)),
    ] {
        let s = seed();
        let dev = device_with::<u8>(bytes, s);
        let mut host = vec![0u8; bytes];
        staging
            .download(&mut host, &dev, &stream)
            .expect("first download");
        for _ in 0..2 {
            host.fill(0);
            let before = staging.stats();
            std::thread::sleep(GAP);
            staging
                .download(&mut host, &dev, &stream)
                .expect("download after a gap");
            assert_eq!(routed(&staging, before), route, "{bytes} B");
            check(&format!("download of {bytes} B after a gap"), &host, s);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_frames_later_transfers_are_paced_too_and_a_tight_loop_lands_either_way() {
    let _serial = serial();
    let (_ctx, stream) = gpu();
    let mut staging = StagingBuffer::new();
    const BIG: usize = 1 << 20;
    let mut up = DeviceBuffer::<u8>::alloc(FRAME).expect("alloc");
    let s_down = seed();
    let down = device_with::<u8>(BIG, s_down);
    let mut host = vec![0u8; BIG];
    // The buffer's first transfer pins; then frames of one upload and one download
    // right after it (within the 200 µs of a burst): the download is paced, not
    // after a gap, and goes to the driver all the same.
    staging
        .download(&mut host, &down, &stream)
        .expect("first download");
    for frame in 0..3 {
        let s = seed();
        let src = pattern::<u8>(FRAME, s);
        std::thread::sleep(GAP);
        let before = staging.stats();
        staging.upload(&mut up, &src, &stream).expect("upload");
        host.fill(0);
        staging
            .download(&mut host, &down, &stream)
            .expect("download right after");
        assert_eq!(routed(&staging, before), (0, 2), "frame {frame}");
        check(&format!("frame {frame}: upload"), &device_contents(&up), s);
        check(&format!("frame {frame}: download"), &host, s_down);
    }
    // A tight loop of downloads, nothing else between them: the first follows the
    // gap (the driver); the rest as the clock says (see `tight_loop`).
    let mut hosts: Vec<Vec<u8>> = (0..8).map(|_| vec![0u8; BIG]).collect();
    let mut run = |staging: &mut StagingBuffer| {
        for h in &mut hosts {
            h.fill(0);
            staging
                .download(h, &down, &stream)
                .expect("tight-loop download");
        }
        for (k, h) in hosts.iter().enumerate() {
            check(&format!("tight-loop download {k}"), h, s_down);
        }
    };
    let (staged, direct) = tight_loop(&mut staging, &mut run);
    assert_eq!(staged + direct, 8, "every download counted once");
    assert!(direct >= 1, "the first follows the gap: the driver's path");
    // With the rule off, the same loop is staged throughout.
    staging
        .set_config(StagingConfig {
            driver_after_gap: false,
            ..staging.config()
        })
        .expect("set_config");
    assert_eq!(tight_loop(&mut staging, &mut run), (8, 0));
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn paced_2d_transfers_the_caller_would_copy_alone_go_to_the_driver_and_keep_the_padding() {
    let _serial = serial();
    let (_ctx, stream) = gpu();
    let mut staging = StagingBuffer::new();
    // 64 rows of a 1920-pixel RGB frame from a decoder whose lines are 5824 B: padded
    // host rows, copied row by row on the calling thread when staged. 368640 B of
    // rows each way, so the download is in one piece and stays staged; a 1080-row
    // frame (6220800 B) goes to the driver both ways.
    for (height, download_route) in [(64usize, (1, 0)), (1080, (0, 1))] {
        let (width, pitch) = (1920 * 3, 5824);
        let s = seed();
        let frame = pattern::<u8>(pitch * height, s);
        let mut surface = PitchedBuffer::<u8>::alloc(width, height).expect("alloc");
        // The buffer's first transfer of this size pins; the rest follow gaps.
        staging
            .upload_2d(&mut surface, &frame, pitch, &stream)
            .expect("first upload_2d");
        for round in 0..2 {
            let before = staging.stats();
            std::thread::sleep(GAP);
            staging
                .upload_2d(&mut surface, &frame, pitch, &stream)
                .expect("upload_2d after a gap");
            assert_eq!(
                routed(&staging, before),
                (0, 1),
                "{height} rows, round {round}: upload"
            );
            // Back through the driver's own 2-D copy into a host buffer whose padding
            // holds a sentinel that must survive.
            let mut back = vec![0xA5u8; pitch * height];
            let before = staging.stats();
            std::thread::sleep(GAP);
            staging
                .download_2d(&mut back, pitch, &surface, &stream)
                .expect("download_2d after a gap");
            assert_eq!(
                routed(&staging, before),
                download_route,
                "{height} rows, round {round}: download"
            );
            for r in 0..height {
                let row = &back[r * pitch..r * pitch + width];
                check_at(&format_args!("{height} rows: row {r}"), row, r * pitch, s);
                if r + 1 < height {
                    assert!(
                        back[r * pitch + width..(r + 1) * pitch]
                            .iter()
                            .all(|&b| b == 0xA5),
                        "{height} rows: the padding after row {r} was written"
                    );
                }
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn the_rule_is_off_when_switched_off() {
    let _serial = serial();
    let (_ctx, stream) = gpu();
    let mut dev = DeviceBuffer::<u8>::alloc(FRAME).expect("alloc");
    let mut off = StagingBuffer::new();
    off.set_config(StagingConfig {
        driver_after_gap: false,
        ..off.config()
    })
    .expect("set_config");
    assert!(!off.config().driver_after_gap);
    let s = seed();
    let src = pattern::<u8>(FRAME, s);
    off.upload(&mut dev, &src, &stream).expect("first upload");
    for _ in 0..2 {
        let s = seed();
        let src = pattern::<u8>(FRAME, s);
        assert_eq!(
            upload_after_gap(&mut off, &mut dev, &src, &stream, s),
            (1, 0)
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn an_upload_handed_to_the_driver_after_a_gap_lands_after_queued_work() {
    let _serial = serial();
    let (_ctx, stream) = gpu();
    let mut busy = Busy::new();
    let mut staging = StagingBuffer::new();
    let mut dev = DeviceBuffer::<u8>::alloc(FRAME).expect("alloc");
    staging
        .upload(&mut dev, &pattern::<u8>(FRAME, seed()), &stream)
        .expect("first upload");
    for round in 0..3 {
        let s = seed();
        let src = pattern::<u8>(FRAME, s);
        std::thread::sleep(GAP);
        let before = staging.stats();
        // Work queued ahead of the upload: about 1 ms of copies, then a memset of the
        // destination. The upload must land after the memset and return only once
        // both are done.
        busy.queue_one_way(&stream);
        stream.memset_bytes(&mut dev, 0x11).expect("memset_bytes");
        staging.upload(&mut dev, &src, &stream).expect("upload");
        assert!(
            stream.query().expect("Stream::query"),
            "round {round}: the upload returned while work on its stream still ran"
        );
        assert_eq!(routed(&staging, before), (0, 1), "round {round}");
        check(&format!("round {round}"), &device_contents(&dev), s);
    }
}
