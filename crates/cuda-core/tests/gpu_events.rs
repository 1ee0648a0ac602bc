//! GPU tests of events and of streams waiting on them: `Event::record`,
//! `synchronize`, `query`, `elapsed_ms`, and `Stream::wait`.
//!
//! Every test needs a CUDA GPU and is `#[ignore]`d; run them with
//! `cargo xtask test-gpu` (or `cargo test -p cuda-core --test gpu_events --
//! --ignored`).

mod common;

use common::*;
use cuda_core::{DeviceBuffer, Error, Event, PinnedBuffer, Stream};

/// These tests time copies and watch them run: one at a time, so one test's copies
/// do not queue behind another's on the shared copy engine (that made a 64 MiB upload
/// time at 31 ms once).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}
// ---------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn event_query_is_false_while_copies_run_and_true_after_synchronize() {
    let _one_at_a_time = serial();
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut event = Event::new(&ctx).expect("Event::new");
    assert!(!event.as_raw().is_null());
    assert!(event.context().same_as(&ctx));
    assert!(!event.has_timing());
    // An event never recorded is done.
    assert!(event.query().expect("query"), "an unrecorded event is done");
    event
        .synchronize()
        .expect("synchronize an unrecorded event");
    // Recording on an idle stream: done as soon as the device gets there.
    event.record(&stream).expect("record on an idle stream");
    event.synchronize().expect("synchronize");
    assert!(event.query().expect("query"));

    // Four 64 MiB uploads: milliseconds of work, against microseconds to queue them.
    let len = 64 * MIB;
    let mut host = PinnedBuffer::<u8>::alloc(len).expect("pinned");
    let mut d = DeviceBuffer::<u8>::alloc(len).expect("alloc");
    for round in 0..2 {
        fill(&mut host, seed("event query", round));
        for _ in 0..4 {
            stream.memcpy_htod(&host, &mut d).expect("memcpy_htod");
        }
        event.record(&stream).expect("record");
        assert!(
            !event.query().expect("query"),
            "round {round}: the event reports done while 256 MiB of copies are queued"
        );
        assert!(
            !stream.query().expect("stream query"),
            "round {round}: the stream reports idle while 256 MiB of copies are queued"
        );
        event.synchronize().expect("event synchronize");
        assert!(
            event.query().expect("query"),
            "round {round}: after synchronize"
        );
        assert!(stream.query().expect("stream query"), "round {round}");
        assert_device_holds(&format!("round {round}"), &d, &host);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn event_synchronize_waits_for_the_copies_recorded_before_it() {
    let _one_at_a_time = serial();
    // `Event::synchronize` also tells the buffers that what was queued before the
    // event is done, so their accessors stop waiting: were the wait not real, the
    // reads below would see the garbage the destinations were filled with.
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut event = Event::new(&ctx).expect("Event::new");
    for (i, len) in [1usize, 4 * KIB + 1, 16 * MIB].into_iter().enumerate() {
        let mut src = PinnedBuffer::<u32>::alloc(len).expect("pinned src");
        fill(&mut src, seed("event", i));
        let mut dst = PinnedBuffer::<u32>::alloc(len).expect("pinned dst");
        fill(&mut dst, seed("event-garbage", i));
        let mut d = DeviceBuffer::<u32>::alloc(len).expect("device");
        stream.memcpy_htod(&src, &mut d).expect("memcpy_htod");
        stream.memcpy_dtoh(&d, &mut dst).expect("memcpy_dtoh");
        event.record(&stream).expect("record");
        event.synchronize().expect("event synchronize");
        assert_same(&format!("event-ordered DMA of {len} u32"), &src, &dst);
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn elapsed_ms_of_a_64_mib_copy_is_plausible() {
    let _one_at_a_time = serial();
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let (mut start, mut end) = (
        Event::with_timing(&ctx).expect("with_timing"),
        Event::with_timing(&ctx).expect("with_timing"),
    );
    assert!(start.has_timing() && end.has_timing());
    // Debug names the handle and whether it times work, as a log line needs.
    let shown = format!("{start:?}");
    assert!(
        shown.starts_with("Event {")
            && shown.contains(&format!("raw: {:?}", start.as_raw()))
            && shown.contains("timing: true"),
        "{shown}"
    );
    let len = 64 * MIB;
    let mut host = PinnedBuffer::<u8>::alloc(len).expect("pinned");
    fill(&mut host, seed("elapsed", 0));
    let mut d = DeviceBuffer::<u8>::alloc(len).expect("alloc");
    // Warm up the path once.
    stream.memcpy_htod(&host, &mut d).expect("memcpy_htod");
    stream.synchronize().expect("synchronize");

    start.record(&stream).expect("record start");
    stream.memcpy_htod(&host, &mut d).expect("memcpy_htod");
    end.record(&stream).expect("record end");
    end.synchronize().expect("end synchronize");
    let ms = start.elapsed_ms(&end).expect("elapsed_ms");
    eprintln!(
        "64 MiB upload: {ms:.3} ms ({:.1} GB/s)",
        len as f64 / (ms as f64 * 1e6)
    );
    // 64 MiB over PCIe takes about 1.2 ms at 55 GB/s (Gen5) and 5 ms at 13 GB/s
    // (Gen3): 0.1 ms would be 670 GB/s, 100 ms 0.67 GB/s.
    assert!(ms > 0.1 && ms < 100.0, "64 MiB upload timed at {ms} ms");
    assert_device_holds("timed upload", &d, &host);

    // While the end event is pending the driver answers CUDA_ERROR_NOT_READY.
    start.record(&stream).expect("record start");
    for _ in 0..4 {
        stream.memcpy_htod(&host, &mut d).expect("memcpy_htod");
    }
    end.record(&stream).expect("record end");
    let e = start.elapsed_ms(&end).unwrap_err();
    assert_eq!(
        e.driver_code(),
        Some(cuda_core::sys::CUDA_ERROR_NOT_READY),
        "elapsed_ms with 256 MiB of copies still queued: {e:?}"
    );
    end.synchronize().expect("end synchronize");
    let ms4 = start.elapsed_ms(&end).expect("elapsed_ms");
    assert!(
        ms4 > 2.0 * ms,
        "four uploads ({ms4} ms) took less than twice one ({ms} ms)"
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn elapsed_ms_without_timing_is_invalid_argument() {
    let _one_at_a_time = serial();
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut plain_a = Event::new(&ctx).expect("Event::new");
    let mut plain_b = Event::new(&ctx).expect("Event::new");
    let mut timed = Event::with_timing(&ctx).expect("with_timing");
    for e in [&mut plain_a, &mut plain_b, &mut timed] {
        e.record(&stream).expect("record");
    }
    stream.synchronize().expect("synchronize");
    for (what, r) in [
        ("two events without timing", plain_a.elapsed_ms(&plain_b)),
        ("a plain start", plain_a.elapsed_ms(&timed)),
        ("a plain end", timed.elapsed_ms(&plain_b)),
    ] {
        match r {
            Err(Error::InvalidArgument {
                op: "Event::elapsed_ms",
                reason,
            }) => assert!(reason.contains("with_timing"), "{what}: {reason}"),
            other => panic!("{what}: expected InvalidArgument, got {other:?}"),
        }
    }
    // Two timing events are fine.
    let mut timed2 = Event::with_timing(&ctx).expect("with_timing");
    timed2.record(&stream).expect("record");
    timed2.synchronize().expect("synchronize");
    let ms = timed.elapsed_ms(&timed2).expect("elapsed_ms");
    assert!(ms >= 0.0, "{ms}");
}

// ---------------------------------------------------------------------------
// Stream::wait
// ---------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn stream_wait_orders_a_second_stream_after_an_event() {
    let _one_at_a_time = serial();
    // Stream A uploads 64 MiB into `d` and records an event; stream B waits on the
    // event, then downloads `d`. B must see the new data.
    //
    // Through `d` itself the buffer's tracker would make B's copy wait *on the host*
    // for A's (one buffer follows one stream), and `Stream::wait` would never be
    // exercised. B therefore reads the same memory through an untracked alias, as
    // memory shared with another library would be: only the device-side wait orders
    // the two copies, and without it B's download (on another copy engine) would
    // overlap A's upload and see old bytes.
    let ctx = gpu();
    let a = Stream::new(&ctx).expect("Stream::new");
    let b = Stream::new(&ctx).expect("Stream::new");
    let len = 64 * MIB;
    let mut d = device_with(&pattern::<u8>(len, seed("wait", 0)));
    let mut new = PinnedBuffer::<u8>::alloc(len).expect("pinned");
    let mut back = PinnedBuffer::<u8>::alloc(len).expect("pinned");
    let mut event = Event::new(&ctx).expect("Event::new");
    for round in 1..4 {
        fill(&mut new, seed("wait", round));
        fill(&mut back, seed("wait garbage", round));
        // SAFETY: 1. `d` is device memory of `ctx` holding `len` bytes, and outlives
        // `alias` (dropped at the end of this iteration). 2. The only write to that
        // memory while `alias` lives is A's upload below, and B's read through
        // `alias` is ordered after it on the device by `b.wait(&event)`; the host
        // touches neither until `back` is read, which waits for B.
        let alias = unsafe { DeviceBuffer::<u8>::from_raw_borrowed(&ctx, d.as_device_ptr(), len) }
            .expect("from_raw_borrowed");
        a.memcpy_htod(&new, &mut d).expect("A: memcpy_htod");
        event.record(&a).expect("record on A");
        b.wait(&event).expect("B waits on the event");
        b.memcpy_dtoh(&alias, &mut back).expect("B: memcpy_dtoh");
        assert_same(
            &format!("round {round}: B's download after waiting on A's event"),
            &new,
            &back,
        );
        drop(alias);
    }
    // An event never recorded holds nothing up.
    let never = Event::new(&ctx).expect("Event::new");
    b.wait(&never).expect("wait on an unrecorded event");
    let mut small = PinnedBuffer::<u8>::alloc(4096).expect("pinned");
    b.memcpy_dtoh(&d.slice(..4096).expect("slice"), &mut small)
        .expect("memcpy_dtoh");
    b.synchronize()
        .expect("B is not held up by an unrecorded event");
    assert_same("after waiting on an unrecorded event", &new[..4096], &small);
}
