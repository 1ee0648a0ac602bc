//! Frame loops of 10,000 frames, and eight threads each with a ring of its own.

use super::*;

/// Elements of one frame: 112x112x3 f32, 150528 bytes.
const FRAME_N: usize = 150_528 / 4;

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn a_frame_loop_of_10_000_frames_checks_every_output() {
    const FRAMES: u64 = 10_000;
    let (_ctx, stream) = gpu();
    let mut input = DeviceBuffer::<f32>::alloc(FRAME_N).unwrap();
    let mut output = DeviceBuffer::<f32>::alloc(FRAME_N).unwrap();
    // As the crate's example: one ring up, one ring down.
    let (mut up, mut down) = (StagingRing::new(), StagingRing::new());
    let base = seed() << 20;
    let started = Instant::now();
    let mut previous: Option<(u64, Ticket<f32>)> = None;
    for k in 0..FRAMES {
        let s = base + k;
        // Preprocess frame k straight into pinned memory.
        up.upload_with(&mut input, FRAME_N, &stream, |px| fill_pattern(px, s))
            .unwrap();
        // The device step: the "model" copies its input to its output.
        stream.memcpy_dtod(&input, &mut output).unwrap();
        let ticket = down.download(&output, FRAME_N, &stream).unwrap();
        // Meanwhile, post-process frame k - 1.
        if let Some((j, t)) = previous.replace((k, ticket)) {
            check(&format_args!("frame {j}"), down.wait(&t).unwrap(), base + j);
        }
    }
    let (j, t) = previous.expect("a last frame");
    check(&format_args!("frame {j}"), down.wait(&t).unwrap(), base + j);
    let elapsed = started.elapsed();

    let (u, d) = (up.stats(), down.stats());
    let bytes = FRAMES * 150_528;
    assert_eq!(
        (u.uploads, u.downloads, u.bytes_uploaded),
        (FRAMES, 0, bytes)
    );
    assert_eq!(
        (d.downloads, d.uploads, d.bytes_downloaded),
        (FRAMES, 0, bytes)
    );
    assert_eq!(u.allocations, 3, "one per slot, then reused: {u:?}");
    assert_eq!(d.allocations, 3, "one per slot, then reused: {d:?}");
    println!(
        "{FRAMES} frames in {elapsed:?} ({:.1} us a frame); slot waits: up {}, down {}",
        elapsed.as_secs_f64() * 1e6 / FRAMES as f64,
        u.slot_waits,
        d.slot_waits
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn eight_threads_each_with_its_own_ring_and_stream() {
    const THREADS: usize = 8;
    const FRAMES: u64 = 500;
    let (ctx, _stream) = gpu();
    let stats: Vec<RingStats> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|thread| {
                let ctx = &ctx;
                scope.spawn(move || {
                    ctx.bind_to_thread().expect("bind the context");
                    let stream = Stream::new(ctx).expect("Stream::new");
                    let mut input = DeviceBuffer::<f32>::alloc(FRAME_N).unwrap();
                    let mut output = DeviceBuffer::<f32>::alloc(FRAME_N).unwrap();
                    // One ring for both directions: two transfers a frame, and the
                    // previous frame's ticket is redeemed within three.
                    let mut ring = StagingRing::new();
                    let base = seed() << 20;
                    let mut previous: Option<(u64, Ticket<f32>)> = None;
                    for k in 0..FRAMES {
                        let s = base + k;
                        ring.upload_with(&mut input, FRAME_N, &stream, |px| fill_pattern(px, s))
                            .unwrap();
                        stream.memcpy_dtod(&input, &mut output).unwrap();
                        let ticket = ring.download(&output, FRAME_N, &stream).unwrap();
                        if let Some((j, t)) = previous.replace((k, ticket)) {
                            check(
                                &format_args!("thread {thread} frame {j}"),
                                ring.wait(&t).unwrap(),
                                base + j,
                            );
                        }
                    }
                    let (j, t) = previous.expect("a last frame");
                    check(
                        &format_args!("thread {thread} frame {j}"),
                        ring.wait(&t).unwrap(),
                        base + j,
                    );
                    ring.stats()
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a worker thread panicked"))
            .collect()
    });
    for (thread, s) in stats.iter().enumerate() {
        assert_eq!(
            (s.uploads, s.downloads),
            (FRAMES, FRAMES),
            "thread {thread}: {s:?}"
        );
        assert_eq!(s.bytes_uploaded, FRAMES * 150_528, "thread {thread}");
        assert_eq!(s.bytes_downloaded, FRAMES * 150_528, "thread {thread}");
        assert_eq!(s.allocations, 3, "thread {thread}: one per slot: {s:?}");
    }
}
