//! GPU-tier integration tests of `cuda-core`: contexts, streams, drop order and
//! threads. Buffers and registrations are in `gpu_memory.rs`; queued copies,
//! memsets, views and events in `gpu_stream.rs`; what queued work makes wait in
//! `gpu_soundness.rs`; errors recorded by `Drop` in `gpu_deferred.rs`.
//!
//! Every test needs a CUDA GPU and is `#[ignore]`d; run them with
//! `cargo xtask test-gpu` (or `cargo test -p cuda-core --test gpu -- --ignored`).
//! A test that cannot get a device fails loudly (`common::gpu`), never returns early.
//! `unsafe` appears only where a test is about raw-handle interop (`from_raw_borrowed`).
//!
//! Tests run in parallel threads of one process and share device 0's primary
//! context; nothing here leaves a sticky error behind on purpose.

mod common;

use std::any::Any;
use std::thread;

use common::*;
use cuda_core::{Context, DeviceBuffer, Error, Event, HostRegistration, PinnedBuffer, Stream};

// ---------------------------------------------------------------------------
// Context
// ---------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn context_on_device_0_is_current_and_named() {
    let ctx = gpu();
    let count = Context::device_count().expect("device_count");
    assert!(count >= 1, "device_count() = {count} with a context open");
    let name = ctx.name().expect("device name");
    assert!(!name.is_empty(), "empty device name");
    assert!(!name.contains('\0'), "{name:?}");
    eprintln!("device 0: {name}, {count} device(s)");
    assert_eq!(ctx.ordinal(), 0);
    assert!(!ctx.as_raw().is_null());
    let total = ctx.total_memory().expect("total_memory");
    assert!(total >= 1 << 30, "device 0 reports {total} bytes of memory");
    assert!(format!("{ctx:?}").contains("ordinal: 0"), "{ctx:?}");

    let cur = Context::current().expect("Context::new makes the context current");
    assert!(cur.same_as(&ctx));
    assert_eq!(cur, ctx);
    assert_eq!(cur.as_raw(), ctx.as_raw());
    assert_eq!(cur.ordinal(), 0);

    // The primary context: a second `new` names the same driver context.
    let again = Context::new(0).expect("second Context::new(0)");
    assert!(again.same_as(&ctx));
    ctx.synchronize().expect("context synchronize");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn context_clone_keeps_it_alive() {
    let ctx = gpu();
    let clone = ctx.clone();
    assert!(clone.same_as(&ctx));
    drop(ctx);
    // Only the clone is left; on a fresh thread nothing is current: it must still work.
    thread::spawn(move || {
        assert_eq!(Context::current().unwrap_err(), Error::NoContext);
        let mut d = DeviceBuffer::<u32>::alloc_in(&clone, 4099).expect("alloc_in via the clone");
        assert!(d.context().same_as(&clone));
        check_round_trip("through a clone", &mut d, seed("clone", 4099));
        clone.synchronize().expect("synchronize via the clone");
        assert!(!clone.name().expect("name via the clone").is_empty());
    })
    .join()
    .expect("thread panicked");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn driver_is_cuda_12_or_newer() {
    let _ctx = gpu();
    let (major, minor) = Context::driver_version().expect("driver_version");
    eprintln!("driver supports CUDA {major}.{minor}");
    assert!(major >= 12, "driver version {major}.{minor}");
    assert!((0..100).contains(&minor), "driver version {major}.{minor}");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn context_past_the_device_count_is_invalid_device() {
    let ctx = gpu();
    let count = Context::device_count().expect("device_count");
    for ordinal in [count, count + 1, i32::MAX as usize + 1, usize::MAX] {
        let e = Context::new(ordinal).unwrap_err();
        assert_eq!(e, Error::InvalidDevice { ordinal, count });
        assert_eq!(
            e.to_string(),
            format!("CUDA device {ordinal} requested but {count} device(s) found")
        );
    }
    // The failed calls changed nothing on this thread.
    let cur = Context::current().expect("current after failed news");
    assert!(cur.same_as(&ctx));
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn context_from_raw_borrowed_releases_nothing() {
    let ctx = gpu();
    let mut d = DeviceBuffer::<u16>::alloc_in(&ctx, 777).expect("alloc_in");
    for i in 0..3 {
        // SAFETY: 1. `ctx.as_raw()` is device 0's primary context, retained by `ctx`,
        // which outlives the borrowed wrapper (dropped at the end of this iteration).
        let borrowed = unsafe { Context::from_raw_borrowed(ctx.as_raw()) }.expect("wrap");
        assert!(borrowed.same_as(&ctx));
        assert_eq!(borrowed.ordinal(), 0);
        assert_eq!(borrowed.device(), ctx.device());
        drop(borrowed);
        check_round_trip(
            "after dropping a borrowed context",
            &mut d,
            seed("borrowed", i),
        );
    }
    // Wrapping pushes and pops: a thread with no context still has none afterwards.
    let raw = ctx.as_raw() as usize;
    let ctx2 = ctx.clone();
    thread::spawn(move || {
        // SAFETY: 1. `raw` is the primary context retained by `ctx2`, which lives
        // until this closure ends, after `w` is dropped.
        let w = unsafe { Context::from_raw_borrowed(raw as cuda_core::sys::CUcontext) }
            .expect("wrap on another thread");
        assert!(w.same_as(&ctx2));
        drop(w);
        assert_eq!(Context::current().unwrap_err(), Error::NoContext);
    })
    .join()
    .expect("thread panicked");
}

// ---------------------------------------------------------------------------
// Stream and Event
// ---------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn stream_create_and_synchronize() {
    let ctx = gpu();
    let s1 = Stream::new(&ctx).expect("Stream::new");
    let s2 = Stream::new(&ctx).expect("second Stream::new");
    assert!(
        !s1.as_raw().is_null(),
        "a created stream is not the null stream"
    );
    assert_ne!(s1.as_raw(), s2.as_raw());
    assert!(s1.context().same_as(&ctx));
    s1.synchronize().expect("synchronize an empty stream");
    s2.synchronize().expect("synchronize an empty stream");

    // A copy in stream order, waited for: the data is there.
    let src: Vec<u32> = pattern(MIB / 4, seed("stream", 1));
    let mut d = DeviceBuffer::<u32>::alloc(src.len()).expect("alloc");
    s1.memcpy_htod_sync(&src, &mut d).expect("memcpy_htod_sync");
    assert_device_holds("after memcpy_htod_sync", &d, &src);

    // A borrowed wrapper (a stream another library created) queues in that stream's
    // order and destroys nothing on drop: s1 keeps working.
    // SAFETY: 1. `s1.as_raw()` is a live stream of `ctx`; `s1` outlives `b`, and
    // `b`'s only copy is waited for inside `memcpy_htod_sync`.
    let b = unsafe { Stream::from_raw_borrowed(&ctx, s1.as_raw()) };
    assert_eq!(b.as_raw(), s1.as_raw());
    let src2: Vec<u32> = pattern(MIB / 4, seed("stream", 2));
    b.memcpy_htod_sync(&src2, &mut d)
        .expect("memcpy_htod_sync via the borrowed wrapper");
    drop(b);
    assert_device_holds("copied through a borrowed stream", &d, &src2);
    let src3: Vec<u32> = pattern(MIB / 4, seed("stream", 3));
    s1.memcpy_htod_sync(&src3, &mut d)
        .expect("memcpy_htod_sync after the borrowed wrapper dropped");
    assert_device_holds("after dropping a borrowed stream", &d, &src3);

    // The legacy default stream (null) can be wrapped, used and synchronized.
    // SAFETY: 1. null is the legacy default stream, always alive; its copy is waited
    // for inside `memcpy_dtoh_sync`.
    let legacy = unsafe { Stream::from_raw_borrowed(&ctx, std::ptr::null_mut()) };
    let mut back: Vec<u32> = pattern(d.len(), seed("stream", 4));
    legacy
        .memcpy_dtoh_sync(&d, &mut back)
        .expect("memcpy_dtoh_sync on the legacy stream");
    assert_same("read on the legacy stream", &src3, &back);
    legacy.synchronize().expect("synchronize the legacy stream");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn stream_and_event_work_on_a_thread_without_a_current_context() {
    // The crate's promise: what lives in a context can be used from any thread.
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let mut event = Event::new(&ctx).expect("Event::new");
    let mut d = DeviceBuffer::<u64>::alloc(12_345).expect("alloc");
    let mut pinned = PinnedBuffer::<u64>::alloc(d.len()).expect("pinned");
    fill(&mut pinned, seed("no-ctx-thread-stream", 0));
    let mut back = PinnedBuffer::<u64>::alloc(d.len()).expect("pinned");
    let src: Vec<u64> = pattern(d.len(), seed("no-ctx-thread-stream", 1));
    thread::scope(|s| {
        s.spawn(|| {
            assert_eq!(Context::current().unwrap_err(), Error::NoContext);
            stream
                .memcpy_htod(&pinned, &mut d)
                .expect("memcpy_htod, no context current");
            stream
                .memcpy_dtoh(&d, &mut back)
                .expect("memcpy_dtoh, no context current");
            event
                .record(&stream)
                .expect("event record, no context current");
            event
                .synchronize()
                .expect("event synchronize, no context current");
            assert_same("round trip on a thread without a context", &pinned, &back);
            stream
                .memcpy_htod_sync(&src, &mut d)
                .expect("memcpy_htod_sync, no context current");
            stream
                .synchronize()
                .expect("stream synchronize, no context current");
            assert_eq!(Context::current().unwrap_err(), Error::NoContext);
        });
    });
    assert_device_holds("copied from another thread", &d, &src);
    // Drop them on yet another thread with no context.
    thread::spawn(move || {
        drop(event);
        drop(stream);
        drop(d);
        drop((pinned, back));
        assert_eq!(Context::current().unwrap_err(), Error::NoContext);
    })
    .join()
    .expect("dropping on another thread panicked");
}

// ---------------------------------------------------------------------------
// Drop order
// ---------------------------------------------------------------------------

fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for i in 0..=p.len() {
            let mut q = p.clone();
            q.insert(i, n - 1);
            out.push(q);
        }
    }
    out
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn objects_outlive_a_dropped_context_handle_in_every_drop_order() {
    let orders = permutations(4);
    assert_eq!(orders.len(), 24);
    for (round, order) in orders.into_iter().enumerate() {
        let ctx = gpu();
        let stream = Stream::new(&ctx).expect("Stream::new");
        let mut event = Event::new(&ctx).expect("Event::new");
        let len = 10_000 + round;
        let mut d = DeviceBuffer::<u64>::alloc_in(&ctx, len).expect("alloc_in");
        let mut pinned = PinnedBuffer::<u64>::alloc_in(&ctx, len).expect("pinned alloc_in");
        // Drop the Context handle first, and go on on a fresh thread where nothing is
        // current: every object must keep its context alive and enter it by itself.
        drop(ctx);
        let what = format!("round {round}, drop order {order:?}");
        thread::spawn(move || {
            assert_eq!(Context::current().unwrap_err(), Error::NoContext);
            check_round_trip(&what, &mut d, seed("drop-order", round));
            fill(&mut pinned, seed("drop-order-pinned", round));
            stream.memcpy_htod(&pinned, &mut d).expect("memcpy_htod");
            event.record(&stream).expect("record");
            event.synchronize().expect("event synchronize");
            assert_device_holds(&what, &d, &pinned);
            let mut back: Vec<u64> = pattern(len, seed("drop-order-back", round));
            stream
                .memcpy_dtoh_sync(&d, &mut back)
                .expect("memcpy_dtoh_sync");
            assert_same(&what, &pinned, &back);

            // Leave a copy queued, and drop everything in this round's order: the
            // buffers wait for it whether the stream is still there or not.
            stream.memcpy_htod(&pinned, &mut d).expect("memcpy_htod");
            event.record(&stream).expect("record");
            let mut slots: Vec<Option<Box<dyn Any + Send>>> = vec![
                Some(Box::new(d)),
                Some(Box::new(pinned)),
                Some(Box::new(stream)),
                Some(Box::new(event)),
            ];
            for i in order {
                drop(slots[i].take().expect("each object is dropped once"));
            }
            assert_eq!(Context::current().unwrap_err(), Error::NoContext);
        })
        .join()
        .expect("round thread panicked");
    }
    // Everything is gone; a new context works.
    let _ctx = gpu();
    let mut d = DeviceBuffer::<u8>::alloc(4097).expect("alloc after all drops");
    check_round_trip(
        "after every drop order",
        &mut d,
        seed("drop-order-final", 0),
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn host_registration_outlives_a_dropped_context_handle() {
    let ctx = gpu();
    let stream = Stream::new(&ctx).expect("Stream::new");
    let len = 300_001;
    let mut host: Vec<u32> = pattern(len, seed("reg-drop-ctx", len));
    let expected = host.clone();
    let mut d = DeviceBuffer::<u32>::alloc(len).expect("alloc");
    let reg = HostRegistration::new(&ctx, &mut host[..]).expect("register");
    drop(ctx);
    // On a fresh thread nothing is current.
    thread::scope(|s| {
        s.spawn(|| {
            assert_eq!(Context::current().unwrap_err(), Error::NoContext);
            assert_page_locked(
                reg.context(),
                "registered Vec",
                reg.as_ptr().cast(),
                len * 4,
            );
            stream
                .memcpy_htod_sync(&reg, &mut d)
                .expect("memcpy_htod_sync from the registration");
            assert!(reg.context().same_as(stream.context()));
            // `reg` drops here, after the last Context handle, on a thread with nothing
            // current: it must still unregister.
            drop(reg);
            assert_eq!(Context::current().unwrap_err(), Error::NoContext);
        });
    });
    assert_not_page_locked(
        stream.context(),
        "the Vec after its registration dropped",
        host.as_ptr().cast(),
    );
    assert_device_holds("DMA from registered memory", &d, &expected);
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn context_can_be_created_again_after_every_handle_is_dropped() {
    fn cycles(tag: &str) {
        for round in 0..4 {
            let ctx = gpu();
            let stream = Stream::new(&ctx).expect("Stream::new");
            let mut event = Event::new(&ctx).expect("Event::new");
            let cur = Context::current().expect("current");
            let mut d = DeviceBuffer::<f64>::alloc(50_000 + round).expect("alloc");
            check_round_trip(tag, &mut d, seed(tag, round));
            let mut p = PinnedBuffer::<f64>::alloc(d.len()).expect("pinned");
            fill(&mut p, seed(tag, round + 100));
            stream.memcpy_htod(&p, &mut d).expect("memcpy_htod");
            event.record(&stream).expect("record");
            event.synchronize().expect("event synchronize");
            assert_device_holds(tag, &d, &p);
            drop((ctx, stream, event, cur, d, p));
        }
    }
    cycles("recreate on the test thread");
    // And on a thread that has never seen a context.
    thread::spawn(|| cycles("recreate on a fresh thread"))
        .join()
        .expect("recreate thread panicked");
}

// ---------------------------------------------------------------------------
// Threads
// ---------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn device_buffer_moves_to_a_thread_without_a_context() {
    let _ctx = gpu();
    let len = 2 * MIB + 3;
    let mut d = DeviceBuffer::<u8>::alloc(len).expect("alloc on the main thread");
    let first: Vec<u8> = pattern(len, seed("moved", 0));
    d.copy_from_host(&first).expect("copy_from_host");

    let mut d = thread::spawn(move || {
        // No context was ever made current on this thread.
        assert_eq!(Context::current().unwrap_err(), Error::NoContext);
        assert_device_holds("read on the spawned thread", &d, &first);
        check_round_trip("round trip on the spawned thread", &mut d, seed("moved", 1));
        // Operations entered the buffer's context and left again.
        assert_eq!(Context::current().unwrap_err(), Error::NoContext);
        d
    })
    .join()
    .expect("spawned thread panicked");
    check_round_trip("back on the main thread", &mut d, seed("moved", 2));

    // And a buffer dropped (freed) on a thread without a context.
    let mut d = DeviceBuffer::<u8>::alloc(len).expect("alloc");
    check_round_trip("before the move", &mut d, seed("moved", 3));
    thread::spawn(move || {
        d.free().expect("free on a thread without a context");
        assert_eq!(Context::current().unwrap_err(), Error::NoContext);
    })
    .join()
    .expect("spawned thread panicked");
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn shared_device_buffer_is_read_from_several_threads() {
    let _ctx = gpu();
    let len = MIB + 1;
    let mut d = DeviceBuffer::<u16>::alloc(len).expect("alloc");
    let data: Vec<u16> = pattern(len, seed("shared", len));
    d.copy_from_host(&data).expect("copy_from_host");
    let d = &d;
    let data = &data;
    thread::scope(|s| {
        for t in 0..4 {
            s.spawn(move || {
                for _ in 0..3 {
                    assert_device_holds(&format!("reader thread {t}"), d, data);
                }
            });
        }
    });
}

#[test]
#[ignore = "needs a CUDA GPU: run with cargo xtask test-gpu"]
fn fresh_thread_has_no_context_until_one_is_bound() {
    let ctx = gpu();
    let ctx2 = ctx.clone();
    thread::spawn(move || {
        assert_eq!(Context::current().unwrap_err(), Error::NoContext);
        assert_eq!(
            DeviceBuffer::<u32>::alloc(16).unwrap_err(),
            Error::NoContext,
            "DeviceBuffer::alloc without a current context"
        );
        assert_eq!(
            DeviceBuffer::<u32>::zeroed(16).unwrap_err(),
            Error::NoContext
        );
        assert_eq!(
            PinnedBuffer::<u32>::alloc(16).unwrap_err(),
            Error::NoContext
        );

        // The explicit-context constructors need nothing current.
        let mut d = DeviceBuffer::<u32>::alloc_in(&ctx2, 4096).expect("alloc_in");
        check_round_trip("alloc_in with nothing current", &mut d, seed("fresh", 0));
        let p = PinnedBuffer::<u32>::alloc_in(&ctx2, 4096).expect("pinned alloc_in");
        assert_all_zero("pinned alloc_in with nothing current", &p);
        assert_eq!(Context::current().unwrap_err(), Error::NoContext);

        ctx2.bind_to_thread().expect("bind_to_thread");
        let cur = Context::current().expect("current after bind_to_thread");
        assert!(cur.same_as(&ctx2));
        let mut d = DeviceBuffer::<u32>::alloc(5000).expect("alloc after bind_to_thread");
        assert!(d.context().same_as(&ctx2));
        check_round_trip("alloc after bind_to_thread", &mut d, seed("fresh", 1));
        let mut z = DeviceBuffer::<u32>::zeroed(5000).expect("zeroed after bind_to_thread");
        let mut back: Vec<u32> = pattern(5000, seed("fresh", 2));
        z.copy_to_host(&mut back).expect("copy_to_host");
        assert_all_zero("zeroed after bind_to_thread", &back);
        check_round_trip("zeroed buffer reused", &mut z, seed("fresh", 3));
    })
    .join()
    .expect("spawned thread panicked");
    // Binding on another thread changed nothing here.
    assert!(Context::current().expect("current").same_as(&ctx));
}
